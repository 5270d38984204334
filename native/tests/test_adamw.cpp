// AdamW on every backend (ops_checks.h) against a double-precision reference of torch.optim.AdamW's update order,
// over several steps with weight decay and grad_scale; and bit-identical results (AdamW and Σx²) for 1, 2 and 3
// threads, equal to the reference backend's bit for bit.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cpu/adamw_kernels.h"
#include "ops_checks.h"
#include "testing.h"

using moe::AdamWParams;
using moe::Backend;
using ops_test::backend;
using ops_test::backends_under_test;
using ops_test::BackendUnderTest;
using ops_test::for_each_backend;
using ops_test::reference;

namespace {

struct State {
  std::vector<float> p, m, v;
};

State make_state(size_t n) {
  State s{moe_test::random_vector(n, 1), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
  return s;
}

// Runs `steps` updates with a fresh gradient each step.
void run_steps(Backend& be, State& s, int steps, AdamWParams hp) {
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> g = moe_test::random_vector(s.p.size(), 100 + t, 0.5f);
    hp.step = t;
    be.adamw_update(s.p.data(), g.data(), s.m.data(), s.v.data(), int64_t(s.p.size()), hp);
  }
}

bool bits_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Worst |x - y| / max(|y|, 1e-3).
double max_rel(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::fmax(worst, std::fabs(double(x[i]) - y[i]) / std::fmax(std::fabs(double(y[i])), 1e-3));
  return worst;
}

AdamWParams test_params() {
  AdamWParams hp;
  hp.lr = 3e-3f;
  hp.weight_decay = 0.1f;
  hp.grad_scale = 0.7f;
  return hp;
}

}  // namespace

TEST(adamw_matches_double_reference) {
  for_each_backend([&](Backend& be) {
    const AdamWParams hp = test_params();
    const int steps = 6;
    for (size_t n : {size_t(1), size_t(15), size_t(17), size_t(100), size_t(200003)}) {
      State s = make_state(n);
      std::vector<double> p(s.p.begin(), s.p.end()), m(n, 0.0), v(n, 0.0);
      run_steps(be, s, steps, hp);
      for (int t = 1; t <= steps; ++t) {
        std::vector<float> g = moe_test::random_vector(n, 100 + t, 0.5f);
        const double bias1 = 1.0 - std::pow(double(hp.beta1), t), bias2 = 1.0 - std::pow(double(hp.beta2), t);
        for (size_t i = 0; i < n; ++i) {
          const double gi = double(hp.grad_scale) * g[i];
          m[i] = hp.beta1 * m[i] + (1.0 - hp.beta1) * gi;
          v[i] = hp.beta2 * v[i] + (1.0 - hp.beta2) * gi * gi;
          p[i] *= 1.0 - double(hp.lr) * hp.weight_decay;
          p[i] -= (hp.lr / bias1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bias2) + hp.eps);
        }
      }
      double worst_p = 0, worst_m = 0, worst_v = 0;
      for (size_t i = 0; i < n; ++i) {
        worst_p = std::fmax(worst_p, std::fabs(s.p[i] - p[i]) / (std::fabs(p[i]) + hp.lr));
        worst_m = std::fmax(worst_m, std::fabs(s.m[i] - m[i]) / (std::fabs(m[i]) + 1e-2));
        worst_v = std::fmax(worst_v, std::fabs(s.v[i] - v[i]) / (std::fabs(v[i]) + 1e-4));
      }
      CHECK_MSG(worst_p < 2e-6 && worst_m < 2e-6 && worst_v < 2e-6,
                "n=" + std::to_string(n) + " rel err p=" + std::to_string(worst_p * 1e6) + "e-6" +
                    " m=" + std::to_string(worst_m * 1e6) + "e-6" + " v=" + std::to_string(worst_v * 1e6) + "e-6");
    }
  });
}

TEST(adamw_bitwise_independent_of_threads_and_equal_to_reference) {
  const size_t n = 300001;
  State ref = make_state(n);
  run_steps(reference(), ref, 3, test_params());
  for (const BackendUnderTest& bt : backends_under_test()) {
    State a = make_state(n), b = a, c = a;
    run_steps(backend(bt, 1), a, 3, test_params());
    run_steps(backend(bt, 2), b, 3, test_params());
    run_steps(backend(bt, 3), c, 3, test_params());
    CHECK_MSG(bits_equal(a.p, b.p) && bits_equal(a.m, b.m) && bits_equal(a.v, b.v), bt.label + ": 1 vs 2 threads");
    CHECK_MSG(bits_equal(a.p, c.p) && bits_equal(a.m, c.m) && bits_equal(a.v, c.v), bt.label + ": 1 vs 3 threads");
    // Every backend rounds the scalar loop's operations one at a time (the expert offload's host updates must be
    // the device's bit for bit), so the vector and device kernels equal the reference exactly.
    CHECK_MSG(max_rel(a.p, ref.p) < 1e-6 && max_rel(a.m, ref.m) < 1e-6 && max_rel(a.v, ref.v) < 1e-6,
              bt.label + ": differs from the reference");
    CHECK_MSG(bits_equal(a.p, ref.p) && bits_equal(a.m, ref.m) && bits_equal(a.v, ref.v),
              bt.label + ": not the reference's bits");
  }
}

