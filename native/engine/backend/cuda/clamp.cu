// Clamp to [-limit, limit] and its gradient (cpu/clamp.h); elementwise, bit-identical to the CPU.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void clamp_forward_kernel(float* out, const float* inp, int64_t n, float limit) {
  MOE_CUDA_FOR(i, n) out[i] = fminf(fmaxf(inp[i], -limit), limit);
}

__global__ void clamp_backward_kernel(float* dinp, const float* dout, const float* inp, int64_t n, float limit) {
  MOE_CUDA_FOR(i, n) if (inp[i] >= -limit && inp[i] <= limit) dinp[i] += dout[i];
}

}  // namespace

void clamp_forward(cudaStream_t s, float* out, const float* inp, int64_t n, float limit) {
  if (n > 0) clamp_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, inp, n, limit);
}

void clamp_backward(cudaStream_t s, float* dinp, const float* dout, const float* inp, int64_t n, float limit) {
  if (n > 0) clamp_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dinp, dout, inp, n, limit);
}

}  // namespace moe::cuda
