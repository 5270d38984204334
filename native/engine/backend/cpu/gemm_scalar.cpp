// Portable sgemm kernels for CPUs without AVX2: the same packed layouts and the same per-element
// fma sequence as the vector kernels (so results match them bit for bit), just one lane at a time.
// The AVX2 kernels share the 16-wide B panel: they reuse the A packer and pack B into these same words.
#include <cmath>

#include "backend/cpu/gemm_kernels.h"

namespace moe::cpu::gemm {
namespace {

constexpr int kNR = 16;
constexpr int kMRMax = 4;

void pack_a(bool trans, const float* a, int64_t lda, int rows, int kc, float* dst) {
  for (int k = 0; k < kc; ++k)
    for (int i = 0; i < rows; ++i) dst[k * rows + i] = trans ? a[k * lda + i] : a[i * lda + k];
}

void pack_b(bool trans, const float* b, int64_t ldb, int kc, int cols, float* dst) {
  for (int k = 0; k < kc; ++k)
    for (int j = 0; j < kNR; ++j) dst[k * kNR + j] = j >= cols ? 0.0f : trans ? b[j * ldb + k] : b[k * ldb + j];
}

int kernel(int mr, int cols, int kc, const float* a, int64_t a_k, const float* b, int64_t panel_stride,
           int64_t k_stride, float* c, int64_t ldc, float alpha, float beta, bool load_c, float* pack_out,
           const Prefetch&) {
  const int n = cols < kNR ? cols : kNR;
  if (pack_out)
    for (int k = 0; k < kc; ++k)
      for (int j = 0; j < kNR; ++j) pack_out[k * kNR + j] = j < n ? b[k * k_stride + j] : 0.0f;
  float acc[kMRMax][kNR] = {};
  for (int k = 0; k < kc; ++k)
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < n; ++j) acc[i][j] = std::fma(a[k * a_k + i], b[k * k_stride + j], acc[i][j]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < n; ++j) {
      float& out = c[i * ldc + j];
      out = load_c ? std::fma(alpha, acc[i][j], beta * out) : alpha * acc[i][j];
    }
  return n;
}

}  // namespace

const Kernels& scalar_kernels() {
  static const Kernels k{"scalar", kNR, kMRMax, &pack_a, &pack_b, &kernel};
  return k;
}

}  // namespace moe::cpu::gemm
