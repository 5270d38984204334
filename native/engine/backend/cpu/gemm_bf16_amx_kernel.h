// The AMX sgemm_bf16 kernel, written once over a tile layer (gemm_bf16_amx_tiles.h): the hardware family and the
// emulated one (tests) instantiate these same packing, blocking and edge paths.
// A panel (up to 32 rows) is packed as tile rows, a[i*pairs + p] = pair p of row i, so an A tile is 16 rows of 16
// consecutive pairs (row stride pairs·4 bytes). B keeps the shared panel layout b[p*kNR + j], which is already the
// pair-row layout TDPBF16PS takes for B: a B tile is 16 pair rows x 16 columns (row stride kNR·4 bytes).
// A call covers up to kPanels B panels. For each panel the 2x2 C tiles start at zero, take every full 16-pair
// step, then are parked in an fp32 buffer; if pairs is not a multiple of 16 the tiles are reshaped to the remaining
// width (loading a configuration clears the tiles, hence the buffer) and each panel's C tiles are reloaded, take
// the last step and are parked again. The buffer then updates C with alpha and beta as the other families do.
// Edges: tile rows follow the panel's rows (no padding in M), B panels are zero-padded to 32 columns by the packer
// and the second B / C column tiles are skipped when a panel has 16 columns or fewer; nothing is padded in K, so
// every element sees exactly its pairs, in a grouping that depends on K alone.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/gemm_bf16_amx_tiles.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "core/half.h"

namespace moe::cpu::gemm_bf16::amx {
// Each file including this is built for a different ISA (AMX and AVX-512 flags, or none): internal linkage keeps
// each file's copies its own, so the linker never hands one file's instructions to the other.
namespace {

constexpr int kPanels = 4;               // B panels per call: one tile configuration (or two) serves all of them
constexpr int kCols = kPanels * kNR;     // columns of the C buffer
constexpr int kMR = 2 * kTileRows;       // tallest A panel

// Pair words of rows [0, rows) of op(A) as tile rows; k past kc is zero. The plain form: the emulated family's, and
// the reference the hardware family's vector packer (gemm_bf16_amx.cpp) is tested against.
[[maybe_unused]] void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  auto bits = [&](int i, int k) -> uint32_t {
    return k < kc ? f32_to_bf16(trans ? a[k * lda + i] : a[i * lda + k]) : 0;
  };
  for (int i = 0; i < rows; ++i)
    for (int p = 0; p < pairs; ++p) dst[int64_t{i} * pairs + p] = bits(i, 2 * p) | bits(i, 2 * p + 1) << 16;
}

// C tiles of rows r0 (top) and r1 (bottom, 0 for none), A tiles `width` pairs wide, B tiles `width` pair rows.
TileShapes shapes(int r0, int r1, int width) {
  TileShapes s;
  const int rows[2] = {r0, r1};
  for (int i = 0; i < 2; ++i) {
    if (rows[i] == 0) continue;
    for (int j = 0; j < 2; ++j) s.rows[tile_c(i, j)] = rows[i], s.colsb[tile_c(i, j)] = kTileBytes;
    s.rows[tile_a(i)] = rows[i], s.colsb[tile_a(i)] = 4 * width;
  }
  for (int j = 0; j < 2; ++j) s.rows[tile_b(j)] = width, s.colsb[tile_b(j)] = kTileBytes;
  return s;
}

// Calls f.template operator()<I, J>() for the C tiles in use: the top row always, the bottom one when `bottom`,
// the right column when `right`.
template <class F>
void for_c_tiles(bool bottom, bool right, F&& f) {
  f.template operator()<0, 0>();
  if (right) f.template operator()<0, 1>();
  if (bottom) {
    f.template operator()<1, 0>();
    if (right) f.template operator()<1, 1>();
  }
}

// One TDPBF16PS step of one panel: pairs [p0, p0 + width) of the A panel (row stride `pairs`) and of B panel `b`.
template <class Tiles>
void step(const uint32_t* a, int pairs, const uint32_t* b, int p0, bool bottom, bool right) {
  constexpr int64_t kBStride = kNR * 4;
  const int64_t a_stride = int64_t{pairs} * 4;
  Tiles::template load<tile_a(0)>(a + p0, a_stride);
  if (bottom) Tiles::template load<tile_a(1)>(a + int64_t{kTileRows} * pairs + p0, a_stride);
  Tiles::template load<tile_b(0)>(b + int64_t{p0} * kNR, kBStride);
  if (right) Tiles::template load<tile_b(1)>(b + int64_t{p0} * kNR + 16, kBStride);
  for_c_tiles(bottom, right, []<int I, int J>() { Tiles::template dp<I, J>(); });
}

// `steps` steps of `width` pairs from pair p0 over every panel, each panel's C tiles starting from zero or, when
// `resume`, from the buffer, and parked in the buffer after.
template <class Tiles>
void accumulate(int r0, int r1, int done, int pairs, const uint32_t* a, const uint32_t* b, int p0, int steps,
                int width, bool resume, float* buf) {
  constexpr int64_t kBufStride = kCols * 4;
  Tiles::configure(shapes(r0, r1, width));
  const bool bottom = r1 > 0;
  for (int q = 0; q * kNR < done; ++q) {
    const bool right = done - q * kNR > 16;
    const uint32_t* bq = b + int64_t{q} * pairs * kNR;
    float* tile0 = buf + q * kNR;
    auto at = [&](int i, int j) { return tile0 + i * kTileRows * kCols + j * 16; };
    if (resume)
      for_c_tiles(bottom, right, [&]<int I, int J>() { Tiles::template load<tile_c(I, J)>(at(I, J), kBufStride); });
    else
      for_c_tiles(bottom, right, []<int I, int J>() { Tiles::template zero<tile_c(I, J)>(); });
    for (int s = 0; s < steps; ++s) step<Tiles>(a, pairs, bq, p0 + s * width, bottom, right);
    for_c_tiles(bottom, right, [&]<int I, int J>() { Tiles::template store<tile_c(I, J)>(at(I, J), kBufStride); });
  }
}

// The Kernels::kernel entry (contract in gemm_bf16_kernels.h) for panels of up to kMR rows.
template <class Tiles>
int kernel(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
           float beta, bool load_c) {
  const int done = std::min(cols, kCols);
  const int r0 = std::min(mr, kTileRows), r1 = mr - r0;
  const int full = pairs / kTilePairs, rest = pairs % kTilePairs;
  alignas(64) float buf[kMR * kCols];
  if (full) accumulate<Tiles>(r0, r1, done, pairs, a, b, 0, full, kTilePairs, false, buf);
  if (rest) accumulate<Tiles>(r0, r1, done, pairs, a, b, full * kTilePairs, 1, rest, full > 0, buf);
  Tiles::release();
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < done; ++j) {
      const float acc = buf[i * kCols + j];
      float& out = c[i * ldc + j];
      out = load_c ? std::fma(alpha, acc, beta * out) : alpha * acc;
    }
  return done;
}

// The family on a tile layer, packing A with `pack_a_rows` (pack_a's words) and B with another family's packers.
template <class Tiles>
Kernels family(const char* name, bool bf16_units, decltype(Kernels::pack_a) pack_a_rows, const Kernels& packers_of_b) {
  return {name, bf16_units, kMR, pack_a_rows, packers_of_b.pack_b16, packers_of_b.pack_b32, &kernel<Tiles>, nullptr,
          false};
}

}  // namespace
}  // namespace moe::cpu::gemm_bf16::amx
