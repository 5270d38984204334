// The LoRA op on every backend (ops_checks.h): forward onto a part of a wider output (row stride ldy) against a
// double reference, finite-difference gradients of x, A and B, accumulation (+=) of every backward, null gradient
// pointers skipped, agreement with the reference and 1 vs 3 threads.
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using moe_test::random_vector;
using namespace ops_test;

namespace {

constexpr int N = 9, I = 24, O = 13, R = 4, LDY = 31, AT = 9;  // the adapted columns: [AT, AT + O) of LDY
constexpr float S = 1.5f;

TEST(lora_forward_matches_reference) {
  for_each_backend([&](Backend& be) {
    const Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec y0 = random_vector(N * LDY, 4);
    Vec y = y0;
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY);
    DVec ref(y0.begin(), y0.end());
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) {
        double d = 0;
        for (int k = 0; k < R; ++k) {
          double u = 0;
          for (int i = 0; i < I; ++i) u += (double)x[n * I + i] * A[k * I + i];
          d += u * B[o * R + k];
        }
        ref[n * LDY + AT + o] += S * d;
      }
    expect_below("lora forward", max_err(y, ref), kForwardTol);
    Vec zero_b(O * R, 0.0f), same = y0;
    be.lora_forward(same.data() + AT, x.data(), A.data(), zero_b.data(), N, I, O, R, S, LDY);
    CHECK_MSG(same == y0, "B = 0 must leave the output exactly as it was");
  });
}

TEST(lora_backward_gradients) {
  for_each_backend([&](Backend& be) {
    Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec r = random_vector(N * LDY, 5);
    auto loss = [&] {
      Vec y(N * LDY, 0.0f);
      be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY);
      return weighted_sum(y, r);
    };
    auto grads = [&](int times) {
      Vec dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
      for (int t = 0; t < times; ++t)
        be.lora_backward(dx.data(), dA.data(), dB.data(), r.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S,
                         LDY);
      return std::vector<Vec>{dx, dA, dB};
    };
    const std::vector<Vec> once = grads(1), twice = grads(2);
    check_grad("lora dx", x, once[0], loss, kGradTolLinear);
    check_grad("lora dA", A, once[1], loss, kGradTolLinear);
    check_grad("lora dB", B, once[2], loss, kGradTolLinear);
    for (int i = 0; i < 3; ++i) expect_doubles("lora grad " + std::to_string(i), once[i], twice[i]);
    // Frozen adapter parts (null pointers) leave the others exactly as they are.
    Vec dx(N * I, 0.0f);
    be.lora_backward(dx.data(), nullptr, nullptr, r.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY);
    CHECK_MSG(bitwise_equal(dx, once[0]), "dx without dA, dB");
  });
  expect_consistent("lora", [&](Backend& be) {
    const Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec dy = random_vector(N * LDY, 5);
    Vec y(N * LDY, 0.0f), dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY);
    be.lora_backward(dx.data(), dA.data(), dB.data(), dy.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY);
    return concat({&y, &dx, &dA, &dB});
  });
}

}  // namespace

TEST_MAIN()
