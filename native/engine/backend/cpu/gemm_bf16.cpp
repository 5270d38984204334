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

const Kernels& kernels() {
  static const Kernels& native = amx_support().usable                     ? gemm_bf16::amx_kernels()
                                 : gemm_driver::cpu_features().avx512_bf16 ? gemm_bf16::avx512_kernels()
                                 : gemm_driver::cpu_features().avx512      ? gemm_bf16::avx512_fma_kernels()
                                                                           : gemm_bf16::portable_kernels();
  return gemm_driver::for_calling_thread(native, gemm_bf16::portable_kernels());
}

thread_local PackBuffer<uint32_t> tl_pack_a("sgemm_bf16"), tl_pack_b("sgemm_bf16");

struct Problem : gemm_driver::Problem {
  const uint16_t* B16;  // exactly one of B16 / B32 is set
  const float* B32;
};

void run_region(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  if (m0 >= m1 || n0 >= n1) return;
  const int nc_max = std::min(kNcMax, (n1 - n0 + kNR - 1) / kNR * kNR);
  const int pairs_max = p.kc / 2;
  uint32_t* bp = tl_pack_b.get(static_cast<size_t>(pairs_max) * nc_max);
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

}  // namespace

namespace gemm_bf16 {

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const uint16_t* B16, const float* B32, int ldb, float beta, float* C,
                int ldc) {
  if (!gemm_driver::prepare("sgemm_bf16", trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  const Problem p{{trans_a, trans_b, M, N, K, gemm_driver::block_k(K, kKcMax, true), alpha, beta, A, lda, ldb, C, ldc},
                  B16, B32};
  // The slowest thread's dot-product and packing work.
  auto cost = [&](double mt, double nt, int) {
    return mt * nt * K / 32.0 + 0.5 * K * (nt * std::ceil(mt / kMcMax) + mt);
  };
  gemm_driver::run_regions(tp, M, N, K, kNR, cost,
                           [&](int m0, int m1, int n0, int n1) { run_region(kern, p, m0, m1, n0, n1); });
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

std::string sgemm_bf16_kernel() {
  const AmxSupport& amx = amx_support();
  std::string s = kernels().name;
  if (amx.cpu_has_amx && !amx.usable && current_isa() == Isa::Native) s += " (AMX not used: " + amx.reason + ")";
  return s;
}

}  // namespace moe::cpu
