// sgemm_bf16: accuracy against a double-precision reference on the bf16-rounded operands (odd shapes, every
// transpose combination, bf16-stored and fp32-rounded B, alpha/beta, padded leading dimensions), and the exactness
// contract bit for bit: thread counts, row sub-blocks, AVX512_BF16 against the portable emulation (denormal range
// included), each vector family's packers against the portable ones, plus the fp32 -> bf16 array conversion
// against moe::f32_to_bf16.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/convert_bf16.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "backend/cpu/gemm_driver.h"
#include "core/half.h"
#include "gemm_bf16_checks.h"
#include "testing.h"

using moe::ThreadPool;
using moe::cpu::sgemm_bf16;

using namespace gemm_bf16_checks;

// Every element within the fp32 accumulation bound of the exact product of the bf16-rounded operands.
TEST(sgemm_bf16_matches_double_reference_on_rounded_operands) {
  ThreadPool tp(2);
  const std::vector<int> sizes = {1, 2, 7, 17, 33, 100, 257};
  expect_within_bound("", sizes, sizes, {1, 2, 3, 31, 64, 257, 600, 1100}, 100,
                      [&](const Operands& o, float a, float b, bool b16) { return run(tp, o, a, b, b16); });
}

TEST(sgemm_bf16_fp32_b_equals_its_bf16_copy) {
  ThreadPool tp(2);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Operands o = make(ta, tb, 45, 77, 301, 1, 7 + 2 * ta + tb);
      CHECK_MSG(bits_equal(run(tp, o, 1.0f, 0.0f, true), run(tp, o, 1.0f, 0.0f, false)), shape_name(o));
    }
}

TEST(sgemm_bf16_beta_zero_ignores_c_and_k_zero_scales) {
  ThreadPool tp(2);
  Operands o = make(false, true, 9, 40, 70, 0, 3);
  for (float& c : o.C) c = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> C = run(tp, o, 1.0f, 0.0f, true);
  for (float c : C) CHECK(std::isfinite(c));

  Operands z = make(false, false, 5, 6, 0, 0, 4);
  const std::vector<float> scaled = run(tp, z, 1.0f, 0.5f, true);
  for (size_t i = 0; i < scaled.size(); ++i) CHECK(scaled[i] == 0.5f * z.C[i]);
}

TEST(sgemm_bf16_bit_identical_across_thread_counts) {
  ThreadPool t1(1), t2(2), t3(3), t4(4);
  const int shapes[][3] = {{512, 256, 1024}, {64, 2048, 256}, {1000, 96, 513}, {7, 3000, 300}, {333, 333, 77}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& s : shapes) {
        const Operands o = make(ta, tb, s[0], s[1], s[2], 1, 50 + s[0] + ta + 2 * tb);
        const bool b16 = (ta + tb) % 2 == 0;
        const std::vector<float> ref = run(t1, o, 1.0f, 1.0f, b16);
        CHECK_MSG(bits_equal(ref, run(t2, o, 1.0f, 1.0f, b16)), shape_name(o) + ": 2 threads differ from 1");
        CHECK_MSG(bits_equal(ref, run(t3, o, 1.0f, 1.0f, b16)), shape_name(o) + ": 3 threads differ from 1");
        CHECK_MSG(bits_equal(ref, run(t4, o, 1.0f, 1.0f, b16)), shape_name(o) + ": 4 threads differ from 1");
      }
}

// A token's output must not depend on which rows share its call (expert segments, capacity padding).
TEST(sgemm_bf16_rows_independent_of_partition) {
  ThreadPool tp(2);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Operands o = make(ta, tb, 300, 130, 700, 2, 80 + 2 * ta + tb);
      const std::vector<float> full = run(tp, o, 1.0f, 0.0f, true);
      const int cuts[] = {0, 1, 14, 15, 64, 200, 299, 300};
      for (int c = 0; c + 1 < 8; ++c) {
        const int r0 = cuts[c], rows = cuts[c + 1] - cuts[c];
        std::vector<float> part(size_t(rows) * o.ldc, 0.0f);
        const float* a = o.ta ? o.A.data() + r0 : o.A.data() + size_t(r0) * o.lda;
        sgemm_bf16(tp, o.ta, o.tb, rows, o.N, o.K, 1.0f, a, o.lda, o.B16.data(), o.ldb, 0.0f, part.data(), o.ldc);
        for (int i = 0; i < rows; ++i)
          CHECK_MSG(std::memcmp(&part[size_t(i) * o.ldc], &full[size_t(r0 + i) * o.ldc], o.N * sizeof(float)) == 0,
                    shape_name(o) + ": row " + std::to_string(r0 + i) + " differs when computed in rows [" +
                        std::to_string(r0) + ", " + std::to_string(r0 + rows) + ")");
      }
    }
}

