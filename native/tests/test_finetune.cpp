// The finetune section and trainable sets: parsing and refusals by field name; frozen tensors have no gradient
// buffer and no AdamW moments (the arenas' bytes are exactly those of the trained tensors), are never written, and
// leave the trained tensors' gradients bit-identical to full training's; method "full" over every group trains
// exactly like no section; a fine-tune resumes from its checkpoint bit for bit.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/model.h"
#include "model/trainable.h"
#include "finetune_fixture.h"
#include "offload_fixture.h"
#include "test_files.h"
#include "testing.h"
#include "train/trainer.h"

namespace {

using namespace moe;
using finetune_test::config;
using finetune_test::families;

const char* kAttentionAndSomeExperts = R"({"method": "full", "train": ["attention", "experts"], "experts": {"1": [0, 2]}})";
const char* kTheRest = R"({"method": "full", "train": ["embeddings", "norms", "router", "shared_experts", "dense_mlp", "lm_head"]})";

std::vector<int32_t> tokens(uint64_t stream, int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>(random_uniform(3, stream, i) * 64) % 64;
  return t;
}

std::vector<float> host(const float* p, size_t n) { return std::vector<float>(p, p + n); }

// The test's own statement of which tensors train for the two sets above (by name, independent of trainable.cpp).
bool expected_trained(const std::string& name, const std::string& set) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("selection_bias")) return false;
  if (set == kAttentionAndSomeExperts) {
    if (has(".attn.")) return true;
    return name.rfind("layers.1.moe.experts.0.", 0) == 0 || name.rfind("layers.1.moe.experts.2.", 0) == 0 ||
           (has(".moe.experts.") && name.rfind("layers.1.", 0) != 0);
  }
  return !has(".attn.") && !has(".moe.experts.");
}

TEST(finetune_section_parses_with_the_methods_defaults) {
  FinetuneConfig f = parse_finetune_config(json::parse(R"({"method": "full"})", "t"));
  CHECK(f.enabled && f.train.size() == kParamGroups && f.experts.empty() && !f.has_lora && !f.has_esft);
  f = parse_finetune_config(json::parse(R"({"method": "lora", "lora": {"rank": 8}})", "t"));
  CHECK(f.train.empty() && !f.trains(ParamGroup::Router) && f.uses_lora());
  CHECK(f.lora.rank == 8 && f.lora.alpha == 32 && f.lora.targets.size() == 2 && f.lora.scaling() == 4.0);
  f = parse_finetune_config(json::parse(R"({"method": "lora", "lora": {"rank": 16, "alpha": 8, "rslora": true}})", "t"));
  CHECK(f.lora.scaling() == 2.0);
  f = parse_finetune_config(json::parse(R"({"method": "esft", "esft": {"threshold": 0.5, "with": "full"},
                                              "experts": {"3": [5, 1]}})", "t"));
  CHECK(f.train.size() == 1 && f.train[0] == ParamGroup::Experts && f.esft.threshold == 0.5);
  CHECK(f.expert_selected(3, 1) && f.expert_selected(3, 5) && !f.expert_selected(3, 2) && f.expert_selected(4, 2));
  f = parse_finetune_config(json::parse(R"({"method": "esft", "esft": {"with": "lora", "score": "tokens"}, "lora": {}})", "t"));
  CHECK(f.train.empty() && f.lora.targets.size() == 1 && f.lora.targets[0] == LoraTarget::Experts);
  CHECK(!parse_finetune_config(json::Value::null()).enabled);
  // esft's section may be left out: its defaults.
  f = parse_finetune_config(json::parse(R"({"method": "esft", "experts": {"0": [1]}})", "t"));
  CHECK(f.has_esft && f.esft.threshold == 0.9 && f.train.size() == 1 && !f.uses_lora());
  // Written and read back: the same section.
  const std::string text = json::dump(finetune_config_to_json(f));
  CHECK_MSG(json::dump(finetune_config_to_json(parse_finetune_config(json::parse(text, "t")))) == text, text);
}

