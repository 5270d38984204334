// sgemm driver: Goto-style blocking (B blocks of kc x nc packed once per block, A packed one mr-row panel at
// a time so it stays in L1 while B panels stream from L2), threads over disjoint C regions (never over K),
// and the kc blocks are a function of K alone so every C element sees the same reduction order.
#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cpu/gemm_kernels.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/pack_buffer.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

using gemm::Kernels;

constexpr int kKcMax = 256;   // A panel (14 x kc) stays in L1
constexpr int kNcMax = 384;   // B block (kc x nc = 384 KiB) stays in L2
constexpr int kDirectBRows = 28;  // up to two full A panels
constexpr double kSerialMacs = 1 << 18;  // below this, waking the pool costs more than it saves

const Kernels& pick_kernels() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return gemm::avx512_kernels();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gemm::avx2_kernels();
  return gemm::scalar_kernels();
}

// The calling thread's ISA choice: the fastest family this CPU runs, or the portable one.
const Kernels& kernels() {
  static const Kernels& native = pick_kernels();
  return current_isa() == Isa::Native ? native : gemm::scalar_kernels();
}

thread_local PackBuffer<float> tl_pack_a("sgemm"), tl_pack_b("sgemm");

struct Problem {
  bool ta, tb;
  int M, N, K, kc;
  float alpha, beta;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float* C;
  int64_t ldc;

  const float* a_at(int i, int k) const { return ta ? A + k * lda + i : A + i * lda + k; }
  const float* b_at(int k, int j) const { return tb ? B + j * ldb + k : B + k * ldb + j; }
};

// kc depends on K only: the smallest number of blocks of at most kKcMax, sized evenly.
int block_k(int K) {
  int blocks = (K + kKcMax - 1) / kKcMax;
  return (K + blocks - 1) / blocks;
}

void run_region(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  if (m0 >= m1 || n0 >= n1) return;
  const int nr = kern.nr;
  const int rows = m1 - m0;
  // With few rows each B element is used by one or two tiles: reading a non-transposed B in place beats
  // copying it first. With more, a non-transposed B is packed by the first A panel's kernels as they read it.
  const bool pack_b = p.tb || rows > kDirectBRows;
  const bool fused_pack = pack_b && !p.tb;
  const int nc_max = std::min(kNcMax / nr * nr, (n1 - n0 + nr - 1) / nr * nr);
  float* bp = pack_b ? tl_pack_b.get(static_cast<size_t>(p.kc) * nc_max) : nullptr;
  float* ap = tl_pack_a.get(static_cast<size_t>(p.kc) * kern.mr_max);
  // Balanced panel heights: 64 rows become 13,13,13,13,12 rather than 14x4 + 8.
  const int panels = (rows + kern.mr_max - 1) / kern.mr_max;
  for (int jc = n0; jc < n1; jc += nc_max) {
    const int nc = std::min(nc_max, n1 - jc);
    for (int k0 = 0; k0 < p.K; k0 += p.kc) {
      const int kc = std::min(p.kc, p.K - k0);
      const bool first = k0 == 0;
      const float beta = first ? p.beta : 1.0f;
      const bool load_c = !first || p.beta != 0.0f;
      if (pack_b && !fused_pack)
        for (int jr = 0; jr < nc; jr += nr)
          kern.pack_b(p.tb, p.b_at(k0, jc + jr), p.ldb, kc, std::min(nr, nc - jr), bp + static_cast<int64_t>(jr) * kc);
      for (int ip = 0; ip < panels; ++ip) {
        const int i0 = m0 + rows * ip / panels, i1 = m0 + rows * (ip + 1) / panels;
        const bool in_place = !pack_b || (fused_pack && ip == 0);
        const float* b = in_place ? p.b_at(k0, jc) : bp;
        const int64_t panel_stride = in_place ? nr : int64_t{kc} * nr, k_stride = in_place ? p.ldb : nr;
        kern.pack_a(p.ta, p.a_at(i0, k0), p.lda, i1 - i0, kc, ap);
        for (int jr = 0; jr < nc;)
          jr += kern.kernel(i1 - i0, nc - jr, kc, ap, b + jr / nr * panel_stride, panel_stride, k_stride,
                            p.C + i0 * p.ldc + jc + jr, p.ldc, p.alpha, beta, load_c,
                            fused_pack && ip == 0 ? bp + static_cast<int64_t>(jr) * kc : nullptr);
      }
    }
  }
}

// Splits C into tm x tn regions (tm * tn = threads), minimising the slowest thread's FMA, packing and C work.
void choose_grid(const Kernels& kern, int M, int N, int K, int threads, int& tm, int& tn) {
  double best = -1;
  for (int a = 1; a <= threads; ++a) {
    if (threads % a) continue;
    int b = threads / a;
    double mt = (M + a - 1) / a;
    double nt = ((N + kern.nr - 1) / kern.nr + b - 1) / b * kern.nr;
    double nblocks = std::ceil(nt / kNcMax);
    double cost = mt * nt * K / 16.0 + 0.5 * K * (nt + mt * nblocks);
    // Cutting rows into pieces makes every pass over C write short strided runs; it shows when K is small.
    if (b > 1) cost += 0.25 * mt * nt * std::ceil(double(K) / kKcMax);
    if (best < 0 || cost < best) best = cost, tm = a, tn = b;
  }
}

void scale_c(int M, int N, float beta, float* C, int64_t ldc) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

}  // namespace

namespace gemm {

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  check(M >= 0 && N >= 0 && K >= 0, "sgemm: negative size M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                        " K=" + std::to_string(K));
  if (M == 0 || N == 0) return;
  check(ldc >= N, "sgemm: ldc=" + std::to_string(ldc) + " is smaller than N=" + std::to_string(N));
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  check(lda >= (trans_a ? M : K), "sgemm: lda=" + std::to_string(lda) + " is smaller than op(A)'s row length");
  check(ldb >= (trans_b ? K : N), "sgemm: ldb=" + std::to_string(ldb) + " is smaller than op(B)'s row length");

  const Problem p{trans_a, trans_b, M, N, K, block_k(K), alpha, beta, A, lda, B, ldb, C, ldc};
  int threads = tp.threads();
  if (static_cast<double>(M) * N * K < kSerialMacs) threads = 1;
  if (threads == 1) return run_region(kern, p, 0, M, 0, N);

  int tm = 1, tn = threads;
  choose_grid(kern, M, N, K, threads, tm, tn);
  const int n_units = (N + kern.nr - 1) / kern.nr;
  tp.run_on_all([&](int w) {
    if (w >= tm * tn) return;
    const int bi = w / tn, bj = w % tn;
    const int m0 = static_cast<int>(int64_t{M} * bi / tm), m1 = static_cast<int>(int64_t{M} * (bi + 1) / tm);
    const int n0 = std::min(N, n_units * bj / tn * kern.nr), n1 = std::min(N, n_units * (bj + 1) / tn * kern.nr);
    run_region(kern, p, m0, m1, n0, n1);
  });
}

}  // namespace gemm

void sgemm(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  gemm::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* sgemm_isa() { return kernels().name; }

}  // namespace moe::cpu
