#include "model/config.h"

#include <cmath>
#include <set>

#include "backend/registry.h"
#include "core/error.h"
#include "model/features.h"

namespace moe {
namespace {

// Reads the members of one JSON object, checking type and range, and remembers which names were
// used so that unknown (misspelt) fields can be rejected by name.
class FieldReader {
 public:
  FieldReader(const json::Value& obj, std::string section) : obj_(obj), section_(std::move(section)) {
    check(obj.is_object(), section_ + ": must be a JSON object");
  }

  const json::Value* get(const std::string& key, json::Type type) {
    used_.insert(key);
    const json::Value* v = obj_.find(key);
    if (!v) return nullptr;
    if (v->type != type)
      fail(field(key) + ": must be " + json::type_name(type) + ", got " + json::type_name(v->type));
    return v;
  }

  int integer(const std::string& key, int def, int min, int max) {
    const json::Value* v = get(key, json::Type::Number);
    if (!v) return def;
    return checked_int(key, v->number, min, max);
  }

  double number(const std::string& key, double def, double min, double max) {
    const json::Value* v = get(key, json::Type::Number);
    if (!v) return def;
    if (v->number < min || v->number > max)
      fail(field(key) + ": " + json::dump(*v) + " is out of range [" + json::dump(json::Value::of(min)) + ", " +
           json::dump(json::Value::of(max)) + "]");
    return v->number;
  }

  bool boolean(const std::string& key, bool def) {
    const json::Value* v = get(key, json::Type::Bool);
    return v ? v->boolean : def;
  }

  // A seed: a whole number a double holds exactly.
  uint64_t seed(const std::string& key, uint64_t def) {
    const double d = number(key, static_cast<double>(def), 0.0, 9007199254740991.0);
    if (d != std::floor(d)) fail(field(key) + ": must be a whole number");
    return static_cast<uint64_t>(d);
  }

  const json::Value* raw(const std::string& key) {
    used_.insert(key);
    return obj_.find(key);
  }

  int checked_int(const std::string& key, double d, int min, int max) {
    if (d != std::floor(d)) fail(field(key) + ": must be a whole number, got " + json::dump(json::Value::of(d)));
    if (d < min || d > max)
      fail(field(key) + ": " + json::dump(json::Value::of(d)) + " is out of range [" + std::to_string(min) + ", " +
           std::to_string(max) + "]");
    return static_cast<int>(d);
  }

  void reject_unknown() {
    for (const auto& [k, v] : obj_.object)
      if (!used_.count(k)) fail(field(k) + ": unknown field (check the spelling; see docs/model.md for the fields)");
  }

  std::string field(const std::string& key) const { return section_ + "." + key; }

