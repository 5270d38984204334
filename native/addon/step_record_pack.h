// Packs one moe_step_record into the byte layout main/host/engine/step-record.ts decodes
// (little-endian, version 7):
//   f64: version; f64: S, the number of scalars; f64[S]: the table's scalars (moe_step_fields.h) in its order,
//        the offload and SSD groups 0 when not offloaded
//   i32: offloaded (0 or 1)
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[sum of experts] tokens per expert
//   when offloaded: u8[sum of experts] home tier per expert, then u8[sum of experts] pinned flag per expert
//   i32: biased (1 when the model has a router selection bias); when 1: f32[sum of experts] its value per expert
//   i32: n_devices (0 when experts run in the MoE layer itself); when > 0: f64[n_moe_layers × 4] imbalance before,
//        imbalance after, spilled tokens, moved experts; f64[n_moe_layers × 2 × n_devices] tokens per device
//        before, then after; i32[sum of experts] device of each expert's first rows (-1: no rows);
//        i32[sum of experts] tokens of each expert computed away from its home device (0 when not given);
//        then i32 executed: 1 when the record says how the layers ran on the devices (every
//        one of device_busy_ms, layer_ms, layer_bytes, layer_pipeline, device_peak_bytes set), else 0; when 1:
//          f64[n_moe_layers × (6 + n_devices)] per layer critical_ms, wall_ms, predicted_ms, token_bytes,
//            weight_bytes, offload_bytes, then device_busy_ms[n_devices];
//          i32[n_moe_layers × 2] per layer partitions, reuse strategy (0 none, 1..4 S1..S4);
//          f64[n_devices] device_peak_bytes
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "moe_engine.h"

namespace moe_addon {

static_assert(std::endian::native == std::endian::little, "the step record is little-endian; so is the host");

inline constexpr double kStepRecordVersion = 7;
inline constexpr size_t kExecutionScalars = 6;
#define MOE_STEP_SCALAR_ONE(name, c_type, unit, group, label, meaning) +1
#define MOE_STEP_ARRAY_NONE(name, c_type, meaning)
inline constexpr size_t kStepScalars = 0 MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_ONE, MOE_STEP_ARRAY_NONE);
#undef MOE_STEP_SCALAR_ONE
#undef MOE_STEP_ARRAY_NONE

