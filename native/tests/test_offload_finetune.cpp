// Expert offload with a fine-tune: LoRA (router frozen), ESFT (a chosen set, fully and with LoRA) and a
// frozen-router full fine-tune train bit for bit as their resident runs on the host and the SSD tier, and the
// tiers hold for a frozen expert its weights alone (no gradient, no moments, no write-back).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "offload_fixture.h"
#include "testing.h"
#include "train/trainer.h"

using namespace offload_test;

namespace {

struct Finetune {
  const char* name;
  std::string section;
};

const std::vector<Finetune>& finetunes() {
  static const std::vector<Finetune> all = {
      {"lora", R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "dropout": 0.1}})"},
      {"esft", R"({"method": "esft", "experts": {"0": [1, 5], "1": [2]}})"},
      {"esft lora", R"({"method": "esft", "experts": {"0": [1, 5], "1": [2]}, "esft": {"with": "lora"},
                         "lora": {"rank": 4, "alpha": 8}})"},
      {"frozen router", R"({"method": "full", "train": ["embeddings", "attention", "norms", "experts", "lm_head"]})"},
  };
  return all;
}

Variant with_finetune(const Variant& v, const Finetune& f) {
  Variant o = v;
  o.sections += R"(, "finetune": )" + f.section;
  return o;
}

void check_same(const Run& off, const Run& resident, const std::string& what) {
  const std::string diff = run_mismatch(off, resident);
  CHECK_MSG(diff.empty(), what + ": " + diff);
}

size_t round4k(size_t floats) { return (floats * sizeof(float) + 4095) / 4096 * 4096; }

}  // namespace

// The equivalence matrix's fine-tuning columns: every exact strategy reproduces resident fine-tuning.
TEST(offloaded_finetune_is_bit_identical_to_resident) {
  for (const Finetune& f : finetunes())
    for (double clip : {0.0, 1.0}) {
      Variant v = with_finetune(Variant{"mixtral", false, clip}, f);
      const Run resident = train(v);
      for (bool ssd : {false, true})
        for (const char* optimizer : {"expert", "layer"})
          for (const char* stream : {"worker", "inline", "mapped"})
            for (double pin : {0.0, 0.5})
              for (int lookahead : {1, 2}) {
                Variant o = v;
                const std::string opt =
                    std::string(R"(, "optimizer": ")") + optimizer + R"(", "copy_stream": ")" + stream + "\"";
                o.offload = ssd ? ssd_offload(pin, lookahead, opt) : host_offload(pin, lookahead, 4, opt);
                check_same(train(o), resident, std::string(f.name) + (ssd ? " ssd " : " host ") + optimizer + " " +
                                                   stream + " " + describe(v, pin, lookahead));
              }
    }
}

// The host tier apart from the arenas (beside a device, pinned_store.h): split experts keep their trained part
// packed apart there, as on the SSD.
TEST(offloaded_finetune_with_the_host_tier_apart_is_bit_identical_to_resident) {
  for (const Finetune& f : finetunes()) {
    Variant v = with_finetune(Variant{"mixtral", false, 1.0}, f);
    const Run resident = train(v);
    for (const char* stream : {"worker", "inline"}) {
      Variant o = v;
      o.device_apart = true;
      o.offload = host_offload(0.5, 2, 4, std::string(R"(, "copy_stream": ")") + stream + "\"");
      check_same(train(o), resident, std::string(f.name) + " host apart " + stream);
    }
  }
}

// The other architecture (expert biases), capacity routing, the ablation without overlap and LFU eviction.
TEST(offloaded_finetune_is_exact_for_biases_capacity_and_no_overlap) {
  for (const Finetune& f : finetunes()) {
    Variant v = with_finetune(Variant{"gpt-moe", true, 1.0}, f);
    const Run resident = train(v);
    Variant host = v, ssd = v;
    host.offload = host_offload(0.25, 2, 4, R"(, "optimizer_overlap": false)");
    ssd.offload = ssd_offload(0.25, 2, R"(, "cache_policy": "lfu", "optimizer_overlap": false)");
    check_same(train(host), resident, std::string(f.name) + " gpt-moe host, no overlap");
    check_same(train(ssd), resident, std::string(f.name) + " gpt-moe ssd lfu, no overlap");
  }
}

