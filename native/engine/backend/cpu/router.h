// MoE router: softmax or sigmoid scores of the expert logits, plain or grouped top-k selection (RouterSpec,
// backend/types.h), Switch aux loss and router z-loss.
#pragma once
#include <cstdint>

#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

// Fails unless N >= 0, 0 < K <= E and a grouped selection's n_group / topk_group fit E (every backend's router
// checks its arguments with this).
void check_router_args(int N, int E, int K, const RouterSpec& spec);

// probs[N,E] = softmax(logits), or sigmoid(logits) with sigmoid scoring; topk_idx[N,K] the K experts of largest
// probs + spec.selection_bias (plain; grouped selections as RouterSpec says) in descending order (ties: lower
// index first); topk_w[N,K] their probabilities (never biased), renormalised to sum 1 when
// spec.renormalize, then times spec.scale.
// With forced_topk[N,K] (distinct experts per token) those experts are taken instead of the top-k, with their
// probabilities as weights, and the aux loss counts them: a skewed-routing experiment whose every other part
// is the real computation.
RouterLosses router_forward(ThreadPool& tp, float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N,
                            int E, int K, const RouterSpec& spec, const int32_t* forced_topk = nullptr);
// dlogits[N,E] += ∂(Σ dtopk_w·topk_w)/∂logits + aux_scale·∂aux/∂logits + z_scale·∂z/∂logits.
// f_e is a constant of the routing decision (as in Switch), so aux's gradient flows through P_e only.
void router_backward(ThreadPool& tp, float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                     const float* topk_w, const float* logits, int N, int E, int K, const RouterSpec& spec,
                     float aux_scale, float z_scale);

}  // namespace moe::cpu
