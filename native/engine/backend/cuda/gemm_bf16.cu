// bf16 GEMM on tensor cores (WMMA 16×16×16, sm_80+), fp32 accumulate. fp32 operands are rounded to bf16
// (nearest even) as they are loaded; a bf16 weight is loaded as its bits. Two block tiles of one kernel:
// 128×128 with eight warps of 64×32 where the output has enough such tiles to fill the device, else 64×64 with
// four warps of 32×32 (an expert's few hundred rows). Both stream 32-deep k slices through two shared-memory
// buffers: the next slice's global loads are in registers while the tensor cores work on the current one, so one
// barrier per slice. Each output element is one fragment's chain of mma over k in ascending 16-deep steps,
// whichever tile computes it, so results do not depend on the tile chosen. Edge tiles load zeros and store only
// inside C, so any shape works. Where both operands' leading dimensions and bases allow it (kVec), each thread
// loads four elements per instruction along the contiguous dimension (gemm_tile_io.h), else one: the same
// values reach the same shared-memory places either way, so the bits do not depend on it either. Each operand's
// shared tile runs along its contiguous dimension (a weight Bᵀ [N, K] as [n][k], a transposed A as [k][m]), so a
// vector is one store, and the fragments are loaded row- or column-major to match. The grouped
// kernel runs the same block code over one flat grid of every group's tiles, so each group's bits are its own
// sgemm_bf16's.
#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/gemm_tile_io.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

using namespace nvcuda;

using tile_io::bf16::kDepth;  // k slice
constexpr int kLdW = 16 + 4;  // a warp's 16×16 float staging of one fragment for the epilogue

__device__ inline __nv_bfloat16 to_bf(float x) { return __float2bfloat16_rn(x); }
__device__ inline __nv_bfloat16 to_bf(uint16_t bits) { return __ushort_as_bfloat16(bits); }

// The four elements of the vector at (r, k) one at a time, zeros outside the operand.
template <bool kTransposed, class T>
__device__ inline void load_elements(const T* m, int ld, int r, int k, int rows, int K, __nv_bfloat16* out) {
#pragma unroll
  for (int j = 0; j < tile_io::kVec; ++j) {
    int rj, kj;
    tile_io::element<kTransposed>(r, k, j, rj, kj);
    out[j] = to_bf(operand_at<kTransposed>(m, ld, rj, kj, rows, K));
  }
}

// A vector that lies whole inside its operand, as bf16: 16 bytes of fp32 rounded in pairs, or 8 of bf16 bits.
__device__ inline void whole_vector(const float* at, __nv_bfloat16* out) {
  const float4 v = *reinterpret_cast<const float4*>(at);
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
}
__device__ inline void whole_vector(const uint16_t* at, __nv_bfloat16* out) {
  const uint2 v = *reinterpret_cast<const uint2*>(at);
  out[0] = __ushort_as_bfloat16((unsigned short)(v.x & 0xffffu));
  out[1] = __ushort_as_bfloat16((unsigned short)(v.x >> 16));
  out[2] = __ushort_as_bfloat16((unsigned short)(v.y & 0xffffu));
  out[3] = __ushort_as_bfloat16((unsigned short)(v.y >> 16));
}

// The four elements of the vector at (r, k) as bf16: one load where it lies whole inside the operand, else
// element by element.
template <bool kTransposed, class T>
__device__ inline void load_vector(const T* m, int ld, int r, int k, int rows, int K, __nv_bfloat16* out) {
  if (tile_io::vector_inside<kTransposed>(r, k, rows, K)) whole_vector(m + tile_io::offset<kTransposed>(r, k, ld), out);
  else load_elements<kTransposed>(m, ld, r, k, rows, K, out);
}

