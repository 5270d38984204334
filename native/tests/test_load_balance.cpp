// Auxiliary-loss-free load balancing: the update rule on hand-made loads; a run whose routing starts skewed
// balances with the rule on and stays skewed without it; the bias is the same whether experts are resident,
// offloaded (host, SSD) or on two devices; 2N steps equal N + checkpoint + resume + N bit for bit; the option is
// refused without the bias it moves.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "offload_fixture.h"
#include "test_files.h"
#include "testing.h"
#include "train/load_balance.h"

namespace {

using offload_test::Variant;

// 2 MoE layers of 8 experts with a selection bias.
Variant biased(const std::string& offload = "", const std::string& sections = "") {
  Variant v;
  v.layers = R"("n_layers": 2, "n_experts": [8, 8], "selection_bias": true, "aux_loss_coef": 0)";
  v.offload = offload;
  v.sections = sections;
  return v;
}

std::string config_of(const Variant& v, double rate) {
  std::string c = offload_test::config(v);
  const std::string lr = R"("lr": 1e-2)";  // slower than the fixture's, so the router drifts less than the bias moves
  c.replace(c.find(lr), lr.size(), R"("lr": 1e-3)");
  if (rate > 0) {
    const std::string key = R"("grad_accum": )";
    c.replace(c.find(key), key.size(), R"("balance_bias_rate": )" + std::to_string(rate) + ", " + key);
  }
  return c;
}

constexpr float kSkew = 0.05f;

// Expert 0 of every MoE layer starts far ahead: the router's probabilities at initialisation are all close to 1/E,
// so every token chooses it.
void skew_start(moe::Trainer& t) {
  const moe::ModelConfig& m = t.model().config();
  for (int l = 0; l < m.n_layers; ++l)
    if (m.is_moe_layer(l)) t.model().param_ptrs().layers[l].router_selection_bias[0] = kSkew;
}

double max_over_mean(const std::vector<int32_t>& load) {
  double sum = 0, mx = 0;
  for (int32_t c : load) sum += c, mx = std::max<double>(mx, c);
  return mx / (sum / load.size());
}

struct BalanceRun {
  std::vector<moe::StepRecord> records;
  std::vector<float> params, m, v;
};

BalanceRun run(const std::string& cfg_text, int steps, int first_step = 0, const std::string& save = "",
               const std::string& resume = "") {
  moe::EngineConfig cfg = moe::parse_config_text(cfg_text, "test");
  auto be = moe::make_backend("cpu", {1});
  moe::Trainer t(cfg, *be);
  if (resume.empty()) skew_start(t);
  else t.resume_from(resume);
  offload_test::feed(t, steps * cfg.train.grad_accum, first_step * cfg.train.grad_accum);
  BalanceRun r;
  for (int s = 0; s < steps; ++s) r.records.push_back(t.step());
  if (!save.empty()) t.save_checkpoint(save);
  t.experts_to_arenas();
  const size_t n = t.model().num_params();
  r.params.assign(t.model().params(), t.model().params() + n);
  r.m.assign(t.optimizer().m(), t.optimizer().m() + n);
  r.v.assign(t.optimizer().v(), t.optimizer().v() + n);
  return r;
}

}  // namespace

TEST(each_expert_moves_by_the_rate_towards_the_mean) {
  // mean 3: below moves up, above down, equal stays.
  const std::vector<int32_t> load = {0, 3, 6, 2, 4, 3};
  std::vector<float> bias = {0.5f, 0.5f, 0.5f, -1.0f, 0.0f, 0.25f};
  moe::balance_bias_update(load.data(), 6, 0.125, bias.data());
  CHECK(bias == (std::vector<float>{0.625f, 0.5f, 0.375f, -0.875f, -0.125f, 0.25f}));
  // A mean that is not whole (7 / 3) is compared exactly: 2 < 7/3 < 3.
  const std::vector<int32_t> uneven = {2, 3, 2};
  std::vector<float> b2(3, 0.0f);
  moe::balance_bias_update(uneven.data(), 3, 1.0, b2.data());
  CHECK(b2 == (std::vector<float>{1.0f, -1.0f, 1.0f}));
  // All equal (and all zero): nothing moves.
  const std::vector<int32_t> zero = {0, 0, 0, 0};
  std::vector<float> b3(4, 0.75f);
  moe::balance_bias_update(zero.data(), 4, 1e-3, b3.data());
  CHECK(b3 == std::vector<float>(4, 0.75f));
}

