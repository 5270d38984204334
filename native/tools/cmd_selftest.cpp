// moe-engine-dev selftest: checks this machine's build end to end — the whole model's gradients against
// finite differences for every family, dropless and capacity routing, on the chosen backend (default "cpu"). A
// pass on another backend is recorded for this machine (backend/validation.h), which lets runs train on it.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "backend/registry.h"
#include "backend/validation.h"
#include "commands.h"
#include "model/features.h"
#include "model/gradcheck.h"

namespace {

moe::ModelConfig tiny(const moe::ModelFamily& family, int top_k, double capacity_factor) {
  moe::ModelConfig m;
  m.family = family.name;
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = family.features.attention == moe::AttentionKind::GroupedQuery ? 2 : 4;
  m.qkv_bias = family.features.qkv_bias;
  m.tie_embeddings = family.features.tie_embeddings;
  m.max_seq_len = 8;
  m.d_ff = m.expert_d_ff = 24;
  m.n_experts = {4, 4};
  m.top_k = top_k;
  m.capacity_factor = capacity_factor;
  m.z_loss_coef = 0.01;
  m.init_std = 0.2;
  return m;
}

// Every family, top-1 and top-2, dropless and with capacity, on be (its lines start with prefix): counts into
// passed and failed.
void gradchecks(moe::Backend& be, const std::string& prefix, int& passed, int& failed) {
  // Float32 central differences with h = 1e-2 carry ~1e-3 relative noise; 5e-2 flags any real error.
  const double tolerance = 5e-2;
  for (const moe::ModelFamily& family : moe::model_families())
    for (int k : {1, 2})
      for (double cf : {0.0, 1.0}) {
        // A clamped SwiGLU is not differentiable at its limits: skip coordinates whose differences at h and
        // h/2 disagree (which also drops small gradients dominated by curvature at h = 1e-2).
        const bool kinks = family.features.activation == moe::FfnActivation::SwigluClamped;
        auto report = moe::model_gradcheck(tiny(family, k, cf), be, 2, 8, 6, 1e-2f, 7, kinks);
        double worst = 0;
        std::string worst_name;
        for (const auto& t : report)
          if (t.worst_rel_err > worst) worst = t.worst_rel_err, worst_name = t.name;
        const bool ok = worst <= tolerance;
        (ok ? passed : failed)++;
        std::printf("%s %s%s top-%d %s: worst gradient error %.2e (%s)\n", ok ? "ok  " : "FAIL", prefix.c_str(),
                    family.name, k, cf > 0 ? "capacity 1.0" : "dropless", worst, worst_name.c_str());
      }
}

}  // namespace

// The cuda backend is checked on each GEMM library it may train with: ours, and cuBLAS where it opens
// (--gemm own|cublas|auto: auto, the default, checks both or says why cuBLAS was not).
int cmd_selftest(int argc, char** argv) {
  cli::Args args(argc, argv, {"--backend", "--threads", "--gemm"}, {});
  const std::string name = args.get("--backend", "cpu"), gemm = args.get("--gemm", "auto");
  std::vector<std::pair<std::string, std::unique_ptr<moe::Backend>>> backends;
  try {
    moe::check_gemm_choice("--gemm", gemm);
    moe::check(gemm != "cublas" || name == "cuda", "--gemm cublas needs --backend cuda");
    moe::BackendOptions o;
    o.threads = std::stoi(args.get("--threads", "2"));
    for (const std::string lib : {"own", "cublas"}) {
      if (name != "cuda" && lib == "cublas") continue;
      if (gemm != "auto" && gemm != lib) continue;
      o.gemm = lib;
      try {
        backends.emplace_back(name == "cuda" ? lib : "", moe::make_backend(name, o));
      } catch (const moe::EngineError& e) {
        if (gemm != "auto" || lib == "own") throw;
        std::printf("cuBLAS not checked: %s\n", e.what());
      }
    }
  } catch (const moe::EngineError& e) {
    std::fprintf(stderr, "selftest: %s\n", e.what());
    return 2;
  }
  int failed = 0, passed = 0;
  for (auto& [lib, be] : backends) gradchecks(*be, lib.empty() ? "" : "[gemm " + lib + "] ", passed, failed);
  std::printf("%d passed, %d failed\n", passed, failed);
  if (failed > 0) return 1;
  // A pass is what lets the engine train on a backend other than "cpu" (backend/validation.h); the record's
  // versions say which GEMM libraries were checked.
  moe::Backend* be = backends.front().second.get();
  if (be->name() != "cpu") {
    const std::string path = moe::validation_file();
    std::string versions = be->versions() + "; gemm checked:", sep = " ";
    for (const auto& checked : backends) versions += sep + checked.first, sep = " + ";
    moe::record_validation(path, moe::validation_now(be->name(), be->device(), versions));
    std::printf("recorded: %s validated on %s (%s) in %s\n", be->name().c_str(), be->device().c_str(),
                be->versions().c_str(), path.c_str());
  }
  return 0;
}
