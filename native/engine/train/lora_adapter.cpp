#include "train/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "model/model.h"
#include "train/arena_view.h"
#include "train/checkpoint.h"
#include "train/checkpoint_read.h"
#include "train/hf_families.h"
#include "train/hf_interchange.h"
#include "train/safetensors.h"

namespace moe {
namespace {

const std::string kPrefix = "base_model.model.";

std::string strip_suffix(const std::string& name, const std::string& suffix) {
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  return "";
}

// Where each adapter and each trained base tensor goes in the PEFT file, for one Hugging Face type.
struct PeftPlan {
  struct Lora {
    const LoraAdapter* adapter;
    std::string module;  // the Hugging Face module, e.g. model.layers.0.self_attn.q_proj
  };
  struct Saved {
    const ParamTensor* tensor;
    StoredPart part;  // its Hugging Face name and rows
  };
  std::vector<Lora> lora;
  std::vector<Saved> saved;
  std::set<std::string> target_modules, modules_to_save;
};

PeftPlan plan_peft(const ModelConfig& m, const ParamLayout& layout, const TrainableSet& trainable,
                   const std::string& model_type) {
  const HfType type = parse_hf_model_type(model_type);
  model_to_hf_config(m, type, st::DType::F32);  // fails naming what the type cannot express
  const std::vector<TensorSource> sources = hf_tensor_sources(
      m, layout, type, hf_family(type).per_expert_layout ? HfExpertLayout::PerExpert : HfExpertLayout::Fused);
  std::vector<const TensorSource*> by_tensor(layout.tensors().size(), nullptr);
  for (const TensorSource& s : sources) by_tensor[static_cast<size_t>(s.param - layout.tensors().data())] = &s;
  auto no_linear = [&](const std::string& what) {
    fail("export: " + what + " is not a separate Linear in the Hugging Face " + model_type +
         " layout (its experts are fused), so PEFT cannot hold it; export the merged checkpoint instead");
  };
  PeftPlan plan;
  std::set<size_t> adapted;  // base tensors with an adapter
  for (const LoraAdapter& a : layout.adapters()) {
    const TensorSource* s = by_tensor[a.base];
    const StoredPart* hit = nullptr;
    if (s)
      for (const StoredPart& p : s->parts)
        if (p.experts.empty() && p.offset == static_cast<size_t>(a.row0 * a.cols) && !p.shape.empty() && p.shape[0] == a.rows)
          hit = &p;
    if (!hit) no_linear("adapter " + a.module);
    const std::string module = strip_suffix(hit->name, ".weight");
    check(!module.empty(), "export: adapter " + a.module + " maps to '" + hit->name + "', not a Linear weight");
    plan.lora.push_back({&a, module});
    plan.target_modules.insert(module);
    adapted.insert(a.base);
  }
  // Fused experts reach their tensors through parts of another source; a trained one among them cannot be saved.
  for (const TensorSource& s : sources)
    for (const StoredPart& p : s.parts)
      for (const ParamTensor* t : p.experts)
        if (trainable.trains(static_cast<size_t>(t - layout.tensors().data())) && !t->adapter)
          no_linear("trained expert tensor " + t->name);
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const ParamTensor& t = layout.tensors()[i];
    if (t.adapter || !trainable.trains(i) || !by_tensor[i]) continue;
    if (adapted.count(i))
      fail("export: " + t.name + " has an adapter and trains its base weights too; PEFT keeps a module either "
                                 "adapted or saved whole; export the merged checkpoint instead");
    for (const StoredPart& p : by_tensor[i]->parts) {
      if (!p.experts.empty()) no_linear("trained tensor " + t.name);
      plan.saved.push_back({&t, p});
      const size_t dot = p.name.rfind('.');
      plan.modules_to_save.insert(p.name.substr(0, dot));
    }
  }
  if (plan.lora.empty()) fail("export: the model has no LoRA adapters (finetune.method \"lora\"); export it whole");
  return plan;
}

}  // namespace

void merge_lora_adapter(const LoraAdapter& a, double scale, int64_t rank, const float* A, const float* B, float* W) {
  W += a.row0 * a.cols;
  std::vector<double> row(a.cols);
  for (int64_t i = 0; i < a.rows; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < rank; ++k) {
      const double b = B[i * rank + k];
      if (b == 0) continue;
      for (int64_t c = 0; c < a.cols; ++c) row[c] += b * A[k * a.cols + c];
    }
    for (int64_t c = 0; c < a.cols; ++c) W[i * a.cols + c] = static_cast<float>(W[i * a.cols + c] + scale * row[c]);
  }
}