TEST(finetune_errors_name_the_field) {
  auto refused = [](const std::string& section, const std::string& needle) {
    moe_test::expect_error([&] { parse_finetune_config(json::parse(section, "t")); }, needle, section);
  };
  refused(R"({})", "finetune.method");
  refused(R"({"method": "qlora"})", "finetune.method");
  refused(R"({"method": "full", "train": ["experts", "mlp"]})", "finetune.train[1]");
  refused(R"({"method": "full", "train": ["mlp"]})", "\"embeddings\", \"attention\"");  // lists the valid names
  refused(R"({"method": "full", "train": ["router", "router"]})", "listed twice");
  refused(R"({"method": "lora"})", "finetune.lora");
  refused(R"({"method": "lora", "lora": {"rank": 0}})", "finetune.lora.rank");
  refused(R"({"method": "lora", "lora": {"alpha": 0}})", "finetune.lora.alpha");
  refused(R"({"method": "lora", "lora": {"dropout": 1}})", "finetune.lora.dropout");
  refused(R"({"method": "lora", "lora": {"targets": ["q_proj"]}})", "finetune.lora.targets[0]");
  refused(R"({"method": "lora", "lora": {"targets": []}})", "finetune.lora.targets");
  refused(R"({"method": "lora", "lora": {"rank": 4, "bias": "all"}})", "finetune.lora.bias");
  refused(R"({"method": "full", "lora": {"rank": 4}})", "finetune.lora");
  refused(R"({"method": "lora", "lora": {}, "esft": {}})", "finetune.esft");
  refused(R"({"method": "esft", "esft": {"threshold": 0}})", "finetune.esft.threshold");
  refused(R"({"method": "esft", "esft": {"score": "loss"}})", "finetune.esft.score");
  refused(R"({"method": "esft", "esft": {"with": "lora"}})", "finetune.lora");
  refused(R"({"method": "full", "experts": {"x": [1]}})", "finetune.experts.x");
  refused(R"({"method": "full", "experts": {"1": [1, 1]}})", "finetune.experts.1");
  refused(R"({"method": "full", "steps": 3})", "finetune.steps");
  // The section reader's own refusals (model/section_reader.h): the value's type, by its dotted path.
  refused(R"({"method": "lora", "lora": []})", "finetune.lora: must be a JSON object or null");
  refused(R"({"method": "lora", "lora": {"alpha": "8"}})", "finetune.lora.alpha: must be a number, got \"8\"");
  refused(R"({"method": "lora", "lora": {"rslora": 1}})", "finetune.lora.rslora: must be true or false");
  refused(R"({"method": "esft", "esft": {"score": 3}})", "finetune.esft.score: must be a string, got 3");
  // ... and a null field reads as absent: its default.
  CHECK(parse_finetune_config(json::parse(R"({"method": "lora", "lora": {"rank": null, "targets": null}})", "t"))
            .lora.rank == LoraConfig{}.rank);
  // What needs the model, and what cannot run with a fine-tune yet.
  const std::string deepseek = families()[3].second;
  moe_test::expect_error([&] { parse_config_text(config(deepseek, R"({"method": "full", "experts": {"0": [1]}})"), "t"); },
                         "finetune.experts.0", "a dense layer");
  moe_test::expect_error([&] { parse_config_text(config(deepseek, R"({"method": "full", "experts": {"1": [4]}})"), "t"); },
                         "finetune.experts.1", "an expert that does not exist");
  // Expert offload works with a fine-tune (test_offload_finetune).
  std::string offloaded = config(families()[1].second, R"({"method": "full"})");
  offloaded.insert(offloaded.size() - 1, R"(, "offload": )" + offload_test::host_offload(0.25, 1));
  CHECK(parse_config_text(offloaded, "t").offload.mode == OffloadMode::Host);
  // LoRA dropout is supported (test_lora, test_ops_lora): taken as given.
  CHECK(parse_config_text(config(families()[1].second, R"({"method": "lora", "lora": {"dropout": 0.1}})"), "t")
            .finetune.lora.dropout == 0.1);
  // Latent attention takes attention adapters: one on each projection (q or q_a and q_b, kv_a, kv_b, out).
  const EngineConfig mla = parse_config_text(config(deepseek, R"({"method": "lora", "lora": {}})"), "t");
  ParamLayout mla_layout(mla.model, mla.finetune);
  std::vector<std::string> attn;
  for (const LoraAdapter& a : mla_layout.adapters())
    if (a.module.rfind("layers.0.attn.", 0) == 0) attn.push_back(a.module);
  CHECK(!attn.empty());
  for (const std::string& want : {"attn.kv_a", "attn.kv_b", "attn.out"})
    CHECK(std::find(attn.begin(), attn.end(), "layers.0." + std::string(want)) != attn.end());
}

TEST(every_layout_tensor_has_a_group) {
  for (const auto& [name, model] : families()) {
    const EngineConfig cfg = parse_config_text(config(model), "t");
    ParamLayout layout(cfg.model);
    for (const ParamTensor& t : layout.tensors()) {
      const ParamGroup g = param_group(t.name);
      CHECK_MSG(g != ParamGroup::None || t.name.find("selection_bias") != std::string::npos, name + " " + t.name);
    }
  }
}

