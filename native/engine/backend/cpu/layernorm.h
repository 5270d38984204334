#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

// out[N,C] = (inp - mean) · rstd · w + b ; mean[N], rstd[N] saved for backward.
void layernorm_forward(ThreadPool& tp, float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C, float eps);
void layernorm_backward(ThreadPool& tp, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C);

}  // namespace moe::cpu
