// A linear layer on its fp32 weight, or on the weight's bf16 copy when the model computes in bf16 (w_bf16 set),
// and the LoRA adapter on it.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "core/rng.h"
#include "model/params.h"

namespace moe {

inline void linear_forward(Backend& be, float* y, const float* x, const float* w, const uint16_t* w_bf16,
                           const float* b, int N, int I, int O) {
  if (w_bf16) be.matmul_forward_bf16(y, x, w_bf16, b, N, I, O);
  else be.matmul_forward(y, x, w, b, N, I, O);
}

inline void linear_backward(Backend& be, float* dx, float* dw, float* db, const float* dy, const float* x,
                            const float* w, const uint16_t* w_bf16, int N, int I, int O) {
  if (w_bf16) be.matmul_backward_bf16(dx, dw, db, dy, x, w_bf16, N, I, O);
  else be.matmul_backward(dx, dw, db, dy, x, w, N, I, O);
}

// The adapter's dropout mask for this step (p 0 outside a training step).
inline LoraDropoutMask lora_dropout_mask(const LoraParams& l) {
  if (!l.dropout || !l.dropout->active || l.dropout->p == 0) return {};
  return {l.dropout->p, random_u64(l.dropout->seed, l.dropout->draw, l.stream)};
}

// The adapter restricted to its output rows from `row0` on: the same A (and dropout mask), B's later rows (a linear
// the engine computes as two products, like latent attention's kv_a).
inline LoraParams lora_rows_from(const LoraParams& l, int row0) {
  LoraParams t = l;
  if (t.B) t.B += (size_t)row0 * t.r;
  return t;
}

// The linear's LoRA adapter, if it has one (l.A set): y's O columns (rows ldy apart) += l.scale·B·A·d(x).
inline void lora_forward(Backend& be, const LoraParams& l, float* y, const float* x, int N, int I, int O, int ldy) {
  if (l.A) be.lora_forward(y, x, l.A, l.B, N, I, O, l.r, l.scale, ldy, lora_dropout_mask(l));
}

// dx += its input gradient; g's A and B (null when frozen) += theirs.
inline void lora_backward(Backend& be, const LoraParams& l, const LoraParams& g, float* dx, const float* dy,
                          const float* x, int N, int I, int O, int ldy) {
  if (l.A) be.lora_backward(dx, g.A, g.B, dy, x, l.A, l.B, N, I, O, l.r, l.scale, ldy, lora_dropout_mask(l));
}

}  // namespace moe
