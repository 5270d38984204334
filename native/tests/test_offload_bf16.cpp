// Expert offload with bf16 compute (train.compute_dtype "bf16"): a slot converts its expert's fp32 weights to the
// bf16 copy the GEMMs read, as resident training converts the arena's, so offloaded training is resident bf16
// training bit for bit on every tier, copy stream, pin fraction and lookahead, beside a device apart from host
// memory too, for a LoRA fine-tune and across a checkpoint resume; the device tier books each slot's copy and the
// non-expert copies.
#include <string>
#include <tuple>
#include <vector>

#include "offload_fixture.h"
#include "testing.h"
#include "train/trainer.h"

using namespace offload_test;

namespace {

void check_same(const Run& off, const Run& resident, const std::string& what) {
  CHECK_MSG(same_bits(off.losses, resident.losses), what + ": losses differ");
  CHECK_MSG(same_bits(off.grad_norms, resident.grad_norms), what + ": grad norms differ");
  CHECK_MSG(same_bits(off.params, resident.params), what + ": weights differ");
  CHECK_MSG(same_bits(off.m, resident.m) && same_bits(off.v, resident.v), what + ": moments differ");
}

Variant bf16(Variant v) {
  v.dtype = "bf16";
  return v;
}

}  // namespace

TEST(bf16_offloaded_training_is_bit_identical_to_resident) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    const Variant v = bf16(Variant{arch, false, 1.0});
    const Run resident = train(v, 8);
    // bf16 changes what is computed: a test that compared fp32 runs here would pass whatever offload did.
    Variant f32 = v;
    f32.dtype = "fp32";
    CHECK_MSG(!same_bits(train(f32, 8).losses, resident.losses), std::string(arch) + ": bf16 computes as fp32");
    for (bool ssd : {false, true})
      for (const char* stream : {"worker", "inline", "mapped"})
        for (auto [pin, lookahead] : {std::tuple{0.0, 1}, std::tuple{0.5, 2}}) {
          Variant o = v;
          const std::string extra = std::string(R"(, "copy_stream": ")") + stream + "\"";
          o.offload = ssd ? ssd_offload(pin, lookahead, extra) : host_offload(pin, lookahead, 4, extra);
          check_same(train(o, 8), resident,
                     std::string(arch) + (ssd ? " ssd " : " host ") + stream + " " + describe(v, pin, lookahead));
        }
  }
}

// Beside a device (the host tier in page-locked memory of its own), with runs of experts computed at once.
TEST(bf16_offload_beside_a_device_is_bit_identical_to_resident) {
  const Variant v = bf16(Variant{"mixtral", false, 1.0});
  const Run resident = train(v, 8);
  for (auto [pin, lookahead, slots] : {std::tuple{0.0, 1, 4}, std::tuple{0.25, 3, 8}}) {
    Variant o = v;
    o.device_apart = true;
    o.offload = host_offload(pin, lookahead, slots);
    check_same(train(o, 8), resident, "host apart " + describe(v, pin, lookahead));
  }
}

// LoRA on a frozen bf16 base: the slots keep a frozen base's copy across steps while the adapters train.
TEST(bf16_offloaded_lora_is_bit_identical_to_resident) {
  Variant v = bf16(Variant{"mixtral", false, 1.0});
  v.sections = R"(, "finetune": {"method": "lora", "lora": {"rank": 4, "alpha": 8}})";
  const Run resident = train(v, 8);
  for (bool ssd : {false, true}) {
    Variant o = v;
    o.offload = ssd ? ssd_offload(0.25, 2) : host_offload(0.25, 2);
    check_same(train(o, 8), resident, ssd ? "lora ssd" : "lora host");
  }
}

// A checkpoint written offloaded in bf16 resumes to the uninterrupted resident bf16 run, on every home tier: the
// slots' copies of the weights before the load are never reused after it.
TEST(bf16_offloaded_checkpoint_resumes_exactly) {
  const std::string diff = offloaded_resume_mismatch(bf16(Variant{}));
  CHECK_MSG(diff.empty(), diff);
}

// The device tier books the non-expert weights' copies, and a slot keeps its expert's two linear weights only as
// their bf16 copy: against fp32, each of the 4 slots holds 2 bytes in place of 4 per linear weight element (each
// weight padded to 16 floats, as the layout keeps it).
TEST(bf16_slots_book_their_copies) {
  auto booked = [](const std::string& dtype) {
    Variant v{"mixtral", false, 1.0};
    v.dtype = dtype;
    v.offload = host_offload(0.0, 1, 4);
    moe::EngineConfig cfg = moe::parse_config_text(config(v), "test");
    auto be = backend_for(v);
    moe::Trainer t(cfg, *be);
    size_t linear = 0;
    for (const char* w : {"gate_up.weight", "down.weight"})
      linear += (t.model().layout().find(std::string("layers.0.moe.experts.0.") + w)->numel + 15) / 16 * 16;
    return std::tuple{t.offload()->device_tier().current(), t.offload()->slots(), linear,
                      t.model().bf16_copy_bytes(false), t.model().bf16_copy_bytes(true)};
  };
  const auto [f32_bytes, slots, linear, none, none_all] = booked("fp32");
  const auto [bf16_bytes, slots16, linear16, dense16, all16] = booked("bf16");
  CHECK(none == 0 && none_all == 0 && slots == 4 && slots16 == 4 && linear == 1536 + 768);
  CHECK(dense16 > 0 && all16 > dense16);
  CHECK_MSG(bf16_bytes + 4 * linear * 2 == f32_bytes + dense16,
            "booked " + std::to_string(bf16_bytes) + " against fp32's " + std::to_string(f32_bytes));
}

TEST_MAIN()
