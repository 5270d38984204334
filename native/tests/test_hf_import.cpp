// Hugging Face interchange, import side: hand-written HF checkpoints (mixed dtypes, one file or shards with an
// index) landing in the exact places, and the rejection of mismatched tensors and of configs the engine cannot
// express.
#include <cstring>
#include <string>
#include <vector>

#include "hf_fixture.h"

using namespace moe;
using namespace hf_test;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;

TEST(handwritten_mixtral_lands_in_place) {
  const HfDirWriter hf = mixtral_tensors();
  const std::string dir = tmp_path("hand-mixtral");
  hf.write(dir, kMixtralConfig, false);
  check_mixtral_placement(dir, hf);
}

TEST(sharded_index_loads) {
  const HfDirWriter hf = mixtral_tensors();
  const std::string dir = tmp_path("hand-mixtral-sharded");
  hf.write(dir, kMixtralConfig, true);
  CHECK(!fs::exists(fs::join(dir, "model.safetensors")));
  check_mixtral_placement(dir, hf);
}

TEST(handwritten_qwen2_moe_lands_in_place) {
  // Layer 0 dense (decoder_sparse_step 2), layer 1 MoE with a gated shared expert; tied embeddings;
  // a sliding window that is switched off must not matter.
  const char* config = R"({
    "model_type": "qwen2_moe", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 10,
    "moe_intermediate_size": 4, "shared_expert_intermediate_size": 6, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32, "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0, "tie_word_embeddings": true, "hidden_act": "silu", "num_experts": 2,
    "num_experts_per_tok": 1, "norm_topk_prob": false, "decoder_sparse_step": 2, "mlp_only_layers": [],
    "use_sliding_window": false, "sliding_window": 4, "max_window_layers": 2, "router_aux_loss_coef": 0.001
  })";
  HfDirWriter hf;
  hf.add("model.embed_tokens.weight", {16, 8});
  for (int l = 0; l < 2; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".", a = h + "self_attn.";
    hf.add(h + "input_layernorm.weight", {8});
    hf.add(a + "q_proj.weight", {8, 8});
    hf.add(a + "q_proj.bias", {8});
    hf.add(a + "k_proj.weight", {4, 8});
    hf.add(a + "k_proj.bias", {4});
    hf.add(a + "v_proj.weight", {4, 8});
    hf.add(a + "v_proj.bias", {4});
    hf.add(a + "o_proj.weight", {8, 8});
    hf.add(h + "post_attention_layernorm.weight", {8});
    if (l == 0) {
      hf.add(h + "mlp.gate_proj.weight", {10, 8});
      hf.add(h + "mlp.up_proj.weight", {10, 8});
      hf.add(h + "mlp.down_proj.weight", {8, 10});
      continue;
    }
    hf.add(h + "mlp.gate.weight", {2, 8});
    for (int e = 0; e < 2; ++e) {
      const std::string x = h + "mlp.experts." + std::to_string(e) + ".";
      hf.add(x + "gate_proj.weight", {4, 8});
      hf.add(x + "up_proj.weight", {4, 8});
      hf.add(x + "down_proj.weight", {8, 4});
    }
    hf.add(h + "mlp.shared_expert.gate_proj.weight", {6, 8});
    hf.add(h + "mlp.shared_expert.up_proj.weight", {6, 8});
    hf.add(h + "mlp.shared_expert.down_proj.weight", {8, 6});
    hf.add(h + "mlp.shared_expert_gate.weight", {1, 8});
  }
  hf.add("model.norm.weight", {8});
  const std::string dir = tmp_path("hand-qwen2");
  hf.write(dir, config, false);

  const ModelConfig c = read_checkpoint_model_config(dir);
  CHECK(c.moe_every == 2 && c.is_moe_layer(1) && !c.is_moe_layer(0) && c.n_experts == std::vector<int>({2}));
  CHECK(c.d_ff == 10 && c.expert_d_ff == 4 && c.shared_expert_d_ff == 6 && c.shared_expert_gate);
  CHECK(c.qkv_bias && c.tie_embeddings && !c.renormalize && c.top_k == 1 && c.n_kv_heads == 1);
  CHECK(c.norm_eps == 1e-6 && c.rope_theta == 10000.0 && c.max_seq_len == 32);

  auto be = make_backend("cpu", {2});
  Model m(c, *be);
  load_weights(dir, m);
  const std::vector<float> p = host_params(m);
  for (int l = 0; l < 2; ++l) {
    const std::string o = "layers." + std::to_string(l) + ".", a = "model.layers." + std::to_string(l) + ".self_attn.";
    check_rows(m, p, o + "attn.qkv.weight", 0, hf, a + "q_proj.weight");
    check_rows(m, p, o + "attn.qkv.weight", 8, hf, a + "k_proj.weight");
    check_rows(m, p, o + "attn.qkv.weight", 12, hf, a + "v_proj.weight");
    check_rows(m, p, o + "attn.qkv.bias", 0, hf, a + "q_proj.bias");
    check_rows(m, p, o + "attn.qkv.bias", 8, hf, a + "k_proj.bias");
    check_rows(m, p, o + "attn.qkv.bias", 12, hf, a + "v_proj.bias");
  }
  check_rows(m, p, "layers.0.mlp.gate_up.weight", 0, hf, "model.layers.0.mlp.gate_proj.weight");
  check_rows(m, p, "layers.0.mlp.gate_up.weight", 10, hf, "model.layers.0.mlp.up_proj.weight");
  check_rows(m, p, "layers.0.mlp.down.weight", 0, hf, "model.layers.0.mlp.down_proj.weight");
  check_rows(m, p, "layers.1.moe.router.weight", 0, hf, "model.layers.1.mlp.gate.weight");
  check_rows(m, p, "layers.1.moe.experts.1.gate_up.weight", 0, hf, "model.layers.1.mlp.experts.1.gate_proj.weight");
  check_rows(m, p, "layers.1.moe.experts.1.gate_up.weight", 4, hf, "model.layers.1.mlp.experts.1.up_proj.weight");
  check_rows(m, p, "layers.1.moe.experts.1.down.weight", 0, hf, "model.layers.1.mlp.experts.1.down_proj.weight");
  check_rows(m, p, "layers.1.moe.shared.gate_up.weight", 0, hf, "model.layers.1.mlp.shared_expert.gate_proj.weight");
  check_rows(m, p, "layers.1.moe.shared.gate_up.weight", 6, hf, "model.layers.1.mlp.shared_expert.up_proj.weight");
  check_rows(m, p, "layers.1.moe.shared.down.weight", 0, hf, "model.layers.1.mlp.shared_expert.down_proj.weight");
  check_rows(m, p, "layers.1.moe.shared_gate.weight", 0, hf, "model.layers.1.mlp.shared_expert_gate.weight");
  check_rows(m, p, "wte", 0, hf, "model.embed_tokens.weight");
  CHECK(m.layout().find("lm_head.weight") == nullptr);
}

