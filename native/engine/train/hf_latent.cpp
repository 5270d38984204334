#include "train/hf_latent.h"

#include <cmath>

#include "core/error.h"
#include "train/hf_fields.h"

namespace moe {
namespace {

const char* const kCannot = "; the engine cannot reproduce this model, so it cannot be imported";

RopeScalingConfig parse_hf_rope_scaling(const HfFields& k) {
  RopeScalingConfig r;
  const char* key = k.get("rope_scaling") ? "rope_scaling" : "rope_parameters";
  const json::Value* v = k.get(key);
  if (!v) return r;
  if (!v->is_object()) fail(k.where(key) + " must be an object or null");
  const HfFields s(*v, k.source());
  const std::string type = s.string("rope_type", s.string("type", "default"));
  if (type == "default") return r;
  if (type != "yarn")
    fail(k.where(key) + " has rope type \"" + type + "\"; only \"yarn\" (or none) is supported" + kCannot);
  r.type = RopeScalingType::Yarn;
  if (!s.get("factor")) fail(k.where(key) + ": 'factor' is required for yarn");
  r.factor = s.number("factor", 1.0);
  r.original_max_position_embeddings = s.integer("original_max_position_embeddings", 0);
  // transformers: `get("beta_fast") or 32`, so a 0 means the default too.
  r.beta_fast = s.number("beta_fast", 0) != 0 ? s.number("beta_fast", 0) : 32.0;
  r.beta_slow = s.number("beta_slow", 0) != 0 ? s.number("beta_slow", 0) : 1.0;
  r.mscale = s.number("mscale", 0.0);
  r.mscale_all_dim = s.number("mscale_all_dim", 0.0);
  r.attention_factor = s.number("attention_factor", 0.0);
  r.truncate = s.boolean("truncate", true);
  return r;
}

bool v3(HfType t) { return t == HfType::DeepseekV3; }

}  // namespace

RopeScalingConfig hf_rope_scaling(const json::Value& hf, const std::string& source) {
  return parse_hf_rope_scaling(HfFields(hf, source));
}

json::Value hf_rope_scaling_json(const RopeScalingConfig& r, bool deepseek_form) {
  using json::Value;
  Value s = Value::make_object();
  if (deepseek_form) s.set("type", Value::of("yarn"));
  s.set("rope_type", Value::of("yarn"));
  s.set("factor", Value::of(r.factor));
  if (r.original_max_position_embeddings)
    s.set("original_max_position_embeddings", Value::of(r.original_max_position_embeddings));
  s.set("beta_fast", Value::of(r.beta_fast));
  s.set("beta_slow", Value::of(r.beta_slow));
  if (deepseek_form || r.mscale != 0) s.set("mscale", Value::of(r.mscale));
  if (deepseek_form || r.mscale_all_dim != 0) s.set("mscale_all_dim", Value::of(r.mscale_all_dim));
  if (r.attention_factor > 0) s.set("attention_factor", Value::of(r.attention_factor));
  if (!r.truncate) s.set("truncate", Value::of(false));
  return s;
}

void latent_hf_to_model_config(const json::Value& hf, const std::string& source, HfType type, int experts,
                               ModelConfig& m) {
  const HfFields k(hf, source);
  // Defaults: transformers' DeepseekV2Config / DeepseekV3Config.
  LatentAttentionConfig& a = m.latent;
  // A null q_lora_rank has a meaning (no q compression), unlike other nulls, which read as absent.
  a.q_lora_rank = k.present("q_lora_rank") && !k.get("q_lora_rank") ? 0 : k.integer("q_lora_rank", 1536);
  a.kv_lora_rank = k.integer("kv_lora_rank", 512);
  a.qk_nope_head_dim = k.integer("qk_nope_head_dim", 128);
  a.qk_rope_head_dim = k.integer("qk_rope_head_dim", 64);
  a.v_head_dim = k.integer("v_head_dim", 128);
  if (a.kv_lora_rank == 0) fail(k.where("kv_lora_rank") + " must be positive");
  // V2 applies its rope as complex products of (2i, 2i+1) pairs; V3 de-interleaves first when rope_interleave.
  a.rope_interleave = v3(type) ? k.boolean("rope_interleave", true) : true;
  m.rope_scaling = parse_hf_rope_scaling(k);
  // DeepseekV3Attention multiplies its softmax scale by mscale(factor, mscale_all_dim)²; DeepseekV2Attention
  // (transformers) does not.
  a.softmax_mscale = v3(type);
  if (m.n_kv_heads != m.n_heads)
    fail(k.where("num_key_value_heads") + " is " + std::to_string(m.n_kv_heads) + ", not num_attention_heads " +
         std::to_string(m.n_heads) + "; latent attention has one key and value per head" + kCannot);
  if (k.boolean("mlp_bias", false)) fail(k.where("mlp_bias") + " is true; MLP biases are not supported" + kCannot);

  const int first_dense = k.integer("first_k_dense_replace", v3(type) ? 3 : 0);
  if (const int freq = k.integer("moe_layer_freq", 1); freq != 1)
    fail(k.where("moe_layer_freq") + " is " + std::to_string(freq) +
         "; transformers' DeepSeek models ignore it (every layer from first_k_dense_replace on is MoE) while "
         "DeepSeek's own code does not, so it is refused" + kCannot);
  m.dense_layers.clear();
  for (int l = 0; l < std::min(first_dense, m.n_layers); ++l) m.dense_layers.push_back(l);
  m.n_experts.assign(std::max(0, m.n_layers - first_dense), experts);
  const int shared = k.integer("n_shared_experts", v3(type) ? 1 : 2);
  m.shared_expert_d_ff = shared * m.expert_d_ff;
  m.shared_expert_gate = false;
  m.routed_scaling = k.number("routed_scaling_factor", v3(type) ? 2.5 : 1.0);
  m.aux_loss_coef = 0.0;  // aux_loss_alpha / seq_aux: transformers computes no auxiliary loss for these models

  const std::string method = k.string("topk_method", v3(type) ? "noaux_tc" : "greedy");
  if (v3(type)) {
    if (method != "noaux_tc")
      fail(k.where("topk_method") + " is \"" + method + "\"; DeepSeek-V3 routes with \"noaux_tc\" only" + kCannot);
    if (const std::string sf = k.string("scoring_func", "sigmoid"); sf != "sigmoid")
      fail(k.where("scoring_func") + " is \"" + sf + "\"; DeepSeek-V3 scores with \"sigmoid\" only" + kCannot);
    m.router = {RouterScoring::Sigmoid, TopkSelection::NoAuxTc, k.integer("n_group", 8), k.integer("topk_group", 4)};
    m.renormalize = k.boolean("norm_topk_prob", true);
    m.selection_bias = true;
  } else {
    if (const std::string sf = k.string("scoring_func", "softmax"); sf != "softmax")
      fail(k.where("scoring_func") + " is \"" + sf + "\"; DeepSeek-V2 scores with \"softmax\" only" + kCannot);
    if (method == "greedy") {
      m.router = {};
    } else if (method == "group_limited_greedy") {
      if (!k.get("n_group") || !k.get("topk_group"))
        fail(k.where("topk_method") + " is \"group_limited_greedy\" but n_group or topk_group is missing");
      m.router = {RouterScoring::Softmax, TopkSelection::GroupLimited, k.integer("n_group", 1),
                  k.integer("topk_group", 1)};
    } else {
      fail(k.where("topk_method") + " is \"" + method +
           "\"; DeepSeek-V2 routes with \"greedy\" or \"group_limited_greedy\" only" + kCannot);
    }
    // transformers' DeepseekV2Moe never normalises the top-k weights (DeepSeek's own code did when this is
    // true), so only false has one meaning.
    if (k.boolean("norm_topk_prob", false))
      fail(k.where("norm_topk_prob") + " is true; transformers' DeepSeek-V2 ignores it and DeepSeek's code "
           "normalises, so it is refused" + kCannot);
    m.renormalize = false;
    m.selection_bias = false;
  }
}

void latent_model_to_hf_config(const ModelConfig& m, HfType type, json::Value& o) {
  const std::string name = v3(type) ? "deepseek_v3" : "deepseek_v2";
  auto bad = [&](const std::string& field, const std::string& why) {
    fail("model." + field + ": " + why + "; the Hugging Face " + name +
         " layout cannot express it: change the model config or export as another model type");
  };
  const LatentAttentionConfig& a = m.latent;
  if (!a.enabled()) bad("latent_attention", "is not set; the layout has latent attention only");
  if (m.shared_expert_gate) bad("shared_expert_gate", "is true; the shared experts are ungated");
  if (m.shared_expert_d_ff % m.expert_d_ff != 0)
    bad("shared_expert_d_ff", "is not a multiple of expert_d_ff (n_shared_experts × moe_intermediate_size)");
  for (size_t i = 0; i < m.dense_layers.size(); ++i)
    if (m.dense_layers[i] != static_cast<int>(i))
      bad("dense_layers", "are not the first layers (first_k_dense_replace)");
  if (m.moe_every != 1) bad("moe_every", "is not 1");
  const bool yarn = m.rope_scaling.type == RopeScalingType::Yarn;
  const bool mscale_used = a.softmax_mscale && yarn && m.rope_scaling.mscale_all_dim > 0;
  using json::Value;
  if (v3(type)) {
    if (m.router.scoring != RouterScoring::Sigmoid || m.router.selection != TopkSelection::NoAuxTc)
      bad("router", "is not sigmoid scoring with noaux_tc selection");
    if (!m.selection_bias) bad("selection_bias", "is false; DeepSeek-V3 has e_score_correction_bias");
    if (mscale_used != (yarn && m.rope_scaling.mscale_all_dim > 0))
      bad("latent_attention.softmax_mscale", "is false; DeepSeek-V3 scales its softmax by YaRN's mscale²");
  } else {
    if (m.router.scoring != RouterScoring::Softmax || m.router.selection == TopkSelection::NoAuxTc)
      bad("router", "is not softmax scoring with plain or group_limited selection");
    if (m.selection_bias) bad("selection_bias", "is true; DeepSeek-V2's router has no selection bias");
    if (m.renormalize) bad("renormalize", "is true; DeepSeek-V2 never normalises its top-k weights");
    if (mscale_used) bad("latent_attention.softmax_mscale", "is true; transformers' DeepSeek-V2 does not apply it");
    if (!a.rope_interleave) bad("latent_attention.rope_interleave", "is false; DeepSeek-V2's rope pairs interleave");
  }
  o.set("q_lora_rank", a.q_lora_rank ? Value::of(a.q_lora_rank) : Value::null());
  o.set("kv_lora_rank", Value::of(a.kv_lora_rank));
  o.set("qk_nope_head_dim", Value::of(a.qk_nope_head_dim));
  o.set("qk_rope_head_dim", Value::of(a.qk_rope_head_dim));
  o.set("v_head_dim", Value::of(a.v_head_dim));
  o.set("first_k_dense_replace", Value::of(static_cast<int>(m.dense_layers.size())));
  o.set("moe_layer_freq", Value::of(1));
  o.set("n_shared_experts", Value::of(m.shared_expert_d_ff / m.expert_d_ff));
  o.set("routed_scaling_factor", Value::of(m.routed_scaling));
  o.set("norm_topk_prob", Value::of(m.renormalize));
  o.set("scoring_func", Value::of(v3(type) ? "sigmoid" : "softmax"));
  const bool grouped = m.router.selection != TopkSelection::Plain;
  o.set("topk_method", Value::of(v3(type) ? "noaux_tc" : grouped ? "group_limited_greedy" : "greedy"));
  o.set("n_group", grouped ? Value::of(m.router.n_group) : Value::null());
  o.set("topk_group", grouped ? Value::of(m.router.topk_group) : Value::null());
  if (v3(type)) o.set("rope_interleave", Value::of(a.rope_interleave));
  o.set("aux_loss_alpha", Value::of(0.0));
  if (yarn) o.set("rope_scaling", hf_rope_scaling_json(m.rope_scaling, true));
}

void latent_attention_sources(const ParamLayout& layout, const ModelConfig& m, int l, const std::string& hf_attn,
                              std::vector<TensorSource>& out) {
  const std::string o = "layers." + std::to_string(l) + ".attn.";
  auto whole = [&](const std::string& ours, const std::string& hf) {
    const ParamTensor* p = layout.find(o + ours);
    if (!p) fail("Hugging Face mapping: the model has no tensor '" + o + ours + "'; the layout does not match its config");
    out.push_back({p, {{hf_attn + hf, p->shape, 0}}});
  };
  if (m.latent.q_lora_rank == 0) {
    whole("q.weight", "q_proj.weight");
  } else {
    whole("q_a.weight", "q_a_proj.weight");
    whole("q_a_norm.weight", "q_a_layernorm.weight");
    whole("q_b.weight", "q_b_proj.weight");
  }
  whole("kv_a.weight", "kv_a_proj_with_mqa.weight");
  whole("kv_a_norm.weight", "kv_a_layernorm.weight");
  whole("kv_b.weight", "kv_b_proj.weight");
}

}  // namespace moe
