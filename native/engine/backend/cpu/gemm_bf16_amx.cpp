// The AMX sgemm_bf16 family on the tile instructions (AMX-TILE, AMX-BF16), built with AMX and AVX-512 flags and
// used only where amx_support() says the CPU has AMX and Linux granted the tile data permission. B is packed by the
// AVX512_BF16 family's packers (every AMX CPU has AVX512_BF16), in the layout every family reads, so a weight packed
// once (sgemm_bf16_pack_b, the backend's kept weights) serves this kernel as it serves the others.
#include <immintrin.h>

#include "backend/cpu/gemm_bf16_amx_kernel.h"

namespace moe::cpu::gemm_bf16 {
namespace {

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
  static const Kernels k = amx::family<HardwareTiles>("amx", true, avx512_kernels());
  return k;
}

}  // namespace moe::cpu::gemm_bf16