TEST(a_skewed_start_balances_with_the_rule_and_stays_skewed_without) {
  const int steps = 40;
  const BalanceRun off = run(config_of(biased(), 0), steps), on = run(config_of(biased(), 5e-3), steps);
  // max/mean of the last 10 steps' loads added up (one step's 64 tokens are too few to tell balance from noise).
  auto tail = [&](const BalanceRun& r, int i) {
    std::vector<int32_t> sum(8, 0);
    for (int k = steps - 10; k < steps; ++k)
      for (int e = 0; e < 8; ++e) sum[e] += r.records[k].expert_tokens[i][e];
    return max_over_mean(sum);
  };
  for (int i = 0; i < 2; ++i) {
    const double first = max_over_mean(on.records[0].expert_tokens[i]);
    const double off_last = tail(off, i), on_last = tail(on, i);
    std::printf("layer %d: first %.3f, last 10 steps without %.3f, with %.3f\n", i, first, off_last, on_last);
    CHECK_MSG(first > 3.0, "layer " + std::to_string(i) + " starts at max/mean " + std::to_string(first));
    CHECK_MSG(off_last > 3.0, "without the rule layer " + std::to_string(i) + " ends at " + std::to_string(off_last));
    CHECK_MSG(on_last < 1.6, "with the rule layer " + std::to_string(i) + " ends at " + std::to_string(on_last));
    // The rate-0 run records its bias unmoved; the balanced one pulled expert 0 down.
    CHECK(off.records.back().selection_bias[i][0] == kSkew);
    // Expert 0's lead over the others' mean bias shrank (every bias may drift together: only differences choose).
    const std::vector<float>& b = on.records.back().selection_bias[i];
    double others = 0;
    for (int e = 1; e < 8; ++e) others += b[e] / 7.0;
    CHECK(b[0] - others < kSkew / 2);
    CHECK(on.records.back().selection_bias[i].size() == 8);
  }
  // Step 1's record holds the bias after its update: expert 0 was above the mean, the others below.
  const std::vector<float>& b = on.records[0].selection_bias[0];
  CHECK(b[0] == kSkew - 5e-3f);
  for (int e = 1; e < 8; ++e) CHECK(b[e] == 5e-3f || b[e] == -5e-3f);
}

TEST(the_bias_is_the_same_resident_offloaded_and_on_devices) {
  const int steps = 6;
  const BalanceRun resident = run(config_of(biased(), 2e-3), steps);
  const std::vector<std::pair<std::string, Variant>> others = {
      {"host", biased(offload_test::host_offload(0.25, 1))},
      {"ssd", biased(offload_test::ssd_offload(0.25, 1))},
      {"devices", biased("", R"(, "placement": {"devices": 2})")},
  };
  for (const auto& [name, v] : others) {
    const BalanceRun r = run(config_of(v, 2e-3), steps);
    for (int s = 0; s < steps; ++s)
      CHECK_MSG(r.records[s].selection_bias == resident.records[s].selection_bias, name + " step " + std::to_string(s + 1));
    CHECK_MSG(offload_test::same_bits(r.params, resident.params), name + ": weights differ");
  }
}

TEST(two_n_steps_equal_n_then_resume_then_n) {
  const std::string cfg = config_of(biased(), 2e-3);
  const BalanceRun full = run(cfg, 8);
  const std::string dir = moe_test::tmp_path("balance-ckpt");
  const BalanceRun first = run(cfg, 4, 0, dir);
  const BalanceRun second = run(cfg, 4, 4, "", dir);
  CHECK(offload_test::same_bits(second.params, full.params));
  CHECK(offload_test::same_bits(second.m, full.m));
  CHECK(offload_test::same_bits(second.v, full.v));
  for (int s = 0; s < 4; ++s) CHECK(second.records[s].selection_bias == full.records[4 + s].selection_bias);
  CHECK(first.records.back().selection_bias != full.records.back().selection_bias);
}

TEST(the_rate_needs_the_bias_it_moves) {
  Variant v;
  moe_test::expect_error([&] { moe::parse_config_text(config_of(v, 1e-3), "test"); },
                         {"train.balance_bias_rate", "model.selection_bias"}, "rate without bias");
  moe_test::expect_error([&] { moe::parse_config_text(config_of(biased(), 2.0), "test"); },
                         {"train.balance_bias_rate"}, "rate out of range");
  // Off by default and then not written to the config, so existing runs keep their config.json.
  const moe::EngineConfig c = moe::parse_config_text(config_of(biased(), 0), "test");
  CHECK(c.train.balance_bias_rate == 0);
  CHECK(moe::json::dump(moe::train_config_to_json(c.train)).find("balance_bias_rate") == std::string::npos);
  const moe::EngineConfig on = moe::parse_config_text(config_of(biased(), 1e-3), "test");
  CHECK(moe::json::dump(moe::train_config_to_json(on.train)).find("\"balance_bias_rate\":0.001") != std::string::npos);
}

TEST_MAIN()
