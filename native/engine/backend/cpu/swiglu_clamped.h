#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

// gpt-oss's clamped SwiGLU over gate_up [N, 2F] (gate in columns [0, F), up in [F, 2F), as every gated FFN here):
//   g = min(gate, limit) ; u = clamp(up, -limit, limit) ; out[N, F] = (u + 1) · g · σ(alpha · g)
// Backward passes a gradient through a clamp only where its input is inside the bounds (bounds included), as
// torch.clamp does; beyond them it is exactly zero.
void swiglu_clamped_forward(ThreadPool& tp, float* out, const float* gate_up, int N, int F, float alpha, float limit);
// dgate_up += ∂/∂gate_up of Σ dout·out.
void swiglu_clamped_backward(ThreadPool& tp, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                             float alpha, float limit);

}  // namespace moe::cpu