// Each tier holds what the fine-tune needs: a slot's gradient buffer is the largest trained part, the host tier
// an expert's weights plus 3 × its trained part, the SSD file the same in 4 KiB-aligned parts, except that
// adapters on a frozen base keep their weights, gradient and moments in host memory beside the cache; a frozen
// expert: its weights alone.
TEST(finetune_offload_books_frozen_experts_as_weights_only) {
  for (const Finetune& f : {finetunes()[0], finetunes()[1]}) {
    Variant v = with_finetune(Variant{}, f);
    moe::EngineConfig rcfg = moe::parse_config_text(config(v), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer resident(rcfg, *be);
    const moe::ParamLayout& layout = resident.model().layout();
    const moe::TrainableSet& ts = resident.model().trainable();
    size_t weights = 0, grads = 0, largest_w = 0, largest_g = 0, largest_t = 0, file = 0, frozen = 0, side = 0,
           largest_whole = 0;
    for (size_t k = 0; k < layout.expert_ranges().size(); ++k) {
      const moe::ExpertRange& r = layout.expert_ranges()[k];
      const moe::ExpertRange& g = ts.grad_expert_ranges()[k];
      size_t trained = 0;
      bool has_frozen = false;
      for (size_t i = 0; i < layout.tensors().size(); ++i) {
        const moe::ParamTensor& t = layout.tensors()[i];
        if (t.offset < r.begin || t.offset >= r.end) continue;
        if (ts.trains(i)) trained += (t.numel + 15) / 16 * 16;
        else has_frozen = true;
      }
      CHECK(trained == g.end - g.begin);  // the packed arena's range is exactly the trained tensors
      frozen += trained == 0;
      weights += r.end - r.begin;
      grads += trained;
      largest_w = std::max(largest_w, r.end - r.begin);
      largest_g = std::max(largest_g, trained);
      if (has_frozen) largest_t = std::max(largest_t, trained);
      // A split expert (adapters on a frozen base) keeps its trained part, gradient and moments in host memory.
      const bool split = has_frozen && trained;
      file += round4k(r.end - r.begin) + (split ? 0 : 3 * round4k(trained));
      side += split ? 4 * trained : 0;
      if (!split) largest_whole = std::max(largest_whole, trained);
    }
    if (std::string(f.name) == "esft") {
      CHECK(frozen == 13 && largest_t == 0);  // 16 experts, 3 chosen: trained whole
    } else {
      CHECK(frozen == 0 && largest_t == largest_g && largest_g < largest_w / 3);  // every expert has adapters
    }
    for (int k = 0; k < 3; ++k) {
      // The host tier copies into slots; the SSD tier computes on the cache's copies in place on this backend
      // (auto: mapped) unless told to copy.
      const bool ssd = k > 0, mapped = k == 1;
      Variant o = v;
      o.offload = ssd ? ssd_offload(0.25, 1, mapped ? "" : R"(, "copy_stream": "worker")") : host_offload(0.25, 1, 4);
      moe::EngineConfig cfg = moe::parse_config_text(config(o), "test");
      moe::Trainer t(cfg, *be);
      const moe::ExpertOffload& off = *t.offload();
      const std::string what = std::string(f.name) + (ssd ? mapped ? " ssd mapped" : " ssd" : " host");
      CHECK_MSG(off.expert_bytes() == largest_w * 4 && off.expert_grad_bytes() == largest_g * 4, what);
      // Device: dense parameters, the trained dense tensors' gradient and moments, activations, 4 slots (a mapped
      // slot holds the gradient alone).
      const size_t dense_w = layout.total() - weights, dense_g = t.model().num_grads() - grads;
      const size_t device = (dense_w + 3 * dense_g) * 4 + t.model().activation_bytes() +
                            4 * ((mapped ? 0 : largest_w) + largest_g) * 4;
      CHECK_MSG(off.device_tier().current() == device, what + ": device tier bytes");
      if (!ssd) {
        CHECK_MSG(off.host_tier().current() == (weights + 3 * grads) * 4, what + ": host tier bytes");
      } else {
        CHECK_MSG(off.ssd_tier().current() == file, what + ": SSD file bytes");
        CHECK_MSG(off.host_tier().current() ==
                      static_cast<size_t>(off.cache_entries()) * (round4k(largest_w) + 3 * round4k(largest_whole)) +
                          side * 4,
                  what + ": host cache bytes");
      }
    }
  }
}

// LoRA on the SSD tier: the frozen base is read, never written back, and the adapters' state stays in host
// memory, so a step writes nothing.
TEST(lora_on_the_ssd_never_writes_frozen_weights_back) {
  Variant v = with_finetune(Variant{}, finetunes()[0]);
  v.offload = ssd_offload(0.25, 1, "", 4);
  const Run r = train(v, 6);
  int64_t written = 0, read = 0;
  for (const moe::StepRecord& rec : r.records) {
    written += rec.bytes_ssd_write;
    read += rec.bytes_ssd_read;
  }
  CHECK(read > 0 && written == 0);
  // Full training on the same tier writes weights back; a LoRA run writes none.
  auto weight_bytes_written = [](const Variant& o) {
    moe::EngineConfig cfg = moe::parse_config_text(config(o), "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    feed(t, 8);
    int64_t bytes = 0;
    for (int s = 0; s < 4; ++s) {
      t.step();
      bytes += t.offload()->last_step_stats().store.weight_bytes_written;
    }
    return bytes;
  };
  CHECK(weight_bytes_written(v) == 0);
  Variant full = v;
  full.sections.clear();
  CHECK(weight_bytes_written(full) > 0);
}

// A fine-tune from a bf16 checkpoint (as every released MoE is): the SSD tier keeps the frozen base as bf16
// values in half the bytes, and the run stays bit-identical to resident LoRA.
TEST(lora_over_a_bf16_base_reads_half_the_bytes_and_stays_exact) {
  Variant v = with_finetune(Variant{}, finetunes()[0]);
  v.init = (std::filesystem::temp_directory_path() / ("moe_test_bf16_base_" + std::to_string(::getpid()))).string();
  {
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(moe::parse_config_text(config(v), "test"), *be);
    float* p = t.model().params();
    for (size_t j = 0; j < t.model().num_params(); ++j) {
      uint32_t bits;
      std::memcpy(&bits, p + j, 4);
      bits &= 0xFFFF0000u;  // the weights a bf16 checkpoint gives
      std::memcpy(p + j, &bits, 4);
    }
    t.save_checkpoint(v.init);
  }
  const Run resident = train(v, 6);
  Variant ssd = v, plain = with_finetune(Variant{}, finetunes()[0]);
  ssd.offload = plain.offload = ssd_offload(0.25, 1, "", 4);
  const Run compact = train(ssd, 6), whole = train(plain, 6);
  check_same(compact, resident, "lora from a bf16 base, ssd");
  int64_t read_compact = 0, read_whole = 0;
  for (int s = 1; s < 6; ++s) {
    read_compact += compact.records[s].bytes_ssd_read;
    read_whole += whole.records[s].bytes_ssd_read;
  }
  // Records here are a few KiB: a read of weights and adapters is 2 + 1 pages compact against 3 + 1 whole, and
  // some reads take the adapters alone (the store's own test counts the halves exactly).
  CHECK_MSG(read_compact > 0 && read_compact * 10 < read_whole * 9,
            "bytes read " + std::to_string(read_compact) + " vs " + std::to_string(read_whole));
  // Next-use eviction lets entries go whose frozen base sits in a slot to its next use, so the cache and the
  // slots hold different experts: one MoE layer of 16, a cache of 8, every expert in every pass, copied into
  // slots (a mapped slot holds no weights).
  int64_t reads[2];
  for (int k = 0; k < 2; ++k) {
    Variant one = ssd;
    one.layers = R"("n_layers": 1, "n_experts": [16])";
    one.grad_accum = 1;
    one.init.clear();  // the checkpoint above is of two layers
    Variant res = one;
    res.offload.clear();
    one.offload = ssd_offload(0.0, 1,
                              std::string(R"(, "copy_stream": "worker", "cache_policy": )") + (k ? R"("next-use")" : R"("lru")"), 8);
    const Run run = train(one, 6);
    check_same(run, train(res, 6), std::string("one layer, bf16 base, ssd ") + (k ? "next-use" : "lru"));
    reads[k] = 0;
    for (int s = 1; s < 6; ++s) reads[k] += run.records[s].bytes_ssd_read;
  }
  CHECK_MSG(reads[1] * 10 < reads[0] * 9, "next-use read " + std::to_string(reads[1]) + " bytes, LRU " +
                                            std::to_string(reads[0]));
  std::filesystem::remove_all(v.init);
}

// A checkpoint of an offloaded LoRA run resumes (offloaded) exactly like an uninterrupted resident LoRA run.
TEST(offloaded_lora_checkpoint_resumes_exactly) {
  const std::string diff = offloaded_resume_mismatch(with_finetune(Variant{}, finetunes()[0]));
  CHECK_MSG(diff.empty(), diff);
}

TEST_MAIN()
