// A minimal test harness for the native suite: TEST(name) registers a case, CHECK* record failures,
// and main() prints one "N passed, N failed" line so CI can read the result.
#pragma once
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace moe_test {

struct Case {
  const char* name;
  void (*fn)();
};
inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}
inline int& failures() {
  static int n = 0;
  return n;
}
struct Register {
  Register(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

inline void report_failure(const char* file, int line, const std::string& what) {
  ++failures();
  std::fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what.c_str());
}

// Random values in [-scale, scale), reproducible from (seed, stream).
inline std::vector<float> random_vector(size_t n, uint64_t stream, float scale = 1.0f, uint64_t seed = 42) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (2.0f * moe::random_uniform(seed, stream, i) - 1.0f) * scale;
  return v;
}

// Relative error with an absolute floor: |a-b| / max(|a|, |b|, floor).
inline double rel_err(double a, double b, double floor = 1e-3) {
  return std::fabs(a - b) / std::fmax(std::fmax(std::fabs(a), std::fabs(b)), floor);
}

// Finite-difference gradient check of a scalar loss with respect to `x`, on up to `samples` coordinates
// (spread over the whole tensor). loss() must read x. Returns the worst relative error.
inline double gradcheck(std::vector<float>& x, const std::vector<float>& analytic, const std::function<double()>& loss,
                        int samples = 24, float h = 1e-2f) {
  double worst = 0.0;
  size_t n = x.size();
  size_t stride = n <= (size_t)samples ? 1 : n / samples;
  for (size_t i = 0; i < n; i += stride) {
    float saved = x[i];
    x[i] = saved + h;
    double lp = loss();
    x[i] = saved - h;
    double lm = loss();
    x[i] = saved;
    double numeric = (lp - lm) / (2.0 * h);
    worst = std::fmax(worst, rel_err(numeric, analytic[i], 1e-2));
  }
  return worst;
}

}  // namespace moe_test

#define TEST(name)                                                  \
  static void name();                                               \
  static moe_test::Register name##_registration(#name, &name);      \
  static void name()

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) moe_test::report_failure(__FILE__, __LINE__, "CHECK(" #cond ") is false"); \
  } while (0)

#define CHECK_MSG(cond, msg)                                         \
  do {                                                               \
    if (!(cond)) moe_test::report_failure(__FILE__, __LINE__, (msg)); \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                               \
  do {                                                                                                      \
    double a_ = (a), b_ = (b);                                                                              \
    if (!(std::fabs(a_ - b_) <= (tol)))                                                                     \
      moe_test::report_failure(__FILE__, __LINE__,                                                          \
                               std::string(#a " = ") + std::to_string(a_) + ", " #b " = " + std::to_string(b_)); \
  } while (0)

#define TEST_MAIN()                                                              \
  int main() {                                                                   \
    int passed = 0, failed = 0;                                                  \
    for (auto& c : moe_test::registry()) {                                       \
      int before = moe_test::failures();                                         \
      try {                                                                      \
        c.fn();                                                                  \
      } catch (const std::exception& e) {                                        \
        moe_test::report_failure(__FILE__, __LINE__, std::string("threw: ") + e.what()); \
      }                                                                          \
      bool ok = moe_test::failures() == before;                                  \
      std::printf("%s %s\n", ok ? "ok  " : "FAIL", c.name);                      \
      (ok ? passed : failed)++;                                                  \
    }                                                                            \
    std::printf("%d passed, %d failed\n", passed, failed);                       \
    return failed == 0 ? 0 : 1;                                                  \
  }
