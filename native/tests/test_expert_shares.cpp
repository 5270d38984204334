// Expert-specialised fine-tuning's measurement: per layer the gate and token shares each sum to 1, the chosen
// set follows the rule (descending share, ties by lower id, the smallest prefix reaching p), a router whose
// logits are all 0 gives shares known exactly, and the C API returns them as JSON (refusing offload by name).
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/json.h"
#include "core/rng.h"
#include "include/moe_engine.h"
#include "model/config.h"
#include "test_files.h"
#include "testing.h"
#include "train/expert_shares.h"
#include "train/token_data.h"
#include "train/trainer.h"

using namespace moe;
using moe_test::tmp_path;

namespace {

std::string shard(const std::string& name, size_t n) {
  std::vector<uint32_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint32_t>(random_u64(7, 3, i) % 64);
  const std::string path = tmp_path(name);
  write_token_file(path, tokens, nullptr, 2, 64);
  return path;
}

const char* kConfig = R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_layers": 3, "n_heads": 4,
      "n_kv_heads": 2, "max_seq_len": 16, "d_ff": 48, "n_experts": 4, "top_k": 2, "dense_layers": [1]},
    "train": {"batch_size": 2, "seq_len": 16, "steps": 5, "threads": 2}})";

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

}  // namespace

TEST(shares_sum_to_one_per_layer_and_name_the_moe_layers) {
  auto be = make_backend("cpu", {2});
  Trainer t(parse_config_text(kConfig, "test"), *be);
  t.model().init(3);
  TokenData data(shard("shares.bin", 2000));
  const ExpertShares s = measure_expert_shares(t.model(), data, 3, 2, 16);
  CHECK(s.layers == std::vector<int>({0, 2}));  // layer 1 is dense
  CHECK(s.batches == 3 && s.tokens_seen == 3 * 32);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    CHECK_NEAR(sum(s.gate[i]), 1.0, 1e-12);
    CHECK_NEAR(sum(s.tokens[i]), 1.0, 1e-12);
    for (double share : s.tokens[i]) {  // whole assignments out of N·K
      const double count = share * 3 * 32 * 2;
      CHECK_NEAR(count, std::round(count), 1e-9);
    }
  }
  // A short shard runs the batches it holds; none at all is refused by the file's name.
  TokenData short_data(shard("short.bin", 40));
  CHECK(measure_expert_shares(t.model(), short_data, 5, 2, 16).batches == 1);
  TokenData tiny(shard("tiny.bin", 20));
  moe_test::expect_error([&] { measure_expert_shares(t.model(), tiny, 1, 2, 16); }, "tiny.bin", "tiny shard");
}

TEST(selection_is_the_smallest_prefix_by_descending_share) {
  const std::vector<double> s = {0.1, 0.4, 0.2, 0.3};
  CHECK(select_experts(s, 0.6) == std::vector<int>({1, 3}));
  CHECK(select_experts(s, 0.4) == std::vector<int>({1}));
  CHECK(select_experts(s, 0.75) == std::vector<int>({1, 2, 3}));
  CHECK(select_experts(s, 1.0) == std::vector<int>({0, 1, 2, 3}));
  // Ties: the lower id first.
  CHECK(select_experts({0.25, 0.25, 0.25, 0.25}, 0.5) == std::vector<int>({0, 1}));
  CHECK(select_experts({0.2, 0.3, 0.3, 0.2}, 0.5) == std::vector<int>({1, 2}));
  CHECK(select_experts({0.2, 0.3, 0.3, 0.2}, 0.7) == std::vector<int>({0, 1, 2}));
  // p = 1 is reached by shares summing to 1 up to rounding; an expert of share 0 is still left out.
  CHECK(select_experts({0.1, 0.2, 0.7000000000000001 - 1e-16, 0.0}, 1.0) == std::vector<int>({0, 1, 2}));
  moe_test::expect_error([] { select_experts({1.0}, 0.0); }, "threshold", "p = 0");
  moe_test::expect_error([] { select_experts({1.0}, 1.5); }, "threshold", "p > 1");
}

