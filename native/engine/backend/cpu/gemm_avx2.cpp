// AVX2 sgemm kernel: 16-wide B panels (two ymm) x up to 6 broadcast A rows (12 accumulators of 16 ymm).
// Packing is shared with the portable kernels, which use the same 16-wide layout. Only a panel narrower than 16
// columns uses masked loads and stores, which cost several times the plain ones.
#include <immintrin.h>

#include <array>
#include <utility>

#include "backend/cpu/gemm_kernels.h"

namespace moe::cpu::gemm {
namespace {

constexpr int kNR = 16;
constexpr int kMRMax = 6;

template <int MR, bool Full>
void tile_body(int kc, const float* a, const float* b, int64_t k_stride, float* c, int64_t ldc, int nr, float alpha,
               float beta, bool load_c, float* pack_out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask[2] = {_mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane),
                           _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane)};
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m256 b0 = Full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, mask[0]);
    const __m256 b1 = Full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, mask[1]);
    if (pack_out) {
      _mm256_store_ps(pack_out + k * kNR, b0);
      _mm256_store_ps(pack_out + k * kNR + 8, b1);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += k_stride;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < 2; ++v) {
      float* p = c + i * ldc + 8 * v;
      const __m256 old = !load_c ? _mm256_setzero_ps() : Full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[v]);
      __m256 r = load_c ? _mm256_fmadd_ps(va, acc[i][v], _mm256_mul_ps(vb, old)) : _mm256_mul_ps(va, acc[i][v]);
      if (Full) _mm256_storeu_ps(p, r);
      else _mm256_maskstore_ps(p, mask[v], r);
    }
  }
}

template <int MR>
void tile(int kc, const float* a, const float* b, int64_t k_stride, float* c, int64_t ldc, int nr, float alpha, float beta,
          bool load_c, float* pack_out) {
  if (nr == kNR) tile_body<MR, true>(kc, a, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out);
  else tile_body<MR, false>(kc, a, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out);
}

using TileFn = void (*)(int, const float*, const float*, int64_t, float*, int64_t, int, float, float, bool, float*);
template <int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1>...};
}

int kernel(int mr, int cols, int kc, const float* a, const float* b, int64_t, int64_t k_stride, float* c, int64_t ldc,
           float alpha, float beta, bool load_c, float* pack_out, const Prefetch&) {
  static constexpr auto tiles = make_tiles(std::make_integer_sequence<int, kMRMax>{});
  const int n = cols < kNR ? cols : kNR;
  tiles[mr - 1](kc, a, b, k_stride, c, ldc, n, alpha, beta, load_c, pack_out);
  return n;
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{"avx2", kNR, kMRMax, scalar_kernels().pack_a, scalar_kernels().pack_b, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm
