// Dispatch plan (a serial counting sort: O(N·K), negligible next to the experts) and the row moves
// that follow it. Every row op is parallel over its destination rows, so no two workers ever write
// the same element and sums run in a fixed k order.
#include "backend/cpu/dispatch.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cpu/kernel_util.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

// Rows per parallel chunk, so small C does not pay a wake-up per handful of floats.
int64_t row_grain(int C) { return std::max<int64_t>(1, 16384 / std::max(C, 1)); }

}  // namespace

void dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity) {
  check(N >= 0 && E > 0 && K > 0 && capacity >= 0,
        "dispatch_plan: need N >= 0, E > 0, K > 0, capacity >= 0, got N=" + std::to_string(N) +
            " E=" + std::to_string(E) + " K=" + std::to_string(K) + " capacity=" + std::to_string(capacity));
  const int64_t NK = (int64_t)N * K;
  const int64_t S = capacity == 0 ? NK : (int64_t)E * capacity;
  check(S <= INT32_MAX, "dispatch_plan: " + std::to_string(S) + " slots overflow int32; lower the capacity or N");
  for (int64_t i = 0; i < NK; ++i)
    if (topk_idx[i] < 0 || topk_idx[i] >= E)
      fail("dispatch_plan: topk_idx[" + std::to_string(i) + "] = " + std::to_string(topk_idx[i]) +
           " is outside [0, " + std::to_string(E) + ")");
  plan.N = N;
  plan.E = E;
  plan.K = K;
  plan.capacity = capacity;
  plan.dropped = 0;
  plan.counts.assign(E, 0);
  plan.offsets.assign(E + 1, 0);
  plan.assign_slot.assign(NK, 0);
  int32_t* counts = plan.counts.data();
  int32_t* offsets = plan.offsets.data();
  int32_t* assign = plan.assign_slot.data();

  if (capacity == 0) {
    for (int64_t i = 0; i < NK; ++i) counts[topk_idx[i]]++;
    for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
  } else {
    // GShard priority: every token's first choice is served before anyone's second choice.
    // assign_slot temporarily marks kept (0) and dropped (-1) assignments.
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) {
        int64_t i = (int64_t)n * K + k;
        int32_t e = topk_idx[i];
        if (counts[e] < capacity) {
          counts[e]++;
        } else {
          assign[i] = -1;
          plan.dropped++;
        }
      }
    for (int e = 0; e <= E; ++e) offsets[e] = e * capacity;
  }

  // Lay the kept assignments out in (token, k) order; counts is rebuilt as each segment's cursor.
  plan.slot_token.assign(S, -1);
  int32_t* slot_token = plan.slot_token.data();
  std::fill(counts, counts + E, 0);
  for (int64_t i = 0; i < NK; ++i) {
    if (assign[i] < 0) continue;
    int32_t e = topk_idx[i];
    int32_t slot = offsets[e] + counts[e]++;
    slot_token[slot] = (int32_t)(i / K);
    assign[i] = slot;
  }
}

void permute_forward(ThreadPool& tp, float* xs, const float* x, const DispatchPlan& plan, int C) {
  const int32_t* slot_token = plan.slot_token.data();
  tp.parallel_for(
      plan.total_slots(),
      [&](int64_t s0, int64_t s1, int) {
        for (int64_t s = s0; s < s1; ++s) {
          float* dst = xs + s * C;
          int32_t n = slot_token[s];
          if (n < 0)
            std::memset(dst, 0, sizeof(float) * C);
          else
            std::memcpy(dst, x + (int64_t)n * C, sizeof(float) * C);
        }
      },
      row_grain(C));
}

void permute_backward(ThreadPool& tp, float* dx, const float* dxs, const DispatchPlan& plan, int C) {
  if (!dx) return;
  const int K = plan.K;
  const int32_t* assign = plan.assign_slot.data();
  tp.parallel_for(
      plan.N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          float* d = dx + n * C;
          for (int k = 0; k < K; ++k) {
            int32_t slot = assign[n * K + k];
            if (slot < 0) continue;
            const float* src = dxs + (int64_t)slot * C;
            for (int c = 0; c < C; ++c) d[c] += src[c];
          }
        }
      },
      row_grain(C));
}

void combine_forward(ThreadPool& tp, float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C) {
  const int K = plan.K;
  const int32_t* assign = plan.assign_slot.data();
  tp.parallel_for(
      plan.N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          float* out = y + n * C;
          std::memset(out, 0, sizeof(float) * C);
          for (int k = 0; k < K; ++k) {
            int32_t slot = assign[n * K + k];
            if (slot < 0) continue;
            const float w = topk_w[n * K + k];
            const float* src = ys + (int64_t)slot * C;
            for (int c = 0; c < C; ++c) out[c] += w * src[c];
          }
        }
      },
      row_grain(C));
}

void combine_backward(ThreadPool& tp, float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                      const DispatchPlan& plan, int C) {
  if (!dys && !dtopk_w) return;
  const int K = plan.K;
  const int32_t* assign = plan.assign_slot.data();
  // Each slot belongs to exactly one assignment, so writing dys by token is race-free.
  tp.parallel_for(
      plan.N,
      [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) {
          const float* g = dy + n * C;
          for (int k = 0; k < K; ++k) {
            int32_t slot = assign[n * K + k];
            if (slot < 0) continue;
            if (dtopk_w) dtopk_w[n * K + k] += lane_sum(C, [&](int c) { return g[c] * ys[(int64_t)slot * C + c]; });
            if (dys) {
              const float w = topk_w[n * K + k];
              float* d = dys + (int64_t)slot * C;
              for (int c = 0; c < C; ++c) d[c] += w * g[c];
            }
          }
        }
      },
      row_grain(C));
}

}  // namespace moe::cpu
