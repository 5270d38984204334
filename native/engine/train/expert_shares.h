// Expert-specialised fine-tuning's measurement: the frozen model's forward (no backward, no update) over the
// first batches of a token shard, accumulating per MoE layer each routed expert's share of the gate scores
// and of the routed tokens, and the per-layer choice of the experts to train.
//
// Gate share (ESFT-Gate's average gate score): each token's gate values, the router's scores of the top-k experts
// it routes to and zero for the others (sigmoid scoring: divided by the chosen scores' sum, as they combine the
// experts' outputs), summed over tokens, divided by the layer's total. Token share (ESFT-Token): the top-k assignments each
// expert received (before any capacity drop: the router's choice), divided by N·K. Both sum to 1 per layer.
// Every input token counts, masked targets included: the router sees every token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/token_data.h"

namespace moe {

enum class ShareScore { Gate, Tokens };
const char* share_score_name(ShareScore s);
ShareScore parse_share_score(const std::string& name);  // "gate" | "tokens"; fails naming "score"

struct ExpertShares {
  std::vector<int> layers;                   // the model layer index of each MoE layer
  std::vector<std::vector<double>> gate;     // [MoE layer][expert]
  std::vector<std::vector<double>> tokens;   // [MoE layer][expert]
  int batches = 0;                           // batches actually run
  int64_t tokens_seen = 0;                   // tokens routed per layer
};

// Running sums before normalisation; one per run of the measurement.
class ExpertShareCounter {
 public:
  explicit ExpertShareCounter(const ModelConfig& cfg);
  // One layer's router output of N tokens: probs [N, E] and the chosen experts topk [N, K].
  void add(int moe_layer, const float* probs, const int32_t* topk, int N, int E, int K, bool sigmoid);
  // The shares (each layer divided by its total); fails when a layer saw no tokens.
  ExpertShares shares() const;

 private:
  std::vector<int> layers_;
  std::vector<std::vector<double>> gate_, tokens_;
  int64_t tokens_seen_ = 0;
  int counted_layers_ = 0;
};

// Forward over `batches` consecutive [B, T] windows from the shard's start (the shard must hold at least one;
// fewer are run when it is short), the router's own choices (no routing skew). Resident experts only.
ExpertShares measure_expert_shares(Model& model, const TokenData& data, int batches, int B, int T);

// The smallest set of experts, taken by descending share (ties: lower id first), whose cumulative share
// reaches threshold (in (0, 1]); ascending ids. The sum is compared with a 1e-9 slack so that a threshold of 1
// is reached by shares that sum to 1 up to rounding (experts of share 0 are then still left out).
std::vector<int> select_experts(const std::vector<double>& shares, double threshold);

// {"layers", "gate", "tokens", "batches", "tokens_seen", "threshold", "score", "experts": {"<layer>": [ids]}}.
std::string expert_shares_json(const ExpertShares& s, double threshold, ShareScore score);

}  // namespace moe
