// Fused AdamW, vectorised and threaded; matches torch.optim.AdamW's update order:
//   g = grad_scale·grad ; m = β1·m + (1-β1)·g ; v = β2·v + (1-β2)·g²
//   p = p·(1 - lr·wd) ; p -= (lr / (1-β1^t)) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float grad_scale = 1.0f;  // global-norm clipping folds into this
  int step = 1;             // 1-based, for bias correction
};

void adamw_update(ThreadPool& tp, float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp);

// Σ x² accumulated in double over fixed 64Ki-element chunks combined in order: thread-count independent.
double sum_squares(ThreadPool& tp, const float* x, int64_t n);

}  // namespace moe::cpu
