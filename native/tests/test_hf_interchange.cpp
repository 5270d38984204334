// Hugging Face interchange: export -> import round trips for mixtral, qwen2_moe and olmoe (F32 bitwise, BF16
// to the rounding), hand-written HF checkpoints landing in the exact places, sharded loading, and the
// rejection of configs, tensors and models the other side cannot express.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/half.h"
#include "core/json.h"
#include "model/model.h"
#include "test_files.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/hf_interchange.h"
#include "train/safetensors.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;


namespace {

std::vector<float> host_params(Model& m) {
  std::vector<float> h(m.num_params());
  m.backend().copy(h.data(), m.params(), h.size() * sizeof(float));
  return h;
}

std::string config_str(const ModelConfig& m) { return json::dump(model_config_to_json(m)); }

ModelConfig mixtral_cfg() {
  ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.max_seq_len = 16;
  m.d_ff = m.expert_d_ff = 12;
  m.n_experts = {4, 4};
  m.top_k = 2;
  m.tie_embeddings = false;
  m.qkv_bias = false;
  m.rope_theta = 1e6;
  return m;
}

// Dense layers 0 and 2 (decoder_sparse_step 2), a gated shared expert and q/k/v biases.
ModelConfig qwen2_cfg() {
  ModelConfig m = mixtral_cfg();
  m.n_layers = 4;
  m.moe_every = 2;
  m.d_ff = 20;
  m.expert_d_ff = 8;
  m.n_experts = {4, 4};
  m.renormalize = false;
  m.shared_expert_d_ff = 12;
  m.shared_expert_gate = true;
  m.qkv_bias = true;
  m.norm_eps = 1e-6;
  m.aux_loss_coef = 0.001;
  return m;
}

ModelConfig olmoe_cfg() {
  ModelConfig m = mixtral_cfg();
  m.renormalize = false;
  m.tie_embeddings = true;
  m.n_experts = {3, 3};
  m.qk_norm = QkNorm::Projection;
  m.clip_qkv = 4.5;
  return m;
}

// Qwen3-MoE: per-head q/k norm, an explicit head size, a dense layer listed and one by step.
ModelConfig qwen3_cfg() {
  ModelConfig m = mixtral_cfg();
  m.n_layers = 4;
  m.moe_every = 2;
  m.dense_layers = {3};
  m.head_dim = 6;
  m.d_ff = 20;
  m.expert_d_ff = 8;
  m.n_experts = {4};
  m.qk_norm = QkNorm::Head;
  m.norm_eps = 1e-6;
  return m;
}

// DeepSeek-V2 (group_limited_greedy, q_lora_rank null) and V3 (sigmoid noaux_tc, q_lora_rank set) shapes with
// latent attention, YaRN, a dense first layer and shared experts.
ModelConfig deepseek_cfg(bool v3) {
  ModelConfig m = mixtral_cfg();
  m.n_layers = 3;
  m.n_kv_heads = m.n_heads;
  m.dense_layers = {0};
  m.d_ff = 20;
  m.expert_d_ff = 8;
  m.shared_expert_d_ff = 16;
  m.n_experts = {4, 4};
  m.norm_eps = 1e-6;
  m.aux_loss_coef = 0;
  m.latent = {v3 ? 6 : 0, 8, 4, 4, 6, true, v3};
  m.rope_scaling.type = RopeScalingType::Yarn;
  m.rope_scaling.factor = 4;
  m.rope_scaling.original_max_position_embeddings = 4;
  m.rope_scaling.mscale = 1;
  m.rope_scaling.mscale_all_dim = 0.5;
  if (v3) {
    m.router = {RouterScoring::Sigmoid, TopkSelection::NoAuxTc, 2, 1};
    m.selection_bias = true;
    m.routed_scaling = 2.5;
  } else {
    m.router = {RouterScoring::Softmax, TopkSelection::GroupLimited, 2, 1};
    m.renormalize = false;
    m.routed_scaling = 1.5;
  }
  return m;
}

void check_export_roundtrip(const ModelConfig& mc, const std::string& type, st::DType dtype) {
  const std::string label = type + (dtype == st::DType::BF16 ? " bf16" : " f32");
  auto be = make_backend("cpu", {2});
  Model a(mc, *be);
  // Random values everywhere (biases and norms included, which init would leave at 0 or 1).
  std::vector<float> values = moe_test::random_vector(a.num_params(), 3);
  be->copy(a.params(), values.data(), values.size() * sizeof(float));
  const std::string dir = tmp_path("export-" + type + (dtype == st::DType::BF16 ? "-bf16" : "-f32"));
  fs::remove_all(dir);  // an export never replaces a folder
  export_hf(dir, a, type, dtype);

  CHECK_MSG(is_hf_checkpoint(dir), label + ": is_hf_checkpoint");
  const json::Value hf = json::parse(fs::read_file(fs::join(dir, "config.json"), 1 << 20));
  CHECK_MSG(hf.find("model_type")->string == type, label + ": model_type");
  CHECK(hf.find("torch_dtype")->string == (dtype == st::DType::BF16 ? "bfloat16" : "float32"));
  st::Reader r(fs::join(dir, "model.safetensors"));
  CHECK_MSG(r.metadata().count("format") && r.metadata().at("format") == "pt", label + ": format metadata");
  for (const st::TensorInfo& t : r.tensors()) CHECK_MSG(t.dtype == dtype, label + ": dtype of " + t.name);
  CHECK_MSG((r.find("lm_head.weight") != nullptr) == !mc.tie_embeddings, label + ": lm_head presence");

  const ModelConfig got = read_checkpoint_model_config(dir);
  CHECK_MSG(config_str(got) == config_str(mc), label + ": config " + config_str(got) + " vs " + config_str(mc));
  Model b(got, *be);
  b.init(9);
  load_weights(dir, b);
  const std::vector<float> pa = host_params(a), pb = host_params(b);
  int bad = 0;
  for (const ParamTensor& t : a.layout().tensors())
    for (size_t i = 0; i < t.numel; ++i) {
      const float want = dtype == st::DType::BF16 ? bf16_to_f32(f32_to_bf16(pa[t.offset + i])) : pa[t.offset + i];
      if (std::memcmp(&want, &pb[t.offset + i], 4) != 0) ++bad;
    }
  CHECK_MSG(bad == 0, label + ": " + std::to_string(bad) + " values differ");
}

// Deterministic small integers, exact in BF16 and F16, distinct across tensors.
float pattern(int id, size_t i) { return static_cast<float>(static_cast<int>((id * 131 + i * 7) % 251) - 125); }

// Writes HF-named tensors with pattern values in a chosen dtype, into one file or two shards plus an index.
class HfDirWriter {
 public:
  void add(const std::string& name, std::vector<int64_t> shape, st::DType dtype = st::DType::F32) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float>& v = values_[name];
    for (size_t i = 0; i < n; ++i) v.push_back(pattern(static_cast<int>(values_.size()), i));
    auto bytes = std::make_unique<std::vector<uint8_t>>(n * st::dtype_size(dtype));
    for (size_t i = 0; i < n; ++i) {
      if (dtype == st::DType::F32) std::memcpy(bytes->data() + 4 * i, &v[i], 4);
      uint16_t h = dtype == st::DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      if (dtype != st::DType::F32) std::memcpy(bytes->data() + 2 * i, &h, 2);
    }
    entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
  }
  const std::vector<float>& operator[](const std::string& name) const { return values_.at(name); }

