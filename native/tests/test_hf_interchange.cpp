// Hugging Face interchange, export side: export -> import round trips for every family the interchange writes
// (F32 bitwise, BF16 to the rounding), the training choices an export allows, and the rejection of what a layout
// cannot express.
#include <cstring>
#include <string>
#include <vector>

#include "hf_fixture.h"

using namespace moe;
using namespace hf_test;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;

TEST(export_import_mixtral) {
  check_export_roundtrip(mixtral_cfg(), "mixtral", st::DType::F32);
  check_export_roundtrip(mixtral_cfg(), "mixtral", st::DType::BF16);
}

TEST(export_import_qwen2_moe) {
  check_export_roundtrip(qwen2_cfg(), "qwen2_moe", st::DType::F32);
  check_export_roundtrip(qwen2_cfg(), "qwen2_moe", st::DType::BF16);
  const json::Value hf = json::parse(fs::read_file(fs::join(tmp_path("export-qwen2_moe-f32"), "config.json"), 1 << 20));
  CHECK(hf.find("decoder_sparse_step")->number == 2);
  CHECK(hf.find("shared_expert_intermediate_size")->number == 12);
  CHECK(hf.find("moe_intermediate_size")->number == 8 && hf.find("intermediate_size")->number == 20);
  CHECK(!hf.find("norm_topk_prob")->boolean);
}

TEST(export_import_olmoe) {
  check_export_roundtrip(olmoe_cfg(), "olmoe", st::DType::F32);
  check_export_roundtrip(olmoe_cfg(), "olmoe", st::DType::BF16);
  const json::Value hf = json::parse(fs::read_file(fs::join(tmp_path("export-olmoe-f32"), "config.json"), 1 << 20));
  CHECK(hf.find("clip_qkv")->number == 4.5);
  const ModelConfig back = read_checkpoint_model_config(tmp_path("export-olmoe-f32"));
  CHECK(back.qk_norm == QkNorm::Projection && back.clip_qkv == 4.5);
}

TEST(export_import_deepseek) {
  for (bool v3 : {false, true})
    for (st::DType dtype : {st::DType::F32, st::DType::BF16})
      check_export_roundtrip(deepseek_cfg(v3), v3 ? "deepseek_v3" : "deepseek_v2", dtype);
  // Each DeepSeek layout refuses the other's router.
  auto be = make_backend("cpu", {2});
  Model v2(deepseek_cfg(false), *be), v3(deepseek_cfg(true), *be);
  expect_error([&] { export_hf(tmp_path("export-ds-bad"), v2, "deepseek_v3", st::DType::F32); }, {"model.router"},
               "v2 as v3");
  expect_error([&] { export_hf(tmp_path("export-ds-bad"), v3, "deepseek_v2", st::DType::F32); },
               {"model.selection_bias"}, "v3 as v2");
  expect_error([&] { export_hf(tmp_path("export-ds-bad"), v2, "mixtral", st::DType::F32); }, {"model.arch"},
               "latent as mixtral");
}

TEST(export_import_qwen3_moe) {
  check_export_roundtrip(qwen3_cfg(), "qwen3_moe", st::DType::F32);
  check_export_roundtrip(qwen3_cfg(), "qwen3_moe", st::DType::BF16);
  const json::Value hf = json::parse(fs::read_file(fs::join(tmp_path("export-qwen3_moe-f32"), "config.json"), 1 << 20));
  CHECK(hf.find("head_dim")->number == 6 && hf.find("decoder_sparse_step")->number == 2);
  CHECK(json::dump(*hf.find("mlp_only_layers")) == "[3]");
  const ModelConfig back = read_checkpoint_model_config(tmp_path("export-qwen3_moe-f32"));
  CHECK(back.qk_norm == QkNorm::Head && back.head_dim == 6 && back.dense_layers == std::vector<int>{3} &&
        back.n_moe_layers() == 1);
  CHECK(!hf.find("attention_bias")->boolean && !back.qkv_bias && !back.out_bias);
  // attention_bias: q/k/v and o biases, both ways.
  ModelConfig biased = qwen3_cfg();
  biased.qkv_bias = biased.out_bias = true;
  check_export_roundtrip(biased, "qwen3_moe", st::DType::F32);
  const json::Value hb = json::parse(fs::read_file(fs::join(tmp_path("export-qwen3_moe-f32"), "config.json"), 1 << 20));
  CHECK(hb.find("attention_bias")->boolean);
  const st::TensorSet ts(tmp_path("export-qwen3_moe-f32"));
  CHECK(ts.find("model.layers.0.self_attn.o_proj.bias") && ts.find("model.layers.3.self_attn.k_proj.bias"));
  const ModelConfig bb = read_checkpoint_model_config(tmp_path("export-qwen3_moe-f32"));
  CHECK(bb.qkv_bias && bb.out_bias);
}

