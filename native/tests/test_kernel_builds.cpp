// Every ISA build of the row and span kernels this CPU can run (kernel_builds.h), called directly: the AVX2 builds run
// here even on a CPU whose ops would pick AVX-512. Each agrees with the baseline build (compiled into this file from
// the same headers) to a few ulp (the vector builds may fuse a multiply and an add), over lengths that leave every
// kind of tail; the bf16 conversion gives the same bits, specials included.
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/attention_rows.h"
#include "backend/cpu/crossentropy_rows.h"
#include "backend/cpu/gelu_kernels.h"
#include "backend/cpu/kernel_builds.h"
#include "backend/cpu/swiglu_kernels.h"
#include "core/half.h"
#include "testing.h"

namespace {

using namespace moe::cpu;

struct Build {
  const char* name;
  bool runs;
  decltype(&swiglu_forward_row_avx2) swiglu_forward;
  decltype(&swiglu_backward_row_avx2) swiglu_backward;
  decltype(&gelu_forward_span_avx2) gelu_forward;
  decltype(&gelu_backward_span_avx2) gelu_backward;
  decltype(&crossentropy_row_lse_avx2) ce_lse;
  decltype(&crossentropy_row_grad_avx2) ce_grad;
  decltype(&attention_softmax_row_avx2) softmax_row;
  decltype(&attention_grad_row_avx2) grad_row;
  decltype(&to_bf16_span_avx2) to_bf16;
};

std::vector<Build> builds() {
  __builtin_cpu_init();
  return {{"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), swiglu_forward_row_avx2,
           swiglu_backward_row_avx2, gelu_forward_span_avx2, gelu_backward_span_avx2, crossentropy_row_lse_avx2,
           crossentropy_row_grad_avx2, attention_softmax_row_avx2, attention_grad_row_avx2, to_bf16_span_avx2},
          {"avx512", bool(__builtin_cpu_supports("avx512f")), swiglu_forward_row_avx512, swiglu_backward_row_avx512,
           gelu_forward_span_avx512, gelu_backward_span_avx512, crossentropy_row_lse_avx512,
           crossentropy_row_grad_avx512, attention_softmax_row_avx512, attention_grad_row_avx512,
           to_bf16_span_avx512}};
}

const int kLengths[] = {1, 7, 8, 9, 15, 16, 17, 33, 100, 1031};

// Worst |x - y| relative to the larger of |y| and the vector's largest |y| / 100: a few ulp of the values that
// matter, where a result that nearly cancels to zero may differ in more of its own bits.
double worst_rel(const std::vector<float>& x, const std::vector<float>& y) {
  double floor = 1e-30, worst = 0;
  for (float v : y) floor = std::fmax(floor, std::fabs(double(v)) / 100);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    if (!std::isnan(x[i])) worst = std::fmax(worst, std::fabs(double(x[i]) - y[i]) / std::fmax(std::fabs(double(y[i])), floor));
  }
  return worst;
}

double worst_rel(float x, float y) { return worst_rel(std::vector<float>{x}, std::vector<float>{y}); }

constexpr double kTol = 2e-6;

}  // namespace

TEST(every_elementwise_build_this_cpu_runs_agrees_with_the_baseline) {
  for (const Build& b : builds()) {
    if (!b.runs) {
      std::printf("  %s builds skipped: this CPU does not have them\n", b.name);
      continue;
    }
    for (int n : kLengths) {
      const std::string at = std::string(b.name) + ", n=" + std::to_string(n);
      const std::vector<float> x = moe_test::random_vector(n, 1, 6.0f), y = moe_test::random_vector(n, 2, 2.0f),
                               d = moe_test::random_vector(n, 3, 1.0f);
      std::vector<float> got(n), want(n), got2(n, 0.5f), want2(n, 0.5f);
      b.swiglu_forward(got.data(), x.data(), y.data(), n);
      swiglu_forward_row(want.data(), x.data(), y.data(), n);
      CHECK_MSG(worst_rel(got, want) < kTol, at + ": swiglu forward");
      got.assign(n, 0.25f), want.assign(n, 0.25f);
      b.swiglu_backward(got.data(), got2.data(), d.data(), x.data(), y.data(), n);
      swiglu_backward_row(want.data(), want2.data(), d.data(), x.data(), y.data(), n);
      CHECK_MSG(worst_rel(got, want) < kTol && worst_rel(got2, want2) < kTol, at + ": swiglu backward");
      b.gelu_forward(got.data(), x.data(), n);
      gelu_forward_span(want.data(), x.data(), n);
      CHECK_MSG(worst_rel(got, want) < kTol, at + ": gelu forward");
      b.gelu_backward(got.data(), x.data(), d.data(), n);
      gelu_backward_span(want.data(), x.data(), d.data(), n);
      CHECK_MSG(worst_rel(got, want) < kTol, at + ": gelu backward");
      CHECK_MSG(worst_rel(b.ce_lse(x.data(), n), crossentropy_row_lse(x.data(), n)) < kTol, at + ": cross-entropy lse");
      got.assign(d.begin(), d.end()), want.assign(d.begin(), d.end());
      b.ce_grad(got.data(), x.data(), n / 2, 0.125f, n);
      crossentropy_row_grad(want.data(), x.data(), n / 2, 0.125f, n);
      CHECK_MSG(worst_rel(got, want) < kTol, at + ": cross-entropy gradient");
    }
  }
}

