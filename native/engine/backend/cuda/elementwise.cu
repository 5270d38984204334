// Residual add and gradient accumulation (cpu/elementwise.h); elementwise, so bit-identical to the CPU.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  MOE_CUDA_FOR(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* dst, const float* src, int64_t n) {
  MOE_CUDA_FOR(i, n) dst[i] += src[i];
}

__global__ void multiply_kernel(float* dst, const float* src, const float* f, int64_t n) {
  MOE_CUDA_FOR(i, n) dst[i] = src[i] * f[i];
}

__global__ void multiply_accumulate_kernel(float* dst, const float* src, const float* f, int64_t n) {
  MOE_CUDA_FOR(i, n) dst[i] += src[i] * f[i];
}

}  // namespace

cudaError_t kernels_loadable() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, add_kernel);
}

void add_forward(cudaStream_t s, float* out, const float* a, const float* b, int64_t n) {
  if (n > 0) add_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, a, b, n);
}

void accumulate(cudaStream_t s, float* dst, const float* src, int64_t n) {
  if (n > 0) accumulate_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, n);
}

void multiply(cudaStream_t s, float* dst, const float* src, const float* factor, int64_t n) {
  if (n > 0) multiply_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, factor, n);
}

void multiply_accumulate(cudaStream_t s, float* dst, const float* src, const float* factor, int64_t n) {
  if (n > 0) multiply_accumulate_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, factor, n);
}

}  // namespace moe::cuda
