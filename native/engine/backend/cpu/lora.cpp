// LoRA forward and backward as GEMMs over a small [N, r] intermediate (sgemm takes the output's row stride, so the
// delta lands directly in a fused projection's part). Dropout multiplies the input by a counter-based mask.
#include "backend/cpu/lora.h"

#include <vector>

#include "backend/cpu/gemm.h"
#include "core/rng.h"

namespace moe::cpu {

namespace {

constexpr uint64_t kLoraDropoutStream = 0x10a4d409;

// d(x): x times the dropout's factors.
std::vector<float> dropped(const float* x, const std::vector<float>& factors) {
  std::vector<float> xd(factors.size());
  for (size_t j = 0; j < factors.size(); ++j) xd[j] = x[j] * factors[j];
  return xd;
}

}  // namespace

std::vector<float> lora_dropout_factors(ThreadPool& tp, int N, int I, const LoraDropoutMask& drop) {
  std::vector<float> f(static_cast<size_t>(N) * I);
  const float keep = 1.0f / (1.0f - drop.p);
  tp.parallel_for(
      static_cast<int64_t>(f.size()),
      [&](int64_t begin, int64_t end, int) {
        for (int64_t j = begin; j < end; ++j)
          f[j] = random_uniform(drop.key, kLoraDropoutStream, static_cast<uint64_t>(j)) > drop.p ? keep : 0.0f;
      },
      4096);
  return f;
}

void lora_forward(ThreadPool& tp, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy, const LoraDropoutMask& drop) {
  if (N == 0) return;
  std::vector<float> xd;
  if (drop.p > 0) {
    xd = dropped(x, lora_dropout_factors(tp, N, I, drop));
    x = xd.data();
  }
  std::vector<float> u(static_cast<size_t>(N) * r);
  sgemm(tp, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.data(), r);
  sgemm(tp, false, true, N, O, r, scale, u.data(), r, B, r, 1.0f, y, ldy);
}

void lora_backward(ThreadPool& tp, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop) {
  if (N == 0) return;
  std::vector<float> factors, xd;
  if (drop.p > 0) {
    factors = lora_dropout_factors(tp, N, I, drop);
    xd = dropped(x, factors);
    x = xd.data();
  }
  std::vector<float> u(static_cast<size_t>(N) * r), du(static_cast<size_t>(N) * r);
  if (dB) {
    sgemm(tp, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.data(), r);
    sgemm(tp, true, false, O, r, N, scale, dy, ldy, u.data(), r, 1.0f, dB, r);
  }
  if (!dA && !dx) return;
  sgemm(tp, false, false, N, r, O, scale, dy, ldy, B, r, 0.0f, du.data(), r);
  if (dA) sgemm(tp, true, false, r, I, N, 1.0f, du.data(), r, x, I, 1.0f, dA, I);
  if (!dx) return;
  if (factors.empty()) {
    sgemm(tp, false, false, N, I, r, 1.0f, du.data(), r, A, I, 1.0f, dx, I);
    return;
  }
  // The input gradient goes back through the mask: d(d(x))/dx = m / (1 - p).
  std::vector<float> dxd(factors.size());
  sgemm(tp, false, false, N, I, r, 1.0f, du.data(), r, A, I, 0.0f, dxd.data(), I);
  for (size_t j = 0; j < factors.size(); ++j) dx[j] += dxd[j] * factors[j];
}

}  // namespace moe::cpu
