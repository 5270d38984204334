// Fused AdamW (backend/types.h's AdamWParams order) with the CPU's constants folded once in double and the same
// per-element fma sequence, so updates match the CPU bit for bit where sqrtf and division round the same (they
// are correctly rounded on both). Σx² sums fixed 64Ki-element chunks in double, each in a fixed tree, then the
// chunks in order: deterministic, equal to the CPU's to double rounding.
#include "backend/cpu/adamw_kernels.h"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

using cpu::adamw_detail::Consts;

__global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, int64_t n, Consts c) {
  MOE_CUDA_FOR(i, n) {
    const float g = grad[i] * c.grad_scale;
    const float mi = fmaf(c.one_minus_beta1, g, c.beta1 * m[i]);
    const float vi = fmaf(c.one_minus_beta2 * g, g, c.beta2 * v[i]);
    m[i] = mi;
    v[i] = vi;
    const float denom = __fdiv_rn(__fsqrt_rn(vi), c.bias2_sqrt) + c.eps;
    p[i] = p[i] * c.decay + __fdiv_rn(c.neg_step * mi, denom);
  }
}

__global__ void sum_squares_chunk_kernel(double* partial, const float* x, int64_t n) {
  const int64_t c0 = blockIdx.x * kSumSquaresChunk, c1 = c0 + kSumSquaresChunk < n ? c0 + kSumSquaresChunk : n;
  double s = 0.0;
  for (int64_t i = c0 + threadIdx.x; i < c1; i += kThreads) s += (double)x[i] * (double)x[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_in_order_kernel(double* out, const double* partial, int64_t chunks) {
  double s = 0.0;
  for (int64_t i = 0; i < chunks; ++i) s += partial[i];
  out[0] = s;
}

}  // namespace

void adamw_update(cudaStream_t s, float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp) {
  if (n <= 0) return;
  const Consts c = cpu::adamw_detail::fold(hp);
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, grad, m, v, n, c);
}

void sum_squares(cudaStream_t s, double* out, double* partial, const float* x, int64_t n) {
  if (n <= 0) {
    cuda_check(cudaMemsetAsync(out, 0, sizeof(double), s), "sum_squares");
    return;
  }
  const int64_t chunks = sum_squares_chunks(n);
  sum_squares_chunk_kernel<<<(unsigned)chunks, kThreads, 0, s>>>(partial, x, n);
  sum_in_order_kernel<<<1, 1, 0, s>>>(out, partial, chunks);
}

}  // namespace moe::cuda
