// A fresh start with experts in a home apart from the arenas (the SSD tier; the host tier beside a device) never
// holds every expert's state at once: the arenas' pages are never touched for them, and each expert is initialised
// in its range, stored and handed back in turn; checkpoints stream out of the home and loads into it an expert at a
// time. A resident model loads in place, an export of a checkpoint builds no model, and a chat with a model folder
// or its export again builds one without a trainer, whose experts stream from the files into an SSD-tier file. Measured as the peak
// resident memory of a child process: the experts' state here is about 800 MB, the host cache 4 experts (50 MB). Each test forks before any thread of this process exists (they
// are the only tests in this binary), so the child starts clean.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "backend/registry.h"
#include "core/fsutil.h"
#include "model/config.h"
#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/checkpoint_export.h"
#include "train/hf_interchange.h"
#include "train/trainer.h"

namespace {

constexpr int kExperts = 64;  // 2 layers of 32
constexpr double kExpertStateMB = kExperts * 3.0 * 256 * 1024 * 16 / 1e6;  // weights, gradient, 2 moments: 805 MB

std::string config(const std::string& offload) {
  return R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 256, "n_heads": 4, "n_kv_heads": 4,
    "n_layers": 2, "n_experts": [32, 32], "max_seq_len": 16, "d_ff": 1024, "expert_d_ff": 1024, "top_k": 2},
    "train": {"batch_size": 1, "seq_len": 16, "steps": 1, "threads": 2, "seed": 3}, "offload": )" +
         offload + "}";
}

// The peak resident memory in MB of a child that runs `work` and exits; -1 when it failed.
double peak_mb(const std::function<void()>& work) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    try {
      work();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return usage.ru_maxrss / 1e3;  // KiB on Linux
}

// ... of a child that builds the trainer, then runs `then` on it.
double peak_mb_building(const std::string& offload, bool device_apart,
                        const std::function<void(moe::Trainer&)>& then = {}) {
  return peak_mb([&] {
    moe::BackendOptions o;
    o.threads = 2;
    o.device_memory_apart = device_apart;
    auto be = moe::make_backend("cpu", o);
    moe::Trainer t(moe::parse_config_text(config(offload), "test"), *be);
    if (then) then(t);
  });
}

std::string ssd_offload() {
  return R"({"mode": "ssd", "expert_slots": 2, "cache_experts": 4, "ssd_dir": ")" + moe_test::tmp_dir() + "\"}";
}

// The cache (50 MB), two slots (13 MB), the non-expert state and the rest of the process: about 100 MB.
void check_bounded(double mb, const char* what) {
  std::printf("  %s: peak %.0f MB for %.0f MB of expert state\n", what, mb, kExpertStateMB);
  CHECK(mb > 0);
  CHECK_MSG(mb < kExpertStateMB / 6, std::string(what) + ": peak " + std::to_string(mb) + " MB");
}

}  // namespace

// ... nor does a checkpoint of it: the experts stream from their home into the files an expert at a time.
TEST(ssd_tier_start_up_and_checkpoint_hold_the_cache_not_every_expert) {
  const std::string checkpoint = moe_test::tmp_path("startup-checkpoint");
  check_bounded(peak_mb_building(ssd_offload(), false, [&](moe::Trainer& t) { t.save_checkpoint(checkpoint); }),
                "SSD tier, start-up and a checkpoint");
}

