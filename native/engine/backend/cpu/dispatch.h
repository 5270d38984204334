// Token dispatch without a dispatch mask: the N·K assignments are sorted by expert into contiguous
// segments (a counting sort; counts + a scan give the offsets), experts run over their segment,
// and combine scatters the weighted results back to token order.
#pragma once
#include <cstdint>
#include <vector>

#include "core/threadpool.h"

namespace moe::cpu {

struct DispatchPlan {
  int N = 0, E = 0, K = 0;
  int capacity = 0;                  // 0: dropless; else every segment is exactly `capacity` slots (GShard padding)
  int dropped = 0;                   // assignments dropped by capacity
  std::vector<int32_t> counts;       // [E] assignments each expert computes (after dropping)
  std::vector<int32_t> offsets;      // [E+1] segment start of each expert; offsets[E] = S
  std::vector<int32_t> slot_token;   // [S] token of each slot; -1 for a padding slot
  std::vector<int32_t> assign_slot;  // [N·K] slot of assignment (n, k); -1 when dropped
  int total_slots() const { return offsets.empty() ? 0 : offsets[E]; }
};

// Slots inside a segment are ordered by (token, k). With a capacity, the kept assignments are chosen in
// GShard priority order (all k = 0 assignments by token, then k = 1, ...) and then laid out in (token, k)
// order, so capacity >= N·K reproduces the dropless plan exactly (plus padding slots).
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
