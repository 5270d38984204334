// Families as features: each family's defaults reach the config and the layout only through its
// features, and moe_model_describe reports what an engine built from the same config holds.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "include/moe_engine.h"
#include "model/config.h"
#include "model/features.h"
#include "model/params.h"
#include "testing.h"

using namespace moe;

namespace {

const std::string kTrain = R"("train": {"batch_size": 1, "seq_len": 8, "threads": 1})";

std::string config_for(const std::string& model) { return R"({"model": )" + model + ", " + kTrain + "}"; }

json::Value describe_ok(const std::string& config) {
  std::vector<char> out(1 << 16);
  const int64_t n = moe_model_describe(config.c_str(), out.data(), out.size());
  CHECK_MSG(n > 0 && n < static_cast<int64_t>(out.size()), "describe failed: " + std::string(out.data()));
  return json::parse(out.data(), "describe");
}

bool has_tensor(const ParamLayout& layout, const std::string& name) { return layout.find(name) != nullptr; }

}  // namespace

TEST(every_family_defaults_come_from_its_features) {
  for (const ModelFamily& family : model_families()) {
    const ModelConfig m =
        parse_model_config(json::parse(R"({"arch": ")" + std::string(family.name) + R"(", "n_layers": 2})"));
    CHECK(m.family == family.name);
    CHECK(m.qkv_bias == family.features.qkv_bias && m.tie_embeddings == family.features.tie_embeddings);
    const ModelFeatures f = model_features(m);
    const ParamLayout layout(m);
    CHECK_MSG(has_tensor(layout, "wpe") == (f.position == PositionKind::Learned), family.name);
    CHECK_MSG(has_tensor(layout, "layers.0.norm1.bias") == f.linear_bias, family.name);
    CHECK_MSG(has_tensor(layout, "layers.0.moe.experts.0.gate_up.weight") == f.gated_ffn(), family.name);
    CHECK_MSG(has_tensor(layout, "layers.0.moe.experts.0.fc.weight") == !f.gated_ffn(), family.name);
    CHECK_MSG(has_tensor(layout, "lm_head.weight") == !f.tie_embeddings, family.name);
    CHECK_MSG((f.rope_theta > 0) == (f.position == PositionKind::Rope), family.name);
  }
}

TEST(config_choices_among_the_features_apply) {
  const ModelConfig m = parse_model_config(json::parse(
      R"({"arch": "mixtral", "n_layers": 2, "moe_every": 2, "qkv_bias": true, "tie_embeddings": true,
          "shared_expert_d_ff": 8, "shared_expert_gate": true})"));
  const ModelFeatures f = model_features(m);
  CHECK(f.qkv_bias && f.tie_embeddings && f.shared_expert && f.shared_expert_gate && f.moe_every == 2);
  const ParamLayout layout(m);
  CHECK(has_tensor(layout, "layers.0.mlp.gate_up.weight") && has_tensor(layout, "layers.1.moe.shared_gate.weight"));
  CHECK(has_tensor(layout, "layers.0.attn.qkv.bias") && !has_tensor(layout, "lm_head.weight"));
}

TEST(family_rules_name_the_field) {
  auto rejects = [](const std::string& model, const std::string& needle) {
    try {
      parse_model_config(json::parse(model));
      CHECK_MSG(false, "accepted " + model);
    } catch (const EngineError& e) {
      CHECK_MSG(std::string(e.what()).find(needle) != std::string::npos, std::string(e.what()) + " lacks " + needle);
    }
  };
  rejects(R"({"arch": "llama"})", "model.arch: \"llama\" is not supported; use one of \"gpt-moe\", \"mixtral\"");
  rejects(R"({"n_layers": 2})", "model.arch: required");
  rejects(R"({"arch": "gpt-moe", "n_kv_heads": 2})", "model.n_kv_heads: gpt-moe uses full multi-head attention");
  rejects(R"({"arch": "gpt-moe", "qkv_bias": false})", "model.qkv_bias: gpt-moe always has biases");
  rejects(R"({"arch": "mixtral", "d_model": 12, "n_heads": 4})", "model.n_heads: RoPE needs an even head size");
  rejects(R"({"arch": "mixtral", "head_dim": 5})", "model.head_dim: RoPE needs an even head size");
  rejects(R"({"arch": "mixtral", "n_layers": 2, "dense_layers": [1, 0]})", "model.dense_layers[1]: the list must be increasing");
  rejects(R"({"arch": "mixtral", "n_layers": 2, "dense_layers": [2]})", "model.dense_layers[0]: 2 is out of range");
  rejects(R"({"arch": "mixtral", "n_layers": 2, "dense_layers": [0, 1]})", "model.dense_layers: leaves no MoE layer");
}

