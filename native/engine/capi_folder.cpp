// A model built from a folder with no trainer behind it (a chat with a folder, an export of a Hugging Face folder):
// only its weights, its routed experts optionally in an SSD-tier file of their own instead of the arena.
#include "capi_engine.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "train/checkpoint.h"
#include "train/compute_backend.h"
#include "train/lora_adapter.h"

namespace moe_capi {
namespace {

// The caller's config (or none) with one position of one sequence: nothing trains, and the model's max_seq_len
// alone bounds the positions.
std::string untrained_config(const char* config_json) {
  moe::json::Value root = moe::json::parse(config_json ? config_json : "{}", "config");
  moe::check(root.is_object(), "config: must be a JSON object");
  moe::json::Value train = root.find("train") ? *root.find("train") : moe::json::Value::make_object();
  moe::check(train.is_object(), "config.train: must be a JSON object");
  train.set("seq_len", moe::json::Value::of(1));
  train.set("batch_size", moe::json::Value::of(1));
  root.set("train", std::move(train));
  return moe::json::dump(root);
}

}  // namespace

// An adapter folder with a config.json and no base named is a run's own export, whose base the config's seed makes.
bool adapter_on_base(const std::string& dir, const std::string& base_dir) {
  return moe::is_peft_adapter(dir) && (!base_dir.empty() || !moe::fs::exists(moe::fs::join(dir, "config.json")));
}

FolderModel open_folder_model(const std::string& dir, const char* config_json, const std::string* ssd_dir,
                              int cache_experts, const std::string& base_dir, bool answering) {
  // A PEFT adapter folder on its base: the one named, else the one its adapter_config.json names.
  const bool on_base = adapter_on_base(dir, base_dir);
  const std::string weights = !on_base ? dir : base_dir.empty() ? moe::peft_base_folder(dir) : base_dir;
  if (on_base && !moe::fs::exists(moe::fs::join(weights, "config.json")))
    moe::fail(weights + ": no config.json; the base of a PEFT adapter is a Hugging Face model folder or one of our "
                        "checkpoints");
  FolderModel f;
  f.dir = dir;
  f.weights = weights;
  if (on_base) f.base = weights;
  f.config = config_from(untrained_config(config_json).c_str(), weights.c_str());
  if (on_base) f.config.finetune = moe::finetune_of_peft_adapter(dir, f.config.model);
  const moe::EngineConfig& cfg = f.config;
  f.backend = moe::make_compute_backend(cfg.train);
  f.model = std::make_unique<moe::Model>(cfg.model, *f.backend, cfg.train.compute_dtype, cfg.finetune);
  // Experts at home in the SSD tier never enter the arena: the load writes each into the file as it reads it.
  if (ssd_dir)
    f.experts = std::make_unique<moe::SsdWeightsHome>(
        *f.backend, f.model->layout(), cfg.train.seed, *ssd_dir,
        cache_experts > 0 ? cache_experts : default_cache_experts(f.model->config()),
        answering ? f.model->bf16_only_tensors() : std::vector<bool>{});
  return f;
}

void load_folder_weights(FolderModel& f) {
  // A folder holds its weights (an adapter's base too), so only what it lacks is drawn from the seed; an adapter
  // folder with a config of its own stands on the seed's base.
  const bool adapter = moe::is_peft_adapter(f.dir);
  const uint64_t& seed = f.config.train.seed;
  if (adapter && f.base.empty()) f.model->init(seed, f.experts == nullptr);
  else moe::load_weights(f.weights, *f.model, f.experts.get(), &seed);
  if (adapter) moe::load_peft_adapter(f.dir, *f.model, f.config.finetune, f.experts.get());
}

FolderModel load_folder_model(const std::string& dir, const char* config_json, const std::string* ssd_dir,
                              int cache_experts, const std::string& base_dir, bool answering) {
  FolderModel f = open_folder_model(dir, config_json, ssd_dir, cache_experts, base_dir, answering);
  load_folder_weights(f);
  return f;
}

}  // namespace moe_capi
