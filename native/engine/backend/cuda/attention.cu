// Causal grouped-query attention (cpu/attention.h), correctness first: one warp per query row (forward, and the
// query gradient) or per key row (key and value gradients), walking its keys or queries in ascending order with
// an online softmax. Every gradient element has one owning warp, so there are no atomics and results are
// deterministic; each head's HS values sit in registers, R per lane. The scores' dot products are warp sums
// (a fixed xor tree) rather than the CPU's sgemm order, so results agree with the CPU's to fp32 rounding.
// A tiled (flash-style) kernel is the obvious next step for speed.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace moe::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

struct Shape {
  int B, T, NH, NKV, HS, row, out_row, group, window;
  float scale;
  __device__ int64_t q(int b, int t, int h) const { return ((int64_t)b * T + t) * row + (int64_t)h * HS; }
  __device__ int64_t k(int b, int t, int g) const { return ((int64_t)b * T + t) * row + (int64_t)(NH + g) * HS; }
  __device__ int64_t v(int b, int t, int g) const {
    return ((int64_t)b * T + t) * row + (int64_t)(NH + NKV + g) * HS;
  }
  __device__ int64_t o(int b, int t, int h) const { return ((int64_t)b * T + t) * out_row + (int64_t)h * HS; }
  __device__ int first_key(int t) const { return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0; }
  __device__ int last_query(int j) const { return window > 0 && j + window - 1 < T - 1 ? j + window - 1 : T - 1; }
};

template <int R>
__device__ void load(float (&dst)[R], const float* src, int HS) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) dst[r] = lane + 32 * r < HS ? src[lane + 32 * r] : 0.0f;
}

template <int R>
__device__ float dot(const float (&a)[R], const float* b, int HS) {
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane + 32 * r < HS) s += a[r] * b[lane + 32 * r];
  return warp_sum(s);
}

// Warp per (b, h, t): out and lse (over the visible keys and the sink, when there is one).
template <int R>
__global__ void attention_forward_kernel(float* out, float* lse, const float* qkv, const float* sinks, Shape L) {
  const int64_t w = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (w >= (int64_t)L.B * L.NH * L.T) return;
  const int t = (int)(w % L.T), h = (int)((w / L.T) % L.NH), b = (int)(w / ((int64_t)L.T * L.NH));
  const int g = h / L.group, lane = threadIdx.x % 32;
  float q[R], acc[R];
  load(q, qkv + L.q(b, t, h), L.HS);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  float m = sinks ? sinks[h] : -INFINITY, l = sinks ? 1.0f : 0.0f;
  for (int j = L.first_key(t); j <= t; ++j) {
    const float s = dot(q, qkv + L.k(b, j, g), L.HS) * L.scale;
    const float m_new = fmaxf(m, s);
    const float corr = m == -INFINITY ? 0.0f : expf(m - m_new), p = expf(s - m_new);
    const float* v = qkv + L.v(b, j, g);
    l = l * corr + p;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = acc[r] * corr + (lane + 32 * r < L.HS ? p * v[lane + 32 * r] : 0.0f);
    m = m_new;
  }
  float* o = out + L.o(b, t, h);
  const float inv = 1.0f / l;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane + 32 * r < L.HS) o[lane + 32 * r] = acc[r] * inv;
  if (lane == 0) lse[((int64_t)b * L.NH + h) * L.T + t] = m + logf(l);
}

// Warp per (b, h, t): D = dO·O (saved for the key pass and the sinks) and dQ += Σ_j dS_j·K_j.
template <int R>
__global__ void attention_dq_kernel(float* dqkv, float* Dbuf, const float* dout, const float* qkv, const float* out,
                                    const float* lse, Shape L) {
  const int64_t w = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (w >= (int64_t)L.B * L.NH * L.T) return;
  const int t = (int)(w % L.T), h = (int)((w / L.T) % L.NH), b = (int)(w / ((int64_t)L.T * L.NH));
  const int g = h / L.group, lane = threadIdx.x % 32;
  float q[R], d[R], dq[R];
  load(q, qkv + L.q(b, t, h), L.HS);
  load(d, dout + L.o(b, t, h), L.HS);
#pragma unroll
  for (int r = 0; r < R; ++r) dq[r] = 0.0f;
  const float D = dot(d, out + L.o(b, t, h), L.HS);
  const float row_lse = lse[((int64_t)b * L.NH + h) * L.T + t];
  for (int j = L.first_key(t); j <= t; ++j) {
    const float* k = qkv + L.k(b, j, g);
    const float p = expf(dot(q, k, L.HS) * L.scale - row_lse);
    const float ds = p * (dot(d, qkv + L.v(b, j, g), L.HS) - D) * L.scale;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane + 32 * r < L.HS) dq[r] += ds * k[lane + 32 * r];
  }
  float* dst = dqkv + L.q(b, t, h);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane + 32 * r < L.HS) dst[lane + 32 * r] += dq[r];
  if (lane == 0) Dbuf[((int64_t)b * L.NH + h) * L.T + t] = D;
}