// A weight packed once gives every later call the bits of packing it per call: both transposes of B, K with one
// and several k blocks (odd ones too), N off the 32-column panels, padded B, beta 0 and 1, any thread count, every
// kernel family this CPU runs (AMX's through its emulation). A packed block put in the wrong place, a panel stride
// off by one, or a last odd pair not zero-padded changes bits here.
TEST(sgemm_bf16_packed_b_equals_per_call_packing) {
  using namespace moe::cpu;
  ThreadPool t1(1), t3(3);
  const int shapes[][3] = {{5, 33, 7}, {64, 2048, 1030}, {128, 300, 513}, {13, 64, 1500}, {1, 1, 1}};
  std::vector<const gemm_bf16::Kernels*> families = {&gemm_bf16::portable_kernels(),
                                                     &gemm_bf16::amx_emulated_kernels()};
  if (gemm_driver::cpu_features().avx2_fma) families.push_back(&gemm_bf16::avx2_fma_kernels());
  if (gemm_driver::cpu_features().avx512) families.push_back(&gemm_bf16::avx512_fma_kernels());
  if (gemm_driver::cpu_features().avx512_bf16) families.push_back(&gemm_bf16::avx512_kernels());
  int n = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const auto& s : shapes) {
        const Operands o = make(ta, tb, s[0], s[1], s[2], n % 2, 300 + n);
        ++n;
        const int64_t words = sgemm_bf16_packed_words(o.N, o.K);
        const std::unique_ptr<uint32_t, decltype(&std::free)> packed(
            static_cast<uint32_t*>(std::aligned_alloc(64, (words * 4 + 64 + 63) / 64 * 64)), &std::free);
        packed.get()[words] = 0xA5A5A5A5u;
        sgemm_bf16_pack_b(n % 2 ? t1 : t3, o.tb, o.N, o.K, o.B16.data(), o.ldb, packed.get());
        CHECK_MSG(packed.get()[words] == 0xA5A5A5A5u, shape_name(o) + ": packing wrote past sgemm_bf16_packed_words");
        for (const gemm_bf16::Kernels* kern : families)
          for (float beta : {0.0f, 1.0f})
            for (ThreadPool* tp : {&t1, &t3}) {
              std::vector<float> got = o.C;
              gemm_bf16::sgemm_with(*kern, *tp, o.ta, false, o.M, o.N, o.K, 0.75f, o.A.data(), o.lda, nullptr,
                                    nullptr, packed.get(), o.N, beta, got.data(), o.ldc);
              CHECK_MSG(bits_equal(got, run_with(*kern, *tp, o, 0.75f, beta, true)),
                        std::string(kern->name) + ": " + shape_name(o) + " beta " + std::to_string(beta) + ", " +
                            std::to_string(tp->threads()) + " threads: packed B differs from per-call packing");
            }
      }
}

