// How a GEMM block moves one k slice of an operand from global into shared memory four elements at a time
// (gemm.cu, gemm_bf16.cu): which vectors each thread loads, which lie whole inside the operand, and where each
// element lands; and the fp32 GEMM's micro-tiles. Plain C++ that nvcc also compiles for the device, so the CPU
// tests check the indexing (native/tests/test_gemm_tile_io.cpp), which a GPU would otherwise be the first to run.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define MOE_TILE_IO __host__ __device__ __forceinline__
#else
#define MOE_TILE_IO inline
#endif

namespace moe::cuda::tile_io {

constexpr int kVec = 4;  // elements per vector: 16 bytes of fp32, 8 of bf16

// The bf16 GEMM's k slice and shared tiles. A tile of an operand's slice is stored along the operand's contiguous
// dimension, [r][k] for one stored row-major (A, or a weight Bᵀ [N, K]) and [k][r] for one stored transposed, so
// that every vector lands as one 8-byte word (a tile stored across it takes four 2-byte stores, several on one
// bank). Leading dimensions (bf16 elements) are padded against bank conflicts; rows stay multiples of 16 bytes for
// WMMA and of 8 for a vector's store, and a tile's size a multiple of 32 bytes, WMMA's pointer alignment.
namespace bf16 {
constexpr int kDepth = 32;
template <bool kTransposed>
MOE_TILE_IO constexpr bool row_major_tile() { return !kTransposed; }  // [r][k]
MOE_TILE_IO constexpr int tile_ld(bool row_major, int tile) { return row_major ? kDepth + 8 : tile + 8; }
MOE_TILE_IO constexpr int tile_elements(bool row_major, int tile) {
  return row_major ? tile * tile_ld(true, tile) : kDepth * tile_ld(false, tile);
}
// Element offset of (r, k) in such a tile: a single element's place, and a 16×16 fragment's first element.
MOE_TILE_IO constexpr int tile_offset(bool row_major, int ld, int r, int k) { return row_major ? r * ld + k : k * ld + r; }
}  // namespace bf16

// The first element (r, k) of the e-th vector of a [tile, depth] slice. A vector runs along the operand's
// contiguous dimension (k stored row-major, r transposed), and consecutive e along memory, so consecutive threads
// read consecutive addresses.
template <bool kTransposed>
MOE_TILE_IO void vector_coords(int e, int tile, int depth, int& r, int& k) {
  if (kTransposed) k = e / (tile / kVec), r = e % (tile / kVec) * kVec;
  else r = e / (depth / kVec), k = e % (depth / kVec) * kVec;
}

// Element j of the vector that starts at (r, k).
template <bool kTransposed>
MOE_TILE_IO void element(int r, int k, int j, int& rj, int& kj) {
  rj = kTransposed ? r + j : r;
  kj = kTransposed ? k : k + j;
}

// Where element j of the vector at (r, k) lands in a shared tile stored [r][k] (kRowMajor) or [k][r], with
// leading dimension ld.
template <bool kTransposed, bool kRowMajor>
MOE_TILE_IO int shared_index(int r, int k, int j, int ld) {
  int rj, kj;
  element<kTransposed>(r, k, j, rj, kj);
  return kRowMajor ? rj * ld + kj : kj * ld + rj;
}

// Whether a vector's elements are adjacent in that tile (then stored as one word: 8 bytes of bf16, 16 of fp32).
template <bool kTransposed, bool kRowMajor>
MOE_TILE_IO constexpr bool contiguous_in_shared() {
  return kRowMajor != kTransposed;
}

// Whether the whole vector at (r, k) lies inside an operand of `rows` rows and K columns.
template <bool kTransposed>
MOE_TILE_IO bool vector_inside(int r, int k, int rows, int K) {
  return kTransposed ? (k < K && r + kVec <= rows) : (r < rows && k + kVec <= K);
}

// Element offset of (r, k) in storage with leading dimension ld.
template <bool kTransposed>
MOE_TILE_IO int64_t offset(int r, int k, int ld) {
  return kTransposed ? (int64_t)k * ld + r : (int64_t)r * ld + k;
}

// Calls f(p, r, k) for each of `thread`'s vectors of the slice: p its index among them (registers p·kVec ..
// p·kVec + 3), (r, k) its first element.
template <bool kTransposed, int kTile, int kDepth, int kThreads, class F>
MOE_TILE_IO void for_each_vector(int thread, F&& f) {
  constexpr int kPerThread = kTile * kDepth / (kThreads * kVec);
  static_assert(kPerThread * kThreads * kVec == kTile * kDepth, "a slice splits into whole vectors per thread");
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int p = 0; p < kPerThread; ++p) {
    int r, k;
    vector_coords<kTransposed>(thread + p * kThreads, kTile, kDepth, r, k);
    f(p, r, k);
  }
}

// The fp32 GEMM's k slice and threads per block (its shared tiles are [k][r], leading dimension tile + 4).
namespace f32 {
constexpr int kDepth = 16, kThreads = 256;
}  // namespace f32

// The fp32 GEMM's micro-tiles: 16 threads along each side of the block tile, thread t's i-th row (or column) of
// its kMicro at micro_index(i, t): groups of four adjacent ones, 64 apart, so that a quarter warp's 16-byte shared
// reads (eight threads, consecutive t) fall on distinct banks.
MOE_TILE_IO int micro_index(int i, int t) { return (i / kVec) * 16 * kVec + t * kVec + i % kVec; }

// Whether vectors may be read from this operand: every vector start is a multiple of kVec elements from an
// aligned base when the leading dimension is a multiple of kVec (row and tile offsets are).
inline bool vectors_fit(const void* base, int ld, int element_bytes) {
  return ld % kVec == 0 && reinterpret_cast<uintptr_t>(base) % (uintptr_t)(kVec * element_bytes) == 0;
}

}  // namespace moe::cuda::tile_io
