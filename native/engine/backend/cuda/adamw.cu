// Fused AdamW (backend/types.h's AdamWParams order) with the CPU's constants (cpu/adamw_kernels.h) and the CPU
// scalar loop's sequence of correctly rounded operations, so updates match the CPU's scalar path bit for bit.
// Σx² is the CPU's exact lane order (below), so it is the CPU's result bit for bit.
#include "backend/cpu/adamw_kernels.h"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

using cpu::adamw_detail::Consts;

__global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, int64_t n, Consts c) {
  MOE_CUDA_FOR(i, n) {
    const float g = __fmul_rn(grad[i], c.grad_scale);
    const float mi = fmaf(c.one_minus_beta1, g, __fmul_rn(c.beta1, m[i]));
    const float vi = fmaf(__fmul_rn(c.one_minus_beta2, g), g, __fmul_rn(c.beta2, v[i]));
    m[i] = mi;
    v[i] = vi;
    // Rounded one operation at a time, as the CPU's scalar loop (no contraction into fma).
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bias2_sqrt), c.eps);
    p[i] = __fadd_rn(__fmul_rn(p[i], c.decay), __fdiv_rn(__fmul_rn(c.neg_step, mi), denom));
  }
}

// Σx² of one 64Ki-element chunk as the CPU forms it (cpu/adamw.cpp): 16 lanes (index mod 16) accumulated in
// double in index order, then added in lane order. x² is exact in double, so the result is the CPU's bit for bit.
// Sixteen threads per chunk, each one lane; their loads are contiguous across the lanes.
constexpr int kChunksPerBlock = 8;

__global__ void sum_squares_chunk_kernel(double* partial, const float* x, int64_t n, int64_t chunks) {
  __shared__ double lanes[kChunksPerBlock][16];
  const int local = threadIdx.x / 16, lane = threadIdx.x % 16;
  const int64_t chunk = (int64_t)blockIdx.x * kChunksPerBlock + local;
  double acc = 0.0;
  if (chunk < chunks) {
    const int64_t c0 = chunk * kSumSquaresChunk, c1 = c0 + kSumSquaresChunk < n ? c0 + kSumSquaresChunk : n;
    for (int64_t i = c0 + lane; i < c1; i += 16) acc += (double)x[i] * (double)x[i];
  }
  lanes[local][lane] = acc;
  __syncthreads();
  if (lane != 0 || chunk >= chunks) return;
  double s = 0.0;
  for (int l = 0; l < 16; ++l) s += lanes[local][l];
  partial[chunk] = s;
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
  const unsigned blocks = (unsigned)((chunks + kChunksPerBlock - 1) / kChunksPerBlock);
  sum_squares_chunk_kernel<<<blocks, kChunksPerBlock * 16, 0, s>>>(partial, x, n, chunks);
  sum_in_order_kernel<<<1, 1, 0, s>>>(out, partial, chunks);
}

}  // namespace moe::cuda
