#include "train/hf_inspect.h"

#include <map>
#include <set>

#include "core/error.h"
#include "core/fsutil.h"
#include "model/params.h"
#include "train/checkpoint.h"
#include "train/hf_experts.h"
#include "train/hf_interchange.h"
#include "train/hf_storage.h"
#include "train/safetensors.h"

namespace moe {
namespace {

constexpr uint64_t kMaxJsonBytes = 64ull << 20;

using json::Value;

Value strings(const std::vector<std::string>& v) {
  Value a = Value::make_array();
  for (const std::string& s : v) a.push(Value::of(s));
  return a;
}

// The weight files: model.safetensors, or the shards the index names (each present or not).
Value weight_files(const std::string& dir, std::vector<std::string>& problems, bool& complete) {
  Value w = Value::make_object();
  Value shards = Value::make_array();
  complete = true;
  const std::string single = fs::join(dir, "model.safetensors");
  const std::string index = fs::join(dir, "model.safetensors.index.json");
  if (fs::exists(single)) {
    w.set("format", Value::of("single"));
    Value s = Value::make_object();
    s.set("file", Value::of("model.safetensors"));
    s.set("present", Value::of(true));
    shards.push(s);
  } else if (fs::exists(index)) {
    w.set("format", Value::of("sharded"));
    const Value root = json::parse(fs::read_file(index, kMaxJsonBytes), index);
    const Value* map = root.is_object() ? root.find("weight_map") : nullptr;
    if (!map || !map->is_object()) {
      problems.push_back(index + ": expected an object with a \"weight_map\" object mapping tensor names to shard files");
      complete = false;
    } else {
      std::map<std::string, int> per_file;
      for (const auto& [name, file] : map->object)
        if (file.is_string()) ++per_file[file.string];
      for (const auto& [file, n] : per_file) {
        const bool present = file.find('/') == std::string::npos && fs::exists(fs::join(dir, file));
        Value s = Value::make_object();
        s.set("file", Value::of(file));
        s.set("present", Value::of(present));
        s.set("tensors", Value::of(n));
        shards.push(s);
        if (!present) {
          complete = false;
          problems.push_back(index + ": shard '" + file + "' (" + std::to_string(n) +
                             " tensors) is missing: download every shard listed in the index");
        }
      }
    }
  } else {
    w.set("format", Value::of("none"));
    complete = false;
    problems.push_back(dir + ": neither model.safetensors nor model.safetensors.index.json found; the folder has no "
                             "safetensors weights");
  }
  w.set("shards", shards);
  w.set("complete", Value::of(complete));
  return w;
}

}  // namespace

json::Value inspect_hf_dir(const std::string& dir) {
  const std::string path = fs::join(dir, "config.json");
  if (!fs::is_dir(dir)) fail(dir + ": not a folder; pick a Hugging Face model folder (config.json and safetensors)");
  if (!fs::exists(path))
    fail(dir + ": no config.json, so this is not a Hugging Face model folder (expected config.json beside "
               "model.safetensors or model.safetensors.index.json)");
  const Value hf = json::parse(fs::read_file(path, kMaxJsonBytes), path);
  const Value* mt = hf.is_object() ? hf.find("model_type") : nullptr;
  if (!mt || !mt->is_string())
    fail(path + ": no string field 'model_type', so this is not a Hugging Face model config");

  std::vector<std::string> problems, notes;
  Value o = Value::make_object();
  o.set("dir", Value::of(dir));
  o.set("model_type", Value::of(mt->string));
  if (const Value* a = hf.find("architectures"); a && a->is_array() && !a->array.empty() && a->array[0].is_string())
    o.set("architecture", Value::of(a->array[0].string));

  // The model type and its config, converted as the import converts it.
  const HfFamily* row = nullptr;
  ModelConfig m;
  bool config_ok = false;
  try {
    row = &hf_family(parse_hf_model_type(mt->string));
    o.set("label", Value::of(row->label));
    m = hf_to_model_config(hf, path);
    o.set("config", model_config_to_json(m));
    config_ok = true;
  } catch (const EngineError& e) {
    problems.push_back(e.what());
  }
  HfStorage storage;
  if (row) try {
      storage = hf_storage(hf, path, *row);
    } catch (const EngineError& e) {
      if (config_ok) problems.push_back(e.what());  // else already said by the conversion
      config_ok = false;
    }

  bool complete = false;
  o.set("weights", weight_files(dir, problems, complete));
  if (complete) {
    try {
      const st::TensorSet ts(dir);
      std::map<std::string, int64_t> dtypes;
      uint64_t bytes = 0;
      for (const auto& [name, e] : ts.entries()) {
        if (storage.skipped(name)) continue;
        ++dtypes[st::dtype_name(e.info->dtype)];
        bytes += e.info->end - e.info->begin;
      }
      Value d = Value::make_object();
      for (const auto& [name, n] : dtypes) d.set(name, Value::of(n));
      o.set("dtypes", d);
      o.set("tensors", Value::of(static_cast<int64_t>(ts.entries().size())));
      o.set("bytes", Value::of(static_cast<double>(bytes)));
      o.set("expert_layout", Value::of(hf_expert_layout_name(stored_expert_layout(ts))));
      notes = hf_storage_notes(storage, ts);
      if (config_ok) {
        const std::vector<std::string> found = check_hf_tensors(ts, m, row->type, storage);
        problems.insert(problems.end(), found.begin(), found.end());
        const ParamLayout layout(m);
        size_t expected = 0;
        for (const TensorSource& s : hf_tensor_sources(m, layout, row->type, stored_expert_layout(ts)))
          expected += s.parts.size();
        o.set("expected_tensors", Value::of(static_cast<int64_t>(expected)));
      }
    } catch (const EngineError& e) {
      problems.push_back(e.what());  // a truncated or corrupt file, named by the reader
    }
  }
  o.set("supported", Value::of(config_ok && complete && problems.empty()));
  o.set("problems", strings(problems));
  o.set("notes", strings(notes));
  return o;
}

}  // namespace moe
