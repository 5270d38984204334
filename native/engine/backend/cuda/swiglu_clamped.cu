// gpt-oss's clamped SwiGLU (cpu/swiglu_clamped.h), one thread per output element.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void swiglu_clamped_forward_kernel(float* out, const float* gate_up, int64_t n, int F, float alpha,
                                              float limit) {
  MOE_CUDA_FOR(i, n) {
    const int64_t row = i / F, f = i % F, at = row * 2 * F + f;
    const float g = fminf(gate_up[at], limit), u = fminf(fmaxf(gate_up[at + F], -limit), limit);
    out[i] = (u + 1.0f) * (g * sigmoidf(alpha * g));
  }
}

// d/dg [g·σ(αg)] = σ(αg) + αg·σ(αg)·(1 - σ(αg)); a clamp passes the gradient only inside its bounds.
__global__ void swiglu_clamped_backward_kernel(float* dgate_up, const float* dout, const float* gate_up, int64_t n,
                                               int F, float alpha, float limit) {
  MOE_CUDA_FOR(i, n) {
    const int64_t row = i / F, f = i % F, at = row * 2 * F + f;
    const float gate = gate_up[at], up = gate_up[at + F], d = dout[i];
    const float g = fminf(gate, limit), u = fminf(fmaxf(up, -limit), limit);
    const float s = sigmoidf(alpha * g), glu = g * s;
    if (gate <= limit) dgate_up[at] += d * (u + 1.0f) * (s + alpha * g * s * (1.0f - s));
    if (up >= -limit && up <= limit) dgate_up[at + F] += d * glu;
  }
}

}  // namespace

void swiglu_clamped_forward(cudaStream_t s, float* out, const float* gate_up, int N, int F, float alpha, float limit) {
  const int64_t n = (int64_t)N * F;
  if (n > 0) swiglu_clamped_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, gate_up, n, F, alpha, limit);
}

void swiglu_clamped_backward(cudaStream_t s, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                             float alpha, float limit) {
  const int64_t n = (int64_t)N * F;
  if (n > 0)
    swiglu_clamped_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dgate_up, dout, gate_up, n, F, alpha, limit);
}

}  // namespace moe::cuda
