// sgemm_bf16 kernels for AVX-512 CPUs without AVX512_BF16 (Skylake-SP, Cascade Lake): vdpbf16ps's per-element
// sequence on fp32 FMAs. Each packed pair word splits into its two bf16 as fp32 (the high half masked, the low
// half shifted up: exact), and the odd product then the even one are added by FMAs, each rounded once, in
// vdpbf16ps's order. That is vdpbf16ps bit for bit as long as no denormal appears, since then its reading of
// denormal inputs as zero and its flushing of denormal results never act. Whether one appeared is read from the
// MXCSR's denormal-operand and underflow flags over the tile (every accumulator, the last one included, is an
// operand of a later step or of the alpha product); such a tile, with values near 1e-38, is recomputed with the
// exact scalar sequence (dot_pairs). The packers are the AVX512_BF16 family's, which use AVX-512 BW only.
// GCC 12 flags _mm512_undefined_*() inside intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "backend/cpu/gemm_bf16_kernels.h"

namespace moe::cpu::gemm_bf16 {
namespace {

constexpr int kNV = kNR / 16;              // zmm vectors per B panel
constexpr unsigned kIeeeCsr = 0x1F80;      // round to nearest, exceptions masked, no DAZ / FTZ, flags clear
constexpr unsigned kDenormalOrUnderflow = 0x0002 | 0x0010;  // DE, UE

inline __mmask16 first_lanes(int n) {
  return n >= 16 ? __mmask16(0xFFFF) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0);
}

// MR rows (of an A panel packed `lda` rows wide) x NP panels of 32 columns over `pairs` k pairs.
template <int MR, int NP>
void tile(int pairs, const uint32_t* a, int lda, const uint32_t* b, float* c, int64_t ldc, int cols, float alpha,
          float beta, bool load_c) {
  constexpr int NV = NP * kNV;
  const int64_t panel_stride = int64_t{pairs} * kNR;
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mask[v] = first_lanes(cols - 16 * v);
  const unsigned saved_csr = _mm_getcsr();
  _mm_setcsr(kIeeeCsr);
  asm volatile("" ::: "memory");
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    prefetch_panels<NP>(b, panel_stride, p);
    __m512 b_odd[NV], b_even[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512i w = _mm512_maskz_loadu_epi32(mask[v], b + (v / kNV) * panel_stride + p * kNR + 16 * (v % kNV));
      b_odd[v] = _mm512_castsi512_ps(_mm512_and_si512(w, high));
      b_even[v] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i w = _mm512_set1_epi32(static_cast<int>(a[p * lda + i]));
      const __m512 a_odd = _mm512_castsi512_ps(_mm512_and_si512(w, high));
      const __m512 a_even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        acc[i][v] = _mm512_fmadd_ps(a_odd, b_odd[v], acc[i][v]);
        acc[i][v] = _mm512_fmadd_ps(a_even, b_even[v], acc[i][v]);
      }
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512 old = load_c ? _mm512_maskz_loadu_ps(mask[v], c + i * ldc + 16 * v) : _mm512_setzero_ps();
      acc[i][v] = load_c ? _mm512_fmadd_ps(va, acc[i][v], _mm512_mul_ps(vb, old)) : _mm512_mul_ps(va, acc[i][v]);
    }
  // Every result computed before the flags are read: one value depending on all of them, held by an asm. (An asm
  // on each accumulator makes GCC keep the accumulator array in memory, storing it on every k pair.)
  __m512i all = _mm512_castps_si512(acc[0][0]);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) all = _mm512_or_si512(all, _mm512_castps_si512(acc[i][v]));
  asm volatile("" : "+v"(all));
  const bool exact = (_mm_getcsr() & kDenormalOrUnderflow) == 0;
  _mm_setcsr(saved_csr);
  if (exact) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + i * ldc + 16 * v, mask[v], acc[i][v]);
    return;
  }
  exact_tile(MR, std::min(cols, NV * 16), pairs, a, lda, b, c, ldc, alpha, beta, load_c);
}

// Register budget (32 zmm): MR x NV accumulators, 2·NV split B vectors, 2 split A broadcasts.
constexpr int kRowsOnePanel = 10;  // 20 + 4 + 2
constexpr int kRowsTwoPanels = 5;  // 20 + 8 + 2

using TileFn = void (*)(int, const uint32_t*, int, const uint32_t*, float*, int64_t, int, float, float, bool);
template <int NP, int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1, NP>...};
}

int kernel(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
           float beta, bool load_c) {
  static constexpr auto one = make_tiles<1>(std::make_integer_sequence<int, kRowsOnePanel>{});
  static constexpr auto two = make_tiles<2>(std::make_integer_sequence<int, kRowsTwoPanels>{});
  const bool wide = cols > kNR;
  const int done = std::min(cols, wide ? 2 * kNR : kNR);
  const int chunk = wide ? kRowsTwoPanels : kRowsOnePanel;
  for (int i0 = 0; i0 < mr; i0 += chunk) {
    const int rows = std::min(chunk, mr - i0);
    const TileFn fn = wide ? two[rows - 1] : one[rows - 1];
    fn(pairs, a + i0, mr, b, c + i0 * ldc, ldc, done, alpha, beta, load_c);
  }
  return done;
}

}  // namespace

const Kernels& avx512_fma_kernels() {
  static const Kernels k{"avx512_fma", false, kMRMax, avx512_kernels().pack_a, avx512_kernels().pack_b16,
                         avx512_kernels().pack_b32, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm_bf16
