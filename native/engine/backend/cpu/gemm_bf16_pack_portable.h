// The bf16 kernels' packers in plain C++ (layout in gemm_bf16_kernels.h): the portable family's, and the words every
// vector family's packers must write (test_gemm_bf16). Internal linkage keeps each including file's copy its own,
// so the linker never hands one ISA's instructions to another's callers.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_bf16_kernels.h"
#include "core/half.h"

namespace moe::cpu::gemm_bf16 {
namespace {

inline uint32_t pair(uint16_t even, uint16_t odd) {
  return static_cast<uint32_t>(even) | static_cast<uint32_t>(odd) << 16;
}

// Element k of the packed row or column `src` (stride between k), or zero past kc.
template <typename T>
uint16_t bf16_at(const T* src, int64_t stride, int k, int kc) {
  if (k >= kc) return 0;
  if constexpr (sizeof(T) == 2) return src[k * stride];
  else return f32_to_bf16(src[k * stride]);
}

// Packs `n` lines of k pairs: line l starts at src + l*line_stride and its k runs with k_stride.
template <typename T>
void pack_lines(const T* src, int64_t line_stride, int64_t k_stride, int n, int kc, uint32_t* dst, int dst_stride) {
  for (int p = 0; p < (kc + 1) / 2; ++p)
    for (int l = 0; l < n; ++l) {
      const T* line = src + l * line_stride;
      dst[p * dst_stride + l] = pair(bf16_at(line, k_stride, 2 * p, kc), bf16_at(line, k_stride, 2 * p + 1, kc));
    }
}

void pack_a_lines(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  pack_lines(a, trans ? 1 : lda, trans ? lda : 1, rows, kc, dst, rows);
}

template <typename T>
void pack_b_lines(bool trans, const T* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  for (int p = 0; p < (kc + 1) / 2; ++p)
    for (int j = cols; j < kNR; ++j) dst[p * kNR + j] = 0;
  pack_lines(b, trans ? ldb : 1, trans ? 1 : ldb, cols, kc, dst, kNR);
}

}  // namespace
}  // namespace moe::cpu::gemm_bf16
