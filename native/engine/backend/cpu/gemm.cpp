// Placeholder-free reference GEMM used until the blocked kernels land: plain loops that honour the
// exactness contract (k reduced in ascending order with fmaf).
#include "backend/cpu/gemm.h"

#include <cmath>

namespace moe::cpu {

void sgemm(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  tp.parallel_for(M, [&](int64_t m0, int64_t m1, int) {
    for (int64_t m = m0; m < m1; ++m) {
      for (int n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
          float a = trans_a ? A[(int64_t)k * lda + m] : A[m * lda + k];
          float b = trans_b ? B[(int64_t)n * ldb + k] : B[(int64_t)k * ldb + n];
          acc = std::fmaf(a, b, acc);
        }
        float& c = C[m * ldc + n];
        c = beta == 0.0f ? alpha * acc : alpha * acc + beta * c;
      }
    }
  });
}

const char* sgemm_isa() { return "scalar"; }

}  // namespace moe::cpu
