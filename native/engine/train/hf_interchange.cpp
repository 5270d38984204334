#include "train/hf_interchange.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/half.h"
#include "model/features.h"
#include "train/arena_view.h"
#include "train/hf_experts.h"
#include "train/hf_fields.h"
#include "train/hf_latent.h"
#include "train/lora_adapter.h"
#include "train/hf_storage.h"
#include "train/stored_part.h"

namespace moe {
namespace {

bool has_key(const HfFamily& hf, HfField field) {
  for (const HfKey& k : hf.keys)
    if (k.field == field) return true;
  return false;
}

// HF fields whose non-default values change the forward math in ways this engine does not implement.
void reject_unsupported(const HfFields& f, const HfFamily& row, const ModelConfig& m, int max_pos) {
  const bool latent = row.latent;
  const std::string fix = "; the engine cannot reproduce this model, so it cannot be imported";
  if (const json::Value* v = f.get("hidden_act"); v && !(v->is_string() && v->string == "silu"))
    fail(f.where("hidden_act") + " is " + json::dump(*v) + "; only \"silu\" (SwiGLU) is supported" + fix);
  const bool sliding = f.boolean("use_sliding_window", true) && !has_key(row, HfField::SlidingWindow);
  if (const json::Value* v = f.get("sliding_window"); sliding && v && (!v->is_number() || v->number < max_pos))
    fail(f.where("sliding_window") + " is " + json::dump(*v) + ", smaller than max_position_embeddings " +
         std::to_string(max_pos) + "; sliding-window attention is not supported" + fix);
  if (const json::Value* v = f.get("head_dim");
      v && !has_key(row, HfField::HeadDim) && !latent && !(v->is_number() && v->number == m.d_model / m.n_heads))
    fail(f.where("head_dim") + " is " + json::dump(*v) + " but hidden_size / num_attention_heads is " +
         std::to_string(m.d_model / m.n_heads) + "; a separate head size is not supported" + fix);
  // gpt-oss: attention_bias (default true) puts biases on q/k/v/o, which the family always has.
  bool bias_fixed = false;
  for (const HfKey& k : row.keys)
    if (k.field == HfField::Fixed && std::string(k.key) == "attention_bias") bias_fixed = std::string(k.json) == "true";
  if (bias_fixed && !f.boolean("attention_bias", true))
    fail(f.where("attention_bias") + " is false; " + row.label + " without attention biases is not supported" + fix);
  if (!bias_fixed && !has_key(row, HfField::AttentionBias) && f.boolean("attention_bias", false))
    fail(f.where("attention_bias") + " is true; biases on the attention projections are not supported" + fix);
  if (const json::Value* v = f.get("clip_qkv"); v && !has_key(row, HfField::ClipQkv))
    fail(f.where("clip_qkv") + " is " + json::dump(*v) + "; clipping q/k/v is not supported" + fix);
  if (const json::Value* v = f.get("mlp_only_layers"); !has_key(row, HfField::DenseLayers) && v && !(v->is_array() && v->array.empty()))
    fail(f.where("mlp_only_layers") + " is " + json::dump(*v) +
         "; dense layers are only supported every decoder_sparse_step (use an empty list)" + fix);
  if (f.number("partial_rotary_factor", 1.0) != 1.0)
    fail(f.where("partial_rotary_factor") + " is not 1; partial RoPE is not supported" + fix);
  for (const HfKey& k : row.keys)
    if (const json::Value* v = f.get(k.key); k.field == HfField::Only && v && json::dump(*v) != json::dump(json::parse(k.json, k.key)))
      fail(f.where(k.key) + " is " + json::dump(*v) + "; only " + k.json + " is supported for " + row.label + fix);
  for (const char* key : {"use_qk_norm", "qk_layernorm"})
    if (f.boolean(key, false)) fail(f.where(key) + " is true; QK-norm is not supported" + fix);
  // Training-time noise: the weights would import, but training would silently differ from the HF model's.
  if (f.number("router_jitter_noise", 0.0) != 0.0)
    fail(f.where("router_jitter_noise") + " is not 0; router jitter is not supported: set it to 0 to import");
  if (f.number("attention_dropout", 0.0) != 0.0)
    fail(f.where("attention_dropout") + " is not 0; attention dropout is not supported: set it to 0 to import");
}

// mlp_only_layers: layer indexes, in any order; sorted and deduplicated as transformers only asks membership.
std::vector<int> dense_layers(const HfFields& f, const char* key, int n_layers) {
  std::vector<int> out;
  const json::Value* v = f.get(key);
  if (!v) return out;
  if (!v->is_array()) fail(f.where(key) + " must be a list of layer indexes, got " + json::dump(*v));
  for (const json::Value& e : v->array) {
    if (!e.is_number() || e.number != std::floor(e.number) || e.number < 0 || e.number >= n_layers)
      fail(f.where(key) + " holds " + json::dump(e) + "; every entry must be a layer index in [0, " +
           std::to_string(n_layers) + ")");
    out.push_back(static_cast<int>(e.number));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// sliding_window and layer_types (transformers' default: "sliding_attention" on even layers, "full_attention"
// on odd ones); a null window leaves every layer full.
void read_sliding_layers(const HfFields& f, const char* key, ModelConfig& m) {
  m.sliding_window = f.integer(key, 0);
  m.sliding_layers.clear();
  if (m.sliding_window == 0) return;
  const json::Value* types = f.get("layer_types");
  if (types && (!types->is_array() || static_cast<int>(types->array.size()) != m.n_layers))
    fail(f.where("layer_types") + " must list one attention type per layer (" + std::to_string(m.n_layers) + ")");
  for (int l = 0; l < m.n_layers; ++l) {
    if (!types) {
      if (l % 2 == 0) m.sliding_layers.push_back(l);
      continue;
    }
    const json::Value& t = types->array[l];
    if (t.is_string() && t.string == "sliding_attention") m.sliding_layers.push_back(l);
    else if (!(t.is_string() && t.string == "full_attention"))
      fail(f.where("layer_types") + "[" + std::to_string(l) + "] is " + json::dump(t) +
           "; only \"sliding_attention\" and \"full_attention\" are supported");
  }
  if (m.sliding_layers.empty()) m.sliding_window = 0;
}

double rope_theta(const HfFields& f, double def) {
  if (const json::Value* p = f.get("rope_parameters"))
    if (const json::Value* t = p->find("rope_theta"); t && t->is_number()) return t->number;
  return f.number("rope_theta", def);
}

}  // namespace

HfType parse_hf_model_type(const std::string& model_type) {
  for (const HfFamily& f : hf_families())
    if (model_type == f.model_type) return f.type;
  fail("Hugging Face model_type \"" + model_type + "\" is not supported; use " + hf_model_type_list());
}

const char* hf_model_type_name(HfType t) { return hf_family(t).model_type; }

ModelConfig hf_to_model_config(const json::Value& hf, const std::string& source) {
  if (!hf.is_object()) fail(source + ": expected a JSON object (a Hugging Face config.json)");
  const json::Value* mt = hf.find("model_type");
  if (!mt || !mt->is_string()) fail(source + ": field 'model_type' must be a string, one of " + hf_model_type_list());
  HfType type;
  try {
    type = parse_hf_model_type(mt->string);
  } catch (const EngineError& e) {
    fail(source + ": " + e.what());
  }
  HfFields f(hf, source, hf_model_type_name(type));

  // Defaults are those of the transformers config classes, for fields a saved config.json may omit.
  const HfFamily& row = hf_family(type);
  ModelConfig m;
  m.family = row.family;
  m.vocab_size = f.integer("vocab_size");
  m.d_model = f.integer("hidden_size");
  m.n_layers = f.integer("num_hidden_layers");
  m.n_heads = f.integer("num_attention_heads");
  if (m.n_heads == 0) fail(f.where("num_attention_heads") + " must be positive");
  m.n_kv_heads = f.integer("num_key_value_heads", row.kv_heads > 0 ? row.kv_heads : m.n_heads);
  m.max_seq_len = f.integer("max_position_embeddings", row.max_positions);
  m.norm_eps = f.number("rms_norm_eps", row.rms_norm_eps);
  m.rope_theta = rope_theta(f, row.rope_theta);
  m.tie_embeddings = f.boolean("tie_word_embeddings", false);
  m.init_std = f.number("initializer_range", 0.02);
  m.aux_loss_coef = f.number("router_aux_loss_coef", row.router_aux_loss_coef);
  m.z_loss_coef = 0.0;
  m.top_k = f.integer("num_experts_per_tok");
  m.qkv_bias = row.qkv_bias;
  m.shared_expert_gate = row.shared_expert;
  m.qk_norm = row.qk_norm;
  m.renormalize = true;  // unless the type has a key for it
  m.moe_every = 1;       // likewise
  int experts = 0;
  for (const HfKey& k : row.keys) {
    const auto default_of = [&] { return json::parse(k.json, "the default of " + std::string(k.key)); };
    switch (k.field) {
      case HfField::DenseAndExpertFf: m.d_ff = m.expert_d_ff = f.integer(k.key); break;
      case HfField::DenseFf: m.d_ff = f.integer(k.key); break;
      case HfField::ExpertFf: m.expert_d_ff = f.integer(k.key); break;
      case HfField::SharedExpertFf:
        m.shared_expert_d_ff = f.integer(k.key);
        if (m.shared_expert_d_ff == 0)
          fail(f.where(k.key) + " is 0; a " + row.label + " without a shared expert is not supported (the HF layout " +
               "always has one)");
        break;
      case HfField::Experts: experts = f.integer(k.key); break;
      case HfField::Renormalize: m.renormalize = f.boolean(k.key, default_of().boolean); break;
      case HfField::MoeEvery:
        m.moe_every = f.integer(k.key, static_cast<int>(default_of().number));
        if (m.moe_every == 0) fail(f.where(k.key) + " must be at least 1");
        break;
      case HfField::DenseLayers: m.dense_layers = dense_layers(f, k.key, m.n_layers); break;
      case HfField::HeadDim: {
        const int hd = f.integer(k.key, k.json ? static_cast<int>(default_of().number) : 0);
        if (hd != 0 && (m.d_model % m.n_heads != 0 || hd != m.d_model / m.n_heads)) m.head_dim = hd;
        break;
      }
      case HfField::ClipQkv:
        if (f.get(k.key)) {
          m.clip_qkv = f.number(k.key, 0.0);
          if (!(m.clip_qkv > 0))
            fail(f.where(k.key) + " is " + json::dump(*f.get(k.key)) + "; it must be null (off) or positive");
        }
        break;
      case HfField::SlidingWindow: read_sliding_layers(f, k.key, m); break;
      case HfField::SwigluLimit: m.swiglu_limit = f.number(k.key, default_of().number); break;
      case HfField::SwigluAlpha: m.swiglu_alpha = f.number(k.key, default_of().number); break;
      case HfField::QkvBias: m.qkv_bias = f.boolean(k.key, default_of().boolean); break;
      case HfField::AttentionBias: m.qkv_bias = m.out_bias = f.boolean(k.key, default_of().boolean); break;
      case HfField::Layers:
      case HfField::Fixed:
      case HfField::Only: break;
    }
  }
  m.n_experts.assign(m.n_moe_layers(), experts);
  if (row.latent) latent_hf_to_model_config(hf, source, type, experts, m);
  // Every RoPE family reads rope_scaling (or transformers' newer rope_parameters): YaRN, or none; another rope
  // type is refused by name. The latent families read theirs with the rest of their attention.
  if (row.default_rope_is_yarn && !f.present("rope_scaling") && !f.get("rope_parameters")) {
    // A missing rope_scaling means the config class's YaRN (gpt-oss: factor 32 over 4096 positions, not truncated).
    m.rope_scaling.type = RopeScalingType::Yarn;
    m.rope_scaling.factor = 32.0;
    m.rope_scaling.beta_fast = 32.0;
    m.rope_scaling.beta_slow = 1.0;
    m.rope_scaling.truncate = false;
    m.rope_scaling.original_max_position_embeddings = 4096;
  } else if (!row.latent) {
    m.rope_scaling = hf_rope_scaling(hf, source);
  }
  hf_storage(hf, source, row);  // refuses a quantisation the import cannot decode, by name
  reject_unsupported(f, row, m, m.max_seq_len);

  // Our own validation (divisibility, ranges, top_k <= experts) on the converted config.
  try {
    return parse_model_config(model_config_to_json(m));
  } catch (const EngineError& e) {
    fail(source + ": the converted config is invalid: " + e.what() +
         " (hidden_size is model.d_model, num_hidden_layers model.n_layers, num_attention_heads model.n_heads, "
         "num_experts_per_tok model.top_k)");
  }
}

json::Value model_to_hf_config(const ModelConfig& m, HfType type, st::DType dtype) {
  const std::string name = hf_model_type_name(type);
  auto bad = [&](const std::string& field, const std::string& why) {
    fail("model." + field + ": " + why + "; the Hugging Face " + name +
         " layout cannot express it: change the model config or export as another model type");
  };
  const HfFamily& hf = hf_family(type);
  const ModelFeatures have = model_features(m);
  const FamilyFeatures& need = find_model_family(hf.family).features;
  // Latent rows check the attention and the router themselves (hf_latent.cpp).
  const bool routing_differs = !hf.latent && (have.router_scoring != need.router_scoring ||
                                              have.topk_selection != need.topk_selection);
  // attention_bias: the out-projection's bias is the config's choice, together with the q/k/v biases.
  const bool bias_key = has_key(hf, HfField::AttentionBias);
  const bool out_bias_differs = bias_key ? have.has_out_bias() != m.qkv_bias : have.has_out_bias() != need.has_out_bias();
  if (have.norm != need.norm || have.position != need.position || have.activation != need.activation ||
      routing_differs || have.linear_bias != need.linear_bias || (!hf.latent && have.attention == AttentionKind::Latent) ||
      (out_bias_differs && !bias_key) || have.has_ffn_bias() != need.has_ffn_bias() ||
      have.router_bias != need.router_bias || have.attention_sinks != need.attention_sinks)
    bad("arch", "\"" + m.family + "\" (" + norm_kind_name(have.norm) + ", " + position_kind_name(have.position) +
                    " positions, " + ffn_activation_name(have.activation) +
                    (have.linear_bias ? ", biases" : "") + ") has no counterpart; it needs the features of arch \"" +
                    hf.family + "\"");
  if (m.residual_mlp) bad("residual_mlp", "is true (PR-MoE residual MLP)");
  if (have.qk_norm != hf.qk_norm)
    bad("qk_norm", std::string("is \"") + qk_norm_name(have.qk_norm) + "\"; " + hf.label + " attention has q/k norm \"" +
                       qk_norm_name(hf.qk_norm) + "\"");
  if (!has_key(hf, HfField::SlidingWindow) && m.sliding_window > 0) bad("sliding_window", "is set");
  if (!has_key(hf, HfField::SwigluLimit) && have.activation == FfnActivation::SwigluClamped)
    bad("arch", "has a clamped SwiGLU");
  for (int e : m.n_experts)
    if (e != m.n_experts.front()) bad("n_experts", "varies per layer; the layout has one expert count for all layers");
  if (!has_key(hf, HfField::MoeEvery) && m.moe_every != 1)
    bad("moe_every", "is " + std::to_string(m.moe_every) + "; every layer must be an MoE layer");
  if (!has_key(hf, HfField::DenseLayers) && !hf.latent && !m.dense_layers.empty()) bad("dense_layers", "lists layers; every layer must be an MoE layer");
  if (!has_key(hf, HfField::HeadDim) && m.head_dim > 0 && m.head_dim * m.n_heads != m.d_model)
    bad("head_dim", "is " + std::to_string(m.head_dim) + "; the head size must be d_model / n_heads");
  if (!has_key(hf, HfField::ClipQkv) && m.clip_qkv > 0) bad("clip_qkv", "is set; q/k/v are never clipped");
  if (!hf.shared_expert && !hf.latent && m.shared_expert_d_ff != 0) bad("shared_expert_d_ff", "is not 0; there is no shared expert");
  if (m.selection_bias && !hf.names.selection_bias)
    bad("selection_bias", "is true; the router has no per-expert selection bias (e_score_correction_bias)");
  if (bias_key && out_bias_differs)
    bad("out_bias", std::string(have.has_out_bias() ? "is true" : "is false") + " but model.qkv_bias is " +
                        (m.qkv_bias ? "true" : "false") + "; " + hf.label +
                        "'s attention_bias puts biases on q/k/v and o together");
  if (hf.qkv_bias != m.qkv_bias && !has_key(hf, HfField::QkvBias) && !bias_key)
    bad("qkv_bias", m.qkv_bias ? "is true; the attention projections have no biases"
                               : std::string("is false; ") + hf.label + " attention always has q/k/v biases");
  if (hf.shared_expert && m.shared_expert_d_ff == 0)
    bad("shared_expert_d_ff", std::string("is 0; ") + hf.label + " always has a shared expert");
  if (hf.shared_expert && !m.shared_expert_gate)
    bad("shared_expert_gate", std::string("is false; ") + hf.label + " always gates its shared expert");
  if (!has_key(hf, HfField::Renormalize) && !hf.latent && !m.renormalize)
    bad("renormalize", std::string("is false; ") + hf.label + " always renormalises top-k");
  if (dtype != st::DType::F32 && dtype != st::DType::BF16 && dtype != st::DType::F16)
    fail(std::string("Hugging Face export: dtype ") + st::dtype_name(dtype) + " is not supported; use F32, BF16 or F16");

  using json::Value;
  Value o = Value::make_object();
  Value architectures = Value::make_array();
  architectures.push(Value::of(hf.architecture));
  o.set("architectures", architectures);
  o.set("model_type", Value::of(name));
  o.set("vocab_size", Value::of(m.vocab_size));
  o.set("hidden_size", Value::of(m.d_model));
  o.set("num_hidden_layers", Value::of(m.n_layers));
  o.set("num_attention_heads", Value::of(m.n_heads));
  o.set("num_key_value_heads", Value::of(m.n_kv_heads));
  o.set("hidden_act", Value::of("silu"));
  o.set("max_position_embeddings", Value::of(m.max_seq_len));
  o.set("initializer_range", Value::of(m.init_std));
  o.set("rms_norm_eps", Value::of(m.norm_eps));
  o.set("rope_theta", Value::of(m.rope_theta));
  o.set("rope_scaling", Value::null());
  o.set("attention_dropout", Value::of(0.0));
  o.set("tie_word_embeddings", Value::of(m.tie_embeddings));
  o.set("num_experts_per_tok", Value::of(m.top_k));
  o.set("router_aux_loss_coef", Value::of(m.aux_loss_coef));
  o.set("output_router_logits", Value::of(false));
  o.set("use_cache", Value::of(true));
  for (const HfKey& k : hf.keys) {
    switch (k.field) {
      case HfField::DenseAndExpertFf: o.set(k.key, Value::of(m.expert_d_ff)); break;
      case HfField::DenseFf: o.set(k.key, Value::of(m.d_ff)); break;
      case HfField::ExpertFf: o.set(k.key, Value::of(m.expert_d_ff)); break;
      case HfField::SharedExpertFf: o.set(k.key, Value::of(m.shared_expert_d_ff)); break;
      case HfField::Experts: o.set(k.key, Value::of(m.n_experts.front())); break;
      case HfField::Renormalize: o.set(k.key, Value::of(m.renormalize)); break;
      case HfField::MoeEvery: o.set(k.key, Value::of(m.moe_every)); break;
      case HfField::Layers: o.set(k.key, Value::of(m.n_layers)); break;
      case HfField::DenseLayers: {
        Value dense = Value::make_array();
        for (int l : m.dense_layers) dense.push(Value::of(l));
        o.set(k.key, dense);
        break;
      }
      case HfField::HeadDim: o.set(k.key, Value::of(m.head_size())); break;
      case HfField::ClipQkv: o.set(k.key, m.clip_qkv > 0 ? Value::of(m.clip_qkv) : Value::null()); break;

      case HfField::SlidingWindow: {
        o.set(k.key, m.sliding_window > 0 ? Value::of(m.sliding_window) : Value::null());
        Value types = Value::make_array();
        for (int l = 0; l < m.n_layers; ++l)
          types.push(Value::of(m.window_at(l) > 0 ? "sliding_attention" : "full_attention"));
        o.set("layer_types", types);
        break;
      }
      case HfField::SwigluLimit: o.set(k.key, Value::of(m.swiglu_limit)); break;
      case HfField::SwigluAlpha: o.set(k.key, Value::of(m.swiglu_alpha)); break;
      case HfField::QkvBias:
      case HfField::AttentionBias: o.set(k.key, Value::of(m.qkv_bias)); break;
      case HfField::Fixed:
      case HfField::Only: o.set(k.key, json::parse(k.json, k.key)); break;
    }
  }
  if (hf.latent) latent_model_to_hf_config(m, type, o);
  if (!hf.latent && m.rope_scaling.type == RopeScalingType::Yarn) o.set("rope_scaling", hf_rope_scaling_json(m.rope_scaling, false));
  o.set("torch_dtype", Value::of(dtype == st::DType::BF16 ? "bfloat16" : dtype == st::DType::F16 ? "float16" : "float32"));
  return o;
}

std::vector<TensorSource> hf_tensor_sources(const ModelConfig& m, const ParamLayout& layout, HfType type,
                                            HfExpertLayout expert_layout) {
  std::vector<TensorSource> out;
  auto param = [&](const std::string& ours) {
    const ParamTensor* p = layout.find(ours);
    if (!p) fail("Hugging Face mapping: the model has no tensor '" + ours + "'; the layout does not match its config");
    return p;
  };
  auto whole = [&](const std::string& ours, const std::string& hf) {
    const ParamTensor* p = param(ours);
    out.push_back({p, {{hf, p->shape, 0}}});
  };
  // Row blocks concatenated into one of our tensors (each block is contiguous in row-major storage).
  auto rows = [&](const std::string& ours, const std::vector<std::pair<std::string, int64_t>>& blocks) {
    const ParamTensor* p = param(ours);
    const int64_t cols = p->shape.size() == 2 ? p->shape[1] : 1;
    TensorSource s{p, {}};
    size_t offset = 0;
    for (const auto& [hf, n] : blocks) {
      std::vector<int64_t> shape = p->shape.size() == 2 ? std::vector<int64_t>{n, cols} : std::vector<int64_t>{n};
      s.parts.push_back({hf, shape, offset});
      offset += static_cast<size_t>(n * cols);
    }
    out.push_back(std::move(s));
  };
  auto ffn = [&](const std::string& ours, const std::string& gate, const std::string& up, const std::string& down,
                 int64_t F) {
    rows(ours + "gate_up.weight", {{gate, F}, {up, F}});
    whole(ours + "down.weight", down);
  };

  const HfFamily& hf = hf_family(type);
  const HfTensorNames& n = hf.names;
  const ModelFeatures features = model_features(m);
  const int64_t HS = m.head_size(), q = m.n_heads * HS, kv = m.n_kv_heads * HS;
  // An FFN under `x`: our gate_up is HF's gate rows then up rows; down is whole.
  auto hf_ffn = [&](const std::string& ours, const std::string& x, const char* gate, const char* up, const char* down,
                    int64_t F) {
    ffn(ours, x + gate + ".weight", x + up + ".weight", x + down + ".weight", F);
  };
  whole("wte", n.embed);
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string o = "layers." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    const std::string a = h + n.attn;
    whole(o + "norm1.weight", h + n.input_norm);
    if (hf_family(type).latent) latent_attention_sources(layout, m, l, a, out);
    else rows(o + "attn.qkv.weight", {{a + "q_proj.weight", q}, {a + "k_proj.weight", kv}, {a + "v_proj.weight", kv}});
    if (m.qkv_bias)
      rows(o + "attn.qkv.bias", {{a + "q_proj.bias", q}, {a + "k_proj.bias", kv}, {a + "v_proj.bias", kv}});
    if (m.qk_norm != QkNorm::None) {
      whole(o + "attn.q_norm.weight", a + "q_norm.weight");
      whole(o + "attn.k_norm.weight", a + "k_norm.weight");
    }
    whole(o + "attn.out.weight", a + "o_proj.weight");
    if (features.has_out_bias()) whole(o + "attn.out.bias", a + "o_proj.bias");
    if (features.attention_sinks) whole(o + "attn.sinks", a + "sinks");
    whole(o + "norm2.weight", h + n.post_norm);
    if (!m.is_moe_layer(l)) {
      hf_ffn(o + "mlp.", h + n.mlp, "gate_proj", "up_proj", "down_proj", m.d_ff);
      continue;
    }
    const std::string moe =
        h + (expert_layout == HfExpertLayout::Fused && n.fused_moe ? n.fused_moe : n.moe);
    whole(o + "moe.router.weight", moe + n.router + ".weight");
    if (features.router_bias) whole(o + "moe.router.bias", moe + n.router + ".bias");
    if (m.selection_bias && n.selection_bias) whole(o + "moe.router.selection_bias", h + n.moe + n.selection_bias);
    hf_expert_sources(out, m, layout, hf, l, moe, expert_layout);
    if (m.shared_expert_d_ff > 0 && n.shared)
      hf_ffn(o + "moe.shared.", h + n.shared, "gate_proj", "up_proj", "down_proj", m.shared_expert_d_ff);
    if (m.shared_expert_gate && n.shared_gate) whole(o + "moe.shared_gate.weight", h + n.shared_gate);
  }
  whole("norm_f.weight", n.final_norm);
  if (!m.tie_embeddings) whole("lm_head.weight", n.lm_head);

  std::set<const ParamTensor*> covered;
  for (const TensorSource& s : out) {
    covered.insert(s.param);
    for (const StoredPart& p : s.parts) covered.insert(p.experts.begin(), p.experts.end());
  }
  // LoRA adapters have no place in the base layout: an export merges them (export_hf), an import leaves them be.
  for (const ParamTensor& t : layout.tensors())
    if (!covered.count(&t) && !t.adapter)
      fail("Hugging Face mapping: model tensor '" + t.name + "' has no counterpart in the " +
           hf_model_type_name(type) + " layout; the model config cannot be expressed in it");
  return out;
}

void check_hf_tensors_supported(const st::TensorSet& tensors, HfType type) {
  const HfFamily& hf = hf_family(type);
  for (const auto& [name, entry] : tensors.entries()) {
    for (const std::string suffix : hf.unsupported_tensors)
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        fail(entry.reader->path() + ": tensor '" + name + "': " + hf.unsupported_why +
             ", so this checkpoint cannot be imported");
  }
}

namespace {

// A model tensor's values as the Hugging Face layout holds them, W + scale·B·A for each of its LoRA adapters. The
// last one is kept: a tensor stored as several parts (q, k and v of qkv) is merged once.
class MergedTensors {
 public:
  MergedTensors(const ParamLayout& layout, TensorValues& values) : layout_(layout), values_(values) {}

