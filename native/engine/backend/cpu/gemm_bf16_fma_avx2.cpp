// sgemm_bf16 kernels for CPUs with AVX2 and FMA but no AVX-512 (most desktop and laptop x86 CPUs before Zen 4, and
// Intel's client cores): vdpbf16ps's per-element sequence on 256-bit fp32 FMAs, as the AVX-512 FMA family does it
// (gemm_bf16_fma_avx512.cpp says why that is exact, and how a tile that met a denormal is recomputed). Sixteen
// registers hold a tile of up to 5 rows x 16 columns: 10 accumulators, one half (odd or even k) of a B pair row as
// 2 vectors, an A broadcast and the mask that splits B (A is split into fp32 once per call). A call covers its
// 32-column panels as 16-column halves, a row chunk at a time, in panels of up to three chunks (kMR); a single
// row's tile spans the panel instead (4 accumulators): it reads each of the panel's rows in one sweep, and its four
// independent chains cover the FMA latency that two would leave exposed. The packers are AVX2's own
// (gemm_bf16_pack_avx2.h).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <utility>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_bf16_pack_avx2.h"

namespace moe::cpu::gemm_bf16 {
namespace {

constexpr int kHalf = 16;                  // columns per tile of more than one row
constexpr int kRows = 5;                   // tallest tile
// Tallest A panel: three tiles. The driver balances panel heights, so 128 rows run as 5+5+4 and 5+5+5 rather than
// (at 14) 5+5+2 and 5+5+3, whose short tiles split B for few FMAs (3-7% faster on a Zen 3).
constexpr int kMR = 3 * kRows;
constexpr unsigned kIeeeCsr = 0x1F80;      // round to nearest, exceptions masked, no DAZ / FTZ, flags clear
constexpr unsigned kDenormalOrUnderflow = 0x0002 | 0x0010;  // DE, UE

// MR rows x `cols` (<= 8 * V) columns from b, over `pairs` k pairs. `split` holds the A panel (`lda` rows wide) as
// fp32: split[2*(p*lda + i)] is pair p of row i's odd k, the next float its even k. `a` is its packed words, for
// the exact fallback.
template <int MR, int V, bool Full>
void tile_body(int pairs, const float* split, const uint32_t* a, int lda, const uint32_t* b, float* c, int64_t ldc,
               int cols, float alpha, float beta, bool load_c) {
  __m256i mask[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) mask[v] = lanes_below(cols - 8 * v);
  const unsigned saved_csr = _mm_getcsr();
  _mm_setcsr(kIeeeCsr);
  asm volatile("" ::: "memory");
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 acc[MR][V];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_ps();
  auto words = [&](int p, int v) __attribute__((always_inline)) {
    const int* at = reinterpret_cast<const int*>(b + p * kNR + 8 * v);
    return Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)) : _mm256_maskload_epi32(at, mask[v]);
  };
  for (int p = 0; p < pairs; ++p) {
    prefetch_panels<1>(b, 0, p);
    // Every row's odd-k product, then every row's even-k one: each accumulator still takes its pair's two
    // products in vdpbf16ps's order, and only one half of B and one A value are live at a time. With both halves
    // live the compiler kept the mask constant on the stack and shuffled registers (3-13% slower on a Zen 3; a
    // sixth row in the freed registers was slower still).
    __m256 half[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) half[v] = _mm256_castsi256_ps(_mm256_and_si256(words(p, v), high));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a_odd = _mm256_broadcast_ss(split + 2 * (p * lda + i));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(a_odd, half[v], acc[i][v]);
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) half[v] = _mm256_castsi256_ps(_mm256_slli_epi32(words(p, v), 16));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a_even = _mm256_broadcast_ss(split + 2 * (p * lda + i) + 1);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(a_even, half[v], acc[i][v]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const float* at = c + i * ldc + 8 * v;
      const __m256 old = !load_c ? _mm256_setzero_ps() : Full ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, mask[v]);
      acc[i][v] = load_c ? _mm256_fmadd_ps(va, acc[i][v], _mm256_mul_ps(vb, old)) : _mm256_mul_ps(va, acc[i][v]);
    }
  // Every result computed before the flags are read: one value depending on all of them, held by an asm (as in
  // gemm_bf16_fma_avx512.cpp, where an asm on each accumulator kept them all in memory).
  __m256i all = _mm256_castps_si256(acc[0][0]);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) all = _mm256_or_si256(all, _mm256_castps_si256(acc[i][v]));
  asm volatile("" : "+x"(all));
  const bool exact = (_mm_getcsr() & kDenormalOrUnderflow) == 0;
  _mm_setcsr(saved_csr);
  if (exact) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        if (Full) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
        else _mm256_maskstore_ps(c + i * ldc + 8 * v, mask[v], acc[i][v]);
      }
    return;
  }
  exact_tile(MR, cols, pairs, a, lda, b, c, ldc, alpha, beta, load_c);
}

