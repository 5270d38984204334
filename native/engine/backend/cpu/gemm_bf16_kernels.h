// Internal interface between the sgemm_bf16 driver (gemm_bf16.cpp) and its kernels (AMX, AVX512_BF16, AVX-512 FMA,
// AVX2 FMA and portable).
// Operands are packed as k pairs: one 32-bit word holds the bf16 of k = 2p in its low half and of k = 2p+1 in its
// high half (zero past K), which is the operand layout of vdpbf16ps and TDPBF16PS.
//   A panel of `rows` rows:  a[p*rows + i] = pair p of op(A) row i            (tight, no padding in M)
//                            (the AMX family: a[i*pairs + p], tile rows; the driver relies on the k-major
//                            order only where Kernels::a_k_major says so, else on a panel of `rows` rows taking
//                            rows*pairs words)
//   B panel of width kNR:    b[p*kNR + j] = pair p of op(B) column j, zero for columns past the matrix
// The vector and portable families pack identical words and run the per-element sequence documented in
// gemm_bf16.h; the AMX family runs TDPBF16PS's sequence (gemm_bf16_amx_emulated.cpp spells it out).
#pragma once
#include <xmmintrin.h>

#include <cstdint>

#include "core/threadpool.h"

namespace moe::cpu::gemm_bf16 {

constexpr int kNR = 32;     // packed B panel width (two zmm of fp32 accumulators)
constexpr int kMRMax = 14;  // tallest A panel of the AVX-512 and portable families (AVX2 takes 15)
constexpr int kPairsMax = 256;  // most k pairs a kernel call gets (the driver's k blocks)
constexpr int kDirectRowsMax = 4;   // most rows of A the direct kernels take
constexpr int kDirectCols = 32;     // columns per direct kernel call

struct Kernels {
  const char* name;
  // Whether its products run on bf16 units (vdpbf16ps, TDPBF16PS). The other families compute the same bits on fp32
  // FMAs or portably, so bf16 compute is not faster than fp32 where one of them runs.
  bool bf16_units;
  int mr_max;  // tallest A panel the kernel takes
  // Pack rows [0, rows) x k in [0, kc) of op(A) (fp32), starting at `a` (already offset to the panel origin).
  void (*pack_a)(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst);
  // Pack k in [0, kc) x columns [0, cols) of op(B), cols <= kNR, zero-padding to kNR columns.
  void (*pack_b16)(bool trans, const uint16_t* b, int64_t ldb, int kc, int cols, uint32_t* dst);
  void (*pack_b32)(bool trans, const float* b, int64_t ldb, int kc, int cols, uint32_t* dst);
  // Updates C[0, mr) x [0, n) for some n <= cols of the kernel's choosing (whole panels, or all of cols) from
  // `pairs` k pairs, and returns n. Packed B panel q starts at b + q*pairs*kNR.
  int (*kernel)(int mr, int cols, int pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, float alpha,
                float beta, bool load_c);
  // Optional (null where a family has none): the same update of C[0, mr) x [0, cols) (mr <= kDirectRowsMax,
  // cols <= kDirectCols) for op(B) = Bᵀ of a bf16 B read where it lies, B's row j (C's column j) at b + j*ldb from
  // the k block's start, kc k of it: no packed copy of B is written or read. For a token at a time (decode), whose
  // products read each weight once: packing B first would cost more than the product.
  void (*direct_b16t)(int mr, int cols, int kc, const uint32_t* a, const uint16_t* b, int64_t ldb, float* c,
                      int64_t ldc, float alpha, float beta, bool load_c) = nullptr;
  // Whether its A panels are k-major (a[p*rows + i]), so that the driver may pack a panel a few k at a time (false
  // for the AMX family's tile rows).
  bool a_k_major = true;
};

const Kernels& avx512_kernels();      // vdpbf16ps (AVX512_BF16)
const Kernels& avx512_fma_kernels();  // the same bits on AVX-512 fp32 FMAs, for CPUs without AVX512_BF16
const Kernels& avx2_fma_kernels();    // the same bits on AVX2 fp32 FMAs, for CPUs without AVX-512
const Kernels& portable_kernels();
const Kernels& amx_kernels();           // TDPBF16PS tiles (AMX-BF16); only where amx_support().usable
// The AMX family's kernel on a software emulation of the tile instructions: tests only, never dispatched.
const Kernels& amx_emulated_kernels();

// acc + x·y for two bf16 as vdpbf16ps and TDPBF16PS compute each product step: denormal inputs read as zero, the
// exact sum rounded once to fp32 (nearest even), a denormal result flushed to a zero of its sign.
float dpbf16_step(float acc, uint16_t x, uint16_t y);

// One C element's accumulator by the exact per-element sequence of gemm_bf16.h, scalar: `pairs` pair words of its
// packed A row (stride sa between pairs) and B column (stride sb).
float dot_pairs(const uint32_t* a, int64_t sa, const uint32_t* b, int64_t sb, int pairs);

// C[0, rows) x [0, cols) = alpha · (A rows · B columns) (+ beta · C when load_c) by the exact scalar sequence:
// A packed `lda` rows wide, B's column j in panel j / kNR (panels pairs·kNR words apart). The FMA families recompute
// a tile that met a denormal with it.
void exact_tile(int rows, int cols, int pairs, const uint32_t* a, int lda, const uint32_t* b, float* c, int64_t ldc,
                float alpha, float beta, bool load_c);

// Fetches pair p + 8 of each of NP packed B panels (the panel's row of kNR words, two lines). A weight packed once
// is read straight from memory on the first A panel's sweep, where the hardware prefetchers alone leave the kernel
// waiting (measured 1.3x on a whole bf16 LoRA layer step); a prefetch past a panel's end is harmless on x86.
// Internal linkage: each kernel file keeps its own copy, built for its ISA.
namespace {
template <int NP>
inline void prefetch_panels(const uint32_t* b, int64_t panel_stride, int p) {
  constexpr int kAhead = 8;
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const char* at = reinterpret_cast<const char*>(b + q * panel_stride + (p + kAhead) * kNR);
    _mm_prefetch(at, _MM_HINT_T0);
    _mm_prefetch(at + 64, _MM_HINT_T0);
  }
}
}  // namespace

// sgemm_bf16 (same contract as gemm_bf16.h) on an explicit kernel family; tests compare the families bit for bit.
// Exactly one of B16, B32 and packed (sgemm_bf16_pack_b's words; trans_b and ldb are then unused) is set.
void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const uint16_t* B16, const float* B32, const uint32_t* packed, int ldb,
                float beta, float* C, int ldc);

}  // namespace moe::cpu::gemm_bf16
