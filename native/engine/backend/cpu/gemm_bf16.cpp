// sgemm_bf16 driver: Goto-style blocking (for each block of up to kMcMax rows and each kc block, A packed once, then B
// blocks of kc x nc packed and swept by every A panel), always packing B since the kernels need k pairs. Threads own
// disjoint C regions (never a K range) and the kc blocks are a function of K alone, so every C element sees the same
// reduction order.
#include "backend/cpu/gemm_bf16.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_driver.h"
#include "backend/cpu/pack_buffer.h"

namespace moe::cpu {
namespace {

using gemm_bf16::Kernels;
using gemm_bf16::kNR;

constexpr int kKcMax = 512;               // A panel (14 x 256 pairs = 14 KiB; AMX 32 rows, 32 KiB) stays in L1; even
constexpr int kNcMax = 384;               // B block (256 pairs x 384 = 384 KiB) stays in L2
constexpr int kMcMax = 1024;              // rows of A packed at once (1 MiB of pairs)
static_assert(kKcMax / 2 <= gemm_bf16::kPairsMax);

const Kernels& kernels() {
  static const Kernels& native = amx_support().usable                     ? gemm_bf16::amx_kernels()
                                 : gemm_driver::cpu_features().avx512_bf16 ? gemm_bf16::avx512_kernels()
                                 : gemm_driver::cpu_features().avx512      ? gemm_bf16::avx512_fma_kernels()
                                 : gemm_driver::cpu_features().avx2_fma    ? gemm_bf16::avx2_fma_kernels()
                                                                           : gemm_bf16::portable_kernels();
  return gemm_driver::for_calling_thread(native, gemm_bf16::portable_kernels());
}

thread_local PackBuffer<uint32_t> tl_pack_a("sgemm_bf16"), tl_pack_b("sgemm_bf16");

struct Problem : gemm_driver::Problem {
  const uint16_t* B16;  // exactly one of B16 / B32 / packed is set
  const float* B32;
  const uint32_t* packed;  // op(B) packed once (sgemm_bf16_pack_b), n_pad columns per k pair
  int64_t n_pad;
};

int64_t padded_columns(int N) { return (int64_t{N} + kNR - 1) / kNR * kNR; }

void pack_from(const Kernels& kern, bool trans, const uint16_t* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  kern.pack_b16(trans, b, ldb, kc, cols, dst);
}
void pack_from(const Kernels& kern, bool trans, const float* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  kern.pack_b32(trans, b, ldb, kc, cols, dst);
}

// Columns [j0, j1) of op(B)'s k block (k0, kc) packed into panels, panel (j - j0) / kNR at dst + (j - j0) * pairs. A
// non-transposed B's panel is a short run in each of kc rows ldb apart: packed panel by panel, every row was a cache
// miss that the hardware prefetchers, which follow runs, did not foresee. So it is packed kPackRows rows at a time
// across all the panels, each row's run over [j0, j1) read in one sweep (dx and dh of 96-128-row experts 1.2-1.35x
// faster on a Zen 3). A transposed B's panel rows are long runs already.
constexpr int kPackRows = 8;  // even: a step starts on a k pair
template <typename T>
void pack_panels(const Kernels& kern, const gemm_driver::Problem& p, const T* B, int k0, int kc, int j0, int j1,
                 uint32_t* dst) {
  const int pairs = (kc + 1) / 2, step = p.tb ? kc : kPackRows;
  for (int kk = 0; kk < kc; kk += step)
    for (int j = j0; j < j1; j += kNR)
      pack_from(kern, p.tb, B + p.b_offset(k0 + kk, j), p.ldb, std::min(step, kc - kk), std::min(kNR, j1 - j),
                dst + int64_t{j - j0} * pairs + int64_t{kk / 2} * kNR);
}

void run_region(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  if (m0 >= m1 || n0 >= n1) return;
  const int nc_max = std::min(kNcMax, (n1 - n0 + kNR - 1) / kNR * kNR);
  const int pairs_max = p.kc / 2;
  uint32_t* pack_buf = p.packed ? nullptr : tl_pack_b.get(static_cast<size_t>(pairs_max) * nc_max);
  uint32_t* ap = tl_pack_a.get(static_cast<size_t>(pairs_max) * std::min(m1 - m0, kMcMax));
  for (int mc = m0; mc < m1; mc += kMcMax) {
    const int rows = std::min(kMcMax, m1 - mc);
    // Balanced panel heights: 64 rows become 13,13,13,13,12 rather than 14x4 + 8 (for mr_max 14).
    const int panels = (rows + kern.mr_max - 1) / kern.mr_max;
    auto panel_row = [&](int ip) { return rows * ip / panels; };
    for (int k0 = 0; k0 < p.K; k0 += p.kc) {
      const int kc = std::min(p.kc, p.K - k0), pairs = (kc + 1) / 2;
      const bool first = k0 == 0;
      const float beta = first ? p.beta : 1.0f;
      const bool load_c = !first || p.beta != 0.0f;
      // The whole row block's A is packed once per k block and reused by every column block. A transposed A (a
      // weight gradient's dYᵀ) is a short run of each panel's rows in every k row, as a non-transposed B is in
      // pack_panels, so it is packed kPackRows k rows at a time across all the panels: each k row's run over the
      // block is read in one sweep (weight-gradient shapes 1.1-1.45x faster on a Zen 3). The AMX family's panels
      // are tile rows, whose k runs cannot be written a few at a time.
      const int a_step = p.ta && kern.a_k_major ? kPackRows : kc;
      for (int kk = 0; kk < kc; kk += a_step)
        for (int ip = 0; ip < panels; ++ip) {
          const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
          kern.pack_a(p.ta, p.a_at(mc + r0, k0 + kk), p.lda, r1 - r0, std::min(a_step, kc - kk),
                      ap + static_cast<int64_t>(r0) * pairs + int64_t{kk / 2} * (r1 - r0));
        }
      for (int jc = n0; jc < n1; jc += nc_max) {
        const int nc = std::min(nc_max, n1 - jc);
        // Packed once: block k0's panels lie side by side after the k0/2 pairs of the blocks before it.
        const uint32_t* bp = p.packed ? p.packed + k0 / 2 * p.n_pad + static_cast<int64_t>(jc) * pairs : pack_buf;
        if (p.B16) pack_panels(kern, p, p.B16, k0, kc, jc, jc + nc, pack_buf);
        else if (p.B32) pack_panels(kern, p, p.B32, k0, kc, jc, jc + nc, pack_buf);
        for (int ip = 0; ip < panels; ++ip) {
          const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
          float* c = p.C + (mc + r0) * p.ldc + jc;
          for (int jr = 0; jr < nc;)
            jr += kern.kernel(r1 - r0, nc - jr, pairs, ap + static_cast<int64_t>(r0) * pairs,
                              bp + static_cast<int64_t>(jr) * pairs, c + jr, p.ldc, p.alpha, beta, load_c);
        }
      }
    }
  }
}

// A few rows against a bf16 Bᵀ read where it lies (Kernels::direct_b16t): A's rows are packed once, whole, then each
// group of columns runs every k block in turn, so each of B's rows is read from start to end once.
void run_direct(const Kernels& kern, const Problem& p, int n0, int n1) {
  if (n0 >= n1) return;
  const int M = p.M;
  uint32_t* ap = tl_pack_a.get(static_cast<size_t>(M) * ((p.K + 1) / 2));
  for (int k0 = 0; k0 < p.K; k0 += p.kc)
    kern.pack_a(p.ta, p.a_at(0, k0), p.lda, M, std::min(p.kc, p.K - k0), ap + k0 / 2 * M);
  for (int jc = n0; jc < n1; jc += gemm_bf16::kDirectCols) {
    const int cols = std::min(gemm_bf16::kDirectCols, n1 - jc);
    for (int k0 = 0; k0 < p.K; k0 += p.kc) {
      const bool first = k0 == 0;
      kern.direct_b16t(M, cols, std::min(p.kc, p.K - k0), ap + k0 / 2 * M, p.B16 + jc * p.ldb + k0, p.ldb,
                       p.C + jc, p.ldc, p.alpha, first ? p.beta : 1.0f, !first || p.beta != 0.0f);
    }
  }
}

}  // namespace

namespace gemm_bf16 {

int block_k(int K) { return gemm_driver::block_k(K, kKcMax, true); }

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const uint16_t* B16, const float* B32, const uint32_t* packed, int ldb,
                float beta, float* C, int ldc) {
  if (!gemm_driver::prepare("sgemm_bf16", trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  const Problem p{{trans_a, trans_b, M, N, K, block_k(K), alpha, beta, A, lda, ldb, C, ldc},
                  B16, B32, packed, padded_columns(N)};
  if (kern.direct_b16t && B16 && trans_b && M <= kDirectRowsMax) {
    // Threads split the columns only: every one needs all of A's few rows.
    auto columns = [](double mt, double nt, int) { return nt * (mt + kDirectRowsMax); };
    return gemm_driver::run_regions(tp, M, N, K, kDirectCols, columns,
                                    [&](int, int, int n0, int n1) { run_direct(kern, p, n0, n1); });
  }
  // The slowest thread's dot-product and packing work (B's packing only when it is not packed already).
  const double b_packs = packed ? 0.0 : 1.0;
  auto cost = [&](double mt, double nt, int) {
    return mt * nt * K / 32.0 + 0.5 * K * (b_packs * nt * std::ceil(mt / kMcMax) + mt);
  };
  gemm_driver::run_regions(tp, M, N, K, kNR, cost,
                           [&](int m0, int m1, int n0, int n1) { run_region(kern, p, m0, m1, n0, n1); });
}

}  // namespace gemm_bf16

void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  gemm_bf16::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, B, nullptr, nullptr, ldb, beta, C,
                        ldc);
}