// A row of scores with a window's start and the causal end inside it, with and without a sink.
TEST(every_attention_row_build_this_cpu_runs_agrees_with_the_baseline) {
  for (const Build& b : builds()) {
    if (!b.runs) continue;
    for (int nk : kLengths)
      for (const bool with_sink : {false, true}) {
        const std::string at = std::string(b.name) + ", nk=" + std::to_string(nk) + (with_sink ? ", sink" : "");
        const int lo = nk / 4, visible = nk - nk / 5, HS = 24;
        const float sink = 0.75f;
        const std::vector<float> s = moe_test::random_vector(nk, 4, 3.0f);
        std::vector<float> got(s), want(s);
        const float lse_got = b.softmax_row(got.data(), lo, visible, nk, with_sink ? &sink : nullptr);
        const float lse_want = attention_softmax_row(want.data(), lo, visible, nk, with_sink ? &sink : nullptr);
        CHECK_MSG(worst_rel(got, want) < kTol && worst_rel(lse_got, lse_want) < kTol, at + ": softmax row");
        const std::vector<float> dout = moe_test::random_vector(HS, 5), out = moe_test::random_vector(HS, 6),
                                 dp = moe_test::random_vector(nk, 7);
        got = s, want = s;
        std::vector<float> ds_got(dp), ds_want(dp);
        const float D_got = b.grad_row(got.data(), ds_got.data(), dout.data(), out.data(), HS, lse_want, 0.2f, lo,
                                       visible, nk);
        const float D_want = attention_grad_row(want.data(), ds_want.data(), dout.data(), out.data(), HS, lse_want,
                                                0.2f, lo, visible, nk);
        CHECK_MSG(worst_rel(got, want) < kTol && worst_rel(ds_got, ds_want) < 1e-5 && worst_rel(D_got, D_want) < kTol,
                  at + ": gradient row");
      }
  }
}

TEST(every_bf16_conversion_build_this_cpu_runs_gives_the_baselines_bits) {
  using lim = std::numeric_limits<float>;
  const float specials[] = {0.0f, -0.0f, lim::infinity(), -lim::infinity(), lim::quiet_NaN(), -lim::quiet_NaN(),
                            lim::denorm_min(), 1e-39f, 3.4e38f, std::bit_cast<float>(0x3F808000u),
                            std::bit_cast<float>(0x3F818000u), std::bit_cast<float>(0x7F7FFFFFu),
                            std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0xFFC0FFFFu)};
  for (const Build& b : builds()) {
    if (!b.runs) continue;
    for (int n : kLengths) {
      std::vector<float> x = moe_test::random_vector(n, 8, 3.0f);
      for (size_t i = 0; i < std::size(specials); ++i) x[i * 7 % n] = specials[i];
      std::vector<uint16_t> got(n + 9, 0xABCD), want(n + 9, 0xABCD);
      b.to_bf16(got.data(), x.data(), n);
      for (int i = 0; i < n; ++i) want[i] = moe::f32_to_bf16(x[i]);
      CHECK_MSG(got == want, std::string(b.name) + ", n=" + std::to_string(n) + ": other bits (or words past n)");
    }
  }
}

TEST_MAIN()
