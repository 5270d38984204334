// GELU, tanh approximation, written as x·σ(2u) (since ½(1 + tanh u) = σ(2u)), which avoids the
// cancellation of 1 + tanh u for negative u and vectorises through vexp.
#include "backend/cpu/gelu.h"

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {
constexpr int64_t kBlock = 4096;  // fixed blocks: the same code path per element for any thread count
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(ThreadPool& tp, float* out, const float* inp, int64_t n) {
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float x = inp[i];
      float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      out[i] = x * vsigmoid(2.0f * u);
    }
  });
}

// d/dx x·σ(2u) = σ + x·2σ(1-σ)·u',  u' = √(2/π)(1 + 3·0.044715·x²)
void gelu_backward(ThreadPool& tp, float* dinp, const float* inp, const float* dout, int64_t n) {
  for_each_block(tp, n, kBlock, [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float x = inp[i];
      float x2 = x * x;
      float u = kSqrt2OverPi * (x + kCubic * x2 * x);
      float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x2);
      float s = vsigmoid(2.0f * u);
      dinp[i] += dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    }
  });
}

}  // namespace moe::cpu
