// The AMX sgemm_bf16 family on the tile instructions (AMX-TILE, AMX-BF16), built with AMX and AVX-512 flags and
// used only where amx_support() says the CPU has AMX and Linux granted the tile data permission. B is packed by the
// AVX512_BF16 family's packers (every AMX CPU has AVX512_BF16), in the layout every family reads, so a weight packed
// once (sgemm_bf16_pack_b, the backend's kept weights) serves this kernel as it serves the others.
// GCC 12 flags _mm512_undefined_*() inside intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/gemm_bf16_amx_kernel.h"
#include "backend/cpu/gemm_bf16_pack_avx512.h"

namespace moe::cpu::gemm_bf16 {
namespace {

// amx::pack_a's words on AVX-512: a row of op(A) whose k run along memory is rounded 32 k at a time; one whose k
// run across rows (trans) is read 16 rows by 16 pairs and transposed in registers. TDPBF16PS has several times the
// multiply-add throughput of vdpbf16ps, so a scalar A packer would take a large share of each call.
void pack_a_rows(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  if (!trans) {
    for (int i = 0; i < rows; ++i)
      for (int k0 = 0; k0 < kc; k0 += 32) {
        const int kn = std::min(32, kc - k0);
        _mm512_mask_storeu_epi32(dst + int64_t{i} * pairs + k0 / 2, avx512::first_lanes((kn + 1) / 2),
                                 row_pairs(a + i * lda + k0, kn));
      }
    return;
  }
  for (int i0 = 0; i0 < rows; i0 += 16) {
    const int lines = std::min(16, rows - i0);
    const __mmask16 line_mask = avx512::first_lanes(lines);
    for (int p0 = 0; p0 < pairs; p0 += 16) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
        const int p = p0 + q;
        const float* r0 = a + int64_t{2 * p} * lda + i0;
        r[q] = p < pairs ? col_pairs(r0, 2 * p + 1 < kc ? r0 + lda : nullptr, line_mask) : _mm512_setzero_si512();
      }
      avx512::transpose16(r);
      const __mmask16 pair_mask = avx512::first_lanes(pairs - p0);
      for (int l = 0; l < lines; ++l) _mm512_mask_storeu_epi32(dst + int64_t{i0 + l} * pairs + p0, pair_mask, r[l]);
    }
  }
}

using amx::TileShapes;

// The tile intrinsics take the tile number as a literal token, so each compile-time T is spelled out.
#define MOE_AMX_TILE_CASES(T, OP) \
  switch (T) {                    \
    case 0: OP(0); break;         \
    case 1: OP(1); break;         \
    case 2: OP(2); break;         \
    case 3: OP(3); break;         \
    case 4: OP(4); break;         \
    case 5: OP(5); break;         \
    case 6: OP(6); break;         \
    default: OP(7); break;        \
  }

struct HardwareTiles {
  static void configure(const TileShapes& shapes) {
    // LDTILECFG's 64-byte operand: palette, start row, reserved, colsb[16] (16-bit), rows[16] (8-bit).
    struct alignas(64) Config {
      uint8_t palette = 1, start_row = 0, reserved[14] = {};
      uint16_t colsb[16] = {};
      uint8_t rows[16] = {};
    } cfg;
    for (int t = 0; t < amx::kTiles; ++t) cfg.colsb[t] = shapes.colsb[t], cfg.rows[t] = shapes.rows[t];
    asm volatile("" : : "r"(&cfg) : "memory");  // the intrinsic declares only 8 of the 64 bytes it reads
    _tile_loadconfig(&cfg);
  }
  template <int T>
  static void zero() {
#define MOE_AMX_ZERO(t) _tile_zero(t)
    MOE_AMX_TILE_CASES(T, MOE_AMX_ZERO)
  }
  template <int T>
  static void load(const void* src, int64_t stride) {
    asm volatile("" ::: "memory");  // the load intrinsic declares no memory read: order it after the packers' stores
#define MOE_AMX_LOAD(t) _tile_loadd(t, src, stride)
    MOE_AMX_TILE_CASES(T, MOE_AMX_LOAD)
  }
  template <int T>
  static void store(void* dst, int64_t stride) {
#define MOE_AMX_STORE(t) _tile_stored(t, dst, stride)
    MOE_AMX_TILE_CASES(T, MOE_AMX_STORE)
  }
  // C(I, J) += A(I) · B(J) in the plan's tiles (gemm_bf16_amx_tiles.h).
  template <int I, int J>
  static void dp() {
    static_assert(amx::tile_c(I, J) == 2 * I + J && amx::tile_a(I) == 4 + I && amx::tile_b(J) == 6 + J);
    if constexpr (I == 0 && J == 0) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (I == 0 && J == 1) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (I == 1 && J == 0) _tile_dpbf16ps(2, 5, 6);
    else _tile_dpbf16ps(3, 5, 7);
  }
  static void release() { _tile_release(); }
};

}  // namespace

const Kernels& amx_kernels() {
  static const Kernels k = amx::family<HardwareTiles>("amx", true, &pack_a_rows, avx512_kernels());
  return k;
}

}  // namespace moe::cpu::gemm_bf16
