// fp32 -> bf16 rounding for the *_avx512.cpp kernels, bit-identical to moe::f32_to_bf16 (round to nearest even,
// NaN quieted with its sign, overflow to inf, fp32 denormals rounded rather than flushed).
// Include only from files built with AVX-512 flags; internal linkage keeps each file's copies its own.
#pragma once
#include <immintrin.h>

namespace moe::cpu::avx512 {
namespace {

// Each fp32 lane's bf16 in the low 16 bits of the lane (high 16 bits zero).
inline __m512i bf16_bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
}

// Mask of the first n (clamped to [0, 16]) lanes.
inline __mmask16 first_lanes(int n) {
  return n >= 16 ? __mmask16(0xFFFF) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0);
}

}  // namespace
}  // namespace moe::cpu::avx512
