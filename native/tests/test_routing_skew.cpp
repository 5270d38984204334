// The routing-skew generator: seeded, distinct experts per token, the requested shares (hot expert, Zipf ranks,
// uniform); the router takes forced choices with their probabilities as weights and counts them in the aux
// loss; a training run with a skew routes that way every step and stays deterministic.
#include <cmath>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "moe/routing_skew.h"
#include "testing.h"
#include "train/trainer.h"

namespace {

std::vector<int64_t> counts_of(const moe::RoutingSkew& skew, int N, int E, int K, uint64_t draw = 3) {
  std::vector<int32_t> picks(static_cast<size_t>(N) * K);
  moe::draw_skewed_routing(skew, draw, 1, N, E, K, picks.data());
  std::vector<int64_t> counts(E, 0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      ++counts[picks[n * K + k]];
      for (int j = 0; j < k; ++j) CHECK(picks[n * K + j] != picks[n * K + k]);
    }
  return counts;
}

}  // namespace

TEST(skew_draws_have_the_requested_shares) {
  const int N = 40000, E = 16, K = 2;
  moe::RoutingSkew hot{moe::SkewDistribution::Hot, 1.2, 0.95, 7};
  const auto h = counts_of(hot, N, E, K);
  CHECK_MSG(std::abs(h[0] / double(N) - 0.95) < 0.01, "hot share " + std::to_string(h[0] / double(N)));
  moe::RoutingSkew zipf{moe::SkewDistribution::Zipf, 1.2, 0.95, 7};
  const auto z = counts_of(zipf, N, 64, 1);
  CHECK_MSG(std::abs(double(z[0]) / z[1] - std::pow(2.0, 1.2)) < 0.15, "zipf 0/1 " + std::to_string(double(z[0]) / z[1]));
  CHECK(z[0] > z[3] && z[3] > z[15] && z[15] > z[63]);
  moe::RoutingSkew uniform{moe::SkewDistribution::Uniform, 1.2, 0.95, 7};
  for (int64_t c : counts_of(uniform, N, E, K)) CHECK(std::abs(c / (double(N) * K / E) - 1.0) < 0.05);
  CHECK(counts_of(hot, 1000, E, K, 5) == counts_of(hot, 1000, E, K, 5));
  CHECK(counts_of(hot, 1000, E, K, 5) != counts_of(hot, 1000, E, K, 6));
}

TEST(router_takes_forced_choices_with_their_probabilities) {
  const int N = 3, E = 4, K = 2;
  auto be = moe::make_backend("cpu", {1});
  const std::vector<float> logits = {0, 1, 2, 3, 3, 2, 1, 0, 0, 0, 0, 5};
  const std::vector<int32_t> forced = {0, 1, 3, 2, 1, 0};
  std::vector<float> probs(N * E), w(N * K);
  std::vector<int32_t> idx(N * K);
  const moe::RouterLosses l =
      be->router_forward(probs.data(), idx.data(), w.data(), logits.data(), N, E, K, moe::RouterSpec{}, forced.data());
  CHECK(idx == forced);
  for (int n = 0; n < N; ++n) {
    const float a = probs[n * E + forced[n * K]], b = probs[n * E + forced[n * K + 1]];
    CHECK(std::abs(w[n * K] - a / (a + b)) < 1e-6f && std::abs(w[n * K + 1] - b / (a + b)) < 1e-6f);
  }
  // aux = E Σ_e f_e P_e with f from the forced choices: f = {2, 2, 1, 1} / 6.
  double aux = 0;
  const double f[4] = {2 / 6.0, 2 / 6.0, 1 / 6.0, 1 / 6.0};
  for (int e = 0; e < E; ++e) {
    double P = 0;
    for (int n = 0; n < N; ++n) P += probs[n * E + e] / N;
    aux += f[e] * P;
  }
  CHECK(std::abs(l.aux - E * aux) < 1e-5);
}

