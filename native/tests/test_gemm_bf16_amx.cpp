// The AMX sgemm_bf16 family. Its kernel runs here on the emulated tile layer (every CPU): against the double
// reference over tile edges in M, N and K (1, 15, 16, 17, 31, 33, ...), every transpose combination, bf16 and fp32
// B, alpha/beta and ldc > N; bit-identical for 1 and 2 threads and for any row partition; and TDPBF16PS's
// arithmetic as modelled (two pair chains per instruction). The emulation is not held to the other families' bits:
// TDPBF16PS groups the sums differently from vdpbf16ps, so all the families are held to the same error bound.
// The hardware family runs the same checks where the CPU has AMX; elsewhere its test says it was skipped.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cpu/amx_support.h"
#include "backend/cpu/gemm_driver.h"
#include "gemm_bf16_checks.h"
#include "testing.h"

using moe::ThreadPool;
using moe::cpu::gemm_bf16::Kernels;
using namespace gemm_bf16_checks;

namespace {

// Every shape within the fp32 accumulation bound, C's padding untouched.
void expect_within_bound(const Kernels& kern) {
  ThreadPool tp(2);
  gemm_bf16_checks::expect_within_bound(
      std::string(kern.name) + ": ", {1, 15, 16, 17, 31, 32, 33, 64, 100}, {1, 15, 16, 17, 31, 33, 64, 100, 130},
      {1, 2, 15, 16, 17, 31, 32, 33, 34, 64, 100, 600}, 300,
      [&](const Operands& o, float alpha, float beta, bool b16) { return run_with(kern, tp, o, alpha, beta, b16); });
}

// The same bits for 1 and 2 threads, and for a row computed in any sub-block of the rows.
void expect_deterministic(const Kernels& kern) {
  ThreadPool t1(1), t2(2);
  const int shapes[][3] = {{100, 130, 600}, {33, 300, 100}, {257, 40, 64}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& s : shapes) {
        const Operands o = make(ta, tb, s[0], s[1], s[2], 1, 500 + s[0] + ta + 2 * tb);
        const bool b16 = (ta + tb) % 2 == 0;
        const std::vector<float> full = run_with(kern, t1, o, 1.0f, 1.0f, b16);
        CHECK_MSG(bits_equal(full, run_with(kern, t2, o, 1.0f, 1.0f, b16)),
                  std::string(kern.name) + ": " + shape_name(o) + ": 2 threads differ from 1");
        const int r0 = 17, rows = s[0] - r0 - 3;
        Operands part = o;
        part.M = rows;
        part.A.erase(part.A.begin(), part.A.begin() + (o.ta ? r0 : size_t(r0) * o.lda));
        part.C.assign(o.C.begin() + size_t(r0) * o.ldc, o.C.begin() + size_t(r0 + rows) * o.ldc);
        const std::vector<float> sub = run_with(kern, t2, part, 1.0f, 1.0f, b16);
        CHECK_MSG(std::equal(sub.begin(), sub.end(), full.begin() + size_t(r0) * o.ldc,
                             [](float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; }),
                  std::string(kern.name) + ": " + shape_name(o) + ": rows differ when computed in rows [17, " +
                      std::to_string(r0 + rows) + ")");
      }
}

// One C element of a 1 x K by K x 1 product with A's k-th value a[k] and B all ones.
float dot(const Kernels& kern, const std::vector<float>& a) {
  ThreadPool tp(1);
  const int K = static_cast<int>(a.size());
  const std::vector<float> b(K, 1.0f);
  float c = 0.0f;
  moe::cpu::gemm_bf16::sgemm_with(kern, tp, false, false, 1, 1, K, 1.0f, a.data(), K, nullptr, b.data(), nullptr, 1, 0.0f, &c,
                                  1);
  return c;
}

// A's values for the pair-chain probe: pairs (2^30, 1) and (-2^30, 1), adjacent (one TDPBF16PS) or 16 pairs apart
// (two, the second one the K tail).
std::vector<float> probe(bool apart) {
  std::vector<float> a(apart ? 34 : 4, 0.0f);
  const int second = apart ? 32 : 2;
  a[0] = 0x1p30f, a[1] = 1.0f, a[second] = -0x1p30f, a[second + 1] = 1.0f;
  return a;
}

}  // namespace

TEST(amx_emulated_within_fp32_bound_on_tile_edges) {
  expect_within_bound(moe::cpu::gemm_bf16::amx_emulated_kernels());
}

TEST(amx_emulated_deterministic_across_threads_and_rows) {
  expect_deterministic(moe::cpu::gemm_bf16::amx_emulated_kernels());
}

