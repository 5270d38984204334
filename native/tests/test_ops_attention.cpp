// Rotary positions and causal attention (GQA) on every backend (ops_checks.h): forward against naive double
// references, finite-difference gradient checks, accumulation (+=) of every backward, the causal mask, agreement
// with the reference backend, and bit-identical results for 1 vs 3 threads.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using moe_test::random_vector;
using namespace ops_test;

namespace {

DVec ref_rope(const Vec& x, int B, int T, int NH, int NKV, int HS, double theta) {
  int row = (NH + 2 * NKV) * HS, half = HS / 2;
  DVec out(x.begin(), x.end());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < NH + NKV; ++h)
        for (int i = 0; i < half; ++i) {
          size_t base = ((size_t)b * T + t) * row + (size_t)h * HS;
          double a = t * std::pow(theta, -2.0 * i / HS);
          double x1 = x[base + i], x2 = x[base + half + i];
          out[base + i] = x1 * std::cos(a) - x2 * std::sin(a);
          out[base + half + i] = x2 * std::cos(a) + x1 * std::sin(a);
        }
  return out;
}

// softmax(q·kᵀ/√HS + causal mask)·v per head, query head h reading kv head h / (NH/NKV).
void ref_attention(DVec& out, DVec& lse, const Vec& qkv, int B, int T, int NH, int NKV, int HS) {
  int row = (NH + 2 * NKV) * HS;
  out.assign((size_t)B * T * NH * HS, 0.0);
  lse.assign((size_t)B * NH * T, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      int g = h / (NH / NKV);
      for (int i = 0; i < T; ++i) {
        const float* q = &qkv[((size_t)b * T + i) * row + (size_t)h * HS];
        DVec s(i + 1);
        double m = -1e300;
        for (int j = 0; j <= i; ++j) {
          const float* k = &qkv[((size_t)b * T + j) * row + (size_t)(NH + g) * HS];
          double d = 0;
          for (int e = 0; e < HS; ++e) d += (double)q[e] * k[e];
          s[j] = d / std::sqrt((double)HS);
          m = std::fmax(m, s[j]);
        }
        double l = 0;
        for (int j = 0; j <= i; ++j) l += std::exp(s[j] - m);
        lse[((size_t)b * NH + h) * T + i] = m + std::log(l);
        for (int j = 0; j <= i; ++j) {
          const float* v = &qkv[((size_t)b * T + j) * row + (size_t)(NH + NKV + g) * HS];
          double p = std::exp(s[j] - m) / l;
          for (int e = 0; e < HS; ++e) out[((size_t)b * T + i) * NH * HS + (size_t)h * HS + e] += p * v[e];
        }
      }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// rope

TEST(rope_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int B = 2, T = 37, NH = 4, NKV = 2, HS = 8;
    const int n = B * T * (NH + 2 * NKV) * HS;
    for (float theta : {10000.0f, 10.0f}) {
      Vec x = random_vector(n, 1), r = random_vector(n, 2), out(n), dx(n);
      be.rope_forward(out.data(), x.data(), B, T, NH, NKV, HS, theta);
      expect_below("rope forward θ=" + std::to_string((int)theta), max_err(out, ref_rope(x, B, T, NH, NKV, HS, theta)),
                   kForwardTol);
      auto loss = [&] {
        be.rope_forward(out.data(), x.data(), B, T, NH, NKV, HS, theta);
        return weighted_sum(out, r);
      };
      be.rope_backward(dx.data(), r.data(), B, T, NH, NKV, HS, theta);
      check_grad("rope dinp θ=" + std::to_string((int)theta), x, dx, loss, kGradTolLinear, 1024);
      Vec dx2 = dx;
      be.rope_backward(dx2.data(), r.data(), B, T, NH, NKV, HS, theta);
      expect_doubles("rope dinp", dx, dx2);
    }
  });
}

TEST(rope_matches_reference_any_threads) {
  const int B = 3, T = 29, NH = 6, NKV = 2, HS = 16;
  const int n = B * T * (NH + 2 * NKV) * HS;
  Vec x = random_vector(n, 1), dout = random_vector(n, 2);
  expect_consistent("rope", [&](Backend& be) {
    Vec out(n), dx(n);
    be.rope_forward(out.data(), x.data(), B, T, NH, NKV, HS, 10000.0f);
    be.rope_backward(dx.data(), dout.data(), B, T, NH, NKV, HS, 10000.0f);
    return concat({&out, &dx});
  });
}

