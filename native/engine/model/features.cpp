#include "model/features.h"

#include "core/error.h"
#include "model/config.h"

namespace moe {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {
      {"gpt-moe", "LayerNorm, learned positions, multi-head attention, GELU experts, biases",
       {NormKind::LayerNorm, PositionKind::Learned, AttentionKind::MultiHead, QkNorm::None, FfnActivation::Gelu,
        RouterScoring::Softmax, TopkSelection::Plain, /*linear_bias=*/true, /*qkv_bias=*/true,
        /*tie_embeddings=*/true}},
      {"mixtral", "RMSNorm, RoPE, grouped-query attention, SwiGLU experts, no biases",
       {NormKind::RmsNorm, PositionKind::Rope, AttentionKind::GroupedQuery, QkNorm::None, FfnActivation::Swiglu,
        RouterScoring::Softmax, TopkSelection::Plain, /*linear_bias=*/false, /*qkv_bias=*/false,
        /*tie_embeddings=*/false}},
      {"gpt-oss",
       "RMSNorm, RoPE, grouped-query attention with sinks and sliding windows, clamped SwiGLU experts, "
       "biases on q/k/v/o, the experts and the router",
       {NormKind::RmsNorm, PositionKind::Rope, AttentionKind::GroupedQuery, QkNorm::None, FfnActivation::SwigluClamped,
        RouterScoring::Softmax, TopkSelection::Plain, /*linear_bias=*/false, /*qkv_bias=*/true,
        /*tie_embeddings=*/false, /*out_bias=*/true, /*ffn_bias=*/true, /*router_bias=*/true,
        /*attention_sinks=*/true}},
  };
  return families;
}

std::string model_family_names() {
  std::string names;
  for (const ModelFamily& f : model_families()) names += (names.empty() ? "\"" : ", \"") + std::string(f.name) + "\"";
  return names;
}

const ModelFamily& find_model_family(const std::string& name) {
  for (const ModelFamily& f : model_families())
    if (name == f.name) return f;
  fail("model.arch: \"" + name + "\" is not supported; use one of " + model_family_names());
}

ModelFeatures model_features(const ModelConfig& m) {
  ModelFeatures f;
  static_cast<FamilyFeatures&>(f) = find_model_family(m.family).features;
  f.qkv_bias = m.qkv_bias;
  f.out_bias = f.out_bias || m.out_bias;
  f.tie_embeddings = m.tie_embeddings;
  f.qk_norm = m.qk_norm;
  f.clip_qkv = m.clip_qkv;
  f.rope_theta = f.position == PositionKind::Rope ? m.rope_theta : 0.0;
  f.shared_expert = m.shared_expert_d_ff > 0;
  f.shared_expert_gate = m.shared_expert_gate;
  f.residual_mlp = m.residual_mlp;
  f.moe_every = m.moe_every;
  // Latent attention and the router's scoring and selection are the config's choices within any RoPE family.
  if (m.latent.enabled()) f.attention = AttentionKind::Latent;
  f.router_scoring = m.router.scoring;
  f.topk_selection = m.router.selection;
  return f;
}

void check_router_groups(const ModelConfig& m) {
  const TopkSelection sel = m.router.selection;
  if (sel != TopkSelection::Plain)
    for (int e : m.n_experts)
      if (e % m.router.n_group != 0 || (sel == TopkSelection::NoAuxTc && e / m.router.n_group < 2))
        fail("model.router.n_group: " + std::to_string(m.router.n_group) + " must divide every layer's experts (" +
             std::to_string(e) + ")" + (sel == TopkSelection::NoAuxTc ? ", at least 2 per group" : ""));
}

