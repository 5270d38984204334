// Linear layer over GEMM.
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

// y[N,O] = x[N,I] · w[O,I]ᵀ + b[O]   (b may be null)
void matmul_forward(ThreadPool& tp, float* y, const float* x, const float* w, const float* b, int N, int I, int O);
// The same product on the weight's layout (sgemm_pack_bt of w): the same bits.
void matmul_forward_packed(ThreadPool& tp, float* y, const float* x, const float* packed, const float* b, int N, int I,
                           int O);
// dx[N,I] += dy·w ; dw[O,I] += dyᵀ·x ; db[O] += Σ_n dy[n]   (each may be null). write_dx: dx = dy·w instead,
// what dx held ignored.
void matmul_backward(ThreadPool& tp, float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int N, int I, int O, bool write_dx = false);

}  // namespace moe::cpu
