// The ops gpt-oss adds, on every backend (ops_checks.h): attention with a sliding window and per-head sinks
// (forward against a double reference, finite-difference gradients of q/k/v and of the sinks, accumulation,
// thread-count independence, and the plain call with a default spec bit-identical to an explicit empty one),
// and the clamped SwiGLU (forward, gradients away from the clamps, exact zeros beyond them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using moe::AttentionSpec;
using moe_test::random_vector;
using namespace ops_test;

namespace {

struct Shape {
  int B, T, NH, NKV, HS, window;
  int qkv_size() const { return B * T * (NH + 2 * NKV) * HS; }
  int out_size() const { return B * T * NH * HS; }
};

// softmax over keys max(0, i-window+1) .. i and the head's sink, times v.
void ref_attention(DVec& out, DVec& lse, const Vec& qkv, const Vec* sinks, const Shape& s) {
  const int row = (s.NH + 2 * s.NKV) * s.HS;
  out.assign((size_t)s.out_size(), 0.0);
  lse.assign((size_t)s.B * s.NH * s.T, 0.0);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h) {
      const int g = h / (s.NH / s.NKV);
      for (int i = 0; i < s.T; ++i) {
        const int lo = s.window > 0 ? std::max(0, i - s.window + 1) : 0;
        const float* q = &qkv[((size_t)b * s.T + i) * row + (size_t)h * s.HS];
        DVec sc(s.T, 0.0);
        double m = sinks ? (double)(*sinks)[h] : -1e300;
        for (int j = lo; j <= i; ++j) {
          const float* k = &qkv[((size_t)b * s.T + j) * row + (size_t)(s.NH + g) * s.HS];
          double d = 0;
          for (int e = 0; e < s.HS; ++e) d += (double)q[e] * k[e];
          sc[j] = d / std::sqrt((double)s.HS);
          m = std::fmax(m, sc[j]);
        }
        double l = sinks ? std::exp((*sinks)[h] - m) : 0.0;
        for (int j = lo; j <= i; ++j) l += std::exp(sc[j] - m);
        lse[((size_t)b * s.NH + h) * s.T + i] = m + std::log(l);
        for (int j = lo; j <= i; ++j) {
          const float* v = &qkv[((size_t)b * s.T + j) * row + (size_t)(s.NH + s.NKV + g) * s.HS];
          const double p = std::exp(sc[j] - m) / l;
          for (int e = 0; e < s.HS; ++e) out[((size_t)b * s.T + i) * s.NH * s.HS + (size_t)h * s.HS + e] += p * v[e];
        }
      }
    }
}

std::string tag(const Shape& s, bool sinks) {
  return "T=" + std::to_string(s.T) + " W=" + std::to_string(s.window) + (sinks ? " sinks" : "");
}

void check_forward(Backend& be, const Shape& s, bool with_sinks) {
  Vec qkv = random_vector(s.qkv_size(), 1, 1.5f), out(s.out_size()), lse(s.B * s.NH * s.T);
  Vec sinks = random_vector(s.NH, 3, 2.0f);
  AttentionSpec spec;
  spec.window = s.window;
  spec.sinks = with_sinks ? sinks.data() : nullptr;
  be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
  DVec ref_out, ref_lse;
  ref_attention(ref_out, ref_lse, qkv, with_sinks ? &sinks : nullptr, s);
  expect_below("attention out " + tag(s, with_sinks), max_err(out, ref_out), kForwardTol);
  expect_below("attention lse " + tag(s, with_sinks), max_err(lse, ref_lse), kForwardTol);
}

void check_gradients(Backend& be, const Shape& s, int samples) {
  Vec qkv = random_vector(s.qkv_size(), 1, 1.5f), r = random_vector(s.out_size(), 2);
  Vec sinks = random_vector(s.NH, 3, 2.0f);
  Vec out(s.out_size()), lse(s.B * s.NH * s.T), dqkv(s.qkv_size()), dsinks(s.NH, 0.0f);
  AttentionSpec spec;
  spec.window = s.window;
  spec.sinks = sinks.data();
  spec.dsinks = dsinks.data();
  auto loss = [&] {
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    return weighted_sum(out, r);
  };
  loss();
  be.attention_backward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
  check_grad("attention dqkv " + tag(s, true), qkv, dqkv, loss, kGradTolNonlinear, samples);
  check_grad("attention dsinks " + tag(s, true), sinks, dsinks, loss, kGradTolNonlinear);
  loss();
  Vec dqkv2 = dqkv, dsinks2 = dsinks;
  spec.dsinks = dsinks2.data();
  be.attention_backward(dqkv2.data(), r.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS,
                        spec);
  expect_doubles("attention dqkv " + tag(s, true), dqkv, dqkv2);
  expect_doubles("attention dsinks " + tag(s, true), dsinks, dsinks2);
}

}  // namespace

TEST(attention_window_and_sinks_forward) {
  for_each_backend([&](Backend& be) {
    for (bool sinks : {false, true}) {
      check_forward(be, {2, 9, 4, 2, 8, 3}, sinks);
      check_forward(be, {2, 9, 4, 2, 8, 0}, sinks);
      check_forward(be, {1, 150, 4, 1, 8, 70}, sinks);  // the window crosses query tiles
      check_forward(be, {1, 150, 2, 2, 8, 5}, sinks);
    }
  });
}

TEST(attention_window_and_sinks_gradients) {
  for_each_backend([&](Backend& be) {
    check_gradients(be, {2, 7, 4, 2, 8, 3}, 1 << 20);
    check_gradients(be, {2, 7, 4, 4, 8, 0}, 1 << 20);
    check_gradients(be, {1, 90, 4, 2, 8, 70}, 400);
  });
}

