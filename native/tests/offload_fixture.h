// Shared by the offload tests: a small MoE config with an optional "offload" section, skewed token batches,
// and 20-step runs whose losses, gradient norms, weights and AdamW moments are compared bit for bit.
#pragma once
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"
#include "model/config.h"
#include "train/trainer.h"

namespace offload_test {


struct Variant {
  std::string arch = "mixtral";
  bool capacity = false;
  double grad_clip = 0;
  int grad_accum = 2;
  std::string offload;  // the "offload" section, empty: resident
  std::string layers = R"("n_layers": 2, "n_experts": [8, 8])";
  int threads = 1;
  std::string sections;  // more top-level sections ("placement", "pipeline", "routing_skew"), each after a comma
  std::string init;      // a checkpoint the run starts from (Trainer::init_from), empty: the seed's weights
  // A CPU backend whose device memory counts as apart from host memory, as a GPU's does: the host tier then keeps
  // the experts in a store of its own (pinned_store.h) rather than in the arenas.
  bool device_apart = false;
  std::string dtype = "fp32";  // train.compute_dtype
};

inline std::unique_ptr<moe::Backend> backend_for(const Variant& v) {
  moe::BackendOptions o;
  o.threads = v.threads;
  o.device_memory_apart = v.device_apart;
  return moe::make_backend("cpu", o);
}

inline std::string config(const Variant& v) {
  std::string c = R"({"model": {"arch": ")" + v.arch +
                  R"(", "vocab_size": 64, "d_model": 32, "n_heads": 2, "n_kv_heads": )" +
                  (v.arch == "mixtral" ? "1" : "2") + ", " + v.layers +
                  R"(, "max_seq_len": 16, "d_ff": 48, "expert_d_ff": 24, "top_k": 2,
      "z_loss_coef": 0.001, "capacity_factor": )" +
                  (v.capacity ? "1.0" : "null") + R"(},
    "train": {"batch_size": 2, "seq_len": 16, "steps": 100, "lr": 1e-2, "warmup_steps": 2, "threads": )" +
                  std::to_string(v.threads) + R"(, "seed": 11, "grad_accum": )" +
                  std::to_string(v.grad_accum) + R"(, "grad_clip": )" + std::to_string(v.grad_clip) +
                  R"(, "compute_dtype": ")" + v.dtype + "\"}";
  if (!v.offload.empty()) c += R"(, "offload": )" + v.offload;
  return c + v.sections + "}";
}

// extra: more fields, each starting with a comma.
inline std::string host_offload(double pin_fraction, int lookahead, int slots = 4, const std::string& extra = "") {
  return R"({"mode": "host", "expert_slots": )" + std::to_string(slots) + R"(, "lookahead": )" +
         std::to_string(lookahead) + R"(, "pin_fraction": )" + std::to_string(pin_fraction) + extra + "}";
}

// The SSD tier with a host cache of `cache` experts (of 16) and the given extra fields.
inline std::string ssd_offload(double pin_fraction, int lookahead, const std::string& extra = "", int cache = 5) {
  return R"({"mode": "ssd", "expert_slots": 4, "cache_experts": )" + std::to_string(cache) +
         R"(, "lookahead": )" + std::to_string(lookahead) + R"(, "pin_fraction": )" + std::to_string(pin_fraction) +
         extra + "}";
}

// Skewed tokens, so the router has hot experts to pin.
inline void feed(moe::Trainer& t, int micro_batches, int first = 0) {
  std::vector<int32_t> in(32), tg(32);
  for (int m = first; m < first + micro_batches; ++m) {
    for (int i = 0; i < 32; ++i) {
      const float u = moe::random_uniform(5, m, i);
      in[i] = static_cast<int32_t>(u * u * 64) % 64;
      tg[i] = static_cast<int32_t>(moe::random_uniform(6, m, i) * 64) % 64;
    }
    t.feed_batch(in.data(), tg.data(), 2, 16);
  }
}

struct Run {
  std::vector<double> losses, grad_norms;
  std::vector<float> params, m, v;
  std::vector<moe::StepRecord> records;
  std::vector<std::vector<std::vector<int32_t>>> uploads;  // [step][MoE layer][expert] weight uploads (offloaded)
};

