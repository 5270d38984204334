// fp32 SIMT GEMM: 16-deep k slices through two shared-memory buffers, 256 threads in a 16×16 grid, each holding
// MICRO×MICRO outputs in groups of four adjacent rows and columns, 64 apart (tile_io::micro_index), read from
// shared memory as 16-byte vectors. Two block tiles of one kernel: 128×128 (8×8 per thread) where the output has
// enough such tiles to fill the device, else 64×64 (4×4) for an expert's few hundred rows. The next slice's global
// loads are in registers while the current one is multiplied, so one barrier per slice; where both operands'
// bases and leading dimensions allow (kVec), four elements per load along the contiguous dimension
// (gemm_tile_io.h), else one. Edge tiles load zeros beyond M, N and K and store only inside C, so any shape works.
// Each output element is one thread's fma chain over k in ascending order (the zero padding adds exact zeros), so
// its bits depend on its row of A, its column of B and K only, not on the tile, the thread or the load width. The
// grouped kernel runs the same block code over one flat grid of every group's tiles, so each group's bits are its
// own sgemm's.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemm_tile.cuh"
#include "backend/cuda/gemm_tile_io.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

constexpr int kDepth = tile_io::f32::kDepth, kBlock = tile_io::f32::kThreads;

// The vector at (r, k) of an operand: one 16-byte load where it lies whole inside, else element by element with
// zeros outside.
template <bool kTransposed>
__device__ inline float4 load_vector(const float* m, int ld, int r, int k, int rows, int K) {
  if (tile_io::vector_inside<kTransposed>(r, k, rows, K))
    return *reinterpret_cast<const float4*>(m + tile_io::offset<kTransposed>(r, k, ld));
  float v[tile_io::kVec];
#pragma unroll
  for (int j = 0; j < tile_io::kVec; ++j) {
    int rj, kj;
    tile_io::element<kTransposed>(r, k, j, rj, kj);
    v[j] = operand_at<kTransposed>(m, ld, rj, kj, rows, K);
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

// The vector at (r, k) into a shared tile stored [k][r]: one 16-byte store where its elements are adjacent there.
template <bool kTransposed>
__device__ inline void store_vector(float* tile, int ld, int r, int k, float4 v) {
  if constexpr (tile_io::contiguous_in_shared<kTransposed, false>()) {
    *reinterpret_cast<float4*>(tile + tile_io::shared_index<kTransposed, false>(r, k, 0, ld)) = v;
  } else {
    const float e[tile_io::kVec] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < tile_io::kVec; ++j) tile[tile_io::shared_index<kTransposed, false>(r, k, j, ld)] = e[j];
  }
}

// The block tile of C at (m0, n0).
template <int TILE, bool TA, bool TB, bool kVec>
__device__ __forceinline__ void sgemm_block(int m0, int n0, int M, int N, int K, float alpha,
                                            const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
                                            float beta, float* __restrict__ C, int ldc) {
  constexpr int kMicro = TILE / 16, kPer = TILE * kDepth / kBlock, kLd = TILE + 4;
  static_assert(kMicro % tile_io::kVec == 0, "micro-tiles are whole groups of four");
  __shared__ __align__(16) float As[2][kDepth * kLd];  // As[k][m]
  __shared__ __align__(16) float Bs[2][kDepth * kLd];  // Bs[k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[kMicro][kMicro] = {};
  alignas(16) float ra[kPer];  // 16-byte aligned: read and written as float4 where vectors load
  alignas(16) float rb[kPer];
  auto fetch = [&](int k0) {  // op(B) [K, N] is read as B's transpose
    if constexpr (kVec) {
      tile_io::for_each_vector<TA, TILE, kDepth, kBlock>(threadIdx.x, [&](int p, int mm, int kk) {
        *reinterpret_cast<float4*>(ra + p * tile_io::kVec) = load_vector<TA>(A, lda, m0 + mm, k0 + kk, M, K);
      });
      tile_io::for_each_vector<!TB, TILE, kDepth, kBlock>(threadIdx.x, [&](int p, int nn, int kb) {
        *reinterpret_cast<float4*>(rb + p * tile_io::kVec) = load_vector<!TB>(B, ldb, n0 + nn, k0 + kb, N, K);
      });
    } else {
#pragma unroll
      for (int p = 0; p < kPer; ++p) {
        int mm, kk, nn, kb;
        tile_coords<TA>(threadIdx.x + p * kBlock, TILE, kDepth, mm, kk);
        ra[p] = operand_at<TA>(A, lda, m0 + mm, k0 + kk, M, K);
        tile_coords<!TB>(threadIdx.x + p * kBlock, TILE, kDepth, nn, kb);
        rb[p] = operand_at<!TB>(B, ldb, n0 + nn, k0 + kb, N, K);
      }
    }
  };
  auto stash = [&](int buf) {
    if constexpr (kVec) {
      tile_io::for_each_vector<TA, TILE, kDepth, kBlock>(threadIdx.x, [&](int p, int mm, int kk) {
        store_vector<TA>(As[buf], kLd, mm, kk, *reinterpret_cast<const float4*>(ra + p * tile_io::kVec));
      });
      tile_io::for_each_vector<!TB, TILE, kDepth, kBlock>(threadIdx.x, [&](int p, int nn, int kb) {
        store_vector<!TB>(Bs[buf], kLd, nn, kb, *reinterpret_cast<const float4*>(rb + p * tile_io::kVec));
      });
    } else {
#pragma unroll
      for (int p = 0; p < kPer; ++p) {
        int mm, kk, nn, kb;
        tile_coords<TA>(threadIdx.x + p * kBlock, TILE, kDepth, mm, kk);
        As[buf][kk * kLd + mm] = ra[p];
        tile_coords<!TB>(threadIdx.x + p * kBlock, TILE, kDepth, nn, kb);
        Bs[buf][kb * kLd + nn] = rb[p];
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
    if (s + 1 < slices) fetch((s + 1) * kDepth);  // in flight while this slice is multiplied
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      alignas(16) float a[kMicro];
      alignas(16) float b[kMicro];
#pragma unroll
      for (int g = 0; g < kMicro; g += tile_io::kVec) {
        *reinterpret_cast<float4*>(a + g) =
            *reinterpret_cast<const float4*>(&As[cur][kk * kLd + tile_io::micro_index(g, ty)]);
        *reinterpret_cast<float4*>(b + g) =
            *reinterpret_cast<const float4*>(&Bs[cur][kk * kLd + tile_io::micro_index(g, tx)]);
      }
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
    const int m = m0 + tile_io::micro_index(i, ty);
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const int n = n0 + tile_io::micro_index(j, tx);
      if (n >= N) continue;
      float* c = C + (int64_t)m * ldc + n;
      *c = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;
    }
  }
}

template <int TILE, bool TA, bool TB, bool kVec>
__global__ void __launch_bounds__(kBlock) sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                                       int lda, const float* __restrict__ B, int ldb, float beta,
                                                       float* __restrict__ C, int ldc) {
  sgemm_block<TILE, TA, TB, kVec>(blockIdx.y * TILE, blockIdx.x * TILE, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// One block per tile of the flat grid over all groups (gemm_tile.cuh).
template <int TILE, bool TA, bool TB, bool kVec>
__global__ void __launch_bounds__(kBlock) sgemm_grouped_kernel(const GemmGroup* __restrict__ groups, int G, int N,
                                                               float alpha, int lda, int ldb, int ldc) {
  int m0, n0;
  const GemmGroup& g = group_of_tile(groups, G, blockIdx.x, N, TILE, TILE, m0, n0);
  sgemm_block<TILE, TA, TB, kVec>(m0, n0, g.M, N, g.K, alpha, g.A, lda, static_cast<const float*>(g.B), ldb, g.beta,
                                  g.C, ldc);
}

bool vectors_fit(const float* A, int lda, const float* B, int ldb) {
  return tile_io::vectors_fit(A, lda, sizeof(float)) && tile_io::vectors_fit(B, ldb, sizeof(float));
}

template <int TILE>
void launch_tile(cudaStream_t s, bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  const dim3 grid = tile_grid(M, N, TILE, TILE);
  with_layout(ta, tb, vectors_fit(A, lda, B, ldb), [&](auto ta_c, auto tb_c, auto vec_c) {
    sgemm_kernel<TILE, decltype(ta_c)::value, decltype(tb_c)::value, decltype(vec_c)::value>
        <<<grid, kBlock, 0, s>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  });
}

template <int TILE>
void launch_grouped(Stage& st, bool ta, bool tb, std::vector<GemmGroup>& groups, int N, float alpha, int lda, int ldb,
                    int ldc) {
  bool vec = true;
  for (const GemmGroup& g : groups) vec = vec && vectors_fit(g.A, lda, static_cast<const float*>(g.B), ldb);
  const int64_t tiles = number_tiles(groups, N, TILE, TILE);
  const GemmGroup* g = st.upload(groups);
  const int G = (int)groups.size();
  const dim3 grid((unsigned)tiles);
  cudaStream_t s = st.stream();
  with_layout(ta, tb, vec, [&](auto ta_c, auto tb_c, auto vec_c) {
    sgemm_grouped_kernel<TILE, decltype(ta_c)::value, decltype(tb_c)::value, decltype(vec_c)::value>
        <<<grid, kBlock, 0, s>>>(g, G, N, alpha, lda, ldb, ldc);
  });
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