TEST(export_allows_training_choices) {
  // Capacity and z-loss are training choices with no HF field: the export succeeds and drops them.
  ModelConfig c = mixtral_cfg();
  c.capacity_factor = 1.25;
  c.z_loss_coef = 0.001;
  auto be = make_backend("cpu", {2});
  Model m(c, *be);
  m.init(1);
  const std::string dir = tmp_path("export-capacity");
  export_hf(dir, m, "mixtral", st::DType::F32);
  const ModelConfig got = read_checkpoint_model_config(dir);
  CHECK(got.capacity_factor == 0 && got.z_loss_coef == 0 && got.expert_d_ff == c.expert_d_ff);
}

TEST(export_rejects_what_the_layout_cannot_express) {
  auto be = make_backend("cpu", {2});
  auto attempt = [&](ModelConfig c, const std::string& type, const std::vector<std::string>& needles,
                     st::DType dtype = st::DType::F32) {
    Model m(c, *be);
    const std::string dir = tmp_path("export-bad");
    expect_error([&] { export_hf(dir, m, type, dtype); }, needles, type + " " + needles.front());
    CHECK(!fs::exists(dir));
  };
  ModelConfig gpt;
  gpt.n_experts.assign(gpt.n_moe_layers(), 4);
  attempt(gpt, "mixtral", {"model.arch", "gpt-moe"});
  ModelConfig c = mixtral_cfg();
  c.residual_mlp = true;
  attempt(c, "mixtral", {"model.residual_mlp"});
  c = olmoe_cfg();
  c.n_experts = {4, 2};
  attempt(c, "olmoe", {"model.n_experts", "olmoe"});
  c = mixtral_cfg();
  c.shared_expert_d_ff = 8;
  attempt(c, "mixtral", {"model.shared_expert_d_ff"});
  c = mixtral_cfg();
  c.renormalize = false;
  attempt(c, "mixtral", {"model.renormalize"});
  c = mixtral_cfg();
  c.moe_every = 2;
  c.n_experts = {4};
  attempt(c, "mixtral", {"model.moe_every"});
  c = mixtral_cfg();
  c.qkv_bias = true;
  attempt(c, "mixtral", {"model.qkv_bias"});
  c.out_bias = true;
  attempt(c, "qwen3_moe", {"model.qk_norm"});
  c = qwen3_cfg();
  c.qkv_bias = true;  // without the out-projection's: attention_bias cannot say it
  attempt(c, "qwen3_moe", {"model.out_bias", "attention_bias"});
  c = qwen2_cfg();
  c.shared_expert_gate = false;
  attempt(c, "qwen2_moe", {"model.shared_expert_gate"});
  attempt(olmoe_cfg(), "olmoe", {"F64", "F32, BF16 or F16"}, st::DType::F64);
  attempt(mixtral_cfg(), "llama", {"llama", "mixtral"});
  attempt(mixtral_cfg(), "olmoe", {"model.qk_norm", "projection"});
  attempt(olmoe_cfg(), "qwen3_moe", {"model.qk_norm", "head"});
  c = mixtral_cfg();
  c.dense_layers = {1};
  c.n_layers = 3;
  c.n_experts = {4, 4};
  attempt(c, "mixtral", {"model.dense_layers"});
  c = mixtral_cfg();
  c.head_dim = 6;
  attempt(c, "mixtral", {"model.head_dim"});
  c = mixtral_cfg();
  c.clip_qkv = 2.0;
  attempt(c, "mixtral", {"model.clip_qkv"});
  // A selection bias goes only to a type whose table row names where it stores it.
  const std::map<std::string, ModelConfig> base = {
      {"mixtral", mixtral_cfg()}, {"qwen2_moe", qwen2_cfg()}, {"olmoe", olmoe_cfg()}, {"qwen3_moe", qwen3_cfg()},
      {"deepseek_v2", deepseek_cfg(false)},
      {"gpt_oss", parse_model_config(json::parse(R"({"arch": "gpt-oss", "vocab_size": 32, "d_model": 16, "n_layers": 2,
          "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "max_seq_len": 8, "d_ff": 12, "n_experts": 4, "top_k": 2,
          "sliding_window": 3, "sliding_layers": [0]})"))}};
  for (const HfFamily& f : hf_families()) {
    if (f.names.selection_bias) continue;
    const auto it = base.find(f.model_type);
    CHECK_MSG(it != base.end(), std::string("no test config for ") + f.model_type);
    if (it == base.end()) continue;
    c = it->second;
    c.selection_bias = true;
    attempt(c, f.model_type, {"model.selection_bias", f.model_type});
  }
}

TEST_MAIN()