  const float* get(const ParamTensor& t) {
    if (&t == last_) return merged_.data();
    merged_.resize(t.numel);
    values_.read(t, merged_.data());
    for (const LoraAdapter& a : layout_.adapters()) {
      if (&layout_.tensors()[a.base] != &t) continue;
      const ParamTensor &A = layout_.tensors()[a.a], &B = layout_.tensors()[a.b];
      a_.resize(A.numel);
      b_.resize(B.numel);
      values_.read(A, a_.data());
      values_.read(B, b_.data());
      merge_lora_adapter(a, layout_.lora_scale(), layout_.lora_rank(), a_.data(), b_.data(), merged_.data());
    }
    last_ = &t;
    return merged_.data();
  }

 private:
  const ParamLayout& layout_;
  TensorValues& values_;
  const ParamTensor* last_ = nullptr;
  std::vector<float> merged_, a_, b_;
};

size_t numel_of(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

void export_hf(const std::string& dir, Model& model, const std::string& model_type, st::DType dtype,
               const HfExpertLayout* expert_layout, ExpertStateHome* experts) {
  ParamValues values(model, experts);
  export_hf(dir, model.config(), model.layout(), values, model_type, dtype, expert_layout);
}

void export_hf(const std::string& dir, const ModelConfig& m, const ParamLayout& params, TensorValues& source,
               const std::string& model_type, st::DType dtype, const HfExpertLayout* expert_layout) {
  const HfType type = parse_hf_model_type(model_type);
  const json::Value config = model_to_hf_config(m, type, dtype);
  const HfExpertLayout layout = expert_layout ? *expert_layout : hf_family(type).default_layout;
  const std::vector<TensorSource> sources = hf_tensor_sources(m, params, type, layout);
  check_export_target(dir);

  MergedTensors merged(params, source);
  // The tensor the writer is at (it asks for one at a time), in fp32 and in the stored dtype.
  std::vector<float> values;
  std::vector<uint16_t> half;
  auto stored = [&]() -> const void* {
    if (dtype == st::DType::F32) return values.data();
    half.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      half[i] = dtype == st::DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    return half.data();
  };
  st::Writer w;
  w.set_metadata("format", "pt");  // transformers refuses safetensors files without it
  for (const TensorSource& s : sources)
    for (const StoredPart& p : s.parts) {
      if (p.experts.empty()) {
        w.add_streamed(p.name, dtype, p.shape, [&, s = &s, p = &p] {
          values.resize(numel_of(p->shape));
          const float* t = merged.get(*s->param) + p->offset;
          std::copy(t, t + values.size(), values.begin());
          return stored();
        });
        continue;
      }
      // A fused tensor: written an expert's slab at a time, each from that expert's tensor, so the export never
      // holds a whole layer's experts.
      w.add_streamed_pieces(p.name, dtype, p.shape, p.experts.size(), [&, p = &p](size_t e) {
        values.resize(numel_of(p->shape) / p->experts.size());
        gather_fused_expert(*p, static_cast<int64_t>(e), merged.get(*p->experts[e]), p->experts[e]->offset,
                            values.data());
        return stored();
      });
    }
  fs::write_dir_atomic(dir, [&](const std::string& tmp) {
    fs::write_file_atomic(fs::join(tmp, "config.json"), json::dump(config, 2) + "\n");
    w.write(fs::join(tmp, "model.safetensors"));
  });
}

}  // namespace moe
