// A 16x16 transpose of 32-bit lanes in AVX-512 registers, for the packers of the fp32 and bf16 GEMMs. Include only
// from files built with AVX-512 flags; internal linkage keeps each file's copies its own.
#pragma once
#include <immintrin.h>

namespace moe::cpu::avx512 {
namespace {

// Transposes 16 rows of 16 32-bit words in registers (r[i][j] -> r[j][i]).
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    const __m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xDD);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xDD);
    t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[8 + c] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
    t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// The same on floats (the casts are free).
inline void transpose16(__m512 r[16]) {
  __m512i w[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) w[i] = _mm512_castps_si512(r[i]);
  transpose16(w);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(w[i]);
}

}  // namespace
}  // namespace moe::cpu::avx512