// Masked loads cost several times a plain one in the inner loop: a tile of all its columns reads B unmasked.
template <int MR, int V = 2>
void tile(int pairs, const float* split, const uint32_t* a, int lda, const uint32_t* b, float* c, int64_t ldc,
          int cols, float alpha, float beta, bool load_c) {
  if (cols >= 8 * V) tile_body<MR, V, true>(pairs, split, a, lda, b, c, ldc, cols, alpha, beta, load_c);
  else tile_body<MR, V, false>(pairs, split, a, lda, b, c, ldc, cols, alpha, beta, load_c);
}

using TileFn = void (*)(int, const float*, const uint32_t*, int, const uint32_t*, float*, int64_t, int, float, float,
                        bool);
template <int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1>...};
}

// Up to kPanelsPerCall panels (or all of cols when fewer): each panel's 16-column halves in row chunks of up to kRows.
// A's words are split into fp32 once per call and serve every panel of it: split per panel, that conversion took
// about a tenth of the time on a Zen 3.
constexpr int kPanelsPerCall = 4;
int kernel(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
           float beta, bool load_c) {
  static constexpr auto tiles = make_tiles(std::make_integer_sequence<int, kRows>{});
  const int done = std::min(cols, kPanelsPerCall * kNR);
  // Exact, as in the tile. A fixed buffer, not a std::vector: a library template instantiated here would be
  // compiled for AVX2 and could be the copy the linker keeps for every other file.
  alignas(64) thread_local float split[2 * kPairsMax * kMR];
  const int words = pairs * mr;
  for (int q = 0; q < words; ++q) {
    const uint32_t w = a[q];
    split[2 * q] = std::bit_cast<float>(w & 0xFFFF0000u);
    split[2 * q + 1] = std::bit_cast<float>(w << 16);
  }
  if (mr == 1) {
    for (int p0 = 0; p0 < done; p0 += kNR)
      tile<1, kNR / 8>(pairs, split, a, 1, b + static_cast<int64_t>(p0) * pairs, c + p0, ldc,
                       std::min(kNR, done - p0), alpha, beta, load_c);
    return done;
  }
  // Row chunk outermost: its split rows (10 KiB at 256 pairs) stay in L1 while the B panels stream through from L2.
  // Panel by panel, each half-panel (16 KiB) met the whole split A (up to 28 KiB) in a 32 KiB L1, and both missed
  // (2-6% slower on a Zen 3).
  for (int i0 = 0; i0 < mr; i0 += kRows) {
    const int rows = std::min(kRows, mr - i0);
    for (int p0 = 0; p0 < done; p0 += kNR) {
      const uint32_t* panel = b + static_cast<int64_t>(p0) * pairs;  // panel p0 / kNR
      const int width = std::min(kNR, done - p0);
      for (int j0 = 0; j0 < width; j0 += kHalf)
        tiles[rows - 1](pairs, split + 2 * i0, a + i0, mr, panel + j0, c + i0 * ldc + p0 + j0, ldc,
                        std::min(kHalf, width - j0), alpha, beta, load_c);
    }
  }
  return done;
}

}  // namespace

const Kernels& avx2_fma_kernels() {
  static const Kernels k{"avx2_fma", false, kMR, &pack_a_avx2, &pack_b_avx2<uint16_t>, &pack_b_avx2<float>, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm_bf16
