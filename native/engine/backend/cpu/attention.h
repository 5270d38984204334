// Causal scaled-dot-product attention with grouped-query heads: query head h reads kv head
// h / (NH / NKV). Scale 1/sqrt(HS).
//   qkv [B, T, (NH + 2·NKV)·HS] (q heads, k heads, v heads), out [B, T, NH·HS],
//   lse [B, NH, T] each query's log-sum-exp of scaled scores, saved so backward recomputes probabilities.
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void attention_forward(ThreadPool& tp, float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS);
void attention_backward(ThreadPool& tp, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int NH, int NKV, int HS);

}  // namespace moe::cpu
