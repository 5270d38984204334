// AVX512_BF16 sgemm_bf16 kernels: vdpbf16ps tiles of up to 14 broadcast A pairs x 32 columns (28 fp32
// accumulators, or 6 x 64 / 3 x 128 for short panels), and packers built on gemm_bf16_pack_avx512.h's pieces.
// GCC 12 flags _mm512_undefined_*() inside intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <array>
#include <utility>

#include "backend/cpu/bf16_avx512.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_bf16_pack_avx512.h"
#include "backend/cpu/gemm_update_c_avx512.h"

namespace moe::cpu::gemm_bf16 {
namespace {

using avx512::bf16_bits;
using avx512::first_lanes;

constexpr int kNV = kNR / 16;  // zmm vectors per B panel
// k rows of a non-transposed B fetched ahead: the driver packs kPackRows (8) at a time, panel after panel.
constexpr int kPackAhead = 8;

void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  const __mmask16 row_mask = first_lanes(rows);
  if (!trans) return pack_along(a, lda, rows, kc, dst, rows, row_mask);
  for (int p = 0; p < (kc + 1) / 2; ++p) {
    const float* r0 = a + 2 * p * lda;
    _mm512_mask_storeu_epi32(dst + p * rows, row_mask, col_pairs(r0, 2 * p + 1 < kc ? r0 + lda : nullptr, row_mask));
  }
}

template <typename T>
void pack_b(bool trans, const T* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  if (trans) {
    for (int v = 0; v < kNV; ++v)
      pack_along(b + 16 * v * ldb, ldb, std::clamp(cols - 16 * v, 0, 16), kc, dst + 16 * v, kNR, __mmask16(0xFFFF));
    return;
  }
  // Each pair's rows kPackAhead on are fetched over this panel's columns and the next panel's (packed next).
  constexpr int kLines = 2 * kNR * int(sizeof(T)) / 64;
  for (int p = 0; p < (kc + 1) / 2; ++p) {
    const T* r0 = b + 2 * p * ldb;
    const T* r1 = 2 * p + 1 < kc ? r0 + ldb : nullptr;
#pragma GCC unroll 2
    for (int v = 0; v < kLines; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(r0 + kPackAhead * ldb) + 64 * v, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r0 + (kPackAhead + 1) * ldb) + 64 * v, _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v)
      _mm512_store_si512(dst + p * kNR + 16 * v,
                         col_pairs(r0 + 16 * v, r1 ? r1 + 16 * v : nullptr, first_lanes(cols - 16 * v)));
  }
}

// MR rows x NP panels of 32 columns over `pairs` k pairs. B loads are masked to `cols` so that panels past the
// packed block are never read; stores are masked to `cols`.
template <int MR, int NP>
void tile(int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int cols, float alpha, float beta,
          bool load_c) {
  constexpr int NV = NP * kNV;
  const int64_t panel_stride = int64_t{pairs} * kNR;
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mask[v] = first_lanes(cols - 16 * v);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* cpf = c;
  for (int p = 0; p < pairs; ++p) {
    // Pull the C tile toward L1 during the first iterations so the final update does not stall on it.
    if (p < MR) {
      _mm_prefetch(reinterpret_cast<const char*>(cpf), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cpf + 16 * NV - 1), _MM_HINT_T0);
      cpf += ldc;
    }
    prefetch_panels<NP>(b, panel_stride, p);
    __m512bh bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], b + (v / kNV) * panel_stride + p * kNR + 16 * (v % kNV));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
    a += MR;
  }
  avx512::update_c(acc, mask, c, ldc, alpha, beta, load_c);
}

// Panels per call for an mr-row tile: enough accumulators (up to 28) to cover the dot-product latency. One row (a
// decode step's product on a laid-out weight) is bound by reading B, not by that latency: one panel keeps its reads
// one sequential stream (rather than four 32 KiB apart), which measured 10-20% more read bandwidth on Zen 4.
constexpr int panels_for(int mr) { return mr == 1 ? 1 : mr <= 3 ? 4 : mr <= 6 ? 2 : 1; }

using TileFn = void (*)(int, const uint32_t*, const uint32_t*, float*, int64_t, int, float, float, bool);
template <int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1, panels_for(I + 1)>...};
}

int kernel(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
           float beta, bool load_c) {
  static constexpr auto tiles = make_tiles(std::make_integer_sequence<int, kMRMax>{});
  const int done = std::min(cols, panels_for(mr) * kNR);
  tiles[mr - 1](pairs, a, b, c, ldc, done, alpha, beta, load_c);
  return done;
}

// Kernels::direct_b16t: each group of 16 B rows is transposed in registers, 32 k at a time, into the words a packed
// panel would hold (pack_b's), and every accumulator runs the tiles' sequence on them: the same bits.
template <int MR>
void direct_tile(int cols, int kc, const uint32_t* a, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                 float alpha, float beta, bool load_c) {
  constexpr int NV = kDirectCols / 16;
  __mmask16 mask[NV];
  __m512 acc[MR][NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    mask[v] = first_lanes(cols - 16 * v);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[i][v] = _mm512_setzero_ps();
  }
  for (int k0 = 0; k0 < kc; k0 += 32) {
    const int kn = std::min(32, kc - k0), pairs = (kn + 1) / 2;
    const uint32_t* ak = a + k0 / 2 * MR;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l)
        r[l] = 16 * v + l < cols ? row_pairs(b + (16 * v + l) * ldb + k0, kn) : _mm512_setzero_si512();
      avx512::transpose16(r);
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
        if (q >= pairs) break;
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i)
          acc[i][v] = _mm512_dpbf16_ps(acc[i][v], (__m512bh)_mm512_set1_epi32(static_cast<int>(ak[q * MR + i])),
                                       (__m512bh)r[q]);
      }
    }
  }
  avx512::update_c(acc, mask, c, ldc, alpha, beta, load_c);
}

void direct_b16t(int mr, int cols, int kc, const uint32_t* a, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                 float alpha, float beta, bool load_c) {
  using Fn = void (*)(int, int, const uint32_t*, const uint16_t*, int64_t, float*, int64_t, float, float, bool);
  static constexpr std::array<Fn, kDirectRowsMax> tiles{&direct_tile<1>, &direct_tile<2>, &direct_tile<3>,
                                                        &direct_tile<4>};
  tiles[mr - 1](cols, kc, a, b, ldb, c, ldc, alpha, beta, load_c);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k{"avx512_bf16", true, kMRMax, &pack_a, &pack_b<uint16_t>, &pack_b<float>, &kernel,
                         &direct_b16t};
  return k;
}

}  // namespace moe::cpu::gemm_bf16
