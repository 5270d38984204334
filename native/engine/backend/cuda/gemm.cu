// fp32 SIMT GEMM: 16-deep k slices through two shared-memory buffers, 256 threads in a 16×16 grid, each holding
// MICRO×MICRO outputs strided by 16 (conflict-free shared reads). Two block tiles of one kernel: 128×128 (8×8
// per thread) where the output has enough such tiles to fill the device, else 64×64 (4×4) for an expert's few
// hundred rows. The next slice's global loads are in registers while the current one is multiplied, so one
// barrier per slice. Edge tiles load zeros beyond M, N and K and store only inside C, so any shape works. Each
// output element is one thread's fma chain over k in ascending order (the zero padding adds exact zeros), so its
// bits depend on its row of A, its column of B and K only, not on the tile. The grouped kernel runs the same
// block code over one flat grid of every group's tiles, so each group's bits are its own sgemm's.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

constexpr int kDepth = 16, kBlock = 256;

// The block tile of C at (m0, n0).
template <int TILE, bool TA, bool TB>
__device__ __forceinline__ void sgemm_block(int m0, int n0, int M, int N, int K, float alpha,
                                            const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
                                            float beta, float* __restrict__ C, int ldc) {
  constexpr int kMicro = TILE / 16, kPer = TILE * kDepth / kBlock;
  __shared__ float As[2][kDepth][TILE + 4];  // As[k][m]
  __shared__ float Bs[2][kDepth][TILE + 4];  // Bs[k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[kMicro][kMicro] = {};
  float ra[kPer], rb[kPer];
  auto fetch = [&](int k0) {  // op(B) [K, N] is read as B's transpose
#pragma unroll
    for (int p = 0; p < kPer; ++p) {
      int mm, kk, nn, kb;
      tile_coords<TA>(threadIdx.x + p * kBlock, TILE, kDepth, mm, kk);
      ra[p] = operand_at<TA>(A, lda, m0 + mm, k0 + kk, M, K);
      tile_coords<!TB>(threadIdx.x + p * kBlock, TILE, kDepth, nn, kb);
      rb[p] = operand_at<!TB>(B, ldb, n0 + nn, k0 + kb, N, K);
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int p = 0; p < kPer; ++p) {
      int mm, kk, nn, kb;
      tile_coords<TA>(threadIdx.x + p * kBlock, TILE, kDepth, mm, kk);
      As[buf][kk][mm] = ra[p];
      tile_coords<!TB>(threadIdx.x + p * kBlock, TILE, kDepth, nn, kb);
      Bs[buf][kb][nn] = rb[p];
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
    if (s + 1 < slices) fetch((s + 1) * kDepth);  // in flight while this slice is multiplied
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      float a[kMicro], b[kMicro];
#pragma unroll
      for (int i = 0; i < kMicro; ++i) a[i] = As[cur][kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kMicro; ++j) b[j] = Bs[cur][kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kMicro; ++i)
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    // The other buffer was last read before the previous barrier, so it can be refilled now.
    if (s + 1 < slices) stash(cur ^ 1);
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

template <int TILE, bool TA, bool TB>
__global__ void __launch_bounds__(kBlock) sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                                       int lda, const float* __restrict__ B, int ldb, float beta,
                                                       float* __restrict__ C, int ldc) {
  sgemm_block<TILE, TA, TB>(blockIdx.y * TILE, blockIdx.x * TILE, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// One block per tile of the flat grid over all groups (gemm_tile.cuh).
template <int TILE, bool TA, bool TB>
__global__ void __launch_bounds__(kBlock) sgemm_grouped_kernel(const GemmGroup* __restrict__ groups, int G, int N,
                                                               float alpha, int lda, int ldb, int ldc) {
  int m0, n0;
  const GemmGroup& g = group_of_tile(groups, G, blockIdx.x, N, TILE, TILE, m0, n0);
  sgemm_block<TILE, TA, TB>(m0, n0, g.M, N, g.K, alpha, g.A, lda, static_cast<const float*>(g.B), ldb, g.beta, g.C,
                            ldc);
}

template <int TILE>
void launch_tile(cudaStream_t s, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  const dim3 grid = tile_grid(M, N, TILE, TILE);
  if (!ta && !tb) sgemm_kernel<TILE, false, false><<<grid, kBlock, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (!ta && tb) sgemm_kernel<TILE, false, true><<<grid, kBlock, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if (ta && !tb) sgemm_kernel<TILE, true, false><<<grid, kBlock, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else sgemm_kernel<TILE, true, true><<<grid, kBlock, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <int TILE>
void launch_grouped(Stage& st, bool ta, bool tb, std::vector<GemmGroup>& groups, int N, float alpha, int lda, int ldb,
                    int ldc) {
  const int64_t tiles = number_tiles(groups, N, TILE, TILE);
  const GemmGroup* g = st.upload(groups);
  const int G = (int)groups.size();
  const dim3 grid((unsigned)tiles);
  cudaStream_t s = st.stream();
  if (!ta && !tb) sgemm_grouped_kernel<TILE, false, false><<<grid, kBlock, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
  else if (!ta && tb) sgemm_grouped_kernel<TILE, false, true><<<grid, kBlock, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
  else if (ta && !tb) sgemm_grouped_kernel<TILE, true, false><<<grid, kBlock, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
  else sgemm_grouped_kernel<TILE, true, true><<<grid, kBlock, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
}

}  // namespace

void sgemm_grouped(Stage& st, bool trans_a, bool trans_b, std::vector<GemmGroup> groups, int N, float alpha, int lda,
                   int ldb, int ldc) {
  drop_empty(groups);
  if (groups.empty() || N <= 0) return;
  if (big_tiles_fill_device(big_tiles_of(groups, N))) launch_grouped<128>(st, trans_a, trans_b, groups, N, alpha, lda, ldb, ldc);
  else launch_grouped<64>(st, trans_a, trans_b, groups, N, alpha, lda, ldb, ldc);
}

void sgemm(cudaStream_t s, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (big_tiles_fill_device(M, N)) launch_tile<128>(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else launch_tile<64>(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace moe::cuda
