// bf16 GEMM on tensor cores (WMMA, sm_80+): 64×64 output tiles, 32-deep k slices, four warps of 32×32 (2×2
// fragments of 16×16×16). fp32 operands are rounded to bf16 (nearest even) as they are loaded into shared
// memory; a bf16 weight is loaded as its bits. Edge tiles load zeros and store only inside C, so any shape works.
#include <cuda_bf16.h>
#include <mma.h>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

using namespace nvcuda;

constexpr int kTile = 64, kDepth = 32, kWarps = 4;
constexpr int kLdA = kDepth + 8, kLdB = kTile + 8, kLdC = kTile + 4;  // padded, still multiples of 8 / 4

__device__ inline __nv_bfloat16 to_bf(float x) { return __float2bfloat16_rn(x); }
__device__ inline __nv_bfloat16 to_bf(uint16_t bits) { return __ushort_as_bfloat16(bits); }

template <bool TA, bool TB, class BT>
__global__ void __launch_bounds__(kWarps * 32) sgemm_bf16_kernel(int M, int N, int K, float alpha,
                                                                 const float* __restrict__ A, int lda,
                                                                 const BT* __restrict__ B, int ldb, float beta,
                                                                 float* __restrict__ C, int ldc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  __shared__ __align__(32) __nv_bfloat16 As[kTile * kLdA];  // As[m][k]
  __shared__ __align__(32) __nv_bfloat16 Bs[kDepth * kLdB];  // Bs[k][n]
  __shared__ __align__(32) float Cs[kTile * kLdC];
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int warp = threadIdx.x / 32, wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  for (int k0 = 0; k0 < K; k0 += kDepth) {
    for (int e = threadIdx.x; e < kTile * kDepth; e += kWarps * 32) {
      int mm, kk, nn, kb;
      tile_coords<TA>(e, kTile, kDepth, mm, kk);
      As[mm * kLdA + kk] = to_bf(operand_at<TA>(A, lda, m0 + mm, k0 + kk, M, K));
      tile_coords<!TB>(e, kTile, kDepth, nn, kb);
      Bs[kb * kLdB + nn] = to_bf(operand_at<!TB>(B, ldb, n0 + nn, k0 + kb, N, K));
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDepth; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], As + (wm + 16 * i) * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], Bs + kk * kLdB + wn + 16 * j, kLdB);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wm + 16 * i) * kLdC + wn + 16 * j, acc[i][j], kLdC, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * kTile; e += kWarps * 32) {
    const int m = m0 + e / kTile, n = n0 + e % kTile;
    if (m >= M || n >= N) continue;
    float* c = C + (int64_t)m * ldc + n;
    const float v = alpha * Cs[(e / kTile) * kLdC + e % kTile];
    *c = beta == 0.0f ? v : v + beta * *c;
  }
#endif
}

template <class BT>
void launch(cudaStream_t s, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const BT* B,
            int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  check((M + kTile - 1) / kTile <= 65535,
        "cuda gemm: " + std::to_string(M) + " rows exceed one call's grid (65535 tiles of " + std::to_string(kTile) + ")");
  const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile), block(kWarps * 32);
  if (!ta && !tb) sgemm_bf16_kernel<false, false, BT><<<grid, block, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (!ta && tb) sgemm_bf16_kernel<false, true, BT><<<grid, block, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (ta && !tb) sgemm_bf16_kernel<true, false, BT><<<grid, block, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else sgemm_bf16_kernel<true, true, BT><<<grid, block, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  launch(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_bf16(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  launch(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace moe::cuda
