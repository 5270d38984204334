// One feed-forward block (dense MLP, expert, shared expert or PR-MoE residual):
//   gpt-moe: y = proj(gelu(fc(x)))      mixtral: y = down(silu(gate(x)) · up(x))
#pragma once
#include "backend/backend.h"
#include "model/features.h"
#include "model/params.h"

namespace moe {

struct FfnShape {
  int C = 0, F = 0;
  FfnActivation activation = FfnActivation::Gelu;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;  // SwigluClamped only
  bool gated() const { return activation == FfnActivation::Swiglu || activation == FfnActivation::SwigluClamped; }
  int in_rows() const { return gated() ? 2 * F : F; }  // width of the in-projection's output
};

// h [N, in_rows] and act [N, F] are saved for backward.
// The first half of ffn_forward: the in-projection and activation (also what memory reuse S3/S4 recompute).
void ffn_hidden_forward(Backend& be, const FfnParams& p, const FfnShape& s, const float* x, float* h, float* act,
                        int N);
void ffn_forward(Backend& be, const FfnParams& p, const FfnShape& s, float* y, const float* x, float* h, float* act,
                 int N);
// dx += ∂/∂x, grads += ∂/∂params. dh [N, in_rows] and dact [N, F] are scratch.
void ffn_backward(Backend& be, const FfnParams& p, const FfnParams& grads, const FfnShape& s, float* dx,
                  const float* dy, const float* x, const float* h, const float* act, float* dh, float* dact, int N);

}  // namespace moe
