// Multi-head latent attention (DeepSeek-V2/V3; transformers' modeling_deepseek_v2.py / modeling_deepseek_v3.py),
// the attention sublayer when model.latent_attention is set, from the normed residual to o_proj's output:
//   q      = x·Wqᵀ, or Wq_b·rmsnorm(Wq_a·x)                       [N, NH·(dn + dr)]
//   c, kpe = x·Wkv_aᵀ split (kv_lora_rank | dr)                   kpe is one rope key shared by every head
//   k|v    = Wkv_b·rmsnorm(c), per head (dn | dv)
//   q_h = (q_nope | rope(q_pe)), k_h = (k_nope | rope(kpe)); softmax(scale·q·kᵀ, causal)·v ; out = att·Woᵀ
// scale = (dn + dr)^-½, times YaRN's mscale(factor, mscale_all_dim)² with latent_attention.softmax_mscale. The
// rope part turns pairs (2i, 2i+1) (rope_interleave) or (i, i + dr/2) with model.rope_scaling's frequencies
// and attention factor. The latent norms use eps 1e-6, the modeling files' RMSNorm default.
// The fused attention kernel runs on heads of max(dn + dr, dv) floats: v (or q and k) zero-padded, which adds
// nothing to any dot product, and q pre-multiplied so that the kernel's 1/√HS becomes `scale`.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/features.h"
#include "model/params.h"

namespace moe {

// c | kpe = x·Wkv_aᵀ (and kv_a's LoRA) for N rows: one product on the whole weight into `both` [N, kvr + dr], then
// split into c [N, kvr] and kpe [N, dr]. A weight is read as the one matrix it is, which a backend that keeps
// weights laid out for its products (a model that only answers) relies on; the split changes no bits, as each
// output's sum runs over the same k either way.
void mla_kv_a_forward(Backend& be, float* ckv, float* kpe, float* both, const float* x, const MlaParams& m, int N,
                      int C, int kvr, int dr);

struct MlaActs {
  DeviceBuffer q_a, q_a_rstd, q_an, q, ckv, kpe, ckv_kpe, ckv_rstd, ckvn, kv, pe, pe_rot, qkv, att, lse, att_v;
  size_t bytes() const;
};

struct MlaScratch {
  DeviceBuffer dqkv, datt_pad, dpe_rot, dpe, dq, dkv, dckvn, dckv, dkpe, dq_an, dq_a;
  size_t bytes() const;
};

class MlaBlock {
 public:
  MlaBlock(const ModelConfig& cfg, const ModelFeatures& features);

  void reserve(Backend& be, MlaActs& a, MlaScratch& s, int B, int T) const;
  // out [N, C] = attention(x [N, C]).
  void forward(Backend& be, const LayerParams& p, MlaActs& a, float* out, const float* x, int B, int T) const;
  // dx [N, C] += ∂/∂x of Σ dout·out; accumulates into g's attention tensors. datt: N·attn_width() floats of
  // the caller's scratch (overwritten).
  void backward(Backend& be, const LayerParams& p, const LayerParams& g, MlaActs& a, MlaScratch& s, float* datt,
                float* dx, const float* dout, const float* x, int B, int T) const;
  // The factor on q·k before the softmax.
  double softmax_scale() const { return softmax_scale_; }

 private:
  RopeSpec rope_spec() const;

  const ModelConfig& cfg_;
  int NH_, dn_, dr_, dv_, D_, HS_, kvr_, qr_;
  std::vector<double> inv_freq_;
  double rope_scale_ = 1.0, softmax_scale_ = 1.0;
  float q_prescale_ = 1.0f;  // softmax_scale·√HS: the kernel divides by √HS
};

}  // namespace moe
