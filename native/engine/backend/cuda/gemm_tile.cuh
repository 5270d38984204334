// What the GEMM kernels (gemm.cu, gemm_bf16.cu) share: operand access, where a tile of op(A) or op(B) is read as
// elements (r, k) of an operand with `rows` rows and K columns, stored row-major or transposed, with zeros outside
// so edge tiles need no other case; and the choice of block tile and grid.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

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
inline bool big_tiles_fill_device(int M, int N) {
  static const int multiprocessors = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 1;
  }();
  return (int64_t)((M + 127) / 128) * ((N + 127) / 128) >= multiprocessors;
}

// A grid of (N / cols) × (M / rows) tiles, refused with a message where M needs more than the 65535 rows of tiles
// one launch may have.
inline dim3 tile_grid(int M, int N, int rows, int cols) {
  check((M + rows - 1) / rows <= 65535, "cuda gemm: " + std::to_string(M) +
                                            " rows exceed one call's grid (65535 tiles of " + std::to_string(rows) + ")");
  return dim3((N + cols - 1) / cols, (M + rows - 1) / rows);
}

}  // namespace moe::cuda
