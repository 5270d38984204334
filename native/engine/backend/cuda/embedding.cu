// Token (+ learned position) embedding (cpu/embedding.h). The backward scatters into rows that repeat whenever
// a token repeats; one thread per channel visits the tokens in order, as the CPU does, so it is race-free and
// deterministic without atomics (and the same bits as the CPU's, whose per-channel order is the same).
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                                         int64_t total, int T, int C) {
  MOE_CUDA_FOR(i, total) {
    const int64_t n = i / C, c = i % C;
    const float e = wte[(int64_t)tokens[n] * C + c];
    out[i] = wpe ? e + wpe[(n % T) * C + c] : e;
  }
}

__global__ void embedding_backward_wte_kernel(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                              int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int64_t n = 0; n < N; ++n) dwte[(int64_t)tokens[n] * C + c] += dout[n * C + c];
}

__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  MOE_CUDA_FOR(i, (int64_t)T * C) {
    const int64_t t = i / C, c = i % C;
    float acc = dwpe[i];
    for (int b = 0; b < B; ++b) acc += dout[((int64_t)b * T + t) * C + c];
    dwpe[i] = acc;
  }
}

}  // namespace

void embedding_forward(cudaStream_t s, float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
  const int64_t total = (int64_t)B * T * C;
  if (total > 0) embedding_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(out, tokens, wte, wpe, total, T, C);
}

void embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C) {
  if ((int64_t)B * T * C <= 0) return;
  if (dwte) embedding_backward_wte_kernel<<<blocks_for(C, 64), 64, 0, s>>>(dwte, dout, tokens, (int64_t)B * T, C);
  if (dwpe) embedding_backward_wpe_kernel<<<blocks_for((int64_t)T * C), kThreads, 0, s>>>(dwpe, dout, B, T, C);
}

}  // namespace moe::cuda
