// Lane masks and fp32 -> bf16 rounding for the *_avx2.cpp kernels, the rounding bit-identical to moe::f32_to_bf16
// (round to nearest even, NaN quieted with its sign, overflow to inf, fp32 denormals rounded rather than flushed).
// Include only from files built with AVX2 flags; internal linkage keeps each file's copies its own.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace moe::cpu::avx2 {
namespace {

// Lanes [0, n) of 8 (n clamped to [0, 8]) as a maskload / maskstore mask.
inline __m256i lanes_below(int64_t n) {
  const int k = n >= 8 ? 8 : n > 0 ? static_cast<int>(n) : 0;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Each lane's bf16 bits in its low half (high half zero).
inline __m256i bf16_lanes(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  // |x| as an int is non-negative, so the signed compare is the unsigned one.
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// The 8 lanes' bf16 words, in lane order.
inline __m128i bf16_words(__m256 x) {
  const __m256i bits = bf16_lanes(x);
  // Words of lanes 0-3 and 4-7 sit in the two 128-bit halves; gather them into the low half.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08));
}

// Stores the first n (at most 8) words.
inline void store_words(uint16_t* dst, __m128i words, int64_t n) {
  if (n >= 8) return _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), words);
  alignas(16) uint16_t w[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(w), words);
  for (int64_t i = 0; i < n; ++i) dst[i] = w[i];
}

}  // namespace
}  // namespace moe::cpu::avx2
