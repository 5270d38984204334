// Row moves of token dispatch (cpu/dispatch.h) over a plan built on the host (the backend builds it with the
// CPU's counting sort and uploads its index arrays). Every kernel owns its destination elements and sums over k
// in ascending order, so there are no atomics.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

__global__ void permute_forward_kernel(float* xs, const float* x, const int32_t* slot_token, int64_t total, int C) {
  MOE_CUDA_FOR(i, total) {
    const int32_t n = slot_token[i / C];
    xs[i] = n < 0 ? 0.0f : x[(int64_t)n * C + i % C];
  }
}

__global__ void permute_backward_kernel(float* dx, const float* dxs, const int32_t* assign, int64_t total, int K,
                                        int C) {
  MOE_CUDA_FOR(i, total) {
    const int64_t n = i / C, c = i % C;
    float acc = dx[i];
    for (int k = 0; k < K; ++k) {
      const int32_t slot = assign[n * K + k];
      if (slot >= 0) acc += dxs[(int64_t)slot * C + c];
    }
    dx[i] = acc;
  }
}

__global__ void combine_forward_kernel(float* y, const float* ys, const float* topk_w, const int32_t* assign,
                                       int64_t total, int K, int C) {
  MOE_CUDA_FOR(i, total) {
    const int64_t n = i / C, c = i % C;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      const int32_t slot = assign[n * K + k];
      if (slot >= 0) acc += topk_w[n * K + k] * ys[(int64_t)slot * C + c];
    }
    y[i] = acc;
  }
}

// Each slot belongs to exactly one assignment, so writing dys by token is race-free.
__global__ void combine_backward_dys_kernel(float* dys, const float* dy, const float* topk_w, const int32_t* assign,
                                            int64_t total, int K, int C) {
  MOE_CUDA_FOR(i, total) {
    const int64_t n = i / C, c = i % C;
    for (int k = 0; k < K; ++k) {
      const int32_t slot = assign[n * K + k];
      if (slot >= 0) dys[(int64_t)slot * C + c] += topk_w[n * K + k] * dy[i];
    }
  }
}

// Warp per assignment (n, k), striding over the grid: dtopk_w[n, k] += dy[n]·ys[slot].
__global__ void combine_backward_dw_kernel(float* dtopk_w, const float* dy, const float* ys, const int32_t* assign,
                                           int64_t NK, int K, int C) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t a = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; a < NK; a += warps) {
    const int32_t slot = assign[a];
    if (slot < 0) continue;
    const float* g = dy + (a / K) * C;
    const float* v = ys + (int64_t)slot * C;
    float s = 0.0f;
    for (int c = threadIdx.x % 32; c < C; c += 32) s += g[c] * v[c];
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) dtopk_w[a] += s;
  }
}

}  // namespace

void permute_forward(cudaStream_t s, float* xs, const float* x, const PlanView& plan, int C) {
  const int64_t total = (int64_t)plan.S * C;
  if (total > 0) permute_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(xs, x, plan.slot_token, total, C);
}

void permute_backward(cudaStream_t s, float* dx, const float* dxs, const PlanView& plan, int C) {
  const int64_t total = (int64_t)plan.N * C;
  if (dx && total > 0)
    permute_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dx, dxs, plan.assign_slot, total, plan.K, C);
}

void combine_forward(cudaStream_t s, float* y, const float* ys, const float* topk_w, const PlanView& plan, int C) {
  const int64_t total = (int64_t)plan.N * C;
  if (total > 0)
    combine_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(y, ys, topk_w, plan.assign_slot, total, plan.K, C);
}

void combine_backward(cudaStream_t s, float* dys, float* dtopk_w, const float* dy, const float* ys,
                      const float* topk_w, const PlanView& plan, int C) {
  const int64_t total = (int64_t)plan.N * C, NK = (int64_t)plan.N * plan.K;
  if (total <= 0) return;
  if (dtopk_w)
    combine_backward_dw_kernel<<<blocks_for(NK, kThreads / 32), kThreads, 0, s>>>(dtopk_w, dy, ys, plan.assign_slot,
                                                                                NK, plan.K, C);
  if (dys)
    combine_backward_dys_kernel<<<blocks_for(total), kThreads, 0, s>>>(dys, dy, topk_w, plan.assign_slot, total,
                                                                       plan.K, C);
}

}  // namespace moe::cuda
