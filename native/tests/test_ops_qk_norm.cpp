// The attention's q/k RMSNorm over packed qkv rows (per head and over the whole projection) and the clamp of
// q/k/v on every backend (ops_checks.h): forward against double references, finite-difference gradients of every
// input, accumulation (+=) of every backward, agreement with the reference backend and 1 vs 3 threads.
#include <cmath>
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using moe_test::random_vector;
using namespace ops_test;

namespace {

struct QkShape {
  int N, NH, NKV, HS;
  bool per_head;
  int row() const { return (NH + 2 * NKV) * HS; }
  int qw() const { return per_head ? HS : NH * HS; }
  int kw() const { return per_head ? HS : NKV * HS; }
  int groups() const { return per_head ? NH + NKV : 2; }
  std::string tag() const { return per_head ? "per head" : "projection"; }
};

// Each group of q (then k) normalised with its weight; v unchanged.
DVec ref_qk_norm(const QkShape& s, const Vec& x, const Vec& qw, const Vec& kw, float eps) {
  DVec out(x.begin(), x.end());
  for (int n = 0; n < s.N; ++n) {
    auto norm = [&](int at, int len, const Vec& w) {
      double ms = 0;
      for (int i = 0; i < len; ++i) ms += (double)x[(size_t)n * s.row() + at + i] * x[(size_t)n * s.row() + at + i];
      const double r = 1.0 / std::sqrt(ms / len + eps);
      for (int i = 0; i < len; ++i) out[(size_t)n * s.row() + at + i] = x[(size_t)n * s.row() + at + i] * r * w[i];
    };
    const int q = s.NH * s.HS;
    for (int at = 0; at < q; at += s.qw()) norm(at, s.qw(), qw);
    for (int at = q; at < q + s.NKV * s.HS; at += s.kw()) norm(at, s.kw(), kw);
  }
  return out;
}

const QkShape kShapes[] = {{7, 4, 2, 6, true}, {7, 4, 2, 6, false}, {5, 3, 3, 4, false}};

}  // namespace

TEST(qk_norm_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    for (const QkShape& s : kShapes) {
      const float eps = 1e-5f;
      const int n = s.N * s.row();
      Vec x = random_vector(n, 1), qw = random_vector(s.qw(), 2), kw = random_vector(s.kw(), 3),
          r = random_vector(n, 4);
      Vec out(n), rstd(s.N * s.groups()), dx(n), dqw(s.qw()), dkw(s.kw());
      be.qk_norm_forward(out.data(), rstd.data(), x.data(), qw.data(), kw.data(), s.N, s.NH, s.NKV, s.HS,
                         s.per_head, eps);
      expect_below("qk_norm forward " + s.tag(), max_err(out, ref_qk_norm(s, x, qw, kw, eps)), kForwardTol);
      auto loss = [&] {
        be.qk_norm_forward(out.data(), rstd.data(), x.data(), qw.data(), kw.data(), s.N, s.NH, s.NKV, s.HS,
                           s.per_head, eps);
        return weighted_sum(out, r);
      };
      loss();
      be.qk_norm_backward(dx.data(), dqw.data(), dkw.data(), r.data(), x.data(), qw.data(), kw.data(), rstd.data(),
                          s.N, s.NH, s.NKV, s.HS, s.per_head);
      check_grad("qk_norm dinp " + s.tag(), x, dx, loss, kGradTolNonlinear, 512);
      check_grad("qk_norm dq_w " + s.tag(), qw, dqw, loss, kGradTolLinear);
      check_grad("qk_norm dk_w " + s.tag(), kw, dkw, loss, kGradTolLinear);
      loss();
      Vec dx2 = dx, dqw2 = dqw, dkw2 = dkw;
      be.qk_norm_backward(dx2.data(), dqw2.data(), dkw2.data(), r.data(), x.data(), qw.data(), kw.data(),
                          rstd.data(), s.N, s.NH, s.NKV, s.HS, s.per_head);
      expect_doubles("qk_norm dinp", dx, dx2);
      expect_doubles("qk_norm dq_w", dqw, dqw2);
      expect_doubles("qk_norm dk_w", dkw, dkw2);
    }
  });
}

TEST(qk_norm_matches_reference_any_threads) {
  for (const QkShape& s : {QkShape{41, 8, 2, 16, true}, QkShape{41, 8, 2, 16, false}}) {
    const int n = s.N * s.row();
    Vec x = random_vector(n, 1), qw = random_vector(s.qw(), 2), kw = random_vector(s.kw(), 3),
        dout = random_vector(n, 4);
    expect_consistent("qk_norm " + s.tag(), [&](Backend& be) {
      Vec out(n), rstd(s.N * s.groups()), dx(n), dqw(s.qw()), dkw(s.kw());
      be.qk_norm_forward(out.data(), rstd.data(), x.data(), qw.data(), kw.data(), s.N, s.NH, s.NKV, s.HS,
                         s.per_head, 1e-6f);
      be.qk_norm_backward(dx.data(), dqw.data(), dkw.data(), dout.data(), x.data(), qw.data(), kw.data(),
                          rstd.data(), s.N, s.NH, s.NKV, s.HS, s.per_head);
      return concat({&out, &rstd, &dx, &dqw, &dkw});
    });
  }
}

// Inputs are kept 0.05 away from ±limit, so a ±h step never crosses it and the finite difference is exact;
// both clamped and unclamped values occur.
TEST(clamp_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int n = 301;
    const float limit = 0.6f;
    Vec x = random_vector(n, 1), r = random_vector(n, 2), out(n), dx(n);
    int clamped = 0;
    for (float& v : x) {
      if (std::fabs(std::fabs(v) - limit) < 0.05f) v = v > 0 ? v + 0.1f : v - 0.1f;
      clamped += std::fabs(v) > limit;
    }
    CHECK(clamped > 20 && clamped < n - 20);
    be.clamp_forward(out.data(), x.data(), n, limit);
    DVec ref(n);
    for (int i = 0; i < n; ++i) ref[i] = std::fmin(std::fmax((double)x[i], -limit), limit);
    expect_below("clamp forward", max_err(out, ref), 1e-7);
    auto loss = [&] {
      be.clamp_forward(out.data(), x.data(), n, limit);
      return weighted_sum(out, r);
    };
    be.clamp_backward(dx.data(), r.data(), x.data(), n, limit);
    check_grad("clamp dinp", x, dx, loss, kGradTolLinear, n);
    for (int i = 0; i < n; ++i)
      if (std::fabs(x[i]) > limit) CHECK_MSG(dx[i] == 0.0f, "clamp: a clamped value got a gradient");
    Vec dx2 = dx;
    be.clamp_backward(dx2.data(), r.data(), x.data(), n, limit);
    expect_doubles("clamp dinp", dx, dx2);
  });
}

TEST(clamp_matches_reference_any_threads) {
  const int n = 10007;
  Vec x = random_vector(n, 1, 2.0f), dout = random_vector(n, 2);
  expect_consistent("clamp", [&](Backend& be) {
    Vec out(n), dx(n);
    be.clamp_forward(out.data(), x.data(), n, 1.0f);
    be.clamp_backward(dx.data(), dout.data(), x.data(), n, 1.0f);
    return concat({&out, &dx});
  }, 1e-7);
}

TEST_MAIN()
