// SwiGLU over gate_up rows [gate | up] (cpu/swiglu.h): out = silu(g)·up, one thread per output element.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void swiglu_forward_kernel(float* out, const float* gate_up, int64_t n, int F) {
  MOE_CUDA_FOR(i, n) {
    const int64_t row = i / F, f = i % F;
    const float g = gate_up[row * 2 * F + f], u = gate_up[row * 2 * F + F + f];
    out[i] = g * sigmoidf(g) * u;
  }
}

// d silu(g)/dg = σ(g)·(1 + g·(1 - σ(g)))
__global__ void swiglu_backward_kernel(float* dgate_up, const float* dout, const float* gate_up, int64_t n, int F) {
  MOE_CUDA_FOR(i, n) {
    const int64_t row = i / F, f = i % F, at = row * 2 * F + f;
    const float g = gate_up[at], u = gate_up[at + F], s = sigmoidf(g), d = dout[i];
    dgate_up[at] += d * u * s * (1.0f + g * (1.0f - s));
    dgate_up[at + F] += d * g * s;
  }
}

}  // namespace

void swiglu_forward(cudaStream_t s, float* out, const float* gate_up, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n > 0) swiglu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, gate_up, n, F);
}

void swiglu_backward(cudaStream_t s, float* dgate_up, const float* dout, const float* gate_up, int N, int F) {
  const int64_t n = (int64_t)N * F;
  if (n > 0) swiglu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dgate_up, dout, gate_up, n, F);
}

}  // namespace moe::cuda
