// Attention's per-row softmax work, compiled for the baseline ISA in attention.cpp and with AVX-512
// and AVX2 in attention_avx512.cpp and attention_avx2.cpp (picked at run time). A row holds one
// query's scaled scores against the tile's keys [0, nk); only keys [lo, visible) are visible (causal
// mask, and a sliding window's start), the rest become exact zeros. With a sink the row's denominator also holds
// exp(sink); plain rows (lo 0, no sink) take exactly the operations they always did.
#pragma once
#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

// Scores -> probabilities in place; returns the row's log-sum-exp.
inline float attention_softmax_row(float* p, int lo, int visible, int nk, const float* sink) {
  float* v = p + lo;
  const int n = visible - lo;
  float m = lane_max(v, n);
  if (sink && *sink > m) m = *sink;
  for (int j = 0; j < n; ++j) v[j] = vexp(v[j] - m);
  float l = lane_sum(n, [v](int j) { return v[j]; });
  if (sink) l += vexp(*sink - m);
  float inv = 1.0f / l;
  for (int j = 0; j < n; ++j) v[j] *= inv;
  for (int j = 0; j < lo; ++j) p[j] = 0.0f;
  for (int j = visible; j < nk; ++j) p[j] = 0.0f;
  return m + std::log(l);
}

// Scores -> P = exp(s - lse) in place, and dP -> dS = P∘(dP - D)·scale in place, where
// D = dO·O is the row's softmax-backward correction. Returns D (a sink's gradient is -p_sink·D).
inline float attention_grad_row(float* p, float* ds, const float* dout, const float* out, int HS, float lse,
                                float scale, int lo, int visible, int nk) {
  float D = lane_sum(HS, [dout, out](int d) { return dout[d] * out[d]; });
  for (int j = lo; j < visible; ++j) {
    p[j] = vexp(p[j] - lse);
    ds[j] = p[j] * (ds[j] - D) * scale;
  }
  for (int j = 0; j < lo; ++j) p[j] = ds[j] = 0.0f;
  for (int j = visible; j < nk; ++j) p[j] = ds[j] = 0.0f;
  return D;
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
