// What the GEMM kernels (gemm.cu, gemm_bf16.cu) share: operand access, where a tile of op(A) or op(B) is read as
// elements (r, k) of an operand with `rows` rows and K columns, stored row-major or transposed, with zeros outside
// so edge tiles need no other case; the choice of block tile and grid; and a grouped GEMM's flat grid of tiles.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace moe::cuda {

// Element (r, k) of an operand stored [rows, K] with leading dimension ld, or [K, rows] when kTransposed; zero
// outside [0, rows) × [0, K).
template <bool kTransposed, class T>
__device__ inline T operand_at(const T* m, int ld, int r, int k, int rows, int K) {
  if (r >= rows || k >= K) return T(0);
  return kTransposed ? m[(int64_t)k * ld + r] : m[(int64_t)r * ld + k];
}

// The (r, k) of a [tile, depth] slice that a block's e-th load reads, chosen so consecutive threads walk memory
// contiguously in either storage order.
template <bool kTransposed>
__device__ inline void tile_coords(int e, int tile, int depth, int& r, int& k) {
  if (kTransposed) k = e / tile, r = e % tile;
  else r = e / depth, k = e % depth;
}

// Both GEMMs' block-tile rule: 128×128 tiles where the output has at least as many of them as the device has
// multiprocessors, else 64×64 (an expert's few hundred rows would leave most of the device idle).
inline bool big_tiles_fill_device(int64_t big_tiles) {
  static const int multiprocessors = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 1;
  }();
  return big_tiles >= multiprocessors;
}
inline int64_t tiles_of(int M, int N, int rows, int cols) {
  return (int64_t)((M + rows - 1) / rows) * ((N + cols - 1) / cols);
}
inline bool big_tiles_fill_device(int M, int N) { return big_tiles_fill_device(tiles_of(M, N, 128, 128)); }

// Groups without rows have no tiles; the launchers drop them.
template <class Group>
inline void drop_empty(std::vector<Group>& groups) {
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const Group& g) { return g.M <= 0; }), groups.end());
}

// A grouped GEMM's tiles: each group's first tile in one flat grid of rows×cols tiles, numbered row-major inside
// each group; returns the grid's size.
template <class Group>
inline int64_t number_tiles(std::vector<Group>& groups, int N, int rows, int cols) {
  int64_t next = 0;
  for (Group& g : groups) {
    g.first_tile = (int)next;
    next += tiles_of(g.M, N, rows, cols);
    check(next <= 0x7fffffff, "cuda grouped gemm: more than 2^31 tiles in one call");
  }
  return next;
}
template <class Group>
inline int64_t big_tiles_of(const std::vector<Group>& groups, int N) {
  int64_t n = 0;
  for (const Group& g : groups) n += tiles_of(g.M, N, 128, 128);
  return n;
}

// The group that flat tile `tile` belongs to (the last whose first tile is at or before it) and the tile's
// (row, column) offsets inside it.
template <class Group>
__device__ inline const Group& group_of_tile(const Group* groups, int G, int tile, int N, int rows, int cols, int& m0,
                                             int& n0) {
  int lo = 0, hi = G - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (groups[mid].first_tile <= tile) lo = mid;
    else hi = mid - 1;
  }
  const int t = tile - groups[lo].first_tile, per_row = (N + cols - 1) / cols;
  m0 = (t / per_row) * rows;
  n0 = (t % per_row) * cols;
  return groups[lo];
}

// Calls f(ta, tb, vec) with each flag as a std::bool_constant, so f instantiates the kernel for them.
template <class F>
void with_layout(bool ta, bool tb, bool vec, F&& f) {
  auto with_vec = [&](auto ta_c, auto tb_c) {
    if (vec) f(ta_c, tb_c, std::true_type{});
    else f(ta_c, tb_c, std::false_type{});
  };
  if (!ta && !tb) with_vec(std::false_type{}, std::false_type{});
  else if (!ta && tb) with_vec(std::false_type{}, std::true_type{});
  else if (ta && !tb) with_vec(std::true_type{}, std::false_type{});
  else with_vec(std::true_type{}, std::true_type{});
}

// A grid of (N / cols) × (M / rows) tiles, refused with a message where M needs more than the 65535 rows of tiles
// one launch may have.
inline dim3 tile_grid(int M, int N, int rows, int cols) {
  check((M + rows - 1) / rows <= 65535, "cuda gemm: " + std::to_string(M) +
                                            " rows exceed one call's grid (65535 tiles of " + std::to_string(rows) + ")");
  return dim3((N + cols - 1) / cols, (M + rows - 1) / rows);
}

}  // namespace moe::cuda