inline Run train(const Variant& v, int steps = 20) {
  moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
  auto be = backend_for(v);
  moe::Trainer t(cfg, *be);
  if (!v.init.empty()) t.init_from(v.init);
  feed(t, steps * v.grad_accum);
  Run r;
  for (int s = 0; s < steps; ++s) {
    r.records.push_back(t.step());
    if (t.offload()) r.uploads.push_back(t.offload()->last_step_stats().uploads);
    r.losses.push_back(r.records.back().loss);
    r.grad_norms.push_back(r.records.back().grad_norm);
  }
  t.experts_to_arenas();
  const size_t n = t.model().num_params(), g = t.model().num_grads();  // moments: trained tensors only
  r.params.assign(t.model().params(), t.model().params() + n);
  r.m.assign(t.optimizer().m(), t.optimizer().m() + g);
  r.v.assign(t.optimizer().v(), t.optimizer().v() + g);
  return r;
}

// `before` steps, a checkpoint, and `after` steps of a fresh trainer resumed from it: the resumed steps' losses
// and the final weights and moments.
inline Run resumed(const Variant& v, int before, int after) {
  // Per process: two copies of a test running at once must not share a checkpoint directory.
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("moe_test_offload_ckpt_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  auto be = backend_for(v);
  moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
  {
    moe::Trainer first(cfg, *be);
    feed(first, before * v.grad_accum);
    for (int s = 0; s < before; ++s) first.step();
    first.save_checkpoint(dir);
  }
  moe::Trainer second(cfg, *be);
  second.resume_from(dir);
  feed(second, after * v.grad_accum, before * v.grad_accum);
  Run r;
  for (int s = 0; s < after; ++s) r.losses.push_back(second.step().loss);
  second.experts_to_arenas();
  const size_t n = second.model().num_params(), g = second.model().num_grads();
  r.params.assign(second.model().params(), second.model().params() + n);
  r.m.assign(second.optimizer().m(), second.optimizer().m() + g);
  r.v.assign(second.optimizer().v(), second.optimizer().v() + g);
  std::filesystem::remove_all(dir);
  return r;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// "" when two runs' losses, gradient norms, weights and moments are bit-identical, else what differs.
inline std::string run_mismatch(const Run& a, const Run& b) {
  if (!same_bits(a.losses, b.losses)) return "losses differ";
  if (!same_bits(a.grad_norms, b.grad_norms)) return "grad norms differ";
  if (!same_bits(a.params, b.params)) return "weights differ";
  if (!same_bits(a.m, b.m) || !same_bits(a.v, b.v)) return "moments differ";
  return "";
}

// Resumes `o` after 4 of 8 steps: "" when its losses, weights and moments are the uninterrupted run's, else what
// differs.
inline std::string resume_mismatch(const Variant& o, const Run& uninterrupted) {
  const Run r = resumed(o, 4, 4);
  std::vector<double> losses(uninterrupted.losses.begin(), uninterrupted.losses.begin() + 4);
  losses.insert(losses.end(), r.losses.begin(), r.losses.end());
  if (!same_bits(losses, uninterrupted.losses)) return "losses differ";
  if (!same_bits(r.params, uninterrupted.params)) return "weights differ";
  if (!same_bits(r.m, uninterrupted.m) || !same_bits(r.v, uninterrupted.v)) return "moments differ";
  return "";
}

// `v` trained 8 steps resident, against the same run resumed after 4 steps offloaded (pin 0.25, lookahead 2) to
// the host tier in the arenas, the host tier apart from them, and the SSD tier: "" when each matches it, else
// which offload and what differs.
inline std::string offloaded_resume_mismatch(const Variant& v) {
  const Run resident = train(v, 8);
  struct Case {
    std::string what, offload;
    bool apart;
  };
  for (const Case& c : {Case{"host tier", host_offload(0.25, 2), false},
                        Case{"host tier apart from the arenas", host_offload(0.25, 2), true},
                        Case{"SSD tier", ssd_offload(0.25, 2), false}}) {
    Variant o = v;
    o.offload = c.offload;
    o.device_apart = c.apart;
    if (const std::string diff = resume_mismatch(o, resident); !diff.empty()) return c.what + ": " + diff;
  }
  return "";
}

inline std::string describe(const Variant& v, double pin, int lookahead) {
  return v.arch + (v.capacity ? " capacity" : " dropless") + " clip " + std::to_string(v.grad_clip) + " pin " +
         std::to_string(pin) + " lookahead " + std::to_string(lookahead);
}


}  // namespace offload_test
