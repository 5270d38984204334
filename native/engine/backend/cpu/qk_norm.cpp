// q/k RMSNorm over packed qkv rows. Each group is normalised like rmsnorm.cpp does a row (fixed-lane sums, so
// the result does not depend on the thread partition); the weight gradients are reduced over tokens in
// ascending order on one thread per weight tensor, so they are deterministic too.
#include "backend/cpu/qk_norm.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {

// The groups of one row: q's then k's, each `len` floats from `at`, with weight w (indexed from 0 per group).
struct Groups {
  int nq, nk, qlen, klen, width;
  Groups(int NH, int NKV, int HS, bool per_head)
      : nq(per_head ? NH : 1), nk(per_head ? NKV : 1), qlen(per_head ? HS : NH * HS), klen(per_head ? HS : NKV * HS),
        width((NH + 2 * NKV) * HS) {}
  int count() const { return nq + nk; }
  int at(int g) const { return g < nq ? g * qlen : nq * qlen + (g - nq) * klen; }
  int len(int g) const { return g < nq ? qlen : klen; }
  int v_at() const { return nq * qlen + nk * klen; }
};

}  // namespace

void qk_norm_forward(ThreadPool& tp, float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w,
                     int N, int NH, int NKV, int HS, bool per_head, float eps) {
  const Groups G(NH, NKV, HS, per_head);
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = qkv + n * G.width;
      float* o = out + n * G.width;
      for (int g = 0; g < G.count(); ++g) {
        const float* x = row + G.at(g);
        const float* w = g < G.nq ? q_w : k_w;
        const int L = G.len(g);
        const float ms = lane_sum(L, [x](int i) { return x[i] * x[i]; }) / (float)L;
        const float r = 1.0f / std::sqrt(ms + eps);
        for (int i = 0; i < L; ++i) o[G.at(g) + i] = x[i] * r * w[i];
        rstd[n * G.count() + g] = r;
      }
      std::memcpy(o + G.v_at(), row + G.v_at(), sizeof(float) * (G.width - G.v_at()));
    }
  });
}

// Per group, out = x·r·w with r = (mean(x²) + eps)^-½:  dx = r·dout·w - x · r³/L · Σ dout·w·x,  dw += dout·x·r.
void qk_norm_backward(ThreadPool& tp, float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                      const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV, int HS,
                      bool per_head) {
  const Groups G(NH, NKV, HS, per_head);
  if (dqkv) {
    tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
      for (int64_t n = n0; n < n1; ++n) {
        const float* row = qkv + n * G.width;
        const float* drow = dout + n * G.width;
        float* dx = dqkv + n * G.width;
        for (int g = 0; g < G.count(); ++g) {
          const int at = G.at(g), L = G.len(g);
          const float* x = row + at;
          const float* d = drow + at;
          const float* w = g < G.nq ? q_w : k_w;
          const float r = rstd[n * G.count() + g];
          const float dot = lane_sum(L, [=](int i) { return d[i] * w[i] * x[i]; });
          const float k = r * r * r * dot / (float)L;
          for (int i = 0; i < L; ++i) dx[at + i] += r * d[i] * w[i] - x[i] * k;
        }
        for (int i = G.v_at(); i < G.width; ++i) dx[i] += drow[i];
      }
    });
  }
  // dq_w on one task, dk_w on the other; each sums tokens (and heads) in ascending order.
  float* dws[2] = {dq_w, dk_w};
  tp.parallel_for(2, [=](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      float* dw = dws[t];
      if (!dw) continue;
      const int g0 = t == 0 ? 0 : G.nq, g1 = t == 0 ? G.nq : G.count();
      for (int64_t n = 0; n < N; ++n)
        for (int g = g0; g < g1; ++g) {
          const int at = G.at(g), L = G.len(g);
          const float* x = qkv + n * G.width + at;
          const float* d = dout + n * G.width + at;
          const float r = rstd[n * G.count() + g];
          for (int i = 0; i < L; ++i) dw[i] += d[i] * (x[i] * r);
        }
    }
  });
}

}  // namespace moe::cpu
