// Cross-entropy row kernels, compiled three times: for the baseline ISA in crossentropy.cpp and with
// AVX-512 and AVX2 in crossentropy_avx512.cpp and crossentropy_avx2.cpp (picked at run time). All are
// the same branch-free loops, so the vectoriser uses 4, 16 or 8 lanes; the exp over V logits per row
// (three passes) dominates the op.
#pragma once
#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

// Max-subtracted log Σ exp(x[v]).
inline float crossentropy_row_lse(const float* x, int V) {
  float m = lane_max(x, V);
  float s = lane_sum(V, [x, m](int i) { return vexp(x[i] - m); });
  return m + std::log(s);
}

// dx += scale · (softmax(x) - onehot(target)); the target entry is formed as p - 1 before scaling.
inline void crossentropy_row_grad(float* dx, const float* x, int target, float scale, int V) {
  float lse = crossentropy_row_lse(x, V);
  float before = dx[target];
  for (int v = 0; v < V; ++v) dx[v] += scale * vexp(x[v] - lse);
  dx[target] = before + scale * (vexp(x[target] - lse) - 1.0f);
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
