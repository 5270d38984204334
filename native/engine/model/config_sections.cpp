#include "model/config_sections.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "model/features.h"
#include "model/section_reader.h"

namespace moe {

LatentAttentionConfig parse_latent_attention(const json::Value& v) {
  LatentAttentionConfig c;
  if (v.is_null()) return c;
  SectionReader s(v, "model.latent_attention");
  c.q_lora_rank = s.integer("q_lora_rank", 0, 0, 1 << 16);
  c.kv_lora_rank = s.integer("kv_lora_rank", 0, 1, 1 << 16);
  if (!s.get("kv_lora_rank")) fail(s.field("kv_lora_rank") + ": required");
  c.qk_nope_head_dim = s.integer("qk_nope_head_dim", 0, 0, 1 << 12);
  c.qk_rope_head_dim = s.integer("qk_rope_head_dim", 0, 2, 1 << 12);
  if (c.qk_rope_head_dim % 2 != 0 || !s.get("qk_rope_head_dim"))
    fail(s.field("qk_rope_head_dim") + ": required, a positive even number");
  c.v_head_dim = s.integer("v_head_dim", 0, 1, 1 << 12);
  if (!s.get("v_head_dim")) fail(s.field("v_head_dim") + ": required");
  c.rope_interleave = s.boolean("rope_interleave", true);
  c.softmax_mscale = s.boolean("softmax_mscale", false);
  s.done();
  return c;
}

RopeScalingConfig parse_rope_scaling(const json::Value& v) {
  RopeScalingConfig c;
  if (v.is_null()) return c;
  SectionReader s(v, "model.rope_scaling");
  const std::string type = s.string("type", "");
  if (type != "yarn") fail(s.field("type") + ": \"" + type + "\" is not supported; use \"yarn\" (or null: no scaling)");
  c.type = RopeScalingType::Yarn;
  c.factor = s.number("factor", 0.0, 1.0, 1e6);
  if (!s.get("factor")) fail(s.field("factor") + ": required");
  c.original_max_position_embeddings = s.integer("original_max_position_embeddings", 0, 0, 1 << 30);
  c.beta_fast = s.number("beta_fast", 32.0, 1e-6, 1e6);
  c.beta_slow = s.number("beta_slow", 1.0, 1e-6, 1e6);
  c.mscale = s.number("mscale", 0.0, 0.0, 1e6);
  c.mscale_all_dim = s.number("mscale_all_dim", 0.0, 0.0, 1e6);
  c.attention_factor = s.number("attention_factor", 0.0, 0.0, 1e6);
  c.truncate = s.boolean("truncate", true);
  s.done();
  return c;
}

// The names are features.cpp's (router_scoring_name, topk_selection_name), so parsing and writing agree.
RouterScoring parse_router_scoring(const std::string& x, const std::string& field) {
  for (RouterScoring s : {RouterScoring::Softmax, RouterScoring::Sigmoid})
    if (x == router_scoring_name(s)) return s;
  fail(field + ": \"" + x + "\" is not supported; use \"softmax\" or \"sigmoid\"");
}

TopkSelection parse_topk_selection(const std::string& x, const std::string& field) {
  for (TopkSelection s : {TopkSelection::Plain, TopkSelection::GroupLimited, TopkSelection::NoAuxTc})
    if (x == topk_selection_name(s)) return s;
  fail(field + ": \"" + x + "\" is not supported; use \"plain\", \"group_limited\" or \"noaux_tc\"");
}

RouterConfig parse_router_config(const json::Value& v) {
  RouterConfig c;
  if (v.is_null()) return c;
  SectionReader s(v, "model.router");
  c.scoring = parse_router_scoring(s.string("scoring", "softmax"), s.field("scoring"));
  c.selection = parse_topk_selection(s.string("selection", "plain"), s.field("selection"));
  c.n_group = s.integer("n_group", 1, 1, 64);
  c.topk_group = s.integer("topk_group", 1, 1, 64);
  if (c.topk_group > c.n_group) fail(s.field("topk_group") + ": exceeds n_group " + std::to_string(c.n_group));
  s.done();
  return c;
}

json::Value latent_attention_to_json(const LatentAttentionConfig& c) {
  using json::Value;
  Value o = Value::make_object();
  o.set("q_lora_rank", Value::of(c.q_lora_rank));
  o.set("kv_lora_rank", Value::of(c.kv_lora_rank));
  o.set("qk_nope_head_dim", Value::of(c.qk_nope_head_dim));
  o.set("qk_rope_head_dim", Value::of(c.qk_rope_head_dim));
  o.set("v_head_dim", Value::of(c.v_head_dim));
  o.set("rope_interleave", Value::of(c.rope_interleave));
  o.set("softmax_mscale", Value::of(c.softmax_mscale));
  return o;
}

json::Value rope_scaling_to_json(const RopeScalingConfig& c) {
  using json::Value;
  Value o = Value::make_object();
  o.set("type", Value::of("yarn"));
  o.set("factor", Value::of(c.factor));
  o.set("original_max_position_embeddings", Value::of(c.original_max_position_embeddings));
  o.set("beta_fast", Value::of(c.beta_fast));
  o.set("beta_slow", Value::of(c.beta_slow));
  o.set("mscale", Value::of(c.mscale));
  o.set("mscale_all_dim", Value::of(c.mscale_all_dim));
  o.set("attention_factor", Value::of(c.attention_factor));
  o.set("truncate", Value::of(c.truncate));
  return o;
}

json::Value router_config_to_json(const RouterConfig& c) {
  using json::Value;
  Value o = Value::make_object();
  o.set("scoring", Value::of(router_scoring_name(c.scoring)));
  o.set("selection", Value::of(topk_selection_name(c.selection)));
  o.set("n_group", Value::of(c.n_group));
  o.set("topk_group", Value::of(c.topk_group));
  return o;
}

double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

RopeFrequencies rope_frequencies(const RopeScalingConfig& s, int dim, double theta, int max_positions) {
  RopeFrequencies r;
  const int half = dim / 2;
  r.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) r.inv_freq[i] = std::pow(theta, -2.0 * i / dim);
  if (s.type == RopeScalingType::None) return r;
  // YaRN: frequencies below the correction range are interpolated (divided by factor), those above kept, a
  // linear ramp between; cos and sin are scaled by the attention factor.
  const double factor = s.factor;
  if (s.attention_factor > 0) r.attention_factor = s.attention_factor;
  else if (s.mscale > 0 && s.mscale_all_dim > 0)
    r.attention_factor = yarn_mscale(factor, s.mscale) / yarn_mscale(factor, s.mscale_all_dim);
  else r.attention_factor = yarn_mscale(factor, 1.0);
  const double original = s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : max_positions;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    const double pos = std::pow(theta, 2.0 * i / dim);
    r.inv_freq[i] = (1.0 / (factor * pos)) * (1.0 - extrapolation) + (1.0 / pos) * extrapolation;
  }
  return r;
}

}  // namespace moe
