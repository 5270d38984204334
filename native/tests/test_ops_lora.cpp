// The LoRA op on every backend (ops_checks.h): forward onto a part of a wider output (row stride ldy) against a
// double reference, finite-difference gradients of x, A and B, accumulation (+=) of every backward, null gradient
// pointers skipped, agreement with the reference and 1 vs 3 threads; dropout on the input: forward equals the op on
// the masked and rescaled input, finite-difference gradients at a fixed mask, p 0 bit-identical to no dropout.
#include <string>
#include <vector>

#include "core/rng.h"
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
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
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
    be.lora_forward(same.data() + AT, x.data(), A.data(), zero_b.data(), N, I, O, R, S, LDY, {});
    CHECK_MSG(same == y0, "B = 0 must leave the output exactly as it was");
  });
}

TEST(lora_backward_gradients) {
  for_each_backend([&](Backend& be) {
    Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec r = random_vector(N * LDY, 5);
    auto loss = [&] {
      Vec y(N * LDY, 0.0f);
      be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
      return weighted_sum(y, r);
    };
    auto grads = [&](int times) {
      Vec dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
      for (int t = 0; t < times; ++t)
        be.lora_backward(dx.data(), dA.data(), dB.data(), r.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S,
                         LDY, {});
      return std::vector<Vec>{dx, dA, dB};
    };
    const std::vector<Vec> once = grads(1), twice = grads(2);
    check_grad("lora dx", x, once[0], loss, kGradTolLinear);
    check_grad("lora dA", A, once[1], loss, kGradTolLinear);
    check_grad("lora dB", B, once[2], loss, kGradTolLinear);
    for (int i = 0; i < 3; ++i) expect_doubles("lora grad " + std::to_string(i), once[i], twice[i]);
    // Frozen adapter parts (null pointers) leave the others exactly as they are.
    Vec dx(N * I, 0.0f);
    be.lora_backward(dx.data(), nullptr, nullptr, r.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
    CHECK_MSG(bitwise_equal(dx, once[0]), "dx without dA, dB");
  });
  expect_consistent("lora", [&](Backend& be) {
    const Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec dy = random_vector(N * LDY, 5);
    Vec y(N * LDY, 0.0f), dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
    be.lora_backward(dx.data(), dA.data(), dB.data(), dy.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
    return concat({&y, &dx, &dA, &dB});
  });
}

constexpr float P = 0.3f;
const moe::LoraDropoutMask kDrop{P, 0x5eedull};

// d(x) by the rule in types.h: kept elements (uniform > p) times 1/(1 - p), the others 0.
Vec masked(const Vec& x, int& dropped) {
  Vec out(x.size());
  dropped = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const bool keep = moe::random_uniform(kDrop.key, 0x10a4d409, j) > P;
    dropped += !keep;
    out[j] = keep ? x[j] * (1.0f / (1.0f - P)) : 0.0f;
  }
  return out;
}

TEST(lora_dropout_masks_the_input_only) {
  for_each_backend([&](Backend& be) {
    const Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec y0 = random_vector(N * LDY, 4);
    int dropped = 0;
    const Vec xd = masked(x, dropped);
    CHECK_MSG(dropped > N * I / 6 && dropped < N * I / 2, "about p of the inputs are dropped");
    Vec y = y0, ref = y0;
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, kDrop);
    be.lora_forward(ref.data() + AT, xd.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
    CHECK_MSG(bitwise_equal(y, ref), "dropout is the op on d(x)");
    // p 0 (whatever the key) is bit-identical to no dropout, forward and backward.
    Vec plain = y0, zero = y0;
    be.lora_forward(plain.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {});
    be.lora_forward(zero.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, {0.0f, 99});
    CHECK(bitwise_equal(plain, zero));
    const Vec dy = random_vector(N * LDY, 5);
    auto backward = [&](const moe::LoraDropoutMask& d) {
      Vec dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
      be.lora_backward(dx.data(), dA.data(), dB.data(), dy.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S,
                       LDY, d);
      return concat({&dx, &dA, &dB});
    };
    CHECK(bitwise_equal(backward({}), backward({0.0f, 99})));
  });
}

TEST(lora_dropout_gradients_at_a_fixed_mask) {
  for_each_backend([&](Backend& be) {
    Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec r = random_vector(N * LDY, 5);
    auto loss = [&] {
      Vec y(N * LDY, 0.0f);
      be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, kDrop);
      return weighted_sum(y, r);
    };
    Vec dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
    be.lora_backward(dx.data(), dA.data(), dB.data(), r.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY,
                     kDrop);
    check_grad("lora dropout dx", x, dx, loss, kGradTolLinear);
    check_grad("lora dropout dA", A, dA, loss, kGradTolLinear);
    check_grad("lora dropout dB", B, dB, loss, kGradTolLinear);
    // A dropped input gets no gradient.
    int dropped = 0;
    const Vec xd = masked(x, dropped);
    for (size_t j = 0; j < x.size(); ++j)
      if (xd[j] == 0.0f && x[j] != 0.0f) CHECK_MSG(dx[j] == 0.0f, "a dropped input has gradient 0");
  });
  expect_consistent("lora dropout", [&](Backend& be) {
    const Vec x = random_vector(N * I, 1), A = random_vector(R * I, 2), B = random_vector(O * R, 3);
    const Vec dy = random_vector(N * LDY, 5);
    Vec y(N * LDY, 0.0f), dx(N * I, 0.0f), dA(R * I, 0.0f), dB(O * R, 0.0f);
    be.lora_forward(y.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY, kDrop);
    be.lora_backward(dx.data(), dA.data(), dB.data(), dy.data() + AT, x.data(), A.data(), B.data(), N, I, O, R, S, LDY,
                     kDrop);
    return concat({&y, &dx, &dA, &dB});
  });
}

}  // namespace

TEST_MAIN()
