// StepRecord -> moe_step_record: the C API's copy of a step's telemetry, written only as far as the caller's
// struct_size reaches (moe_engine.h, versioned structs).
#pragma once
#include <cstdint>
#include <vector>

#include "include/moe_engine.h"
#include "telemetry/step_record.h"

namespace moe {

// The flattened per-layer arrays of the last record, which moe_step_record points into until the next step.
struct StepRecordArrays {
  std::vector<int32_t> experts_per_layer, expert_tokens;
  std::vector<uint8_t> expert_tiers, expert_pinned;
  std::vector<double> imbalance;
  std::vector<int64_t> device_loads, spilled_tokens;
  std::vector<int32_t> moved_experts, expert_device, expert_spilled;
  std::vector<double> device_busy_ms, layer_ms;
  std::vector<int64_t> layer_bytes, device_peak_bytes;
  std::vector<int32_t> layer_pipeline;
  std::vector<float> selection_bias;
};

// Throws EngineError naming struct_size when the caller's record cannot be one (checked before the step runs).
void check_step_record_size(const moe_step_record* out);

// Flattens r into arrays and writes every member of *out that fits inside out->struct_size; bytes past it are
// never touched, so a client built against an older (shorter) record stays intact.
void write_step_record(const StepRecord& r, StepRecordArrays& arrays, moe_step_record* out);

}  // namespace moe