  void write(const std::string& dir, const std::string& config, bool sharded) const {
    fs::remove_all(dir);
    fs::mkdirs(dir);
    fs::write_file_atomic(fs::join(dir, "config.json"), config);
    if (!sharded) {
      writer(0, entries_.size()).write(fs::join(dir, "model.safetensors"));
      return;
    }
    const size_t half = entries_.size() / 2;
    json::Value map = json::Value::make_object();
    for (size_t i = 0; i < entries_.size(); ++i)
      map.set(entries_[i].name, json::Value::of(i < half ? "model-00001-of-00002.safetensors"
                                                          : "model-00002-of-00002.safetensors"));
    writer(0, half).write(fs::join(dir, "model-00001-of-00002.safetensors"));
    writer(half, entries_.size()).write(fs::join(dir, "model-00002-of-00002.safetensors"));
    json::Value index = json::Value::make_object();
    index.set("metadata", json::Value::make_object());
    index.set("weight_map", map);
    fs::write_file_atomic(fs::join(dir, "model.safetensors.index.json"), json::dump(index, 2));
  }

 private:
  struct Entry {
    std::string name;
    st::DType dtype;
    std::vector<int64_t> shape;
    std::unique_ptr<std::vector<uint8_t>> bytes;
  };
  st::Writer writer(size_t begin, size_t end) const {
    st::Writer w;
    for (size_t i = begin; i < end; ++i)
      w.add(entries_[i].name, entries_[i].dtype, entries_[i].bytes->data(), entries_[i].shape);
    return w;
  }
  std::vector<Entry> entries_;
  std::map<std::string, std::vector<float>> values_;
};

