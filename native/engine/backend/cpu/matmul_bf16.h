// Linear layer in bf16 compute (train.compute_dtype "bf16"): the weight is the bf16 copy of the fp32 master,
// activations and output gradients are rounded to bf16 while sgemm_bf16 packs them, and every product accumulates
// in fp32. Shapes and accumulation semantics are those of matmul.h.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu {

// w_packed (may be null): w already packed for the product at hand (packed_weights.h), bit for bit the same result.
// y[N,O] = x[N,I] · w[O,I]ᵀ + b[O]   (b may be null)
void matmul_forward_bf16(ThreadPool& tp, float* y, const float* x, const uint16_t* w, const uint32_t* w_packed,
                         const float* b, int N, int I, int O);
// dx[N,I] += dy·w ; dw[O,I] += dyᵀ·x ; db[O] += Σ_n dy[n] in fp32   (each may be null); write_dx as matmul.h's.
void matmul_backward_bf16(ThreadPool& tp, float* dx, float* dw, float* db, const float* dy, const float* x,
                          const uint16_t* w, const uint32_t* w_packed, int N, int I, int O, bool write_dx = false);

}  // namespace moe::cpu
