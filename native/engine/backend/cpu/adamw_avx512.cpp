// AVX-512 AdamW and Σx² kernels; tails are handled with masks so every element takes the same arithmetic path.
// GCC 12 flags _mm512_undefined_ps() inside the sqrt/convert intrinsics as uninitialised (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/adamw_kernels.h"
#include "backend/cpu/bf16_avx512.h"

namespace moe::cpu::adamw_detail {

namespace {

// Full vectors use plain loads and stores; only the tail pays for masking.
template <bool Masked, bool Bf16>
inline void update16(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, __mmask16 k) {
  const auto load = [k](const float* x) { return Masked ? _mm512_maskz_loadu_ps(k, x) : _mm512_loadu_ps(x); };
  const auto store = [k](float* x, __m512 y) { Masked ? _mm512_mask_storeu_ps(x, k, y) : _mm512_storeu_ps(x, y); };
  const __m512 g = _mm512_mul_ps(load(grad), _mm512_set1_ps(c.grad_scale));
  const __m512 mn = _mm512_fmadd_ps(_mm512_set1_ps(c.one_minus_beta1), g,
                                    _mm512_mul_ps(_mm512_set1_ps(c.beta1), load(m)));
  const __m512 vn = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(c.one_minus_beta2), g), g,
                                    _mm512_mul_ps(_mm512_set1_ps(c.beta2), load(v)));
  const __m512 denom =
      _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vn), _mm512_set1_ps(c.bias2_sqrt)), _mm512_set1_ps(c.eps));
  const __m512 pn = _mm512_add_ps(_mm512_mul_ps(load(p), _mm512_set1_ps(c.decay)),
                                  _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(c.neg_step), mn), denom));
  store(m, mn);
  store(v, vn);
  store(p, pn);
  if constexpr (Bf16) {
    const __m512i bits = avx512::bf16_bits(pn);
    if constexpr (Masked) _mm512_mask_cvtepi32_storeu_epi16(p16, k, bits);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p16), _mm512_cvtepi32_epi16(bits));
  }
}

template <bool Bf16>
void update_all(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) update16<false, Bf16>(c, p + i, grad + i, m + i, v + i, Bf16 ? p16 + i : p16, 0xFFFF);
  if (i < n)
    update16<true, Bf16>(c, p + i, grad + i, m + i, v + i, Bf16 ? p16 + i : p16, __mmask16((1u << (n - i)) - 1));
}

}  // namespace

void update_avx512(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n) {
  (p16 ? update_all<true> : update_all<false>)(c, p, grad, m, v, p16, n);
}

double chunk_sum_squares_avx512(const float* x, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 f = _mm512_maskz_loadu_ps(k, x + i);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
    lo = _mm512_fmadd_pd(a, a, lo);
    hi = _mm512_fmadd_pd(b, b, hi);
  }
  alignas(64) double lane[16];
  _mm512_store_pd(lane, lo);
  _mm512_store_pd(lane + 8, hi);
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

}  // namespace moe::cpu::adamw_detail
