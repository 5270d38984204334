// Token embedding plus optional learned positions (gpt-moe).
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// out[B,T,C] = wte[tokens[b,t]] + wpe[t]   (wpe may be null)
void embedding_forward(ThreadPool& tp, float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                       int T, int C);
// dwte[tokens[b,t]] += dout[b,t] ; dwpe[t] += Σ_b dout[b,t]   (dwpe may be null)
void embedding_backward(ThreadPool& tp, float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                        int T, int C);

}  // namespace moe::cpu
