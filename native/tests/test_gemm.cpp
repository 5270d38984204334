// sgemm: accuracy against a double-precision reference on odd shapes, every transpose combination,
// alpha/beta and padded leading dimensions; and the exactness contract checked bit for bit (row and
// column sub-blocks, thread counts, kernel families).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_kernels.h"
#include "core/error.h"
#include "testing.h"

using moe::ThreadPool;
using moe::cpu::sgemm;

namespace {

struct Operands {
  bool ta, tb;
  int M, N, K, lda, ldb, ldc;
  std::vector<float> A, B, C;
};

Operands make(bool ta, bool tb, int M, int N, int K, int pad, uint64_t stream) {
  Operands o{ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + 2 * pad, N + 3 * pad, {}, {}, {}};
  o.A = moe_test::random_vector(size_t(ta ? K : M) * o.lda, stream * 3 + 0);
  o.B = moe_test::random_vector(size_t(tb ? N : K) * o.ldb, stream * 3 + 1);
  o.C = moe_test::random_vector(size_t(M) * o.ldc, stream * 3 + 2);
  return o;
}

float a_at(const Operands& o, int i, int k) { return o.ta ? o.A[size_t(k) * o.lda + i] : o.A[size_t(i) * o.lda + k]; }
float b_at(const Operands& o, int k, int j) { return o.tb ? o.B[size_t(j) * o.ldb + k] : o.B[size_t(k) * o.ldb + j]; }

bool bits_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::string shape_name(const Operands& o) {
  return std::string("ta=") + (o.ta ? "1" : "0") + " tb=" + (o.tb ? "1" : "0") + " M=" + std::to_string(o.M) +
         " N=" + std::to_string(o.N) + " K=" + std::to_string(o.K);
}

// Runs the full product on `tp` and returns C.
std::vector<float> run(ThreadPool& tp, const Operands& o, float alpha, float beta) {
  std::vector<float> C = o.C;
  sgemm(tp, o.ta, o.tb, o.M, o.N, o.K, alpha, o.A.data(), o.lda, o.B.data(), o.ldb, beta, C.data(), o.ldc);
  return C;
}

}  // namespace

TEST(sgemm_matches_double_reference) {
  ThreadPool tp(2);
  const int sizes[] = {1, 7, 17, 33, 100, 257};
  const float alphas[] = {1.0f, 0.5f, -1.25f, 2.0f};
  const float betas[] = {0.0f, 1.0f, 0.75f, -0.5f};
  int case_id = 0, failures = 0;
  for (int M : sizes)
    for (int N : sizes)
      for (int K : sizes)
        for (int t = 0; t < 4; ++t, ++case_id) {
          const float alpha = alphas[case_id % 4], beta = betas[(case_id / 4) % 4];
          Operands o = make(t & 1, t & 2, M, N, K, case_id % 3 * 5, case_id);
          std::vector<float> C = o.C;
          // beta == 0 must ignore C entirely, NaNs included.
          if (beta == 0.0f)
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < N; ++j) C[size_t(i) * o.ldc + j] = std::numeric_limits<float>::quiet_NaN();
          sgemm(tp, o.ta, o.tb, M, N, K, alpha, o.A.data(), o.lda, o.B.data(), o.ldb, beta, C.data(), o.ldc);
          double worst = 0.0;
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
              double dot = 0.0, mag = 0.0;
              for (int k = 0; k < K; ++k) {
                double p = double(a_at(o, i, k)) * b_at(o, k, j);
                dot += p;
                mag += std::fabs(p);
              }
              double c0 = o.C[size_t(i) * o.ldc + j];
              double ref = alpha * dot + (beta == 0.0f ? 0.0 : beta * c0);
              // fp32 fma chain: at most about (K + 2) roundings of size 2^-24 relative to the magnitudes involved.
              double bound = (K + 3) * std::ldexp(1.0, -24) * (std::fabs(alpha) * mag + std::fabs(beta * c0)) + 1e-30;
              worst = std::fmax(worst, std::fabs(C[size_t(i) * o.ldc + j] - ref) / bound);
            }
          // Padding columns of C (beyond N) must be untouched.
          bool pad_ok = true;
          for (int i = 0; i < M; ++i)
            for (int j = N; j < o.ldc; ++j) pad_ok &= std::memcmp(&C[size_t(i) * o.ldc + j], &o.C[size_t(i) * o.ldc + j], 4) == 0;
          if ((!(worst <= 1.0) || !pad_ok) && ++failures <= 10)
            CHECK_MSG(false, shape_name(o) + " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                                 " error/bound=" + std::to_string(worst) + (pad_ok ? "" : " (wrote past N)"));
        }
  CHECK(failures == 0);
}

