#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

// gate_up [N, 2F]: gate in columns [0, F), up in [F, 2F). out[N,F] = silu(gate) · up.
void swiglu_forward(ThreadPool& tp, float* out, const float* gate_up, int N, int F);
// dgate_up += the gradient; write: dgate_up = the gradient, what it held ignored.
void swiglu_backward(ThreadPool& tp, float* dgate_up, const float* dout, const float* gate_up, int N, int F,
                     bool write = false);

}  // namespace moe::cpu
