// Fused AdamW, vectorised and threaded, in the update order documented on AdamWParams (backend/types.h).
#pragma once
#include <cstdint>

#include "backend/types.h"
#include "core/threadpool.h"

namespace moe::cpu {

// With p16, also writes the updated weights' bf16 copy there, the bits to_bf16 (convert_bf16.h) would write.
void adamw_update(ThreadPool& tp, float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp,
                  uint16_t* p16 = nullptr);

// Σ x² accumulated in double over fixed 64Ki-element chunks combined in order: thread-count independent.
double sum_squares(ThreadPool& tp, const float* x, int64_t n);

}  // namespace moe::cpu
