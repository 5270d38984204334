// Causal scaled-dot-product attention with grouped-query heads: query head h reads kv head
// h / (NH / NKV). Scale 1/sqrt(HS).
//   qkv [B, T, (NH + 2·NKV)·HS] (q heads, k heads, v heads), out [B, T, NH·HS],
//   lse [B, NH, T] each query's log-sum-exp of scaled scores (and of the sink, when there is one), saved so
//   backward recomputes probabilities.
// spec (backend/types.h): a sliding window (query t sees keys t-window+1 .. t) and per-head sinks (a logit in
// the softmax denominator without a value); backward then adds ∂/∂sinks to spec.dsinks (when not null).
#pragma once
#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

void attention_forward(ThreadPool& tp, float* out, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                       const AttentionSpec& spec);
void attention_backward(ThreadPool& tp, float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int B, int T, int NH, int NKV, int HS, const AttentionSpec& spec);

}  // namespace moe::cpu