TEST(attention_window_hides_older_keys) {
  for_each_backend([&](Backend& be) {
    // With window 4, changing key/value 0 changes rows 0..3 only.
    const Shape s{1, 12, 2, 1, 8, 4};
    Vec qkv = random_vector(s.qkv_size(), 1), out(s.out_size()), out2(s.out_size()), lse(s.B * s.NH * s.T);
    AttentionSpec spec;
    spec.window = s.window;
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    const int row = (s.NH + 2 * s.NKV) * s.HS;
    for (int j = s.NH * s.HS; j < row; ++j) qkv[j] += 3.0f;
    be.attention_forward(out2.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    const size_t first = (size_t)s.window * s.NH * s.HS;
    CHECK(std::memcmp(out.data(), out2.data(), first * sizeof(float)) != 0);
    CHECK(std::memcmp(out.data() + first, out2.data() + first, (out.size() - first) * sizeof(float)) == 0);
  });
}

TEST(attention_default_spec_is_plain_causal) {
  for_each_backend([&](Backend& be) {
    const Shape s{2, 70, 4, 2, 8, 0};
    Vec qkv = random_vector(s.qkv_size(), 1), dout = random_vector(s.out_size(), 2);
    Vec o1(s.out_size()), o2(s.out_size()), l1(s.B * s.NH * s.T), l2(l1.size()), d1(s.qkv_size()), d2(s.qkv_size());
    be.attention_forward(o1.data(), l1.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    be.attention_backward(d1.data(), dout.data(), qkv.data(), o1.data(), l1.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    // A window as long as the sequence masks nothing.
    AttentionSpec spec;
    spec.window = s.T;
    be.attention_forward(o2.data(), l2.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    be.attention_backward(d2.data(), dout.data(), qkv.data(), o2.data(), l2.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    CHECK(bitwise_equal(o1, o2));
    CHECK(bitwise_equal(l1, l2));
    CHECK(bitwise_equal(d1, d2));
  });
}

TEST(attention_window_and_sinks_any_threads) {
  const Shape s{3, 150, 4, 2, 16, 37};
  Vec qkv = random_vector(s.qkv_size(), 1), dout = random_vector(s.out_size(), 2), sinks = random_vector(s.NH, 3);
  expect_consistent("attention window+sinks", [&](Backend& be) {
    Vec out(s.out_size()), lse(s.B * s.NH * s.T), dqkv(s.qkv_size()), dsinks(s.NH, 0.0f);
    AttentionSpec spec{s.window, sinks.data(), dsinks.data()};
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS, spec);
    be.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS,
                          spec);
    return concat({&out, &lse, &dqkv, &dsinks});
  });
}

// ---------------------------------------------------------------------------------------------
// clamped SwiGLU

namespace {
constexpr float kAlpha = 1.702f, kLimit = 7.0f;

double ref_clamped(double g, double u) {
  g = std::fmin(g, kLimit);
  u = std::fmax(-kLimit, std::fmin(u, kLimit));
  return (u + 1.0) * g / (1.0 + std::exp(-kAlpha * g));
}
}  // namespace

TEST(swiglu_clamped_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 12, F = 8;
    // Scale 12: many gates and ups beyond ±7.
    Vec gu = random_vector(N * 2 * F, 1, 12.0f), r = random_vector(N * F, 2), out(N * F), dgu(N * 2 * F);
    be.swiglu_clamped_forward(out.data(), gu.data(), N, F, kAlpha, kLimit);
    DVec ref(N * F);
    int clamped = 0;
    for (int n = 0; n < N; ++n)
      for (int f = 0; f < F; ++f) {
        const float g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f];
        ref[n * F + f] = ref_clamped(g, u);
        clamped += g > kLimit || std::fabs(u) > kLimit;
      }
    CHECK(clamped > 10);
    expect_below("swiglu_clamped forward", max_err(out, ref), kForwardTol);
    // Finite differences only where no clamp boundary is within the step (h = 1e-2).
    for (float& v : gu)
      if (std::fabs(std::fabs(v) - kLimit) < 0.05f) v += 0.2f;
    auto loss = [&] {
      be.swiglu_clamped_forward(out.data(), gu.data(), N, F, kAlpha, kLimit);
      return weighted_sum(out, r);
    };
    be.swiglu_clamped_backward(dgu.data(), r.data(), gu.data(), N, F, kAlpha, kLimit);
    check_grad("swiglu_clamped dgate_up", gu, dgu, loss, kGradTolNonlinear, 1 << 20);
    for (int n = 0; n < N; ++n)
      for (int f = 0; f < F; ++f) {
        if (gu[n * 2 * F + f] > kLimit) CHECK(dgu[n * 2 * F + f] == 0.0f);
        if (std::fabs(gu[n * 2 * F + F + f]) > kLimit) CHECK(dgu[n * 2 * F + F + f] == 0.0f);
      }
    Vec dgu2 = dgu;
    be.swiglu_clamped_backward(dgu2.data(), r.data(), gu.data(), N, F, kAlpha, kLimit);
    expect_doubles("swiglu_clamped dgate_up", dgu, dgu2);
  });
}

TEST(swiglu_clamped_any_threads) {
  const int N = 67, F = 96;
  Vec gu = random_vector(N * 2 * F, 3, 10.0f), d = random_vector(N * F, 4);
  expect_consistent("swiglu_clamped", [&](Backend& be) {
    Vec out(N * F), dgu(N * 2 * F);
    be.swiglu_clamped_forward(out.data(), gu.data(), N, F, kAlpha, kLimit);
    be.swiglu_clamped_backward(dgu.data(), d.data(), gu.data(), N, F, kAlpha, kLimit);
    return concat({&out, &dgu});
  });
}

TEST_MAIN()
