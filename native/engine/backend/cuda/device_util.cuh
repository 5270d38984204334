// Device-side helpers shared by the CUDA kernels: launch geometry, fixed-tree block reductions and the
// deterministic column reduction. Every reduction here adds in an order fixed by the shapes alone, never by
// scheduling, so results are reproducible run to run (no float atomics).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/runtime.h"

namespace moe::cuda {

constexpr int kThreads = 256;  // block size of the elementwise and row kernels

// Blocks for n items of per_block each, capped for the grid-stride loops (MOE_CUDA_FOR); kernels without such a
// loop take their grid from sizes that stay far below the cap.
inline unsigned blocks_for(int64_t n, int per_block = kThreads) {
  const int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 1048576 ? 1048576 : b));
}

// Grid-stride loop body helper: i over [0, n).
#define MOE_CUDA_FOR(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Sum of v over the block (blockDim.x == kThreads) in a fixed tree; every thread gets the result.
template <class T>
__device__ inline T block_sum(T v) {
  __shared__ T buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}

__device__ inline float block_max(float v) {
  __shared__ float buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + w]);
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

// Σ over a warp by xor shuffles: every lane gets the same bits.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// Stream-ordered device scratch owned by one launcher.
template <class T>
class DeviceScratch {
 public:
  DeviceScratch(cudaStream_t s, size_t count) : s_(s) {
    cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&p_), (count ? count : 1) * sizeof(T), s), "scratch");
  }
  ~DeviceScratch() { cudaFreeAsync(p_, s_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  T* get() const { return p_; }

 private:
  cudaStream_t s_;
  T* p_ = nullptr;
};

constexpr int kColumnRows = 256;  // rows per partial of the column reduction (more past 65535 partials)

template <class Term>
__global__ void column_partials_kernel(float* partial, Term term, int N, int C, int rows) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int n0 = blockIdx.y * rows, n1 = min(N, n0 + rows);
  float acc = 0.0f;
  for (int n = n0; n < n1; ++n) acc += term(n, c);
  partial[(int64_t)blockIdx.y * C + c] = acc;
}

template <class = void>
__global__ void column_finish_kernel(float* out, const float* partial, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int k = 0; k < chunks; ++k) acc += partial[(int64_t)k * C + c];
  out[c] += acc;
}

// out[c] += Σ_n term(n, c) for c in [0, C): partial sums over fixed row chunks (256 rows, more when N needs over
// 65535 chunks) in ascending row order, then the chunks in ascending order. Coalesced over columns; deterministic
// for given N and C.
template <class Term>
void column_reduce(cudaStream_t s, float* out, Term term, int N, int C) {
  if (N <= 0 || C <= 0 || out == nullptr) return;
  const int rows = N / kColumnRows < 65535 ? kColumnRows : (N + 65534) / 65535;
  const int chunks = (N + rows - 1) / rows;
  DeviceScratch<float> partial(s, (size_t)chunks * C);
  column_partials_kernel<<<dim3(blocks_for(C), chunks), kThreads, 0, s>>>(partial.get(), term, N, C, rows);
  column_finish_kernel<><<<blocks_for(C), kThreads, 0, s>>>(out, partial.get(), chunks, C);
}

}  // namespace moe::cuda
