// float <-> bf16 / f16 bit conversions with round-to-nearest-even, matching PyTorch's .to(bfloat16/float16):
// NaN stays NaN (quieted, sign kept), overflow rounds to inf, f16 subnormals are exact.
#pragma once
#include <bit>
#include <cstdint>

namespace moe {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  x += 0x7FFFu + ((x >> 16) & 1u);  // ties to even; a carry into the exponent is the correct rounding
  return static_cast<uint16_t>(x >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in float
    float v = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(v));
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00u | static_cast<uint16_t>((ax >> 13) & 0x3FFu);  // quiet NaN
  if (ax >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds (ties to even) to inf; also inf itself
  if (ax < 0x38800000u) {
    // Below the smallest normal 2^-14: adding 0.5 puts the value where the float ulp is 2^-24, the f16
    // subnormal step, so the FPU's own round-to-nearest-even does the rounding.
    float v = std::bit_cast<float>(ax) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(v) - 0x3F000000u);
  }
  uint32_t mant_odd = (ax >> 13) & 1u;
  ax += 0xC8000FFFu + mant_odd;  // rebias exponent 127 -> 15 and round the 13 dropped bits to nearest even
  return sign | static_cast<uint16_t>(ax >> 13);
}

}  // namespace moe