// The vector at (r, k) into a shared tile (tile_io::shared_index); where its elements are adjacent, as one
// 8-byte store (tile rows and vector starts are 8-byte aligned: test_gemm_tile_io.cpp), which the tiles' layout
// (tile_io::bf16::row_major_tile) makes every vector.
template <bool kTransposed, bool kRowMajor>
__device__ inline void store_vector(__nv_bfloat16* tile, int ld, int r, int k, const __nv_bfloat16* v) {
  if constexpr (tile_io::contiguous_in_shared<kTransposed, kRowMajor>()) {
    __nv_bfloat162 lo, hi;
    lo.x = v[0], lo.y = v[1], hi.x = v[2], hi.y = v[3];
    uint2 bits;
    bits.x = *reinterpret_cast<const unsigned*>(&lo);
    bits.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(tile + tile_io::shared_index<kTransposed, kRowMajor>(r, k, 0, ld)) = bits;
  } else {
#pragma unroll
    for (int j = 0; j < tile_io::kVec; ++j) tile[tile_io::shared_index<kTransposed, kRowMajor>(r, k, j, ld)] = v[j];
  }
}

// BM×BN block tile, WARPS_M×WARPS_N warps, each a (BM/WARPS_M)×(BN/WARPS_N) grid of 16×16 fragments.
// The block tile of C at (m0, n0).
template <int BM, int BN, int WARPS_M, int WARPS_N, bool TA, bool TB, bool kVec, class BT>
__device__ __forceinline__ void sgemm_bf16_block(int m0, int n0, int M, int N, int K, float alpha,
                                                 const float* __restrict__ A, int lda, const BT* __restrict__ B,
                                                 int ldb, float beta, float* __restrict__ C, int ldc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace t16 = tile_io::bf16;
  constexpr int kThreadsG = WARPS_M * WARPS_N * 32;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, FM = WM / 16, FN = WN / 16;
  constexpr int kPerA = BM * kDepth / kThreadsG, kPerB = BN * kDepth / kThreadsG;
  static_assert(kPerA * kThreadsG == BM * kDepth && kPerB * kThreadsG == BN * kDepth, "loads split evenly");
  // op(A)'s tile is [m][k] (kRowA) or [k][m]; op(B)'s [n][k] (kRowB, B a weight stored [N, K]) or [k][n]. The
  // operands as tile_io sees them: A with rows m, transposed when TA; B with rows n, transposed unless TB.
  constexpr bool kRowA = t16::row_major_tile<TA>(), kRowB = t16::row_major_tile<!TB>();
  constexpr int kLdA = t16::tile_ld(kRowA, BM), kLdB = t16::tile_ld(kRowB, BN);
  constexpr int kATile = t16::tile_elements(kRowA, BM), kBTile = t16::tile_elements(kRowB, BN);
  // Two buffers of each tile; after the last slice's barrier no warp reads them, and the epilogue's per-warp
  // staging takes the same bytes.
  constexpr int kStageBytes = 2 * (kATile + kBTile) * (int)sizeof(__nv_bfloat16);
  constexpr int kEpilogueBytes = WARPS_M * WARPS_N * 16 * kLdW * (int)sizeof(float);
  __shared__ __align__(32) unsigned char smem[kStageBytes > kEpilogueBytes ? kStageBytes : kEpilogueBytes];
  __nv_bfloat16* const tiles = reinterpret_cast<__nv_bfloat16*>(smem);
  auto As = [&](int buf) { return tiles + buf * kATile; };
  auto Bs = [&](int buf) { return tiles + 2 * kATile + buf * kBTile; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  __nv_bfloat16 ra[kPerA], rb[kPerB];
  auto fetch = [&](int k0) {  // the slice at k0 into registers (zeros outside the operands)
    if constexpr (kVec) {
      tile_io::for_each_vector<TA, BM, kDepth, kThreadsG>(threadIdx.x, [&](int p, int mm, int kk) {
        load_vector<TA>(A, lda, m0 + mm, k0 + kk, M, K, ra + p * tile_io::kVec);
      });
      tile_io::for_each_vector<!TB, BN, kDepth, kThreadsG>(threadIdx.x, [&](int p, int nn, int kb) {
        load_vector<!TB>(B, ldb, n0 + nn, k0 + kb, N, K, rb + p * tile_io::kVec);
      });
    } else {
#pragma unroll
      for (int p = 0; p < kPerA; ++p) {
        int mm, kk;
        tile_coords<TA>(threadIdx.x + p * kThreadsG, BM, kDepth, mm, kk);
        ra[p] = to_bf(operand_at<TA>(A, lda, m0 + mm, k0 + kk, M, K));
      }
#pragma unroll
      for (int p = 0; p < kPerB; ++p) {
        int nn, kb;
        tile_coords<!TB>(threadIdx.x + p * kThreadsG, BN, kDepth, nn, kb);
        rb[p] = to_bf(operand_at<!TB>(B, ldb, n0 + nn, k0 + kb, N, K));
      }
    }
  };
  auto stash = [&](int buf) {  // the registers into shared buffer buf
    if constexpr (kVec) {
      tile_io::for_each_vector<TA, BM, kDepth, kThreadsG>(threadIdx.x, [&](int p, int mm, int kk) {
        store_vector<TA, kRowA>(As(buf), kLdA, mm, kk, ra + p * tile_io::kVec);
      });
      tile_io::for_each_vector<!TB, BN, kDepth, kThreadsG>(threadIdx.x, [&](int p, int nn, int kb) {
        store_vector<!TB, kRowB>(Bs(buf), kLdB, nn, kb, rb + p * tile_io::kVec);
      });
    } else {
#pragma unroll
      for (int p = 0; p < kPerA; ++p) {
        int mm, kk;
        tile_coords<TA>(threadIdx.x + p * kThreadsG, BM, kDepth, mm, kk);
        As(buf)[t16::tile_offset(kRowA, kLdA, mm, kk)] = ra[p];
      }
#pragma unroll
      for (int p = 0; p < kPerB; ++p) {
        int nn, kb;
        tile_coords<!TB>(threadIdx.x + p * kThreadsG, BN, kDepth, nn, kb);
        Bs(buf)[t16::tile_offset(kRowB, kLdB, nn, kb)] = rb[p];
      }
    }
  };

  const int slices = (K + kDepth - 1) / kDepth;
  if (slices > 0) {
    fetch(0);
    stash(0);
  }
  __syncthreads();
  for (int s = 0; s < slices; ++s) {
    const int cur = s & 1;
    if (s + 1 < slices) fetch((s + 1) * kDepth);  // in flight while the tensor cores run
#pragma unroll
    for (int kk = 0; kk < kDepth; kk += 16) {
      // A fragment of A (16 m × 16 k) is row-major in an [m][k] tile, column-major in a [k][m] one; one of B
      // (16 k × 16 n) row-major in a [k][n] tile, column-major in an [n][k] one. Either way the same values.
      using LayoutA = std::conditional_t<kRowA, wmma::row_major, wmma::col_major>;
      using LayoutB = std::conditional_t<kRowB, wmma::col_major, wmma::row_major>;
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> a[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i)
        wmma::load_matrix_sync(a[i], As(cur) + t16::tile_offset(kRowA, kLdA, wm + 16 * i, kk), kLdA);
#pragma unroll
      for (int j = 0; j < FN; ++j)
        wmma::load_matrix_sync(b[j], Bs(cur) + t16::tile_offset(kRowB, kLdB, wn + 16 * j, kk), kLdB);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    // The other buffer was last read before the previous barrier, so it can be refilled now.
    if (s + 1 < slices) stash(cur ^ 1);
    __syncthreads();
  }

  // Epilogue per warp, one fragment at a time through its own staging tile.
  float* w = reinterpret_cast<float*>(smem) + warp * 16 * kLdW;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(w, acc[i][j], kLdW, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int m = m0 + wm + 16 * i + e / 16, n = n0 + wn + 16 * j + e % 16;
        if (m >= M || n >= N) continue;
        float* c = C + (int64_t)m * ldc + n;
        const float v = alpha * w[(e / 16) * kLdW + e % 16];
        *c = beta == 0.0f ? v : v + beta * *c;
      }
      __syncwarp();
    }
#endif
}

template <int BM, int BN, int WARPS_M, int WARPS_N, bool TA, bool TB, bool kVec, class BT>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
    sgemm_bf16_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const BT* __restrict__ B,
                      int ldb, float beta, float* __restrict__ C, int ldc) {
  sgemm_bf16_block<BM, BN, WARPS_M, WARPS_N, TA, TB, kVec, BT>(blockIdx.y * BM, blockIdx.x * BN, M, N, K, alpha, A,
                                                               lda, B, ldb, beta, C, ldc);
}

