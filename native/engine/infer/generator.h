// Text generation on a model: the prompt is prefilled in one pass (every row's keys and values enter the cache),
// then each step samples a token from the last position's logits and feeds it as one new position, attending over
// the cache. The layers run the full forward's kernels on the model's fp32 weights: norms, attention
// (cached_attention_block.h), dense FFNs and MoE layers, whose routed experts are reached through an
// ExpertAccess — resident by default, or an ExpertSlotCache keeping them in the host or SSD tier. MoE layers run
// dropless (a capacity factor is a training-time limit that would make a token's output depend on its batch).
// Per generated token, each MoE layer's chosen experts (in the router's top-k order) are recorded: those of the
// position whose logits the token was sampled from, i.e. the experts that wrote it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "infer/cached_attention_block.h"
#include "infer/kv_cache.h"
#include "infer/sampler.h"
#include "model/model.h"
#include "moe/moe_layer.h"
#include "offload/expert_access.h"

namespace moe {

enum class StopReason { None, StopToken, MaxTokens, Length };

struct GeneratedToken {
  int32_t token = -1;
  // [MoE layer][K]: the experts the router chose for the position this token was sampled from.
  std::vector<std::vector<int32_t>> experts;
  StopReason stop = StopReason::None;  // set on the last token of a generate()
};

struct GenerateOptions {
  SamplingOptions sampling;
  int max_tokens = 128;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
};

class Generator {
 public:
  // experts: where MoE layers reach their routed experts (not owned; null: the model's arenas).
  explicit Generator(Model& model, ExpertAccess* experts = nullptr);

  // Empties the cache: the next feed starts at position 0.
  void reset();
  // Appends n tokens at the next positions. all_logits (may be null) receives [n, V], every row's logits;
  // without it only the last row's are computed.
  void feed(const int32_t* tokens, int n, std::vector<float>* all_logits = nullptr);
  int position() const { return cache_.length(); }
  const std::vector<float>& logits() const { return last_logits_; }  // [V] of the last position fed
  // [MoE layer][K] experts of the last position fed.
  const std::vector<std::vector<int32_t>>& last_experts() const { return last_experts_; }

  // Samples the next token from the last position's logits (feeding the previous step's token first).
  // draw: the sampling draw's index (the step number within a generation).
  GeneratedToken step(const SamplingOptions& sampling, uint64_t draw);
  // Feeds the prompt (after a reset) and steps until a stop token, max_tokens or the model's max_seq_len;
  // on_token (may be null) sees each token as it is made and returns false to stop early.
  std::vector<GeneratedToken> generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                       const std::function<bool(const GeneratedToken&)>& on_token = nullptr);

 private:
  void norm(float* out, const float* x, const float* w, const float* b, int n);
  void layer(int l, int first, int n);
  void record_experts(int moe_index, int n);

  Model& model_;
  Backend& be_;
  const ModelConfig& cfg_;
  const ModelFeatures& f_;
  ExpertAccess* experts_;
  std::unique_ptr<ResidentExpertAccess> resident_;
  CachedAttentionBlock attention_;
  std::vector<std::unique_ptr<MoeLayer>> moe_layers_;
  KvCache cache_;
  DeviceBuffer x_, ln_, mid_, ffn_, h_, act_, mean_, rstd_, logits_;
  std::vector<float> last_logits_;
  std::vector<std::vector<int32_t>> last_experts_;
  int32_t pending_ = -1;  // the last sampled token, fed by the next step
};

const char* stop_reason_name(StopReason r);

}  // namespace moe
