// Internal interface between adamw.cpp (constants, dispatch, partitioning) and its AVX-512 and AVX2 kernels.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/types.h"

namespace moe::cpu::adamw_detail {

// Per-update constants, applied per element as (all fp32):
//   g = grad·grad_scale ; m = fma(1-β1, g, β1·m) ; v = fma((1-β2)·g, g, β2·v)
//   p = p·decay + (neg_step·m) / (sqrt(v)/bias2_sqrt + eps)
struct Consts {
  float grad_scale, beta1, one_minus_beta1, beta2, one_minus_beta2, decay, neg_step, bias2_sqrt, eps;
};

// The scalars folded once in double (the CUDA backend folds them here too, so both update alike).
inline Consts fold(const AdamWParams& hp) {
  const double b1 = hp.beta1, b2 = hp.beta2;
  const double bias1 = 1.0 - std::pow(b1, hp.step), bias2 = 1.0 - std::pow(b2, hp.step);
  return {hp.grad_scale,
          hp.beta1,
          static_cast<float>(1.0 - b1),
          hp.beta2,
          static_cast<float>(1.0 - b2),
          static_cast<float>(1.0 - double(hp.lr) * hp.weight_decay),
          static_cast<float>(-double(hp.lr) / bias1),
          static_cast<float>(std::sqrt(bias2)),
          hp.eps};
}

// p16 (may be null): the updated p's bf16 copy, rounded as moe::f32_to_bf16.
void update_avx512(const Consts& c, float* p, const float* g, float* m, float* v, uint16_t* p16, int64_t n);
// Σx² over one chunk: 16 interleaved double lanes (index mod 16) added in lane order at the end.
double chunk_sum_squares_avx512(const float* x, int64_t n);
// The same on 256-bit vectors, for CPUs with AVX2 and FMA but no AVX-512.
void update_avx2(const Consts& c, float* p, const float* g, float* m, float* v, uint16_t* p16, int64_t n);
double chunk_sum_squares_avx2(const float* x, int64_t n);

}  // namespace moe::cpu::adamw_detail