// The portable kernels emulate vdpbf16ps exactly: same bits on ordinary values and in the denormal range, where
// the instruction reads denormal inputs as zero and flushes denormal results. With beta = 0 the tiny sums are not
// hidden under C: scale 1e-19 puts products and partial sums around FLT_MIN (flushing observable), and the
// "denormal" operands put denormal A values against B values of 1e34 at every 5th k (reading them as zero is
// observable: they would otherwise contribute about 1e-5).
void expect_same_bits_as_portable(const moe::cpu::gemm_bf16::Kernels& fast) {
  ThreadPool tp(2);
  const auto& portable = moe::cpu::gemm_bf16::portable_kernels();
  int n = 0;
  // A few rows against a bf16 Bᵀ take the direct kernels where a family has them (one token at a time): K over two
  // blocks, odd K, columns past whole groups.
  const int shapes[][3] = {{37, 70, 515}, {29, 40, 515}, {1, 70, 515}, {3, 45, 1030}, {4, 33, 17}, {2, 100, 64}};
  for (const auto& s : shapes)
  for (int variant = 0; variant < 4; ++variant)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Operands o = make(ta, tb, s[0], s[1], s[2], 1, 200 + n++, variant == 1 ? 1e-19f : variant == 2 ? 3e-20f : 1.0f);
        if (variant == 3) {
          for (int i = 0; i < o.M; ++i)
            for (int k = 0; k < o.K; k += 5) {
              float& a = o.ta ? o.A[size_t(k) * o.lda + i] : o.A[size_t(i) * o.lda + k];
              a *= 1e-38f;
            }
          for (int k = 0; k < o.K; k += 5)
            for (int j = 0; j < o.N; ++j) {
              float& b = o.tb ? o.B[size_t(j) * o.ldb + k] : o.B[size_t(k) * o.ldb + j];
              b *= 1e34f;
              o.B16[&b - o.B.data()] = moe::f32_to_bf16(b);
            }
        }
        const float alpha = variant == 0 ? 0.75f : 1.0f, beta = variant == 0 ? 0.5f : 0.0f;
        for (int b16 = 0; b16 < 2; ++b16) {
          const std::vector<float> got = run_with(fast, tp, o, alpha, beta, b16);
          CHECK_MSG(bits_equal(got, run_with(portable, tp, o, alpha, beta, b16)),
                    std::string(fast.name) + ": " + shape_name(o) + " variant " + std::to_string(variant) +
                        (b16 ? " bf16 B" : " fp32 B"));
        }
      }
}

TEST(sgemm_bf16_portable_matches_avx512_bit_for_bit) {
  if (!moe::cpu::gemm_driver::cpu_features().avx512_bf16) {
    std::printf("  (skipped: this CPU has no AVX512_BF16; the portable kernels ran everywhere)\n");
    return;
  }
  expect_same_bits_as_portable(moe::cpu::gemm_bf16::avx512_kernels());
}

// The FMA kernels are vdpbf16ps bit for bit too: on ordinary values by their arithmetic, and in the denormal range
// (the same variants) through their exact fallback.
TEST(sgemm_bf16_portable_matches_avx512_fma_bit_for_bit) {
  if (!moe::cpu::gemm_driver::cpu_features().avx512) {
    std::printf("  (skipped: this CPU has no AVX-512; the portable kernels ran)\n");
    return;
  }
  expect_same_bits_as_portable(moe::cpu::gemm_bf16::avx512_fma_kernels());
}

TEST(sgemm_bf16_portable_matches_avx2_fma_bit_for_bit) {
  if (!moe::cpu::gemm_driver::cpu_features().avx2_fma) {
    std::printf("  (skipped: this CPU has no AVX2 and FMA; the portable kernels ran)\n");
    return;
  }
  expect_same_bits_as_portable(moe::cpu::gemm_bf16::avx2_fma_kernels());
}

// Each vector family's own packers write the portable packers' words: A panels of every height up to its mr_max and
// B panels of every width up to kNR, both storage orders, k depths around the vector widths (odd ones leave a
// half pair), from fp32 with values that round up, tie, overflow and are NaN, and from bf16.
namespace {

// n packed words at a 64-byte boundary, as the driver's pack buffers are (the AVX-512 packers store whole aligned
// vectors), the rest of the vector holding a fill pattern.
struct PackedWords {
  std::vector<uint32_t> store;
  uint32_t* at;
  size_t n;
  explicit PackedWords(size_t words) : store(words + 16, 0xDEADBEEF), n(words) {
    at = store.data() + (64 - reinterpret_cast<uintptr_t>(store.data()) % 64) % 64 / sizeof(uint32_t);
  }
  bool operator==(const PackedWords& o) const { return n == o.n && std::equal(at, at + n, o.at); }
};

}  // namespace

