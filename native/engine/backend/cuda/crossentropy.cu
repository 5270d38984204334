// Softmax cross-entropy (cpu/crossentropy.h): one block per row, fixed-tree max and sum (expf, so a few ulp
// from the CPU's vexp).
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__device__ float row_lse(const float* x, int V) {
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
  m = block_max(m);
  float s = 0.0f;
  for (int v = threadIdx.x; v < V; v += kThreads) s += expf(x[v] - m);
  return m + logf(block_sum(s));
}

__global__ void crossentropy_forward_kernel(float* losses, const float* logits, const int32_t* targets, int V) {
  const int64_t n = blockIdx.x;
  if (targets[n] < 0) {
    if (threadIdx.x == 0) losses[n] = 0.0f;
    return;
  }
  const float* x = logits + n * V;
  const float lse = row_lse(x, V);
  if (threadIdx.x == 0) losses[n] = lse - x[targets[n]];
}

// dx += scale · (softmax(x) - onehot(target)); the target entry is formed as p - 1 before scaling.
__global__ void crossentropy_backward_kernel(float* dlogits, const float* logits, const int32_t* targets, float scale,
                                             int V) {
  const int64_t n = blockIdx.x;
  const int target = targets[n];
  if (target < 0) return;
  const float* x = logits + n * V;
  float* dx = dlogits + n * V;
  const float lse = row_lse(x, V);
  for (int v = threadIdx.x; v < V; v += kThreads) {
    const float p = expf(x[v] - lse);
    dx[v] += v == target ? scale * (p - 1.0f) : scale * p;
  }
}

}  // namespace

void crossentropy_forward(cudaStream_t s, float* losses, const float* logits, const int32_t* targets, int N, int V) {
  if (N > 0) crossentropy_forward_kernel<<<N, kThreads, 0, s>>>(losses, logits, targets, V);
}

void crossentropy_backward(cudaStream_t s, float* dlogits, const float* logits, const int32_t* targets, float scale,
                           int N, int V) {
  if (N > 0) crossentropy_backward_kernel<<<N, kThreads, 0, s>>>(dlogits, logits, targets, scale, V);
}

}  // namespace moe::cuda
