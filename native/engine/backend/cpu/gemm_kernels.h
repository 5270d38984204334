// Internal interface between the ISA-independent sgemm driver (gemm.cpp) and its per-ISA kernels.
// Packed layouts:
//   A panel of `mr` rows:  a[k*mr + i] = op(A)[i][k]            (tight, no padding in M)
//   B panel of width NR:   b[k*NR + j] = op(B)[k][j], zero-padded for j >= nr
// Every microkernel computes, for each C element of its tile, acc = 0; acc = fma(a_k, b_k, acc) for k in
// ascending order, then c = alpha·acc (load_c false) or c = fma(alpha, acc, beta·c) (load_c true).
// All kernels and tile sizes share that sequence, which is what makes sgemm's result independent of
// tiling, edges, ISA and threads.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu::gemm {

struct Kernels {
  const char* name;
  int nr;      // packed B panel width
  int mr_max;  // largest A panel height the kernel accepts
  // Packs rows [0, rows) x k in [0, kc) of op(A) starting at `a` (already offset to the panel origin).
  void (*pack_a)(bool trans, const float* a, int64_t lda, int rows, int kc, float* dst);
  // Packs k in [0, kc) x cols [0, cols) of op(B) starting at `b`, cols <= nr, zero-padding to nr.
  void (*pack_b)(bool trans, const float* b, int64_t ldb, int kc, int cols, float* dst);
  // C tile [mr x nr_valid] update from one A panel (mr rows) and one packed B panel.
  void (*kernel)(int mr, int nr_valid, int kc, const float* a, const float* b, float* c, int64_t ldc, float alpha,
                 float beta, bool load_c);
};

const Kernels& avx512_kernels();
const Kernels& avx2_kernels();
const Kernels& scalar_kernels();

// sgemm (same contract as gemm.h) on an explicit kernel family; tests use it to compare ISAs bit for bit.
void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace moe::cpu::gemm
