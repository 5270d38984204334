// Counter-based random numbers: a value depends only on (seed, stream, index), never on
// call order or thread count, so initialisation and data order are reproducible anywhere (the CUDA backend
// draws the same numbers on the device).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace moe {

MOE_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

MOE_HOST_DEVICE inline uint64_t random_u64(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(seed ^ splitmix64(stream)) + index);
}

// Uniform in (0, 1], 24 bits.
MOE_HOST_DEVICE inline float random_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>((random_u64(seed, stream, index) >> 40) + 1) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller on two independent uniforms.
inline float random_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = static_cast<double>((random_u64(seed, stream, 2 * index) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double u2 = static_cast<double>(random_u64(seed, stream, 2 * index + 1) >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace moe