TEST(sgemm_bitwise_independent_of_rows_columns_and_threads) {
  ThreadPool tp1(1), tp2(2), tp3(3);
  // The last two: few rows and a wide C, which the driver updates in column chunks (one or two per thread); and
  // unpadded, so a non-transposed B's rows lie 8 KiB apart (the driver copies such a B into panels first).
  // Then narrow products (a LoRA rank, a router's experts), which AVX-512 runs with A read in place; and thin-K
  // ones (the adapter's way back), swept along C's rows when whole and panel by panel as few-row blocks.
  const int shapes[][4] = {{100, 257, 600, 3}, {64, 96, 1000, 3}, {37, 50, 257, 3}, {130, 33, 2048, 3},
                           {256, 2100, 520, 3}, {160, 2048, 600, 0}, {128, 16, 2048, 0}, {45, 64, 700, 1},
                           {300, 1, 129, 2}, {200, 300, 16, 0}, {128, 1030, 24, 1}};
  for (auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (float beta : {0.0f, 0.5f}) {
        Operands o = make(t & 1, t & 2, s[0], s[1], s[2], s[3], 1000 + t);
        const float alpha = 0.75f;
        std::vector<float> ref = run(tp2, o, alpha, beta);
        CHECK_MSG(bits_equal(ref, run(tp1, o, alpha, beta)), "1 thread differs: " + shape_name(o));
        CHECK_MSG(bits_equal(ref, run(tp3, o, alpha, beta)), "3 threads differ: " + shape_name(o));

        // Row blocks of 1..7 rows, each its own call (as a token segment would be).
        std::vector<float> rows = o.C;
        for (int i0 = 0, len = 1; i0 < o.M; i0 += len, len = len % 7 + 1) {
          int m = std::min(len, o.M - i0);
          const float* A = o.ta ? o.A.data() + i0 : o.A.data() + size_t(i0) * o.lda;
          sgemm(i0 % 2 ? tp3 : tp2, o.ta, o.tb, m, o.N, o.K, alpha, A, o.lda, o.B.data(), o.ldb, beta,
                rows.data() + size_t(i0) * o.ldc, o.ldc);
        }
        CHECK_MSG(bits_equal(ref, rows), "row sub-blocks differ: " + shape_name(o));

        // Column blocks of odd widths.
        std::vector<float> cols = o.C;
        for (int j0 = 0, len = 1; j0 < o.N; j0 += len, len = len * 3 % 41 + 1) {
          int n = std::min(len, o.N - j0);
          const float* B = o.tb ? o.B.data() + size_t(j0) * o.ldb : o.B.data() + j0;
          sgemm(tp2, o.ta, o.tb, o.M, n, o.K, alpha, o.A.data(), o.lda, B, o.ldb, beta, cols.data() + j0, o.ldc);
        }
        CHECK_MSG(bits_equal(ref, cols), "column sub-blocks differ: " + shape_name(o));
      }
}

TEST(sgemm_kernel_families_agree_bitwise) {
  using namespace moe::cpu::gemm;
  ThreadPool tp(2);
  std::vector<const Kernels*> families = {&scalar_kernels()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) families.push_back(&avx2_kernels());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    families.push_back(&avx512_kernels());
  std::printf("  sgemm uses %s; comparing %zu kernel families\n", moe::cpu::sgemm_isa(), families.size());
  // The last four: a few rows over more columns than the narrow kernels take, which AVX-512 computes with Bᵀ read
  // in place (one token at a time).
  const int shapes[][3] = {{29, 45, 300}, {5, 70, 17}, {64, 64, 513}, {128, 16, 1030}, {23, 49, 260}, {9, 3, 5},
                           {1, 100, 300}, {3, 70, 530}, {4, 97, 17}, {2, 200, 513}};
  for (auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      Operands o = make(t & 1, t & 2, s[0], s[1], s[2], 1, 2000 + t);
      std::vector<float> ref = run(tp, o, 1.5f, -0.25f);
      for (const Kernels* k : families) {
        std::vector<float> C = o.C;
        sgemm_with(*k, tp, o.ta, o.tb, o.M, o.N, o.K, 1.5f, o.A.data(), o.lda, o.B.data(), o.ldb, -0.25f, C.data(),
                   o.ldc);
        CHECK_MSG(bits_equal(ref, C), std::string(k->name) + " differs from sgemm: " + shape_name(o));
      }
    }
}

// A weight packed once (a laid-out linear weight, read as Bᵀ) gives the product on the weight as it lies, bit for
// bit, in every family: one row (decode), a few, many; across k blocks; columns past a panel edge; alpha, beta and
// padded strides; 1 and 2 threads.
TEST(sgemm_on_a_packed_weight_matches_sgemm) {
  using namespace moe::cpu::gemm;
  __builtin_cpu_init();
  std::vector<const Kernels*> families = {&scalar_kernels()};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) families.push_back(&avx2_kernels());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    families.push_back(&avx512_kernels());
  const int shapes[][3] = {{1, 100, 300}, {1, 2048, 520}, {1, 7, 33}, {2, 200, 513}, {4, 97, 17}, {5, 70, 17},
                           {13, 33, 260}, {40, 130, 600}, {300, 64, 64}};
  for (int threads : {1, 2}) {
    ThreadPool tp(threads);
    for (auto& s : shapes)
      for (const Kernels* k : families) {
        Operands o = make(false, true, s[0], s[1], s[2], 1, 3000 + s[0]);
        std::vector<float> want = o.C, got = o.C;
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{1.5f, -0.25f}}) {
          sgemm_with(*k, tp, false, true, o.M, o.N, o.K, alpha, o.A.data(), o.lda, o.B.data(), o.ldb, beta, want.data(),
                     o.ldc);
          // 64-byte aligned, as the packers' stores require; one float past the end must stay untouched.
          const size_t floats = packed_bt_floats(*k, o.N, o.K);
          std::unique_ptr<float, decltype(&std::free)> packed(
              static_cast<float*>(std::aligned_alloc(64, (floats + 16) * sizeof(float))), &std::free);
          packed.get()[floats] = 7.0f;
          pack_bt_with(*k, tp, o.B.data(), o.ldb, o.N, o.K, packed.get());
          CHECK_MSG(packed.get()[floats] == 7.0f, std::string(k->name) + ": packing wrote past its floats");
          sgemm_packed_bt_with(*k, tp, o.M, o.N, o.K, alpha, o.A.data(), o.lda, packed.get(), beta, got.data(), o.ldc);
          CHECK_MSG(bits_equal(want, got), std::string(k->name) + " on a packed weight differs from sgemm: " +
                                               shape_name(o) + " threads " + std::to_string(threads));
        }
      }
  }
}

