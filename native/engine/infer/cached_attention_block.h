// The attention sublayer of generation: the same stages as model/attention_block.h (standard and grouped-query
// attention with q/k norm, clamp, rope with YaRN, sliding windows and sinks) and model/mla_block.h (latent
// attention) for n new tokens at positions first .. first + n - 1, whose keys and values join the cache and
// whose queries attend over everything cached. The full forward's kernels run the projections, norms and clamp;
// rope turns each row by its own position; the attention itself is cached_attention (kv_cache.h).
#pragma once
#include <vector>

#include "backend/backend.h"
#include "infer/kv_cache.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/features.h"
#include "model/params.h"

namespace moe {

class CachedAttentionBlock {
 public:
  CachedAttentionBlock(const ModelConfig& cfg, const ModelFeatures& features);

  // The cache's shape for layer l.
  KvLayerShape cache_shape() const;
  // out [n, C] = attention(x [n, C]); appends the n rows' keys and values to layer l of the cache (the caller
  // advances the cache's length once every layer has run).
  void forward(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out, const float* x, int first,
               int n);

 private:
  void standard(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out, const float* x, int first,
                int n);
  void latent(Backend& be, const LayerParams& p, KvCache& cache, int l, float* out, const float* x, int first, int n);

  const ModelConfig& cfg_;
  const ModelFeatures& f_;
  RopeSpec rope_;                  // standard: over the fused qkv row; latent: over (NH + 1) rope parts
  std::vector<double> inv_freq_;   // the frequencies rope_ points at
  float scale_ = 1.0f;             // the factor on q·k
  DeviceBuffer qkv_, qkv2_, rstd_, q_, att_;
  DeviceBuffer q_a_, q_an_, ckv_, ckvn_, kpe_, ckv_kpe_, kv_, pe_;
};

// Turns the rope heads of one row by position t: the rope op's formula (backend/types.h RopeSpec) with its
// rounding (angle in double, cos and sin times scale rounded to float).
void rope_row(float* row, int t, const RopeSpec& spec);

}  // namespace moe
