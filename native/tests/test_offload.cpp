// Expert offload and pinning: tier budgets hold (and a too-small one fails clearly), and offloaded training
// is bit-identical to resident training (losses, weights, AdamW moments) across pin fractions, lookaheads,
// dropless/capacity routing, clipping and both architectures, while moving exactly the expected bytes.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "model/config.h"
#include "moe_engine.h"
#include "offload/memory_tier.h"
#include "offload_fixture.h"
#include "testing.h"
#include "train/trainer.h"

using namespace offload_test;

TEST(offloaded_training_is_bit_identical_to_resident) {
  for (const char* arch : {"mixtral", "gpt-moe"})
    for (bool capacity : {false, true})
      for (double clip : {0.0, 1.0}) {
        Variant v{arch, capacity, clip};
        const Run resident = train(v);
        for (bool ssd : {false, true})
          for (const char* optimizer : {"expert", "layer"})
            for (const char* stream : {"worker", "inline", "mapped"})
              for (double pin : {0.0, 0.25, 0.5})
                for (int lookahead : {1, 2}) {
                  Variant o = v;
                  const std::string opt = std::string(R"(, "optimizer": ")") + optimizer + R"(", "copy_stream": ")" +
                                          stream + "\"";
                  o.offload = ssd ? ssd_offload(pin, lookahead, opt) : host_offload(pin, lookahead, 4, opt);
                  const Run off = train(o);
                  const std::string what = std::string(ssd ? "ssd " : "host ") + optimizer + " " + stream + " " +
                                           describe(v, pin, lookahead);
                  CHECK_MSG(same_bits(off.losses, resident.losses), what + ": losses differ");
                  CHECK_MSG(same_bits(off.grad_norms, resident.grad_norms), what + ": grad norms differ");
                  CHECK_MSG(same_bits(off.params, resident.params), what + ": weights differ");
                  CHECK_MSG(same_bits(off.m, resident.m) && same_bits(off.v, resident.v), what + ": moments differ");
                }
      }
}

// Beside a device whose memory is not host memory, the host tier keeps the experts in page-locked memory of its
// own (pinned_store.h), the arenas' expert pages released: training through it is resident training, bit for bit,
// with either copy stream, pinned experts and runs of experts.
TEST(host_tier_apart_from_the_arenas_is_bit_identical_to_resident) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    Variant v{arch, false, 1.0};
    const Run resident = train(v);
    for (const char* stream : {"worker", "inline"})
      for (auto [pin, lookahead, slots] : {std::tuple{0.0, 1, 4}, std::tuple{0.5, 2, 4}, std::tuple{0.25, 3, 8}}) {
        Variant o = v;
        o.device_apart = true;
        o.offload = host_offload(pin, lookahead, slots, std::string(R"(, "copy_stream": ")") + stream + "\"");
        const Run off = train(o);
        const std::string what = std::string("host apart ") + stream + " " + describe(v, pin, lookahead);
        CHECK_MSG(same_bits(off.losses, resident.losses), what + ": losses differ");
        CHECK_MSG(same_bits(off.grad_norms, resident.grad_norms), what + ": grad norms differ");
        CHECK_MSG(same_bits(off.params, resident.params), what + ": weights differ");
        CHECK_MSG(same_bits(off.m, resident.m) && same_bits(off.v, resident.v), what + ": moments differ");
      }
  }
}

// Dense layers between MoE layers, different expert counts per layer, shared experts with their gate (mixtral)
// and the PR-MoE residual MLP (gpt-moe), two compute threads beside the copy and optimizer threads, and runs of
// several offloaded experts computed at once.
TEST(offload_is_exact_for_mixed_layers_shared_experts_and_threads) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    Variant v{arch, false, 1.0};
    v.layers = std::string(R"("n_layers": 4, "moe_every": 2, "n_experts": [8, 6], )") +
               (v.arch == "mixtral" ? R"("shared_expert_d_ff": 16, "shared_expert_gate": true)" : R"("residual_mlp": true)");
    const Run resident = train(v);
    // The second computes runs of three experts at once (lookahead 3, six streaming slots).
    for (const std::string& offload : {host_offload(0.5, 2, 3), host_offload(0.25, 3, 8)}) {
      Variant o = v;
      o.threads = 2;
      o.offload = offload;
      const Run off = train(o);
      const std::string what = std::string(arch) + " " + offload;
      CHECK_MSG(same_bits(off.losses, resident.losses), what + ": losses differ");
      CHECK_MSG(same_bits(off.params, resident.params), what + ": weights differ");
      CHECK_MSG(same_bits(off.m, resident.m) && same_bits(off.v, resident.v), what + ": moments differ");
    }
  }
}

