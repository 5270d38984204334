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

// forward: dst = R(angle)·src. backward: dst += R(−angle)·src, since the rotation is orthogonal its inverse is
// its transpose. Multiplying by sign = ±1 is exact, so both read as the textbook formulas.
template <bool kBackward>
void rotate_rows(ThreadPool& tp, float* dst, const float* src, int B, int T, int NH, int NKV, int HS, float theta) {
  const RopeTable& tab = rope_table(T, HS, theta);
  const float* cos_t = tab.cos.data();
  const float* sin_t = tab.sin.data();
  const float sign = kBackward ? -1.0f : 1.0f;
  int half = HS / 2, rotated = (NH + NKV) * HS, row = (NH + 2 * NKV) * HS;
  tp.parallel_for((int64_t)B * T, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* c = cos_t + (n % T) * half;
      const float* s = sin_t + (n % T) * half;
      const float* x = src + n * row;
      float* y = dst + n * row;
      for (int h0 = 0; h0 < rotated; h0 += HS) {
        for (int i = 0; i < half; ++i) {
          const float x1 = x[h0 + i], x2 = x[h0 + half + i];
          const float y1 = x1 * c[i] - sign * x2 * s[i], y2 = x2 * c[i] + sign * x1 * s[i];
          if (kBackward) y[h0 + i] += y1, y[h0 + half + i] += y2;
          else y[h0 + i] = y1, y[h0 + half + i] = y2;
        }
      }
      for (int j = rotated; j < row; ++j) y[j] = kBackward ? y[j] + x[j] : x[j];
    }
  });
}

}  // namespace

void rope_forward(ThreadPool& tp, float* out, const float* inp, int B, int T, int NH, int NKV, int HS, float theta) {
  rotate_rows<false>(tp, out, inp, B, T, NH, NKV, HS, theta);
}

void rope_backward(ThreadPool& tp, float* dinp, const float* dout, int B, int T, int NH, int NKV, int HS,
                   float theta) {
  rotate_rows<true>(tp, dinp, dout, B, T, NH, NKV, HS, theta);
}

}  // namespace moe::cpu