// One block per tile of the flat grid over all groups (gemm_tile.cuh).
template <int BM, int BN, int WARPS_M, int WARPS_N, bool TA, bool TB, bool kVec, class BT>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
    sgemm_bf16_grouped_kernel(const GemmGroup* __restrict__ groups, int G, int N, float alpha, int lda, int ldb,
                              int ldc) {
  int m0, n0;
  const GemmGroup& g = group_of_tile(groups, G, blockIdx.x, N, BM, BN, m0, n0);
  sgemm_bf16_block<BM, BN, WARPS_M, WARPS_N, TA, TB, kVec, BT>(m0, n0, g.M, N, g.K, alpha, g.A, lda,
                                                               static_cast<const BT*>(g.B), ldb, g.beta, g.C, ldc);
}

template <int BM, int BN, int WM_, int WN_, class BT>
void launch_tile(cudaStream_t s, bool ta, bool tb, bool vec, int M, int N, int K, float alpha, const float* A, int lda,
                 const BT* B, int ldb, float beta, float* C, int ldc) {
  const dim3 grid = tile_grid(M, N, BM, BN), block(WM_ * WN_ * 32);
  with_layout(ta, tb, vec, [&](auto ta_c, auto tb_c, auto vec_c) {
    sgemm_bf16_kernel<BM, BN, WM_, WN_, decltype(ta_c)::value, decltype(tb_c)::value, decltype(vec_c)::value, BT>
        <<<grid, block, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  });
}

