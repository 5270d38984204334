// Packs one moe_step_record into the byte layout main/host/engine/step-record.ts decodes
// (little-endian, version 5):
//   f64[11]: version, step, loss, aux_loss, lr, grad_norm, tokens, step_ms, forward_ms, backward_ms, optimizer_ms
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[sum of experts] tokens per expert
//   f64[15]: offloaded (0 or 1), upload_ms, upload_hidden_ms, stall_ms, bytes_h2d, bytes_d2h, peak_device_bytes,
//            peak_host_bytes, peak_ssd_bytes, ssd_ms, bytes_ssd_read, bytes_ssd_write, cache_hits, cache_misses,
//            prefetch_lead_ms (all 0 when not offloaded)
//   when offloaded: u8[sum of experts] home tier per expert, then u8[sum of experts] pinned flag per expert
//   i32: n_devices (0 when experts run in the MoE layer itself); when > 0: f64[n_moe_layers × 4] imbalance before,
//        imbalance after, spilled tokens, moved experts; f64[n_moe_layers × 2 × n_devices] tokens per device
//        before, then after; i32[sum of experts] device of each expert's first rows (-1: no rows);
//        then (new in version 5) i32 executed: 1 when the record says how the layers ran on the devices (every
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

inline constexpr double kStepRecordVersion = 5;
inline constexpr size_t kExecutionScalars = 6;
inline constexpr size_t kStepRecordScalars = 11;
inline constexpr size_t kOffloadScalars = 15;

inline std::vector<uint8_t> pack_step_record(const moe_step_record& r) {
  const int32_t layers = r.n_moe_layers;
  const int64_t experts = std::accumulate(r.experts_per_layer, r.experts_per_layer + layers, int64_t{0});
  const bool offloaded = r.offloaded != 0 && r.expert_tiers && r.expert_pinned;
  const size_t per_expert = offloaded ? 2 * static_cast<size_t>(experts) : 0;
  const int32_t devices = r.n_devices > 0 && r.imbalance ? r.n_devices : 0;
  const size_t n_layers = static_cast<size_t>(layers), n_devices = static_cast<size_t>(devices);
  const bool executed = devices > 0 && r.device_busy_ms && r.layer_ms && r.layer_bytes && r.layer_pipeline &&
                        r.device_peak_bytes;
  const size_t execution =
      executed ? 8 * n_layers * (kExecutionScalars + n_devices) + 8 * n_layers + 8 * n_devices : 0;
  const size_t placement =
      devices ? 8 * n_layers * (4 + 2 * n_devices) + 4 * static_cast<size_t>(experts) + 4 + execution : 0;
  std::vector<uint8_t> buf(kStepRecordScalars * 8 + 4 + 4 * static_cast<size_t>(layers) +
                           4 * static_cast<size_t>(experts) + kOffloadScalars * 8 + per_expert + 4 + placement);
  const double scalars[kStepRecordScalars] = {kStepRecordVersion,      static_cast<double>(r.step), r.loss,
                                              r.aux_loss,              r.lr,
                                              r.grad_norm,             static_cast<double>(r.tokens),
                                              r.step_ms,               r.forward_ms,
                                              r.backward_ms,           r.optimizer_ms};
  uint8_t* out = buf.data();
  std::memcpy(out, scalars, sizeof scalars);
  out += sizeof scalars;
  std::memcpy(out, &layers, 4);
  out += 4;
  if (layers > 0) std::memcpy(out, r.experts_per_layer, 4 * static_cast<size_t>(layers));
  out += 4 * static_cast<size_t>(layers);
  if (experts > 0) std::memcpy(out, r.expert_tokens, 4 * static_cast<size_t>(experts));
  out += 4 * static_cast<size_t>(experts);
  const double offload[kOffloadScalars] = {offloaded ? 1.0 : 0.0,
                                           offloaded ? r.upload_ms : 0,
                                           offloaded ? r.upload_hidden_ms : 0,
                                           offloaded ? r.stall_ms : 0,
                                           offloaded ? static_cast<double>(r.bytes_h2d) : 0,
                                           offloaded ? static_cast<double>(r.bytes_d2h) : 0,
                                           offloaded ? static_cast<double>(r.peak_device_bytes) : 0,
                                           offloaded ? static_cast<double>(r.peak_host_bytes) : 0,
                                           offloaded ? static_cast<double>(r.peak_ssd_bytes) : 0,
                                           offloaded ? r.ssd_ms : 0,
                                           offloaded ? static_cast<double>(r.bytes_ssd_read) : 0,
                                           offloaded ? static_cast<double>(r.bytes_ssd_write) : 0,
                                           offloaded ? static_cast<double>(r.cache_hits) : 0,
                                           offloaded ? static_cast<double>(r.cache_misses) : 0,
                                           offloaded ? r.prefetch_lead_ms : 0};
  std::memcpy(out, offload, sizeof offload);
  out += sizeof offload;
  if (offloaded && experts > 0) {
    std::memcpy(out, r.expert_tiers, static_cast<size_t>(experts));
    std::memcpy(out + experts, r.expert_pinned, static_cast<size_t>(experts));
  }
  out += per_expert;
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
