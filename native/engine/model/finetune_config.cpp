#include "model/finetune_config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/section_reader.h"

namespace moe {
namespace {

constexpr ParamGroup kGroups[kParamGroups] = {ParamGroup::Embeddings, ParamGroup::Attention, ParamGroup::Norms,
                                              ParamGroup::Router,     ParamGroup::Experts,   ParamGroup::SharedExperts,
                                              ParamGroup::DenseMlp,   ParamGroup::LmHead};
constexpr LoraTarget kTargets[kLoraTargets] = {LoraTarget::Attention, LoraTarget::Experts, LoraTarget::SharedExperts,
                                               LoraTarget::DenseMlp};

template <typename T, size_t N>
std::string quoted_names(const T (&all)[N], const char* (*name)(T)) {
  std::string s;
  for (T x : all) s += (s.empty() ? "\"" : ", \"") + std::string(name(x)) + "\"";
  return s;
}

template <typename T, size_t N>
T parse_name(const std::string& s, const std::string& field, const T (&all)[N], const char* (*name)(T)) {
  for (T x : all)
    if (s == name(x)) return x;
  fail(field + ": \"" + s + "\" is not known; use one of " + quoted_names(all, name));
}

int whole(double d, const std::string& field, int lo, int hi) {
  if (d != std::floor(d) || d < lo || d > hi)
    fail(field + ": must be a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
         json::dump(json::Value::of(d)));
  return static_cast<int>(d);
}

template <typename T, size_t N>
std::vector<T> parse_names(const json::Value& v, const std::string& field, const T (&all)[N], const char* (*name)(T)) {
  if (!v.is_array()) fail(field + ": must be an array of names (" + quoted_names(all, name) + ")");
  std::vector<T> out;
  for (size_t i = 0; i < v.array.size(); ++i) {
    const json::Value& x = v.array[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!x.is_string()) fail(at + ": must be a string");
    const T t = parse_name(x.string, at, all, name);
    if (std::find(out.begin(), out.end(), t) != out.end()) fail(at + ": \"" + x.string + "\" is listed twice");
    out.push_back(t);
  }
  return out;
}

std::map<int, std::vector<int>> parse_experts(const json::Value& v) {
  const std::string field = "finetune.experts";
  if (!v.is_object()) fail(field + ": must be an object {\"<layer index>\": [expert ids]} or null");
  std::map<int, std::vector<int>> out;
  for (const auto& [key, ids] : v.object) {
    const std::string at = field + "." + key;
    if (key.empty() || key.size() > 6 || !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail(at + ": the key must be a model layer index (a whole number written as a string)");
    const int layer = std::stoi(key);
    if (out.count(layer)) fail(at + ": layer " + key + " is listed twice");
    if (!ids.is_array()) fail(at + ": must be an array of expert ids");
    std::vector<int> list;
    for (size_t i = 0; i < ids.array.size(); ++i) {
      const std::string ati = at + "[" + std::to_string(i) + "]";
      if (!ids.array[i].is_number()) fail(ati + ": must be an expert id (a whole number)");
      list.push_back(whole(ids.array[i].number, ati, 0, 1 << 20));
    }
    std::sort(list.begin(), list.end());
    if (std::adjacent_find(list.begin(), list.end()) != list.end()) fail(at + ": an expert id is listed twice");
    out[layer] = std::move(list);
  }
  return out;
}

LoraConfig parse_lora(const json::Value& v, FinetuneMethod method) {
  SectionReader s(v, "finetune.lora");
  LoraConfig c;
  c.rank = whole(s.number("rank", c.rank), s.field("rank"), 1, 1 << 16);
  c.alpha = s.number("alpha", c.alpha);
  if (!(c.alpha > 0) || !std::isfinite(c.alpha)) fail(s.field("alpha") + ": must be a positive number");
  c.dropout = s.number("dropout", c.dropout);
  if (!(c.dropout >= 0 && c.dropout < 1)) fail(s.field("dropout") + ": must be in [0, 1)");
  c.rslora = s.boolean("rslora", false);
  if (const json::Value* t = s.get("targets")) {
    c.targets = parse_names(*t, s.field("targets"), kTargets, lora_target_name);
    if (c.targets.empty()) fail(s.field("targets") + ": lists no target; name at least one");
  } else if (method == FinetuneMethod::Esft) {
    c.targets = {LoraTarget::Experts};
  } else {
    c.targets = {LoraTarget::Attention, LoraTarget::Experts};
  }
  s.done();
  return c;
}

EsftConfig parse_esft(const json::Value& v) {
  SectionReader s(v, "finetune.esft");
  EsftConfig c;
  c.threshold = s.number("threshold", c.threshold);
  if (!(c.threshold > 0 && c.threshold <= 1)) fail(s.field("threshold") + ": must be in (0, 1]");
  const std::string score = s.string("score", "gate");
  if (score == "gate") c.score = EsftScore::Gate;
  else if (score == "tokens") c.score = EsftScore::Tokens;
  else fail(s.field("score") + ": \"" + score + "\" is not known; use \"gate\" or \"tokens\"");
  c.sample_batches = whole(s.number("sample_batches", c.sample_batches), s.field("sample_batches"), 1, 1 << 20);
  const std::string with = s.string("with", "full");
  if (with == "full") c.with = FinetuneMethod::Full;
  else if (with == "lora") c.with = FinetuneMethod::Lora;
  else fail(s.field("with") + ": \"" + with + "\" is not known; use \"full\" or \"lora\"");
  s.done();
  return c;
}

}  // namespace

double LoraConfig::scaling() const { return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / rank; }

bool LoraConfig::targets_has(LoraTarget t) const {
  return std::find(targets.begin(), targets.end(), t) != targets.end();
}

bool FinetuneConfig::lora_used() const {
  return method == FinetuneMethod::Lora || (method == FinetuneMethod::Esft && esft.with == FinetuneMethod::Lora);
}

bool FinetuneConfig::trains(ParamGroup g) const {
  if (!enabled) return g != ParamGroup::None;
  if (g == ParamGroup::Lora) return true;
  return std::find(train.begin(), train.end(), g) != train.end();
}

bool FinetuneConfig::expert_selected(int layer, int e) const {
  auto it = experts.find(layer);
  return it == experts.end() || std::binary_search(it->second.begin(), it->second.end(), e);
}

FinetuneConfig parse_finetune_config(const json::Value& v) {
  FinetuneConfig f;
  if (v.is_null()) return f;
  SectionReader s(v, "finetune");
  f.enabled = true;
  const json::Value* method = s.get("method");
  if (!method || !method->is_string()) fail("finetune.method: required, one of \"full\", \"lora\", \"esft\"");
  if (method->string == "full") f.method = FinetuneMethod::Full;
  else if (method->string == "lora") f.method = FinetuneMethod::Lora;
  else if (method->string == "esft") f.method = FinetuneMethod::Esft;
  else fail("finetune.method: \"" + method->string + "\" is not known; use \"full\", \"lora\" or \"esft\"");

  // esft's section may be left out (its defaults); a section the method does not use is refused.
  const json::Value* esft = s.get("esft");
  if (esft && f.method != FinetuneMethod::Esft)
    fail("finetune.esft: only for finetune.method \"esft\"; remove it or set it to null");
  f.has_esft = f.method == FinetuneMethod::Esft;
  if (esft) f.esft = parse_esft(*esft);
  const json::Value* lora = s.get("lora");
  f.has_lora = f.lora_used();
  if (!lora && f.has_lora) fail("finetune.lora: required when the method trains LoRA adapters (lora, or esft with lora)");
  if (lora && !f.has_lora)
    fail("finetune.lora: only when the method uses LoRA (lora, or esft with \"with\": \"lora\"); remove it or set it "
         "to null");
  if (lora) f.lora = parse_lora(*lora, f.method);

  if (const json::Value* train = s.get("train")) {
    f.train = parse_names(*train, "finetune.train", kGroups, param_group_name);
  } else if (f.method == FinetuneMethod::Full) {
    f.train.assign(std::begin(kGroups), std::end(kGroups));
  } else if (f.method == FinetuneMethod::Esft && f.esft.with == FinetuneMethod::Full) {
    f.train = {ParamGroup::Experts};
  }
  if (const json::Value* experts = s.get("experts")) f.experts = parse_experts(*experts);
  s.done();
  return f;
}

void validate_finetune_config(const FinetuneConfig& f, const ModelConfig& m) {
  if (!f.enabled) return;
  for (const auto& [layer, ids] : f.experts) {
    const std::string at = "finetune.experts." + std::to_string(layer);
    if (layer >= m.n_layers || !m.is_moe_layer(layer))
      fail(at + ": layer " + std::to_string(layer) + " is not an MoE layer of this model");
    for (int e : ids)
      if (e >= m.experts_at(layer))
        fail(at + ": expert " + std::to_string(e) + " does not exist (the layer has " +
             std::to_string(m.experts_at(layer)) + " experts)");
  }
}

json::Value finetune_config_to_json(const FinetuneConfig& f) {
  using json::Value;
  if (!f.enabled) return Value::null();
  Value o = Value::make_object();
  o.set("method", Value::of(finetune_method_name(f.method)));
  Value train = Value::make_array();
  for (ParamGroup g : f.train) train.push(Value::of(param_group_name(g)));
  o.set("train", train);
  if (f.experts.empty()) {
    o.set("experts", Value::null());
  } else {
    Value e = Value::make_object();
    for (const auto& [layer, ids] : f.experts) {
      Value list = Value::make_array();
      for (int id : ids) list.push(Value::of(id));
      e.set(std::to_string(layer), list);
    }
    o.set("experts", e);
  }
  if (f.has_lora) {
    Value l = Value::make_object();
    l.set("rank", Value::of(f.lora.rank));
    l.set("alpha", Value::of(f.lora.alpha));
    l.set("dropout", Value::of(f.lora.dropout));
    l.set("rslora", Value::of(f.lora.rslora));
    Value targets = Value::make_array();
    for (LoraTarget t : f.lora.targets) targets.push(Value::of(lora_target_name(t)));
    l.set("targets", targets);
    o.set("lora", l);
  }
  if (f.has_esft) {
    Value e = Value::make_object();
    e.set("threshold", Value::of(f.esft.threshold));
    e.set("score", Value::of(esft_score_name(f.esft.score)));
    e.set("sample_batches", Value::of(f.esft.sample_batches));
    e.set("with", Value::of(finetune_method_name(f.esft.with)));
    o.set("esft", e);
  }
  return o;
}

const char* finetune_method_name(FinetuneMethod m) {
  switch (m) {
    case FinetuneMethod::Full: return "full";
    case FinetuneMethod::Lora: return "lora";
    case FinetuneMethod::Esft: return "esft";
  }
  return "?";
}

const char* param_group_name(ParamGroup g) {
  switch (g) {
    case ParamGroup::Embeddings: return "embeddings";
    case ParamGroup::Attention: return "attention";
    case ParamGroup::Norms: return "norms";
    case ParamGroup::Router: return "router";
    case ParamGroup::Experts: return "experts";
    case ParamGroup::SharedExperts: return "shared_experts";
    case ParamGroup::DenseMlp: return "dense_mlp";
    case ParamGroup::LmHead: return "lm_head";
    case ParamGroup::Lora: return "lora";
    case ParamGroup::None: return "none";
  }
  return "?";
}

const char* lora_target_name(LoraTarget t) {
  switch (t) {
    case LoraTarget::Attention: return "attention";
    case LoraTarget::Experts: return "experts";
    case LoraTarget::SharedExperts: return "shared_experts";
    case LoraTarget::DenseMlp: return "dense_mlp";
  }
  return "?";
}

const char* esft_score_name(EsftScore s) { return s == EsftScore::Gate ? "gate" : "tokens"; }

}  // namespace moe
