// RMSNorm (cpu/rmsnorm.h). One block per row for the statistics and the input gradient (fixed-tree sums); dw by
// the deterministic column reduction over tokens.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* w, int C, float eps) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) s += x[c] * x[c];
  const float r = 1.0f / sqrtf(block_sum(s) / (float)C + eps);
  for (int c = threadIdx.x; c < C; c += kThreads) out[n * C + c] = x[c] * r * w[c];
  if (threadIdx.x == 0) rstd[n] = r;
}

// dx = r·dout·w - x · r³/C · Σ dout·w·x
__global__ void rmsnorm_backward_kernel(float* dinp, const float* dout, const float* inp, const float* w,
                                        const float* rstd, int C) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  const float r = rstd[n];
  float dot = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) dot += d[c] * w[c] * x[c];
  const float k = r * r * r * block_sum(dot) / (float)C;
  for (int c = threadIdx.x; c < C; c += kThreads) dinp[n * C + c] += r * d[c] * w[c] - x[c] * k;
}

struct RmsWeightTerm {  // dout · x·r
  const float *dout, *inp, *rstd;
  int C;
  __device__ float operator()(int n, int c) const {
    const int64_t i = (int64_t)n * C + c;
    return dout[i] * (inp[i] * rstd[n]);
  }
};

}  // namespace

void rmsnorm_forward(cudaStream_t s, float* out, float* rstd, const float* inp, const float* w, int N, int C,
                     float eps) {
  if (N > 0 && C > 0) rmsnorm_forward_kernel<<<N, kThreads, 0, s>>>(out, rstd, inp, w, C, eps);
}

void rmsnorm_backward(cudaStream_t s, float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int N, int C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) rmsnorm_backward_kernel<<<N, kThreads, 0, s>>>(dinp, dout, inp, w, rstd, C);
  column_reduce(s, dw, RmsWeightTerm{dout, inp, rstd, C}, N, C);
}

}  // namespace moe::cuda