// ---------------------------------------------------------------------------------------------
// attention

namespace {

struct AttnShape {
  int B, T, NH, NKV, HS;
  int qkv_size() const { return B * T * (NH + 2 * NKV) * HS; }
  int out_size() const { return B * T * NH * HS; }
};

void check_attention_forward(Backend& be, const AttnShape& s) {
  Vec qkv = random_vector(s.qkv_size(), 1, 1.5f), out(s.out_size()), lse(s.B * s.NH * s.T);
  be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
  DVec ref_out, ref_lse;
  ref_attention(ref_out, ref_lse, qkv, s.B, s.T, s.NH, s.NKV, s.HS);
  std::string tag = "T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV);
  expect_below("attention out " + tag, max_err(out, ref_out), kForwardTol);
  expect_below("attention lse " + tag, max_err(lse, ref_lse), kForwardTol);
}

void check_attention_gradients(Backend& be, const AttnShape& s, int samples) {
  Vec qkv = random_vector(s.qkv_size(), 1, 1.5f), r = random_vector(s.out_size(), 2);
  Vec out(s.out_size()), lse(s.B * s.NH * s.T), dqkv(s.qkv_size());
  auto loss = [&] {
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    return weighted_sum(out, r);
  };
  loss();
  be.attention_backward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS);
  std::string tag = "T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV);
  check_grad("attention dqkv " + tag, qkv, dqkv, loss, kGradTolNonlinear, samples);
  loss();
  Vec dqkv2 = dqkv;
  be.attention_backward(dqkv2.data(), r.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS);
  expect_doubles("attention dqkv " + tag, dqkv, dqkv2);
}

}  // namespace

TEST(attention_forward_matches_reference) {
  for_each_backend([&](Backend& be) {
    check_attention_forward(be, {2, 5, 4, 2, 8});
    check_attention_forward(be, {2, 5, 4, 4, 8});
    check_attention_forward(be, {2, 150, 4, 2, 16});  // several query tiles, ragged last tile
    check_attention_forward(be, {1, 130, 6, 1, 8});   // multi-query
  });
}

TEST(attention_gradients) {
  for_each_backend([&](Backend& be) {
    check_attention_gradients(be, {2, 5, 4, 2, 8}, 1 << 20);
    check_attention_gradients(be, {2, 5, 4, 4, 8}, 1 << 20);
    check_attention_gradients(be, {1, 70, 4, 2, 8}, 400);  // crosses a tile boundary
  });
}

TEST(attention_causal_mask) {
  for_each_backend([&](Backend& be) {
    // Perturbing the last token's k and v must leave every earlier output unchanged.
    const AttnShape s{1, 70, 4, 2, 8};
    Vec qkv = random_vector(s.qkv_size(), 1), out(s.out_size()), out2(s.out_size()), lse(s.B * s.NH * s.T);
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    int row = (s.NH + 2 * s.NKV) * s.HS;
    for (int j = s.NH * s.HS; j < row; ++j) qkv[(size_t)(s.T - 1) * row + j] += 3.0f;
    be.attention_forward(out2.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    size_t earlier = (size_t)(s.T - 1) * s.NH * s.HS;
    CHECK(std::memcmp(out.data(), out2.data(), earlier * sizeof(float)) == 0);
    CHECK(std::memcmp(out.data() + earlier, out2.data() + earlier, s.NH * s.HS * sizeof(float)) != 0);
  });
}

TEST(attention_matches_reference_any_threads) {
  const AttnShape s{3, 150, 4, 2, 16};
  Vec qkv = random_vector(s.qkv_size(), 1), dout = random_vector(s.out_size(), 2);
  expect_consistent("attention", [&](Backend& be) {
    Vec out(s.out_size()), lse(s.B * s.NH * s.T), dqkv(s.qkv_size());
    be.attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    be.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.NH, s.NKV, s.HS);
    return concat({&out, &lse, &dqkv});
  });
}

TEST_MAIN()
