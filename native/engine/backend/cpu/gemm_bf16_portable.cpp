// Portable sgemm_bf16 kernels for CPUs without AVX512_BF16: the same packed words as the AVX-512 kernels and an
// exact emulation of vdpbf16ps, so bf16 mode gives the same bits on every x86-64.
#include <cfloat>
#include <cmath>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "core/half.h"

namespace moe::cpu::gemm_bf16 {
namespace {

uint32_t pair(uint16_t even, uint16_t odd) { return static_cast<uint32_t>(even) | static_cast<uint32_t>(odd) << 16; }

// Element k of the packed row or column `src` (stride between k), or zero past kc.
template <typename T>
uint16_t bf16_at(const T* src, int64_t stride, int k, int kc) {
  if (k >= kc) return 0;
  if constexpr (sizeof(T) == 2) return src[k * stride];
  else return f32_to_bf16(src[k * stride]);
}

// Packs `n` lines of k pairs: line l starts at src + l*line_stride and its k runs with k_stride.
template <typename T>
void pack_lines(const T* src, int64_t line_stride, int64_t k_stride, int n, int kc, uint32_t* dst, int dst_stride) {
  for (int p = 0; p < (kc + 1) / 2; ++p)
    for (int l = 0; l < n; ++l) {
      const T* line = src + l * line_stride;
      dst[p * dst_stride + l] = pair(bf16_at(line, k_stride, 2 * p, kc), bf16_at(line, k_stride, 2 * p + 1, kc));
    }
}

void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  pack_lines(a, trans ? 1 : lda, trans ? lda : 1, rows, kc, dst, rows);
}

template <typename T>
void pack_b(bool trans, const T* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  for (int p = 0; p < (kc + 1) / 2; ++p)
    for (int j = cols; j < kNR; ++j) dst[p * kNR + j] = 0;
  pack_lines(b, trans ? ldb : 1, trans ? 1 : ldb, cols, kc, dst, kNR);
}

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

const Kernels& portable_kernels() {
  static const Kernels k{"portable", kMRMax, &pack_a, &pack_b<uint16_t>, &pack_b<float>, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm_bf16
