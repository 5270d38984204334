#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// GELU, tanh approximation (GPT-2's "gelu_new", PyTorch approximate='tanh').
void gelu_forward(ThreadPool& tp, float* out, const float* inp, int64_t n);
void gelu_backward(ThreadPool& tp, float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace moe::cpu
