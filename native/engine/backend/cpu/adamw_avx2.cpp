// AVX2 AdamW and Σx² kernels (CPUs without AVX-512: AMD before Zen 4, Intel client cores), the same per-element
// sequence as the scalar loop and the AVX-512 kernels; tails go through the same arithmetic with masked loads.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/adamw_kernels.h"
#include "backend/cpu/bf16_avx2.h"

namespace moe::cpu::adamw_detail {

namespace {

template <bool Masked, bool Bf16>
inline void update8(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t left) {
  const __m256i k = Masked ? avx2::lanes_below(left) : _mm256_set1_epi32(-1);
  const auto load = [k](const float* x) { return Masked ? _mm256_maskload_ps(x, k) : _mm256_loadu_ps(x); };
  const auto store = [k](float* x, __m256 y) { Masked ? _mm256_maskstore_ps(x, k, y) : _mm256_storeu_ps(x, y); };
  const __m256 g = _mm256_mul_ps(load(grad), _mm256_set1_ps(c.grad_scale));
  const __m256 mn = _mm256_fmadd_ps(_mm256_set1_ps(c.one_minus_beta1), g, _mm256_mul_ps(_mm256_set1_ps(c.beta1), load(m)));
  const __m256 vn = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(c.one_minus_beta2), g), g,
                                    _mm256_mul_ps(_mm256_set1_ps(c.beta2), load(v)));
  const __m256 denom =
      _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vn), _mm256_set1_ps(c.bias2_sqrt)), _mm256_set1_ps(c.eps));
  const __m256 pn = _mm256_add_ps(_mm256_mul_ps(load(p), _mm256_set1_ps(c.decay)),
                                  _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(c.neg_step), mn), denom));
  store(m, mn);
  store(v, vn);
  store(p, pn);
  if constexpr (Bf16) avx2::store_words(p16, avx2::bf16_words(pn), left);
}

template <bool Bf16>
void update_all(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) update8<false, Bf16>(c, p + i, grad + i, m + i, v + i, Bf16 ? p16 + i : p16, 8);
  if (i < n) update8<true, Bf16>(c, p + i, grad + i, m + i, v + i, Bf16 ? p16 + i : p16, n - i);
}

}  // namespace

void update_avx2(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n) {
  (p16 ? update_all<true> : update_all<false>)(c, p, grad, m, v, p16, n);
}

// Lanes 0-3, 4-7, 8-11 and 12-15 of each 16-element group in four double accumulators: the 16 lanes of the
// scalar loop, added in lane order at the end (x² is exact in double, so fma and mul+add agree).
double chunk_sum_squares_avx2(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  for (int64_t i = 0; i < n; i += 16) {
    for (int h = 0; h < 2; ++h) {
      const int64_t at = i + 8 * h;
      const __m256 f = at + 8 <= n ? _mm256_loadu_ps(x + at) : _mm256_maskload_ps(x + at, avx2::lanes_below(n - at));
      const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
      const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
      acc[2 * h] = _mm256_fmadd_pd(a, a, acc[2 * h]);
      acc[2 * h + 1] = _mm256_fmadd_pd(b, b, acc[2 * h + 1]);
    }
  }
  alignas(32) double lane[16];
  for (int q = 0; q < 4; ++q) _mm256_store_pd(lane + 4 * q, acc[q]);
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

}  // namespace moe::cpu::adamw_detail