void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  gemm_bf16::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, nullptr, B, nullptr, ldb, beta, C,
                        ldc);
}

int64_t sgemm_bf16_packed_words(int N, int K) {
  if (N <= 0 || K <= 0) return 0;
  const int kc = gemm_bf16::block_k(K);
  int64_t pairs = 0;
  for (int k0 = 0; k0 < K; k0 += kc) pairs += (std::min(kc, K - k0) + 1) / 2;
  return pairs * padded_columns(N);
}

namespace {

template <typename T>
void pack_b_words(ThreadPool& tp, bool trans_b, int N, int K, const T* B, int ldb, uint32_t* packed) {
  check(N >= 0 && K >= 0, "sgemm_bf16_pack_b: negative size N=" + std::to_string(N) + " K=" + std::to_string(K));
  check(ldb >= (trans_b ? K : N), "sgemm_bf16_pack_b: ldb=" + std::to_string(ldb) + " is smaller than op(B)'s row length");
  if (N == 0 || K == 0) return;
  // Every family packs the same words (gemm_bf16_kernels.h), so whichever runs the later calls reads them.
  const Kernels& kern = kernels();
  const int kc = gemm_bf16::block_k(K);
  const int64_t n_pad = padded_columns(N), panels = n_pad / kNR;
  const gemm_driver::Problem shape{false, trans_b, 0, N, K, kc, 1.0f, 0.0f, nullptr, 0, ldb, nullptr, 0};
  for (int k0 = 0; k0 < K; k0 += kc) {
    const int kb = std::min(kc, K - k0), pairs = (kb + 1) / 2;
    uint32_t* block = packed + k0 / 2 * n_pad;
    tp.parallel_for(panels, [&](int64_t q0, int64_t q1, int) {
      pack_panels(kern, shape, B, k0, kb, static_cast<int>(q0 * kNR), std::min<int>(N, static_cast<int>(q1 * kNR)),
                  block + q0 * kNR * pairs);
    });
  }
}

}  // namespace

void sgemm_bf16_pack_b(ThreadPool& tp, bool trans_b, int N, int K, const uint16_t* B, int ldb, uint32_t* packed) {
  pack_b_words(tp, trans_b, N, K, B, ldb, packed);
}

void sgemm_bf16_pack_b(ThreadPool& tp, bool trans_b, int N, int K, const float* B, int ldb, uint32_t* packed) {
  pack_b_words(tp, trans_b, N, K, B, ldb, packed);
}

void sgemm_bf16_packed(ThreadPool& tp, bool trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                       const uint32_t* packed, float beta, float* C, int ldc) {
  gemm_bf16::sgemm_with(kernels(), tp, trans_a, false, M, N, K, alpha, A, lda, nullptr, nullptr, packed, N, beta, C,
                        ldc);
}

const char* sgemm_bf16_isa() { return kernels().name; }

bool sgemm_bf16_on_bf16_units() { return kernels().bf16_units; }

std::string sgemm_bf16_kernel() {
  const AmxSupport& amx = amx_support();
  std::string s = kernels().name;
  if (amx.cpu_has_amx && !amx.usable && current_isa() == Isa::Native) s += " (AMX not used: " + amx.reason + ")";
  return s;
}

}  // namespace moe::cpu
