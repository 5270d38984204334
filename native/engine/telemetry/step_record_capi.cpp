#include "telemetry/step_record_capi.h"

#include <string>

#include "core/error.h"

namespace moe {
namespace {

void flatten(const StepRecord& r, StepRecordArrays& a) {
  a = StepRecordArrays{};
  for (const auto& layer : r.expert_tokens) {
    a.experts_per_layer.push_back(static_cast<int32_t>(layer.size()));
    a.expert_tokens.insert(a.expert_tokens.end(), layer.begin(), layer.end());
  }
  for (const auto& layer : r.selection_bias)
    a.selection_bias.insert(a.selection_bias.end(), layer.begin(), layer.end());
  for (const auto& layer : r.expert_tiers) a.expert_tiers.insert(a.expert_tiers.end(), layer.begin(), layer.end());
  for (const auto& layer : r.expert_pinned) a.expert_pinned.insert(a.expert_pinned.end(), layer.begin(), layer.end());
  a.device_peak_bytes = r.device_peak_bytes;
  for (const LayerPlacement& p : r.placements) {
    a.imbalance.push_back(p.imbalance_before);
    a.imbalance.push_back(p.imbalance_after);
    a.device_loads.insert(a.device_loads.end(), p.load_before.begin(), p.load_before.end());
    a.device_loads.insert(a.device_loads.end(), p.load_after.begin(), p.load_after.end());
    a.spilled_tokens.push_back(p.spilled_tokens);
    a.moved_experts.push_back(p.moved_experts);
    a.expert_device.insert(a.expert_device.end(), p.expert_device.begin(), p.expert_device.end());
    a.expert_spilled.insert(a.expert_spilled.end(), p.expert_spilled.begin(), p.expert_spilled.end());
    a.device_busy_ms.insert(a.device_busy_ms.end(), p.device_busy_ms.begin(), p.device_busy_ms.end());
    a.layer_ms.insert(a.layer_ms.end(), {p.critical_ms, p.wall_ms, p.predicted_ms});
    a.layer_bytes.insert(a.layer_bytes.end(), {p.token_bytes, p.weight_bytes, p.offload_bytes});
    a.layer_pipeline.insert(a.layer_pipeline.end(), {p.partitions, p.reuse_strategy});
  }
}

}  // namespace

void check_step_record_size(const moe_step_record* out) {
  if (!out) return;
  check(out->struct_size >= sizeof(uint32_t),
        "moe_step_record.struct_size is " + std::to_string(out->struct_size) +
            ": set it to sizeof(moe_step_record) (API version " + std::to_string(MOE_ENGINE_API_VERSION) + ")");
}

void write_step_record(const StepRecord& r, StepRecordArrays& a, moe_step_record* out) {
  flatten(r, a);
  if (!out) return;
  const uint32_t size = out->struct_size;
#define MOE_SET(member, value) \
  if (MOE_STRUCT_HAS(moe_step_record, size, member)) out->member = (value)
  // Scalars by the table; the offload and SSD groups read 0 on a resident step (StepRecord leaves them 0).
#define MOE_STEP_SCALAR_COPY(name, c_type, unit, group, label, meaning) MOE_SET(name, r.name);
#define MOE_STEP_ARRAY_SKIP(name, c_type, meaning)
  MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_COPY, MOE_STEP_ARRAY_SKIP)
#undef MOE_STEP_SCALAR_COPY
#undef MOE_STEP_ARRAY_SKIP
  MOE_SET(n_moe_layers, static_cast<int32_t>(a.experts_per_layer.size()));
  MOE_SET(experts_per_layer, a.experts_per_layer.data());
  MOE_SET(expert_tokens, a.expert_tokens.data());
  MOE_SET(offloaded, r.offloaded ? 1 : 0);
  MOE_SET(expert_tiers, r.offloaded ? a.expert_tiers.data() : nullptr);
  MOE_SET(expert_pinned, r.offloaded ? a.expert_pinned.data() : nullptr);
  const bool placed = !r.placements.empty();
  MOE_SET(n_devices, placed ? static_cast<int32_t>(r.placements[0].load_after.size()) : 0);
  MOE_SET(imbalance, placed ? a.imbalance.data() : nullptr);
  MOE_SET(device_loads, placed ? a.device_loads.data() : nullptr);
  MOE_SET(spilled_tokens, placed ? a.spilled_tokens.data() : nullptr);
  MOE_SET(moved_experts, placed ? a.moved_experts.data() : nullptr);
  MOE_SET(expert_device, placed ? a.expert_device.data() : nullptr);
  MOE_SET(device_busy_ms, placed ? a.device_busy_ms.data() : nullptr);
  MOE_SET(layer_ms, placed ? a.layer_ms.data() : nullptr);
  MOE_SET(layer_bytes, placed ? a.layer_bytes.data() : nullptr);
  MOE_SET(layer_pipeline, placed ? a.layer_pipeline.data() : nullptr);
  MOE_SET(device_peak_bytes, placed ? a.device_peak_bytes.data() : nullptr);
  MOE_SET(expert_spilled, placed ? a.expert_spilled.data() : nullptr);
  MOE_SET(selection_bias, r.selection_bias.empty() ? nullptr : a.selection_bias.data());
#undef MOE_SET
}

}  // namespace moe
