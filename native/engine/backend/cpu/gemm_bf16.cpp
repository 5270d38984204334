// sgemm_bf16 driver: Goto-style blocking (for each block of up to kMcMax rows and each kc block, A packed once, then B
// blocks of kc x nc packed and swept by every A panel), always packing B since the kernels need k pairs. Threads own
// disjoint C regions (never a K range) and the kc blocks are a function of K alone, so every C element sees the same
// reduction order.
#include "backend/cpu/gemm_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/pack_buffer.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

using gemm_bf16::Kernels;
using gemm_bf16::kMRMax;
using gemm_bf16::kNR;

constexpr int kKcMax = 512;               // A panel (14 x 256 pairs = 14 KiB) stays in L1; must be even
constexpr int kNcMax = 384;               // B block (256 pairs x 384 = 384 KiB) stays in L2
constexpr int kMcMax = 1024;              // rows of A packed at once (1 MiB of pairs)
constexpr double kSerialMacs = 1 << 18;  // below this, waking the pool costs more than it saves

const Kernels& pick_kernels() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bf16"))
    return gemm_bf16::avx512_kernels();
  return gemm_bf16::portable_kernels();
}

// The calling thread's ISA choice: the fastest family this CPU runs, or the portable one.
const Kernels& kernels() {
  static const Kernels& native = pick_kernels();
  return current_isa() == Isa::Native ? native : gemm_bf16::portable_kernels();
}

thread_local PackBuffer<uint32_t> tl_pack_a("sgemm_bf16"), tl_pack_b("sgemm_bf16");

struct Problem {
  bool ta, tb;
  int M, N, K, kc;
  float alpha, beta;
  const float* A;
  int64_t lda;
  const uint16_t* B16;  // exactly one of B16 / B32 is set
  const float* B32;
  int64_t ldb;
  float* C;
  int64_t ldc;

  const float* a_at(int i, int k) const { return ta ? A + k * lda + i : A + i * lda + k; }
  int64_t b_offset(int k, int j) const { return tb ? j * ldb + k : k * ldb + j; }
};

// kc depends on K only: the smallest number of blocks of at most kKcMax, sized evenly and rounded up to a whole
// number of pairs so that no pair straddles two blocks.
int block_k(int K) {
  int blocks = (K + kKcMax - 1) / kKcMax;
  int kc = (K + blocks - 1) / blocks;
  return kc + (kc & 1);
}

void run_region(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  if (m0 >= m1 || n0 >= n1) return;
  const int nc_max = std::min(kNcMax, (n1 - n0 + kNR - 1) / kNR * kNR);
  const int pairs_max = p.kc / 2;
  uint32_t* bp = tl_pack_b.get(static_cast<size_t>(pairs_max) * nc_max);
  uint32_t* ap = tl_pack_a.get(static_cast<size_t>(pairs_max) * std::min(m1 - m0, kMcMax));
  for (int mc = m0; mc < m1; mc += kMcMax) {
    const int rows = std::min(kMcMax, m1 - mc);
    // Balanced panel heights: 64 rows become 13,13,13,13,12 rather than 14x4 + 8.
    const int panels = (rows + kMRMax - 1) / kMRMax;
    auto panel_row = [&](int ip) { return rows * ip / panels; };
    for (int k0 = 0; k0 < p.K; k0 += p.kc) {
      const int kc = std::min(p.kc, p.K - k0), pairs = (kc + 1) / 2;
      const bool first = k0 == 0;
      const float beta = first ? p.beta : 1.0f;
      const bool load_c = !first || p.beta != 0.0f;
      // The whole row block's A is packed once per k block and reused by every column block.
      for (int ip = 0; ip < panels; ++ip) {
        const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
        kern.pack_a(p.ta, p.a_at(mc + r0, k0), p.lda, r1 - r0, kc, ap + static_cast<int64_t>(r0) * pairs);
      }
      for (int jc = n0; jc < n1; jc += nc_max) {
        const int nc = std::min(nc_max, n1 - jc);
        for (int jr = 0; jr < nc; jr += kNR) {
          const int cols = std::min(kNR, nc - jr);
          const int64_t off = p.b_offset(k0, jc + jr);
          uint32_t* dst = bp + static_cast<int64_t>(jr) * pairs;
          if (p.B16) kern.pack_b16(p.tb, p.B16 + off, p.ldb, kc, cols, dst);
          else kern.pack_b32(p.tb, p.B32 + off, p.ldb, kc, cols, dst);
        }
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

// Splits C into tm x tn regions (tm * tn = threads), minimising the slowest thread's dot-product and packing work.
void choose_grid(int M, int N, int K, int threads, int& tm, int& tn) {
  double best = -1;
  for (int a = 1; a <= threads; ++a) {
    if (threads % a) continue;
    int b = threads / a;
    double mt = (M + a - 1) / a;
    double nt = ((N + kNR - 1) / kNR + b - 1) / b * kNR;
    double mblocks = std::ceil(mt / kMcMax);
    double cost = mt * nt * K / 32.0 + 0.5 * K * (nt * mblocks + mt);
    if (best < 0 || cost < best) best = cost, tm = a, tn = b;
  }
}

void scale_c(int M, int N, float beta, float* C, int64_t ldc) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

}  // namespace

namespace gemm_bf16 {

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const uint16_t* B16, const float* B32, int ldb, float beta, float* C,
                int ldc) {
  check(M >= 0 && N >= 0 && K >= 0, "sgemm_bf16: negative size M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                        " K=" + std::to_string(K));
  if (M == 0 || N == 0) return;
  check(ldc >= N, "sgemm_bf16: ldc=" + std::to_string(ldc) + " is smaller than N=" + std::to_string(N));
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  check(lda >= (trans_a ? M : K), "sgemm_bf16: lda=" + std::to_string(lda) + " is smaller than op(A)'s row length");
  check(ldb >= (trans_b ? K : N), "sgemm_bf16: ldb=" + std::to_string(ldb) + " is smaller than op(B)'s row length");

  const Problem p{trans_a, trans_b, M, N, K, block_k(K), alpha, beta, A, lda, B16, B32, ldb, C, ldc};
  int threads = tp.threads();
  if (static_cast<double>(M) * N * K < kSerialMacs) threads = 1;
  if (threads == 1) return run_region(kern, p, 0, M, 0, N);

  int tm = 1, tn = threads;
  choose_grid(M, N, K, threads, tm, tn);
  const int n_units = (N + kNR - 1) / kNR;
  tp.run_on_all([&](int w) {
    if (w >= tm * tn) return;
    const int bi = w / tn, bj = w % tn;
    const int m0 = static_cast<int>(int64_t{M} * bi / tm), m1 = static_cast<int>(int64_t{M} * (bi + 1) / tm);
    const int n0 = std::min(N, n_units * bj / tn * kNR), n1 = std::min(N, n_units * (bj + 1) / tn * kNR);
    run_region(kern, p, m0, m1, n0, n1);
  });
}

}  // namespace gemm_bf16

void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  gemm_bf16::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, B, nullptr, ldb, beta, C, ldc);
}

void sgemm_bf16(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  gemm_bf16::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, nullptr, B, ldb, beta, C, ldc);
}

const char* sgemm_bf16_isa() { return kernels().name; }

}  // namespace moe::cpu