void check_model_features(const ModelConfig& m) {
  const ModelFeatures f = model_features(m);
  if (f.qk_norm != QkNorm::None && f.norm != NormKind::RmsNorm)
    fail("model.qk_norm: q/k norm is an RMSNorm; " + m.family + " uses LayerNorm (use an RMSNorm family)");
  if (f.attention == AttentionKind::MultiHead && m.n_kv_heads != m.n_heads)
    fail("model.n_kv_heads: " + m.family + " uses full multi-head attention; n_kv_heads must equal n_heads");
  if (f.attention == AttentionKind::Latent) {
    // Its projections have no biases, sinks or window: a family with them would carry tensors it never used.
    if (f.position != PositionKind::Rope || f.has_out_bias() || f.attention_sinks)
      fail("model.latent_attention: needs a RoPE family without attention biases or sinks (\"mixtral\"), not " + m.family);
    if (m.sliding_window > 0) fail("model.sliding_window: latent attention has no sliding window");
    if (m.n_kv_heads != m.n_heads)
      fail("model.n_kv_heads: latent attention gives every head its own key and value; set it to n_heads");
    if (m.qk_norm != QkNorm::None || m.clip_qkv > 0)
      fail(std::string(m.qk_norm != QkNorm::None ? "model.qk_norm" : "model.clip_qkv") +
           ": latent attention has its own latent norms and no packed q/k/v to normalise or clip");
  } else if (m.rope_scaling.type != RopeScalingType::None && f.position != PositionKind::Rope) {
    fail("model.rope_scaling: needs RoPE positions; " + m.family + " has learned positions");
  }
  if (f.position == PositionKind::Rope && f.attention != AttentionKind::Latent && m.head_size() % 2 != 0)
    fail(std::string(m.head_dim ? "model.head_dim" : "model.n_heads") + ": RoPE needs an even head size, got " + std::to_string(m.head_size()));
  if (f.linear_bias && !m.qkv_bias) fail("model.qkv_bias: " + m.family + " always has biases; remove the field");
  if (m.sliding_window > 0 && f.position != PositionKind::Rope)
    fail("model.sliding_window: needs rotary positions (a learned position table has no window)");
  if (f.shared_expert_gate && !f.shared_expert)
    fail("model.shared_expert_gate: needs a shared expert (set model.shared_expert_d_ff > 0)");
}

// Switches without a default, so a new enum value is a compile warning here until it is named.
const char* norm_kind_name(NormKind k) {
  switch (k) {
    case NormKind::LayerNorm: return "layernorm";
    case NormKind::RmsNorm: return "rmsnorm";
  }
  return "?";
}
const char* position_kind_name(PositionKind k) {
  switch (k) {
    case PositionKind::Learned: return "learned";
    case PositionKind::Rope: return "rope";
  }
  return "?";
}
const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::MultiHead: return "mha";
    case AttentionKind::GroupedQuery: return "gqa";
    case AttentionKind::Latent: return "mla";
  }
  return "?";
}
const char* qk_norm_name(QkNorm k) {
  switch (k) {
    case QkNorm::None: return "none";
    case QkNorm::Projection: return "projection";
    case QkNorm::Head: return "head";
  }
  return "?";
}
const char* ffn_activation_name(FfnActivation a) {
  switch (a) {
    case FfnActivation::Gelu: return "gelu";
    case FfnActivation::Swiglu: return "swiglu";
    case FfnActivation::SwigluClamped: return "swiglu_clamped";
  }
  return "?";
}
const char* router_scoring_name(RouterScoring s) {
  switch (s) {
    case RouterScoring::Softmax: return "softmax";
    case RouterScoring::Sigmoid: return "sigmoid";
  }
  return "?";
}
const char* topk_selection_name(TopkSelection s) {
  switch (s) {
    case TopkSelection::Plain: return "plain";
    case TopkSelection::GroupLimited: return "group_limited";
    case TopkSelection::NoAuxTc: return "noaux_tc";
  }
  return "?";
}

json::Value features_to_json(const ModelFeatures& f) {
  using json::Value;
  Value o = Value::make_object();
  o.set("norm", Value::of(norm_kind_name(f.norm)));
  o.set("position", Value::of(position_kind_name(f.position)));
  o.set("rope_theta", Value::of(f.rope_theta));
  o.set("attention", Value::of(attention_kind_name(f.attention)));
  o.set("qk_norm", Value::of(qk_norm_name(f.qk_norm)));
  o.set("clip_qkv", f.clip_qkv > 0 ? Value::of(f.clip_qkv) : Value::null());
  o.set("activation", Value::of(ffn_activation_name(f.activation)));
  o.set("router_scoring", Value::of(router_scoring_name(f.router_scoring)));
  o.set("topk_selection", Value::of(topk_selection_name(f.topk_selection)));
  o.set("linear_bias", Value::of(f.linear_bias));
  o.set("qkv_bias", Value::of(f.qkv_bias));
  o.set("tie_embeddings", Value::of(f.tie_embeddings));
  o.set("out_bias", Value::of(f.has_out_bias()));
  o.set("ffn_bias", Value::of(f.has_ffn_bias()));
  o.set("router_bias", Value::of(f.router_bias));
  o.set("attention_sinks", Value::of(f.attention_sinks));
  o.set("shared_expert", Value::of(f.shared_expert));
  o.set("shared_expert_gate", Value::of(f.shared_expert_gate));
  o.set("residual_mlp", Value::of(f.residual_mlp));
  o.set("moe_every", Value::of(f.moe_every));
  return o;
}

}  // namespace moe
