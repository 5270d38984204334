// One step record as a line of the CLI's log.jsonl: the table's scalars under their names (moe_step_fields.h),
// then the per-layer arrays and, with placement, each MoE layer's placement and execution.
#pragma once
#include <string>

#include "json_out.h"
#include "moe_engine.h"

namespace moe_cli {

inline std::string record_json(const moe_step_record& r) {
  using cli::json::Value;
  Value o = Value::make_object();
  // The table's scalars; the offload and SSD groups only for an offloaded step.
  const bool offloaded = r.offloaded != 0;
#define MOE_STEP_SCALAR_JSON(name, c_type, unit, group, label, meaning) \
  if (offloaded || !moe_step_group_offload_only(group)) o.set(#name, Value::of(static_cast<double>(r.name)));
#define MOE_STEP_ARRAY_SKIP(name, c_type, meaning)
  MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_JSON, MOE_STEP_ARRAY_SKIP)
#undef MOE_STEP_SCALAR_JSON
#undef MOE_STEP_ARRAY_SKIP
  // [MoE layer][expert] arrays from the record's concatenated per-expert values.
  auto per_layer = [&](const auto* values) {
    Value layers = Value::make_array();
    for (int l = 0; l < r.n_moe_layers; ++l) {
      Value layer = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) layer.push(Value::of(static_cast<int>(*values++)));
      layers.push(layer);
    }
    return layers;
  };
  o.set("expert_tokens", per_layer(r.expert_tokens));
  if (r.selection_bias) {
    Value layers = Value::make_array();
    const float* bias = r.selection_bias;
    for (int l = 0; l < r.n_moe_layers; ++l) {
      Value layer = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) layer.push(Value::of(static_cast<double>(*bias++)));
      layers.push(layer);
    }
    o.set("selection_bias", layers);
  }
  if (offloaded) {
    o.set("expert_tiers", per_layer(r.expert_tiers));
    o.set("expert_pinned", per_layer(r.expert_pinned));
  }
  if (r.n_devices > 0 && r.layer_ms) {
    Value layers = Value::make_array();
    const int32_t* device = r.expert_device;
    const int32_t* expert_spilled = r.expert_spilled;
    for (int l = 0; l < r.n_moe_layers; ++l) {
      Value p = Value::make_object();
      p.set("imbalance_before", Value::of(r.imbalance[2 * l]));
      p.set("imbalance_after", Value::of(r.imbalance[2 * l + 1]));
      Value before = Value::make_array(), after = Value::make_array();
      for (int d = 0; d < r.n_devices; ++d) {
        before.push(Value::of(static_cast<double>(r.device_loads[(2 * l) * r.n_devices + d])));
        after.push(Value::of(static_cast<double>(r.device_loads[(2 * l + 1) * r.n_devices + d])));
      }
      p.set("device_tokens_before", before);
      p.set("device_tokens_after", after);
      p.set("spilled_tokens", Value::of(static_cast<double>(r.spilled_tokens[l])));
      p.set("moved_experts", Value::of(r.moved_experts[l]));
      Value map = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) map.push(Value::of(*device++));
      p.set("expert_device", map);
      Value spilled = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) spilled.push(Value::of(*expert_spilled++));
      p.set("expert_spilled", spilled);
      Value busy = Value::make_array();
      for (int d = 0; d < r.n_devices; ++d) busy.push(Value::of(r.device_busy_ms[l * r.n_devices + d]));
      p.set("device_busy_ms", busy);
      p.set("critical_ms", Value::of(r.layer_ms[3 * l]));
      p.set("wall_ms", Value::of(r.layer_ms[3 * l + 1]));
      p.set("predicted_ms", Value::of(r.layer_ms[3 * l + 2]));
      p.set("token_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l])));
      p.set("weight_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l + 1])));
      p.set("offload_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l + 2])));
      p.set("partitions", Value::of(r.layer_pipeline[2 * l]));
      p.set("reuse_strategy", Value::of(r.layer_pipeline[2 * l + 1]));
      layers.push(p);
    }
    o.set("placement", layers);
    Value peaks = Value::make_array();
    for (int d = 0; d < r.n_devices; ++d) peaks.push(Value::of(static_cast<double>(r.device_peak_bytes[d])));
    o.set("device_peak_bytes", peaks);
  }
  return cli::json::dump(o);
}

}  // namespace moe_cli
