// The attention sublayer of one decoder layer, from the normed residual to the out-projection's output:
//   qkv = x·Wqkvᵀ (+b) ; q/k RMSNorm ; clamp(q, k, v) ; rope(q, k) ; softmax(q·kᵀ/√HS, causal)·v ; out = att·Woᵀ (+b)
// (the norm and clamp where the features have them, in the order OLMoE applies them).
// Which variant runs (position encoding, and the features later kinds add: q/k norm, latent attention,
// sinks, sliding windows) is read from ModelFeatures; the model only calls forward and backward.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/features.h"
#include "model/params.h"

namespace moe {

// What one layer's attention saves for its backward.
struct AttentionActs {
  DeviceBuffer qkv, qkv_norm, qk_rstd, qkv_clip, qkv_rot, att, lse;
  size_t bytes() const;
};

// Backward scratch shared by every layer (sized by reserve()).
struct AttentionScratch {
  DeviceBuffer dqkv;
  size_t bytes() const { return dqkv.bytes(); }
};

class AttentionBlock {
 public:
  AttentionBlock(const ModelConfig& cfg, const ModelFeatures& features);

  void reserve(Backend& be, AttentionActs& a, AttentionScratch& s, int B, int T) const;
  // out [N, C] = attention(x [N, C]) for N = B·T tokens of B sequences.
  void forward(Backend& be, const LayerParams& p, AttentionActs& a, float* out, const float* x, int B, int T) const;
  // dx [N, C] += ∂/∂x of Σ dout·out; accumulates into g's attention tensors. datt: N·attn_width() floats of
  // the caller's scratch (overwritten).
  void backward(Backend& be, const LayerParams& p, const LayerParams& g, AttentionActs& a, AttentionScratch& s,
                float* datt, float* dx, const float* dout, const float* x, int B, int T) const;

 private:
  const ModelConfig& cfg_;
  const ModelFeatures& f_;
  // With model.rope_scaling (YaRN): the rotary frequencies and the cos/sin factor; empty without, where the
  // rope op derives them from rope_theta as it always did.
  std::vector<double> inv_freq_;
  double rope_scale_ = 1.0;
  RopeSpec rope_spec() const;
};

}  // namespace moe
