// The weight gradient dW = dyᵀ·x runs in bf16 too (both operands rounded while packing): it is a third of the
// layer's flops, as PyTorch autocast does, and its fp32 accumulation keeps the error at bf16's input rounding
// (relative 2^-9 per term, averaging out over the tokens) rather than growing with N. It accumulates into the fp32
// gradient, which the fp32 optimizer consumes. The bias gradient is the fp32 one of matmul.h.
#include "backend/cpu/matmul_bf16.h"

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/matmul.h"

namespace moe::cpu {

void matmul_forward_bf16(ThreadPool& tp, float* y, const float* x, const uint16_t* w, const uint32_t* w_packed,
                         const float* b, int N, int I, int O) {
  if (b) {
    // Seed y with the bias and let sgemm_bf16 add x·wᵀ (beta = 1), as matmul_forward does.
    tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
      for (int64_t n = n0; n < n1; ++n)
        for (int o = 0; o < O; ++o) y[n * O + o] = b[o];
    });
  }
  if (w_packed) sgemm_bf16_packed(tp, false, N, O, I, 1.0f, x, I, w_packed, b ? 1.0f : 0.0f, y, O);
  else sgemm_bf16(tp, false, true, N, O, I, 1.0f, x, I, w, I, b ? 1.0f : 0.0f, y, O);
}

void matmul_backward_bf16(ThreadPool& tp, float* dx, float* dw, float* db, const float* dy, const float* x,
                          const uint16_t* w, const uint32_t* w_packed, int N, int I, int O, bool write_dx) {
  const float dx_beta = write_dx ? 0.0f : 1.0f;
  if (dx && w_packed) sgemm_bf16_packed(tp, false, N, I, O, 1.0f, dy, O, w_packed, dx_beta, dx, I);
  else if (dx) sgemm_bf16(tp, false, false, N, I, O, 1.0f, dy, O, w, I, dx_beta, dx, I);
  if (dw) sgemm_bf16(tp, true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
  if (db) matmul_backward(tp, nullptr, nullptr, db, dy, nullptr, nullptr, N, I, O);
}

}  // namespace moe::cpu
