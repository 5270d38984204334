// LayerNorm (cpu/layernorm.h). One block per row for the statistics and the input gradient (fixed-tree sums);
// dw and db by the deterministic column reduction over tokens.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                         const float* b, int C, float eps) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) s += x[c];
  const float m = block_sum(s) / (float)C;
  float v = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) v += (x[c] - m) * (x[c] - m);
  const float r = 1.0f / sqrtf(block_sum(v) / (float)C + eps);
  for (int c = threadIdx.x; c < C; c += kThreads) out[n * C + c] = (x[c] - m) * r * w[c] + b[c];
  if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
}

// dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)) with x̂ = (x - mean)·rstd and g = dout·w.
__global__ void layernorm_backward_kernel(float* dinp, const float* dout, const float* inp, const float* w,
                                          const float* mean, const float* rstd, int C) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  const float m = mean[n], r = rstd[n];
  float g = 0.0f, gx = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    g += d[c] * w[c];
    gx += d[c] * w[c] * ((x[c] - m) * r);
  }
  const float g_mean = block_sum(g) / (float)C, gx_mean = block_sum(gx) / (float)C;
  for (int c = threadIdx.x; c < C; c += kThreads)
    dinp[n * C + c] += r * (d[c] * w[c] - g_mean - (x[c] - m) * r * gx_mean);
}

struct NormWeightTerm {  // dout · x̂
  const float *dout, *inp, *mean, *rstd;
  int C;
  __device__ float operator()(int n, int c) const {
    const int64_t i = (int64_t)n * C + c;
    return dout[i] * ((inp[i] - mean[n]) * rstd[n]);
  }
};

}  // namespace

void layernorm_forward(cudaStream_t s, float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C, float eps) {
  if (N > 0 && C > 0) layernorm_forward_kernel<<<N, kThreads, 0, s>>>(out, mean, rstd, inp, w, b, C, eps);
}

void layernorm_backward(cudaStream_t s, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) layernorm_backward_kernel<<<N, kThreads, 0, s>>>(dinp, dout, inp, w, mean, rstd, C);
  column_reduce(s, dw, NormWeightTerm{dout, inp, mean, rstd, C}, N, C);
  column_sum(s, db, dout, N, C);
}

}  // namespace moe::cuda
