// A LoRA adapter on a linear layer's output rows: with u = x·Aᵀ,
//   y[n, 0..O) += scale · u[n]·Bᵀ             x [N, I], A [r, I], B [O, r], y rows ldy apart (ldy >= O)
// so it adds onto the base projection's output in place, also onto a part of a fused one (q, k or v of qkv;
// gate or up of gate_up). Backward recomputes u (r is small) rather than saving it:
//   dB += scale · dyᵀ·u ; du = scale · dy·B ; dA += duᵀ·x ; dx += du·A      (dx, dA, dB may each be null)
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void lora_forward(ThreadPool& tp, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy);
void lora_backward(ThreadPool& tp, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy);

}  // namespace moe::cpu
