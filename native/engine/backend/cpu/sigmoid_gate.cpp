// Shared-expert sigmoid gate: one scalar gate per token scales that token's row.
#include "backend/cpu/sigmoid_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {

int64_t row_grain(int C) { return std::max<int64_t>(1, 16384 / std::max(C, 1)); }

// exp(-g) overflowing to inf for g < -88 still yields the right limit, 0.
float sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

}  // namespace

void sigmoid_gate_forward(ThreadPool& tp, float* out, const float* gate_logit, const float* s, int N, int C) {
  tp.parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          const float g = sigmoid(gate_logit[n]);
          const float* src = s + n * C;
          float* dst = out + n * C;
          for (int c = 0; c < C; ++c) dst[c] = g * src[c];
        }
      },
      row_grain(C));
}

void sigmoid_gate_backward(ThreadPool& tp, float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                           const float* s, int N, int C) {
  if (!dgate_logit && !ds) return;
  tp.parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          const float g = sigmoid(gate_logit[n]);
          const float* d = dout + n * C;
          if (dgate_logit) dgate_logit[n] += g * (1.0f - g) * lane_sum(C, [&](int c) { return d[c] * s[n * C + c]; });
          if (ds) {
            float* dst = ds + n * C;
            for (int c = 0; c < C; ++c) dst[c] += g * d[c];
          }
        }
      },
      row_grain(C));
}

}  // namespace moe::cpu