void merge_lora_adapters(const ParamLayout& layout, float* arena) {
  for (const LoraAdapter& a : layout.adapters())
    merge_lora_adapter(a, layout.lora_scale(), layout.lora_rank(), arena + layout.tensors()[a.a].offset,
                       arena + layout.tensors()[a.b].offset, arena + layout.tensors()[a.base].offset);
}

void export_peft_adapter(const std::string& dir, Model& model, const FinetuneConfig& finetune,
                         const std::string& model_type, ExpertStateHome* experts, const std::string& base_model) {
  ParamValues values(model, experts);
  export_peft_adapter(dir, model.config(), model.layout(), model.trainable(), finetune, values, model_type, base_model);
}

void export_peft_adapter(const std::string& dir, const ModelConfig& m, const ParamLayout& layout,
                         const TrainableSet& trainable, const FinetuneConfig& finetune, TensorValues& values,
                         const std::string& model_type, const std::string& base_model) {
  const PeftPlan plan = plan_peft(m, layout, trainable, model_type);
  check_export_target(dir);

  st::Writer w;
  w.set_metadata("format", "pt");
  std::vector<float> tensor;  // the one the writer is at
  auto add = [&](const std::string& name, const ParamTensor& t, size_t offset, const std::vector<int64_t>& shape) {
    w.add_f32_streamed(name, shape, [&values, &tensor, &t, offset] {
      tensor.resize(t.numel);
      values.read(t, tensor.data());
      return tensor.data() + offset;
    });
  };
  for (const PeftPlan::Lora& l : plan.lora) {
    const ParamTensor &A = layout.tensors()[l.adapter->a], &B = layout.tensors()[l.adapter->b];
    add(kPrefix + l.module + ".lora_A.weight", A, 0, A.shape);
    add(kPrefix + l.module + ".lora_B.weight", B, 0, B.shape);
  }
  for (const PeftPlan::Saved& s : plan.saved) add(kPrefix + s.part.name, *s.tensor, s.part.offset, s.part.shape);

  json::Value c = json::Value::make_object();
  c.set("peft_type", json::Value::of("LORA"));
  c.set("task_type", json::Value::of("CAUSAL_LM"));
  c.set("base_model_name_or_path", base_model.empty() ? json::Value::null() : json::Value::of(base_model));
  c.set("r", json::Value::of(finetune.lora.rank));
  c.set("lora_alpha", json::Value::of(finetune.lora.alpha));
  c.set("lora_dropout", json::Value::of(finetune.lora.dropout));
  c.set("use_rslora", json::Value::of(finetune.lora.rslora));
  c.set("bias", json::Value::of("none"));
  c.set("fan_in_fan_out", json::Value::of(false));
  c.set("init_lora_weights", json::Value::of(true));
  c.set("inference_mode", json::Value::of(true));
  // Full module names: a leaf name (gate_proj) would also match modules the run left unadapted.
  json::Value targets = json::Value::make_array();
  for (const std::string& m : plan.target_modules) targets.push(json::Value::of(m));
  c.set("target_modules", targets);
  json::Value saved = json::Value::null();
  if (!plan.modules_to_save.empty()) {
    saved = json::Value::make_array();
    for (const std::string& m : plan.modules_to_save) saved.push(json::Value::of(m));
  }
  c.set("modules_to_save", saved);
  fs::write_dir_atomic(dir, [&](const std::string& tmp) {
    fs::write_file_atomic(fs::join(tmp, "adapter_config.json"), json::dump(c, 2) + "\n");
    w.write(fs::join(tmp, "adapter_model.safetensors"));
  });
}

bool is_peft_adapter(const std::string& dir) { return fs::exists(fs::join(dir, "adapter_config.json")); }