// Frozen tensors take no gradient or moment bytes, stay bit-identical through training, and the trained ones move.
TEST(frozen_tensors_have_no_state_and_are_never_written) {
  for (const auto& [family, model] : families())
    for (const std::string set : {kAttentionAndSomeExperts, kTheRest}) {
      const std::string label = family + " " + set;
      const EngineConfig cfg = parse_config_text(config(model, set), "t");
      auto be = make_backend("cpu", {1});
      Trainer t(cfg, *be);
      const ParamLayout& layout = t.model().layout();
      size_t trained_floats = 0;
      for (const ParamTensor& x : layout.tensors())
        if (expected_trained(x.name, set)) trained_floats += (x.numel + 15) / 16 * 16;
      for (size_t i = 0; i < layout.tensors().size(); ++i)
        CHECK_MSG(t.model().trainable().trains(i) == expected_trained(layout.tensors()[i].name, set),
                  label + ": " + layout.tensors()[i].name);
      CHECK_MSG(t.model().grad_bytes() + t.optimizer().state_bytes() == 3 * sizeof(float) * trained_floats, label);
      CHECK_MSG(t.model().num_grads() < t.model().num_params(), label);

      const std::vector<float> before = host(t.model().params(), t.model().num_params());
      offload_test::feed(t, 4);
      for (int s = 0; s < 4; ++s) t.step();
      const std::vector<float> after = host(t.model().params(), t.model().num_params());
      for (size_t i = 0; i < layout.tensors().size(); ++i) {
        const ParamTensor& x = layout.tensors()[i];
        const bool same = std::memcmp(before.data() + x.offset, after.data() + x.offset, x.numel * sizeof(float)) == 0;
        if (!t.model().trainable().trains(i)) CHECK_MSG(same, label + ": frozen " + x.name + " was written");
        else if (x.decay) CHECK_MSG(!same, label + ": trained " + x.name + " did not move");
      }
    }
}

// The backward with null gradient pointers for frozen tensors still carries every input gradient: the trained
// tensors' gradients equal full training's bit for bit.
TEST(trained_gradients_equal_full_trainings) {
  for (const auto& [family, model] : families())
    for (const std::string set : {kAttentionAndSomeExperts, kTheRest}) {
      const EngineConfig full_cfg = parse_config_text(config(model), "t");
      const EngineConfig ft_cfg = parse_config_text(config(model, set), "t");
      auto be = make_backend("cpu", {1});
      Model full(full_cfg.model, *be), ft(ft_cfg.model, *be, ComputeDtype::F32, ft_cfg.finetune);
      full.init(5);
      ft.init(5);
      const std::vector<int32_t> in = tokens(1, 32), tg = tokens(2, 32);
      for (Model* m : {&full, &ft}) {
        m->zero_grads();
        m->forward(in.data(), tg.data(), 2, 16);
        m->backward(1.0f);
      }
      const ParamLayout& layout = full.layout();
      int compared = 0;
      for (size_t i = 0; i < layout.tensors().size(); ++i) {
        if (!ft.trainable().trains(i)) continue;
        const ParamTensor& x = layout.tensors()[i];
        CHECK_MSG(std::memcmp(full.grads() + x.offset, ft.grads() + ft.trainable().grad_offset(i),
                              x.numel * sizeof(float)) == 0,
                  family + " " + set + ": gradient of " + x.name);
        ++compared;
      }
      CHECK(compared > 0);
    }
}

TEST(method_full_over_every_group_trains_like_no_section) {
  const std::string model = families()[1].second;  // no selection bias: every tensor trains either way
  std::vector<std::vector<float>> params;
  std::vector<std::vector<double>> losses;
  for (const std::string section : {std::string(), std::string(R"({"method": "full"})")}) {
    const EngineConfig cfg = parse_config_text(config(model, section), "t");
    auto be = make_backend("cpu", {1});
    Trainer t(cfg, *be);
    offload_test::feed(t, 5);
    losses.emplace_back();
    for (int s = 0; s < 5; ++s) losses.back().push_back(t.step().loss);
    params.push_back(host(t.model().params(), t.model().num_params()));
  }
  CHECK(offload_test::same_bits(losses[0], losses[1]));
  CHECK(offload_test::same_bits(params[0], params[1]));
}

TEST(a_finetune_resumes_bit_for_bit) {
  const EngineConfig cfg = parse_config_text(config(families()[3].second, kAttentionAndSomeExperts), "t");
  auto be = make_backend("cpu", {1});
  Trainer straight(cfg, *be);
  offload_test::feed(straight, 6);
  for (int s = 0; s < 6; ++s) straight.step();

  const std::string dir = moe_test::tmp_path("finetune_resume");
  {
    Trainer first(cfg, *be);
    offload_test::feed(first, 3);
    for (int s = 0; s < 3; ++s) first.step();
    first.save_checkpoint(dir);
  }
  Trainer resumed(cfg, *be);
  resumed.resume_from(dir);
  offload_test::feed(resumed, 3, 3);
  for (int s = 0; s < 3; ++s) resumed.step();
  CHECK(offload_test::same_bits(host(straight.model().params(), straight.model().num_params()),
                                host(resumed.model().params(), resumed.model().num_params())));
  CHECK(offload_test::same_bits(host(straight.optimizer().m(), straight.model().num_grads()),
                                host(resumed.optimizer().m(), resumed.model().num_grads())));
}

}  // namespace

TEST_MAIN()