// Our tensor `ours` holds, from row `row` on, exactly the values of HF tensor `hf`.
void check_rows(Model& m, const std::vector<float>& params, const std::string& ours, int64_t row,
                const HfDirWriter& hf, const std::string& hf_name) {
  const ParamTensor* t = m.layout().find(ours);
  CHECK_MSG(t != nullptr, "no model tensor " + ours);
  if (!t) return;
  const int64_t cols = t->shape.size() == 2 ? t->shape[1] : 1;
  const std::vector<float>& want = hf[hf_name];
  bool same = row * cols + static_cast<int64_t>(want.size()) <= static_cast<int64_t>(t->numel) &&
              std::memcmp(params.data() + t->offset + row * cols, want.data(), want.size() * 4) == 0;
  CHECK_MSG(same, ours + " rows from " + std::to_string(row) + " should hold " + hf_name);
}

const char* kMixtralConfig = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "transformers_version": "4.46.0",
  "vocab_size": 20, "hidden_size": 8, "intermediate_size": 6, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "hidden_act": "silu",
  "num_local_experts": 3, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "attention_dropout": 0.0, "router_jitter_noise": 0.0, "output_router_logits": false, "bos_token_id": 1,
  "eos_token_id": 2, "initializer_range": 0.02, "use_cache": true, "torch_dtype": "bfloat16"
})";

// Mixed dtypes on purpose: embeddings BF16, attention F16, the rest F32.
HfDirWriter mixtral_tensors() {
  HfDirWriter w;
  w.add("model.embed_tokens.weight", {20, 8}, st::DType::BF16);
  for (int l = 0; l < 2; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".";
    w.add(h + "input_layernorm.weight", {8});
    w.add(h + "self_attn.q_proj.weight", {8, 8}, st::DType::F16);
    w.add(h + "self_attn.k_proj.weight", {4, 8}, st::DType::F16);
    w.add(h + "self_attn.v_proj.weight", {4, 8}, st::DType::F16);
    w.add(h + "self_attn.o_proj.weight", {8, 8}, st::DType::F16);
    w.add(h + "post_attention_layernorm.weight", {8});
    w.add(h + "block_sparse_moe.gate.weight", {3, 8});
    for (int e = 0; e < 3; ++e) {
      const std::string x = h + "block_sparse_moe.experts." + std::to_string(e) + ".";
      w.add(x + "w1.weight", {6, 8});
      w.add(x + "w2.weight", {8, 6});
      w.add(x + "w3.weight", {6, 8});
    }
  }
  w.add("model.norm.weight", {8});
  w.add("lm_head.weight", {20, 8}, st::DType::BF16);
  return w;
}

