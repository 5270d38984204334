// Clamp to [-limit, limit] (OLMoE's clip_qkv on q, k and v). The gradient passes where -limit ≤ x ≤ limit
// (the bounds included, as torch's clamp backward does) and is zero where the value was clamped.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

void clamp_forward(ThreadPool& tp, float* out, const float* inp, int64_t n, float limit);
// Accumulates: dinp += dout where the input was not clamped.
void clamp_backward(ThreadPool& tp, float* dinp, const float* dout, const float* inp, int64_t n, float limit);

}  // namespace moe::cpu
