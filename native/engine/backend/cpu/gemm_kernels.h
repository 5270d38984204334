// Internal interface between the ISA-independent sgemm driver (gemm.cpp) and its per-ISA kernels.
// Packed layouts:
//   A panel of `mr` rows:  a[k*mr + i] = op(A)[i][k]            (tight, no padding in M)
//   B panel of width NR:   b[k*NR + j] = op(B)[k][j], zero-padded for j >= nr (small-M calls may read a
//                          non-transposed B in place instead)
// Every microkernel computes, for each C element of its tile, acc = 0; acc = fma(a_k, b_k, acc) for k in
// ascending order, then c = alpha·acc (load_c false) or c = fma(alpha, acc, beta·c) (load_c true).
// All kernels and tile sizes share that sequence, which is what makes sgemm's result independent of
// tiling, edges, ISA and threads.
#pragma once
#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu::gemm {

// Rows of the next B block for a kernel call to pull toward L2 while it computes: `rows` runs of `row_bytes` bytes,
// `stride` bytes apart from `p`. The driver spreads a whole block over the block's calls, so the weight streams in
// under the FMAs instead of stalling the packing that follows. Kernels without it ignore it.
struct Prefetch {
  const char* p = nullptr;
  int64_t stride = 0;
  int row_bytes = 0, rows = 0;
};

struct Kernels {
  const char* name;
  int nr;      // packed B panel width
  int mr_max;  // largest A panel height the kernel accepts
  // Packs rows [0, rows) x k in [0, kc) of op(A) starting at `a` (already offset to the panel origin).
  void (*pack_a)(bool trans, const float* a, int64_t lda, int rows, int kc, float* dst);
  // Packs k in [0, kc) x cols [0, cols) of op(B) starting at `b`, cols <= nr, zero-padding to nr.
  void (*pack_b)(bool trans, const float* b, int64_t ldb, int kc, int cols, float* dst);
  // Updates C[0, mr) x [0, n) for some n <= cols of the kernel's choosing (whole panels, or all of cols) and
  // returns n. A's k-th run of mr values starts at a + k*a_k: a packed panel uses mr; a transposed A read in
  // place uses lda. B panel p starts at b + p*panel_stride and its row k at + k*k_stride: packed panels use
  // (kc*nr, nr); a non-transposed B read in place uses (nr, ldb). A non-null pack_out also receives the
  // packed copy of the B panels it read (panel p at pack_out + p*kc*nr), so the first A panel of a block
  // packs B as a side effect of using it. `pf` only warms caches.
  int (*kernel)(int mr, int cols, int kc, const float* a, int64_t a_k, const float* b, int64_t panel_stride,
                int64_t k_stride, float* c, int64_t ldc, float alpha, float beta, bool load_c, float* pack_out,
                const Prefetch& pf);
  // Optional (null where a family has none): products with at most narrow_cols columns (a LoRA rank, a router's
  // experts), where packing A would cost as much as the FMAs and a 32-wide tile would waste half of them. Updates
  // C[0, mr) x [0, cols) for any mr, reading A in place, op(A)[i][k] at a[i*a_row + k*a_k], and B from packed
  // panels (panel p at b + p*kc*nr). Same per-element sequence as `kernel`.
  int narrow_cols = 0;
  void (*narrow)(int mr, int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, float* c,
                 int64_t ldc, float alpha, float beta, bool load_c) = nullptr;
  // Optional (null where a family has none): C[0, mr) x [0, cols) (mr <= kDirectRowsMax, cols <= kDirectCols) for
  // op(B) = Bᵀ read where it lies (B's row j, C's column j, at b + j*ldb from the k block's start) and A read in
  // place as for `narrow`; same per-element sequence. For a token at a time (decode), whose products read each
  // weight once: packing B first would cost more than the product.
  void (*direct_bt)(int mr, int cols, int kc, const float* a, int64_t a_row, int64_t a_k, const float* b, int64_t ldb,
                    float* c, int64_t ldc, float alpha, float beta, bool load_c) = nullptr;
  // `kernel` reads a transposed A in place (a_k = lda) in regions of up to this many columns; 0: A is always
  // packed. Where few column tiles reuse a packed panel, the strided copy costs more than reading A where it lies,
  // as long as the tile has the FMAs to cover each k run's line coming from L2.
  int in_place_a_cols = 0;
};

constexpr int kDirectRowsMax = 4;
constexpr int kDirectCols = 32;

const Kernels& avx512_kernels();
const Kernels& avx2_kernels();
const Kernels& scalar_kernels();

// sgemm (same contract as gemm.h) on an explicit kernel family; tests use it to compare ISAs bit for bit.
void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

// A weight read as op(B) = Bᵀ (B stored [N, K], ldb >= K: a linear layer's x·wᵀ) packed once for that family's
// kernels (its k blocks, each a row of nr-column panels; packed_bt_floats floats at a 64-byte aligned dst), then
// products on it:
// sgemm_packed_bt_with gives sgemm_with's result on (trans_b, B) bit for bit, reading the panels in order.
size_t packed_bt_floats(const Kernels& kern, int N, int K);
void pack_bt_with(const Kernels& kern, ThreadPool& tp, const float* B, int ldb, int N, int K, float* dst);
void sgemm_packed_bt_with(const Kernels& kern, ThreadPool& tp, int M, int N, int K, float alpha, const float* A,
                          int lda, const float* packed, float beta, float* C, int ldc);

}  // namespace moe::cpu::gemm
