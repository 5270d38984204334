// Portable sgemm_bf16 kernels for CPUs without AVX512_BF16: the same packed words as the AVX-512 kernels and an
// exact emulation of vdpbf16ps, so bf16 mode gives the same bits on every x86-64.
#include <cfloat>
#include <cmath>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_bf16_pack_portable.h"
#include "core/half.h"

namespace moe::cpu::gemm_bf16 {
namespace {

// bf16 as vdpbf16ps reads it: denormals are zero (keeping the sign).
float operand(uint16_t h) { return (h & 0x7F80u) ? bf16_to_f32(h) : ((h & 0x8000u) ? -0.0f : 0.0f); }

int kernel(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
           float beta, bool load_c) {
  const int n = cols < kNR ? cols : kNR;
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < n; ++j) {
      const float acc = dot_pairs(a + i, mr, b + j, kNR, pairs);
      float& out = c[i * ldc + j];
      out = load_c ? std::fma(alpha, acc, beta * out) : alpha * acc;
    }
  return n;
}

}  // namespace

// The bf16 product is exact in double and the double sum exact or within an ulp far below fp32's half-ulp, so
// rounding it to float equals rounding the exact sum.
float dpbf16_step(float acc, uint16_t x, uint16_t y) {
  float r = static_cast<float>(static_cast<double>(acc) + static_cast<double>(operand(x)) * operand(y));
  return std::fabs(r) < FLT_MIN ? std::copysign(0.0f, r) : r;
}

float dot_pairs(const uint32_t* a, int64_t sa, const uint32_t* b, int64_t sb, int pairs) {
  float acc = 0.0f;
  for (int p = 0; p < pairs; ++p) {
    const uint32_t x = a[p * sa], y = b[p * sb];
    acc = dpbf16_step(acc, static_cast<uint16_t>(x >> 16), static_cast<uint16_t>(y >> 16));
    acc = dpbf16_step(acc, static_cast<uint16_t>(x), static_cast<uint16_t>(y));
  }
  return acc;
}

void exact_tile(int rows, int cols, int pairs, const uint32_t* a, int lda, const uint32_t* b, float* c, int64_t ldc,
                float alpha, float beta, bool load_c) {
  const int64_t panel_stride = int64_t{pairs} * kNR;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const float d = dot_pairs(a + i, lda, b + (j / kNR) * panel_stride + j % kNR, kNR, pairs);
      float& out = c[i * ldc + j];
      out = load_c ? std::fma(alpha, d, beta * out) : alpha * d;
    }
}

const Kernels& portable_kernels() {
  static const Kernels k{"portable", false, kMRMax, &pack_a_lines, &pack_b_lines<uint16_t>, &pack_b_lines<float>,
                         &kernel};
  return k;
}

}  // namespace moe::cpu::gemm_bf16
