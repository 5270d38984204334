// Helpers shared by the CPU kernels: branch-free float math that GCC vectorises at any ISA level
// (std::exp does not without -ffast-math), fixed-lane reductions, and fixed-block partitioning,
// all arranged so results never depend on the thread count or pointer alignment.
#pragma once
#include <bit>
#include <cstdint>

#include "backend/cpu/isa.h"
#include "core/threadpool.h"

// These inline helpers are compiled for the baseline ISA and inside *_avx512.cpp and *_avx2.cpp files. An
// ISA-named inline namespace gives each build its own symbols, so the linker can never hand an
// AVX-512 or AVX2 copy to baseline code (an ODR clash that would fault on older CPUs).
#if defined(__AVX512F__)
#define MOE_KERNEL_ISA isa_avx512
#elif defined(__AVX2__)
#define MOE_KERNEL_ISA isa_avx2
#else
#define MOE_KERNEL_ISA isa_base
#endif

namespace moe::cpu {
inline namespace MOE_KERNEL_ISA {

// c ? a : b as a bit mask. A plain ?: feeding float arithmetic is turned back into a branch (the
// arithmetic could trap), which stops GCC vectorising the loop; the masked form always vectorises.
inline float select(bool c, float a, float b) {
  int32_t m = -static_cast<int32_t>(c);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & m) | (std::bit_cast<int32_t>(b) & ~m));
}

// e^x to ~2 ulp for x in [-87.3, 88.7] (Cephes polynomial after range reduction by ln 2). Outside it
// the result saturates instead of branching (branches would stop GCC vectorising callers): x < -104
// gives 0 (through denormals), x > 88.72 gives 3.4e38 or +inf; NaN propagates.
inline float vexp(float x) {
  x = select(x < -104.0f, -104.0f, x);
  x = select(x > 88.72283f, 88.72283f, x);
  // Round x·log2(e) to nearest with the 1.5·2^23 trick so no rounding intrinsic is needed.
  const float shifter = 12582912.0f;
  float t = x * 1.44269504088896341f + shifter;
  float n = t - shifter;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n lies in [-150, 128]: build 2^n as two in-range halves so neither exponent field overflows.
  int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(shifter);
  int32_t half = ni >> 1;
  float s1 = std::bit_cast<float>((half + 127) << 23);
  float s2 = std::bit_cast<float>((ni - half + 127) << 23);
  return p * s1 * s2;
}

// 1 / (1 + e^-x), stable for any x.
inline float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

// Σ term(i) for i in [0, n) over 16 independent lanes combined in a fixed tree: vectorises, and
// the result depends only on the data (the same for any thread partition or pointer alignment).
template <class Term>
inline float lane_sum(int n, Term&& term) {
  constexpr int L = 16;
  float acc[L] = {};
  int i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) acc[l] += term(i);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// max over x[0, n), n >= 1, same lane structure as lane_sum.
inline float lane_max(const float* x, int n) {
  constexpr int L = 16;
  float acc[L];
  for (int l = 0; l < L; ++l) acc[l] = x[0];
  int i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (int l = 0; i < n; ++i, ++l) acc[l] = x[i] > acc[l] ? x[i] : acc[l];
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
  return acc[0];
}

// Whether the calling op runs the *_avx512.cpp kernel variants: the CPU has them and the op's ISA choice allows it.
inline bool use_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has && current_isa() == Isa::Native;
}

// Whether the calling op runs the *_avx2.cpp kernel variants: the CPU has AVX2 and FMA and the op's ISA choice allows
// it (callers ask use_avx512() first).
inline bool use_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  }();
  return has && current_isa() == Isa::Native;
}

// The build of a kernel the calling op runs: the AVX-512 one where it may, else the AVX2 one, else the baseline.
template <class Fn>
inline Fn pick_kernel(Fn avx512, Fn avx2, Fn base) {
  return use_avx512() ? avx512 : use_avx2() ? avx2 : base;
}

// Runs body(i0, i1) over [0, n) in fixed blocks of `block` elements spread across the pool, so every
// element takes the same code path (vector body or scalar tail) for any thread count.
template <class Body>
void for_each_block(ThreadPool& tp, int64_t n, int64_t block, Body&& body) {
  int64_t blocks = (n + block - 1) / block;
  tp.parallel_for(blocks, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
      body(i0, i1);
    }
  });
}

}  // namespace MOE_KERNEL_ISA
}  // namespace moe::cpu