TEST(sigmoid_scores_are_normalised_per_token) {
  const ModelConfig cfg = parse_config_text(kConfig, "test").model;
  ExpertShareCounter c(cfg);
  // Two tokens routed to experts 0 and 1: sigmoid scores (0.5, 0.5, 0.5, 0.5) and (0.9, 0.1, 0.0, 0.0); the chosen
  // scores are divided by their sum, the others count zero.
  const float probs[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.9f, 0.1f, 0.0f, 0.0f};
  const int32_t topk[4] = {0, 1, 0, 1};
  c.add(0, probs, topk, 2, 4, 2, true);
  c.add(1, probs, topk, 2, 4, 2, true);
  const ExpertShares s = c.shares();
  CHECK_NEAR(s.gate[0][0], (0.5 + 0.9) / 2, 1e-7);
  CHECK_NEAR(s.gate[0][1], (0.5 + 0.1) / 2, 1e-7);
  CHECK(s.gate[0][2] == 0.0 && s.gate[0][3] == 0.0);
  CHECK(s.tokens[0] == std::vector<double>({0.5, 0.5, 0.0, 0.0}));
  ExpertShareCounter empty(cfg);
  moe_test::expect_error([&] { empty.shares(); }, "no tokens were measured", "nothing measured");
}

TEST(a_router_of_zero_logits_gives_shares_known_exactly) {
  auto be = make_backend("cpu", {2});
  Trainer t(parse_config_text(kConfig, "test"), *be);
  t.model().init(3);
  // Every router logit 0: each token's probabilities are exactly 1/4, and top-2's ties pick experts 0 and 1, so
  // both the gate values and the assignments fall on those two.
  for (const ParamTensor& p : t.model().layout().tensors())
    if (p.name.find("moe.router.") != std::string::npos)
      for (size_t i = 0; i < p.numel; ++i) t.model().params()[p.offset + i] = 0.0f;
  TokenData data(shard("zero-router.bin", 2000));
  const ExpertShares s = measure_expert_shares(t.model(), data, 2, 2, 16);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    CHECK(s.gate[i] == std::vector<double>({0.5, 0.5, 0.0, 0.0}));
    CHECK(s.tokens[i] == std::vector<double>({0.5, 0.5, 0.0, 0.0}));
  }
  const json::Value by_tokens = json::parse(expert_shares_json(s, 0.9, ShareScore::Tokens));
  const json::Value by_gate = json::parse(expert_shares_json(s, 0.5, ShareScore::Gate));
  CHECK(json::dump(*by_tokens.find("experts")) == R"({"0":[0,1],"2":[0,1]})");
  CHECK(json::dump(*by_gate.find("experts")) == R"({"0":[0],"2":[0]})");
  CHECK(by_gate.find("score")->string == "gate" && by_tokens.find("score")->string == "tokens");
}

TEST(the_c_api_measures_and_refuses_offload_by_name) {
  const std::string data = shard("capi.bin", 2000);
  char err[1024];
  moe_engine* e = moe_engine_create(kConfig, nullptr, err, sizeof err);
  CHECK(e != nullptr);
  moe_expert_shares_options o{};
  o.struct_size = sizeof o;
  o.token_file = data.c_str();
  o.batches = 2;
  o.threshold = 0.5;
  o.score = MOE_SHARE_TOKENS;
  const char* out = nullptr;
  CHECK(moe_engine_measure_experts(e, &o, &out) == MOE_OK);
  const json::Value v = json::parse(out ? out : "");
  CHECK(v.find("gate")->array.size() == 2 && v.find("tokens")->array[1].array.size() == 4);
  CHECK(v.find("batches")->number == 2 && v.find("threshold")->number == 0.5);
  o.threshold = 0;
  CHECK(moe_engine_measure_experts(e, &o, &out) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(e)).find("threshold") != std::string::npos);
  moe_engine_destroy(e);

  const std::string offloaded = std::string(kConfig).substr(0, std::string(kConfig).size() - 1) +
                                R"(, "offload": {"mode": "host", "expert_slots": 4}})";
  e = moe_engine_create(offloaded.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  o.threshold = 0.5;
  CHECK(moe_engine_measure_experts(e, &o, &out) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(e)).find("offload.mode") != std::string::npos);
  moe_engine_destroy(e);
}

TEST_MAIN()
