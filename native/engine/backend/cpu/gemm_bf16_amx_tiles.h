// The tile layer under the AMX sgemm_bf16 kernel: the few tile operations it uses, implemented twice with the same
// static interface, on the real instructions (gemm_bf16_amx.cpp) and by a plain C++ emulation of them
// (gemm_bf16_amx_emulated.cpp), so the one kernel template (gemm_bf16_amx_kernel.h) runs on either:
//   configure(shapes)  LDTILECFG, palette 1 (which also zeroes every tile)
//   zero<T>()          TILEZERO tmmT
//   load<T>(p, bytes)  TILELOADD tmmT from rows at p, p + bytes, ...
//   store<T>(p, bytes) TILESTORED
//   dp<I, J>()         TDPBF16PS C(I, J) += A(I) · B(J)
//   release()          TILERELEASE
#pragma once
#include <cstdint>

namespace moe::cpu::gemm_bf16::amx {

constexpr int kTileRows = 16;   // rows of a tile
constexpr int kTileBytes = 64;  // bytes of a tile row: 16 fp32, or 16 pair words (32 bf16)
constexpr int kTilePairs = kTileBytes / 4;

// The kernel's tile plan: a 2x2 block of fp32 C tiles (up to 32 rows x 32 columns), the two 16-row A tiles and
// the two 16-column B tiles feeding it.
constexpr int tile_c(int i, int j) { return 2 * i + j; }
constexpr int tile_a(int i) { return 4 + i; }
constexpr int tile_b(int j) { return 6 + j; }
constexpr int kTiles = 8;

// Rows and bytes per row of each tile; a tile the kernel does not use has both zero.
struct TileShapes {
  uint8_t rows[kTiles] = {};
  uint16_t colsb[kTiles] = {};
};

}  // namespace moe::cpu::gemm_bf16::amx
