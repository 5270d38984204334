// The cuda backend's cuBLAS path (backend/cuda/cublas.h) where there is no GPU: the run-time loader against a
// stand-in library (fake_cublas.cpp, which computes cublasGemmEx's column-major product on host memory), and the
// mapping of every row-major problem the linear layers pose (each transpose pair, leading dimensions wider than
// the matrices, alpha and beta, fp32 and bf16 operands) onto column-major calls, against a row-major reference.
// The bf16 path's rounding of fp32 operands runs a CUDA kernel and is checked by the op tests on a GPU.
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "testing.h"

#if MOE_HAVE_CUDA
#include <dlfcn.h>

#include "backend/cuda/cublas.h"

namespace {

std::unique_ptr<moe::cuda::Cublas> open_fake(std::string& why) {
  setenv("MOE_CUBLAS", MOE_FAKE_CUBLAS, 1);
  auto blas = moe::cuda::Cublas::open(nullptr, why);
  unsetenv("MOE_CUBLAS");
  return blas;
}

// Row-major C = alpha·op(A)·op(B) + beta·C in double, A and B given as float values.
std::vector<float> reference(bool ta, bool tb, int M, int N, int K, float alpha, const std::vector<float>& A, int lda,
                             const std::vector<float>& B, int ldb, float beta, std::vector<float> C, int ldc) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int l = 0; l < K; ++l) s += (double)A[ta ? l * lda + i : i * lda + l] * B[tb ? j * ldb + l : l * ldb + j];
      C[i * ldc + j] = static_cast<float>(alpha * s + beta * C[i * ldc + j]);
    }
  return C;
}

}  // namespace

TEST(the_loader_opens_the_library_named_by_MOE_CUBLAS_and_says_why_when_it_cannot) {
  std::string why;
  auto blas = open_fake(why);
  CHECK_MSG(blas != nullptr, why);
  if (!blas) return;
  CHECK_MSG(blas->describe() == std::string("cuBLAS 12.8.4 (") + MOE_FAKE_CUBLAS + ")", blas->describe());
  setenv("MOE_CUBLAS", "/nonexistent/libcublas.so.13", 1);
  auto none = moe::cuda::Cublas::open(nullptr, why);
  unsetenv("MOE_CUBLAS");
  CHECK(none == nullptr);
  CHECK_MSG(why.find("/nonexistent/libcublas.so.13") != std::string::npos && why.find("MOE_CUBLAS") != std::string::npos,
            why);
}

TEST(row_major_problems_map_onto_column_major_calls) {
  std::string why;
  auto blas = open_fake(why);
  CHECK_MSG(blas != nullptr, why);
  if (!blas) return;
  const int M = 5, N = 7, K = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool bf16 : {false, true}) {
        // Leading dimensions wider than the stored rows, as a matrix inside a larger one.
        const int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
        std::vector<float> A = moe_test::random_vector((size_t)(ta ? K : M) * lda, 1);
        std::vector<float> B = moe_test::random_vector((size_t)(tb ? N : K) * ldb, 2);
        std::vector<float> C = moe_test::random_vector((size_t)M * ldc, 3);
        std::vector<uint16_t> A16(A.size()), B16(B.size());
        if (bf16) {  // the values the bf16 call multiplies
          for (size_t i = 0; i < A.size(); ++i) A[i] = moe::bf16_to_f32(A16[i] = moe::f32_to_bf16(A[i]));
          for (size_t i = 0; i < B.size(); ++i) B[i] = moe::bf16_to_f32(B16[i] = moe::f32_to_bf16(B[i]));
        }
        const std::vector<float> want = reference(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 2.0f, C, ldc);
        if (bf16) blas->sgemm_bf16(ta, tb, M, N, K, 0.5f, A16.data(), true, lda, B16.data(), true, ldb, 2.0f, C.data(), ldc);
        else blas->sgemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.0f, C.data(), ldc);
        double worst = 0;
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < ldc; ++j)  // the columns past N must be untouched, and they are in want as they were
            worst = std::max(worst, (double)std::fabs(C[i * ldc + j] - want[i * ldc + j]));
        CHECK_MSG(worst < 1e-5, std::string("ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") +
                                    (bf16 ? " bf16" : " fp32") + ": worst error " + std::to_string(worst));
      }
}

TEST(an_empty_depth_adds_nothing_and_calls_nothing_unless_C_is_scaled) {
  std::string why;
  auto blas = open_fake(why);
  if (!blas) return;
  void* lib = dlopen(MOE_FAKE_CUBLAS, RTLD_NOW | RTLD_NOLOAD);
  auto calls = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "fake_cublas_calls")) : nullptr;
  CHECK(calls != nullptr);
  if (!calls) return;
  std::vector<float> C = {1, 2, 3, 4};
  const int before = calls();
  // dW of an expert that received no tokens: K = 0 rows, accumulated into (beta 1).
  blas->sgemm(true, false, 2, 2, 0, 1.0f, nullptr, 2, nullptr, 2, 1.0f, C.data(), 2);
  CHECK(calls() == before && C == std::vector<float>({1, 2, 3, 4}));
  blas->sgemm(false, true, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 1, 2.0f, C.data(), 2);
  CHECK(calls() == before + 1 && C == std::vector<float>({2, 4, 6, 8}));
}

TEST(a_refused_call_fails_naming_the_problem_and_cublas_own_words) {
  std::string why;
  auto blas = open_fake(why);
  if (!blas) return;
  std::vector<float> A(16), B(16), C(16);
  std::string e;
  try {  // lda 1 for a 4×4 A: cuBLAS refuses it as an invalid value
    blas->sgemm(false, false, 4, 4, 4, 1.0f, A.data(), 1, B.data(), 4, 0.0f, C.data(), 4);
  } catch (const moe::EngineError& err) {
    e = err.what();
  }
  CHECK_MSG(e.find("cublasGemmEx (4x4x4)") != std::string::npos && e.find("INVALID_VALUE") != std::string::npos, e);
}

#else

TEST(cublas_path_not_built) { std::printf("  skipped: this build has no CUDA backend, so no cuBLAS path\n"); }

#endif

TEST_MAIN()
