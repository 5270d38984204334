// Linear layers over the GEMMs (cpu/matmul.h, cpu/matmul_bf16.h): y is seeded with the bias and the GEMM adds
// x·wᵀ (beta = 1); the backward accumulates dx and dw through beta = 1 and reduces db over tokens in ascending
// order per column (fp32 in both precisions, as the CPU). The grouped layers make the same GEMMs, every group's as
// one grouped launch per GEMM, so each group has the bits of its own matmul.
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

void matmul_forward(cudaStream_t s, float* y, const float* x, const float* w, const float* b, int N, int I, int O) {
  if (b) fill_rows(s, y, b, N, O);
  sgemm(s, false, true, N, O, I, 1.0f, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward(cudaStream_t s, float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int N, int I, int O) {
  if (dx) sgemm(s, false, false, N, I, O, 1.0f, dy, O, w, I, 1.0f, dx, I);
  if (dw) sgemm(s, true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
  if (db) column_sum(s, db, dy, N, O);
}

void matmul_forward_bf16(cudaStream_t s, float* y, const float* x, const uint16_t* w, const float* b, int N, int I,
                         int O) {
  if (b) fill_rows(s, y, b, N, O);
  sgemm_bf16(s, false, true, N, O, I, 1.0f, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward_bf16(cudaStream_t s, float* dx, float* dw, float* db, const float* dy, const float* x,
                          const uint16_t* w, int N, int I, int O) {
  if (dx) sgemm_bf16(s, false, false, N, I, O, 1.0f, dy, O, w, I, 1.0f, dx, I);
  if (dw) sgemm_bf16(s, true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
  if (db) column_sum(s, db, dy, N, O);
}

namespace {

void grouped_gemm(Stage& st, bool bf16, bool ta, bool tb, bool b_is_bf16, const std::vector<GemmGroup>& groups, int N,
                  int lda, int ldb, int ldc) {
  if (bf16) sgemm_bf16_grouped(st, ta, tb, b_is_bf16, groups, N, 1.0f, lda, ldb, ldc);
  else sgemm_grouped(st, ta, tb, groups, N, 1.0f, lda, ldb, ldc);
}

const void* weight(const LinearGroups& g, int i, bool bf16) {
  return bf16 ? static_cast<const void*>(g.w_bf16[i]) : static_cast<const void*>(g.w[i]);
}

}  // namespace

void grouped_matmul_forward(Stage& st, float* y, const float* x, const LinearGroups& g, int I, int O, bool bf16) {
  std::vector<GemmGroup> gemms;
  for (int i = 0; i < g.size(); ++i) {
    if (g.rows[i] <= 0) continue;
    float* yi = y + g.row0[i] * O;
    if (g.b[i]) fill_rows(st.stream(), yi, g.b[i], g.rows[i], O);
    gemms.push_back({x + g.row0[i] * I, weight(g, i, bf16), yi, g.rows[i], I, g.b[i] ? 1.0f : 0.0f, 0});
  }
  grouped_gemm(st, bf16, false, true, true, gemms, O, I, I, O);
}

void grouped_matmul_backward(Stage& st, float* dx, const float* dy, const float* x, const LinearGroups& g, int I, int O,
                             bool bf16) {
  std::vector<GemmGroup> dxs, dws;
  for (int i = 0; i < g.size(); ++i) {
    if (g.rows[i] <= 0) continue;
    const float* dyi = dy + g.row0[i] * O;
    if (dx) dxs.push_back({dyi, weight(g, i, bf16), dx + g.row0[i] * I, g.rows[i], O, 1.0f, 0});
    if (g.dw[i]) dws.push_back({dyi, x + g.row0[i] * I, g.dw[i], O, g.rows[i], 1.0f, 0});
    if (g.db[i]) column_sum(st.stream(), g.db[i], dyi, g.rows[i], O);
  }
  grouped_gemm(st, bf16, false, false, true, dxs, I, O, I, I);
  grouped_gemm(st, bf16, true, false, false, dws, I, O, I, I);  // the bf16 path rounds x as it loads it
}

}  // namespace moe::cuda