namespace {

// adapter_config.json's LoRA settings, checked: only LoRA adapters with a positive rank load.
struct PeftSettings {
  std::string path;  // of adapter_config.json, for messages
  int rank = 0;
  double alpha = 0;
  bool rslora = false;
  std::string base;  // base_model_name_or_path; empty when missing or null
};

PeftSettings read_peft_settings(const std::string& dir) {
  PeftSettings s;
  s.path = fs::join(dir, "adapter_config.json");
  if (!fs::exists(s.path)) fail(dir + ": no adapter_config.json; pass a PEFT adapter directory");
  const json::Value root = json::parse(fs::read_file(s.path, 1 << 24), s.path);
  if (!root.is_object()) fail(s.path + ": must be a JSON object");
  auto field = [&](const char* key) -> const json::Value& {
    const json::Value* v = root.find(key);
    if (!v) fail(s.path + ": " + key + " is missing");
    return *v;
  };
  if (!field("peft_type").is_string() || field("peft_type").string != "LORA")
    fail(s.path + ": peft_type: only \"LORA\" adapters can be loaded");
  const json::Value& r = field("r");
  if (!r.is_number() || r.number < 1 || r.number != std::floor(r.number))
    fail(s.path + ": r must be a positive integer (got " + json::dump(r) + ")");
  s.rank = static_cast<int>(r.number);
  if (!field("lora_alpha").is_number()) fail(s.path + ": lora_alpha must be a number");
  s.alpha = field("lora_alpha").number;
  const json::Value* rs = root.find("use_rslora");
  s.rslora = rs && rs->is_bool() && rs->boolean;
  const json::Value* base = root.find("base_model_name_or_path");
  if (base && base->is_string()) s.base = base->string;
  return s;
}

std::set<std::string> stored_names(const st::TensorSet& ts) {
  std::set<std::string> out;
  for (const auto& [name, e] : ts.entries()) out.insert(name);
  return out;
}

// The file keys a plan names: each adapter's A and B, and each saved module's tensors.
std::set<std::string> peft_keys(const PeftPlan& p) {
  std::set<std::string> keys;
  for (const PeftPlan::Lora& l : p.lora) {
    keys.insert(kPrefix + l.module + ".lora_A.weight");
    keys.insert(kPrefix + l.module + ".lora_B.weight");
  }
  for (const PeftPlan::Saved& x : p.saved) keys.insert(kPrefix + x.part.name);
  return keys;
}

// The keys an adapter of this finetune section has in Hugging Face type `model_type`; none (empty) when the model
// cannot take that section or cannot be written in that type.
std::set<std::string> keys_for(const ModelConfig& m, const FinetuneConfig& f, const std::string& model_type) {
  try {
    validate_finetune_config(f, m);
    const ParamLayout layout(m, f);
    const TrainableSet trainable(layout, f);
    return peft_keys(plan_peft(m, layout, trainable, model_type));
  } catch (const EngineError&) {
    return {};
  }
}

bool subset(const std::set<std::string>& a, const std::set<std::string>& b) {
  return !a.empty() && std::includes(b.begin(), b.end(), a.begin(), a.end());
}

bool intersects(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& k) { return b.count(k) > 0; });
}

// Whether a file of `stored` keys is an adapter of this plan: every key is the plan's, every saved module is whole,
// and each adapted module has both its A and B or neither. A module it leaves out keeps its adapter's start
// values (B = 0: the base alone), as PEFT adapters on fewer modules (q_proj and v_proj only, some layers or
// experts only) mean.
bool fits(const PeftPlan& plan, const std::set<std::string>& stored) {
  const std::set<std::string> keys = peft_keys(plan);
  if (!std::includes(keys.begin(), keys.end(), stored.begin(), stored.end())) return false;
  for (const PeftPlan::Saved& x : plan.saved)
    if (!stored.count(kPrefix + x.part.name)) return false;
  for (const PeftPlan::Lora& l : plan.lora)
    if (stored.count(kPrefix + l.module + ".lora_A.weight") != stored.count(kPrefix + l.module + ".lora_B.weight"))
      return false;
  return true;
}

// The plan of the first Hugging Face type in which model m with this section holds the stored keys; none when
// no type does (or the model cannot take the section).
std::optional<PeftPlan> plan_fitting(const ModelConfig& m, const ParamLayout& layout, const TrainableSet& trainable,
                                     const std::set<std::string>& stored) {
  for (const HfFamily& f : hf_families()) {
    try {
      PeftPlan p = plan_peft(m, layout, trainable, f.model_type);
      if (fits(p, stored)) return p;
    } catch (const EngineError&) {
      continue;  // this model cannot be expressed in that type
    }
  }
  return std::nullopt;
}

}  // namespace

std::string peft_base_folder(const std::string& dir) {
  const PeftSettings s = read_peft_settings(dir);
  if (s.base.empty())
    fail(s.path + ": base_model_name_or_path names no base model; choose the base model folder the adapter was "
                  "trained on");
  const std::string& base = s.base;
  if (!fs::exists(fs::join(base, "config.json")))
    fail(s.path + ": base_model_name_or_path '" + base + "' is not a model folder here (no config.json); choose the "
                  "base model folder the adapter was trained on");
  return base;
}