// Warp per (b, kv head g, key j): dK += Σ dS·Q and dV += Σ P·dO over the group's query heads in ascending order,
// each over the queries that see key j in ascending order.
template <int R>
__global__ void attention_dkv_kernel(float* dqkv, const float* Dbuf, const float* dout, const float* qkv,
                                     const float* lse, Shape L) {
  const int64_t w = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (w >= (int64_t)L.B * L.NKV * L.T) return;
  const int j = (int)(w % L.T), g = (int)((w / L.T) % L.NKV), b = (int)(w / ((int64_t)L.T * L.NKV));
  const int lane = threadIdx.x % 32;
  float k[R], v[R], dk[R], dv[R];
  load(k, qkv + L.k(b, j, g), L.HS);
  load(v, qkv + L.v(b, j, g), L.HS);
#pragma unroll
  for (int r = 0; r < R; ++r) dk[r] = dv[r] = 0.0f;
  for (int h = g * L.group; h < (g + 1) * L.group; ++h) {
    const int64_t bh = ((int64_t)b * L.NH + h) * L.T;
    for (int t = j; t <= L.last_query(j); ++t) {
      const float* q = qkv + L.q(b, t, h);
      const float* d = dout + L.o(b, t, h);
      const float p = expf(dot(k, q, L.HS) * L.scale - lse[bh + t]);
      const float ds = p * (dot(v, d, L.HS) - Dbuf[bh + t]) * L.scale;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (lane + 32 * r < L.HS) {
          dk[r] += ds * q[lane + 32 * r];
          dv[r] += p * d[lane + 32 * r];
        }
    }
  }
  float* dkd = dqkv + L.k(b, j, g);
  float* dvd = dqkv + L.v(b, j, g);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane + 32 * r < L.HS) {
      dkd[lane + 32 * r] += dk[r];
      dvd[lane + 32 * r] += dv[r];
    }
}

// Thread per head: dsinks[h] += Σ_b Σ_t -exp(sink - lse)·D, each (b, h) summed over t in double, then over b in order.
__global__ void attention_dsinks_kernel(float* dsinks, const float* sinks, const float* lse, const float* Dbuf,
                                        Shape L) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= L.NH) return;
  double sum = 0.0;
  for (int b = 0; b < L.B; ++b) {
    double bh = 0.0;
    const int64_t at = ((int64_t)b * L.NH + h) * L.T;
    for (int t = 0; t < L.T; ++t) bh -= (double)expf(sinks[h] - lse[at + t]) * Dbuf[at + t];
    sum += bh;
  }
  dsinks[h] += (float)sum;
}

Shape shape(int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec) {
  check(HS > 0 && HS <= kMaxAttentionHead && NKV > 0 && NH % NKV == 0,
        "cuda attention: head size " + std::to_string(HS) + " (at most " + std::to_string(kMaxAttentionHead) +
            ") and NH divisible by NKV");
  return {B, T, NH, NKV, HS, (NH + 2 * NKV) * HS, NH * HS, NH / NKV, spec.window, 1.0f / sqrtf((float)HS)};
}

// Calls f with the per-lane register count for HS as a compile-time constant.
template <class F>
void with_lanes(int HS, F&& f) {
  if (HS <= 64) f(std::integral_constant<int, 2>{});
  else if (HS <= 128) f(std::integral_constant<int, 4>{});
  else if (HS <= 256) f(std::integral_constant<int, 8>{});
  else f(std::integral_constant<int, 16>{});
}

unsigned warp_blocks(int64_t warps) { return (unsigned)((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

void attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                       const AttentionSpec& spec) {
  const Shape L = shape(B, T, NH, NKV, HS, spec);
  const int64_t warps = (int64_t)B * NH * T;
  if (warps == 0) return;
  with_lanes(HS, [&](auto R) {
    attention_forward_kernel<R()><<<warp_blocks(warps), kWarpsPerBlock * 32, 0, s>>>(out, lse, qkv, spec.sinks, L);
  });
}

void attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec) {
  const Shape L = shape(B, T, NH, NKV, HS, spec);
  const int64_t q_warps = (int64_t)B * NH * T, kv_warps = (int64_t)B * NKV * T;
  if (q_warps == 0) return;
  DeviceScratch<float> D(s, (size_t)q_warps);
  with_lanes(HS, [&](auto R) {
    attention_dq_kernel<R()><<<warp_blocks(q_warps), kWarpsPerBlock * 32, 0, s>>>(dqkv, D.get(), dout, qkv, out, lse,
                                                                                  L);
    attention_dkv_kernel<R()><<<warp_blocks(kv_warps), kWarpsPerBlock * 32, 0, s>>>(dqkv, D.get(), dout, qkv, lse, L);
  });
  if (spec.sinks && spec.dsinks)  // null dsinks: the sinks are frozen
    attention_dsinks_kernel<<<blocks_for(NH, 64), 64, 0, s>>>(spec.dsinks, spec.sinks, lse, D.get(), L);
}

}  // namespace moe::cuda
