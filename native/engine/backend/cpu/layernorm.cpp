// LayerNorm. Row statistics use fixed-lane sums (vectorised, partition-independent); dw/db are
// reduced over tokens in ascending order per channel, parallel over channel blocks only.
#include "backend/cpu/layernorm.h"

#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {
constexpr int kChannelBlock = 64;
}  // namespace

void layernorm_forward(ThreadPool& tp, float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C, float eps) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* x = inp + n * C;
      float* o = out + n * C;
      float m = lane_sum(C, [x](int i) { return x[i]; }) / (float)C;
      float var = lane_sum(C, [x, m](int i) { return (x[i] - m) * (x[i] - m); }) / (float)C;
      float r = 1.0f / std::sqrt(var + eps);
      for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * r * w[c] + b[c];
      mean[n] = m;
      rstd[n] = r;
    }
  });
}

// With x̂ = (x - mean)·rstd and g = dout·w:  dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)).
void layernorm_backward(ThreadPool& tp, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
  if (dinp) {
    tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
      for (int64_t n = n0; n < n1; ++n) {
        const float* x = inp + n * C;
        const float* d = dout + n * C;
        float m = mean[n], r = rstd[n];
        float g_mean = lane_sum(C, [=](int i) { return d[i] * w[i]; }) / (float)C;
        float gx_mean = lane_sum(C, [=](int i) { return d[i] * w[i] * ((x[i] - m) * r); }) / (float)C;
        float* dx = dinp + n * C;
        for (int c = 0; c < C; ++c) dx[c] += r * (d[c] * w[c] - g_mean - (x[c] - m) * r * gx_mean);
      }
    });
  }
  if (!dw && !db) return;
  for_each_block(tp, C, kChannelBlock, [=](int64_t c0, int64_t c1) {
    float acc_w[kChannelBlock] = {}, acc_b[kChannelBlock] = {};
    int nc = (int)(c1 - c0);
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C + c0;
      const float* d = dout + n * C + c0;
      float m = mean[n], r = rstd[n];
      for (int c = 0; c < nc; ++c) {
        acc_w[c] += d[c] * ((x[c] - m) * r);
        acc_b[c] += d[c];
      }
    }
    for (int c = 0; c < nc; ++c) {
      if (dw) dw[c0 + c] += acc_w[c];
      if (db) db[c0 + c] += acc_b[c];
    }
  });
}

}  // namespace moe::cpu
