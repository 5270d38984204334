#include "bench_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/amx_support.h"
#include "bench_timing.h"

namespace bench {
namespace {

constexpr long kPeakIters = 50'000'000;

__attribute__((target("avx512f"))) float fma_loop_avx512(long iters) {
  // Distinct starting values: identical chains would be merged into one by the compiler.
  __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f), a3 = _mm512_set1_ps(3.f),
         a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f), a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f),
         a8 = _mm512_set1_ps(8.f), a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, x, y), a1 = _mm512_fmadd_ps(a1, x, y), a2 = _mm512_fmadd_ps(a2, x, y);
    a3 = _mm512_fmadd_ps(a3, x, y), a4 = _mm512_fmadd_ps(a4, x, y), a5 = _mm512_fmadd_ps(a5, x, y);
    a6 = _mm512_fmadd_ps(a6, x, y), a7 = _mm512_fmadd_ps(a7, x, y), a8 = _mm512_fmadd_ps(a8, x, y);
    a9 = _mm512_fmadd_ps(a9, x, y), a10 = _mm512_fmadd_ps(a10, x, y), a11 = _mm512_fmadd_ps(a11, x, y);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iters) {
  __m256 a0 = _mm256_set1_ps(0.f), a1 = _mm256_set1_ps(1.f), a2 = _mm256_set1_ps(2.f), a3 = _mm256_set1_ps(3.f),
         a4 = _mm256_set1_ps(4.f), a5 = _mm256_set1_ps(5.f), a6 = _mm256_set1_ps(6.f), a7 = _mm256_set1_ps(7.f),
         a8 = _mm256_set1_ps(8.f), a9 = _mm256_set1_ps(9.f), a10 = _mm256_set1_ps(10.f), a11 = _mm256_set1_ps(11.f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, x, y), a1 = _mm256_fmadd_ps(a1, x, y), a2 = _mm256_fmadd_ps(a2, x, y);
    a3 = _mm256_fmadd_ps(a3, x, y), a4 = _mm256_fmadd_ps(a4, x, y), a5 = _mm256_fmadd_ps(a5, x, y);
    a6 = _mm256_fmadd_ps(a6, x, y), a7 = _mm256_fmadd_ps(a7, x, y), a8 = _mm256_fmadd_ps(a8, x, y);
    a9 = _mm256_fmadd_ps(a9, x, y), a10 = _mm256_fmadd_ps(a10, x, y), a11 = _mm256_fmadd_ps(a11, x, y);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for (float l : lanes) r += l;
  return r;
}

__attribute__((target("avx512f,avx512bf16"))) float dpbf16_loop_avx512(long iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i));
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3000);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

// TDPBF16PS on tiles that never leave the unit: four 16x16 fp32 C tiles fed by two A and two B tiles, the GEMM
// kernel's plan (gemm_bf16_amx_tiles.h); each instruction is 16 x 16 outputs of 32 products. One instruction takes
// about as long as 64 vdpbf16ps, so the loop runs iters / kAmxPerIter rounds. Only where amx_support().usable
// (the tile permission granted).
constexpr long kAmxPerIter = 64;
__attribute__((target("amx-tile,amx-bf16"))) float tdpbf16_loop(long iters) {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  asm volatile("" : : "r"(&cfg) : "memory");  // the intrinsic declares only 8 of the 64 bytes it reads
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t ab[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) ab[i] = i % 2 ? 0x3000 : 0x3f80;  // 1 and 2^-31: sums stay small and normal
  asm volatile("" : : "r"(ab) : "memory");
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long i = 0; i < iters / kAmxPerIter; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// Best of three timed runs of loop(kPeakIters) on every pool thread; flops_per_iter counts one thread's round.
double rate(moe::ThreadPool& tp, float (*loop)(long), double flops_per_iter) {
  std::vector<float> sink(tp.threads());
  auto run = [&](long iters) { tp.run_on_all([&](int w) { sink[w] = loop(iters); }); };
  run(kPeakIters / 10);
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    run(kPeakIters);
    best = std::max(best, flops_per_iter * double(kPeakIters) * tp.threads() / seconds_since(t0) / 1e9);
  }
  return best;
}

}  // namespace

Peak measure_peak(moe::ThreadPool& tp) {
  __builtin_cpu_init();
  Peak p;
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512) p.fp32_isa = "avx512", p.fp32_gflops = rate(tp, fma_loop_avx512, 2.0 * 12 * 16);
  else if (avx2) p.fp32_isa = "avx2", p.fp32_gflops = avx2_fma_peak(tp);
  // The bf16 peak of the kernel family sgemm_bf16 dispatches to. TDPBF16PS: four per round, each 16 x 16 x 32
  // products and their sums; vdpbf16ps: 16 lanes, each two products and their sums.
  if (moe::cpu::amx_support().usable)
    p.bf16_isa = "amx", p.bf16_gflops = rate(tp, tdpbf16_loop, 4.0 * 16 * 16 * 32 * 2 / kAmxPerIter);
  else if (avx512 && __builtin_cpu_supports("avx512bf16"))
    p.bf16_isa = "avx512bf16", p.bf16_gflops = rate(tp, dpbf16_loop_avx512, 4.0 * 12 * 16);
  // Without vdpbf16ps the bf16 kernels run on fp32 FMAs (two per pair of products), so fp32's peak bounds them.
  else if (avx512) p.bf16_isa = "avx512fma", p.bf16_gflops = p.fp32_gflops;
  else if (avx2) p.bf16_isa = "avx2fma", p.bf16_gflops = p.fp32_gflops;
  return p;
}

double avx2_fma_peak(moe::ThreadPool& tp) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0.0;
  return rate(tp, fma_loop_avx2, 2.0 * 12 * 8);
}

}  // namespace bench
