// Linear layers over the GEMMs (cpu/matmul.h, cpu/matmul_bf16.h): y is seeded with the bias and the GEMM adds
// x·wᵀ (beta = 1); the backward accumulates dx and dw through beta = 1 and reduces db over tokens in ascending
// order per column (fp32 in both precisions, as the CPU).
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

}  // namespace moe::cuda
