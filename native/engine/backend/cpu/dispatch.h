// Token dispatch without a dispatch mask: the N·K assignments are sorted by expert into contiguous
// segments (a counting sort; counts + a scan give the offsets), experts run over their segment,
// and combine scatters the weighted results back to token order.
#pragma once
#include <cstdint>

#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

// Builds the plan (layout documented on DispatchPlan, backend/types.h).
void dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity);
// xs[S,C] = x[slot_token[s]] (zeros for padding slots).
void permute_forward(ThreadPool& tp, float* xs, const float* x, const DispatchPlan& plan, int C);
// dx[n] += Σ_k dxs[assign_slot[n,k]], summed in k order.
void permute_backward(ThreadPool& tp, float* dx, const float* dxs, const DispatchPlan& plan, int C);
// y[n] = Σ_k topk_w[n,k] · ys[assign_slot[n,k]] in k order (dropped assignments contribute nothing).
void combine_forward(ThreadPool& tp, float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C);
// dys[slot] += topk_w · dy[n] ; dtopk_w[n,k] += dy[n]·ys[slot]   (either may be null)
void combine_backward(ThreadPool& tp, float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                      const DispatchPlan& plan, int C);

}  // namespace moe::cpu
