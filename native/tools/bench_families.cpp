// Kernel families side by side (bench_families.h). Packers: they round fp32 operands to bf16 pair words once per
// call (A) or per weight (B); each family's are timed on the same 512-deep panel of a 2048-wide matrix, both
// transposes: A at the family's tallest panel (up to 32 rows), B at one 32-column panel. The AMX family's A packer
// is also timed against the plain form it must match (the emulated family's), since a tile kernel computes fast
// enough for a slow packer to matter.
#include "bench_families.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_driver.h"
#include "backend/cpu/gemm_kernels.h"
#include "bench_peak.h"
#include "bench_timing.h"
#include "core/half.h"
#include "core/rng.h"

namespace bench {
namespace {

using moe::cpu::gemm_bf16::Kernels;

constexpr int kKc = 512, kWidth = 2048;

// Every bf16 family whose packers run here; the AMX one's need AVX512_BF16 only, and the emulated AMX family's are
// the plain form the real one must match.
std::vector<const Kernels*> bf16_packer_families() {
  namespace g = moe::cpu::gemm_bf16;
  const auto& f = moe::cpu::gemm_driver::cpu_features();
  std::vector<const Kernels*> v{&g::portable_kernels()};
  if (f.avx2_fma) v.push_back(&g::avx2_fma_kernels());
  if (f.avx512) v.push_back(&g::avx512_fma_kernels());
  if (f.avx512_bf16) v.push_back(&g::avx512_kernels()), v.push_back(&g::amx_kernels());
  v.push_back(&g::amx_emulated_kernels());
  return v;
}

// Median ns per element of `calls` packs, each of a panel at a different place in `a`.
template <class Pack>
double ns_per_element(Pack&& pack, int elements) {
  const int calls = 64;
  return 1e9 * time_median([&] {
           for (int c = 0; c < calls; ++c) pack(c);
         }) / (double(calls) * elements);
}

}  // namespace

void bf16_packers(bool json) {
  std::vector<float> a(size_t(kWidth) * kWidth);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 2.0f * moe::random_uniform(11, 0, i) - 1.0f;
  alignas(64) static uint32_t dst[32 * kKc];  // the packers store whole aligned panels
  if (!json) std::printf("%-13s %5s  %14s %14s  %14s %14s\n", "family", "rows", "A ns/el", "A^T ns/el", "B ns/el", "B^T ns/el");
  double amx[2] = {0, 0}, plain[2] = {0, 0};
  for (const Kernels* k : bf16_packer_families()) {
    const int rows = std::min(k->mr_max, 32), cols = moe::cpu::gemm_bf16::kNR;
    double t[4];
    for (int trans = 0; trans < 2; ++trans) {
      // A: rows x kKc of op(A); trans reads it k-major. B: kKc x cols of op(B); trans reads it column-major.
      t[trans] = ns_per_element(
          [&](int c) {
            const float* at = a.data() + (trans ? c % 64 * rows : c % 64 * rows * kWidth);
            k->pack_a(trans, at, kWidth, rows, kKc, dst);
          },
          rows * kKc);
      t[2 + trans] = ns_per_element(
          [&](int c) {
            const float* at = a.data() + (trans ? c % 64 * cols * kWidth : c % 64 * cols);
            k->pack_b32(trans, at, kWidth, kKc, cols, dst);
          },
          cols * kKc);
    }
    if (k == &moe::cpu::gemm_bf16::amx_kernels()) amx[0] = t[0], amx[1] = t[1];
    if (k == &moe::cpu::gemm_bf16::amx_emulated_kernels()) plain[0] = t[0], plain[1] = t[1];
    if (json)
      std::printf("{\"bench\":\"bf16_packers\",\"family\":\"%s\",\"rows\":%d,\"a_ns\":%.4f,\"at_ns\":%.4f,"
                  "\"b_ns\":%.4f,\"bt_ns\":%.4f}\n", k->name, rows, t[0], t[1], t[2], t[3]);
    else
      std::printf("%-13s %5d  %14.3f %14.3f  %14.3f %14.3f\n", k->name, rows, t[0], t[1], t[2], t[3]);
  }
  if (amx[0] > 0 && !json)
    std::printf("amx A packer against its plain form: %.1fx (A), %.1fx (A^T)\n", plain[0] / amx[0], plain[1] / amx[1]);
}

// An OLMoE expert at 1024 tokens (128 rows routed to it): the forward's x·Wᵀ, the input gradient's dy·W and the
// weight gradient's dyᵀ·x, all 2048 x 2048 matrices. The scalar and portable families are left out: minutes each.
void gemm_families(moe::ThreadPool& tp, bool json) {
  struct Shape {
    const char* op;
    int M, N, K;
    bool ta, tb;
  };
  const Shape shapes[] = {{"x.Wt", 128, 2048, 2048, false, true},
                          {"dy.W", 128, 2048, 2048, false, false},
                          {"dyt.x", 2048, 2048, 128, true, false}};
  const Peak peak = measure_peak(tp);
  const double avx2_peak = avx2_fma_peak(tp);
  const auto& f = moe::cpu::gemm_driver::cpu_features();
  namespace g = moe::cpu::gemm;
  namespace g16 = moe::cpu::gemm_bf16;
  std::vector<std::pair<const g::Kernels*, double>> fp32;  // family, the peak bounding it
  if (f.avx2_fma) fp32.push_back({&g::avx2_kernels(), avx2_peak});
  if (f.avx512) fp32.push_back({&g::avx512_kernels(), peak.fp32_gflops});
  std::vector<std::pair<const g16::Kernels*, double>> bf16;
  if (f.avx2_fma) bf16.push_back({&g16::avx2_fma_kernels(), avx2_peak});
  if (f.avx512) bf16.push_back({&g16::avx512_fma_kernels(), peak.fp32_gflops});
  if (f.avx512_bf16) bf16.push_back({&g16::avx512_kernels(), std::string(peak.bf16_isa) == "amx" ? 0.0 : peak.bf16_gflops});
  if (moe::cpu::amx_support().usable) bf16.push_back({&g16::amx_kernels(), peak.bf16_gflops});
  if (!json)
    std::printf("peaks: fp32 %s %.0f, avx2 fma %.0f, bf16 %s %.0f GFLOP/s\n%-12s %-6s %5s %5s %5s  %9s %6s\n",
                peak.fp32_isa, peak.fp32_gflops, avx2_peak, peak.bf16_isa, peak.bf16_gflops, "family", "op", "M",
                "N", "K", "GFLOP/s", "peak");
  auto report = [&](const char* dtype, const char* family, const Shape& s, double seconds, double bound) {
    const double gflops = 2.0 * s.M * s.N * s.K / seconds / 1e9, frac = bound > 0 ? gflops / bound : 0.0;
    if (json)
      std::printf("{\"bench\":\"gemm_family\",\"dtype\":\"%s\",\"family\":\"%s\",\"op\":\"%s\",\"M\":%d,"
                  "\"N\":%d,\"K\":%d,\"gflops\":%.2f,\"peak_frac\":%.3f}\n", dtype, family, s.op, s.M, s.N, s.K,
                  gflops, frac);
    else
      std::printf("%-12s %-6s %5d %5d %5d  %9.1f %6.2f\n", family, s.op, s.M, s.N, s.K, gflops, frac);
    std::fflush(stdout);
  };
  for (const Shape& s : shapes) {
    std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.N) * s.K), C(size_t(s.M) * s.N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = 2.0f * moe::random_uniform(12, 0, i) - 1.0f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = 2.0f * moe::random_uniform(12, 1, i) - 1.0f;
    std::vector<uint16_t> B16(B.size());
    for (size_t i = 0; i < B.size(); ++i) B16[i] = moe::f32_to_bf16(B[i]);
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    for (auto [k, bound] : fp32)
      report("fp32", k->name, s, time_median([&] {
               g::sgemm_with(*k, tp, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), s.N);
             }), bound);
    for (auto [k, bound] : bf16)
      report("bf16", k->name, s, time_median([&] {
               g16::sgemm_with(*k, tp, s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B16.data(), nullptr, nullptr, ldb,
                               0.0f, C.data(), s.N);
             }), bound);
  }
}

}  // namespace bench
