// Shared checks of the op tests: forward error against double references, finite-difference gradients,
// accumulation (+=) of every backward, and bit-identical results for 1 vs 3 threads.
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "testing.h"

namespace ops_test {

using moe::ThreadPool;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

inline ThreadPool& pool(int threads) {
  static ThreadPool one(1), two(2), three(3);
  return threads == 1 ? one : threads == 2 ? two : three;
}

// Gradient-check tolerance (relative error, floor 1e-2) for float32 ops with h = 1e-2; smooth
// nonlinear ops (exp, tanh) leave an O(h²) truncation term on top of float rounding.
constexpr double kGradTolLinear = 5e-3;
constexpr double kGradTolNonlinear = 1e-2;
constexpr double kForwardTol = 1e-5;

inline double weighted_sum(const Vec& out, const Vec& r) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += (double)r[i] * (double)out[i];
  return s;
}

// Worst |a - ref| / max(|ref|, 1).
inline double max_err(const Vec& a, const DVec& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::fmax(worst, std::fabs(a[i] - ref[i]) / std::fmax(std::fabs(ref[i]), 1.0));
  return worst;
}

inline bool bitwise_equal(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline void expect_below(const std::string& what, double err, double tol) {
  std::printf("    %-34s %.2e (tol %.0e)\n", what.c_str(), err, tol);
  CHECK_MSG(err < tol, what + ": error " + std::to_string(err) + " >= " + std::to_string(tol));
}

// Full gradient check of `x` (every coordinate when small, else `samples` spread over it).
inline void check_grad(const std::string& what, Vec& x, const Vec& analytic, const std::function<double()>& loss,
                double tol, int samples = 256) {
  expect_below("gradcheck " + what, moe_test::gradcheck(x, analytic, loss, samples), tol);
}

// Backward called twice must give twice the single-call gradient (up to the rounding of the
// additions, measured relative to the gradient's largest entry).
inline void expect_doubles(const std::string& what, const Vec& once, const Vec& twice) {
  double worst = 0.0, norm = 0.0;
  for (size_t i = 0; i < once.size(); ++i) {
    worst = std::fmax(worst, std::fabs(twice[i] - 2.0 * once[i]));
    norm = std::fmax(norm, std::fabs(once[i]));
  }
  CHECK_MSG(norm > 0.0, what + ": gradient is identically zero");
  expect_below("accumulates " + what, worst / norm, 1e-6);
}

inline Vec concat(std::initializer_list<const Vec*> parts) {
  Vec all;
  for (const Vec* p : parts) all.insert(all.end(), p->begin(), p->end());
  return all;
}

// Runs `compute` (which returns every output and gradient it produced) on 1 and 3 threads.
inline void expect_thread_independent(const std::string& what, const std::function<Vec(ThreadPool&)>& compute) {
  Vec a = compute(pool(1)), b = compute(pool(3));
  CHECK_MSG(bitwise_equal(a, b), what + ": 1-thread and 3-thread results differ");
}

}  // namespace ops_test