// adamw_update_bf16 writes the same weights, moments and bits as adamw_update followed by to_bf16, on every backend
// and for every tail length; and nothing past n.
TEST(adamw_with_bf16_copy_equals_update_then_conversion) {
  for (const BackendUnderTest& bt : backends_under_test())
    for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(47), size_t(300001)}) {
      State a = make_state(n), b = a;
      std::vector<uint16_t> copy_a(n + 3, 0x5555), copy_b(n + 3, 0x5555);
      AdamWParams hp = test_params();
      for (int t = 1; t <= 2; ++t) {
        std::vector<float> g = moe_test::random_vector(n, 200 + t, 0.5f);
        hp.step = t;
        backend(bt, 2).adamw_update(a.p.data(), g.data(), a.m.data(), a.v.data(), int64_t(n), hp);
        backend(bt, 2).to_bf16(copy_a.data(), a.p.data(), int64_t(n));
        backend(bt, 2).adamw_update_bf16(b.p.data(), g.data(), b.m.data(), b.v.data(), copy_b.data(), int64_t(n),
                                         hp);
      }
      CHECK_MSG(bits_equal(a.p, b.p) && bits_equal(a.m, b.m) && bits_equal(a.v, b.v),
                bt.label + ": the fused update changes the update, n=" + std::to_string(n));
      CHECK_MSG(copy_a == copy_b, bt.label + ": the fused bf16 copy differs from to_bf16's, n=" + std::to_string(n));
    }
}

// Each vector build of the kernels this CPU can run (AVX2 too where the dispatcher would pick AVX-512), called
// directly: the reference's bits for every tail length, with NaN, infinities and bf16 rounding ties among the
// weights, and the same Σx² as the reference.
TEST(every_vector_adamw_kernel_this_cpu_runs_gives_the_reference_bits) {
  using namespace moe::cpu::adamw_detail;
  using Update = void (*)(const Consts&, float*, const float*, float*, float*, uint16_t*, int64_t);
  using SumSquares = double (*)(const float*, int64_t);
  struct Kernel {
    const char* name;
    bool runs;
    Update update;
    SumSquares sum_squares;
  };
  __builtin_cpu_init();
  const Kernel kernels[] = {
      {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), &update_avx2, &chunk_sum_squares_avx2},
      {"avx512", __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"), &update_avx512,
       &chunk_sum_squares_avx512}};
  for (const Kernel& k : kernels) {
    if (!k.runs) {
      std::printf("  %s kernels skipped: this CPU does not have them\n", k.name);
      continue;
    }
    for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(15), size_t(16), size_t(17), size_t(1001)}) {
      State a = make_state(n);
      // NaNs whose payload's low bits would round up into the next bf16 if NaN were not handled on its own.
      const float specials[] = {std::bit_cast<float>(0x7FC0FFFFu), std::bit_cast<float>(0xFF80FFFFu), INFINITY,
                                -INFINITY, 1.00390625f, 1.01171875f, -0.0f};
      for (size_t i = 0; i < n && i < std::size(specials); ++i) a.p[i * 3 % n] = specials[i];
      State b = a;
      std::vector<uint16_t> copy_a(n + 3, 0x5555), copy_b(n + 3, 0x5555);
      AdamWParams hp = test_params();
      for (int t = 1; t <= 2; ++t) {
        std::vector<float> g = moe_test::random_vector(n, 300 + t, 0.5f);
        hp.step = t;
        k.update(fold(hp), a.p.data(), g.data(), a.m.data(), a.v.data(), t == 2 ? copy_a.data() : nullptr,
                 int64_t(n));
        reference().adamw_update(b.p.data(), g.data(), b.m.data(), b.v.data(), int64_t(n), hp);
      }
      reference().to_bf16(copy_b.data(), b.p.data(), int64_t(n));
      const std::string at = std::string(k.name) + ", n=" + std::to_string(n);
      CHECK_MSG(bits_equal(a.p, b.p) && bits_equal(a.m, b.m) && bits_equal(a.v, b.v), at + ": not the reference's bits");
      CHECK_MSG(copy_a == copy_b, at + ": the bf16 copy differs from the reference's (or wrote past n)");
      const double s = k.sum_squares(a.m.data(), int64_t(n)), r = reference().sum_squares(a.m.data(), int64_t(n));
      CHECK_MSG(std::memcmp(&s, &r, sizeof s) == 0, at + ": Σx² differs from the reference");
    }
  }
}

TEST(sum_squares_exact_order_and_threads) {
  for (const BackendUnderTest& bt : backends_under_test())
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(17), int64_t(65536), int64_t(5 * 65536 + 123)}) {
      std::vector<float> x = moe_test::random_vector(size_t(n), 7, 3.0f);
      double ref = 0.0;
      for (float f : x) ref += double(f) * f;
      const double s1 = backend(bt, 1).sum_squares(x.data(), n);
      const double s2 = backend(bt, 2).sum_squares(x.data(), n);
      const double s3 = backend(bt, 3).sum_squares(x.data(), n);
      const double sr = reference().sum_squares(x.data(), n);
      CHECK_NEAR(s1, ref, 1e-12 * ref);
      CHECK_MSG(std::memcmp(&s1, &s2, sizeof s1) == 0 && std::memcmp(&s1, &s3, sizeof s1) == 0,
                bt.label + ": sum_squares depends on the thread count at n=" + std::to_string(n));
      CHECK_MSG(std::memcmp(&s1, &sr, sizeof s1) == 0,
                bt.label + ": sum_squares differs from the reference at n=" + std::to_string(n));
    }
}

TEST_MAIN();
