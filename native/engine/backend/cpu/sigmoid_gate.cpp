// Shared-expert sigmoid gate: one scalar gate per token scales that token's row.
#include "backend/cpu/sigmoid_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moe::cpu {
namespace {

int64_t row_grain(int C) { return std::max<int64_t>(1, 16384 / std::max(C, 1)); }

// exp(-g) overflowing to inf for g < -88 still yields the right limit, 0.
float sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

// Dot product with eight fixed lanes: vectorisable, and its rounding depends only on C.
float dot(const float* a, const float* b, int C) {
  float acc[8] = {};
  int c = 0;
  for (; c + 8 <= C; c += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[c + j] * b[c + j];
  for (int j = 0; c < C; ++c, ++j) acc[j] += a[c] * b[c];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

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
          if (dgate_logit) dgate_logit[n] += g * (1.0f - g) * dot(d, s + n * C, C);
          if (ds) {
            float* dst = ds + n * C;
            for (int c = 0; c < C; ++c) dst[c] += g * d[c];
          }
        }
      },
      row_grain(C));
}

}  // namespace moe::cpu
