#include "train/expert_shares.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/json.h"

namespace moe {

const char* share_score_name(ShareScore s) { return s == ShareScore::Gate ? "gate" : "tokens"; }

ShareScore parse_share_score(const std::string& name) {
  if (name == "gate") return ShareScore::Gate;
  if (name == "tokens") return ShareScore::Tokens;
  fail("score: \"" + name + "\" is not \"gate\" or \"tokens\"");
}

ExpertShareCounter::ExpertShareCounter(const ModelConfig& cfg) {
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (!cfg.is_moe_layer(l)) continue;
    layers_.push_back(l);
    gate_.emplace_back(cfg.experts_at(l), 0.0);
    tokens_.emplace_back(cfg.experts_at(l), 0.0);
  }
}

void ExpertShareCounter::add(int moe_layer, const float* probs, const int32_t* topk, int N, int E, int K,
                             bool sigmoid) {
  check(moe_layer >= 0 && moe_layer < (int)layers_.size() && E == (int)gate_[moe_layer].size(),
        "expert shares: MoE layer " + std::to_string(moe_layer) + " does not match the model");
  std::vector<double>& gate = gate_[moe_layer];
  std::vector<double>& tokens = tokens_[moe_layer];
  for (int n = 0; n < N; ++n) {
    const float* row = probs + (size_t)n * E;
    const int32_t* chosen = topk + (size_t)n * K;
    // A token's gate values: the scores of the experts it routes to, zero for the others (with sigmoid scoring
    // divided by their sum, as those gates combine the experts' outputs).
    double sum = 1.0;
    if (sigmoid) {
      sum = 0;
      for (int k = 0; k < K; ++k)
        if (chosen[k] >= 0 && chosen[k] < E) sum += row[chosen[k]];
    }
    for (int k = 0; k < K; ++k) {
      const int32_t e = chosen[k];
      if (e < 0 || e >= E) continue;
      if (sum > 0) gate[e] += row[e] / sum;
      tokens[e] += 1.0;
    }
  }
  if (moe_layer == 0) tokens_seen_ += N;
}

namespace {

std::vector<double> normalised(const std::vector<double>& sums, int layer, const char* what) {
  const double total = std::accumulate(sums.begin(), sums.end(), 0.0);
  check(total > 0, std::string("expert shares: layer ") + std::to_string(layer) + " has no " + what +
                       " (no tokens were measured)");
  std::vector<double> out(sums.size());
  for (size_t e = 0; e < sums.size(); ++e) out[e] = sums[e] / total;
  return out;
}

}  // namespace

ExpertShares ExpertShareCounter::shares() const {
  ExpertShares s;
  s.layers = layers_;
  s.tokens_seen = tokens_seen_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    s.gate.push_back(normalised(gate_[i], layers_[i], "gate scores"));
    s.tokens.push_back(normalised(tokens_[i], layers_[i], "routed tokens"));
  }
  return s;
}

ExpertShares measure_expert_shares(Model& model, const TokenData& data, int batches, int B, int T) {
  check(batches >= 1, "batches: must be at least 1 (got " + std::to_string(batches) + ")");
  check(B >= 1 && T >= 1, "expert shares: the batch shape must be positive");
  const uint64_t window = (uint64_t)B * T;
  check(data.size() > window, data.path() + ": " + std::to_string(data.size()) +
                                  " tokens, fewer than one batch of " + std::to_string(window) + " + 1");
  const int available = static_cast<int>(std::min<uint64_t>(batches, (data.size() - 1) / window));
  std::vector<int32_t> inputs(window), targets(window);
  model.set_routing_skew(nullptr, 0);
  ExpertShareCounter counter(model.config());
  Backend& be = model.backend();
  std::vector<float> probs;
  std::vector<int32_t> topk;
  uint64_t cursor = 0;
  for (int b = 0; b < available; ++b) {
    cursor = data.next_batch(cursor, B, T, inputs.data(), targets.data());
    model.forward(inputs.data(), nullptr, B, T);
    for (int i = 0; i < model.moe_layer_count(); ++i) {
      const MoeLayer& layer = model.moe_layer(i);
      const int N = B * T, E = layer.shape().E, K = layer.shape().K;
      probs.resize((size_t)N * E);
      topk.resize((size_t)N * K);
      be.copy(probs.data(), layer.router_probs(), probs.size() * sizeof(float));
      be.copy(topk.data(), layer.router_topk(), topk.size() * sizeof(int32_t));
      counter.add(i, probs.data(), topk.data(), N, E, K, layer.shape().router.scoring == RouterScoring::Sigmoid);
    }
  }
  if (model.on_devices()) model.take_device_records();  // the measurement is not a training step
  ExpertShares s = counter.shares();
  s.batches = available;
  return s;
}

std::vector<int> select_experts(const std::vector<double>& shares, double threshold) {
  check(threshold > 0 && threshold <= 1, "threshold: must be in (0, 1] (got " + std::to_string(threshold) + ")");
  std::vector<int> order(shares.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return shares[a] > shares[b]; });
  std::vector<int> chosen;
  double cumulative = 0;
  for (int e : order) {
    if (cumulative + 1e-9 >= threshold) break;
    chosen.push_back(e);
    cumulative += shares[e];
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

namespace {

json::Value matrix(const std::vector<std::vector<double>>& rows) {
  json::Value out = json::Value::make_array();
  for (const auto& row : rows) {
    json::Value r = json::Value::make_array();
    for (double v : row) r.push(json::Value::of(v));
    out.push(std::move(r));
  }
  return out;
}

}  // namespace

std::string expert_shares_json(const ExpertShares& s, double threshold, ShareScore score) {
  json::Value root = json::Value::make_object();
  json::Value layers = json::Value::make_array();
  for (int l : s.layers) layers.push(json::Value::of(l));
  root.set("layers", layers);
  root.set("gate", matrix(s.gate));
  root.set("tokens", matrix(s.tokens));
  root.set("batches", json::Value::of(s.batches));
  root.set("tokens_seen", json::Value::of(s.tokens_seen));
  root.set("threshold", json::Value::of(threshold));
  root.set("score", json::Value::of(share_score_name(score)));
  json::Value experts = json::Value::make_object();
  const auto& chosen_from = score == ShareScore::Gate ? s.gate : s.tokens;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    json::Value ids = json::Value::make_array();
    for (int e : select_experts(chosen_from[i], threshold)) ids.push(json::Value::of(e));
    experts.set(std::to_string(s.layers[i]), ids);
  }
  root.set("experts", experts);
  return json::dump(root);
}

}  // namespace moe
