// The C update that ends every AVX-512 GEMM tile of the fp32 and AVX512_BF16 families, with one rounding
// sequence for all: c = alpha·acc where C is not read, else c = fma(alpha, acc, beta·c); each vector masked to its
// columns. Include only from files built with AVX-512 flags; internal linkage keeps each file's copies its own.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace moe::cpu::avx512 {
namespace {

template <int MR, int NV>
inline void update_c(const __m512 (&acc)[MR][NV], const __mmask16 (&mask)[NV], float* c, int64_t ldc, float alpha,
                     float beta, bool load_c) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* out = c + i * ldc + 16 * v;
      const __m512 r = load_c
                           ? _mm512_fmadd_ps(va, acc[i][v], _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask[v], out)))
                           : _mm512_mul_ps(va, acc[i][v]);
      _mm512_mask_storeu_ps(out, mask[v], r);
    }
  }
}

}  // namespace
}  // namespace moe::cpu::avx512
