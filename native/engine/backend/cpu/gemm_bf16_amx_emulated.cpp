// The AMX family's kernel on a plain C++ emulation of the tile instructions, so the kernel's packing, blocking and
// edges run (and are tested) on CPUs without AMX. Never dispatched.
// TDPBF16PS is modelled as Intel's pseudocode for the instruction reads, per C element (m, n):
//   even = odd = 0
//   for each pair k of the A row, in order:   (FMA: one rounding, nearest even, denormal inputs read as zero,
//     even += A[m].bf16[2k]   · B[k].bf16[2n]      a denormal result flushed to a zero of its sign; dpbf16_step)
//     odd  += A[m].bf16[2k+1] · B[k].bf16[2n+1]
//   C[m][n] = C[m][n] + (even + odd)            (each add rounded once, denormals in or out flushed the same way)
// so one instruction's 16 pairs make two chains joined at the end, unlike vdpbf16ps's single chain: the AMX
// family's bits differ from the other families' (within the fp32 accumulation bound). Whether the silicon rounds
// exactly so is not modelled from hardware; the tests hold the real family to the error bound only.
// The emulation also checks what the hardware would fault on: an unconfigured tile, a shape over 16 rows x 64
// bytes, or operands whose shapes do not fit the product.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/gemm_bf16_amx_kernel.h"
#include "core/error.h"

namespace moe::cpu::gemm_bf16 {
namespace {

using amx::kTileBytes;
using amx::kTileRows;
using amx::TileShapes;

// A denormal read as, or flushed to, a zero of its sign.
float flush(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }

struct TileState {
  TileShapes shapes;
  bool configured = false;
  uint32_t words[amx::kTiles][kTileRows][kTileBytes / 4] = {};
};
thread_local TileState tl_tiles;

void require(bool ok, const std::string& what) { check(ok, "emulated AMX: " + what); }

TileState& configured_tile(int t) {
  TileState& s = tl_tiles;
  require(s.configured, "tile instruction without a tile configuration");
  require(s.shapes.rows[t] > 0 && s.shapes.colsb[t] > 0, "tile " + std::to_string(t) + " is not configured");
  return s;
}

void load_tile(int t, const void* src, int64_t stride) {
  TileState& s = configured_tile(t);
  for (int r = 0; r < s.shapes.rows[t]; ++r)
    std::memcpy(s.words[t][r], static_cast<const char*>(src) + r * stride, s.shapes.colsb[t]);
}

void store_tile(int t, void* dst, int64_t stride) {
  TileState& s = configured_tile(t);
  for (int r = 0; r < s.shapes.rows[t]; ++r)
    std::memcpy(static_cast<char*>(dst) + r * stride, s.words[t][r], s.shapes.colsb[t]);
}

void dpbf16ps(int c, int a, int b) {
  TileState& s = configured_tile(c);
  configured_tile(a), configured_tile(b);
  const TileShapes& sh = s.shapes;
  require(sh.rows[a] == sh.rows[c] && sh.colsb[b] == sh.colsb[c] && sh.colsb[a] / 4 == sh.rows[b] &&
              sh.colsb[a] % 4 == 0 && sh.colsb[c] % 4 == 0,
          "TDPBF16PS operand shapes do not fit");
  for (int m = 0; m < sh.rows[c]; ++m)
    for (int n = 0; n < sh.colsb[c] / 4; ++n) {
      float even = 0.0f, odd = 0.0f;
      for (int k = 0; k < sh.rows[b]; ++k) {
        const uint32_t x = s.words[a][m][k], y = s.words[b][k][n];
        even = dpbf16_step(even, static_cast<uint16_t>(x), static_cast<uint16_t>(y));
        odd = dpbf16_step(odd, static_cast<uint16_t>(x >> 16), static_cast<uint16_t>(y >> 16));
      }
      float acc;
      std::memcpy(&acc, &s.words[c][m][n], 4);
      acc = flush(flush(acc) + flush(even + odd));
      std::memcpy(&s.words[c][m][n], &acc, 4);
    }
}

struct EmulatedTiles {
  static void configure(const TileShapes& shapes) {
    for (int t = 0; t < amx::kTiles; ++t)
      require(shapes.rows[t] <= kTileRows && shapes.colsb[t] <= kTileBytes, "tile shape over 16 rows x 64 bytes");
    tl_tiles.shapes = shapes;
    tl_tiles.configured = true;
    std::memset(tl_tiles.words, 0, sizeof(tl_tiles.words));
  }
  template <int T>
  static void zero() {
    std::memset(configured_tile(T).words[T], 0, sizeof(tl_tiles.words[T]));
  }
  template <int T>
  static void load(const void* src, int64_t stride) {
    load_tile(T, src, stride);
  }
  template <int T>
  static void store(void* dst, int64_t stride) {
    store_tile(T, dst, stride);
  }
  template <int I, int J>
  static void dp() {
    dpbf16ps(amx::tile_c(I, J), amx::tile_a(I), amx::tile_b(J));
  }
  static void release() { tl_tiles.configured = false; }
};

}  // namespace

const Kernels& amx_emulated_kernels() {
  static const Kernels k = amx::family<EmulatedTiles>("amx_emulated", false, &amx::pack_a, portable_kernels());
  return k;
}

}  // namespace moe::cpu::gemm_bf16
