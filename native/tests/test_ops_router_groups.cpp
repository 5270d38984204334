// The router's sigmoid scoring and grouped top-k selections (DeepSeek-V2 group_limited_greedy, DeepSeek-V3
// noaux_tc) on every backend (ops_checks.h): choices and weights against a double reference, and the
// finite-difference gradient of the weights and the aux/z losses with sigmoid scores.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ops_checks.h"
#include "testing.h"

using namespace moe;
using moe_test::gradcheck;
using moe_test::random_vector;
using ops_test::for_each_backend;
using ops_test::Router;
using ops_test::run_router;

namespace {


// Logits that are a random permutation of evenly spaced values, so scores and group scores are well apart.
std::vector<float> spaced_logits(int N, int E, float gap, uint64_t stream) {
  std::vector<float> l((size_t)N * E);
  for (int n = 0; n < N; ++n) {
    std::vector<int> rank(E);
    std::iota(rank.begin(), rank.end(), 0);
    for (int e = E - 1; e > 0; --e) std::swap(rank[e], rank[random_u64(9, stream, (uint64_t)n * E + e) % (e + 1)]);
    for (int e = 0; e < E; ++e) l[(size_t)n * E + e] = gap * (rank[e] - E / 2) + 0.01f * (float)e / E;
  }
  return l;
}

// The double reference of one token: scores, the kept groups, the chosen experts (as a sorted set) and their
// weights by expert.
struct Choice {
  std::vector<int> experts;
  std::vector<double> weights;  // by position in experts
};

Choice reference_choice(const float* logits, int E, int K, const RouterSpec& spec) {
  std::vector<double> p(E);
  if (spec.scoring == RouterScoring::Sigmoid) {
    for (int e = 0; e < E; ++e) p[e] = 1.0 / (1.0 + std::exp(-(double)logits[e]));
  } else {
    double mx = logits[0], sum = 0;
    for (int e = 1; e < E; ++e) mx = std::max(mx, (double)logits[e]);
    for (int e = 0; e < E; ++e) sum += p[e] = std::exp(logits[e] - mx);
    for (double& v : p) v /= sum;
  }
  std::vector<double> choice(E);
  for (int e = 0; e < E; ++e) choice[e] = p[e] + (spec.selection_bias ? spec.selection_bias[e] : 0.0);
  if (spec.selection != TopkSelection::Plain) {
    const int G = spec.n_group, per = E / G;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < G; ++g) {
      std::vector<double> c(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(c.rbegin(), c.rend());
      groups.push_back({spec.selection == TopkSelection::GroupLimited ? c[0] : c[0] + c[1], g});
    }
    std::sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
    std::vector<bool> kept(G, false);
    for (int j = 0; j < spec.topk_group; ++j) kept[groups[j].second] = true;
    for (int e = 0; e < E; ++e)
      if (!kept[e / per]) choice[e] = 0.0;
  }
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return choice[a] > choice[b]; });
  Choice c;
  c.experts.assign(order.begin(), order.begin() + K);
  std::sort(c.experts.begin(), c.experts.end());
  double sum = 0;
  for (int e : c.experts) sum += p[e];
  for (int e : c.experts) c.weights.push_back((spec.renormalize ? p[e] / sum : p[e]) * spec.scale);
  return c;
}

}  // namespace

TEST(router_grouped_and_sigmoid_match_double_reference) {
  for_each_backend([&](Backend& be) {
    const int N = 40, E = 12, K = 3;
    const auto bias = random_vector(E, 77, 0.3f);
    for (RouterScoring scoring : {RouterScoring::Softmax, RouterScoring::Sigmoid}) {
      for (TopkSelection sel : {TopkSelection::Plain, TopkSelection::GroupLimited, TopkSelection::NoAuxTc}) {
        for (bool biased : {false, true}) {
          for (bool renorm : {false, true}) {
            const RouterSpec spec{.scoring = scoring, .selection = sel, .n_group = 4, .topk_group = 2,
                                  .renormalize = renorm, .scale = 2.5f,
                                  .selection_bias = biased ? bias.data() : nullptr};
            const auto logits = spaced_logits(N, E, 0.37f, 5 + (int)sel);
            const Router r = run_router(be, logits, N, E, K, spec);
            int wrong = 0;
            double worst = 0;
            for (int n = 0; n < N; ++n) {
              const Choice ref = reference_choice(logits.data() + (size_t)n * E, E, K, spec);
              std::vector<std::pair<int, float>> got;
              for (int k = 0; k < K; ++k) got.push_back({r.idx[(size_t)n * K + k], r.w[(size_t)n * K + k]});
              std::sort(got.begin(), got.end());
              for (int k = 0; k < K; ++k) {
                if (got[k].first != ref.experts[k]) ++wrong;
                else worst = std::max(worst, std::fabs(got[k].second - ref.weights[k]));
              }
            }
            const std::string what = "scoring=" + std::to_string((int)scoring) + " selection=" +
                                     std::to_string((int)sel) + " biased=" + std::to_string(biased) +
                                     " renorm=" + std::to_string(renorm);
            CHECK_MSG(wrong == 0, what + ": " + std::to_string(wrong) + " choices differ");
            CHECK_MSG(worst < 1e-5, what + ": weight error " + std::to_string(worst));
          }
        }
      }
    }
  });
}

