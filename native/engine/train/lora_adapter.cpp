#include "train/lora_adapter.h"

#include <algorithm>
#include <cmath>
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
                         const std::string& model_type, ExpertStateHome* experts) {
  ParamValues values(model, experts);
  export_peft_adapter(dir, model.config(), model.layout(), model.trainable(), finetune, values, model_type);
}

void export_peft_adapter(const std::string& dir, const ModelConfig& m, const ParamLayout& layout,
                         const TrainableSet& trainable, const FinetuneConfig& finetune, TensorValues& values,
                         const std::string& model_type) {
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
  c.set("base_model_name_or_path", json::Value::null());
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

void load_peft_adapter(const std::string& dir, Model& model, const FinetuneConfig& finetune,
                       ExpertStateHome* experts) {
  const std::string path = fs::join(dir, "adapter_config.json");
  if (!fs::exists(path)) fail(dir + ": no adapter_config.json; pass a PEFT adapter directory");
  const json::Value c = json::parse(fs::read_file(path, 1 << 24), path);
  auto field = [&](const char* key) -> const json::Value& {
    const json::Value* v = c.find(key);
    if (!v) fail(path + ": " + key + " is missing");
    return *v;
  };
  if (!field("peft_type").is_string() || field("peft_type").string != "LORA")
    fail(path + ": peft_type: only \"LORA\" adapters can be loaded");
  if (!finetune.uses_lora()) fail(path + ": the run has no LoRA adapters (finetune.method \"lora\") to load it into");
  if (!field("r").is_number() || field("r").number != finetune.lora.rank)
    fail(path + ": r is " + json::dump(field("r")) + " but finetune.lora.rank is " + std::to_string(finetune.lora.rank));
  const json::Value* rs = c.find("use_rslora");
  const bool rslora = rs && rs->is_bool() && rs->boolean;
  if (!field("lora_alpha").is_number() || field("lora_alpha").number != finetune.lora.alpha || rslora != finetune.lora.rslora)
    fail(path + ": lora_alpha / use_rslora differ from finetune.lora.alpha / rslora (the adapter's scaling would change)");
  const st::TensorSet ts(fs::join(dir, "adapter_model.safetensors"));
  // The Hugging Face layout the keys are in: the type whose plan for this model names exactly the stored keys.
  std::set<std::string> stored;
  for (const auto& [name, e] : ts.entries()) stored.insert(name);
  const PeftPlan* found = nullptr;
  PeftPlan plan;
  for (const HfFamily& f : hf_families()) {
    try {
      PeftPlan p = plan_peft(model.config(), model.layout(), model.trainable(), f.model_type);
      std::set<std::string> keys;
      for (const PeftPlan::Lora& l : p.lora) {
        keys.insert(kPrefix + l.module + ".lora_A.weight");
        keys.insert(kPrefix + l.module + ".lora_B.weight");
      }
      for (const PeftPlan::Saved& x : p.saved) keys.insert(kPrefix + x.part.name);
      if (keys != stored) continue;
      plan = std::move(p);
      found = &plan;
      break;
    } catch (const EngineError&) {
      continue;  // this model cannot be expressed in that type
    }
  }
  if (!found)
    fail(ts.path() + ": its tensors are not this run's adapters (and trained modules) in any Hugging Face layout the "
                     "model can take; load an adapter written for this model and finetune section");

  const ParamLayout& layout = model.layout();
  std::vector<TensorSource> sources;
  for (const PeftPlan::Lora& l : plan.lora) {
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