TEST(vector_packers_write_the_portable_words) {
  namespace g = moe::cpu::gemm_bf16;
  const auto& f = moe::cpu::gemm_driver::cpu_features();
  std::vector<const g::Kernels*> families;
  if (f.avx2_fma) families.push_back(&g::avx2_fma_kernels());
  if (f.avx512) families.push_back(&g::avx512_fma_kernels());
  if (f.avx512_bf16) families.push_back(&g::avx512_kernels());
  if (families.empty()) std::printf("  (skipped: this CPU has no vector bf16 family)\n");
  const g::Kernels& plain = g::portable_kernels();
  const int ld = 71;  // rows and columns of the source, 71 apart whichever is the line
  std::vector<float> src = moe_test::random_vector(size_t(ld) * 600, 21, 2.0f);
  using lim = std::numeric_limits<float>;
  const float specials[] = {lim::quiet_NaN(), -lim::quiet_NaN(), std::bit_cast<float>(0x7F800001u),
                            std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
                            std::bit_cast<float>(0x7F7FFFFFu), lim::infinity(), -0.0f, 1e-39f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i) src[i * 211 + 5] = specials[i];
  std::vector<uint16_t> src16(src.size());
  for (size_t i = 0; i < src.size(); ++i) src16[i] = moe::f32_to_bf16(src[i]);
  for (const g::Kernels* k : families)
    for (bool trans : {false, true})
      for (int kc : {1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 511}) {
        const int pairs = (kc + 1) / 2;
        for (int rows = 1; rows <= k->mr_max; ++rows) {
          PackedWords got(size_t(pairs) * rows), want(size_t(pairs) * rows);
          k->pack_a(trans, src.data() + 3, ld, rows, kc, got.at);
          plain.pack_a(trans, src.data() + 3, ld, rows, kc, want.at);
          CHECK_MSG(got == want, std::string(k->name) + " pack_a" + (trans ? "^T" : "") + " rows " +
                                     std::to_string(rows) + " kc " + std::to_string(kc));
        }
        for (int cols = 1; cols <= g::kNR; ++cols) {
          PackedWords got(size_t(pairs) * g::kNR), want(size_t(pairs) * g::kNR);
          k->pack_b32(trans, src.data() + 1, ld, kc, cols, got.at);
          plain.pack_b32(trans, src.data() + 1, ld, kc, cols, want.at);
          CHECK_MSG(got == want, std::string(k->name) + " pack_b32" + (trans ? "^T" : "") + " cols " +
                                     std::to_string(cols) + " kc " + std::to_string(kc));
          PackedWords got16(size_t(pairs) * g::kNR), want16(size_t(pairs) * g::kNR);
          k->pack_b16(trans, src16.data() + 1, ld, kc, cols, got16.at);
          plain.pack_b16(trans, src16.data() + 1, ld, kc, cols, want16.at);
          CHECK_MSG(got16 == want16, std::string(k->name) + " pack_b16" + (trans ? "^T" : "") + " cols " +
                                     std::to_string(cols) + " kc " + std::to_string(kc));
        }
      }
}

TEST(to_bf16_matches_scalar_rounding) {
  ThreadPool tp(2);
  std::vector<float> src = moe_test::random_vector(20011, 9, 3.0f);
  using lim = std::numeric_limits<float>;
  const float specials[] = {0.0f, -0.0f, lim::infinity(), -lim::infinity(), lim::quiet_NaN(), -lim::quiet_NaN(),
                            lim::denorm_min(), 1e-39f, -1e-39f, 3.4e38f,
                            std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
                            std::bit_cast<float>(0x7F7FFFFFu), std::bit_cast<float>(0x7F800001u)};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i) src[i * 97] = specials[i];
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{20011}}) {
    std::vector<uint16_t> dst(src.size(), 0xABCD);
    moe::cpu::to_bf16(tp, dst.data(), src.data(), n);
    for (int64_t i = 0; i < n; ++i)
      CHECK_MSG(dst[i] == moe::f32_to_bf16(src[i]), "n=" + std::to_string(n) + " i=" + std::to_string(i));
    for (size_t i = n; i < dst.size(); ++i) CHECK(dst[i] == 0xABCD);
  }
}

TEST_MAIN()
