#include "model/describe.h"

#include <algorithm>
#include <map>
#include <string>

#include "model/params.h"
#include "model/trainable.h"

namespace moe {
namespace {

// The group a tensor counts in, by its name (model/params.cpp names every tensor).
const char* group_of(const std::string& name) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (name == "wte" || name == "wpe") return "embeddings";
  if (name == "lm_head.weight") return "head";
  if (has("norm")) return "norms";
  if (has(".attn.")) return "attention";
  if (has(".moe.router.")) return "router";
  if (has(".moe.experts.")) return "experts";
  if (has(".moe.shared")) return "shared_expert";
  if (has(".moe.residual.")) return "residual_mlp";
  return "dense_ffn";  // layers.<l>.mlp.
}

size_t padded(size_t numel) { return (numel + 15) / 16 * 16; }

}  // namespace

json::Value describe_params(const ModelConfig& m) {
  using json::Value;
  const ParamLayout layout(m);
  struct Count {
    size_t raw = 0, padded = 0;
  };
  std::map<std::string, Count> groups;
  Count dense, experts;
  for (const ParamTensor& t : layout.tensors()) {
    const char* g = group_of(t.name);
    groups[g].raw += t.numel;
    groups[g].padded += padded(t.numel);
    Count& part = std::string(g) == "experts" ? experts : dense;
    part.raw += t.numel;
    part.padded += padded(t.numel);
  }
  // One expert of each MoE layer (every expert of a layer has the same shape).
  Value per_expert = Value::make_array(), per_expert_padded = Value::make_array(), per_layer = Value::make_array();
  size_t largest = 0;
  int last_layer = -1;
  for (const ExpertRange& r : layout.expert_ranges()) {
    largest = std::max(largest, r.end - r.begin);
    if (r.layer == last_layer) continue;
    last_layer = r.layer;
    size_t raw = 0;
    const std::string prefix = "layers." + std::to_string(r.layer) + ".moe.experts." + std::to_string(r.expert) + ".";
    for (const ParamTensor& t : layout.tensors())
      if (t.name.compare(0, prefix.size(), prefix) == 0) raw += t.numel;
    per_expert.push(Value::of(static_cast<double>(raw)));
    per_expert_padded.push(Value::of(static_cast<double>(r.end - r.begin)));
    per_layer.push(Value::of(m.experts_at(r.layer)));
  }
  Value o = Value::make_object();
  o.set("total", Value::of(static_cast<double>(dense.raw + experts.raw)));
  o.set("dense", Value::of(static_cast<double>(dense.raw)));
  o.set("experts", Value::of(static_cast<double>(experts.raw)));
  o.set("per_expert", per_expert);
  o.set("experts_per_layer", per_layer);
  Value pad = Value::make_object();
  pad.set("total", Value::of(static_cast<double>(layout.total())));
  pad.set("dense", Value::of(static_cast<double>(dense.padded)));
  pad.set("experts", Value::of(static_cast<double>(experts.padded)));
  pad.set("per_expert", per_expert_padded);
  o.set("padded", pad);
  Value by_group = Value::make_object();
  for (const auto& [name, c] : groups) by_group.set(name, Value::of(static_cast<double>(c.raw)));
  o.set("groups", by_group);
  // Bytes of each fp32 state as the engine allocates them: the arena (weights), a gradient arena of the same
  // layout, and AdamW's two moments over it. The largest expert is what an offload slot holds per state.
  const double f32 = 4;
  auto states = [&](size_t floats) {
    Value s = Value::make_object();
    s.set("params", Value::of(f32 * floats));
    s.set("grads", Value::of(f32 * floats));
    s.set("optimizer", Value::of(2 * f32 * floats));
    return s;
  };
  Value memory = Value::make_object();
  memory.set("dense", states(dense.padded));
  memory.set("experts", states(experts.padded));
  memory.set("largest_expert", states(largest));
  o.set("memory_bytes", memory);
  return o;
}

json::Value describe_finetune(const ModelConfig& m, const FinetuneConfig& f) {
  using json::Value;
  const ParamLayout layout(m, f);
  const TrainableSet set(layout, f);
  std::map<std::string, std::pair<double, double>> groups;  // trainable, frozen
  double trainable = 0, frozen = 0, adapters = 0;
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const ParamTensor& t = layout.tensors()[i];
    const double n = static_cast<double>(t.numel);
    auto& g = groups[param_group_name(param_group(t.name))];
    (set.trains(i) ? g.first : g.second) += n;
    (set.trains(i) ? trainable : frozen) += n;
    if (t.adapter) adapters += n;
  }
  Value by_group = Value::make_object();
  for (const auto& [name, counts] : groups) {
    Value g = Value::make_object();
    g.set("trainable", Value::of(counts.first));
    g.set("frozen", Value::of(counts.second));
    by_group.set(name, g);
  }
  Value o = Value::make_object();
  o.set("trainable_params", Value::of(trainable));
  o.set("frozen_params", Value::of(frozen));
  o.set("adapter_params", Value::of(adapters));
  o.set("trainable_state_bytes", Value::of(3.0 * sizeof(float) * static_cast<double>(set.grad_total())));
  o.set("frozen_bytes", Value::of(sizeof(float) * frozen));
  o.set("groups", by_group);
  return o;
}

}  // namespace moe