FinetuneConfig finetune_of_peft_adapter(const std::string& dir, const ModelConfig& m) {
  const PeftSettings s = read_peft_settings(dir);
  const std::set<std::string> stored = stored_names(st::TensorSet(fs::join(dir, "adapter_model.safetensors")));
  FinetuneConfig f;
  f.enabled = true;
  f.method = FinetuneMethod::Lora;
  f.has_lora = true;
  f.lora.rank = s.rank;
  f.lora.alpha = s.alpha;
  f.lora.rslora = s.rslora;
  // Per Hugging Face type: every LoRA target with an adapter stored, then every group of base modules whose saved
  // tensors are all stored beside them; the section is the adapter's when the file fits its plan.
  for (const HfFamily& family : hf_families()) {
    FinetuneConfig c = f;
    for (int t = 0; t < kLoraTargets; ++t) {
      FinetuneConfig one = f;
      one.lora.targets = {static_cast<LoraTarget>(t)};
      if (intersects(keys_for(m, one, family.model_type), stored)) c.lora.targets.push_back(one.lora.targets[0]);
    }
    if (c.lora.targets.empty()) continue;
    const std::set<std::string> adapters = keys_for(m, c, family.model_type);
    for (int g = 0; g < kParamGroups; ++g) {
      FinetuneConfig one = c;
      one.train = {static_cast<ParamGroup>(g)};
      std::set<std::string> saved;  // the group's own keys
      for (const std::string& k : keys_for(m, one, family.model_type))
        if (!adapters.count(k)) saved.insert(k);
      if (subset(saved, stored)) c.train.push_back(one.train[0]);
    }
    try {
      validate_finetune_config(c, m);
      const ParamLayout layout(m, c);
      if (plan_fitting(m, layout, TrainableSet(layout, c), stored)) return c;
    } catch (const EngineError&) {
      continue;
    }
  }
  fail(fs::join(dir, "adapter_model.safetensors") +
       ": its tensors are not LoRA adapters of this base model's attention, experts, shared experts or dense MLPs "
       "(with whole modules saved beside them) in any Hugging Face layout it can take; an adapter of another model, "
       "or on a module the engine does not adapt (such as the router), cannot load");
}

void load_peft_adapter(const std::string& dir, Model& model, const FinetuneConfig& finetune,
                       ExpertStateHome* experts) {
  const PeftSettings s = read_peft_settings(dir);
  const std::string& path = s.path;
  if (!finetune.uses_lora()) fail(path + ": the run has no LoRA adapters (finetune.method \"lora\") to load it into");
  if (s.rank != finetune.lora.rank)
    fail(path + ": r is " + std::to_string(s.rank) + " but finetune.lora.rank is " + std::to_string(finetune.lora.rank));
  if (s.alpha != finetune.lora.alpha || s.rslora != finetune.lora.rslora)
    fail(path + ": lora_alpha / use_rslora differ from finetune.lora.alpha / rslora (the adapter's scaling would change)");
  const st::TensorSet ts(fs::join(dir, "adapter_model.safetensors"));
  // The Hugging Face layout the keys are in: the type whose plan for this model names exactly the stored keys.
  const std::set<std::string> stored = stored_names(ts);
  const std::optional<PeftPlan> found = plan_fitting(model.config(), model.layout(), model.trainable(), stored);
  if (!found)
    fail(ts.path() + ": its tensors are not this run's adapters (and trained modules) in any Hugging Face layout the "
                     "model can take; load an adapter written for this model and finetune section");
  const PeftPlan& plan = *found;

  const ParamLayout& layout = model.layout();
  std::vector<TensorSource> sources;
  for (const PeftPlan::Lora& l : plan.lora) {
    if (!stored.count(kPrefix + l.module + ".lora_A.weight")) continue;  // left out: its start values stay
    const ParamTensor &A = layout.tensors()[l.adapter->a], &B = layout.tensors()[l.adapter->b];
    sources.push_back({&A, {{kPrefix + l.module + ".lora_A.weight", A.shape, 0}}});
    sources.push_back({&B, {{kPrefix + l.module + ".lora_B.weight", B.shape, 0}}});
  }
  for (const PeftPlan::Saved& s : plan.saved) {
    StoredPart part = s.part;
    part.name = kPrefix + part.name;
    sources.push_back({s.tensor, {part}});
  }
  // Checks dtypes and shapes before anything changes, naming the tensor; every other tensor keeps its value.
  ArenaStaging host(model.backend(), model.params(), model.num_params(), experts ? &layout.expert_ranges() : nullptr);
  read_checked(ts, {{&sources, host.data(), nullptr, &layout.expert_ranges(), experts, kWeights, true}}, nullptr);
  host.put();
}

}  // namespace moe
