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
  float init_bound = 0;  // > 0: uniform in [-init_bound, init_bound) (a LoRA A)
  bool adapter = false;  // a LoRA A or B (model/lora.h), not a base weight
};

// A LoRA adapter on rows [row0, row0 + rows) of a base weight [.., cols]: the delta scale·B·A, with
// A [r, cols] and B [rows, r] (tensor indices into the layout). module: the adapted linear's own name
// ("layers.0.attn.q", "layers.1.moe.experts.3.gate"), the name its A and B carry before ".lora_A"/".lora_B".
struct LoraAdapter {
  std::string module;
  size_t a = 0, b = 0, base = 0;
  int64_t row0 = 0, rows = 0, cols = 0;
};

// One linear's adapter as the kernels see it (params: the weights, grads: their gradients; A null: none).
// LoRA dropout (finetune.lora.dropout) while a training step runs; inactive otherwise, so evaluation and
// generation see none. Each step's masks come from (seed, draw, the adapter's A offset).
struct LoraDropout {
  float p = 0;
  uint64_t seed = 0, draw = 0;
  bool active = false;
};

struct LoraParams {
  float *A = nullptr, *B = nullptr;
  int r = 0;
  float scale = 0;
  uint64_t stream = 0;                   // the A tensor's layout offset: one mask stream per adapter
  const LoraDropout* dropout = nullptr;  // the model's (null: none)
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
  // LoRA: on the in-projection's parts (gated: gate then up; else fc alone) and on the out-projection.
  LoraParams lora_in[2], lora_out;
};

// The same block with every fp32 pointer (adapters' included) passed through move(float*) -> float*, and the bf16
// mirrors dropped: the block's tensors seen where another copy of them lives (expert offload).
template <class Move>
FfnParams moved(const FfnParams& f, Move move) {
  FfnParams r = f;
  r.w_in_bf16 = r.w_out_bf16 = nullptr;
  r.w_in = move(f.w_in);
  r.b_in = move(f.b_in);
  r.w_out = move(f.w_out);
  r.b_out = move(f.b_out);
  for (LoraParams* l : {&r.lora_in[0], &r.lora_in[1], &r.lora_out}) {
    l->A = move(l->A);
    l->B = move(l->B);
  }
  return r;
}

// Latent attention's projections (model/mla_block.h); q_w when q_lora_rank is 0, else q_a_w, q_a_norm_w, q_b_w.
struct MlaParams {
  float *q_w = nullptr, *q_a_w = nullptr, *q_a_norm_w = nullptr, *q_b_w = nullptr;
  float *kv_a_w = nullptr, *kv_a_norm_w = nullptr, *kv_b_w = nullptr;
  const uint16_t *q_w_bf16 = nullptr, *q_a_w_bf16 = nullptr, *q_b_w_bf16 = nullptr, *kv_a_w_bf16 = nullptr,
                 *kv_b_w_bf16 = nullptr;
  // LoRA on q_a, q_b, kv_a (its latent and rope-key rows together) and kv_b; q_w's adapter is the layer's lora_q.
  LoraParams lora_q_a, lora_q_b, lora_kv_a, lora_kv_b;
};

struct LayerParams {
  float *norm1_w = nullptr, *norm1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr, *out_w = nullptr, *out_b = nullptr;
  const uint16_t *qkv_w_bf16 = nullptr, *out_w_bf16 = nullptr;
  float *q_norm_w = nullptr, *k_norm_w = nullptr;  // with a q/k norm
  LoraParams lora_q, lora_k, lora_v, lora_out;     // LoRA on the q, k, v rows of qkv and on the out-projection
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
  // finetune: its LoRA adapters join the layout (each after its module's weights, so a routed expert's stay
  // inside its ExpertRange).
  explicit ParamLayout(const ModelConfig& cfg, const FinetuneConfig& finetune = {});

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor* find(const std::string& name) const;
  size_t total() const { return total_; }
  const std::vector<ExpertRange>& expert_ranges() const { return experts_; }
  // Whether an arena offset lies inside a routed expert's range.
  bool in_expert_range(size_t offset) const;
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }
  float lora_scale() const { return lora_scale_; }
  int lora_rank() const { return lora_rank_; }

  // Resolves every tensor to a pointer inside `arena` (params, or grads with the same layout).
  ModelParams bind(float* arena) const;
  // The same over a packed arena: tensor i at arena + offsets[i], or a null pointer where offsets[i] is SIZE_MAX
  // (a frozen tensor's gradient).
  ModelParams bind(float* arena, const std::vector<size_t>& offsets) const;

 private:
  void add(const std::string& name, std::vector<int64_t> shape, float init_std, bool init_one = false);
  void add_ffn(const std::string& prefix, int F, float out_std, bool lora = false);
  void add_lora(const std::string& module, const std::string& base, int64_t row0, int64_t rows);
  void add_latent_attention_lora(const std::string& prefix);
  void add_latent_attention(const std::string& prefix);
  template <typename Ptr>
  ModelParams bind_with(const Ptr& ptr) const;

  const ModelConfig& cfg_;
  ModelFeatures features_;
  std::vector<ParamTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<ExpertRange> experts_;
  std::vector<LoraAdapter> adapters_;
  int lora_rank_ = 0;
  float lora_scale_ = 0;
  size_t total_ = 0;
};

// Deterministic initialisation (docs/model.md): values depend only on (seed, tensor name, index), so the large
// tensors are filled by `threads` threads at once with the same result (a real model's billions of normal draws
// take minutes on one core).
void init_params(const ParamLayout& layout, float* arena, uint64_t seed, int threads = 1);
// The same values for the tensors that start in [begin, end) of the arena alone, written to dst + (offset - begin):
// a part of the model initialised where it lives, without the whole arena at hand.
void init_params(const ParamLayout& layout, float* dst, size_t begin, size_t end, uint64_t seed, int threads);

}  // namespace moe