 private:
  const json::Value& obj_;
  std::string section_;
  std::set<std::string> used_;
};

constexpr int kBig = 1 << 24;

}  // namespace

bool ModelConfig::is_moe_layer(int l) const {
  if ((l + 1) % moe_every != 0) return false;
  for (int d : dense_layers)
    if (d == l) return false;
  return true;
}

int ModelConfig::moe_index(int l) const {
  int index = 0;
  for (int i = 0; i < l; ++i) index += is_moe_layer(i);
  return index;
}

int ModelConfig::n_moe_layers() const { return moe_index(n_layers); }

int ModelConfig::window_at(int l) const {
  for (int s : sliding_layers)
    if (s == l) return sliding_window;
  return 0;
}

const char* compute_dtype_name(ComputeDtype d) { return d == ComputeDtype::F32 ? "fp32" : "bf16"; }

const char* nonfinite_policy_name(NonFinitePolicy p) {
  return p == NonFinitePolicy::Pause ? "pause" : p == NonFinitePolicy::Stop ? "stop" : "skip";
}

ModelConfig parse_model_config(const json::Value& obj) {
  FieldReader r(obj, "model");
  ModelConfig m;
  const json::Value* arch = r.get("arch", json::Type::String);
  check(arch != nullptr, "model.arch: required (one of " + model_family_names() + ")");
  const ModelFamily& family = find_model_family(arch->string);
  m.family = family.name;

  m.vocab_size = r.integer("vocab_size", m.vocab_size, 2, kBig);
  m.d_model = r.integer("d_model", m.d_model, 2, 1 << 16);
  m.n_layers = r.integer("n_layers", m.n_layers, 1, 1024);
  m.n_heads = r.integer("n_heads", m.n_heads, 1, 1024);
  m.n_kv_heads = r.integer("n_kv_heads", m.n_heads, 1, 1024);
  m.max_seq_len = r.integer("max_seq_len", m.max_seq_len, 1, 1 << 20);
  m.d_ff = r.integer("d_ff", m.d_ff, 1, 1 << 20);
  m.expert_d_ff = r.integer("expert_d_ff", m.d_ff, 1, 1 << 20);
  m.top_k = r.integer("top_k", m.top_k, 1, 64);
  m.moe_every = r.integer("moe_every", m.moe_every, 1, 1024);
  m.renormalize = r.boolean("renormalize", m.renormalize);
  m.routed_scaling = r.number("routed_scaling_factor", m.routed_scaling, 1e-6, 1e6);
  m.selection_bias = r.boolean("selection_bias", m.selection_bias);
  if (const json::Value* hd = r.raw("head_dim"); hd && !hd->is_null()) {
    if (!hd->is_number()) fail("model.head_dim: must be null (d_model / n_heads) or a positive even number");
    m.head_dim = r.checked_int("head_dim", hd->number, 1, 1 << 14);
  }
  if (const json::Value* dl = r.raw("dense_layers"); dl && !dl->is_null()) {
    if (!dl->is_array()) fail("model.dense_layers: must be a list of layer indexes");
    for (size_t i = 0; i < dl->array.size(); ++i) {
      const std::string key = "dense_layers[" + std::to_string(i) + "]";
      if (!dl->array[i].is_number()) fail("model." + key + ": must be a layer index");
      const int l = r.checked_int(key, dl->array[i].number, 0, m.n_layers - 1);
      if (!m.dense_layers.empty() && l <= m.dense_layers.back())
        fail("model." + key + ": the list must be increasing (each layer once)");
      m.dense_layers.push_back(l);
    }
  }
  m.sliding_window = r.integer("sliding_window", 0, 0, 1 << 20);
  if (const json::Value* sl = r.raw("sliding_layers"); sl && !sl->is_null()) {
    if (!sl->is_array()) fail("model.sliding_layers: must be a list of layer indexes");
    for (size_t i = 0; i < sl->array.size(); ++i) {
      const std::string key = "sliding_layers[" + std::to_string(i) + "]";
      if (!sl->array[i].is_number()) fail("model." + key + ": must be a layer index");
      const int l = r.checked_int(key, sl->array[i].number, 0, m.n_layers - 1);
      if (!m.sliding_layers.empty() && l <= m.sliding_layers.back())
        fail("model." + key + ": the list must be increasing (each layer once)");
      m.sliding_layers.push_back(l);
    }
  }
  if ((m.sliding_window > 0) != !m.sliding_layers.empty())
    fail(m.sliding_window > 0 ? "model.sliding_layers: name the layers that use sliding_window (a non-empty list)"
                              : "model.sliding_window: the sliding_layers need a window (a positive number of keys)");
  m.swiglu_alpha = r.number("swiglu_alpha", m.swiglu_alpha, 1e-6, 1e6);
  m.swiglu_limit = r.number("swiglu_limit", m.swiglu_limit, 1e-6, 1e6);
  m.shared_expert_d_ff = r.integer("shared_expert_d_ff", 0, 0, 1 << 20);
  m.shared_expert_gate = r.boolean("shared_expert_gate", false);
  m.residual_mlp = r.boolean("residual_mlp", false);
  m.aux_loss_coef = r.number("aux_loss_coef", m.aux_loss_coef, 0.0, 1e3);
  m.z_loss_coef = r.number("z_loss_coef", m.z_loss_coef, 0.0, 1e3);
  m.rope_theta = r.number("rope_theta", m.rope_theta, 1.0, 1e12);
  m.norm_eps = r.number("norm_eps", m.norm_eps, 1e-12, 1.0);
  m.tie_embeddings = r.boolean("tie_embeddings", family.features.tie_embeddings);
  m.qkv_bias = r.boolean("qkv_bias", family.features.qkv_bias);
  m.out_bias = r.boolean("out_bias", false);
  m.init_std = r.number("init_std", m.init_std, 0.0, 10.0);
  m.qk_norm = family.features.qk_norm;
  if (const json::Value* qn = r.get("qk_norm", json::Type::String)) {
    if (qn->string == "none") m.qk_norm = QkNorm::None;
    else if (qn->string == "projection") m.qk_norm = QkNorm::Projection;
    else if (qn->string == "head") m.qk_norm = QkNorm::Head;
    else fail("model.qk_norm: \"" + qn->string + "\" is not supported; use \"none\", \"projection\" or \"head\"");
  }
  if (const json::Value* c = r.raw("clip_qkv"); c && !c->is_null()) {
    if (!c->is_number() || !(c->number > 0.0)) fail("model.clip_qkv: must be null (off) or a positive number");
    m.clip_qkv = c->number;
  }
  if (const json::Value* v = r.raw("latent_attention")) m.latent = parse_latent_attention(*v);
  if (const json::Value* v = r.raw("rope_scaling")) m.rope_scaling = parse_rope_scaling(*v);
  if (const json::Value* v = r.raw("router")) m.router = parse_router_config(*v);

  if (const json::Value* cf = r.raw("capacity_factor"); cf && !cf->is_null()) {
    if (!cf->is_number() || cf->number <= 0.0)
      fail("model.capacity_factor: must be null (dropless) or a positive number");
    m.capacity_factor = cf->number;
  }

  if (m.head_dim == 0 && m.d_model % m.n_heads != 0)
    fail("model.n_heads: " + std::to_string(m.n_heads) + " does not divide d_model " + std::to_string(m.d_model));
  if (m.n_heads % m.n_kv_heads != 0)
    fail("model.n_kv_heads: " + std::to_string(m.n_kv_heads) + " does not divide n_heads " +
         std::to_string(m.n_heads));
  check_model_features(m);
  if (m.n_moe_layers() == 0)
    fail(std::string(m.dense_layers.empty() ? "model.moe_every: " : "model.dense_layers: ") +
         "leaves no MoE layer among " + std::to_string(m.n_layers) + " layers");

  const json::Value* ne = r.raw("n_experts");
  if (!ne) {
    m.n_experts.assign(m.n_moe_layers(), 8);
  } else if (ne->is_number()) {
    m.n_experts.assign(m.n_moe_layers(), r.checked_int("n_experts", ne->number, 1, 1 << 16));
  } else if (ne->is_array()) {
    if (static_cast<int>(ne->array.size()) != m.n_moe_layers())
      fail("model.n_experts: the list has " + std::to_string(ne->array.size()) + " entries but the model has " +
           std::to_string(m.n_moe_layers()) + " MoE layers (one entry per MoE layer)");
    for (size_t i = 0; i < ne->array.size(); ++i) {
      const json::Value& e = ne->array[i];
      std::string key = "n_experts[" + std::to_string(i) + "]";
      if (!e.is_number()) fail("model." + key + ": must be a number");
      m.n_experts.push_back(r.checked_int(key, e.number, 1, 1 << 16));
    }
  } else {
    fail("model.n_experts: must be a number or a list with one number per MoE layer");
  }
  for (size_t i = 0; i < m.n_experts.size(); ++i)
    if (m.top_k > m.n_experts[i])
      fail("model.top_k: " + std::to_string(m.top_k) + " exceeds the " + std::to_string(m.n_experts[i]) +
           " experts of MoE layer " + std::to_string(i));
  check_router_groups(m);
  r.reject_unknown();
  return m;
}

TrainConfig parse_train_config(const json::Value& obj) {
  FieldReader r(obj, "train");
  TrainConfig t;
  t.batch_size = r.integer("batch_size", t.batch_size, 1, 1 << 16);
  t.seq_len = r.integer("seq_len", t.seq_len, 1, 1 << 20);
  t.steps = r.integer("steps", t.steps, 0, 1 << 30);
  t.grad_accum = r.integer("grad_accum", t.grad_accum, 1, 1 << 16);
  t.lr = r.number("lr", t.lr, 0.0, 10.0);
  t.min_lr = r.number("min_lr", t.lr * 0.1, 0.0, 10.0);
  t.warmup_steps = r.integer("warmup_steps", t.warmup_steps, 0, 1 << 30);
  t.weight_decay = r.number("weight_decay", t.weight_decay, 0.0, 10.0);
  t.beta1 = r.number("beta1", t.beta1, 0.0, 0.999999);
  t.beta2 = r.number("beta2", t.beta2, 0.0, 0.999999999);
  t.eps = r.number("eps", t.eps, 0.0, 1.0);
  // AdamW divides by sqrt(v) + eps: with 0, a parameter whose gradient is zero becomes 0/0 = NaN.
  if (t.eps <= 0.0) fail("train.eps: must be > 0 (AdamW divides by sqrt(v) + eps; 0 makes NaN of any zero gradient)");
  t.grad_clip = r.number("grad_clip", t.grad_clip, 0.0, 1e9);
  t.seed = r.seed("seed", t.seed);
  t.threads = r.integer("threads", t.threads, 1, 1024);
  t.checkpoint_every = r.integer("checkpoint_every", t.checkpoint_every, 0, 1 << 30);
  t.keep_checkpoints = r.integer("keep_checkpoints", t.keep_checkpoints, 0, 1 << 30);
  if (const json::Value* dtype = r.get("compute_dtype", json::Type::String)) {
    if (dtype->string == "fp32") t.compute_dtype = ComputeDtype::F32;
    else if (dtype->string == "bf16") t.compute_dtype = ComputeDtype::BF16;
    else fail("train.compute_dtype: \"" + dtype->string + "\" is not supported; use \"fp32\" or \"bf16\"");
  }
  t.pack_frozen_bf16 = r.boolean("pack_frozen_bf16", t.pack_frozen_bf16);
  if (const json::Value* policy = r.get("on_nonfinite", json::Type::String)) {
    if (policy->string == "pause") t.on_nonfinite = NonFinitePolicy::Pause;
    else if (policy->string == "stop") t.on_nonfinite = NonFinitePolicy::Stop;
    else if (policy->string == "skip") t.on_nonfinite = NonFinitePolicy::Skip;
    else fail("train.on_nonfinite: \"" + policy->string + "\" is not supported; use \"pause\", \"stop\" or \"skip\"");
  }
  if (const json::Value* backend = r.get("backend", json::Type::String)) {
    check_backend_name("train.backend", backend->string);
    t.backend = backend->string;
  }
  t.allow_unvalidated_backend = r.boolean("allow_unvalidated_backend", t.allow_unvalidated_backend);
  if (const json::Value* gemm = r.get("gemm", json::Type::String)) {
    check_gemm_choice("train.gemm", gemm->string);
    if (gemm->string == "cublas" && t.backend != "cuda")
      fail("train.gemm: \"cublas\" needs train.backend \"cuda\" (the " + t.backend +
           " backend has only its own GEMMs)");
    t.gemm = gemm->string;
  }
  t.balance_bias_rate = r.number("balance_bias_rate", t.balance_bias_rate, 0.0, 1.0);
  t.eval_every = r.integer("eval_every", t.eval_every, 0, 1 << 30);
  t.eval_batches = r.integer("eval_batches", t.eval_batches, 1, 1 << 16);
  r.reject_unknown();
  if (t.min_lr > t.lr) fail("train.min_lr: must not exceed train.lr");
  return t;
}

RoutingSkew parse_routing_skew(const json::Value& obj) {
  FieldReader r(obj, "routing_skew");
  RoutingSkew k;
  const json::Value* dist = r.get("distribution", json::Type::String);
  if (!dist) fail("routing_skew.distribution: required (\"uniform\", \"zipf\" or \"hot\")");
  if (dist->string == "none") k.distribution = SkewDistribution::None;
  else if (dist->string == "uniform") k.distribution = SkewDistribution::Uniform;
  else if (dist->string == "zipf") k.distribution = SkewDistribution::Zipf;
  else if (dist->string == "hot") k.distribution = SkewDistribution::Hot;
  else fail("routing_skew.distribution: \"" + dist->string + "\" is not supported; use \"none\", \"uniform\", \"zipf\" or \"hot\"");
  k.zipf_s = r.number("zipf_s", k.zipf_s, 0.0, 10.0);
  k.hot_fraction = r.number("hot_fraction", k.hot_fraction, 0.0, 1.0);
  k.seed = r.seed("seed", k.seed);
  r.reject_unknown();
  return k;
}


const char* skew_distribution_name(SkewDistribution d) {
  return d == SkewDistribution::Uniform ? "uniform" : d == SkewDistribution::Zipf ? "zipf" : d == SkewDistribution::Hot ? "hot" : "none";
}

const char* offload_mode_name(OffloadMode m) {
  return m == OffloadMode::None ? "none" : m == OffloadMode::Host ? "host" : "ssd";
}

const char* expert_optimizer_name(ExpertOptimizer o) {
  return o == ExpertOptimizer::Expert ? "expert" : o == ExpertOptimizer::Layer ? "layer" : "delayed";
}

const char* cache_policy_name(CachePolicy p) {
  return p == CachePolicy::Lru ? "lru" : p == CachePolicy::Lfu ? "lfu" : "next-use";
}

const char* pin_policy_name(PinPolicy p) {
  return p == PinPolicy::Previous ? "previous" : p == PinPolicy::Ema ? "ema" : "none";
}

namespace {

int64_t optional_bytes(FieldReader& r, const std::string& key) {
  const json::Value* v = r.raw(key);
  if (!v || v->is_null()) return 0;
  if (v->type != json::Type::Number || v->number != std::floor(v->number) || v->number < 1 ||
      v->number > 9007199254740991.0)
    fail(r.field(key) + ": must be a positive whole number of bytes or null");
  return static_cast<int64_t>(v->number);
}

int optional_count(FieldReader& r, const std::string& key) {
  const json::Value* v = r.raw(key);
  if (!v || v->is_null()) return 0;
  if (v->type != json::Type::Number) fail(r.field(key) + ": must be a number or null");
  return r.checked_int(key, v->number, 1, kBig);
}

}  // namespace

PlacementConfig parse_placement_config(const json::Value& obj, DeviceGroupConfig* devices) {
  FieldReader r(obj, "placement");
  PlacementConfig p;
  p.devices = r.integer("devices", p.devices, 1, 1024);
  if (const json::Value* policy = r.get("policy", json::Type::String)) {
    if (policy->string == "static") p.policy = PlacementPolicy::Static;
    else if (policy->string == "greedy") p.policy = PlacementPolicy::Greedy;
    else if (policy->string == "least-loaded") p.policy = PlacementPolicy::LeastLoaded;
    else fail("placement.policy: \"" + policy->string + "\" is not supported; use \"static\", \"greedy\" or \"least-loaded\"");
  }
  p.lambda = r.number("lambda", p.lambda, 1.0, 10.0);
  p.alpha = r.number("alpha", p.alpha, 1.0, 10.0);
  p.min_tokens = r.integer("min_tokens", p.min_tokens, 1, kBig);
  p.greedy_split = r.boolean("greedy_split", p.greedy_split);
  DeviceGroupConfig group;
  group.budget_bytes = optional_bytes(r, "device_budget_bytes");
  if (const json::Value* t = r.raw("threads_per_device"); t && !t->is_null()) {
    if (t->type != json::Type::Number) fail("placement.threads_per_device: must be a whole number in [1, 256] or null");
    group.threads = r.checked_int("threads_per_device", t->number, 1, 256);
  }
  if (devices) *devices = group;
  r.reject_unknown();
  return p;
}

PipelineConfig parse_pipeline_config(const json::Value& obj) {
  FieldReader r(obj, "pipeline");
  PipelineConfig p;
  if (const json::Value* n = r.raw("partitions")) {
    if (n->type == json::Type::String && n->string == "auto") p.partitions = 0;
    else if (n->type == json::Type::Number) p.partitions = r.checked_int("partitions", n->number, 1, 64);
    else fail("pipeline.partitions: must be a whole number in [1, 64] or \"auto\"");
  }
  if (const json::Value* c = r.get("candidates", json::Type::Array)) {
    check(!c->array.empty(), "pipeline.candidates: must list at least one partition count");
    p.candidates.clear();
    for (const json::Value& v : c->array) {
      if (v.type != json::Type::Number) fail("pipeline.candidates: every entry must be a whole number in [1, 64]");
      p.candidates.push_back(r.checked_int("candidates", v.number, 1, 64));
    }
  }
  if (const json::Value* m = r.get("memory_reuse", json::Type::String)) {
    const std::string& s = m->string;
    if (s == "off") p.memory_reuse = ReuseStrategy::None;
    else if (s == "auto") p.reuse_auto = true;
    else if (s == "S1") p.memory_reuse = ReuseStrategy::S1;
    else if (s == "S2") p.memory_reuse = ReuseStrategy::S2;
    else if (s == "S3") p.memory_reuse = ReuseStrategy::S3;
    else if (s == "S4") p.memory_reuse = ReuseStrategy::S4;
    else fail("pipeline.memory_reuse: \"" + s + "\" is not supported; use \"off\", \"auto\", \"S1\", \"S2\", \"S3\" or \"S4\"");
  }
  r.reject_unknown();
  return p;
}

OffloadConfig parse_offload_config(const json::Value& obj) {
  FieldReader r(obj, "offload");
  OffloadConfig o;
  if (const json::Value* mode = r.get("mode", json::Type::String)) {
    if (mode->string == "none") o.mode = OffloadMode::None;
    else if (mode->string == "host") o.mode = OffloadMode::Host;
    else if (mode->string == "ssd") o.mode = OffloadMode::Ssd;
    else fail("offload.mode: \"" + mode->string + "\" is not supported; use \"none\", \"host\" or \"ssd\"");
  }
  o.device_budget_bytes = optional_bytes(r, "device_budget_bytes");
  o.expert_slots = optional_count(r, "expert_slots");
  o.lookahead = r.integer("lookahead", o.lookahead, 0, 64);
  o.pin_fraction = r.number("pin_fraction", o.pin_fraction, 0.0, 1.0);
  if (const json::Value* policy = r.get("pin_policy", json::Type::String)) {
    if (policy->string == "previous") o.pin_policy = PinPolicy::Previous;
    else if (policy->string == "ema") o.pin_policy = PinPolicy::Ema;
    else if (policy->string == "none") o.pin_policy = PinPolicy::None;
    else fail("offload.pin_policy: \"" + policy->string + "\" is not supported; use \"previous\", \"ema\" or \"none\"");
  }
  if (const json::Value* opt = r.get("optimizer", json::Type::String)) {
    if (opt->string == "expert") o.optimizer = ExpertOptimizer::Expert;
    else if (opt->string == "layer") o.optimizer = ExpertOptimizer::Layer;
    else if (opt->string == "delayed") o.optimizer = ExpertOptimizer::Delayed;
    else fail("offload.optimizer: \"" + opt->string + "\" is not supported; use \"expert\", \"layer\" or \"delayed\"");
  }
  o.optimizer_overlap = r.boolean("optimizer_overlap", o.optimizer_overlap);
  o.host_budget_bytes = optional_bytes(r, "host_budget_bytes");
  if (const json::Value* policy = r.get("cache_policy", json::Type::String)) {
    if (policy->string == "lru") o.cache_policy = CachePolicy::Lru;
    else if (policy->string == "lfu") o.cache_policy = CachePolicy::Lfu;
    else if (policy->string == "next-use") o.cache_policy = CachePolicy::NextUse;
    else fail("offload.cache_policy: \"" + policy->string + "\" is not supported; use \"lru\", \"lfu\" or \"next-use\"");
  }
  o.cache_experts = optional_count(r, "cache_experts");
  o.lfu_threshold = r.integer("lfu_threshold", o.lfu_threshold, 1, 1000000);
  o.lfu_decay = r.number("lfu_decay", o.lfu_decay, 1e-9, 1.0);
  o.lfu_decay_every = r.integer("lfu_decay_every", o.lfu_decay_every, 1, kBig);
  o.prefetch = r.boolean("prefetch", o.prefetch);
  if (const json::Value* stream = r.get("copy_stream", json::Type::String)) {
    if (stream->string == "auto") o.copy_stream = CopyStream::Auto;
    else if (stream->string == "worker") o.copy_stream = CopyStream::Worker;
    else if (stream->string == "inline") o.copy_stream = CopyStream::Inline;
    else if (stream->string == "mapped") o.copy_stream = CopyStream::Mapped;
    else fail("offload.copy_stream: \"" + stream->string +
              "\" is not supported; use \"auto\", \"worker\", \"inline\" or \"mapped\"");
  }
  if (const json::Value* dir = r.raw("ssd_dir"); dir && !dir->is_null()) {
    if (dir->type != json::Type::String || dir->string.empty())
      fail("offload.ssd_dir: must be a directory path or null");
    o.ssd_dir = dir->string;
  }
  r.reject_unknown();
  if (o.mode != OffloadMode::None && o.device_budget_bytes == 0 && o.expert_slots == 0)
    fail("offload.expert_slots: " + std::string(offload_mode_name(o.mode)) +
         " offload needs expert_slots or device_budget_bytes (both are null)");
  if (o.mode == OffloadMode::Ssd && o.host_budget_bytes == 0 && o.cache_experts == 0)
    fail("offload.cache_experts: ssd offload needs cache_experts or host_budget_bytes (both are null)");
  if (o.mode == OffloadMode::Ssd && o.optimizer == ExpertOptimizer::Delayed)
    fail("offload.optimizer: \"delayed\" updates are host-tier only; use mode \"host\" or optimizer \"expert\"");
  return o;
}

namespace {

// What a fine-tune cannot run with yet, refused by name rather than run approximately.
void check_finetune_supported(const EngineConfig& c) {
  if (!c.finetune.enabled) return;
  if (c.placement.devices > 1 || c.pipeline.engaged())
    fail("finetune: experts on several devices or pipelined (placement.devices > 1, pipeline) with a finetune "
         "section are not supported yet; use one device and drop the pipeline section");
}

}  // namespace

EngineConfig parse_config(const json::Value& root) {
  check(root.is_object(), "config: must be a JSON object with \"model\" and optional \"train\" and \"offload\"");
  EngineConfig c;
  for (const auto& [k, v] : root.object)
    if (k != "model" && k != "train" && k != "offload" && k != "routing_skew" && k != "placement" && k != "pipeline" &&
        k != "finetune")
      fail(k + ": unknown top-level field (expected \"model\", \"train\", \"offload\", \"routing_skew\", "
               "\"placement\", \"pipeline\" and \"finetune\")");
  const json::Value* model = root.find("model");
  check(model != nullptr, "model: required section is missing");
  c.model = parse_model_config(*model);
  if (const json::Value* train = root.find("train")) c.train = parse_train_config(*train);
  if (const json::Value* offload = root.find("offload")) c.offload = parse_offload_config(*offload);
  if (const json::Value* skew = root.find("routing_skew"); skew && !skew->is_null())
    c.train.routing_skew = parse_routing_skew(*skew);
  if (const json::Value* placement = root.find("placement"); placement && !placement->is_null())
    c.placement = parse_placement_config(*placement, &c.device_group);
  if (const json::Value* pipeline = root.find("pipeline"); pipeline && !pipeline->is_null())
    c.pipeline = parse_pipeline_config(*pipeline);
  if (const json::Value* finetune = root.find("finetune")) {
    c.finetune = parse_finetune_config(*finetune);
    validate_finetune_config(c.finetune, c.model);
    check_finetune_supported(c);
  }
  if (c.offload.mode != OffloadMode::None && (c.placement.devices > 1 || c.pipeline.engaged()))
    fail("placement.devices: experts run on several devices or pipelined only without offload for now; set "
         "offload.mode to \"none\", or placement.devices to 1 and drop the pipeline section");
  // Offloaded experts start their updates as their gradients arrive, before the step's norm is known.
  if (c.offload.mode != OffloadMode::None && c.train.on_nonfinite == NonFinitePolicy::Skip)
    fail("train.on_nonfinite: \"skip\" needs resident experts (offload.mode \"none\"): offloaded experts are "
         "updated before the step's gradient norm is known; use \"pause\" or \"stop\"");
  // An evaluation forward outside the step would run through the offload scheduler's per-step plan.
  if (c.offload.mode != OffloadMode::None && c.train.eval_every > 0)
    fail("train.eval_every: evaluation runs with resident experts only for now (offload.mode \"none\"); set it to 0");
  // The rule moves a parameter the model must have; turning the tensor on silently would change the model's
  // tensors (and its checkpoints) behind the user's back.
  if (c.train.balance_bias_rate > 0 && !c.model.selection_bias)
    fail("train.balance_bias_rate: needs model.selection_bias: true (the per-expert bias it moves)");
  if (c.train.seq_len > c.model.max_seq_len)
    fail("train.seq_len: " + std::to_string(c.train.seq_len) + " exceeds model.max_seq_len " +
         std::to_string(c.model.max_seq_len));
  return c;
}

EngineConfig parse_config_text(const std::string& text, const std::string& source) {
  return parse_config(json::parse(text, source));
}

}  // namespace moe
