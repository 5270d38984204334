// RMSNorm. Row statistics use fixed-lane sums (vectorised, partition-independent); dw is reduced
// over tokens in ascending order per channel, parallel over channel blocks only.
#include "backend/cpu/rmsnorm.h"

#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {
constexpr int kChannelBlock = 64;
}  // namespace

void rmsnorm_forward(ThreadPool& tp, float* out, float* rstd, const float* inp, const float* w, int N, int C,
                     float eps) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* x = inp + n * C;
      float* o = out + n * C;
      float ms = lane_sum(C, [x](int i) { return x[i] * x[i]; }) / (float)C;
      float r = 1.0f / std::sqrt(ms + eps);
      for (int c = 0; c < C; ++c) o[c] = x[c] * r * w[c];
      rstd[n] = r;
    }
  });
}

// out = x·r·w with r = (mean(x²) + eps)^-½:  dx = r·dout·w - x · r³/C · Σ dout·w·x.
void rmsnorm_backward(ThreadPool& tp, float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int N, int C) {
  if (dinp) {
    tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
      for (int64_t n = n0; n < n1; ++n) {
        const float* x = inp + n * C;
        const float* d = dout + n * C;
        float r = rstd[n];
        float dot = lane_sum(C, [=](int i) { return d[i] * w[i] * x[i]; });
        float k = r * r * r * dot / (float)C;
        float* dx = dinp + n * C;
        for (int c = 0; c < C; ++c) dx[c] += r * d[c] * w[c] - x[c] * k;
      }
    });
  }
  if (!dw) return;
  for_each_block(tp, C, kChannelBlock, [=](int64_t c0, int64_t c1) {
    float acc[kChannelBlock] = {};
    int nc = (int)(c1 - c0);
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C + c0;
      const float* d = dout + n * C + c0;
      float r = rstd[n];
      for (int c = 0; c < nc; ++c) acc[c] += d[c] * (x[c] * r);
    }
    for (int c = 0; c < nc; ++c) dw[c0 + c] += acc[c];
  });
}

}  // namespace moe::cpu
