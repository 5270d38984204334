// MoE ops on every backend (ops_checks.h): router (softmax, top-k, aux and z losses), dispatch plan,
// permute/combine, sigmoid gate; and agreement with the reference backend for 1 and 3 threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using namespace moe;
using moe_test::gradcheck;
using moe_test::random_vector;
using ops_test::concat;
using ops_test::expect_consistent;
using ops_test::for_each_backend;
using ops_test::Router;
using ops_test::run_router;

namespace {

Router run_router(Backend& be, const std::vector<float>& logits, int N, int E, int K, bool renorm) {
  return ops_test::run_router(be, logits, N, E, K, RouterSpec{.renormalize = renorm});
}

// Logits whose per-token ranking has gaps of `gap`, so a ±h perturbation never changes the top-k choice.
std::vector<float> separated_logits(int N, int E, float gap, uint64_t stream) {
  std::vector<float> l((size_t)N * E);
  auto noise = random_vector(l.size(), stream, 0.2f * gap);
  for (int n = 0; n < N; ++n) {
    std::vector<int> rank(E);
    std::iota(rank.begin(), rank.end(), 0);
    for (int e = E - 1; e > 0; --e) std::swap(rank[e], rank[random_u64(7, stream, (uint64_t)n * E + e) % (e + 1)]);
    for (int e = 0; e < E; ++e) l[(size_t)n * E + e] = gap * (rank[e] - E / 2) + noise[(size_t)n * E + e];
  }
  return l;
}

// Plans built from an explicit list of per-token choices.
DispatchPlan plan_of(Backend& be, const std::vector<int32_t>& idx, int N, int E, int K, int capacity) {
  DispatchPlan p;
  be.dispatch_plan(p, idx.data(), N, E, K, capacity);
  return p;
}

std::vector<int32_t> random_choices(int N, int E, int K, uint64_t stream) {
  std::vector<int32_t> idx((size_t)N * K);
  for (int n = 0; n < N; ++n) {
    std::vector<int32_t> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    for (int e = E - 1; e > 0; --e) std::swap(perm[e], perm[random_u64(3, stream, (uint64_t)n * E + e) % (e + 1)]);
    for (int k = 0; k < K; ++k) idx[(size_t)n * K + k] = perm[k];
  }
  return idx;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += (double)a[i] * b[i];
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// ---------------------------------------------------------------- router forward

TEST(router_forward_matches_double_reference) {
  for_each_backend([&](Backend& be) {
    const int N = 150, E = 8;  // N spans several loss-reduction blocks
    auto logits = random_vector((size_t)N * E, 1, 3.0f);
    for (int K : {1, 2, 3}) {
      for (bool renorm : {false, true}) {
        Router r = run_router(be, logits, N, E, K, renorm);
        std::vector<double> P(E, 0.0), f(E, 0.0);
        double z = 0.0;
        for (int n = 0; n < N; ++n) {
          const float* l = &logits[(size_t)n * E];
          double mx = *std::max_element(l, l + E), sum = 0.0;
          for (int e = 0; e < E; ++e) sum += std::exp(l[e] - mx);
          double lse = mx + std::log(sum);
          z += lse * lse / N;
          std::vector<double> p(E);
          for (int e = 0; e < E; ++e) {
            p[e] = std::exp(l[e] - lse);
            P[e] += p[e] / N;
            CHECK_NEAR(r.probs[(size_t)n * E + e], p[e], 1e-6);
          }
          std::vector<int> order(E);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
          double sel = 0.0;
          for (int k = 0; k < K; ++k) sel += p[order[k]];
          for (int k = 0; k < K; ++k) {
            CHECK(r.idx[(size_t)n * K + k] == order[k]);
            f[order[k]] += 1.0 / ((double)N * K);
            CHECK_NEAR(r.w[(size_t)n * K + k], renorm ? p[order[k]] / sel : p[order[k]], 1e-6);
          }
        }
        double aux = 0.0;
        for (int e = 0; e < E; ++e) aux += f[e] * P[e];
        aux *= E;
        CHECK(moe_test::rel_err(r.losses.aux, aux, 1e-6) < 1e-5);
        CHECK(moe_test::rel_err(r.losses.z, z, 1e-6) < 1e-5);
      }
    }
  });
}

TEST(router_losses_hand_values) {
  for_each_backend([&](Backend& be) {
    // Uniform logits: P_e = 1/E, Σ f_e = 1, so aux = 1 whatever the routing; lse = log E + c.
    {
      const int N = 4, E = 4, K = 2;
      std::vector<float> logits((size_t)N * E, 0.5f);
      Router r = run_router(be, logits, N, E, K, false);
      CHECK_NEAR(r.losses.aux, 1.0, 1e-6);
      double lse = std::log(4.0) + 0.5;
      CHECK_NEAR(r.losses.z, lse * lse, 1e-5);
      // All ties: the lower index wins.
      for (int n = 0; n < N; ++n) CHECK(r.idx[(size_t)n * K] == 0 && r.idx[(size_t)n * K + 1] == 1);
    }
    // Both tokens pick expert 0 with p = sigmoid(1): f = (1, 0), aux = 2·sigmoid(1).
    {
      std::vector<float> logits = {1.0f, 0.0f, 1.0f, 0.0f};
      Router r = run_router(be, logits, 2, 2, 1, true);
      double s = 1.0 / (1.0 + std::exp(-1.0));
      CHECK_NEAR(r.losses.aux, 2.0 * s, 1e-6);
      double lse = std::log(std::exp(1.0) + 1.0);
      CHECK_NEAR(r.losses.z, lse * lse, 1e-6);
      CHECK(r.w[0] == 1.0f && r.w[1] == 1.0f);
    }
    // Ties between non-leading experts also go to the lower index.
    {
      std::vector<float> logits = {1.0f, 3.0f, 0.0f, 3.0f, 2.0f};
      Router r = run_router(be, logits, 1, 5, 3, false);
      CHECK(r.idx[0] == 1 && r.idx[1] == 3 && r.idx[2] == 4);
      CHECK(r.w[0] == r.w[1] && r.w[1] > r.w[2]);
    }
  });
}

TEST(router_forward_large_logits_stay_finite) {
  for_each_backend([&](Backend& be) {
    std::vector<float> logits = {1000.0f, -1000.0f, 999.0f, 0.0f};
    Router r = run_router(be, logits, 1, 4, 2, true);
    CHECK(r.idx[0] == 0 && r.idx[1] == 2);
    CHECK_NEAR(r.probs[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
    CHECK(std::isfinite(r.losses.z) && std::isfinite(r.losses.aux));
    CHECK_NEAR(r.losses.z, std::pow(1000.0 + std::log1p(std::exp(-1.0)), 2), 0.1);
  });
}

// ---------------------------------------------------------------- router backward

TEST(router_backward_gradcheck) {
  for_each_backend([&](Backend& be) {
    const int N = 6, E = 5;
    struct Scales {
      bool topk;
      float aux, z;
    };
    // A selection bias that alone decides the choice (gaps of 3 against probabilities in [0, 1]), so that the
    // chosen experts are not the most probable ones and no perturbation changes them.
    const std::vector<float> bias = {6.0f, 0.0f, 12.0f, 3.0f, 9.0f};
    for (int K : {1, 2}) {
      for (bool renorm : {false, true}) {
        for (float scale : {1.0f, 2.5f}) {
          for (bool biased : {false, true}) {
            const RouterSpec spec{.renormalize = renorm, .scale = scale, .selection_bias = biased ? bias.data() : nullptr};
            for (Scales sc : {Scales{true, 0.7f, 0.3f}, Scales{true, 0.0f, 0.0f}, Scales{false, 1.0f, 0.0f},
                              Scales{false, 0.0f, 1.0f}}) {
              auto logits = separated_logits(N, E, 1.0f, 10 + K + 2 * renorm);
              auto r = random_vector((size_t)N * K, 20 + K);
              const Router base = run_router(be, logits, N, E, K, spec);
              bool selection_changed = false;
              auto loss = [&]() {
                Router o = run_router(be, logits, N, E, K, spec);
                if (o.idx != base.idx) selection_changed = true;
                return (sc.topk ? dot(r, o.w) : 0.0) + sc.aux * (double)o.losses.aux + sc.z * (double)o.losses.z;
              };
              std::vector<float> dl((size_t)N * E, 0.0f);
              be.router_backward(dl.data(), sc.topk ? r.data() : nullptr, base.probs.data(), base.idx.data(),
                                 base.w.data(), logits.data(), N, E, K, spec, sc.aux, sc.z);
              double err = gradcheck(logits, dl, loss, N * E, 3e-2f);  // larger h: the losses come back as float
              CHECK(!selection_changed);
              CHECK_MSG(err < 3e-3, "K=" + std::to_string(K) + " renorm=" + std::to_string(renorm) +
                                        " scale=" + std::to_string(scale) + " biased=" + std::to_string(biased) +
                                        " aux=" + std::to_string(sc.aux) + " z=" + std::to_string(sc.z) +
                                        " err=" + std::to_string(err));
            }
          }
        }
      }
    }
  });
}

// The bias only chooses: the weights are the unbiased probabilities of the chosen experts.
TEST(router_selection_bias_chooses_but_does_not_weigh) {
  for_each_backend([&](Backend& be) {
    const int N = 1, E = 4, K = 1;
    const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f}, bias = {0.0f, 0.0f, 0.9f, 0.0f};
    const Router plain = run_router(be, logits, N, E, K, RouterSpec{.renormalize = false});
    const Router biased = run_router(be, logits, N, E, K, RouterSpec{.renormalize = false, .selection_bias = bias.data()});
    CHECK(plain.idx[0] == 0 && biased.idx[0] == 2);
    CHECK(biased.w[0] == plain.probs[2]);
    const Router scaled = run_router(be, logits, N, E, K, RouterSpec{.renormalize = true, .scale = 2.5f});
    CHECK_NEAR(scaled.w[0], 2.5, 1e-6);
  });
}

TEST(router_backward_renormalized_gradient_stays_on_selected_experts) {
  for_each_backend([&](Backend& be) {
    const int N = 3, E = 6, K = 2;
    auto logits = separated_logits(N, E, 1.0f, 31);
    Router r = run_router(be, logits, N, E, K, true);
    auto g = random_vector((size_t)N * K, 32);
    std::vector<float> dl((size_t)N * E, 0.0f);
    be.router_backward(dl.data(), g.data(), r.probs.data(), r.idx.data(), r.w.data(), logits.data(), N, E, K,
                       RouterSpec{}, 0.0f, 0.0f);
    for (int n = 0; n < N; ++n) {
      double row = 0.0;
      for (int e = 0; e < E; ++e) {
        bool selected = false;
        for (int k = 0; k < K; ++k) selected |= r.idx[(size_t)n * K + k] == e;
        if (!selected) CHECK(dl[(size_t)n * E + e] == 0.0f);
        row += dl[(size_t)n * E + e];
      }
      CHECK_NEAR(row, 0.0, 1e-6);  // softmax gradients are shift-invariant
    }
  });
}

TEST(router_backward_accumulates) {
  for_each_backend([&](Backend& be) {
    const int N = 9, E = 4, K = 2;
    auto logits = random_vector((size_t)N * E, 40, 2.0f);
    Router r = run_router(be, logits, N, E, K, false);
    auto g = random_vector((size_t)N * K, 41);
    auto seed = random_vector((size_t)N * E, 42);
    std::vector<float> fresh((size_t)N * E, 0.0f), acc = seed;
    for (float* d : {fresh.data(), acc.data()})
      be.router_backward(d, g.data(), r.probs.data(), r.idx.data(), r.w.data(), logits.data(), N, E, K,
                         RouterSpec{.renormalize = false}, 0.5f, 0.25f);
    for (size_t i = 0; i < acc.size(); ++i) CHECK_NEAR(acc[i], seed[i] + fresh[i], 1e-6);
  });
}

// ---------------------------------------------------------------- dispatch plan

TEST(dispatch_plan_hand_example) {
  for_each_backend([&](Backend& be) {
    // N=5, E=3, K=2. By expert in (token, k) order:
    //   e0: (0,1) (1,0) (2,0) (3,1)   e1: (1,1) (3,0) (4,1)   e2: (0,0) (2,1) (4,0)
    const std::vector<int32_t> idx = {2, 0, 0, 1, 0, 2, 1, 0, 2, 1};
    auto p = plan_of(be, idx, 5, 3, 2, 0);
    CHECK(p.counts == (std::vector<int32_t>{4, 3, 3}));
    CHECK(p.offsets == (std::vector<int32_t>{0, 4, 7, 10}));
    CHECK(p.slot_token == (std::vector<int32_t>{0, 1, 2, 3, 1, 3, 4, 0, 2, 4}));
    CHECK(p.assign_slot == (std::vector<int32_t>{7, 0, 1, 4, 2, 8, 5, 3, 9, 6}));
    CHECK(p.dropped == 0 && p.total_slots() == 10 && p.capacity == 0);
  });
}

TEST(dispatch_plan_capacity_uses_gshard_priority) {
  for_each_backend([&](Backend& be) {
    const std::vector<int32_t> idx = {2, 0, 0, 1, 0, 2, 1, 0, 2, 1};
    // capacity 2: first choices (by token) fill e0 with tokens 1,2 and e2 with 0,4; e1 gets token 3, then
    // token 1's second choice; every other second choice finds its expert full. Token order alone would
    // have kept (0,1) for e0 instead of (2,0).
    {
      auto p = plan_of(be, idx, 5, 3, 2, 2);
      CHECK(p.dropped == 4);
      CHECK(p.counts == (std::vector<int32_t>{2, 2, 2}));
      CHECK(p.offsets == (std::vector<int32_t>{0, 2, 4, 6}));
      CHECK(p.slot_token == (std::vector<int32_t>{1, 2, 1, 3, 0, 4}));
      CHECK(p.assign_slot == (std::vector<int32_t>{4, -1, 0, 2, 1, -1, 3, -1, 5, -1}));
    }
    // capacity 3: only (3,1) is dropped; e0 keeps (0,1), laid out first by token order.
    {
      auto p = plan_of(be, idx, 5, 3, 2, 3);
      CHECK(p.dropped == 1);
      CHECK(p.counts == (std::vector<int32_t>{3, 3, 3}));
      CHECK(p.offsets == (std::vector<int32_t>{0, 3, 6, 9}));
      CHECK(p.slot_token == (std::vector<int32_t>{0, 1, 2, 1, 3, 4, 0, 2, 4}));
      CHECK(p.assign_slot == (std::vector<int32_t>{6, 0, 1, 3, 2, 7, 4, -1, 8, 5}));
    }
    // capacity 4 with padding: e0 full, e1/e2 carry one padding slot each.
    {
      auto p = plan_of(be, idx, 5, 3, 2, 4);
      CHECK(p.dropped == 0);
      CHECK(p.slot_token == (std::vector<int32_t>{0, 1, 2, 3, 1, 3, 4, -1, 0, 2, 4, -1}));
    }
  });
}

TEST(dispatch_plan_large_capacity_equals_dropless_plus_padding) {
  for_each_backend([&](Backend& be) {
    const int N = 37, E = 6, K = 2;
    auto idx = random_choices(N, E, K, 50);
    auto dropless = plan_of(be, idx, N, E, K, 0);
    for (int cap : {N * K, N * K + 3}) {
      auto p = plan_of(be, idx, N, E, K, cap);
      CHECK(p.dropped == 0 && p.counts == dropless.counts && p.total_slots() == E * cap);
      for (int e = 0; e < E; ++e) {
        CHECK(p.offsets[e] == e * cap);
        for (int j = 0; j < cap; ++j) {
          int32_t want = j < dropless.counts[e] ? dropless.slot_token[dropless.offsets[e] + j] : -1;
          CHECK(p.slot_token[e * cap + j] == want);
        }
      }
      for (int i = 0; i < N * K; ++i) {
        int e = idx[i];
        CHECK(p.assign_slot[i] - p.offsets[e] == dropless.assign_slot[i] - dropless.offsets[e]);
      }
    }
  });
}

TEST(dispatch_plan_invariants_random) {
  for_each_backend([&](Backend& be) {
    for (int trial = 0; trial < 12; ++trial) {
      const int N = 1 + trial * 7, E = 2 + trial % 5, K = 1 + trial % std::min(E, 3);
      auto idx = random_choices(N, E, K, 60 + trial);
      for (int cap : {0, 1, 3, (N * K) / E + 1}) {
        DispatchPlan p;
        be.dispatch_plan(p, idx.data(), N, E, K, cap);
        // Reference drop decisions: GShard priority, simulated directly.
        std::vector<int> fill(E, 0), kept((size_t)N * K, 1);
        int dropped = 0;
        if (cap > 0)
          for (int k = 0; k < K; ++k)
            for (int n = 0; n < N; ++n) {
              int e = idx[(size_t)n * K + k];
              if (fill[e] < cap) fill[e]++;
              else kept[(size_t)n * K + k] = 0, dropped++;
            }
        CHECK(p.dropped == dropped);
        const int S = p.total_slots();
        CHECK(S == (cap == 0 ? N * K : E * cap));
        std::vector<int> used(S, 0);
        for (int n = 0; n < N; ++n)
          for (int k = 0; k < K; ++k) {
            int i = n * K + k, slot = p.assign_slot[i], e = idx[i];
            if (!kept[i]) {
              CHECK(slot == -1);
              continue;
            }
            CHECK(slot >= p.offsets[e] && slot < p.offsets[e] + p.counts[e]);
            if (slot < 0 || slot >= S) continue;
            used[slot]++;
            CHECK(p.slot_token[slot] == n);
          }
        // Every slot holds exactly one assignment, or is padding; segments are sorted by (token, k).
        for (int s = 0; s < S; ++s) CHECK(used[s] == (p.slot_token[s] >= 0 ? 1 : 0));
        for (int e = 0; e < E; ++e) {
          if (cap > 0) CHECK(p.offsets[e + 1] - p.offsets[e] == cap);
          else CHECK(p.offsets[e + 1] - p.offsets[e] == p.counts[e]);
          for (int j = p.offsets[e] + 1; j < p.offsets[e] + p.counts[e]; ++j)
            CHECK(p.slot_token[j - 1] <= p.slot_token[j]);
        }
      }
    }
  });
}

TEST(dispatch_plan_single_expert_and_reuse) {
  for_each_backend([&](Backend& be) {
    std::vector<int32_t> idx = {0, 0, 0, 0};
    DispatchPlan p;
    be.dispatch_plan(p, idx.data(), 4, 1, 1, 2);
    CHECK(p.dropped == 2 && p.counts == std::vector<int32_t>{2});
    CHECK(p.slot_token == (std::vector<int32_t>{0, 1}));
    CHECK(p.assign_slot == (std::vector<int32_t>{0, 1, -1, -1}));
    // The same plan object, rebuilt dropless, carries nothing over.
    be.dispatch_plan(p, idx.data(), 4, 1, 1, 0);
    CHECK(p.dropped == 0 && p.capacity == 0 && p.counts == std::vector<int32_t>{4});
    CHECK(p.offsets == (std::vector<int32_t>{0, 4}));
    CHECK(p.slot_token == (std::vector<int32_t>{0, 1, 2, 3}));
    CHECK(p.assign_slot == (std::vector<int32_t>{0, 1, 2, 3}));
  });
}

TEST(dispatch_plan_rejects_bad_expert_index) {
  for_each_backend([&](Backend& be) {
    std::vector<int32_t> idx = {0, 3};
    DispatchPlan p;
    bool threw = false;
    try {
      be.dispatch_plan(p, idx.data(), 2, 3, 1, 0);
    } catch (const std::exception&) {
      threw = true;
    }
    CHECK(threw);
  });
}

// ---------------------------------------------------------------- permute / combine

namespace {
// Expert loads 5, 5, 5, 7: capacity 6 gives both drops and padding, exercising every branch of the row ops.
struct PlanCase {
  int N = 11, E = 4, K = 2, C = 13;
  std::vector<int32_t> idx = random_choices(11, 4, 2, 70);
  DispatchPlan plan;
  PlanCase(Backend& be, int capacity) { be.dispatch_plan(plan, idx.data(), N, E, K, capacity); }
};
}  // namespace

TEST(permute_combine_forward_match_naive) {
  for_each_backend([&](Backend& be) {
    for (int cap : {0, 6}) {
      PlanCase pc(be, cap);
      if (cap) CHECK(pc.plan.dropped > 0 && std::count(pc.plan.slot_token.begin(), pc.plan.slot_token.end(), -1) > 0);
      const int N = pc.N, K = pc.K, C = pc.C, S = pc.plan.total_slots();
      auto x = random_vector((size_t)N * C, 71);
      std::vector<float> xs((size_t)S * C, NAN);
      be.permute_forward(xs.data(), x.data(), pc.plan, C);
      for (int s = 0; s < S; ++s)
        for (int c = 0; c < C; ++c) {
          int n = pc.plan.slot_token[s];
          CHECK(xs[(size_t)s * C + c] == (n < 0 ? 0.0f : x[(size_t)n * C + c]));
        }
      auto ys = random_vector((size_t)S * C, 72);
      auto w = random_vector((size_t)N * K, 73);
      std::vector<float> y((size_t)N * C, NAN);
      be.combine_forward(y.data(), ys.data(), w.data(), pc.plan, C);
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) {
          double want = 0.0;
          for (int k = 0; k < K; ++k) {
            int slot = pc.plan.assign_slot[(size_t)n * K + k];
            if (slot >= 0) want += (double)w[(size_t)n * K + k] * ys[(size_t)slot * C + c];
          }
          CHECK_NEAR(y[(size_t)n * C + c], want, 1e-6);
        }
    }
  });
}

TEST(permute_backward_gradcheck) {
  for_each_backend([&](Backend& be) {
    for (int cap : {0, 6}) {
      PlanCase pc(be, cap);
      const int N = pc.N, C = pc.C, S = pc.plan.total_slots();
      auto x = random_vector((size_t)N * C, 80);
      auto r = random_vector((size_t)S * C, 81);
      std::vector<float> xs((size_t)S * C);
      auto loss = [&]() {
        be.permute_forward(xs.data(), x.data(), pc.plan, C);
        return dot(r, xs);
      };
      std::vector<float> dx((size_t)N * C, 0.0f);
      be.permute_backward(dx.data(), r.data(), pc.plan, C);
      CHECK(gradcheck(x, dx, loss, 64) < 1e-3);
    }
  });
}

TEST(combine_backward_gradcheck) {
  for_each_backend([&](Backend& be) {
    for (int cap : {0, 6}) {
      PlanCase pc(be, cap);
      const int N = pc.N, K = pc.K, C = pc.C, S = pc.plan.total_slots();
      auto ys = random_vector((size_t)S * C, 90);
      auto w = random_vector((size_t)N * K, 91);
      auto r = random_vector((size_t)N * C, 92);
      std::vector<float> y((size_t)N * C);
      auto loss = [&]() {
        be.combine_forward(y.data(), ys.data(), w.data(), pc.plan, C);
        return dot(r, y);
      };
      std::vector<float> dys((size_t)S * C, 0.0f), dw((size_t)N * K, 0.0f);
      be.combine_backward(dys.data(), dw.data(), r.data(), ys.data(), w.data(), pc.plan, C);
      CHECK(gradcheck(ys, dys, loss, 64) < 1e-3);
      CHECK(gradcheck(w, dw, loss, N * K) < 1e-3);
      for (int i = 0; i < N * K; ++i)
        if (pc.plan.assign_slot[i] < 0) CHECK(dw[i] == 0.0f);
    }
  });
}

TEST(permute_combine_backward_accumulate_and_accept_null) {
  for_each_backend([&](Backend& be) {
    PlanCase pc(be, 6);
    const int N = pc.N, K = pc.K, C = pc.C, S = pc.plan.total_slots();
    auto ys = random_vector((size_t)S * C, 100);
    auto w = random_vector((size_t)N * K, 101);
    auto dy = random_vector((size_t)N * C, 102);
    auto dxs = random_vector((size_t)S * C, 103);
    auto seed_x = random_vector((size_t)N * C, 104), seed_ys = random_vector((size_t)S * C, 105),
         seed_w = random_vector((size_t)N * K, 106);

    std::vector<float> dx0((size_t)N * C, 0.0f), dx = seed_x;
    be.permute_backward(dx0.data(), dxs.data(), pc.plan, C);
    be.permute_backward(dx.data(), dxs.data(), pc.plan, C);
    for (size_t i = 0; i < dx.size(); ++i) CHECK_NEAR(dx[i], seed_x[i] + dx0[i], 1e-6);

    std::vector<float> dys0((size_t)S * C, 0.0f), dw0((size_t)N * K, 0.0f), dys = seed_ys, dw = seed_w;
    be.combine_backward(dys0.data(), dw0.data(), dy.data(), ys.data(), w.data(), pc.plan, C);
    be.combine_backward(dys.data(), nullptr, dy.data(), ys.data(), w.data(), pc.plan, C);
    be.combine_backward(nullptr, dw.data(), dy.data(), ys.data(), w.data(), pc.plan, C);
    for (size_t i = 0; i < dys.size(); ++i) CHECK_NEAR(dys[i], seed_ys[i] + dys0[i], 1e-6);
    for (size_t i = 0; i < dw.size(); ++i) CHECK_NEAR(dw[i], seed_w[i] + dw0[i], 1e-5);
    // Padding slots receive no gradient.
    for (int s = 0; s < S; ++s)
      if (pc.plan.slot_token[s] < 0)
        for (int c = 0; c < C; ++c) CHECK(dys[(size_t)s * C + c] == seed_ys[(size_t)s * C + c]);
  });
}

// ---------------------------------------------------------------- sigmoid gate

TEST(sigmoid_gate_forward_and_gradcheck) {
  for_each_backend([&](Backend& be) {
    const int N = 7, C = 19;
    auto g = random_vector(N, 110, 3.0f);
    g[0] = 40.0f;  // saturated gates stay finite
    g[1] = -40.0f;
    auto s = random_vector((size_t)N * C, 111);
    std::vector<float> out((size_t)N * C);
    be.sigmoid_gate_forward(out.data(), g.data(), s.data(), N, C);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        CHECK_NEAR(out[(size_t)n * C + c], s[(size_t)n * C + c] / (1.0 + std::exp(-(double)g[n])), 1e-6);

    g[0] = 0.3f;
    g[1] = -0.8f;
    auto r = random_vector((size_t)N * C, 112);
    auto loss = [&]() {
      be.sigmoid_gate_forward(out.data(), g.data(), s.data(), N, C);
      return dot(r, out);
    };
    auto seed_g = random_vector(N, 113), seed_s = random_vector((size_t)N * C, 114);
    std::vector<float> dg(N, 0.0f), ds((size_t)N * C, 0.0f), dg_acc = seed_g, ds_acc = seed_s;
    be.sigmoid_gate_backward(dg.data(), ds.data(), r.data(), g.data(), s.data(), N, C);
    CHECK(gradcheck(g, dg, loss, N) < 1e-3);
    CHECK(gradcheck(s, ds, loss, 64) < 1e-3);
    be.sigmoid_gate_backward(dg_acc.data(), nullptr, r.data(), g.data(), s.data(), N, C);
    be.sigmoid_gate_backward(nullptr, ds_acc.data(), r.data(), g.data(), s.data(), N, C);
    for (int n = 0; n < N; ++n) CHECK_NEAR(dg_acc[n], seed_g[n] + dg[n], 1e-6);
    for (size_t i = 0; i < ds.size(); ++i) CHECK_NEAR(ds_acc[i], seed_s[i] + ds[i], 1e-6);
  });
}

// ---------------------------------------------------------------- determinism

TEST(results_match_reference_any_threads) {
  const int N = 517, E = 16, K = 4, C = 40;
  auto logits = random_vector((size_t)N * E, 120, 2.0f);
  auto dtw = random_vector((size_t)N * K, 121);
  auto x = random_vector((size_t)N * C, 122);
  auto gl = random_vector(N, 123);
  expect_consistent("router/dispatch/permute/combine/gate", [&](Backend& be) {
    Router r = run_router(be, logits, N, E, K, true);
    std::vector<float> losses = {r.losses.aux, r.losses.z}, idx(r.idx.begin(), r.idx.end());
    std::vector<float> dl((size_t)N * E, 0.0f);
    be.router_backward(dl.data(), dtw.data(), r.probs.data(), r.idx.data(), r.w.data(), logits.data(), N, E, K,
                       RouterSpec{}, 0.01f, 0.001f);
    DispatchPlan plan;
    be.dispatch_plan(plan, r.idx.data(), N, E, K, N * K / E);
    const int S = plan.total_slots();
    std::vector<float> xs((size_t)S * C), y((size_t)N * C), dxs((size_t)S * C, 0.0f), dw((size_t)N * K, 0.0f),
        dx((size_t)N * C, 0.0f);
    be.permute_forward(xs.data(), x.data(), plan, C);
    be.combine_forward(y.data(), xs.data(), r.w.data(), plan, C);
    be.combine_backward(dxs.data(), dw.data(), x.data(), xs.data(), r.w.data(), plan, C);
    be.permute_backward(dx.data(), dxs.data(), plan, C);
    std::vector<float> gout((size_t)N * C), dg(N, 0.0f), ds((size_t)N * C, 0.0f);
    be.sigmoid_gate_forward(gout.data(), gl.data(), y.data(), N, C);
    be.sigmoid_gate_backward(dg.data(), ds.data(), x.data(), gl.data(), y.data(), N, C);
    return concat({&losses, &r.probs, &r.w, &idx, &dl, &xs, &y, &dxs, &dw, &dx, &gout, &dg, &ds});
  });
}

TEST_MAIN()
