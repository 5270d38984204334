// A stand-in for libcublas with the five entry points backend/cuda/cublas.cpp binds, computing cublasGemmEx's
// column-major product on host memory, so the loader and the row-major mapping are tested where there is no GPU
// (test_cublas_mapping.cpp). It checks the argument conventions cuBLAS documents and records the last call.
#include <cstdint>
#include <cstring>

namespace {

int calls = 0;
int last_status = 0;

double element(const void* p, int type, int64_t at) {
  if (type == 0) return static_cast<const float*>(p)[at];
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[at]) << 16;  // bf16 (type 14)
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) {
  static int the_handle;
  *handle = &the_handle;
  return 0;
}
int cublasDestroy_v2(void*) { return 0; }
int cublasSetStream_v2(void*, void*) { return 0; }
int cublasGetVersion_v2(void*, int* version) {
  *version = 120804;
  return 0;
}
const char* cublasGetStatusString(int status) { return status == 7 ? "CUBLAS_STATUS_INVALID_VALUE" : "other"; }

// C (m×n, ldc) = alpha·op(A)·op(B) + beta·C, column-major; op N reads A (m×k) at i + l·lda, op T reads A stored
// k×m at l + i·lda. Status 7 (invalid value) for the leading-dimension violations cuBLAS itself refuses.
int cublasGemmEx(void*, int transa, int transb, int m, int n, int k, const void* alpha, const void* A, int atype,
                 int lda, const void* B, int btype, int ldb, const void* beta, void* C, int ctype, int ldc,
                 int compute, int algo) {
  ++calls;
  const bool ta = transa == 1, tb = transb == 1;
  if (ctype != 0 || compute != 68 || algo != -1 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m ||
      (atype != 0 && atype != 14) || (btype != 0 && btype != 14))
    return last_status = 7;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  float* c = static_cast<float*>(C);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int l = 0; l < k; ++l)
        sum += element(A, atype, ta ? l + (int64_t)i * lda : i + (int64_t)l * lda) *
               element(B, btype, tb ? j + (int64_t)l * ldb : l + (int64_t)j * ldb);
      float& out = c[i + (int64_t)j * ldc];
      out = static_cast<float>(a * sum + (b == 0.0f ? 0.0 : b * out));
    }
  return last_status = 0;
}

int fake_cublas_calls() { return calls; }

}  // extern "C"
