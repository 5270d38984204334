// AVX2 sgemm kernel: 16-wide B panels (two ymm) x up to 6 broadcast A rows (12 accumulators of 16 ymm).
// A and B are packed by AVX2 packers that write the portable ones' words. Only a panel narrower than 16 columns uses
// masked loads and stores, which cost several times the plain ones. The kernel pulls the driver's next B panel
// toward L2 where that panel is a line per row (Prefetch), so the copy that packs it finds it there.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "backend/cpu/bf16_avx2.h"
#include "backend/cpu/gemm_kernels.h"

namespace moe::cpu::gemm {
namespace {

constexpr int kNR = 16;
constexpr int kMRMax = 6;

template <int MR, bool Full, bool Pack>
void tile_body(int kc, const float* a, int64_t a_k, const float* b, int64_t k_stride, float* c, int64_t ldc, int nr,
               float alpha, float beta, bool load_c, float* pack_out, const Prefetch& pf) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask[2] = {_mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane),
                           _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane)};
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  auto step = [&](int k) __attribute__((always_inline)) {
    const __m256 b0 = Full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, mask[0]);
    const __m256 b1 = Full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, mask[1]);
    if constexpr (Pack) {
      _mm256_store_ps(pack_out + k * kNR, b0);
      _mm256_store_ps(pack_out + k * kNR + 8, b1);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += a_k;
    b += k_stride;
  };
  // The next panel's rows, one line every other k, only where they are short runs far apart (a non-transposed B's
  // panel, a line per row): the hardware prefetchers follow longer runs themselves, and prefetches beside them
  // only took load slots (measured slower on a Zen 3).
  const char* pf_row = pf.p;
  int k = 0, pf_off = 0, pf_rows = pf.row_bytes <= 128 ? pf.rows : 0;
  for (; k < kc && pf_rows > 0; ++k) {
    if (k & 1) {
      _mm_prefetch(pf_row + pf_off, _MM_HINT_T1);
      if ((pf_off += 64) >= pf.row_bytes) pf_off = 0, pf_row += pf.stride, --pf_rows;
    }
    step(k);
  }
  // Four k a round: the loop's own counting and branch otherwise took issue slots from the 12 FMAs (measured 5-8%
  // on a Zen 3).
#pragma GCC unroll 4
  for (; k < kc; ++k) step(k);
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
void tile(int kc, const float* a, int64_t a_k, const float* b, int64_t k_stride, float* c, int64_t ldc, int nr,
          float alpha, float beta, bool load_c, float* pack_out, const Prefetch& pf) {
  if (pack_out) {
    if (nr == kNR) tile_body<MR, true, true>(kc, a, a_k, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out, pf);
    else tile_body<MR, false, true>(kc, a, a_k, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out, pf);
  } else {
    if (nr == kNR) tile_body<MR, true, false>(kc, a, a_k, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out, pf);
    else tile_body<MR, false, false>(kc, a, a_k, b, k_stride, c, ldc, nr, alpha, beta, load_c, pack_out, pf);
  }
}

using TileFn = void (*)(int, const float*, int64_t, const float*, int64_t, float*, int64_t, int, float, float, bool,
                        float*, const Prefetch&);
template <int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1>...};
}

// Transposes 8 rows of 8 floats in registers (r[i][j] -> r[j][i]).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// The portable packer's words (gemm_scalar.cpp): k in [0, kc) x columns [0, cols) of op(B), zero past cols. A
// transposed B (column j's k run along memory) is read 8 columns by 8 k and transposed in registers.
void pack_b(bool trans, const float* b, int64_t ldb, int kc, int cols, float* dst) {
  using avx2::lanes_below;
  if (!trans) {
    const __m256i mask[2] = {lanes_below(cols), lanes_below(cols - 8)};
    for (int k = 0; k < kc; ++k)
      for (int v = 0; v < 2; ++v)
        _mm256_store_ps(dst + k * kNR + 8 * v, cols >= kNR ? _mm256_loadu_ps(b + k * ldb + 8 * v)
                                                           : _mm256_maskload_ps(b + k * ldb + 8 * v, mask[v]));
    return;
  }
  for (int k0 = 0; k0 < kc; k0 += 8) {
    const int kn = std::min(8, kc - k0);
    const __m256i k_mask = lanes_below(kn);
    for (int h = 0; h < 2; ++h) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int j = 8 * h + i;
        const float* src = b + j * ldb + k0;
        r[i] = j >= cols ? _mm256_setzero_ps() : kn == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, k_mask);
      }
      transpose8(r);
      for (int q = 0; q < kn; ++q) _mm256_store_ps(dst + (k0 + q) * kNR + 8 * h, r[q]);
    }
  }
}

// The portable packer's words: k in [0, kc) x rows [0, rows) of op(A), k-major (dst[k * rows + i]), rows <= 8. Each
// k's run is stored as a whole vector whose spare lanes land on the next k's run, which is stored after it; only a
// store that would reach past the panel is masked.
void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, float* dst) {
  using avx2::lanes_below;
  const __m256i row_mask = lanes_below(rows);
  const int64_t end = int64_t{kc} * rows;
  auto store = [&](int k, __m256 v) {
    float* at = dst + int64_t{k} * rows;
    if (int64_t{k} * rows + 8 <= end) _mm256_storeu_ps(at, v);
    else _mm256_maskstore_ps(at, row_mask, v);
  };
  if (trans) {
    // op(A)[i][k] = a[k*lda + i]: each k is a run of `rows` floats.
    for (int k = 0; k < kc; ++k) store(k, rows == 8 ? _mm256_loadu_ps(a + k * lda) : _mm256_maskload_ps(a + k * lda, row_mask));
    return;
  }
  // op(A)[i][k] = a[i*lda + k]: 8 k of every row, transposed in registers into 8 runs of `rows` floats.
  for (int k0 = 0; k0 < kc; k0 += 8) {
    const int kn = std::min(8, kc - k0);
    const __m256i k_mask = lanes_below(kn);
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      r[i] = i >= rows ? _mm256_setzero_ps() : kn == 8 ? _mm256_loadu_ps(a + i * lda + k0)
                                                       : _mm256_maskload_ps(a + i * lda + k0, k_mask);
    transpose8(r);
    for (int k = 0; k < kn; ++k) store(k0 + k, r[k]);
  }
}

int kernel(int mr, int cols, int kc, const float* a, int64_t a_k, const float* b, int64_t, int64_t k_stride, float* c,
           int64_t ldc, float alpha, float beta, bool load_c, float* pack_out, const Prefetch& pf) {
  static constexpr auto tiles = make_tiles(std::make_integer_sequence<int, kMRMax>{});
  const int n = cols < kNR ? cols : kNR;
  tiles[mr - 1](kc, a, a_k, b, k_stride, c, ldc, n, alpha, beta, load_c, pack_out, pf);
  return n;
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{"avx2", kNR, kMRMax, &pack_a, &pack_b, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm
