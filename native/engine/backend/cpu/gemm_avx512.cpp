// AVX-512 sgemm kernels: 32-wide B panels (two zmm), up to 14 broadcast A rows per tile (28 accumulators),
// masked stores for the N edge, and a 16x16 in-register transpose for packing Bᵀ. Products of at most 64 columns
// (a LoRA rank, a router's experts) have narrow tiles of their own that read A where it lies.
// GCC 12 flags _mm512_undefined_ps() inside the shuffle intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "backend/cpu/bf16_avx512.h"
#include "backend/cpu/gemm_kernels.h"
#include "backend/cpu/gemm_update_c_avx512.h"
#include "backend/cpu/transpose_avx512.h"

namespace moe::cpu::gemm {
namespace {

constexpr int kNV = 2;  // zmm vectors across N
constexpr int kNR = 16 * kNV;
constexpr int kMRMax = 14;
// A transposed A is read in place by regions of up to this many columns (Kernels::in_place_a_cols). Zen 5,
// 2 threads, dyᵀ·x with K 512: 2048 x 256 went from 413 to 462 GFLOP/s and 256 x 1024 from 447 to 465; from
// 1024 x 1024 on, where each packed panel serves 32 or more column tiles, the packed copy was 1-2.5% faster.
// (The AVX2 family's 6-row tiles, 12 FMAs a k, lost a third reading A in place on 2048 rows: it always packs.)
constexpr int kInPlaceACols = 512;
// B rows are fetched this many k ahead: in-place B walks rows ldb apart, where the hardware prefetchers lag.
constexpr int kPrefetchK = 8;

// MR rows x NP panels of 32 columns; panel p of B starts at b + p*panel_stride, its rows k at + k*k_stride
// (packed: kc*32 and 32; a non-transposed B read in place: 32 and ldb). Loads and stores are masked to
// `cols`, so the same code serves interior tiles, the N edge and in-place B. Pack also writes the B
// vectors it loads to pack_out in the packed layout.
template <int MR, int NP, bool Pack>
void tile(int kc, const float* a, int64_t a_k, const float* b, int64_t panel_stride, int64_t k_stride, float* c,
          int64_t ldc, int cols, float alpha, float beta, bool load_c, float* pack_out, const Prefetch& pf) {
  constexpr int NV = NP * kNV;
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mask[v] = avx512::first_lanes(cols - 16 * v);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* cpf = c;
  // The next block's lines, one every other k (about 30 cycles apart, which the fill buffers sustain).
  const char* pf_row = pf.p;
  int pf_off = 0, pf_rows = pf.rows;
  for (int k = 0; k < kc; ++k) {
    if ((k & 1) && pf_rows > 0) {
      _mm_prefetch(pf_row + pf_off, _MM_HINT_T1);
      if ((pf_off += 64) >= pf.row_bytes) pf_off = 0, pf_row += pf.stride, --pf_rows;
    }
    // Pull the C tile toward L1 during the first iterations so the final update does not stall on it.
    if (k < MR) {
      _mm_prefetch(reinterpret_cast<const char*>(cpf), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cpf + 16 * NV - 1), _MM_HINT_T0);
      cpf += ldc;
    }
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(b + (v / kNV) * panel_stride + (k + kPrefetchK) * k_stride +
                                                 16 * (v % kNV)),
                   _MM_HINT_T0);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      bv[v] = _mm512_maskz_loadu_ps(mask[v], b + (v / kNV) * panel_stride + k * k_stride + 16 * (v % kNV));
      if constexpr (Pack) _mm512_store_ps(pack_out + (v / kNV) * kc * kNR + k * kNR + 16 * (v % kNV), bv[v]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    a += a_k;
  }
  avx512::update_c(acc, mask, c, ldc, alpha, beta, load_c);
}

// Panels per call for an mr-row tile: enough accumulators (up to 24) to cover the FMA latency.
constexpr int panels_for(int mr) { return mr <= 3 ? 4 : mr <= 6 ? 2 : 1; }
constexpr int kPanelsMax = panels_for(1);

using TileFn = void (*)(int, const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, int, float, float,
                        bool, float*, const Prefetch&);
// [mr - 1][np - 1]: an mr-row tile over np panels, np up to panels_for(mr) (past it: panels_for(mr), never called).
template <bool Pack, int MR, int... P>
constexpr std::array<TileFn, kPanelsMax> tiles_of_rows(std::integer_sequence<int, P...>) {
  return {&tile<MR, std::min(P + 1, panels_for(MR)), Pack>...};
}
template <bool Pack, int... I>
constexpr auto make_tiles(std::integer_sequence<int, I...>) {
  return std::array<std::array<TileFn, kPanelsMax>, sizeof...(I)>{
      tiles_of_rows<Pack, I + 1>(std::make_integer_sequence<int, kPanelsMax>{})...};
}

// A call covers the panels its columns need and no more: a panel past them would cost its FMAs, and its masked-off
// loads and prefetches would reach memory no one wrote (a pack buffer's untouched pages), where each such load
// takes a slow assist on some CPUs (AMD Zen 4: one row of weights, M = 1, ran 100x slower).
int kernel(int mr, int cols, int kc, const float* a, int64_t a_k, const float* b, int64_t panel_stride,
           int64_t k_stride, float* c, int64_t ldc, float alpha, float beta, bool load_c, float* pack_out,
           const Prefetch& pf) {
  static constexpr auto tiles = make_tiles<false>(std::make_integer_sequence<int, kMRMax>{});
  static constexpr auto packing_tiles = make_tiles<true>(std::make_integer_sequence<int, kMRMax>{});
  // One row on packed panels (a decode step's product on a laid-out weight) is bound by reading them: one panel a
  // call keeps the reads one sequential stream rather than several a panel apart.
  const int most = mr == 1 && panel_stride > kNR ? 1 : panels_for(mr);
  const int done = std::min(cols, most * kNR);
  const int panels = (done + kNR - 1) / kNR;
  (pack_out ? packing_tiles : tiles)[mr - 1][panels - 1](kc, a, a_k, b, panel_stride, k_stride, c, ldc, done, alpha,
                                                         beta, load_c, pack_out, pf);
  return done;
}

// Narrow products (Kernels::narrow): up to 64 columns as NV zmm vectors, MR rows of A broadcast where they lie.
// TransA: op(A)[i][k] = a[k*a_k + i], a contiguous run per k; else row i at a + i*a_row, read along k.
constexpr int kNarrowNV = 4;
constexpr int narrow_rows(int nv) { return nv < 4 ? 8 : 6; }  // 8..24 accumulators: enough to cover the FMA latency
constexpr int kNarrowMR = narrow_rows(1);                     // the most rows of any width

template <int MR, int NV, bool TransA>
void narrow_tile(int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, float* c, int64_t ldc,
                 float alpha, float beta, bool load_c) {
  __mmask16 mask[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mask[v] = avx512::first_lanes(cols - 16 * v);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* row[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) row[i] = a + i * a_row;
  const int64_t panel = int64_t{kc} * kNR;
  for (int k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + (v / kNV) * panel + k * kNR + 16 * (v % kNV));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(TransA ? a[i] : row[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    if constexpr (TransA) a += a_k;
  }
  avx512::update_c(acc, mask, c, ldc, alpha, beta, load_c);
}

using NarrowFn = void (*)(int, int, const float*, int64_t, int64_t, const float*, float*, int64_t, float, float, bool);
template <int NV, bool TransA, int... I>
constexpr auto make_narrow_tiles(std::integer_sequence<int, I...>) {
  // Tiles are at most narrow_rows(NV) rows; the entries past it (NV 4) are never called.
  return std::array<NarrowFn, sizeof...(I)>{&narrow_tile<std::min(I + 1, narrow_rows(NV)), NV, TransA>...};
}

template <bool TransA>
void narrow_rows_of(int mr, int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, float* c,
                    int64_t ldc, float alpha, float beta, bool load_c) {
  using Seq = std::make_integer_sequence<int, kNarrowMR>;
  static constexpr std::array<std::array<NarrowFn, kNarrowMR>, kNarrowNV> tiles = {
      make_narrow_tiles<1, TransA>(Seq{}), make_narrow_tiles<2, TransA>(Seq{}), make_narrow_tiles<3, TransA>(Seq{}),
      make_narrow_tiles<4, TransA>(Seq{})};
  const int nv = (cols + 15) / 16;
  // Balanced tiles of at most this width's rows: 20 rows become 7,7,6 rather than 8,8,4.
  const int n_tiles = (mr + narrow_rows(nv) - 1) / narrow_rows(nv);
  for (int t = 0; t < n_tiles; ++t) {
    const int i0 = static_cast<int>(int64_t{mr} * t / n_tiles), i1 = static_cast<int>(int64_t{mr} * (t + 1) / n_tiles);
    tiles[nv - 1][i1 - i0 - 1](cols, kc, a + i0 * a_row, a_row, a_k, b, c + i0 * ldc, ldc, alpha, beta, load_c);
  }
}

void narrow(int mr, int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, float* c,
            int64_t ldc, float alpha, float beta, bool load_c) {
  (a_row == 1 ? narrow_rows_of<true> : narrow_rows_of<false>)(mr, cols, kc, a, a_row, a_k, b, c, ldc, alpha, beta,
                                                                load_c);
}

// What pack_a fetches ahead of its loads: a transposed A's k rows lda apart, and along a row of a plain one, lines.
constexpr int kPackAheadK = 16;
constexpr int kPackAheadLines = 4;

void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, float* dst) {
  const __mmask16 row_mask = __mmask16((1u << rows) - 1);
  if (trans) {
    // op(A)[i][k] = a[k*lda + i]: each k is a contiguous run of `rows` floats.
    for (int k = 0; k < kc; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(a + (k + kPackAheadK) * lda), _MM_HINT_T0);
      _mm512_mask_storeu_ps(dst + k * rows, row_mask, _mm512_maskz_loadu_ps(row_mask, a + k * lda));
    }
    return;
  }
  // op(A)[i][k] = a[i*lda + k]: 16 k of every row, transposed in registers into 16 runs of `rows` floats.
  for (int k0 = 0; k0 < kc; k0 += 16) {
    const int kn = kc - k0 < 16 ? kc - k0 : 16;
    const __mmask16 km = __mmask16((1u << kn) - 1);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i < rows) _mm_prefetch(reinterpret_cast<const char*>(a + i * lda + k0 + 16 * kPackAheadLines), _MM_HINT_T0);
      r[i] = i < rows ? _mm512_maskz_loadu_ps(km, a + i * lda + k0) : _mm512_setzero_ps();
    }
    avx512::transpose16(r);
    for (int k = 0; k < kn; ++k) _mm512_mask_storeu_ps(dst + (k0 + k) * rows, row_mask, r[k]);
  }
}

void pack_b(bool trans, const float* b, int64_t ldb, int kc, int cols, float* dst) {
  if (!trans) {
    __mmask16 mask[kNV];
    for (int v = 0; v < kNV; ++v) mask[v] = avx512::first_lanes(cols - 16 * v);
    for (int k = 0; k < kc; ++k) {
      const float* src = b + k * ldb;
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v)
        _mm512_store_ps(dst + k * kNR + 16 * v, _mm512_maskz_loadu_ps(mask[v], src + 16 * v));
    }
    return;
  }
  // op(B)[k][j] = b[j*ldb + k]: 16x16 blocks of rows j, columns k, transposed in registers.
  for (int v = 0; v < kNV; ++v) {
    int j0 = 16 * v;
    for (int k0 = 0; k0 < kc; k0 += 16) {
      int kn = kc - k0 < 16 ? kc - k0 : 16;
      __mmask16 km = __mmask16((1u << kn) - 1);
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        r[j] = j0 + j < cols ? _mm512_maskz_loadu_ps(km, b + (j0 + j) * ldb + k0) : _mm512_setzero_ps();
      avx512::transpose16(r);
      for (int k = 0; k < kn; ++k) _mm512_store_ps(dst + (k0 + k) * kNR + j0, r[k]);
    }
  }
}

// Kernels::direct_bt: each group of 16 B rows is transposed in registers, 16 k at a time, into the vectors a packed
// panel would hold (pack_b's), and every accumulator runs the tiles' sequence on them: the same bits.
template <int MR>
void direct_tile(int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb, float* c,
                 int64_t ldc, float alpha, float beta, bool load_c) {
  constexpr int NV = kDirectCols / 16;
  __mmask16 mask[NV];
  __m512 acc[MR][NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    mask[v] = avx512::first_lanes(cols - 16 * v);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[i][v] = _mm512_setzero_ps();
  }
  for (int k0 = 0; k0 < kc; k0 += 16) {
    const int kn = std::min(16, kc - k0);
    const __mmask16 km = avx512::first_lanes(kn);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l)
        r[l] = 16 * v + l < cols ? _mm512_maskz_loadu_ps(km, b + (16 * v + l) * ldb + k0) : _mm512_setzero_ps();
      avx512::transpose16(r);
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
        if (q >= kn) break;
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i)
          acc[i][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[i * a_row + (k0 + q) * a_k]), r[q], acc[i][v]);
      }
    }
  }
  avx512::update_c(acc, mask, c, ldc, alpha, beta, load_c);
}

void direct_bt(int mr, int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb,
               float* c, int64_t ldc, float alpha, float beta, bool load_c) {
  using Fn = void (*)(int, int, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, float, float,
                      bool);
  static constexpr std::array<Fn, kDirectRowsMax> tiles{&direct_tile<1>, &direct_tile<2>, &direct_tile<3>,
                                                        &direct_tile<4>};
  tiles[mr - 1](cols, kc, a, a_row, a_k, b, ldb, c, ldc, alpha, beta, load_c);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k{"avx512", kNR, kMRMax, &pack_a, &pack_b, &kernel, 16 * kNarrowNV, &narrow, &direct_bt,
                         kInPlaceACols};
  return k;
}

}  // namespace moe::cpu::gemm
