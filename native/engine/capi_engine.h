// The engine behind the C API's opaque handle, shared by the C API's source files.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "include/moe_engine.h"
#include "model/model.h"
#include "offload/ssd_weights_home.h"
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

// Runs fn on a handle (an engine, a generation session): an exception becomes MOE_ERROR with its message in the
// handle's last_error.
template <typename Handle, typename Fn>
int guarded(Handle* handle, Fn&& fn) {
  if (!handle) return MOE_ERROR;
  try {
    handle->last_error.clear();
    return fn();
  } catch (const std::exception& e) {
    handle->last_error = e.what();
    return MOE_ERROR;
  }
}

// A generation's SSD-tier host cache when the caller leaves it to the engine.
inline int default_cache_experts(const moe::ModelConfig& m) { return 4 * m.top_k; }

// A model built from a folder (ours, Hugging Face, a PEFT adapter's) with no trainer: only its weights. ssd_dir
// set (empty: a fresh temporary directory): its routed experts live in an SSD-tier file there, with a host cache
// of cache_experts entries (0: default_cache_experts), never in the arena. config_json (may be null): the
// backend, compute dtype, threads and seed, from its train section. Members are destroyed experts first, backend
// last.
struct FolderModel {
  moe::EngineConfig config;  // as the model was built from it
  std::unique_ptr<moe::Backend> backend;
  std::unique_ptr<moe::Model> model;
  std::unique_ptr<moe::SsdWeightsHome> experts;
  std::string base;  // a PEFT adapter's folder: the base model folder it was loaded on; else empty
  // What load_folder_weights reads: the folder, and the folder whose weights it reads (dir, or an adapter's base).
  std::string dir, weights;
};
// Whether dir is a PEFT adapter's folder to load on a base model (base_dir, empty: the one it names).
bool adapter_on_base(const std::string& dir, const std::string& base_dir);
// base_dir: for a PEFT adapter's folder, its base model folder (empty: the one its adapter_config.json names).
// answering: the model only answers (a generation session's); in bf16 compute its experts' SSD records then keep
// their linear weights in bf16.
FolderModel load_folder_model(const std::string& dir, const char* config_json, const std::string* ssd_dir,
                              int cache_experts, const std::string& base_dir = "", bool answering = false);
// load_folder_model in two halves: the model (and its SSD home) with no weight read yet, then its weights. A
// generation session sets up its model in between (its expert slots, answering only), so that in bf16 compute each
// weight is laid out as the load reads it.
FolderModel open_folder_model(const std::string& dir, const char* config_json, const std::string* ssd_dir,
                              int cache_experts, const std::string& base_dir, bool answering);
void load_folder_weights(FolderModel& f);

}  // namespace moe_capi