// ... nor does a resume, an export to a Hugging Face folder, or a start from it: the files are read and written an
// expert at a time out of and into the home, and the pages of the files read are handed back. Nor does exporting
// the checkpoint with no model built.
TEST(ssd_tier_loads_and_exports_hold_the_cache_not_every_expert) {
  const std::string checkpoint = moe_test::tmp_path("startup-checkpoint"), hf = moe_test::tmp_path("startup-hf");
  CHECK(moe::fs::exists(moe::fs::join(checkpoint, "optimizer.safetensors")));
  check_bounded(peak_mb_building(ssd_offload(), false, [&](moe::Trainer& t) { t.resume_from(checkpoint); }),
                "SSD tier, a resume");
  check_bounded(peak_mb_building(ssd_offload(), false,
                                 [&](moe::Trainer& t) {
                                   moe::export_hf(hf, t.model(), "mixtral", moe::st::DType::BF16, nullptr,
                                                  t.expert_home());
                                 }),
                "SSD tier, an export to a Hugging Face folder");
  check_bounded(peak_mb_building(ssd_offload(), false, [&](moe::Trainer& t) { t.init_from(hf); }),
                "SSD tier, a start from a Hugging Face folder");
  // A resident model loads in place: its weights once (about 200 MB), never beside a copy of them.
  const double resident =
      peak_mb_building(R"({"mode": "none"})", false, [&](moe::Trainer& t) { t.init_from(checkpoint); });
  std::printf("  resident, a start from the checkpoint: peak %.0f MB for %.0f MB of weights\n", resident,
              kExpertStateMB / 4);
  CHECK_MSG(resident > 0 && resident < kExpertStateMB / 4 * 1.5,
            "resident load: peak " + std::to_string(resident) + " MB");
  // Our checkpoint exported without an engine: a tensor at a time from its file.
  check_bounded(peak_mb([&] {
                  moe::export_checkpoint(checkpoint, hf + "-2", "mixtral", moe::st::DType::BF16, nullptr, false);
                }),
                "no model, an export straight from the checkpoint");
  // The Hugging Face folder exported again (to bf16 with fused experts, written an expert's slab at a time), its
  // experts through an SSD-tier file beside it.
  check_bounded(peak_mb([&] {
                  moe_export_options o{};
                  o.struct_size = sizeof o;
                  o.dtype = MOE_EXPORT_BF16;
                  o.expert_layout = MOE_EXPERTS_FUSED;
                  char err[512] = {0};
                  moe::check(moe_export_checkpoint(hf.c_str(), (hf + "-3").c_str(), "mixtral", &o, err, sizeof err) ==
                                 MOE_OK,
                             err);
                }),
                "no engine, the Hugging Face folder exported again");
  moe::fs::remove_all(hf + "-3");
  // A chat with the Hugging Face folder with no engine, its experts streamed from the files into the SSD tier.
  check_bounded(peak_mb([&] {
                  moe_generate_options o{};
                  o.struct_size = sizeof o;
                  o.expert_home = MOE_EXPERTS_SSD;
                  char err[512] = {0};
                  moe_generation* g = moe_generation_open(hf.c_str(), R"({"train": {"threads": 2}})", &o, err, sizeof err);
                  moe::check(g != nullptr, err);
                  const int32_t prompt[] = {1, 2, 3};
                  moe_generated_token t{};
                  t.struct_size = sizeof t;
                  moe::check(moe_generation_feed(g, prompt, 3) == MOE_OK && moe_generation_step(g, &t) == MOE_OK,
                             moe_generation_last_error(g));
                  moe_generation_destroy(g);
                }),
                "no engine, a chat with the Hugging Face folder's experts in the SSD tier");
  moe::fs::remove_all(hf + "-2");
  moe::fs::remove_all(checkpoint);
  moe::fs::remove_all(hf);
}

// Beside a device the host tier is page-locked memory holding every expert's state; the arenas (device memory
// there) add nothing for the experts.
TEST(host_tier_beside_a_device_holds_the_experts_once) {
  const double mb = peak_mb_building(R"({"mode": "host", "expert_slots": 2})", true);
  std::printf("  host tier beside a device: peak %.0f MB for %.0f MB of expert state\n", mb, kExpertStateMB);
  CHECK(mb > 0);
  CHECK_MSG(mb < kExpertStateMB * 1.25, "peak " + std::to_string(mb) + " MB");
}

TEST_MAIN()
