// moe_model_describe: the engine's view of a config without building an engine (no backend, no memory
// for the model): the effective config, the model's features and parameter counts, and the families and
// Hugging Face model types this engine knows.
#include <string>

#include "capi_text.h"
#include "core/error.h"
#include "include/moe_engine.h"
#include "model/config.h"
#include "model/describe.h"
#include "model/features.h"
#include "train/hf_families.h"

namespace {

moe::json::Value describe(const char* config_json) {
  using moe::json::Value;
  moe::check(config_json != nullptr, "config: missing (NULL)");
  const moe::EngineConfig c = moe::parse_config_text(config_json, "config");
  Value families = Value::make_array();
  for (const moe::ModelFamily& f : moe::model_families()) {
    moe::ModelConfig defaults;
    defaults.family = f.name;
    defaults.qkv_bias = f.features.qkv_bias;
    defaults.tie_embeddings = f.features.tie_embeddings;
    Value row = Value::make_object();
    row.set("name", Value::of(f.name));
    row.set("summary", Value::of(f.summary));
    row.set("features", moe::features_to_json(moe::model_features(defaults)));
    families.push(row);
  }
  Value hf_types = Value::make_array();
  for (const moe::HfFamily& f : moe::hf_families()) {
    Value row = Value::make_object();
    row.set("model_type", Value::of(f.model_type));
    row.set("label", Value::of(f.label));
    row.set("family", Value::of(f.family));
    hf_types.push(row);
  }
  Value o = Value::make_object();
  o.set("config", moe::config_to_json(c));
  o.set("features", moe::features_to_json(moe::model_features(c.model)));
  o.set("params", moe::describe_params(c.model));
  if (c.finetune.enabled) o.set("finetune", moe::describe_finetune(c.model, c.finetune));
  o.set("families", families);
  o.set("hf_model_types", hf_types);
  return o;
}


}  // namespace

extern "C" int64_t moe_model_describe(const char* config_json, char* out, size_t out_len) {
  try {
    return moe::write_c_text(moe::json::dump(describe(config_json)), out, out_len);
  } catch (const std::exception& e) {
    moe::write_c_text(e.what(), out, out_len);
    return -1;
  }
}
