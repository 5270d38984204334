// Clamped SwiGLU (gpt-oss experts); rows are independent, so parallel over N.
#include "backend/cpu/swiglu_clamped.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moe::cpu {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void swiglu_clamped_forward(ThreadPool& tp, float* out, const float* gate_up, int N, int F, float alpha, float limit) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* gate = gate_up + n * 2 * F;
      const float* up = gate + F;
      float* o = out + n * F;
      for (int f = 0; f < F; ++f) {
        const float g = std::min(gate[f], limit), u = std::clamp(up[f], -limit, limit);
        o[f] = (u + 1.0f) * (g * sigmoid(alpha * g));
      }
    }
  });
}

// d/dg [g·σ(αg)] = σ(αg) + αg·σ(αg)·(1 - σ(αg)).
void swiglu_clamped_backward(ThreadPool& tp, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                             float alpha, float limit) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* gate = gate_up + n * 2 * F;
      const float* up = gate + F;
      float* dgate = dgate_up + n * 2 * F;
      float* dup = dgate + F;
      const float* d = dout + n * F;
      for (int f = 0; f < F; ++f) {
        const float g = std::min(gate[f], limit), u = std::clamp(up[f], -limit, limit);
        const float s = sigmoid(alpha * g), glu = g * s;
        if (gate[f] <= limit) dgate[f] += d[f] * (u + 1.0f) * (s + alpha * g * s * (1.0f - s));
        if (up[f] >= -limit && up[f] <= limit) dup[f] += d[f] * glu;
      }
    }
  });
}

}  // namespace moe::cpu