TEST(skewed_training_routes_by_the_draws_and_is_deterministic) {
  const std::string cfg_text = R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_layers": 2,
      "n_heads": 2, "max_seq_len": 16, "d_ff": 48, "n_experts": 8, "top_k": 2},
    "train": {"batch_size": 4, "seq_len": 16, "steps": 10, "lr": 1e-2, "warmup_steps": 1, "threads": 1},
    "routing_skew": {"distribution": "hot", "hot_fraction": 0.9, "seed": 3}})";
  auto run = [&] {
    moe::EngineConfig cfg = moe::parse_config_text(cfg_text, "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    std::vector<int32_t> in(64), tg(64);
    for (int i = 0; i < 64; ++i) in[i] = tg[i] = (i * 11) % 64;
    std::vector<moe::StepRecord> out;
    for (int s = 0; s < 4; ++s) {
      t.feed_batch(in.data(), tg.data(), 4, 16);
      out.push_back(t.step());
    }
    return out;
  };
  const auto a = run(), b = run();
  for (size_t s = 0; s < a.size(); ++s) {
    CHECK(a[s].loss == b[s].loss);
    for (const auto& layer : a[s].expert_tokens) CHECK_MSG(layer[0] >= 50, "expert 0 got " + std::to_string(layer[0]));
  }
  CHECK(moe::json::dump(moe::config_to_json(moe::parse_config_text(cfg_text, "test"))).find("\"routing_skew\"") !=
        std::string::npos);
  std::string message;
  try {
    moe::parse_config_text(R"({"model": {"arch": "mixtral"}, "routing_skew": {"distribution": "pareto"}})", "t");
  } catch (const std::exception& e) {
    message = e.what();
  }
  CHECK_MSG(message.find("routing_skew.distribution") == 0, message);
}

// With D devices each step records every MoE layer's placement: loads that add up to the step's rows, the
// policy's caps, and the same training as one device (placement decides where work goes, not what it is; split
// rows sum in another order, so within 1e-6).
TEST(steps_record_their_placement_across_devices) {
  const std::string base = R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_layers": 2,
      "n_heads": 2, "max_seq_len": 64, "d_ff": 48, "n_experts": 16, "top_k": 2},
    "train": {"batch_size": 8, "seq_len": 64, "steps": 10, "threads": 1},
    "routing_skew": {"distribution": "hot", "hot_fraction": 0.95, "seed": 3})";
  auto run = [&](const std::string& placement) {
    moe::EngineConfig cfg = moe::parse_config_text(base + placement + "}", "test");
    auto be = moe::make_backend("cpu", {1});
    moe::Trainer t(cfg, *be);
    std::vector<int32_t> in(512), tg(512);
    for (int i = 0; i < 512; ++i) in[i] = tg[i] = (i * 13) % 64;
    std::vector<moe::StepRecord> out;
    for (int s = 0; s < 2; ++s) {
      t.feed_batch(in.data(), tg.data(), 8, 64);
      out.push_back(t.step());
    }
    return out;
  };
  const auto one = run("");
  CHECK(one[0].placements.empty());
  for (const char* policy : {"static", "greedy", "least-loaded"}) {
    const auto four = run(std::string(R"(, "placement": {"devices": 4, "policy": ")") + policy + "\"}");
    for (size_t s = 0; s < four.size(); ++s) {
      // Static placement moves whole experts: bitwise. Greedy and least-loaded split a hot expert's rows across
      // devices, so its weight gradient is summed in another order (docs/placement.md, "Exactness").
      if (std::string(policy) == "static") CHECK(four[s].loss == one[s].loss);
      else CHECK(std::fabs(four[s].loss - one[s].loss) <= 1e-6 * std::fabs(one[s].loss));
      CHECK(four[s].placements.size() == 2);
      for (const moe::LayerPlacement& p : four[s].placements) {
        int64_t before = 0, after = 0;
        for (int d = 0; d < 4; ++d) before += p.load_before[d], after += p.load_after[d];
        CHECK(before == 512 * 2 && after == before);
        CHECK(p.imbalance_before > 2.0);
        if (std::string(policy) == "least-loaded") CHECK(p.imbalance_after <= 1.1 + 1e-9 && p.spilled_tokens > 0);
        if (std::string(policy) == "static") CHECK(p.imbalance_after == p.imbalance_before);
      }
    }
  }
}

TEST_MAIN()
