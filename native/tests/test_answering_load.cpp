// An answering model lays each linear weight out as its load reads it (Model::weights_loaded): once a checkpoint is
// read, before any forward, every linear weight has handed its fp32 values back, and the logits are bit for bit
// those of the same checkpoint loaded first and, in bf16, laid out at the first forward, in fp32 read as they lie
// (the layout of an fp32 weight gives the same products). Under a fine-tune only the frozen base is laid out at the
// load (a PEFT adapter read next may still write the trained tensors); drawing weights into a model whose weights
// are partly laid out is refused. The same under the scalar kernels and beside a device.
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "finetune_fixture.h"
#include "infer/generator.h"
#include "model/config.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;

namespace {

std::vector<int32_t> prompt_tokens(int V) {
  std::vector<int32_t> t(5);
  for (int i = 0; i < 5; ++i) t[i] = static_cast<int32_t>(random_u64(3, 7, i) % V);
  return t;
}

// A checkpoint of cfg's model from seed 5 (its LoRA adapters, if any, given non-zero B).
std::string saved_model(const EngineConfig& cfg, const std::string& label) {
  auto be = make_backend("cpu", {2});
  Model m(cfg.model, *be, ComputeDtype::F32, cfg.finetune);
  m.init(5);
  float* p = m.params();
  for (const ParamTensor& t : m.layout().tensors())
    if (t.adapter)
      for (size_t i = 0; i < t.numel; ++i) p[t.offset + i] = 0.2f * (random_uniform(17, t.offset, i) - 0.5f);
  const std::string dir = moe_test::tmp_path("answering_load_" + label);
  save_checkpoint(dir, cfg, m, nullptr, nullptr);
  return dir;
}

// The prompt's logits and three greedy steps' from gen.
std::vector<float> logits_of(Generator gen, int V) {
  const std::vector<int32_t> prompt = prompt_tokens(V);
  std::vector<float> out;
  gen.feed(prompt.data(), static_cast<int>(prompt.size()), &out);
  for (int s = 0; s < 3; ++s) {
    out.push_back(static_cast<float>(gen.step({}, s).token));
    out.insert(out.end(), gen.logits().begin(), gen.logits().end());
  }
  return out;
}

bool all_zero(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (x[i] != 0.0f) return false;
  return true;
}

}  // namespace

TEST(an_answering_model_lays_each_weight_out_as_its_load_reads_it) {
  const std::string lora = R"({"method": "lora", "train": ["lm_head"],
                               "lora": {"rank": 4, "alpha": 8, "targets": ["attention", "experts"]}})";
  int kept_in_all = 0;  // trained linear weights (an untied head)
  for (const auto& [family, model_json] : finetune_test::families())
    for (const std::string& finetune : {std::string(), lora})
      for (ComputeDtype dtype : {ComputeDtype::BF16, ComputeDtype::F32}) {
        const EngineConfig cfg = parse_config_text(finetune_test::config(model_json, finetune), "test");
        const std::string label = family + (finetune.empty() ? "" : " LoRA") +
                                  (dtype == ComputeDtype::BF16 ? ", bf16" : ", fp32");
        const std::string dir = saved_model(cfg, family + (finetune.empty() ? "" : "_lora"));
        const int V = cfg.model.vocab_size;
        auto be_ref = make_backend("cpu", {2}), be = make_backend("cpu", {2});
        // bf16: the model laid out at its first forward; fp32: the model reading its weights as they lie.
        Model reference(cfg.model, *be_ref, dtype, cfg.finetune);
        load_weights(dir, reference);
        if (dtype == ComputeDtype::BF16) reference.set_inference_only();
        // The linear weights the products read, the embedding table (a tied head) aside.
        const std::vector<bool> only = Model(cfg.model, *be_ref, ComputeDtype::BF16, cfg.finetune).bf16_only_tensors();

        Model answering(cfg.model, *be, dtype, cfg.finetune);
        answering.set_inference_only();
        load_weights(dir, answering);
        // Before any forward: laid out, and each linear weight's fp32 values handed back, except what a fine-tune
        // trains.
        CHECK_MSG(be->kept_bf16_bytes() > 0, label + ": nothing laid out at the load");
        const float* params = answering.params();
        int handed_back = 0, kept = 0;
        for (size_t i = 0; i < only.size(); ++i) {
          if (!only[i]) continue;
          const ParamTensor& t = answering.layout().tensors()[i];
          const bool gone = all_zero(params + t.offset, t.numel);
          const bool trained = !answering.trainable().everything() && answering.trainable().trains(i);
          CHECK_MSG(gone != trained, label + ": " + t.name + (trained ? " (trained) was" : " was not") +
                                         " handed back at the load");
          (gone ? handed_back : kept)++;
        }
        CHECK_MSG(handed_back > 0, label + ": nothing handed back at the load");
        kept_in_all += kept;

        CHECK_MSG(logits_of(Generator(answering), V) == logits_of(Generator(reference), V),
                  label + ": the logits differ from the reference model's");
        for (size_t i = 0; i < only.size(); ++i)
          CHECK_MSG(!only[i] || answering.laid_out_tensors()[i], label + ": a linear weight was never laid out");

        std::string error;
        try {
          answering.init_range(1, 0, answering.num_params());
        } catch (const std::exception& e) {
          error = e.what();
        }
        CHECK_MSG(error.find("laid out") != std::string::npos, label + ": a draw was not refused: " + error);
      }
  CHECK_MSG(kept_in_all > 0, "no family's fine-tune trains a linear weight");
}

// Under the scalar reference kernels, and beside a device (a CPU backend whose memory is said to be apart: the
// load fills a host copy and puts it back at the end, so nothing is laid out until the first forward), in fp32 and
// bf16: the reference model's logits.
TEST(an_answering_model_under_other_kernels_and_beside_a_device_gives_the_same_logits) {
  const EngineConfig cfg = parse_config_text(finetune_test::config(finetune_test::families()[3].second), "test");
  const std::string dir = saved_model(cfg, "deepseek_other");
  for (ComputeDtype dtype : {ComputeDtype::F32, ComputeDtype::BF16})
    for (bool apart : {false, true}) {
      BackendOptions o;
      o.threads = 2;
      o.isa = apart ? "native" : "scalar";
      o.device_memory_apart = apart;
      const std::string label = std::string(dtype == ComputeDtype::F32 ? "fp32" : "bf16") +
                                (apart ? ", memory apart" : ", scalar kernels");
      auto be_ref = make_backend("cpu", o), be = make_backend("cpu", o);
      Model reference(cfg.model, *be_ref, dtype);
      load_weights(dir, reference);
      if (dtype == ComputeDtype::BF16) reference.set_inference_only();
      Model answering(cfg.model, *be, dtype);
      answering.set_inference_only();
      load_weights(dir, answering);
      CHECK_MSG((be->kept_bf16_bytes() > 0) != apart, label + ": laid out at the load only where it is read in place");
      CHECK_MSG(logits_of(Generator(answering), cfg.model.vocab_size) ==
                    logits_of(Generator(reference), cfg.model.vocab_size),
                label + ": the logits differ from the reference model's");
      CHECK_MSG(be->kept_bf16_bytes() > 0, label + ": nothing laid out by the first forward");
    }
}

TEST_MAIN()
