// fp32 -> bf16 bits, round to nearest even with NaN quieted, exactly as moe::f32_to_bf16 (core/half.h).
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  MOE_CUDA_FOR(i, n) {
    uint32_t x = __float_as_uint(src[i]);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
      dst[i] = static_cast<uint16_t>((x >> 16) | 0x0040u);
      continue;
    }
    x += 0x7FFFu + ((x >> 16) & 1u);
    dst[i] = static_cast<uint16_t>(x >> 16);
  }
}

}  // namespace

void to_bf16(cudaStream_t s, uint16_t* dst, const float* src, int64_t n) {
  if (n > 0) to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, n);
}

}  // namespace moe::cuda
