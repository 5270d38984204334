// AVX-512 build of the fp32 -> bf16 array conversion (see convert_bf16.h). AVX512F only, like the dispatch test.
// GCC 12 flags _mm512_undefined_*() inside intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <cstdint>

#include "backend/cpu/bf16_avx512.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

void to_bf16_span_avx512(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtepi32_epi16(avx512::bf16_bits(_mm512_loadu_ps(src + i))));
  if (i < n) {
    const __mmask16 m = avx512::first_lanes(static_cast<int>(n - i));
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, avx512::bf16_bits(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

}  // namespace moe::cpu