TEST(olmoe_qk_norms_land_in_place) {
  auto be = make_backend("cpu", {2});
  Model a(olmoe_cfg(), *be);
  std::vector<float> values = moe_test::random_vector(a.num_params(), 5);
  be->copy(a.params(), values.data(), values.size() * sizeof(float));
  const std::string dir = tmp_path("olmoe-qknorm");
  export_hf(dir, a, "olmoe", st::DType::F32);
  st::Reader r(fs::join(dir, "model.safetensors"));
  const std::vector<float> p = host_params(a);
  for (const char* which : {"q_norm", "k_norm"}) {
    const st::TensorInfo* t = nullptr;
    for (const st::TensorInfo& i : r.tensors())
      if (i.name == std::string("model.layers.1.self_attn.") + which + ".weight") t = &i;
    CHECK_MSG(t != nullptr, std::string("no ") + which + " tensor in the export");
    if (!t) continue;
    const ParamTensor* ours = a.layout().find(std::string("layers.1.attn.") + which + ".weight");
    CHECK(t->shape == ours->shape);
    CHECK(std::memcmp(r.data(*t), p.data() + ours->offset, ours->numel * sizeof(float)) == 0);
  }
}

TEST(hf_load_rejects_mismatches) {
  const HfDirWriter hf = mixtral_tensors();
  const std::string dir = tmp_path("hand-mixtral-mismatch");
  hf.write(dir, kMixtralConfig, false);
  ModelConfig c = read_checkpoint_model_config(dir);
  c.tie_embeddings = true;  // the file's lm_head.weight then has no place
  auto be = make_backend("cpu", {2});
  Model m(c, *be);
  m.init(4);
  const std::vector<float> before = host_params(m);
  expect_error([&] { load_weights(dir, m); }, {"lm_head.weight", "unexpected"}, "tied");
  c = read_checkpoint_model_config(dir);
  c.n_kv_heads = 4;
  Model g(c, *be);
  expect_error([&] { load_weights(dir, g); }, {"model.layers.0.self_attn.k_proj.weight", "[4, 8]", "[8, 8]"}, "gqa");
  c = read_checkpoint_model_config(dir);
  c.qkv_bias = true;  // expressible as our model, not as HF Mixtral
  Model q(c, *be);
  expect_error([&] { load_weights(dir, q); }, {"config.json", "model.qkv_bias"}, "bias");
  CHECK(std::memcmp(before.data(), host_params(m).data(), before.size() * 4) == 0);
}

