// MoE router (cpu/router.h): one thread per token runs the per-token algorithm both backends share
// (router_rows.h: the same comparisons, so the same experts and tie order); the loss sums are reduced per expert
// over tokens in ascending order, and the backend forms the losses from them in double. Device expf/logf differ
// from the host's by an ulp at most, so a near-tie between two experts can in principle resolve differently.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/router_rows.h"

namespace moe::cuda {
namespace {

using router_rows::kMaxGroups;

// Per token: probs, the K experts and weights; zrow[n] = lse². scratch [N, E] holds the choice scores.
__global__ void router_forward_kernel(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N,
                                      int E, int K, RouterSpec spec, const int32_t* forced, float* scratch,
                                      double* zrow) {
  const int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (n >= N) return;
  float* p = probs + n * E;
  const float* l = logits + n * E;
  const float lse = spec.scoring == RouterScoring::Sigmoid ? router_rows::sigmoid_row(p, l, E)
                                                           : router_rows::softmax_row(p, l, E);
  float group[kMaxGroups];
  int32_t gidx[kMaxGroups];
  router_rows::choose_row(topk_idx + n * K, topk_w + n * K, p, forced ? forced + n * K : nullptr, scratch + n * E,
                          group, gidx, E, K, spec);
  zrow[n] = (double)lse * lse;
}

// Thread per expert (and one more for z): sums over tokens in ascending order.
__global__ void router_sums_kernel(RouterSums sums, const float* probs, const int32_t* topk_idx, const double* zrow,
                                   int N, int E, int K) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e > E) return;
  if (e == E) {
    double z = 0.0;
    for (int n = 0; n < N; ++n) z += zrow[n];
    sums.z_sum[0] = z;
    return;
  }
  double ps = 0.0, cnt = 0.0;
  for (int n = 0; n < N; ++n) {
    ps += probs[(int64_t)n * E + e];
    for (int k = 0; k < K; ++k) cnt += topk_idx[(int64_t)n * K + k] == e ? 1.0 : 0.0;
  }
  sums.prob_sum[e] = ps;
  sums.count[e] = cnt;
}

// f_e = share of the N·K assignments routed to e (a constant of the routing decision).
__global__ void router_share_kernel(float* share, const int32_t* topk_idx, int64_t NK, int E) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  int64_t c = 0;
  for (int64_t i = 0; i < NK; ++i) c += topk_idx[i] == e;
  share[e] = (float)((double)c / (double)NK);
}

// soft [N, E] is the sigmoid path's scratch.
__global__ void router_backward_kernel(float* dlogits, const float* dtopk_w, const float* probs,
                                       const int32_t* topk_idx, const float* topk_w, const float* logits, int N,
                                       int E, int K, RouterSpec spec, router_rows::BackwardCoefs c, float* soft) {
  const int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float* g = dtopk_w ? dtopk_w + n * K : nullptr;
  if (spec.scoring == RouterScoring::Sigmoid)
    router_rows::sigmoid_backward_row(dlogits + n * E, g, probs + n * E, topk_idx + n * K, topk_w + n * K,
                                      logits + n * E, E, K, spec, c, soft + n * E);
  else
    router_rows::softmax_backward_row(dlogits + n * E, g, probs + n * E, topk_idx + n * K, topk_w + n * K,
                                      logits + n * E, E, K, spec, c);
}

}  // namespace

void router_forward(cudaStream_t s, float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N, int E,
                    int K, const RouterSpec& spec, const int32_t* forced_topk, float* scratch, RouterSums sums) {
  DeviceScratch<double> zrow(s, (size_t)N);
  if (N > 0)
    router_forward_kernel<<<blocks_for(N, 128), 128, 0, s>>>(probs, topk_idx, topk_w, logits, N, E, K, spec,
                                                             forced_topk, scratch, zrow.get());
  router_sums_kernel<<<blocks_for(E + 1, 128), 128, 0, s>>>(sums, probs, topk_idx, zrow.get(), N, E, K);
}

void router_backward(cudaStream_t s, float* dlogits, const float* dtopk_w, const float* probs,
                     const int32_t* topk_idx, const float* topk_w, const float* logits, int N, int E, int K,
                     const RouterSpec& spec, float aux_scale, float z_scale, float* share) {
  if (!dlogits || N <= 0) return;
  if (aux_scale != 0.0f)
    router_share_kernel<<<blocks_for(E, 128), 128, 0, s>>>(share, topk_idx, (int64_t)N * K, E);
  else  // the softmax path reads f times a zero coefficient: it must be finite
    cuda_check(cudaMemsetAsync(share, 0, sizeof(float) * E, s), "router shares");
  const router_rows::BackwardCoefs c{share, aux_scale, z_scale, aux_scale * (float)E / (float)N,
                                     z_scale * 2.0f / (float)N};
  DeviceScratch<float> soft(s, spec.scoring == RouterScoring::Sigmoid ? (size_t)N * E : 0);
  router_backward_kernel<<<blocks_for(N, 128), 128, 0, s>>>(dlogits, dtopk_w, probs, topk_idx, topk_w, logits, N, E,
                                                            K, spec, c, soft.get());
}

}  // namespace moe::cuda
