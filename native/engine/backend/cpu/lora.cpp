// LoRA forward and backward as GEMMs over a small [N, r] intermediate (sgemm takes the output's row stride, so the
// delta lands directly in a fused projection's part).
#include "backend/cpu/lora.h"

#include <vector>

#include "backend/cpu/gemm.h"

namespace moe::cpu {

void lora_forward(ThreadPool& tp, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy) {
  if (N == 0) return;
  std::vector<float> u(static_cast<size_t>(N) * r);
  sgemm(tp, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.data(), r);
  sgemm(tp, false, true, N, O, r, scale, u.data(), r, B, r, 1.0f, y, ldy);
}

void lora_backward(ThreadPool& tp, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy) {
  if (N == 0) return;
  std::vector<float> u(static_cast<size_t>(N) * r), du(static_cast<size_t>(N) * r);
  if (dB) {
    sgemm(tp, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.data(), r);
    sgemm(tp, true, false, O, r, N, scale, dy, ldy, u.data(), r, 1.0f, dB, r);
  }
  if (!dA && !dx) return;
  sgemm(tp, false, false, N, r, O, scale, dy, ldy, B, r, 0.0f, du.data(), r);
  if (dA) sgemm(tp, true, false, r, I, N, 1.0f, du.data(), r, x, I, 1.0f, dA, I);
  if (dx) sgemm(tp, false, false, N, I, r, 1.0f, du.data(), r, A, I, 1.0f, dx, I);
}

}  // namespace moe::cpu
