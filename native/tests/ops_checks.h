// Shared checks of the op tests, which drive every op through Backend& on every registered backend this machine
// can run, and on the reference (the CPU backend's scalar kernels): forward error against double references,
// finite-difference gradients, accumulation (+=) of every backward, agreement with the reference, and bit-identical
// results for 1 vs 3 host threads. A new backend passes these before it trains anything.
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "testing.h"

namespace ops_test {

using moe::Backend;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

struct BackendUnderTest {
  std::string label, name, isa;
  // Factor on agreement tolerances with the reference: the CPU backends reduce rows and columns in the
  // reference's order; a device backend sums in its own (warp and block trees), a few ulps further off.
  double order_tol = 1.0;
  std::string gemm = "own";  // BackendOptions::gemm
};

inline moe::BackendOptions options_of(const BackendUnderTest& b, int threads) {
  moe::BackendOptions o;
  o.threads = threads;
  o.isa = b.isa;
  o.gemm = b.gemm;
  return o;
}

inline Backend& backend(const BackendUnderTest& b, int threads) {
  static std::map<std::string, std::unique_ptr<Backend>> made;
  std::unique_ptr<Backend>& be = made[b.label + "/" + std::to_string(threads)];
  if (!be) be = moe::make_backend(b.name, options_of(b, threads));
  return *be;
}

// Every usable registered backend, then the reference itself (so the scalar kernels meet the double references
// too). Unusable ones are listed with the reason and skipped. The cuda backend runs twice where cuBLAS opens: on
// our GEMMs and on cuBLAS's.
inline const std::vector<BackendUnderTest>& backends_under_test() {
  static const std::vector<BackendUnderTest> all = [] {
    std::vector<BackendUnderTest> v;
    for (const moe::BackendInfo& info : moe::list_backends()) {
      if (!info.usable) {
        std::printf("  backend %s skipped: %s\n", info.name.c_str(), info.why_not.c_str());
        continue;
      }
      v.push_back({info.name, info.name, "native", info.name == "cpu" ? 1.0 : 4.0});
      if (info.name != "cuda") continue;
      BackendUnderTest blas{"cuda cublas", "cuda", "native", 4.0, "cublas"};
      try {
        backend(blas, 2);  // made once here, then the one for_each_backend runs
        v.push_back(blas);
      } catch (const std::exception& e) {
        std::printf("  backend cuda on cuBLAS skipped: %s\n", e.what());
      }
    }
    v.push_back({"cpu scalar reference", "cpu", "scalar"});
    return v;
  }();
  return all;
}

inline Backend& reference() { return backend(backends_under_test().back(), 2); }

// Runs body on every backend under test (2 host threads), saying which.
inline void for_each_backend(const std::function<void(Backend&)>& body) {
  for (const BackendUnderTest& b : backends_under_test()) {
    std::printf("  [%s]\n", b.label.c_str());
    body(backend(b, 2));
  }
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

// Runs `compute` (which returns every output and gradient it produced) on every backend under test: it must
// agree with the reference within `tol` (relative, floor 1) and give bit-identical results on 1 and 3 host threads.
inline void expect_consistent(const std::string& what, const std::function<Vec(Backend&)>& compute,
                              double tol = 1e-6) {
  const Vec ref = compute(reference());
  const DVec ref_d(ref.begin(), ref.end());
  for (const BackendUnderTest& b : backends_under_test()) {
    const Vec one = compute(backend(b, 1)), three = compute(backend(b, 3));
    CHECK_MSG(one.size() == ref.size(), what + " on " + b.label + ": output size differs from the reference");
    if (one.size() == ref.size())
      expect_below(what + " vs reference on " + b.label, max_err(one, ref_d), tol * b.order_tol);
    CHECK_MSG(bitwise_equal(one, three), what + " on " + b.label + ": 1-thread and 3-thread results differ");
  }
}

// One router_forward call with its outputs (the router op tests' unit).
struct Router {
  std::vector<float> probs, w;
  std::vector<int32_t> idx;
  moe::RouterLosses losses{};
};

inline Router run_router(moe::Backend& be, const std::vector<float>& logits, int N, int E, int K,
                         const moe::RouterSpec& spec) {
  Router r;
  r.probs.resize((size_t)N * E);
  r.w.resize((size_t)N * K);
  r.idx.resize((size_t)N * K);
  r.losses = be.router_forward(r.probs.data(), r.idx.data(), r.w.data(), logits.data(), N, E, K, spec, nullptr);
  return r;
}

}  // namespace ops_test
