// The packers round fp32 operands to bf16 pair words once per call (A) or per weight (B). Each family's are timed
// on the same 512-deep panel of a 2048-wide matrix, both transposes: A at the family's tallest panel (up to 32
// rows), B at one 32-column panel. The AMX family's A packer is also timed against the plain form it must match
// (the emulated family's), since a tile kernel computes fast enough for a slow packer to matter.
#include "bench_packers.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_driver.h"
#include "bench_timing.h"
#include "core/rng.h"

namespace bench {
namespace {

using moe::cpu::gemm_bf16::Kernels;

constexpr int kKc = 512, kWidth = 2048;

struct Family {
  const Kernels* k;
  const char* label;
};

std::vector<Family> families() {
  namespace g = moe::cpu::gemm_bf16;
  const auto& f = moe::cpu::gemm_driver::cpu_features();
  std::vector<Family> v{{&g::portable_kernels(), "portable"}};
  if (f.avx2_fma) v.push_back({&g::avx2_fma_kernels(), "avx2_fma"});
  if (f.avx512) v.push_back({&g::avx512_fma_kernels(), "avx512_fma"});
  if (f.avx512_bf16) v.push_back({&g::avx512_kernels(), "avx512_bf16"});
  if (f.avx512_bf16) v.push_back({&g::amx_kernels(), "amx"});  // its packers need AVX512_BF16 only
  v.push_back({&g::amx_emulated_kernels(), "amx_plain"});
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
  if (!json) std::printf("%-12s %5s  %14s %14s  %14s %14s\n", "family", "rows", "A ns/el", "A^T ns/el", "B ns/el", "B^T ns/el");
  double amx[2] = {0, 0}, plain[2] = {0, 0};
  for (const Family& f : families()) {
    const int rows = std::min(f.k->mr_max, 32), cols = moe::cpu::gemm_bf16::kNR;
    double t[4];
    for (int trans = 0; trans < 2; ++trans) {
      // A: rows x kKc of op(A); trans reads it k-major. B: kKc x cols of op(B); trans reads it column-major.
      t[trans] = ns_per_element(
          [&](int c) {
            const float* at = a.data() + (trans ? c % 64 * rows : c % 64 * rows * kWidth);
            f.k->pack_a(trans, at, kWidth, rows, kKc, dst);
          },
          rows * kKc);
      t[2 + trans] = ns_per_element(
          [&](int c) {
            const float* at = a.data() + (trans ? c % 64 * cols * kWidth : c % 64 * cols);
            f.k->pack_b32(trans, at, kWidth, kKc, cols, dst);
          },
          cols * kKc);
    }
    if (f.k == &moe::cpu::gemm_bf16::amx_kernels()) amx[0] = t[0], amx[1] = t[1];
    if (f.k == &moe::cpu::gemm_bf16::amx_emulated_kernels()) plain[0] = t[0], plain[1] = t[1];
    if (json)
      std::printf("{\"bench\":\"bf16_packers\",\"family\":\"%s\",\"rows\":%d,\"a_ns\":%.4f,\"at_ns\":%.4f,"
                  "\"b_ns\":%.4f,\"bt_ns\":%.4f}\n", f.label, rows, t[0], t[1], t[2], t[3]);
    else
      std::printf("%-12s %5d  %14.3f %14.3f  %14.3f %14.3f\n", f.label, rows, t[0], t[1], t[2], t[3]);
  }
  if (amx[0] > 0 && !json)
    std::printf("amx A packer against its plain form: %.1fx (A), %.1fx (A^T)\n", plain[0] / amx[0], plain[1] / amx[1]);
}

}  // namespace bench
