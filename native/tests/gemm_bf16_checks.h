// What the sgemm_bf16 tests share: random operands in every layout (bf16-stored and fp32 B, padded leading
// dimensions), a run on the dispatched or an explicit kernel family, and the accuracy bound against a double
// reference on the bf16-rounded operands.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/gemm_bf16_kernels.h"
#include "core/half.h"
#include "testing.h"

namespace gemm_bf16_checks {

struct Operands {
  bool ta, tb;
  int M, N, K, lda, ldb, ldc;
  std::vector<float> A, B, C;
  std::vector<uint16_t> B16;  // B rounded to bf16, as a weight copy would hold it
};

inline Operands make(bool ta, bool tb, int M, int N, int K, int pad, uint64_t stream, float scale = 1.0f) {
  Operands o{ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + 2 * pad, N + 3 * pad, {}, {}, {}, {}};
  o.A = moe_test::random_vector(size_t(ta ? K : M) * o.lda, stream * 3 + 0, scale);
  o.B = moe_test::random_vector(size_t(tb ? N : K) * o.ldb, stream * 3 + 1, scale);
  o.C = moe_test::random_vector(size_t(M) * o.ldc, stream * 3 + 2);
  o.B16.resize(o.B.size());
  for (size_t i = 0; i < o.B.size(); ++i) o.B16[i] = moe::f32_to_bf16(o.B[i]);
  return o;
}

inline double rounded(float x) { return moe::bf16_to_f32(moe::f32_to_bf16(x)); }
inline double a_at(const Operands& o, int i, int k) {
  return rounded(o.ta ? o.A[size_t(k) * o.lda + i] : o.A[size_t(i) * o.lda + k]);
}
inline double b_at(const Operands& o, int k, int j) {
  return rounded(o.tb ? o.B[size_t(j) * o.ldb + k] : o.B[size_t(k) * o.ldb + j]);
}

inline bool bits_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

inline std::string shape_name(const Operands& o) {
  return std::string("ta=") + (o.ta ? "1" : "0") + " tb=" + (o.tb ? "1" : "0") + " M=" + std::to_string(o.M) +
         " N=" + std::to_string(o.N) + " K=" + std::to_string(o.K);
}

// The full product with B from its bf16 copy (b16) or rounded from fp32 while packing.
inline std::vector<float> run(moe::ThreadPool& tp, const Operands& o, float alpha, float beta, bool b16) {
  std::vector<float> C = o.C;
  if (b16)
    moe::cpu::sgemm_bf16(tp, o.ta, o.tb, o.M, o.N, o.K, alpha, o.A.data(), o.lda, o.B16.data(), o.ldb, beta,
                         C.data(), o.ldc);
  else
    moe::cpu::sgemm_bf16(tp, o.ta, o.tb, o.M, o.N, o.K, alpha, o.A.data(), o.lda, o.B.data(), o.ldb, beta, C.data(),
                         o.ldc);
  return C;
}

inline std::vector<float> run_with(const moe::cpu::gemm_bf16::Kernels& kern, moe::ThreadPool& tp, const Operands& o,
                                   float alpha, float beta, bool b16) {
  std::vector<float> C = o.C;
  moe::cpu::gemm_bf16::sgemm_with(kern, tp, o.ta, o.tb, o.M, o.N, o.K, alpha, o.A.data(), o.lda,
                                  b16 ? o.B16.data() : nullptr, b16 ? nullptr : o.B.data(), nullptr, o.ldb, beta,
                                  C.data(), o.ldc);
  return C;
}

// C's worst error against the exact product of the bf16-rounded operands, in units of the fp32 accumulation bound
// (K + 2 roundings of at most 2^-24 of Σ|terms|): far tighter than bf16's own 2^-9, so an operand left unrounded
// (or rounded the wrong way) fails. Also checks that C's padding columns were never written.
inline double error_in_bounds(const Operands& o, float alpha, float beta, const std::vector<float>& C) {
  double worst = 0;
  for (int i = 0; i < o.M; ++i) {
    for (int j = 0; j < o.N; ++j) {
      double exact = 0, magnitude = 0;
      for (int k = 0; k < o.K; ++k) {
        exact += a_at(o, i, k) * b_at(o, k, j);
        magnitude += std::fabs(a_at(o, i, k) * b_at(o, k, j));
      }
      const double c0 = o.C[size_t(i) * o.ldc + j];
      const double ref = alpha * exact + beta * c0;
      const double bound = (o.K + 2) * 0x1p-24 * (std::fabs(alpha) * magnitude + std::fabs(beta * c0)) + 1e-30;
      worst = std::fmax(worst, std::fabs(C[size_t(i) * o.ldc + j] - ref) / bound);
    }
    for (int j = o.N; j < o.ldc; ++j)
      CHECK(std::memcmp(&C[size_t(i) * o.ldc + j], &o.C[size_t(i) * o.ldc + j], sizeof(float)) == 0);
  }
  return worst;
}

// Over every transpose combination and each (M, K) of the lists (N cycling through ns; alpha, beta, bf16 or fp32 B
// and padding cycling too), C = product(operands, alpha, beta, b16) within the bound.
template <class Product>
void expect_within_bound(const std::string& label, const std::vector<int>& ms, const std::vector<int>& ns,
                         const std::vector<int>& ks, uint64_t stream, Product&& product) {
  const float alphas[] = {1.0f, 0.5f, -1.25f};
  const float betas[] = {0.0f, 1.0f, -0.5f};
  int cases = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t mi = 0; mi < ms.size(); ++mi)
        for (size_t ki = 0; ki < ks.size(); ++ki) {
          const int N = ns[(mi + ki + 2 * ta + tb) % ns.size()];
          const Operands o = make(ta, tb, ms[mi], N, ks[ki], (mi + ki) % 3, stream + cases);
          const float alpha = alphas[cases % 3], beta = betas[(cases / 3) % 3];
          const bool b16 = cases % 2 == 0;
          const double worst = error_in_bounds(o, alpha, beta, product(o, alpha, beta, b16));
          CHECK_MSG(worst <= 1.0, label + shape_name(o) + (b16 ? " bf16 B" : " fp32 B") + ": error " +
                                      std::to_string(worst) + " x the fp32 accumulation bound");
          ++cases;
        }
}

}  // namespace gemm_bf16_checks
