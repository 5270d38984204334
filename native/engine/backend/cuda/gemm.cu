// fp32 SIMT GEMM: 64×64 output tiles, 16-deep k slices through shared memory, 256 threads of 4×4 outputs.
// Edge tiles load zeros beyond M, N and K and store only inside C, so any shape works. Each output element is
// one thread's fma chain over k in ascending order (the zero padding adds exact zeros), so its bits depend on
// its row of A, its column of B and K only.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

constexpr int kTile = 64, kDepth = 16, kMicro = 4;

template <bool TA, bool TB>
__global__ void __launch_bounds__(256) sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                                    int lda, const float* __restrict__ B, int ldb, float beta,
                                                    float* __restrict__ C, int ldc) {
  __shared__ float As[kDepth][kTile + 4];  // As[k][m]
  __shared__ float Bs[kDepth][kTile + 4];  // Bs[k][n]
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[kMicro][kMicro] = {};
  for (int k0 = 0; k0 < K; k0 += kDepth) {
    // 1024 elements per operand tile, 4 per thread. op(B) [K, N] is read as B's transpose.
    for (int e = threadIdx.x; e < kTile * kDepth; e += 256) {
      int mm, kk, nn, kb;
      tile_coords<TA>(e, kTile, kDepth, mm, kk);
      As[kk][mm] = operand_at<TA>(A, lda, m0 + mm, k0 + kk, M, K);
      tile_coords<!TB>(e, kTile, kDepth, nn, kb);
      Bs[kb][nn] = operand_at<!TB>(B, ldb, n0 + nn, k0 + kb, N, K);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      float a[kMicro], b[kMicro];
#pragma unroll
      for (int i = 0; i < kMicro; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kMicro; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kMicro; ++i)
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n >= N) continue;
      float* c = C + (int64_t)m * ldc + n;
      *c = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;
    }
  }
}

}  // namespace

void sgemm(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  check((M + kTile - 1) / kTile <= 65535,
        "cuda gemm: " + std::to_string(M) + " rows exceed one call's grid (65535 tiles of " + std::to_string(kTile) + ")");
  const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  if (!trans_a && !trans_b) sgemm_kernel<false, false><<<grid, 256, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (!trans_a && trans_b) sgemm_kernel<false, true><<<grid, 256, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (trans_a && !trans_b) sgemm_kernel<true, false><<<grid, 256, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else sgemm_kernel<true, true><<<grid, 256, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace moe::cuda
