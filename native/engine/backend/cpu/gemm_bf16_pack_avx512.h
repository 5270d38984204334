// Pieces of the AVX-512 bf16 packers, shared by the AVX512_BF16 family (gemm_bf16_avx512.cpp) and the AMX one
// (gemm_bf16_amx.cpp): fp32 or bf16 lines read as k pair words, rounded as moe::f32_to_bf16 rounds, and lines
// whose k runs along memory transposed in registers (transpose_avx512.h). Include only from files built with
// AVX-512 (F, BW, VL) flags; internal linkage keeps each file's copies its own.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/bf16_avx512.h"
#include "backend/cpu/transpose_avx512.h"

namespace moe::cpu::gemm_bf16 {
namespace {

inline __mmask32 first_halves(int n) {
  return n >= 32 ? __mmask32(0xFFFFFFFFu) : n > 0 ? __mmask32((1u << n) - 1) : __mmask32(0);
}

// The 16 pair words of the k in [0, kn) (kn <= 32) starting at `src`, where consecutive k are adjacent in memory.
inline __m512i row_pairs(const float* src, int kn) {
  alignas(64) static constexpr uint16_t kLowHalves[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                          22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                          44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
  const __m512i lo = avx512::bf16_bits(_mm512_maskz_loadu_ps(avx512::first_lanes(kn), src));
  const __m512i hi = avx512::bf16_bits(_mm512_maskz_loadu_ps(avx512::first_lanes(kn - 16), src + 16));
  return _mm512_permutex2var_epi16(lo, _mm512_load_si512(kLowHalves), hi);
}
inline __m512i row_pairs(const uint16_t* src, int kn) { return _mm512_maskz_loadu_epi16(first_halves(kn), src); }

// Pair words of 16 lines (lanes under `m`) from k row `r0` and k+1 row `r1` (null when k+1 is past the end).
inline __m512i col_pairs(const float* r0, const float* r1, __mmask16 m) {
  const __m512i even = avx512::bf16_bits(_mm512_maskz_loadu_ps(m, r0));
  if (!r1) return even;
  return _mm512_or_si512(even, _mm512_slli_epi32(avx512::bf16_bits(_mm512_maskz_loadu_ps(m, r1)), 16));
}
inline __m512i col_pairs(const uint16_t* r0, const uint16_t* r1, __mmask16 m) {
  const __m512i even = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0));
  if (!r1) return even;
  return _mm512_or_si512(even, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1)), 16));
}

// Pairs of up to 16 lines whose k runs along memory (line l at src + l*stride), 32 k at a time, transposed so
// that pair p's 16 words land at dst + p*dst_stride under `store_mask`.
template <typename T>
void pack_along(const T* src, int64_t stride, int lines, int kc, uint32_t* dst, int64_t dst_stride,
                __mmask16 store_mask) {
  for (int k0 = 0; k0 < kc; k0 += 32) {
    const int kn = std::min(32, kc - k0);
    __m512i r[16];
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) {
      // The next 16 lines' same k: the following call's reads (each line's k run is short for the prefetchers).
      const char* next = reinterpret_cast<const char*>(src + (l + 16) * stride + k0);
      _mm_prefetch(next, _MM_HINT_T0);
      if constexpr (sizeof(T) == 4) _mm_prefetch(next + 64, _MM_HINT_T0);  // 32 fp32 k span two lines
      r[l] = l < lines ? row_pairs(src + l * stride + k0, kn) : _mm512_setzero_si512();
    }
    avx512::transpose16(r);
    for (int q = 0; q < (kn + 1) / 2; ++q) _mm512_mask_storeu_epi32(dst + (k0 / 2 + q) * dst_stride, store_mask, r[q]);
  }
}

}  // namespace
}  // namespace moe::cpu::gemm_bf16
