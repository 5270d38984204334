#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// out = a + b (residual connections).
void add_forward(ThreadPool& tp, float* out, const float* a, const float* b, int64_t n);
// dst += src (the backward of add, and of any fan-out).
void accumulate(ThreadPool& tp, float* dst, const float* src, int64_t n);

}  // namespace moe::cpu
