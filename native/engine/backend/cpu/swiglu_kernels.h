// SwiGLU row kernels, compiled for the baseline ISA in swiglu.cpp and with AVX-512 and AVX2 in
// swiglu_avx512.cpp and swiglu_avx2.cpp (picked at run time): the sigmoid's exp makes this op compute-bound.
// out = silu(g)·up with silu(g) = g·σ(g).
#pragma once

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

inline void swiglu_forward_row(float* out, const float* gate, const float* up, int F) {
  for (int f = 0; f < F; ++f) out[f] = gate[f] * vsigmoid(gate[f]) * up[f];
}

// d silu(g)/dg = σ(g)·(1 + g·(1 - σ(g))). Accumulate: added onto dgate and dup; else written over them.
template <bool Accumulate = true>
inline void swiglu_backward_row(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                int F) {
  for (int f = 0; f < F; ++f) {
    float g = gate[f], s = vsigmoid(g);
    const float dg = dout[f] * up[f] * s * (1.0f + g * (1.0f - s)), du = dout[f] * g * s;
    if constexpr (Accumulate) dgate[f] += dg, dup[f] += du;
    else dgate[f] = dg, dup[f] = du;
  }
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
