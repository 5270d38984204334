#include "infer/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace moe {

void KvCache::reset(Backend& be, const std::vector<KvLayerShape>& layers, int max_positions) {
  be_ = &be;
  shapes_ = layers;
  max_positions_ = max_positions;
  capacity_ = 0;
  length_ = 0;
  k_.clear();
  v_.clear();
  k_.resize(layers.size());
  v_.resize(layers.size());
}

void KvCache::ensure(int positions) {
  if (positions <= capacity_) return;
  const int grown = std::min(max_positions_, std::max({positions, 2 * capacity_, 64}));
  for (size_t l = 0; l < shapes_.size(); ++l) {
    for (auto [buf, width] : {std::pair{&k_[l], shapes_[l].heads * shapes_[l].k_dim},
                              std::pair{&v_[l], shapes_[l].heads * shapes_[l].v_dim}}) {
      DeviceBuffer bigger;
      reserve_floats(*be_, bigger, (size_t)grown * width);
      if (length_ > 0) be_->copy(bigger.f(), buf->f(), (size_t)length_ * width * sizeof(float));
      *buf = std::move(bigger);
    }
  }
  capacity_ = grown;
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) n += k_[l].bytes() + v_[l].bytes();
  return n;
}

void cached_attention(float* out, const float* q, const KvCache& cache, int l, int first, int n, int NH, float scale,
                      int window, const float* sinks) {
  const KvLayerShape& s = cache.shape(l);
  const int group = NH / s.heads;
  std::vector<float> p;
  for (int i = 0; i < n; ++i) {
    const int t = first + i;
    const int lo = window > 0 ? std::max(0, t - window + 1) : 0;
    p.resize(t + 1 - lo);
    for (int h = 0; h < NH; ++h) {
      const float* qh = q + ((size_t)i * NH + h) * s.k_dim;
      const int g = h / group;
      float m = -INFINITY;
      for (int j = lo; j <= t; ++j) {
        const float* kj = cache.k(l, j) + (size_t)g * s.k_dim;
        float dot = 0.0f;
        for (int d = 0; d < s.k_dim; ++d) dot += qh[d] * kj[d];
        p[j - lo] = dot * scale;
        m = std::max(m, p[j - lo]);
      }
      if (sinks) m = std::max(m, sinks[h]);
      float sum = 0.0f;
      for (float& x : p) sum += (x = std::exp(x - m));
      if (sinks) sum += std::exp(sinks[h] - m);
      float* o = out + ((size_t)i * NH + h) * s.v_dim;
      std::fill_n(o, s.v_dim, 0.0f);
      for (int j = lo; j <= t; ++j) {
        const float w = p[j - lo] / sum;
        const float* vj = cache.v(l, j) + (size_t)g * s.v_dim;
        for (int d = 0; d < s.v_dim; ++d) o[d] += w * vj[d];
      }
    }
  }
}

}  // namespace moe
