// sgemm driver: Goto-style blocking (B blocks of kc x nc packed once per block, A packed one mr-row panel at
// a time so it stays in L1 while B panels stream from L2), threads over disjoint C regions (never over K),
// and the kc blocks are a function of K alone so every C element sees the same reduction order.
#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/gemm_driver.h"
#include "backend/cpu/gemm_kernels.h"
#include "backend/cpu/pack_buffer.h"

namespace moe::cpu {
namespace {

using gemm::Kernels;

constexpr int kKcMax = 256;   // A panel (14 x kc) stays in L1
constexpr int kNcMax = 384;   // B block (kc x nc = 384 KiB) stays in L2
constexpr int kDirectBRows = 28;  // up to two full A panels

const Kernels& kernels() {
  static const Kernels& native = gemm_driver::cpu_features().avx512     ? gemm::avx512_kernels()
                                 : gemm_driver::cpu_features().avx2_fma ? gemm::avx2_kernels()
                                                                        : gemm::scalar_kernels();
  return gemm_driver::for_calling_thread(native, gemm::scalar_kernels());
}

thread_local PackBuffer<float> tl_pack_a("sgemm"), tl_pack_b("sgemm");

struct Problem : gemm_driver::Problem {
  const float* B;
  const float* b_at(int k, int j) const { return B + b_offset(k, j); }
};

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

}  // namespace

namespace gemm {

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (!gemm_driver::prepare("sgemm", trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  const Problem p{{trans_a, trans_b, M, N, K, gemm_driver::block_k(K, kKcMax, false), alpha, beta, A, lda, ldb, C, ldc},
                  B};
  // The slowest thread's FMA, packing and C work.
  auto cost = [&](double mt, double nt, int tn) {
    double c = mt * nt * K / 16.0 + 0.5 * K * (nt + mt * std::ceil(nt / kNcMax));
    // Cutting rows into pieces makes every pass over C write short strided runs; it shows when K is small.
    if (tn > 1) c += 0.25 * mt * nt * std::ceil(double(K) / kKcMax);
    return c;
  };
  gemm_driver::run_regions(tp, M, N, K, kern.nr, cost,
                           [&](int m0, int m1, int n0, int n1) { run_region(kern, p, m0, m1, n0, n1); });
}

}  // namespace gemm

void sgemm(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  gemm::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* sgemm_isa() { return kernels().name; }

}  // namespace moe::cpu
