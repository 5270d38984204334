// Operand access shared by the GEMM kernels (gemm.cu, gemm_bf16.cu): a tile of op(A) or op(B) is read as
// elements (r, k) of an operand with `rows` rows and K columns, stored row-major or transposed, with zeros outside
// so edge tiles need no other case.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace moe::cuda
