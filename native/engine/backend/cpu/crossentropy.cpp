// Softmax cross-entropy over V classes, one row per token; log-sum-exp is max-subtracted, and the
// backward recomputes it (two vectorised passes over the row) instead of keeping an [N] buffer.
#include "backend/cpu/crossentropy.h"

#include <cmath>

#include "backend/cpu/kernel_util.h"

namespace moe::cpu {
namespace {

float row_logsumexp(const float* x, int V) {
  float m = lane_max(x, V);
  float s = lane_sum(V, [x, m](int i) { return vexp(x[i] - m); });
  return m + std::log(s);
}

}  // namespace

void crossentropy_forward(ThreadPool& tp, float* losses, const float* logits, const int32_t* targets, int N, int V) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      if (targets[n] < 0) {
        losses[n] = 0.0f;
        continue;
      }
      const float* x = logits + n * V;
      losses[n] = row_logsumexp(x, V) - x[targets[n]];
    }
  });
}

void crossentropy_backward(ThreadPool& tp, float* dlogits, const float* logits, const int32_t* targets, float scale,
                           int N, int V) {
  tp.parallel_for(N, [=](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      if (targets[n] < 0) continue;
      const float* x = logits + n * V;
      float* dx = dlogits + n * V;
      int target = targets[n];
      float lse = row_logsumexp(x, V);
      float before = dx[target];
      for (int v = 0; v < V; ++v) dx[v] += scale * vexp(x[v] - lse);
      dx[target] = before + scale * (vexp(x[target] - lse) - 1.0f);
    }
  });
}

}  // namespace moe::cpu
