// AdamW and Σx²: scalars folded once in double, then an elementwise pass (AVX-512 or AVX2 when the CPU has it)
// over a static partition in 16-element units. Σx² sums fixed 64Ki-element chunks in double with 16
// interleaved lanes (same lanes on every ISA) and combines the chunks in order, so neither result depends
// on the thread count.
#include "backend/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/adamw_kernels.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/kernel_util.h"
#include "core/half.h"

namespace moe::cpu {
namespace {

using adamw_detail::Consts;

constexpr int64_t kChunk = 65536;   // Σx² chunk: the unit of the fixed reduction order
constexpr int64_t kGrainUnits = 4096;  // 64Ki elements per thread at least, so small tensors stay serial

// The AVX-512 kernels also need DQ; the AVX2 ones run where kernel_util.h's use_avx2() says.
bool use_avx512_dq() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return has && current_isa() == Isa::Native;
}

// The per-element sequence of Consts, one lane at a time.
void update_scalar(const Consts& c, float* p, const float* grad, float* m, float* v, uint16_t* p16, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * c.grad_scale;
    m[i] = std::fma(c.one_minus_beta1, g, c.beta1 * m[i]);
    v[i] = std::fma(c.one_minus_beta2 * g, g, c.beta2 * v[i]);
    float denom = std::sqrt(v[i]) / c.bias2_sqrt + c.eps;
    p[i] = p[i] * c.decay + (c.neg_step * m[i]) / denom;
    if (p16) p16[i] = f32_to_bf16(p[i]);
  }
}

// 16 lanes (index mod 16) accumulated in double, then added in lane order: x² is exact in double, so this
// matches the vector kernels bit for bit.
double chunk_sum_squares_scalar(const float* x, int64_t n) {
  double lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] += double(x[i]) * double(x[i]);
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

}  // namespace

void adamw_update(ThreadPool& tp, float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp,
                  uint16_t* p16) {
  if (n <= 0) return;
  const Consts c = adamw_detail::fold(hp);
  const auto kernel = use_avx512_dq() ? &adamw_detail::update_avx512
                      : use_avx2()       ? &adamw_detail::update_avx2
                                         : &update_scalar;
  const int64_t units = (n + 15) / 16;
  tp.parallel_for(
      units,
      [&](int64_t u0, int64_t u1, int) {
        const int64_t i0 = u0 * 16, i1 = std::min(n, u1 * 16);
        kernel(c, p + i0, grad + i0, m + i0, v + i0, p16 ? p16 + i0 : nullptr, i1 - i0);
      },
      kGrainUnits);
}

double sum_squares(ThreadPool& tp, const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const auto chunk_sum = use_avx512_dq() ? &adamw_detail::chunk_sum_squares_avx512
                         : use_avx2()       ? &adamw_detail::chunk_sum_squares_avx2
                                            : &chunk_sum_squares_scalar;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks == 1) return chunk_sum(x, n);
  std::vector<double> partial(chunks);
  tp.parallel_for(chunks, [&](int64_t c0, int64_t c1, int) {
    for (int64_t c = c0; c < c1; ++c) partial[c] = chunk_sum(x + c * kChunk, std::min(kChunk, n - c * kChunk));
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace moe::cpu