TEST(resident_runs_record_no_offload) {
  const Run r = train(Variant{}, 2);
  CHECK(!r.records.back().offloaded);
  CHECK(r.records.back().bytes_h2d == 0 && r.records.back().expert_pinned.empty());
}

// One micro-batch per step: an unpinned expert with rows is uploaded for forward and again for backward unless
// its slot still holds it (always so for the turn from the last layer's forward to its backward), a pinned one
// once; every computing expert's gradient goes down once.
TEST(bytes_moved_match_the_pin_fraction) {
  for (double pin : {0.0, 0.25, 0.5})
    for (bool capacity : {false, true}) {
      Variant v;
      v.capacity = capacity;
      v.grad_accum = 1;
      v.offload = host_offload(pin, 1);
      moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
      auto be = moe::make_backend("cpu", {1});
      moe::Trainer t(cfg, *be);
      feed(t, 6);
      const int64_t W = static_cast<int64_t>(t.offload()->expert_bytes());
      const int pin_slots = t.offload()->pin_slots();
      CHECK(pin_slots == static_cast<int>(pin * 4));
      for (int s = 0; s < 6; ++s) {
        const moe::StepRecord r = t.step();
        const std::vector<std::vector<int32_t>> step_uploads = t.offload()->last_step_stats().uploads;
        int64_t h2d = 0, d2h = 0;
        int pinned = 0;
        // The last expert the last MoE layer's forward computes opens its backward, still in its slot.
        const size_t last = r.expert_tokens.size() - 1;
        int turn = -1;
        for (size_t e = 0; e < r.expert_tokens[last].size(); ++e)
          if ((capacity || r.expert_tokens[last][e] > 0) && !r.expert_pinned[last][e]) turn = static_cast<int>(e);
        for (size_t l = 0; l < r.expert_tokens.size(); ++l)
          for (size_t e = 0; e < r.expert_tokens[l].size(); ++e) {
            const bool computes = capacity || r.expert_tokens[l][e] > 0;
            const bool is_pinned = r.expert_pinned[l][e] != 0;
            pinned += is_pinned;
            const int uploads = step_uploads[l][e];
            const std::string where = "step " + std::to_string(r.step) + " layer " + std::to_string(l) + " expert " +
                                      std::to_string(e);
            if (!computes) CHECK_MSG(uploads == 0, where);
            else if (is_pinned || (l == last && static_cast<int>(e) == turn)) CHECK_MSG(uploads == 1, where);
            else CHECK_MSG(uploads == 1 || uploads == 2, where);  // 1 when its forward slot was still free
            h2d += uploads * W;
            d2h += computes ? W : 0;
            CHECK(r.expert_tiers[l][e] == 1);
          }
        CHECK(r.offloaded);
        CHECK(r.bytes_h2d == h2d);
        CHECK(r.bytes_d2h == d2h);
        CHECK(pinned == (s == 0 ? 0 : pin_slots));
        CHECK(r.upload_ms >= 0 && r.upload_hidden_ms >= 0 && r.stall_ms >= 0);
        CHECK(r.upload_hidden_ms <= r.upload_ms + 1e-9);
      }
    }
}

// With several micro-batches a pinned expert still crosses the bus once per step; an unpinned one every time.
TEST(pinned_experts_are_not_reuploaded) {
  Variant v;
  v.grad_accum = 3;
  v.offload = host_offload(0.5, 1);
  const Run r = train(v, 4);
  int pinned_seen = 0;
  for (size_t s = 0; s < r.records.size(); ++s) {
    const moe::StepRecord& rec = r.records[s];
    for (size_t l = 0; l < rec.expert_pinned.size(); ++l)
      for (size_t e = 0; e < rec.expert_pinned[l].size(); ++e)
        if (rec.expert_pinned[l][e]) {
          ++pinned_seen;
          CHECK(r.uploads[s][l][e] <= 1);
        }
  }
  CHECK(pinned_seen == 3 * 2);  // steps 2..4, two pin slots
}

TEST(tier_budgets_hold_and_a_small_budget_fails_clearly) {
  Variant v;
  v.offload = host_offload(0.25, 1, 2);
  size_t two_slots = 0, slot_bytes = 0;
  {
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    two_slots = t.offload()->device_tier().current();
    slot_bytes = 2 * t.offload()->expert_bytes();
  }
  // A budget that holds exactly three slots: the engine derives three, and the peak stays within it.
  Variant b = v;
  b.offload = R"({"mode": "host", "device_budget_bytes": )" + std::to_string(two_slots + slot_bytes) + "}";
  moe::EngineConfig cfg = moe::parse_config_text(config(b), "test");
  auto be = moe::make_backend("cpu", {1});
  moe::Trainer t(cfg, *be);
  CHECK(t.offload()->slots() == 3);
  feed(t, 4);
  for (int s = 0; s < 2; ++s) {
    const moe::StepRecord r = t.step();
    CHECK(r.peak_device_bytes <= static_cast<int64_t>(two_slots + slot_bytes));
    CHECK(r.peak_host_bytes > 0);
  }
  // Two slots in a budget one byte short of them.
  Variant small = v;
  small.offload = R"({"mode": "host", "expert_slots": 2, "device_budget_bytes": )" + std::to_string(two_slots - 1) + "}";
  std::string message;
  try {
    moe::EngineConfig c = moe::parse_config_text(config(small), "test");
    auto be2 = moe::make_backend("cpu", {1});
    moe::Trainer t2(c, *be2);
  } catch (const std::exception& e) {
    message = e.what();
  }
  CHECK_MSG(message.find("device tier") != std::string::npos && message.find("budget") != std::string::npos,
            "message: " + message);
}

