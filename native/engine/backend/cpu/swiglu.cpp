// SwiGLU: out = silu(gate)·up with silu(g) = g·σ(g); rows are independent, so parallel over N.
#include "backend/cpu/swiglu.h"

#include <cstdint>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {

void swiglu_forward(ThreadPool& tp, float* out, const float* gate_up, int N, int F) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* g = gate_up + n * 2 * F;
      const float* u = g + F;
      float* o = out + n * F;
      for (int f = 0; f < F; ++f) o[f] = g[f] * vsigmoid(g[f]) * u[f];
    }
  });
}

// d silu(g)/dg = σ(g)·(1 + g·(1 - σ(g)))
void swiglu_backward(ThreadPool& tp, float* dgate_up, const float* dout, const float* gate_up, int N, int F) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* g = gate_up + n * 2 * F;
      const float* u = g + F;
      const float* d = dout + n * F;
      float* dg = dgate_up + n * 2 * F;
      float* du = dg + F;
      for (int f = 0; f < F; ++f) {
        float s = vsigmoid(g[f]);
        dg[f] += d[f] * u[f] * s * (1.0f + g[f] * (1.0f - s));
        du[f] += d[f] * g[f] * s;
      }
    }
  });
}

}  // namespace moe::cpu
