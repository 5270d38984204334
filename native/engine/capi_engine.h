// The engine behind the C API's opaque handle, shared by the C API's source files.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "include/moe_engine.h"
#include "telemetry/step_record_capi.h"
#include "train/run_loop.h"
#include "train/trainer.h"

struct moe_engine {
  std::unique_ptr<moe::Backend> backend;
  std::unique_ptr<moe::Trainer> trainer;
  std::string last_error, config_json, backend_name, backend_description;
  moe::StepRecordArrays record_arrays;  // what the last moe_step_record points into
  moe::RunControl control;  // pause, stop and checkpoint requests, for moe_engine_step and moe_engine_train
  std::string run_dir;
  std::string expert_shares;  // the last moe_engine_measure_experts result
};

namespace moe_capi {

// The config an engine is created with: config_json's, taking init_dir's model section when it has none (and the
// fine-tune's adapters from our checkpoint's config.json unless config_json has a finetune section).
moe::EngineConfig config_from(const char* config_json, const char* init_dir);
// msg into err (err_len bytes, NUL-terminated, truncated); nothing when err is null or err_len 0.
void copy_error(char* err, size_t err_len, const std::string& msg);

}  // namespace moe_capi
