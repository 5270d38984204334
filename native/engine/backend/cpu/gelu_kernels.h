// GELU span kernels, compiled for the baseline ISA in gelu.cpp and with AVX-512 and AVX2 in
// gelu_avx512.cpp and gelu_avx2.cpp (picked at run time): the sigmoid's exp makes this op compute-bound.
// tanh-GELU is written as x·σ(2u), since ½(1 + tanh u) = σ(2u); that avoids the cancellation of
// 1 + tanh u for negative u and vectorises through vexp.
#pragma once
#include <cstdint>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

inline void gelu_forward_span(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float x = inp[i];
    float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
    out[i] = x * vsigmoid(2.0f * u);
  }
}

// d/dx x·σ(2u) = σ + x·2σ(1-σ)·u',  u' = √(2/π)(1 + 3·0.044715·x²)
inline void gelu_backward_span(float* dinp, const float* inp, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float x = inp[i];
    float x2 = x * x;
    float u = kGeluSqrt2OverPi * (x + kGeluCubic * x2 * x);
    float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2);
    float s = vsigmoid(2.0f * u);
    dinp[i] += dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
  }
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
