// AVX2 build of the fp32 -> bf16 array conversion (see convert_bf16.h), for CPUs without AVX-512.
#include <cstdint>

#include "backend/cpu/bf16_avx2.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

void to_bf16_span_avx2(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = i + 8 <= n ? _mm256_loadu_ps(src + i) : _mm256_maskload_ps(src + i, avx2::lanes_below(n - i));
    avx2::store_words(dst + i, avx2::bf16_words(x), n - i);
  }
}

}  // namespace moe::cpu
