// Rotary position embedding (rotate-half convention) on the fused qkv rows. The cos/sin table for
// (T, HS, θ) is built once per calling thread and reused across calls (every layer of a step
// shares it); angles are computed in double so long positions keep full float accuracy.
#include "backend/cpu/rope.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace moe::cpu {
namespace {

struct RopeTable {
  int T = 0, HS = 0;
  float theta = 0.0f;
  std::vector<float> cos, sin;  // [T, HS/2]
};

const RopeTable& rope_table(int T, int HS, float theta) {
  thread_local RopeTable table;
  if (table.T == T && table.HS == HS && table.theta == theta) return table;
  int half = HS / 2;
  table.cos.resize((size_t)T * half);
  table.sin.resize((size_t)T * half);
  for (int i = 0; i < half; ++i) {
    double inv_freq = std::pow((double)theta, -2.0 * i / HS);
    for (int t = 0; t < T; ++t) {
      double angle = t * inv_freq;
      table.cos[(size_t)t * half + i] = (float)std::cos(angle);
      table.sin[(size_t)t * half + i] = (float)std::sin(angle);
    }
  }
  table.T = T;
  table.HS = HS;
  table.theta = theta;
  return table;
}

}  // namespace

void rope_forward(ThreadPool& tp, float* out, const float* inp, int B, int T, int NH, int NKV, int HS, float theta) {
  const RopeTable& tab = rope_table(T, HS, theta);
  const float* cos_t = tab.cos.data();
  const float* sin_t = tab.sin.data();
  int half = HS / 2, rotated = (NH + NKV) * HS, row = (NH + 2 * NKV) * HS;
  tp.parallel_for((int64_t)B * T, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* c = cos_t + (n % T) * half;
      const float* s = sin_t + (n % T) * half;
      const float* x = inp + n * row;
      float* y = out + n * row;
      for (int h0 = 0; h0 < rotated; h0 += HS) {
        for (int i = 0; i < half; ++i) {
          float x1 = x[h0 + i], x2 = x[h0 + half + i];
          y[h0 + i] = x1 * c[i] - x2 * s[i];
          y[h0 + half + i] = x2 * c[i] + x1 * s[i];
        }
      }
      for (int j = rotated; j < row; ++j) y[j] = x[j];
    }
  });
}

// The rotation is orthogonal, so its backward applies the inverse rotation (angle -t·θ^(-2i/HS)).
void rope_backward(ThreadPool& tp, float* dinp, const float* dout, int B, int T, int NH, int NKV, int HS,
                   float theta) {
  const RopeTable& tab = rope_table(T, HS, theta);
  const float* cos_t = tab.cos.data();
  const float* sin_t = tab.sin.data();
  int half = HS / 2, rotated = (NH + NKV) * HS, row = (NH + 2 * NKV) * HS;
  tp.parallel_for((int64_t)B * T, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* c = cos_t + (n % T) * half;
      const float* s = sin_t + (n % T) * half;
      const float* dy = dout + n * row;
      float* dx = dinp + n * row;
      for (int h0 = 0; h0 < rotated; h0 += HS) {
        for (int i = 0; i < half; ++i) {
          float g1 = dy[h0 + i], g2 = dy[h0 + half + i];
          dx[h0 + i] += g1 * c[i] + g2 * s[i];
          dx[h0 + half + i] += g2 * c[i] - g1 * s[i];
        }
      }
      for (int j = rotated; j < row; ++j) dx[j] += dy[j];
    }
  });
}

}  // namespace moe::cpu