// Whether this CPU runs the AVX2 family; says so when it does not.
bool has_avx2_fma() {
  __builtin_cpu_init();
  const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!has) std::printf("  SKIPPED: this CPU has no AVX2/FMA\n");
  return has;
}

// The AVX2 family packs B itself: the portable packer's words, zero columns past the edge included, and nothing
// written past the panel.
TEST(avx2_b_packer_writes_the_portable_packers_words) {
  using namespace moe::cpu::gemm;
  if (!has_avx2_fma()) return;
  int cases = 0;
  for (const bool trans : {false, true})
    for (const int kc : {1, 7, 8, 9, 17, 64, 100})
      for (const int cols : {1, 7, 8, 9, 15, 16}) {
        const int64_t ldb = trans ? kc + 3 : cols + 5;
        std::vector<float> b(static_cast<size_t>((trans ? cols : kc) * ldb));
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 97) - 48.5f;
        alignas(64) float got[100 * 16 + 32], want[100 * 16 + 32];
        std::fill(std::begin(got), std::end(got), -7.0f);
        std::fill(std::begin(want), std::end(want), -7.0f);
        avx2_kernels().pack_b(trans, b.data(), ldb, kc, cols, got);
        scalar_kernels().pack_b(trans, b.data(), ldb, kc, cols, want);
        CHECK_MSG(std::equal(std::begin(got), std::end(got), std::begin(want)),
                  "trans " + std::to_string(trans) + ", kc " + std::to_string(kc) + ", cols " + std::to_string(cols));
        ++cases;
      }
  std::printf("  %d shapes: the same words\n", cases);
}

// ... and A: k-major runs of up to six rows (the kernel's tallest tile, and the eight a transpose holds), where
// each run is stored whole and a store reaching past the panel must not.
TEST(avx2_a_packer_writes_the_portable_packers_words) {
  using namespace moe::cpu::gemm;
  if (!has_avx2_fma()) return;
  int cases = 0;
  for (const bool trans : {false, true})
    for (const int kc : {1, 2, 7, 8, 9, 17, 64, 100})
      for (const int rows : {1, 2, 3, 5, 6, 7, 8}) {
        const int64_t lda = trans ? rows + 3 : kc + 5;
        std::vector<float> a(static_cast<size_t>((trans ? kc : rows) * lda));
        for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 89) - 44.5f;
        std::vector<float> got(100 * 8 + 16, -7.0f), want(got);
        avx2_kernels().pack_a(trans, a.data(), lda, rows, kc, got.data());
        scalar_kernels().pack_a(trans, a.data(), lda, rows, kc, want.data());
        CHECK_MSG(got == want,
                  "trans " + std::to_string(trans) + ", kc " + std::to_string(kc) + ", rows " + std::to_string(rows));
        ++cases;
      }
  std::printf("  %d shapes: the same words\n", cases);
}

TEST(sgemm_edge_cases) {
  ThreadPool tp(2);
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  sgemm(tp, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  CHECK(C[0] == 0.5f && C[3] == 2.0f);
  sgemm(tp, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, C.data(), 2);
  CHECK(C[0] == 0.0f && C[3] == 0.0f);
  bool threw = false;
  try {
    sgemm(tp, false, false, 2, 2, 3, 1.0f, C.data(), 2, C.data(), 2, 0.0f, C.data(), 2);
  } catch (const moe::EngineError&) {
    threw = true;
  }
  CHECK_MSG(threw, "lda smaller than K must be rejected");
}

TEST_MAIN();