// TDPBF16PS as modelled: within one instruction (16 pairs) the even and the odd products run in two chains joined
// at the end; each instruction's joined sum is added to C. With 2^30 and 1 (an ulp of 2^30 is 128):
//   pairs (2^30, 1), (-2^30, 1) in one instruction: even 2^30 - 2^30 = 0, odd 1 + 1 = 2, C = 2 (vdpbf16ps's single
//   chain 1, 2^30, 2^30, 0 gives 0);
//   the same pairs 16 apart (two instructions, the second one the K tail): C = (2^30 + 1) + (-2^30 + 1) = 0.
TEST(amx_emulated_follows_tdpbf16ps_pair_chains) {
  const Kernels& emulated = moe::cpu::gemm_bf16::amx_emulated_kernels();
  CHECK_MSG(dot(emulated, probe(false)) == 2.0f, "one instruction: " + std::to_string(dot(emulated, probe(false))));
  CHECK_MSG(dot(emulated, probe(true)) == 0.0f, "two instructions: " + std::to_string(dot(emulated, probe(true))));
  CHECK(dot(moe::cpu::gemm_bf16::portable_kernels(), probe(false)) == 0.0f);
}

// The hardware family's A packer is AVX-512 code (no tile instructions), so it runs wherever the CPU has
// AVX512_BF16, AMX or not: the same words as the plain packer the emulation uses, and nothing written past them.
TEST(amx_hardware_a_packer_writes_the_plain_packers_words) {
  if (!moe::cpu::gemm_driver::cpu_features().avx512_bf16) {
    std::printf("  SKIPPED: this CPU has no AVX512_BF16, which the AMX family's packers need\n");
    return;
  }
  const Kernels& hw = moe::cpu::gemm_bf16::amx_kernels();
  const Kernels& plain = moe::cpu::gemm_bf16::amx_emulated_kernels();
  // Values the rounding treats specially: ties to even both ways, a NaN of each sign, infinities, the largest
  // float (rounds to inf), denormals, signed zeros; the rest ordinary.
  const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0x7FC00001u, 0xFF800001u, 0x7F800000u, 0xFF800000u,
                              0x7F7FFFFFu, 0x00000001u, 0x807FFFFFu, 0x00008000u, 0x80000000u, 0x00000000u};
  int cases = 0;
  for (const bool trans : {false, true})
    for (const int rows : {1, 7, 15, 16, 17, 31, 32})
      for (const int kc : {1, 2, 3, 31, 32, 33, 63, 64, 65, 100, 512}) {
        const int64_t lda = trans ? rows + 3 : kc + 5;
        const int64_t lines = trans ? kc : rows;
        std::vector<float> a(static_cast<size_t>(lines * lda));
        for (size_t i = 0; i < a.size(); ++i) {
          const uint32_t bits = i % 7 == 3 ? special[(i / 7) % std::size(special)]
                                           : 0x3C000000u + static_cast<uint32_t>((i * 2654435761u) % 0x06000000u);
          std::memcpy(&a[i], &bits, 4);
        }
        const size_t words = static_cast<size_t>(rows) * ((kc + 1) / 2);
        std::vector<uint32_t> got(words + 40, 0xA5A5A5A5u), want(words + 40, 0xA5A5A5A5u);
        hw.pack_a(trans, a.data(), lda, rows, kc, got.data());
        plain.pack_a(trans, a.data(), lda, rows, kc, want.data());
        CHECK_MSG(got == want, "trans " + std::to_string(trans) + ", rows " + std::to_string(rows) + ", kc " +
                                   std::to_string(kc));
        ++cases;
      }
  std::printf("  %d shapes: the same words\n", cases);
}

// The real tiles: the same bound and determinism. Their bits are compared with the emulation's and reported, not
// required: the model follows the documented pseudocode, not measurements of the hardware.
TEST(amx_hardware_within_fp32_bound_where_the_cpu_has_amx) {
  const moe::cpu::AmxSupport& amx = moe::cpu::amx_support();
  if (!amx.usable) {
    std::printf("  SKIPPED: %s\n", amx.cpu_has_amx ? ("AMX present but not usable: " + amx.reason).c_str()
                                                   : amx.reason.c_str());
    return;
  }
  const Kernels& hw = moe::cpu::gemm_bf16::amx_kernels();
  CHECK(std::string(moe::cpu::sgemm_bf16_isa()) == "amx");
  expect_within_bound(hw);
  expect_deterministic(hw);
  ThreadPool tp(2);
  const Operands o = make(false, true, 100, 130, 600, 1, 77);
  const bool same = bits_equal(run_with(hw, tp, o, 1.0f, 0.0f, true),
                               run_with(moe::cpu::gemm_bf16::amx_emulated_kernels(), tp, o, 1.0f, 0.0f, true));
  std::printf("  AMX hardware %s the emulation's bits (100x130x600); pair-chain probes give %g and %g (model: 2, 0)\n",
              same ? "matches" : "differs from", dot(hw, probe(false)), dot(hw, probe(true)));
}

TEST_MAIN()
