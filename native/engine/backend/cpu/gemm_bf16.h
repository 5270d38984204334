// bf16 GEMM with fp32 accumulation: the operands are rounded to bf16 (round-to-nearest-even, exactly as
// moe::f32_to_bf16) and multiplied with AMX tiles (TDPBF16PS) where the CPU has AMX and the OS grants it, else with
// AVX512_BF16's vdpbf16ps, with fp32 FMAs giving vdpbf16ps's bits on other AVX-512 and AVX2 CPUs, or with a
// portable kernel that computes those bits everywhere else.
//   C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C     (row-major; beta == 0 ignores C's contents)
//   op(A) = A [M,K] (lda >= K), or Aᵀ of A stored [K,M] (lda >= M) when trans_a; A is fp32, rounded while packing.
//   op(B) = B [K,N] (ldb >= N), or Bᵀ of B stored [N,K] (ldb >= K) when trans_b; B is either stored as bf16 bit
//   patterns (a weight's bf16 copy) or fp32 rounded while packing (an activation).
// Arithmetic (vdpbf16ps, bit for bit): K is cut into blocks whose size depends on K alone; in each block every C
// element runs acc = 0, then for each k pair (2p, 2p+1) in ascending order acc += a·b of the odd k, then of the even
// k, each step rounded to fp32 once with denormal inputs read as zero and denormal results flushed to zero; each
// block then updates c = alpha·acc (first block, beta == 0) or c = fma(alpha, acc, beta'·c) (beta' = beta in the
// first block, 1 after). AMX differs inside a block: per 16 pairs (fewer for the block's last step) the even and the
// odd k's products run in two such chains from zero, and acc += (even + odd) (gemm_bf16_amx_emulated.cpp), so its
// bits differ from the other kernels' within the same fp32 error bound. Every kernel: threads split C by rows and
// columns, never K, so results are bit-identical for any thread count, and a row's result does not depend on the
// other rows of the call.
#pragma once
#include <cstdint>
#include <string>

#include "core/threadpool.h"

namespace moe::cpu {

void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc);
void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc);

// A bf16 B read by many calls between its changes (a weight) packed once: the words every call would otherwise pack
// for itself, for each k block and 32-column panel of op(B). A call on them (same N and K; any M, A, alpha, beta,
// C) gives the unpacked call's bits with whichever kernel runs, as every family reads the same words. `packed`
// holds sgemm_bf16_packed_words(N, K) words, 64-byte aligned.
int64_t sgemm_bf16_packed_words(int N, int K);
void sgemm_bf16_pack_b(ThreadPool& tp, bool trans_b, int N, int K, const uint16_t* B, int ldb, uint32_t* packed);
// The same words from an fp32 B, rounded as moe::f32_to_bf16 rounds (those of its bf16 copy).
void sgemm_bf16_pack_b(ThreadPool& tp, bool trans_b, int N, int K, const float* B, int ldb, uint32_t* packed);
void sgemm_bf16_packed(ThreadPool& tp, bool trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                       const uint32_t* packed, float beta, float* C, int ldc);

// Which kernel sgemm_bf16 uses on this machine under the calling thread's ISA choice: "amx", "avx512_bf16",
// "avx512_fma", "avx2_fma" or "portable".
const char* sgemm_bf16_isa();
// The same, followed by why AMX is not used where the CPU has it (for describe lines).
std::string sgemm_bf16_kernel();
// Whether that kernel's products run on bf16 units; without them bf16 compute gives the same bits on fp32 arithmetic
// and is not faster than fp32.
bool sgemm_bf16_on_bf16_units();

}  // namespace moe::cpu
