// GELU, tanh approximation, written as x·σ(2u) as cpu/gelu_kernels.h does (expf instead of the CPU's vexp, so
// results agree to a few ulp, not bitwise).
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void gelu_forward_kernel(float* out, const float* inp, int64_t n) {
  MOE_CUDA_FOR(i, n) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = x * sigmoidf(2.0f * u);
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, int64_t n) {
  MOE_CUDA_FOR(i, n) {
    const float x = inp[i], x2 = x * x;
    const float u = kSqrt2OverPi * (x + kCubic * x2 * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x2);
    const float s = sigmoidf(2.0f * u);
    dinp[i] += dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
  }
}

}  // namespace

void gelu_forward(cudaStream_t s, float* out, const float* inp, int64_t n) {
  if (n > 0) gelu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, inp, n);
}

void gelu_backward(cudaStream_t s, float* dinp, const float* inp, const float* dout, int64_t n) {
  if (n > 0) gelu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dinp, inp, dout, n);
}

}  // namespace moe::cuda
