// Qwen2-MoE's shared-expert gate (cpu/sigmoid_gate.h): one scalar gate per token scales its row. The backward's
// per-token dot product is one block's fixed-tree sum.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void sigmoid_gate_forward_kernel(float* out, const float* gate_logit, const float* x, int64_t n, int C) {
  MOE_CUDA_FOR(i, n) out[i] = sigmoidf(gate_logit[i / C]) * x[i];
}

__global__ void sigmoid_gate_backward_kernel(float* dgate_logit, float* ds, const float* dout,
                                             const float* gate_logit, const float* x, int C) {
  const int64_t n = blockIdx.x;
  const float g = sigmoidf(gate_logit[n]);
  const float* d = dout + n * C;
  float dot = 0.0f;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    if (dgate_logit) dot += d[c] * x[n * C + c];
    if (ds) ds[n * C + c] += g * d[c];
  }
  if (!dgate_logit) return;
  dot = block_sum(dot);
  if (threadIdx.x == 0) dgate_logit[n] += g * (1.0f - g) * dot;
}

}  // namespace

void sigmoid_gate_forward(cudaStream_t s, float* out, const float* gate_logit, const float* x, int N, int C) {
  const int64_t n = (int64_t)N * C;
  if (n > 0) sigmoid_gate_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, gate_logit, x, n, C);
}

void sigmoid_gate_backward(cudaStream_t s, float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                           const float* x, int N, int C) {
  if (N <= 0 || C <= 0 || (!dgate_logit && !ds)) return;
  sigmoid_gate_backward_kernel<<<N, kThreads, 0, s>>>(dgate_logit, ds, dout, gate_logit, x, C);
}

}  // namespace moe::cuda
