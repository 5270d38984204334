// A LoRA adapter on a linear layer's output rows: with u = d(x)·Aᵀ,
//   y[n, 0..O) += scale · u[n]·Bᵀ             x [N, I], A [r, I], B [O, r], y rows ldy apart (ldy >= O)
// so it adds onto the base projection's output in place, also onto a part of a fused one (q, k or v of qkv;
// gate or up of gate_up). d is the dropout on the adapter's input only (PEFT's lora_dropout; identity when
// drop.p is 0, and then nothing is copied): d(x) = m ⊙ x / (1 - p) with the mask m of types.h's
// LoraDropoutMask. Backward rebuilds d(x) and u (r is small) rather than saving them:
//   dB += scale · dyᵀ·u ; du = scale · dy·B ; dA += duᵀ·d(x) ; dx += m ⊙ (du·A) / (1 - p)   (dx, dA, dB may be null)
#pragma once
#include <vector>

#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

void lora_forward(ThreadPool& tp, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy, const LoraDropoutMask& drop = {});
void lora_backward(ThreadPool& tp, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop = {});

// The dropout's factor per element of an [N, I] input: 1/(1 - p) where kept, 0 where dropped.
std::vector<float> lora_dropout_factors(ThreadPool& tp, int N, int I, const LoraDropoutMask& drop);

}  // namespace moe::cpu
