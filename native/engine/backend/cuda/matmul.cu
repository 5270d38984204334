// Linear layers over the GEMMs (cpu/matmul.h, cpu/matmul_bf16.h): y is seeded with the bias and the GEMM adds
// x·wᵀ (beta = 1); the backward accumulates dx and dw through beta = 1 and reduces db over tokens in ascending
// order per column (fp32 in both precisions, as the CPU). The grouped layers make the same GEMMs, every group's as
// one grouped launch per GEMM, so each group has the bits of its own matmul.
#include "backend/cuda/cublas.h"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void fill_rows_kernel(float* y, const float* b, int64_t total, int O) {
  MOE_CUDA_FOR(i, total) y[i] = b[i % O];
}

struct ElementTerm {
  const float* m;
  int cols;
  __device__ float operator()(int n, int c) const { return m[(int64_t)n * cols + c]; }
};

}  // namespace

void column_sum(cudaStream_t s, float* db, const float* dy, int N, int O) {
  column_reduce(s, db, ElementTerm{dy, O}, N, O);
}

void fill_rows(cudaStream_t s, float* y, const float* b, int N, int O) {
  const int64_t total = (int64_t)N * O;
  if (total > 0) fill_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(y, b, total, O);
}

namespace {

// The GEMMs of the layers below: ours, or cuBLAS's (the same operands; an fp32 B of the bf16 path is x, rounded as
// our bf16 kernel rounds it while loading).
void gemm(cudaStream_t s, const Cublas* blas, bool ta, bool tb, int M, int N, int K, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (blas) blas->sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  else sgemm(s, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

template <class BT>
void gemm_bf16(cudaStream_t s, const Cublas* blas, bool ta, bool tb, int M, int N, int K, const float* A, int lda,
               const BT* B, int ldb, float beta, float* C, int ldc) {
  constexpr bool b_bf16 = sizeof(BT) == 2;
  if (blas) blas->sgemm_bf16(ta, tb, M, N, K, 1.0f, A, false, lda, B, b_bf16, ldb, beta, C, ldc);
  else sgemm_bf16(s, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void matmul_forward(cudaStream_t s, const Cublas* blas, float* y, const float* x, const float* w, const float* b, int N,
                    int I, int O) {
  if (b) fill_rows(s, y, b, N, O);
  gemm(s, blas, false, true, N, O, I, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward(cudaStream_t s, const Cublas* blas, float* dx, float* dw, float* db, const float* dy,
                     const float* x, const float* w, int N, int I, int O) {
  if (dx) gemm(s, blas, false, false, N, I, O, dy, O, w, I, 1.0f, dx, I);
  if (dw) gemm(s, blas, true, false, O, I, N, dy, O, x, I, 1.0f, dw, I);
  if (db) column_sum(s, db, dy, N, O);
}

void matmul_forward_bf16(cudaStream_t s, const Cublas* blas, float* y, const float* x, const uint16_t* w,
                         const float* b, int N, int I, int O) {
  if (b) fill_rows(s, y, b, N, O);
  gemm_bf16(s, blas, false, true, N, O, I, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward_bf16(cudaStream_t s, const Cublas* blas, float* dx, float* dw, float* db, const float* dy,
                          const float* x, const uint16_t* w, int N, int I, int O) {
  if (dx) gemm_bf16(s, blas, false, false, N, I, O, dy, O, w, I, 1.0f, dx, I);
  if (dw) gemm_bf16(s, blas, true, false, O, I, N, dy, O, x, I, 1.0f, dw, I);
  if (db) column_sum(s, db, dy, N, O);
}

namespace {

const void* weight(const LinearGroups& g, int i, bool bf16) {
  return bf16 ? static_cast<const void*>(g.w_bf16[i]) : static_cast<const void*>(g.w[i]);
}

// The groups' GEMMs: one grouped launch of ours, or one cuBLAS call per group, each exactly the call the group's
// own matmul makes (its fp32 operands rounded to bf16 into fresh scratch), so each group has that matmul's bits.
void grouped_gemm(Stage& st, const Cublas* blas, bool bf16, bool ta, bool tb, bool b_is_bf16,
                  const std::vector<GemmGroup>& groups, int N, int lda, int ldb, int ldc) {
  if (groups.empty()) return;
  if (blas) {
    for (const GemmGroup& g : groups) {
      if (bf16) blas->sgemm_bf16(ta, tb, g.M, N, g.K, 1.0f, g.A, false, lda, g.B, b_is_bf16, ldb, g.beta, g.C, ldc);
      else blas->sgemm(ta, tb, g.M, N, g.K, 1.0f, g.A, lda, static_cast<const float*>(g.B), ldb, g.beta, g.C, ldc);
    }
  } else if (bf16) {
    sgemm_bf16_grouped(st, ta, tb, b_is_bf16, groups, N, 1.0f, lda, ldb, ldc);
  } else {
    sgemm_grouped(st, ta, tb, groups, N, 1.0f, lda, ldb, ldc);
  }
}

}  // namespace

void grouped_matmul_forward(Stage& st, const Cublas* blas, float* y, const float* x, const LinearGroups& g, int I,
                            int O, bool bf16) {
  std::vector<GemmGroup> gemms;
  for (int i = 0; i < g.size(); ++i) {
    if (g.rows[i] <= 0) continue;
    float* yi = y + g.row0[i] * O;
    if (g.b[i]) fill_rows(st.stream(), yi, g.b[i], g.rows[i], O);
    gemms.push_back({x + g.row0[i] * I, weight(g, i, bf16), yi, g.rows[i], I, g.b[i] ? 1.0f : 0.0f, 0});
  }
  grouped_gemm(st, blas, bf16, false, true, true, gemms, O, I, I, O);
}

void grouped_matmul_backward(Stage& st, const Cublas* blas, float* dx, const float* dy, const float* x,
                             const LinearGroups& g, int I, int O, bool bf16) {
  std::vector<GemmGroup> dxs, dws;
  for (int i = 0; i < g.size(); ++i) {
    if (g.rows[i] <= 0) continue;
    const float* dyi = dy + g.row0[i] * O;
    if (dx) dxs.push_back({dyi, weight(g, i, bf16), dx + g.row0[i] * I, g.rows[i], O, 1.0f, 0});
    if (g.dw[i]) dws.push_back({dyi, x + g.row0[i] * I, g.dw[i], O, g.rows[i], 1.0f, 0});
    if (g.db[i]) column_sum(st.stream(), g.db[i], dyi, g.rows[i], O);
  }
  grouped_gemm(st, blas, bf16, false, false, true, dxs, I, O, I, I);
  grouped_gemm(st, blas, bf16, true, false, false, dws, I, O, I, I);  // the bf16 path rounds x as it reads it
}

}  // namespace moe::cuda
