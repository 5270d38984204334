// cuBLAS behind the CUDA backend's linear layers, when the machine has it: the library is opened at run time
// (the build needs no cuBLAS headers or libraries, and a machine without it runs our own kernels), and only
// cublasGemmEx is called, with the row-major problems of kernels.h mapped onto its column-major ones.
// Which GEMMs a backend runs is BackendOptions::gemm ("own", "cublas", "auto"); the op tests and the self-test
// run both where both exist.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace moe::cuda {

class Cublas {
 public:
  // The library at $MOE_CUBLAS when set, else the first of libcublas.so.13, .12 and .so the dynamic loader finds,
  // with a handle on `stream`. Null, with `why` saying where it looked and what failed, when none loads.
  static std::unique_ptr<Cublas> open(cudaStream_t stream, std::string& why);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // "cuBLAS 13.0.2 (/path/libcublas.so.13)".
  const std::string& describe() const { return describe_; }

  // C[M,N] = alpha·op(A)·op(B) + beta·C, row-major as kernels.h's sgemm, in fp32 arithmetic (no TF32): cuBLAS's
  // own blocking, so the bits differ from our kernels' within fp32 accumulation error.
  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
             int ldb, float beta, float* C, int ldc) const;
  // The same product on bf16 operands with fp32 accumulation and an fp32 C, as kernels.h's sgemm_bf16: each
  // operand is bf16 bits already (a_bf16 / b_bf16) or fp32 that is first rounded to bf16 as to_bf16 rounds.
  void sgemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, bool a_bf16, int lda,
                  const void* B, bool b_bf16, int ldb, float beta, float* C, int ldc) const;

 private:
  struct Api;
  Cublas(std::unique_ptr<Api> api, void* handle, cudaStream_t stream, std::string describe);
  void gemm_ex(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int a_type, int lda,
               const void* B, int b_type, int ldb, float beta, float* C, int ldc) const;

  std::unique_ptr<Api> api_;
  void* handle_;
  cudaStream_t stream_;
  std::string describe_;
};

}  // namespace moe::cuda
