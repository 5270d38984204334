// q/k RMSNorm over packed qkv rows (cpu/qk_norm.h). One block per (token, group), with one more block per token
// copying (or passing the gradient of) the v part; the weight gradients by the deterministic column reduction
// over tokens, each token's groups summed in ascending order.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace moe::cuda {
namespace {

struct Groups {
  int nq, nk, qlen, klen, width;
  __host__ __device__ Groups(int NH, int NKV, int HS, bool per_head)
      : nq(per_head ? NH : 1), nk(per_head ? NKV : 1), qlen(per_head ? HS : NH * HS), klen(per_head ? HS : NKV * HS),
        width((NH + 2 * NKV) * HS) {}
  __host__ __device__ int count() const { return nq + nk; }
  __host__ __device__ int at(int g) const { return g < nq ? g * qlen : nq * qlen + (g - nq) * klen; }
  __host__ __device__ int len(int g) const { return g < nq ? qlen : klen; }
  __host__ __device__ int v_at() const { return nq * qlen + nk * klen; }
};

__global__ void qk_norm_forward_kernel(float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w,
                                       Groups G, float eps) {
  const int64_t n = blockIdx.x;
  const int g = blockIdx.y;
  const float* row = qkv + n * G.width;
  float* o = out + n * G.width;
  if (g == G.count()) {
    for (int i = G.v_at() + threadIdx.x; i < G.width; i += kThreads) o[i] = row[i];
    return;
  }
  const float* x = row + G.at(g);
  const float* w = g < G.nq ? q_w : k_w;
  const int L = G.len(g);
  float s = 0.0f;
  for (int i = threadIdx.x; i < L; i += kThreads) s += x[i] * x[i];
  const float r = 1.0f / sqrtf(block_sum(s) / (float)L + eps);
  for (int i = threadIdx.x; i < L; i += kThreads) o[G.at(g) + i] = x[i] * r * w[i];
  if (threadIdx.x == 0) rstd[n * G.count() + g] = r;
}

__global__ void qk_norm_backward_kernel(float* dqkv, const float* dout, const float* qkv, const float* q_w,
                                        const float* k_w, const float* rstd, Groups G) {
  const int64_t n = blockIdx.x;
  const int g = blockIdx.y;
  float* dx = dqkv + n * G.width;
  const float* drow = dout + n * G.width;
  if (g == G.count()) {
    for (int i = G.v_at() + threadIdx.x; i < G.width; i += kThreads) dx[i] += drow[i];
    return;
  }
  const int at = G.at(g), L = G.len(g);
  const float* x = qkv + n * G.width + at;
  const float* d = drow + at;
  const float* w = g < G.nq ? q_w : k_w;
  const float r = rstd[n * G.count() + g];
  float dot = 0.0f;
  for (int i = threadIdx.x; i < L; i += kThreads) dot += d[i] * w[i] * x[i];
  const float k = r * r * r * block_sum(dot) / (float)L;
  for (int i = threadIdx.x; i < L; i += kThreads) dx[at + i] += r * d[i] * w[i] - x[i] * k;
}

// Σ over the groups [g0, g1) of one token of dout·x·r at offset i of each group.
struct GroupWeightTerm {
  const float *dout, *qkv, *rstd;
  Groups G;
  int g0, g1;
  __device__ float operator()(int n, int i) const {
    float acc = 0.0f;
    for (int g = g0; g < g1; ++g) {
      const int64_t at = (int64_t)n * G.width + G.at(g) + i;
      acc += dout[at] * (qkv[at] * rstd[(int64_t)n * G.count() + g]);
    }
    return acc;
  }
};

}  // namespace

void qk_norm_forward(cudaStream_t s, float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w,
                     int N, int NH, int NKV, int HS, bool per_head, float eps) {
  const Groups G(NH, NKV, HS, per_head);
  if (N > 0) qk_norm_forward_kernel<<<dim3(N, G.count() + 1), kThreads, 0, s>>>(out, rstd, qkv, q_w, k_w, G, eps);
}

void qk_norm_backward(cudaStream_t s, float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                      const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV, int HS,
                      bool per_head) {
  const Groups G(NH, NKV, HS, per_head);
  if (N <= 0) return;
  if (dqkv) qk_norm_backward_kernel<<<dim3(N, G.count() + 1), kThreads, 0, s>>>(dqkv, dout, qkv, q_w, k_w, rstd, G);
  column_reduce(s, dq_w, GroupWeightTerm{dout, qkv, rstd, G, 0, G.nq}, N, G.qlen);
  column_reduce(s, dk_w, GroupWeightTerm{dout, qkv, rstd, G, G.nq, G.count()}, N, G.klen);
}

}  // namespace moe::cuda
