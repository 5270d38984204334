// Shared by the Hugging Face interchange tests: small configs of each family the interchange writes, an export ->
// import round trip check, and hand-written HF checkpoints (pattern values, mixed dtypes, one file or two shards)
// with a check that each stored tensor lands in the exact place.
#pragma once
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

namespace hf_test {

using namespace moe;
using moe_test::tmp_dir;
using moe_test::tmp_path;

inline std::vector<float> host_params(Model& m) {
  std::vector<float> h(m.num_params());
  m.backend().copy(h.data(), m.params(), h.size() * sizeof(float));
  return h;
}

inline std::string config_str(const ModelConfig& m) { return json::dump(model_config_to_json(m)); }

inline ModelConfig mixtral_cfg() {
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
inline ModelConfig qwen2_cfg() {
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

inline ModelConfig olmoe_cfg() {
  ModelConfig m = mixtral_cfg();
  m.renormalize = false;
  m.tie_embeddings = true;
  m.n_experts = {3, 3};
  m.qk_norm = QkNorm::Projection;
  m.clip_qkv = 4.5;
  return m;
}

// Qwen3-MoE: per-head q/k norm, an explicit head size, a dense layer listed and one by step.
inline ModelConfig qwen3_cfg() {
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
inline ModelConfig deepseek_cfg(bool v3) {
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

inline void check_export_roundtrip(const ModelConfig& mc, const std::string& type, st::DType dtype) {
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
inline float pattern(int id, size_t i) { return static_cast<float>(static_cast<int>((id * 131 + i * 7) % 251) - 125); }

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
inline void check_rows(Model& m, const std::vector<float>& params, const std::string& ours, int64_t row,
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

inline const char* const kMixtralConfig = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "transformers_version": "4.46.0",
  "vocab_size": 20, "hidden_size": 8, "intermediate_size": 6, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "hidden_act": "silu",
  "num_local_experts": 3, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "attention_dropout": 0.0, "router_jitter_noise": 0.0, "output_router_logits": false, "bos_token_id": 1,
  "eos_token_id": 2, "initializer_range": 0.02, "use_cache": true, "torch_dtype": "bfloat16"
})";

// Mixed dtypes on purpose: embeddings BF16, attention F16, the rest F32.
inline HfDirWriter mixtral_tensors() {
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

inline void check_mixtral_placement(const std::string& dir, const HfDirWriter& hf) {
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

}  // namespace hf_test
