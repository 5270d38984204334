// The key/value cache of generation: per layer, the keys and values of every position processed so far, as the
// attention op reads them (after the q/k norm, clamp and rope). Standard attention caches NKV heads of HS floats;
// latent attention caches each head's expanded key (nope | rope part) and value — exact, since that is what the
// full forward attends over, and the simplest (no absorbed projections).
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/buffer.h"

namespace moe {

struct KvLayerShape {
  int heads = 0;    // key/value heads
  int k_dim = 0;    // floats per key head
  int v_dim = 0;    // floats per value head
};

class KvCache {
 public:
  // max_positions: the most positions it will ever hold (the model's max_seq_len). Rows are allocated as they
  // are needed (a long context window costs nothing until used).
  void reset(Backend& be, const std::vector<KvLayerShape>& layers, int max_positions);
  void clear() { length_ = 0; }
  // Room for `positions` rows, keeping the rows held (grows geometrically, up to max_positions).
  void ensure(int positions);

  int length() const { return length_; }
  int capacity() const { return capacity_; }
  void advance(int n) { length_ += n; }
  const KvLayerShape& shape(int l) const { return shapes_[l]; }
  // Row t of layer l: heads·k_dim (keys) or heads·v_dim (values) floats.
  float* k(int l, int t) const { return k_[l].f() + (size_t)t * shapes_[l].heads * shapes_[l].k_dim; }
  float* v(int l, int t) const { return v_[l].f() + (size_t)t * shapes_[l].heads * shapes_[l].v_dim; }
  size_t bytes() const;

 private:
  std::vector<KvLayerShape> shapes_;
  std::vector<DeviceBuffer> k_, v_;
  Backend* be_ = nullptr;
  int capacity_ = 0, max_positions_ = 0, length_ = 0;
};

// out [n, NH, v_dim] for n new queries q [n, NH, k_dim] at positions first .. first + n - 1, each attending to the
// cached keys 0 .. its own position of layer l (the new rows already appended): softmax(scale·q·kᵀ)·v, query head
// h reading key head h / (NH / heads). window > 0: only the last `window` keys (its own included); sinks [NH]
// (may be null): a logit per head in each row's denominator without a value. The same definition as the
// attention op's forward (backend/types.h AttentionSpec), for one query at a time.
void cached_attention(float* out, const float* q, const KvCache& cache, int l, int first, int n, int NH, float scale,
                      int window, const float* sinks);

}  // namespace moe
