// Attention's per-row softmax work, compiled for the baseline ISA in attention.cpp and with
// AVX-512 in attention_avx512.cpp (picked at run time). A row holds one query's scaled scores
// against keys [0, nk); only keys [0, visible) are causally visible, the rest become exact zeros.
#pragma once
#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

// Scores -> probabilities in place; returns the row's log-sum-exp.
inline float attention_softmax_row(float* p, int visible, int nk) {
  float m = lane_max(p, visible);
  for (int j = 0; j < visible; ++j) p[j] = vexp(p[j] - m);
  float l = lane_sum(visible, [p](int j) { return p[j]; });
  float inv = 1.0f / l;
  for (int j = 0; j < visible; ++j) p[j] *= inv;
  for (int j = visible; j < nk; ++j) p[j] = 0.0f;
  return m + std::log(l);
}

// Scores -> P = exp(s - lse) in place, and dP -> dS = P∘(dP - D)·scale in place, where
// D = dO·O is the row's softmax-backward correction.
inline void attention_grad_row(float* p, float* ds, const float* dout, const float* out, int HS, float lse,
                               float scale, int visible, int nk) {
  float D = lane_sum(HS, [dout, out](int d) { return dout[d] * out[d]; });
  for (int j = 0; j < visible; ++j) {
    p[j] = vexp(p[j] - lse);
    ds[j] = p[j] * (ds[j] - D) * scale;
  }
  for (int j = visible; j < nk; ++j) p[j] = ds[j] = 0.0f;
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
