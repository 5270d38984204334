// One record per training step: what the C API hands out (telemetry/step_record_capi.h) and what the
// workbench stores. Its scalars are the table in moe_step_fields.h; the per-layer arrays are written here.
#pragma once
#include <cstdint>
#include <vector>

#include "include/moe_step_fields.h"

namespace moe {

// One MoE layer's placement decision for the step's tokens, from the placement policy.
struct LayerPlacement {
  std::vector<int64_t> load_before, load_after;  // [D] tokens per device: static homes vs the placement
  double imbalance_before = 1, imbalance_after = 1;  // max/mean of those
  int64_t spilled_tokens = 0;                    // tokens computed away from their expert's home device
  int moved_experts = 0;                         // weight copies the placement needs
  std::vector<int32_t> expert_device;            // [E] device of the expert's first rows (-1: no rows)
  std::vector<int32_t> expert_spilled;           // [E] tokens of the expert computed away from its home device

  // How the layer ran on the devices (measured, forward + backward; devices/device_experts.h).
  std::vector<double> device_busy_ms;  // [D] each device's time on its streams (compute, copies), CPU time
  double critical_ms = 0;    // the slowest device's pipelined time: what the layer's expert phase takes on D devices
  double wall_ms = 0;        // wall time of the expert phase in this process (devices share its cores)
  double predicted_ms = 0;   // equation 10's forward + backward time for the chosen reuse strategy (0: none)
  int64_t token_bytes = 0;   // token rows sent between devices: dispatch, return, re-sends
  int64_t weight_bytes = 0;  // weights sent to experts' guest devices and gradients sent home
  int64_t offload_bytes = 0;  // activations offloaded to the host and restored by the reuse strategy
  int partitions = 1;        // pipeline n
  int reuse_strategy = 0;    // 0 none, 1..4 S1..S4
};

struct StepRecord {
  // Every per-step scalar (step, loss, times, offload and SSD measurements): MOE_STEP_RECORD_FIELDS' SCALARs.
#define MOE_STEP_SCALAR_MEMBER(name, c_type, unit, group, label, meaning) c_type name = 0;
#define MOE_STEP_ARRAY_IGNORED(name, c_type, meaning)
  MOE_STEP_RECORD_FIELDS(MOE_STEP_SCALAR_MEMBER, MOE_STEP_ARRAY_IGNORED)
#undef MOE_STEP_SCALAR_MEMBER
#undef MOE_STEP_ARRAY_IGNORED

  std::vector<std::vector<int32_t>> expert_tokens;  // [MoE layer][expert] tokens computed this step
  // [MoE layer][expert] each expert's selection bias after the step (and its load-balancing update, which the
  // step's expert_tokens explain); empty when the model has no selection bias.
  std::vector<std::vector<float>> selection_bias;

  // Expert offload (docs/offload.md): the offload and SSD scalars and these arrays are zero / empty when
  // `offloaded` is false (resident run).
  bool offloaded = false;
  std::vector<std::vector<uint8_t>> expert_tiers;   // [MoE layer][expert] home tier: 0 device, 1 host, 2 SSD
  std::vector<std::vector<uint8_t>> expert_pinned;  // [MoE layer][expert] 1 when pinned this step

  // Placement across devices (empty with one device): per MoE layer.
  std::vector<LayerPlacement> placements;
  std::vector<int64_t> device_peak_bytes;  // [D] the largest each device's buffers grew to (empty: one device)
};

}  // namespace moe
