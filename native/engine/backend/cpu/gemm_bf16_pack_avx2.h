// The AVX2 bf16 family's packers (layout in gemm_bf16_kernels.h): the portable packers' words, eight lines at a
// time. Lines whose k runs along memory (A, and B stored transposed) are read 16 k at a time, rounded, paired
// and transposed in registers; lines that lie along memory (A transposed, B) are read a k row at a time. fp32 is
// rounded as moe::f32_to_bf16 rounds it. Only a partial group of lines or k uses masked loads and stores, which
// cost several times the plain ones (unmasked, packing took 15-25% less time on a Zen 3). Include only from files
// built with AVX2 flags; internal linkage keeps each file's copy its own.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/bf16_avx2.h"
#include "backend/cpu/gemm_bf16_kernels.h"

namespace moe::cpu::gemm_bf16 {
namespace {

using avx2::bf16_lanes;
using avx2::lanes_below;

// The 8 pair words of k in [0, kn) (kn <= 16; zeros past it) of a line whose k runs along memory.
inline __m256i line_pairs(const float* src, int kn) {
  const bool full = kn >= 16;
  const __m256i lo = bf16_lanes(full ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, lanes_below(kn)));
  const __m256i hi = bf16_lanes(full ? _mm256_loadu_ps(src + 8) : _mm256_maskload_ps(src + 8, lanes_below(kn - 8)));
  // packus interleaves the 128-bit halves: k 0-3, 8-11, 4-7, 12-15; the permute puts them in k order.
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
}
inline __m256i line_pairs(const uint16_t* src, int kn) {
  if (kn >= 16) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  alignas(32) uint16_t part[16] = {};
  for (int k = 0; k < kn; ++k) part[k] = src[k];  // a plain loop: no library template built for AVX2 here
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
}

// The first `lines` (1..8) words of v at `at` (mask: those lanes); whole groups unmasked.
inline void store_lines(uint32_t* at, __m256i v, int lines, __m256i mask) {
  if (lines == 8) _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), v);
  else _mm256_maskstore_epi32(reinterpret_cast<int*>(at), mask, v);
}

// r[l][p] -> r[p][l] for 8 x 8 32-bit words.
inline void transpose8(__m256i r[8]) {
  __m256i t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m256i u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// Lines l in [0, n) at src + l*stride, k along memory: pair p of line l to dst[p*dst_stride + l].
template <typename T>
void pack_along_k(const T* src, int64_t stride, int n, int kc, uint32_t* dst, int64_t dst_stride) {
  for (int l0 = 0; l0 < n; l0 += 8) {
    const int lines = std::min(8, n - l0);
    const __m256i store = lanes_below(lines);
    for (int k0 = 0; k0 < kc; k0 += 16) {
      const int kn = std::min(16, kc - k0);
      __m256i r[8];
      for (int l = 0; l < 8; ++l) r[l] = l < lines ? line_pairs(src + (l0 + l) * stride + k0, kn) : _mm256_setzero_si256();
      transpose8(r);
      for (int q = 0; q < (kn + 1) / 2; ++q) store_lines(dst + (k0 / 2 + q) * dst_stride + l0, r[q], lines, store);
    }
  }
}

// Lines l in [0, n) at src + l, k rows `k_stride` apart: pair p of line l to dst[p*dst_stride + l].
// The first `lines` (1..8) elements of a k row as 32-bit lanes of bf16 bits (mask: those lanes).
inline __m256i row_lanes(const float* src, int lines, __m256i mask) {
  return bf16_lanes(lines == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, mask));
}
inline __m256i row_lanes(const uint16_t* src, int lines, __m256i) {
  if (lines == 8) return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  alignas(16) uint16_t part[8] = {};
  for (int l = 0; l < lines; ++l) part[l] = src[l];
  return _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}
template <typename T>
void pack_across_k(const T* src, int64_t k_stride, int n, int kc, uint32_t* dst, int64_t dst_stride) {
  for (int p = 0; p < (kc + 1) / 2; ++p) {  // each k row pair read once, along memory
    const T* even_row = src + (2 * p) * k_stride;
    const T* odd_row = 2 * p + 1 < kc ? even_row + k_stride : nullptr;
    for (int l0 = 0; l0 < n; l0 += 8) {
      const int lines = std::min(8, n - l0);
      const __m256i mask = lanes_below(lines);
      const __m256i even = row_lanes(even_row + l0, lines, mask);
      const __m256i odd = odd_row ? row_lanes(odd_row + l0, lines, mask) : _mm256_setzero_si256();
      store_lines(dst + p * dst_stride + l0, _mm256_or_si256(even, _mm256_slli_epi32(odd, 16)), lines, mask);
    }
  }
}

void pack_a_avx2(bool trans, const float* a, int64_t lda, int rows, int kc, uint32_t* dst) {
  if (trans) pack_across_k(a, lda, rows, kc, dst, rows);
  else pack_along_k(a, lda, rows, kc, dst, rows);
}

template <typename T>
void pack_b_avx2(bool trans, const T* b, int64_t ldb, int kc, int cols, uint32_t* dst) {
  for (int p = 0; p < (kc + 1) / 2; ++p)
    for (int j = cols; j < kNR; ++j) dst[p * kNR + j] = 0;
  if (trans) pack_along_k(b, ldb, cols, kc, dst, kNR);
  else pack_across_k(b, ldb, cols, kc, dst, kNR);
}

}  // namespace
}  // namespace moe::cpu::gemm_bf16