// Grouped selection keeps only experts of the kept groups, even when a dropped group has the single best score
// (group_limited_greedy keeps the groups with the best maxima; noaux_tc those with the best top-2 sums).
TEST(router_grouped_selection_hand_values) {
  for_each_backend([&](Backend& be) {
    // Two groups of three. Group 0 holds the best single expert (0); group 1 the better pair (3, 4).
    const std::vector<float> logits = {3.0f, -3.0f, -3.0f, 2.0f, 2.0f, -3.0f};
    const RouterSpec limited{.scoring = RouterScoring::Sigmoid, .selection = TopkSelection::GroupLimited,
                             .n_group = 2, .topk_group = 1, .renormalize = false};
    RouterSpec noaux = limited;
    noaux.selection = TopkSelection::NoAuxTc;
    const Router a = run_router(be, logits, 1, 6, 2, limited);
    const Router b = run_router(be, logits, 1, 6, 2, noaux);
    CHECK(a.idx[0] == 0 && (a.idx[1] == 1 || a.idx[1] == 2));
    CHECK(std::min(b.idx[0], b.idx[1]) == 3 && std::max(b.idx[0], b.idx[1]) == 4);
    CHECK_NEAR(b.w[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
  });
}

TEST(router_sigmoid_backward_gradcheck) {
  for_each_backend([&](Backend& be) {
    const int N = 6, E = 8;
    struct Scales {
      bool topk;
      float aux, z;
    };
    const std::vector<float> bias = {0.0f, 9.0f, 3.0f, 18.0f, 6.0f, 21.0f, 12.0f, 15.0f};  // alone decides
    for (TopkSelection sel : {TopkSelection::Plain, TopkSelection::GroupLimited, TopkSelection::NoAuxTc}) {
      for (int K : {1, 3}) {
        for (bool renorm : {false, true}) {
          for (bool biased : {false, true}) {
            const RouterSpec spec{.scoring = RouterScoring::Sigmoid, .selection = sel, .n_group = 4, .topk_group = 2,
                                  .renormalize = renorm, .scale = 2.5f,
                                  .selection_bias = biased ? bias.data() : nullptr};
            for (Scales sc : {Scales{true, 0.7f, 0.3f}, Scales{true, 0.0f, 0.0f}, Scales{false, 1.0f, 0.0f},
                              Scales{false, 0.0f, 1.0f}}) {
              auto logits = spaced_logits(N, E, 0.6f, 30 + K + 2 * renorm);
              auto r = random_vector((size_t)N * K, 40 + K);
              const Router base = run_router(be, logits, N, E, K, spec);
              bool selection_changed = false;
              auto loss = [&]() {
                Router o = run_router(be, logits, N, E, K, spec);
                if (o.idx != base.idx) selection_changed = true;
                double s = sc.aux * (double)o.losses.aux + sc.z * (double)o.losses.z;
                if (sc.topk)
                  for (size_t i = 0; i < r.size(); ++i) s += (double)r[i] * o.w[i];
                return s;
              };
              std::vector<float> dl((size_t)N * E, 0.0f);
              be.router_backward(dl.data(), sc.topk ? r.data() : nullptr, base.probs.data(), base.idx.data(),
                                 base.w.data(), logits.data(), N, E, K, spec, sc.aux, sc.z);
              const double err = gradcheck(logits, dl, loss, N * E, 2e-2f);
              CHECK(!selection_changed);
              CHECK_MSG(err < 3e-3, "selection=" + std::to_string((int)sel) + " K=" + std::to_string(K) +
                                        " renorm=" + std::to_string(renorm) + " biased=" + std::to_string(biased) +
                                        " aux=" + std::to_string(sc.aux) + " z=" + std::to_string(sc.z) +
                                        " err=" + std::to_string(err));
            }
          }
        }
      }
    }
  });
}

TEST_MAIN()