inline std::vector<uint8_t> pack_step_record(const moe_step_record& r) {
  const int32_t layers = r.n_moe_layers;
  const int64_t experts = std::accumulate(r.experts_per_layer, r.experts_per_layer + layers, int64_t{0});
  const bool offloaded = r.offloaded != 0 && r.expert_tiers && r.expert_pinned;
  const size_t per_expert = offloaded ? 2 * static_cast<size_t>(experts) : 0;
  const bool biased = r.selection_bias != nullptr;
  const size_t bias_bytes = 4 + (biased ? 4 * static_cast<size_t>(experts) : 0);
  const int32_t devices = r.n_devices > 0 && r.imbalance ? r.n_devices : 0;
  const size_t n_layers = static_cast<size_t>(layers), n_devices = static_cast<size_t>(devices);
  const bool executed = devices > 0 && r.device_busy_ms && r.layer_ms && r.layer_bytes && r.layer_pipeline &&
                        r.device_peak_bytes;
  const size_t execution =
      executed ? 8 * n_layers * (kExecutionScalars + n_devices) + 8 * n_layers + 8 * n_devices : 0;
  const size_t placement =
      devices ? 8 * n_layers * (4 + 2 * n_devices) + 8 * static_cast<size_t>(experts) + 4 + execution : 0;
  std::vector<uint8_t> buf((2 + kStepScalars) * 8 + 4 + 4 + 4 * static_cast<size_t>(layers) +
                           4 * static_cast<size_t>(experts) + per_expert + bias_bytes + 4 + placement);
  const double scalars[2 + kStepScalars] = {
      kStepRecordVersion, static_cast<double>(kStepScalars),
#define MOE_STEP_SCALAR_VALUE(name, c_type, unit, group, label, meaning) \
  offloaded || !moe_step_group_offload_only(group) ? static_cast<double>(r.name) : 0.0,
#define MOE_STEP_ARRAY_NONE(name, c_type, meaning)
      MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_VALUE, MOE_STEP_ARRAY_NONE)
#undef MOE_STEP_SCALAR_VALUE
#undef MOE_STEP_ARRAY_NONE
  };
  uint8_t* out = buf.data();
  std::memcpy(out, scalars, sizeof scalars);
  out += sizeof scalars;
  const int32_t offloaded_flag = offloaded ? 1 : 0;
  std::memcpy(out, &offloaded_flag, 4);
  out += 4;
  std::memcpy(out, &layers, 4);
  out += 4;
  if (layers > 0) std::memcpy(out, r.experts_per_layer, 4 * static_cast<size_t>(layers));
  out += 4 * static_cast<size_t>(layers);
  if (experts > 0) std::memcpy(out, r.expert_tokens, 4 * static_cast<size_t>(experts));
  out += 4 * static_cast<size_t>(experts);
  if (offloaded && experts > 0) {
    std::memcpy(out, r.expert_tiers, static_cast<size_t>(experts));
    std::memcpy(out + experts, r.expert_pinned, static_cast<size_t>(experts));
  }
  out += per_expert;
  const int32_t biased_flag = biased ? 1 : 0;
  std::memcpy(out, &biased_flag, 4);
  out += 4;
  if (biased && experts > 0) std::memcpy(out, r.selection_bias, 4 * static_cast<size_t>(experts));
  out += bias_bytes - 4;
  std::memcpy(out, &devices, 4);
  out += 4;
  if (!devices) return buf;
  for (int32_t l = 0; l < layers; ++l) {
    const double summary[4] = {r.imbalance[2 * l], r.imbalance[2 * l + 1], static_cast<double>(r.spilled_tokens[l]),
                               static_cast<double>(r.moved_experts[l])};
    std::memcpy(out, summary, sizeof summary);
    out += sizeof summary;
  }
  for (int64_t i = 0; i < static_cast<int64_t>(layers) * 2 * devices; ++i) {
    const double load = static_cast<double>(r.device_loads[i]);
    std::memcpy(out, &load, 8);
    out += 8;
  }
  if (experts > 0) std::memcpy(out, r.expert_device, 4 * static_cast<size_t>(experts));
  out += 4 * static_cast<size_t>(experts);
  if (experts > 0 && r.expert_spilled) std::memcpy(out, r.expert_spilled, 4 * static_cast<size_t>(experts));
  out += 4 * static_cast<size_t>(experts);
  const int32_t flag = executed ? 1 : 0;
  std::memcpy(out, &flag, 4);
  out += 4;
  if (!executed) return buf;
  for (int32_t l = 0; l < layers; ++l) {
    const double scalars_l[kExecutionScalars] = {r.layer_ms[3 * l],
                                                 r.layer_ms[3 * l + 1],
                                                 r.layer_ms[3 * l + 2],
                                                 static_cast<double>(r.layer_bytes[3 * l]),
                                                 static_cast<double>(r.layer_bytes[3 * l + 1]),
                                                 static_cast<double>(r.layer_bytes[3 * l + 2])};
    std::memcpy(out, scalars_l, sizeof scalars_l);
    out += sizeof scalars_l;
    std::memcpy(out, r.device_busy_ms + static_cast<size_t>(l) * n_devices, 8 * n_devices);
    out += 8 * n_devices;
  }
  if (layers > 0) std::memcpy(out, r.layer_pipeline, 8 * n_layers);
  out += 8 * n_layers;
  for (int32_t d = 0; d < devices; ++d) {
    const double peak = static_cast<double>(r.device_peak_bytes[d]);
    std::memcpy(out, &peak, 8);
    out += 8;
  }
  return buf;
}

}  // namespace moe_addon