void check_mixtral_placement(const std::string& dir, const HfDirWriter& hf) {
  const ModelConfig c = read_checkpoint_model_config(dir);
  CHECK(c.family == "mixtral" && c.vocab_size == 20 && c.d_model == 8 && c.n_layers == 2);
  CHECK(c.n_heads == 4 && c.n_kv_heads == 2 && c.max_seq_len == 64 && c.expert_d_ff == 6 && c.d_ff == 6);
  CHECK(c.n_experts == std::vector<int>({3, 3}) && c.top_k == 2 && c.renormalize && c.moe_every == 1);
  CHECK(!c.qkv_bias && !c.tie_embeddings && c.shared_expert_d_ff == 0 && !c.residual_mlp);
  CHECK(c.rope_theta == 1e6 && c.norm_eps == 1e-5 && c.aux_loss_coef == 0.02);

  auto be = make_backend("cpu", {2});
  Model m(c, *be);
  load_weights(dir, m);
  const std::vector<float> p = host_params(m);
  check_rows(m, p, "wte", 0, hf, "model.embed_tokens.weight");
  check_rows(m, p, "lm_head.weight", 0, hf, "lm_head.weight");
  check_rows(m, p, "norm_f.weight", 0, hf, "model.norm.weight");
  for (int l = 0; l < 2; ++l) {
    const std::string o = "layers." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    check_rows(m, p, o + "norm1.weight", 0, hf, h + "input_layernorm.weight");
    check_rows(m, p, o + "attn.qkv.weight", 0, hf, h + "self_attn.q_proj.weight");
    check_rows(m, p, o + "attn.qkv.weight", 8, hf, h + "self_attn.k_proj.weight");
    check_rows(m, p, o + "attn.qkv.weight", 12, hf, h + "self_attn.v_proj.weight");
    check_rows(m, p, o + "attn.out.weight", 0, hf, h + "self_attn.o_proj.weight");
    check_rows(m, p, o + "norm2.weight", 0, hf, h + "post_attention_layernorm.weight");
    check_rows(m, p, o + "moe.router.weight", 0, hf, h + "block_sparse_moe.gate.weight");
    for (int e = 0; e < 3; ++e) {
      const std::string oe = o + "moe.experts." + std::to_string(e) + ".";
      const std::string x = h + "block_sparse_moe.experts." + std::to_string(e) + ".";
      check_rows(m, p, oe + "gate_up.weight", 0, hf, x + "w1.weight");
      check_rows(m, p, oe + "gate_up.weight", 6, hf, x + "w3.weight");
      check_rows(m, p, oe + "down.weight", 0, hf, x + "w2.weight");
    }
  }
}

}  // namespace

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
  attempt(qwen3 + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", {"rope_scaling"});
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
  CHECK(!q3.qkv_bias && !q3.out_bias);
  // Qwen3-MoE's attention_bias: biases on q/k/v and o; Qwen2-MoE's qkv_bias: on q/k/v only (true by default).
  const ModelConfig q3b = hf_to_model_config(json::parse(qwen3 + R"(, "attention_bias": true})"), "config.json");
  CHECK(q3b.qkv_bias && q3b.out_bias && model_features(q3b).has_out_bias());
  CHECK(qwen2.qkv_bias && !qwen2.out_bias);
  // Values that do not change the math are fine: a window as long as the context, a null rope_scaling.
  const ModelConfig ok = hf_to_model_config(
      json::parse(with({{"sliding_window", "64"}, {"rope_scaling", "null"}, {"head_dim", "2"}})), "config.json");
  CHECK(ok.max_seq_len == 64);
}

TEST(cleanup) { fs::remove_all(tmp_dir()); }

TEST_MAIN()
