// Our own blocked, threaded fp32 GEMM (no BLAS dependency), dispatched at run time to AVX-512,
// AVX2 or scalar kernels.
//   C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C     (row-major; beta == 0 ignores C's contents)
//   op(A) = A [M,K] (lda >= K), or Aᵀ of A stored [K,M] (lda >= M) when trans_a.
//   op(B) = B [K,N] (ldb >= N), or Bᵀ of B stored [N,K] (ldb >= K) when trans_b.
// Exactness contract: every C element is reduced over k in one fixed order that depends only on K
// (never on M, N, its position in C, the ISA tile edges or the thread count), so a token's output
// is bit-identical whichever segment, device or thread computes it.
#pragma once
#include "core/threadpool.h"

namespace moe::cpu {

void sgemm(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

// Which kernel family sgemm uses on this machine under the calling thread's ISA choice ("avx512", "avx2" or
// "scalar").
const char* sgemm_isa();

// A weight B [N, K] (ldb >= K) read as op(B) = Bᵀ, as a linear layer's x·wᵀ reads it, packed once for the family
// sgemm_isa() names (sgemm_pack_bt_floats floats at a 64-byte aligned dst), and products on it under that same
// family: C = alpha · A·Bᵀ + beta · C bit for bit as sgemm(tp, false, true, ...) gives it, reading the panels in
// order, never B.
size_t sgemm_pack_bt_floats(int N, int K);
void sgemm_pack_bt(ThreadPool& tp, const float* B, int ldb, int N, int K, float* dst);
void sgemm_packed_bt(ThreadPool& tp, int M, int N, int K, float alpha, const float* A, int lda, const float* packed,
                     float beta, float* C, int ldc);

}  // namespace moe::cpu
