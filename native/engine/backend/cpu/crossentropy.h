#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]]; 0 where targets[n] < 0 (masked out of the loss).
void crossentropy_forward(ThreadPool& tp, float* losses, const float* logits, const int32_t* targets, int N, int V);
// dlogits[n] += scale · (softmax(logits[n]) - onehot(targets[n])) for unmasked rows.
void crossentropy_backward(ThreadPool& tp, float* dlogits, const float* logits, const int32_t* targets, float scale,
                           int N, int V);

}  // namespace moe::cpu
