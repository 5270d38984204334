// Optional sections of the model config, each a JSON object under "model" whose absence means the plain model:
//   latent_attention  multi-head latent attention (DeepSeek-V2/V3): low-rank q and kv projections with RMSNorms,
//                     a rope part shared by all heads' keys, a v head size of its own
//   rope_scaling      YaRN frequencies and attention factor (transformers' modeling_rope_utils.py)
//   router            the router's scoring and top-k selection (RouterSpec, backend/types.h)
// Each is parsed once here and read as features (model/features.h); nothing else parses them.
#pragma once
#include <vector>

#include "backend/types.h"
#include "core/json.h"

namespace moe {

struct LatentAttentionConfig {
  int q_lora_rank = 0;  // 0: q = x·Wqᵀ; else q = Wq_b·rmsnorm(Wq_a·x)
  int kv_lora_rank = 0;  // > 0: latent attention is on
  int qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;   // the rope part's pairs are (2i, 2i+1) (DeepSeek), else (i, i + d/2)
  bool softmax_mscale = false;   // the softmax scale is times YaRN's mscale(factor, mscale_all_dim)²
  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

enum class RopeScalingType { None, Yarn };
struct RopeScalingConfig {
  RopeScalingType type = RopeScalingType::None;
  double factor = 1.0;
  int original_max_position_embeddings = 0;  // 0: model.max_seq_len
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 0.0, mscale_all_dim = 0.0;  // 0: absent
  double attention_factor = 0.0;              // 0: derived from factor and the mscales
  bool truncate = true;
};

struct RouterConfig {
  RouterScoring scoring = RouterScoring::Softmax;
  TopkSelection selection = TopkSelection::Plain;
  int n_group = 1, topk_group = 1;
};

// Parse one section (the value under its key; null means absent); errors name "model.<section>.<field>".
LatentAttentionConfig parse_latent_attention(const json::Value& v);
RopeScalingConfig parse_rope_scaling(const json::Value& v);
RouterConfig parse_router_config(const json::Value& v);
json::Value latent_attention_to_json(const LatentAttentionConfig& c);
json::Value rope_scaling_to_json(const RopeScalingConfig& c);
json::Value router_config_to_json(const RouterConfig& c);
RouterScoring parse_router_scoring(const std::string& s, const std::string& field);
TopkSelection parse_topk_selection(const std::string& s, const std::string& field);

// transformers' yarn_get_mscale: 0.1·m·ln(scale) + 1 for scale > 1, else 1.
double yarn_mscale(double scale, double m);
// The rotary frequencies of a head part of `dim` floats, and the factor cos and sin are multiplied by: θ^(-2i/dim)
// and 1 without scaling; with YaRN, _compute_yarn_parameters of transformers' modeling_rope_utils.py.
struct RopeFrequencies {
  std::vector<double> inv_freq;  // [dim/2]
  double attention_factor = 1.0;
};
RopeFrequencies rope_frequencies(const RopeScalingConfig& s, int dim, double theta, int max_positions);

}  // namespace moe