TEST(dense_layers_head_dim_and_router_fields_round_trip) {
  const ModelConfig m = parse_model_config(json::parse(
      R"({"arch": "mixtral", "n_layers": 4, "d_model": 32, "n_heads": 4, "head_dim": 16, "dense_layers": [0, 2],
          "n_experts": [4, 6], "routed_scaling_factor": 2.5, "selection_bias": true})"));
  CHECK(m.head_size() == 16 && m.attn_width() == 64 && m.n_moe_layers() == 2 && m.experts_at(3) == 6);
  const ParamLayout layout(m);
  CHECK(layout.find("layers.0.attn.out.weight")->shape == std::vector<int64_t>({32, 64}));
  CHECK(has_tensor(layout, "layers.1.moe.router.selection_bias") && has_tensor(layout, "layers.2.mlp.gate_up.weight"));
  const ModelConfig back = parse_model_config(model_config_to_json(m));
  CHECK(back.dense_layers == m.dense_layers && back.head_dim == 16 && back.routed_scaling == 2.5 && back.selection_bias);
  // Defaults are not written, so configs without these fields stay as they were.
  const json::Value plain = model_config_to_json(parse_model_config(json::parse(R"({"arch": "mixtral"})")));
  CHECK(!plain.find("dense_layers") && !plain.find("head_dim") && !plain.find("selection_bias"));
}

TEST(describe_matches_the_layout_an_engine_builds) {
  for (const ModelFamily& family : model_families()) {
    const std::string model = R"({"arch": ")" + std::string(family.name) +
                              R"(", "n_layers": 3, "moe_every": 1, "n_experts": [4, 2, 3], "d_model": 16,
                                 "n_heads": 2, "max_seq_len": 8, "d_ff": 24, "expert_d_ff": 12, "vocab_size": 40})";
    const json::Value d = describe_ok(config_for(model));
    const ModelConfig m = parse_model_config(json::parse(model));
    const ParamLayout layout(m);
    const json::Value& params = *d.find("params");
    CHECK_MSG(params.find("padded")->find("total")->number == static_cast<double>(layout.total()), family.name);
    double raw = 0, experts = 0;
    for (const ParamTensor& t : layout.tensors()) {
      raw += static_cast<double>(t.numel);
      if (t.name.find(".moe.experts.") != std::string::npos) experts += static_cast<double>(t.numel);
    }
    CHECK_MSG(params.find("total")->number == raw && params.find("experts")->number == experts, family.name);
    double groups = 0;
    for (const auto& [name, v] : params.find("groups")->object) groups += v.number;
    CHECK_MSG(groups == raw, family.name);
    CHECK_MSG(params.find("per_expert")->array.size() == 3 && params.find("experts_per_layer")->array[1].number == 2,
              family.name);
    const json::Value& mem = *params.find("memory_bytes");
    CHECK_MSG(mem.find("dense")->find("params")->number + mem.find("experts")->find("params")->number ==
                  4.0 * static_cast<double>(layout.total()),
              family.name);
    CHECK_MSG(d.find("features")->find("activation")->string == ffn_activation_name(family.features.activation),
              family.name);
    CHECK_MSG(json::dump(*d.find("config")->find("model")) == json::dump(model_config_to_json(m)), family.name);
  }
}

TEST(describe_reports_its_length_and_errors) {
  const std::string config = config_for(R"({"arch": "mixtral"})");
  char small[8];
  const int64_t n = moe_model_describe(config.c_str(), small, sizeof small);
  CHECK(n > static_cast<int64_t>(sizeof small) && std::string(small).size() == sizeof small - 1);
  CHECK(moe_model_describe(config.c_str(), nullptr, 0) == n);
  std::vector<char> out(256);
  CHECK(moe_model_describe(config_for(R"({"arch": "mixtral", "top_k": 9})").c_str(), out.data(), out.size()) == -1);
  CHECK_MSG(std::string(out.data()).find("model.top_k") != std::string::npos, out.data());
  CHECK(moe_model_describe(nullptr, out.data(), out.size()) == -1);
}

TEST_MAIN()
