// RMSNorm of the q and k parts of packed qkv rows [N, (NH + 2·NKV)·HS], in place of the attention's
// separate q/k projections' norms. Two groupings, as the families apply them:
//   per_head false: q over its whole NH·HS width with q_w [NH·HS], k over NKV·HS with k_w [NKV·HS] (OLMoE);
//   per_head true:  each head's HS values of q and of k, with q_w [HS] and k_w [HS] shared by the heads (Qwen3).
// The v part is copied. rstd holds one value per normalised group: N × (NH + NKV) per head, N × 2 otherwise.
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void qk_norm_forward(ThreadPool& tp, float* out, float* rstd, const float* qkv, const float* q_w, const float* k_w,
                     int N, int NH, int NKV, int HS, bool per_head, float eps);
// Accumulates: dqkv += ∂/∂qkv (the v part passes dout through), dq_w and dk_w += their gradients.
void qk_norm_backward(ThreadPool& tp, float* dqkv, float* dq_w, float* dk_w, const float* dout, const float* qkv,
                      const float* q_w, const float* k_w, const float* rstd, int N, int NH, int NKV, int HS,
                      bool per_head);

}  // namespace moe::cpu