// An allocation the backend refuses (here more bytes than any machine has) fails naming the tier, what the block
// was for and its size, with the backend's reason; the tier books nothing for it.
TEST(a_refused_tier_allocation_names_the_tier_and_the_block) {
  auto be = moe::make_backend("cpu", {1});
  moe::MemoryTier host("host", *be, moe::MemKind::PinnedHost, 0);
  const size_t huge = size_t(1) << 60;
  std::string message;
  try {
    moe::TierBlock b(host, huge, "the experts' master weights");
  } catch (const moe::EngineError& e) {
    message = e.what();
  }
  const std::string expected =
      "host tier: allocating " + std::to_string(huge) + " bytes for the experts' master weights failed: ";
  CHECK_MSG(message.rfind(expected, 0) == 0, message);
  CHECK_MSG(message.find("out of host memory") != std::string::npos, message);
  CHECK(host.current() == 0);
}

TEST(offload_config_is_validated_by_field) {
  auto error_of = [](const std::string& offload) {
    Variant v;
    v.offload = offload;
    try {
      moe::parse_config_text(config(v), "test");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(R"({"mode": "host", "expert_slot": 2})").find("offload.expert_slot: unknown field") == 0);
  CHECK(error_of(R"({"mode": "disk"})").find("offload.mode") == 0);
  CHECK(error_of(R"({"mode": "ssd", "expert_slots": 2})").find("offload.cache_experts") == 0);
  CHECK(error_of(R"({"mode": "ssd", "expert_slots": 2, "cache_experts": 4, "optimizer": "delayed"})")
            .find("offload.optimizer") == 0);
  CHECK(error_of(R"({"mode": "host", "expert_slots": 2, "cache_policy": "mru"})").find("offload.cache_policy") == 0);
  CHECK(error_of(R"({"mode": "host", "expert_slots": 2, "lookahead": 65})").find("offload.lookahead") == 0);
  CHECK(error_of(R"({"mode": "host"})").find("offload.expert_slots") == 0);
  CHECK(error_of(R"({"mode": "host", "expert_slots": 2, "pin_policy": "lru"})").find("offload.pin_policy") == 0);
  CHECK(error_of(R"({"mode": "host", "expert_slots": 2, "copy_stream": "mmap"})").find("offload.copy_stream") == 0);
  CHECK(error_of(R"({"mode": "none"})").empty());
}

// Mapped slots: the experts compute on their host copies, so no weight byte moves to the device tier (with one
// micro-batch nothing moves up at all) and a slot books its gradient buffer alone; the cache must hold the
// lookahead window beside the workers' entries.
TEST(mapped_slots_move_no_weights) {
  for (const char* stream : {"auto", "mapped", "worker"}) {
    Variant v;
    v.grad_accum = 1;
    v.offload = ssd_offload(0.25, 1, std::string(R"(, "copy_stream": ")") + stream + "\"");
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    feed(t, 3);
    const bool mapped = std::string(stream) != "worker";  // auto maps the SSD tier on the cpu backend
    for (int s = 0; s < 3; ++s) {
      const moe::StepRecord r = t.step();
      CHECK_MSG(mapped ? r.bytes_h2d == 0 : r.bytes_h2d > 0, std::string(stream) + ": bytes up");
      CHECK_MSG(r.bytes_d2h > 0, std::string(stream) + ": gradients down");
    }
    static size_t mapped_device = 0;
    const size_t device = t.offload()->device_tier().current();
    if (!mapped) CHECK(device == mapped_device + 4 * t.offload()->expert_bytes());  // 4 slots' weights
    else mapped_device = device;
  }
  std::string message;
  try {
    Variant v;
    v.offload = ssd_offload(0.0, 2, R"(, "copy_stream": "mapped")", 4);
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(moe::parse_config_text(config(v), "test"), *be);
  } catch (const std::exception& e) {
    message = e.what();
  }
  CHECK_MSG(message.find("offload.cache_experts") == 0 && message.find("at least 5") != std::string::npos,
            "message: " + message);
}

// The C API hands the offload measurements, tiers and pins out with each step.
TEST(c_api_step_record_carries_offload) {
  Variant v;
  v.grad_accum = 1;
  v.offload = host_offload(0.5, 1);
  char err[512] = {};
  moe_engine* e = moe_engine_create(config(v).c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  if (!e) return;
  std::vector<int32_t> in(32), tg(32);
  for (int i = 0; i < 32; ++i) in[i] = tg[i] = i % 5;
  moe_step_record r{sizeof(moe_step_record)};
  for (int s = 0; s < 2; ++s) {
    CHECK(moe_engine_feed_batch(e, in.data(), tg.data(), 2, 16) == MOE_OK);
    CHECK(moe_engine_step(e, &r) == MOE_OK);
  }
  CHECK(r.offloaded == 1 && r.bytes_h2d > 0 && r.bytes_d2h > 0 && r.peak_device_bytes > 0);
  CHECK(r.expert_tiers != nullptr && r.expert_pinned != nullptr);
  int pinned = 0;
  for (int i = 0; i < 16; ++i) {
    CHECK(r.expert_tiers[i] == 1);
    pinned += r.expert_pinned[i];
  }
  CHECK(pinned == 2);
  moe_engine_destroy(e);
}

// A checkpoint taken while expert updates may still run holds the settled state: resuming it offloaded (host or
// SSD tier) continues exactly like an uninterrupted resident run.
TEST(offloaded_checkpoint_resumes_exactly) {
  const std::string diff = offloaded_resume_mismatch(Variant{});
  CHECK_MSG(diff.empty(), diff);
}

// Evaluation and gradients between steps (moe_engine_forward, moe_engine_compute_gradients, twice) stream
// experts through the slots and give resident logits and gradients, on the host and the SSD tier, in fp32 and bf16;
// the weights read after them (the SSD tier copies its experts' weights alone into the arenas) are resident's too.
TEST(passes_outside_training_match_resident) {
  for (const char* dtype : {"fp32", "bf16"}) {
    std::vector<std::vector<float>> logits, grads, weights;
    for (const std::string& offload : {std::string(), host_offload(0.25, 2), ssd_offload(0.25, 2)}) {
      Variant v;
      v.grad_accum = 1;
      v.offload = offload;
      v.dtype = dtype;
      char err[512] = {};
      moe_engine* e = moe_engine_create(config(v).c_str(), nullptr, err, sizeof err);
      CHECK_MSG(e != nullptr, err);
      if (!e) return;
      std::vector<int32_t> in(32), tg(32);
      for (int i = 0; i < 32; ++i) in[i] = tg[i] = (i * 7) % 64;
      std::vector<float> out(32 * 64);
      double loss = 0, aux = 0;
      CHECK(moe_engine_forward(e, in.data(), tg.data(), 2, 16, out.data(), &loss, &aux) == MOE_OK);
      moe_step_record r{sizeof(moe_step_record)};
      for (int s = 0; s < 3; ++s) {
        CHECK(moe_engine_feed_batch(e, in.data(), tg.data(), 2, 16) == MOE_OK);
        CHECK(moe_engine_step(e, &r) == MOE_OK);
      }
      CHECK(moe_engine_forward(e, in.data(), tg.data(), 2, 16, out.data(), &loss, &aux) == MOE_OK);
      logits.push_back(out);
      for (int pass = 0; pass < 2; ++pass)
        CHECK(moe_engine_compute_gradients(e, in.data(), tg.data(), 2, 16, &loss, &aux) == MOE_OK);
      for (int which : {0, 1}) {
        std::vector<float> all;
        for (int32_t t = 0; t < moe_engine_tensor_count(e); ++t) {
          const char* name = nullptr;
          int32_t rank = 0;
          int64_t dims[8] = {};
          CHECK(moe_engine_tensor_info(e, t, &name, &rank, dims) == MOE_OK);
          int64_t numel = 1;
          for (int d = 0; d < rank; ++d) numel *= dims[d];
          std::vector<float> g(numel);
          CHECK(moe_engine_read_tensor(e, name, which, g.data(), numel) == MOE_OK);
          all.insert(all.end(), g.begin(), g.end());
        }
        (which == 0 ? weights : grads).push_back(all);
      }
      moe_engine_destroy(e);
    }
    for (size_t i = 1; i < logits.size(); ++i) {
      CHECK_MSG(same_bits(logits[0], logits[i]), std::string(dtype) + ": logits of offload variant " + std::to_string(i));
      CHECK_MSG(same_bits(grads[0], grads[i]), std::string(dtype) + ": gradients of offload variant " + std::to_string(i));
      CHECK_MSG(same_bits(weights[0], weights[i]), std::string(dtype) + ": weights of offload variant " + std::to_string(i));
    }
  }
}

TEST_MAIN()
