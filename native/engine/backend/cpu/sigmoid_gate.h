// Qwen2-MoE's shared-expert gate: out[n,:] = sigmoid(gate_logit[n]) · s[n,:].
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void sigmoid_gate_forward(ThreadPool& tp, float* out, const float* gate_logit, const float* s, int N, int C);
void sigmoid_gate_backward(ThreadPool& tp, float* dgate_logit, float* ds, const float* dout, const float* gate_logit,
                           const float* s, int N, int C);

}  // namespace moe::cpu
