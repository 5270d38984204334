// Rotary position embedding (RopeSpec, backend/types.h). The cos/sin table for (T, dim, frequencies, scale) is
// built once per calling thread and reused across calls (every layer of a step shares it); angles are computed in
// double so long positions keep full float accuracy.
#include "backend/cpu/rope.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace moe::cpu {
namespace {

struct RopeTable {
  int T = 0, dim = 0;
  double scale = 0.0;
  std::vector<double> inv_freq;  // [dim/2]
  std::vector<float> cos, sin;   // [T, dim/2]
};

const RopeTable& rope_table(int T, const RopeSpec& spec) {
  thread_local RopeTable table;
  const int half = spec.dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i)
    inv_freq[i] = spec.inv_freq ? spec.inv_freq[i] : std::pow((double)spec.theta, -2.0 * i / spec.dim);
  if (table.T == T && table.dim == spec.dim && table.scale == spec.scale && table.inv_freq == inv_freq) return table;
  table.cos.resize((size_t)T * half);
  table.sin.resize((size_t)T * half);
  for (int i = 0; i < half; ++i) {
    for (int t = 0; t < T; ++t) {
      double angle = t * inv_freq[i];
      // A scale of 1 multiplies nothing, so plain rope's table is what it always was.
      table.cos[(size_t)t * half + i] = (float)(spec.scale == 1.0 ? std::cos(angle) : std::cos(angle) * spec.scale);
      table.sin[(size_t)t * half + i] = (float)(spec.scale == 1.0 ? std::sin(angle) : std::sin(angle) * spec.scale);
    }
  }
  table.T = T;
  table.dim = spec.dim;
  table.scale = spec.scale;
  table.inv_freq = std::move(inv_freq);
  return table;
}

// forward: dst = R(angle)·src. backward: dst += R(−angle)·src, since the rotation (times scale) has its transpose
// as the adjoint. Multiplying by sign = ±1 is exact, so both read as the textbook formulas.
template <bool kBackward>
void rotate_rows(ThreadPool& tp, float* dst, const float* src, int B, int T, const RopeSpec& spec) {
  const RopeTable& tab = rope_table(T, spec);
  const float* cos_t = tab.cos.data();
  const float* sin_t = tab.sin.data();
  const float sign = kBackward ? -1.0f : 1.0f;
  const int dim = spec.dim, half = dim / 2, rotated = spec.heads * dim, row = spec.row;
  // Pair i's members sit at (i, i + half) or (2i, 2i + 1).
  const int first_step = spec.layout == RopeLayout::Interleaved ? 2 : 1;
  const int second_off = spec.layout == RopeLayout::Interleaved ? 1 : half;
  tp.parallel_for((int64_t)B * T, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* c = cos_t + (n % T) * half;
      const float* s = sin_t + (n % T) * half;
      const float* x = src + n * row;
      float* y = dst + n * row;
      for (int h0 = 0; h0 < rotated; h0 += dim) {
        for (int i = 0; i < half; ++i) {
          const int a = h0 + i * first_step, b = a + second_off;
          const float x1 = x[a], x2 = x[b];
          const float y1 = x1 * c[i] - sign * x2 * s[i], y2 = x2 * c[i] + sign * x1 * s[i];
          if (kBackward) y[a] += y1, y[b] += y2;
          else y[a] = y1, y[b] = y2;
        }
      }
      for (int j = rotated; j < row; ++j) y[j] = kBackward ? y[j] + x[j] : x[j];
    }
  });
}

}  // namespace

void rope_forward(ThreadPool& tp, float* out, const float* inp, int B, int T, const RopeSpec& spec) {
  rotate_rows<false>(tp, out, inp, B, T, spec);
}

void rope_backward(ThreadPool& tp, float* dinp, const float* dout, int B, int T, const RopeSpec& spec) {
  rotate_rows<true>(tp, dinp, dout, B, T, spec);
}

}  // namespace moe::cpu