// Vector loads where both operands allow them (gemm_tile_io.h).
template <class BT>
bool vectors_fit(const float* A, int lda, const BT* B, int ldb) {
  return tile_io::vectors_fit(A, lda, sizeof(float)) && tile_io::vectors_fit(B, ldb, sizeof(BT));
}

template <class BT>
void launch(cudaStream_t s, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const BT* B,
            int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  const bool vec = vectors_fit(A, lda, B, ldb);
  if (big_tiles_fill_device(M, N))
    launch_tile<128, 128, 2, 4>(s, ta, tb, vec, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    launch_tile<64, 64, 2, 2>(s, ta, tb, vec, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <int BM, int BN, int WM_, int WN_, class BT>
void launch_grouped_tile(Stage& st, bool ta, bool tb, bool vec, std::vector<GemmGroup>& groups, int N, float alpha,
                         int lda, int ldb, int ldc) {
  const dim3 grid((unsigned)number_tiles(groups, N, BM, BN)), block(WM_ * WN_ * 32);
  const GemmGroup* g = st.upload(groups);
  const int G = (int)groups.size();
  cudaStream_t s = st.stream();
  with_layout(ta, tb, vec, [&](auto ta_c, auto tb_c, auto vec_c) {
    sgemm_bf16_grouped_kernel<BM, BN, WM_, WN_, decltype(ta_c)::value, decltype(tb_c)::value, decltype(vec_c)::value,
                              BT><<<grid, block, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
  });
}

template <class BT>
void launch_grouped(Stage& st, bool ta, bool tb, std::vector<GemmGroup>& groups, int N, float alpha, int lda, int ldb,
                    int ldc) {
  bool vec = true;
  for (const GemmGroup& g : groups) vec = vec && vectors_fit(g.A, lda, static_cast<const BT*>(g.B), ldb);
  if (big_tiles_fill_device(big_tiles_of(groups, N)))
    launch_grouped_tile<128, 128, 2, 4, BT>(st, ta, tb, vec, groups, N, alpha, lda, ldb, ldc);
  else
    launch_grouped_tile<64, 64, 2, 2, BT>(st, ta, tb, vec, groups, N, alpha, lda, ldb, ldc);
}

}  // namespace

void sgemm_bf16_grouped(Stage& st, bool trans_a, bool trans_b, bool b_is_bf16, std::vector<GemmGroup> groups, int N,
                        float alpha, int lda, int ldb, int ldc) {
  drop_empty(groups);
  if (groups.empty() || N <= 0) return;
  if (b_is_bf16) launch_grouped<uint16_t>(st, trans_a, trans_b, groups, N, alpha, lda, ldb, ldc);
  else launch_grouped<float>(st, trans_a, trans_b, groups, N, alpha, lda, ldb, ldc);
}

void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  launch(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  launch(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace moe::cuda
