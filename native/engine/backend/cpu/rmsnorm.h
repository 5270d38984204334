#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

// out[N,C] = inp · rstd · w, rstd = 1/sqrt(mean(inp²) + eps); rstd[N] saved for backward.
void rmsnorm_forward(ThreadPool& tp, float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps);
void rmsnorm_backward(ThreadPool& tp, float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int N, int C);

}  // namespace moe::cpu
