// Parameter layout: every tensor of the model by name, shape and offset in one flat fp32 arena.
// Each expert's tensors are adjacent (one contiguous range per (layer, expert)), so later memory
// tiers can move an expert's whole state as one block.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.h"
#include "model/features.h"

namespace moe {

struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats
  size_t numel = 0;
  bool decay = false;   // weight decay applies (rank >= 2)
  float init_std = 0;   // 0 with init_one false: zeros
  bool init_one = false;
};

struct ExpertRange {
  int layer, expert;
  size_t begin, end;  // float offsets
};

// Pointers into the arena for one FFN block: in-projection (F rows, or 2F for SwiGLU) and out-projection.
// The *_bf16 pointers (here and below) address the bf16 copies of the weights that bf16 compute uses; bind()
// leaves them null, which means fp32 compute.
struct FfnParams {
  float *w_in = nullptr, *b_in = nullptr, *w_out = nullptr, *b_out = nullptr;
  const uint16_t *w_in_bf16 = nullptr, *w_out_bf16 = nullptr;
};

// Latent attention's projections (model/mla_block.h); q_w when q_lora_rank is 0, else q_a_w, q_a_norm_w, q_b_w.
struct MlaParams {
  float *q_w = nullptr, *q_a_w = nullptr, *q_a_norm_w = nullptr, *q_b_w = nullptr;
  float *kv_a_w = nullptr, *kv_a_norm_w = nullptr, *kv_b_w = nullptr;
  const uint16_t *q_w_bf16 = nullptr, *q_a_w_bf16 = nullptr, *q_b_w_bf16 = nullptr, *kv_a_w_bf16 = nullptr,
                 *kv_b_w_bf16 = nullptr;
};

struct LayerParams {
  float *norm1_w = nullptr, *norm1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr, *out_w = nullptr, *out_b = nullptr;
  const uint16_t *qkv_w_bf16 = nullptr, *out_w_bf16 = nullptr;
  float *q_norm_w = nullptr, *k_norm_w = nullptr;  // with a q/k norm
  float *norm2_w = nullptr, *norm2_b = nullptr;
  MlaParams mla;                   // latent attention (qkv_w is then null)
  float* attn_sinks = nullptr;  // [NH], when the family has attention sinks
  int window = 0;               // the layer's sliding window (model.sliding_layers); 0: full causal attention
  FfnParams mlp;                   // dense layers
  float* router_w = nullptr;       // MoE layers
  float* router_b = nullptr;       // [E], when the family's router has a bias
  float* router_selection_bias = nullptr;  // [E], when model.selection_bias; never has a gradient
  std::vector<FfnParams> experts;  // MoE layers
  FfnParams shared, residual;
  float* shared_gate_w = nullptr;
};

struct ModelParams {
  float *wte = nullptr, *wpe = nullptr, *norm_f_w = nullptr, *norm_f_b = nullptr, *lm_head = nullptr;
  const uint16_t* lm_head_bf16 = nullptr;
  std::vector<LayerParams> layers;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& cfg);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor* find(const std::string& name) const;
  size_t total() const { return total_; }
  const std::vector<ExpertRange>& expert_ranges() const { return experts_; }

  // Resolves every tensor to a pointer inside `arena` (params, or grads with the same layout).
  ModelParams bind(float* arena) const;
  // The same over a packed arena: tensor i at arena + offsets[i], or a null pointer where offsets[i] is SIZE_MAX
  // (a frozen tensor's gradient).
  ModelParams bind(float* arena, const std::vector<size_t>& offsets) const;

 private:
  void add(const std::string& name, std::vector<int64_t> shape, float init_std, bool init_one = false);
  void add_ffn(const std::string& prefix, int F, float out_std);
  void add_latent_attention(const std::string& prefix);
  template <typename Ptr>
  ModelParams bind_with(const Ptr& ptr) const;

  const ModelConfig& cfg_;
  ModelFeatures features_;
  std::vector<ParamTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<ExpertRange> experts_;
  size_t total_ = 0;
};

// Deterministic initialisation (docs/model.md): values depend only on (seed, tensor name, index).
void init_params(const ParamLayout& layout, float* arena, uint64_t seed);

}  // namespace moe