TEST(hf_config_rejections) {
  // The Mixtral config with some fields replaced (values given as JSON text).
  auto with = [](const std::vector<std::pair<std::string, std::string>>& fields) {
    json::Value v = json::parse(kMixtralConfig);
    for (const auto& [k, text] : fields) v.set(k, json::parse(text));
    return json::dump(v);
  };
  auto attempt = [&](const std::string& text, const std::vector<std::string>& needles) {
    expect_error([&] { hf_to_model_config(json::parse(text), "cfg/config.json"); }, needles, needles.front());
  };
  attempt(with({{"sliding_window", "16"}}), {"sliding_window", "cfg/config.json"});
  attempt(with({{"rope_scaling", R"({"type": "linear", "factor": 2.0})"}}), {"rope_scaling"});
  attempt(with({{"hidden_act", "\"gelu\""}}), {"hidden_act", "gelu"});
  attempt(with({{"head_dim", "4"}}), {"head_dim"});
  attempt(with({{"router_jitter_noise", "0.1"}}), {"router_jitter_noise"});
  // The one reader of config.json fields (train/hf_fields.h), for the top level and nested objects alike.
  attempt(with({{"tie_word_embeddings", "1"}}), {"cfg/config.json: field 'tie_word_embeddings' must be true or false, got 1"});
  attempt(with({{"num_local_experts", "2.5"}}), {"field 'num_local_experts' must be a non-negative whole number, got 2.5"});
  attempt(with({{"rope_scaling", R"({"type": "yarn", "factor": "4"})"}}), {"field 'factor' must be a number, got \"4\""});
  // An unknown model_type is refused naming every supported one.
  std::vector<std::string> unknown = {"\"llama\" is not supported"};
  for (const HfFamily& f : hf_families()) unknown.push_back(std::string("\"") + f.model_type + "\"");
  attempt(with({{"model_type", "\"llama\""}}), unknown);
  attempt(with({{"num_experts_per_tok", "4"}}), {"model.top_k", "converted"});
  attempt(with({{"num_attention_heads", "3"}}), {"model.n_heads"});
  attempt(R"({"model_type": "mixtral", "hidden_size": 8})", {"vocab_size", "required"});
  attempt(R"({"model_type": "qwen2_moe", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 8,
      "moe_intermediate_size": 4, "shared_expert_intermediate_size": 4, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_experts": 2, "num_experts_per_tok": 1, "mlp_only_layers": [2]})",
          {"mlp_only_layers", "[0, 2)"});
  attempt(R"({"model_type": "olmoe", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 2, "num_experts": 2, "num_experts_per_tok": 1,
      "clip_qkv": 0})",
          {"clip_qkv", "positive"});
  const std::string qwen3 = R"({"model_type": "qwen3_moe", "vocab_size": 16, "hidden_size": 8,
      "intermediate_size": 8, "moe_intermediate_size": 4, "num_hidden_layers": 2, "num_attention_heads": 2,
      "num_key_value_heads": 1, "num_experts": 2, "num_experts_per_tok": 1, "head_dim": 6)";
  attempt(qwen3 + R"(, "use_sliding_window": true})", {"use_sliding_window", "Qwen3-MoE"});
  attempt(with({{"attention_bias", "true"}}), {"attention_bias"});
  attempt(qwen3 + R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}})", {"rope_scaling", "only \"yarn\""});
  attempt(qwen3 + R"(, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})", {"rope_parameters", "only \"yarn\""});
  attempt(qwen3 + R"(, "rope_scaling": {"rope_type": "yarn"}})", {"rope_scaling", "'factor' is required"});
  // Accepted: OLMoE's clip_qkv, Qwen-MoE dense layers by list (any order) and by step, Qwen3's own head size.
  const ModelConfig olmoe = hf_to_model_config(json::parse(R"({"model_type": "olmoe", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_experts": 2,
      "num_experts_per_tok": 1, "clip_qkv": 8.0})"), "config.json");
  CHECK(olmoe.clip_qkv == 8.0 && olmoe.qk_norm == QkNorm::Projection);
  const ModelConfig qwen2 = hf_to_model_config(json::parse(R"({"model_type": "qwen2_moe", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 8, "moe_intermediate_size": 4, "shared_expert_intermediate_size": 4,
      "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2, "num_experts": 2,
      "num_experts_per_tok": 1, "mlp_only_layers": [3, 0, 3], "decoder_sparse_step": 1})"), "config.json");
  const ModelConfig qwen2_nobias = hf_to_model_config(json::parse(R"({"model_type": "qwen2_moe", "vocab_size": 16,
      "hidden_size": 8, "intermediate_size": 8, "moe_intermediate_size": 4, "shared_expert_intermediate_size": 4,
      "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "num_experts": 2,
      "num_experts_per_tok": 1, "qkv_bias": false})"), "config.json");
  CHECK(!qwen2_nobias.qkv_bias && !qwen2_nobias.out_bias);
  CHECK(qwen2.dense_layers == (std::vector<int>{0, 3}) && qwen2.n_moe_layers() == 2 && qwen2.n_experts.size() == 2);
  const ModelConfig q3 = hf_to_model_config(json::parse(qwen3 + "}"), "config.json");
  CHECK(q3.head_dim == 6 && q3.qk_norm == QkNorm::Head && !q3.renormalize && q3.n_kv_heads == 1);
  CHECK(!q3.qkv_bias && !q3.out_bias && q3.rope_scaling.type == RopeScalingType::None);
  // YaRN on any RoPE family, from rope_scaling or transformers' newer rope_parameters (rope_theta inside it).
  const ModelConfig q3y = hf_to_model_config(json::parse(qwen3 + R"(, "rope_scaling": {"rope_type": "yarn",
      "factor": 4.0, "original_max_position_embeddings": 32768}})"), "config.json");
  CHECK(q3y.rope_scaling.type == RopeScalingType::Yarn && q3y.rope_scaling.factor == 4.0 &&
        q3y.rope_scaling.original_max_position_embeddings == 32768 && q3y.rope_scaling.truncate);
  const ModelConfig q3p = hf_to_model_config(json::parse(qwen3 + R"(, "rope_parameters": {"rope_type": "yarn",
      "rope_theta": 5000.0, "factor": 2.0}})"), "config.json");
  CHECK(q3p.rope_scaling.type == RopeScalingType::Yarn && q3p.rope_scaling.factor == 2.0 && q3p.rope_theta == 5000.0);
  const ModelConfig q3d = hf_to_model_config(json::parse(qwen3 + R"(, "rope_parameters": {"rope_type": "default",
      "rope_theta": 5000.0}})"), "config.json");
  CHECK(q3d.rope_scaling.type == RopeScalingType::None && q3d.rope_theta == 5000.0);
  // Qwen3-MoE's attention_bias: biases on q/k/v and o; Qwen2-MoE's qkv_bias: on q/k/v only (true by default).
  const ModelConfig q3b = hf_to_model_config(json::parse(qwen3 + R"(, "attention_bias": true})"), "config.json");
  CHECK(q3b.qkv_bias && q3b.out_bias && model_features(q3b).has_out_bias());
  CHECK(qwen2.qkv_bias && !qwen2.out_bias);
  // Values that do not change the math are fine: a window as long as the context, a null rope_scaling.
  const ModelConfig ok = hf_to_model_config(
      json::parse(with({{"sliding_window", "64"}, {"rope_scaling", "null"}, {"head_dim", "2"}})), "config.json");
  CHECK(ok.max_seq_len == 64);
}

TEST_MAIN()
