#include "train/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "train/checkpoint_checksums.h"
#include "train/arena_view.h"
#include "train/checkpoint_read.h"
#include "train/hf_experts.h"
#include "train/hf_interchange.h"
#include "train/hf_storage.h"
#include "train/safetensors.h"
#include "train/stored_part.h"

namespace moe {
namespace {

constexpr uint64_t kMaxJsonBytes = 64ull << 20;
constexpr const char* kFormat = "moe-engine-checkpoint";
constexpr int kVersion = 1;
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53: larger JSON numbers are not exact integers

json::Value read_json(const std::string& path) { return json::parse(fs::read_file(path, kMaxJsonBytes), path); }

std::vector<TensorSource> identity_sources(const ParamLayout& layout, const std::string& prefix) {
  std::vector<TensorSource> out;
  for (const ParamTensor& t : layout.tensors()) out.push_back({&t, {{prefix + t.name, t.shape, 0}}});
  return out;
}

json::Value state_to_json(const TrainerState& s) {
  auto exact = [](const char* field, double v) {
    if (v < 0 || v > kMaxExactInt)
      fail(std::string("trainer state: ") + field + " = " + json::dump(json::Value::of(v)) +
           " is outside [0, 2^53] and cannot be stored exactly in trainer_state.json");
    return json::Value::of(v);
  };
  json::Value o = json::Value::make_object();
  o.set("format", json::Value::of(kFormat));
  o.set("version", json::Value::of(kVersion));
  o.set("step", exact("step", static_cast<double>(s.step)));
  o.set("data_cursor", exact("data_cursor", static_cast<double>(s.data_cursor)));
  o.set("tokens_seen", exact("tokens_seen", static_cast<double>(s.tokens_seen)));
  o.set("seed", exact("seed", static_cast<double>(s.seed)));
  o.set("data_path", json::Value::of(s.data_path));
  return o;
}

TrainerState state_from_json(const json::Value& o, const std::string& path) {
  if (!o.is_object()) fail(path + ": expected a JSON object; the checkpoint is corrupt");
  const json::Value* format = o.find("format");
  if (!format || !format->is_string() || format->string != kFormat)
    fail(path + ": field 'format' must be \"" + kFormat + "\"; this is not an engine trainer state");
  const json::Value* version = o.find("version");
  if (!version || !version->is_number() || version->number != kVersion)
    fail(path + ": field 'version' must be " + std::to_string(kVersion) +
         "; the checkpoint was written by another engine version");
  auto whole = [&](const char* field) {
    const json::Value* v = o.find(field);
    if (!v || !v->is_number() || v->number != std::floor(v->number) || v->number < 0 || v->number > kMaxExactInt)
      fail(path + ": field '" + field + "' must be a whole number in [0, 2^53]" +
           (v ? ", got " + json::dump(*v) : std::string(", but it is missing")) + "; the checkpoint is corrupt");
    return v->number;
  };
  TrainerState s;
  s.step = static_cast<int64_t>(whole("step"));
  s.data_cursor = static_cast<uint64_t>(whole("data_cursor"));
  s.tokens_seen = static_cast<int64_t>(whole("tokens_seen"));
  s.seed = static_cast<uint64_t>(whole("seed"));
  const json::Value* dp = o.find("data_path");
  if (!dp || !dp->is_string()) fail(path + ": field 'data_path' must be a string; the checkpoint is corrupt");
  s.data_path = dp->string;
  for (const auto& [key, v] : o.object)
    if (key != "format" && key != "version" && key != "step" && key != "data_cursor" && key != "tokens_seen" &&
        key != "seed" && key != "data_path")
      fail(path + ": unknown field '" + key + "'; the checkpoint was written by another engine version");
  return s;
}

// Whether a write may go to dir: absent (true), or a directory (true when empty); anything else fails naming it.
bool absent_or_empty(const std::string& dir, const char* choose) {
  if (!fs::exists(dir)) return true;
  if (!fs::is_dir(dir)) fail(dir + ": exists and is not a directory; " + choose);
  std::error_code ec;
  const bool empty = std::filesystem::is_empty(dir, ec);
  if (ec) fail(dir + ": cannot list the directory: " + ec.message() + "; check permissions");
  return empty;
}

}  // namespace

void check_checkpoint_target(const std::string& dir) {
  if (absent_or_empty(dir, "choose another checkpoint path")) return;
  if (!fs::exists(fs::join(dir, "config.json")))
    fail(dir + ": exists and is not a checkpoint (no config.json), so it will not be replaced; choose a new path "
               "or remove the directory");
  if (is_hf_checkpoint(dir))
    fail(dir + ": is a Hugging Face model folder, not one of our checkpoints, so it will not be replaced; choose a "
               "new path");
}

void check_export_target(const std::string& dir) {
  if (!absent_or_empty(dir, "choose another folder to export to"))
    fail(dir + ": already exists and is not empty; an export never replaces a folder (it may be the model it "
               "reads, or another you made): choose a new folder");
}


uint64_t checkpoint_bytes(const Model& model, bool with_optimizer) {
  const ParamLayout& layout = model.layout();
  const TrainableSet& trainable = model.trainable();
  uint64_t floats = 0;
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const uint64_t n = layout.tensors()[i].numel;
    floats += n + (with_optimizer && trainable.trains(i) ? 2 * n : 0);
  }
  // Each safetensors header names every tensor (well under 1 KiB each); the JSON files and checksums are small.
  return floats * sizeof(float) + 3 * 1024 * layout.tensors().size() + (1 << 20);
}

std::string checkpoint_space_error(const std::string& run_dir, uint64_t checkpoint, int64_t count, int64_t ssd_to_come,
                                   int64_t free) {
  const bool shared = ssd_to_come >= 0;
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(count, 1));
  const uint64_t need = checkpoint * n + (shared ? static_cast<uint64_t>(ssd_to_come) : 0);
  if (free < 0 || need <= static_cast<uint64_t>(free)) return "";
  const std::string each = fs::size_text(checkpoint);
  return "train: " +
         (n == 1 ? "a checkpoint of this run takes about " + each
                 : "this run keeps up to " + std::to_string(n) + " checkpoints of about " + each + " each on disk (" +
                       fs::size_text(checkpoint * n) + ")") +
         " (every weight, and the AdamW moments of the trained ones)" +
         (shared ? " and the SSD tier's expert file may still take " + fs::size_text(ssd_to_come) + " on the same disk"
                 : std::string()) +
         ", but " + run_dir + " has " + fs::size_text(static_cast<uint64_t>(free)) +
         " free, so this run would train and then fail at a save. Free space there or choose a run directory on a "
         "larger disk" +
         (n > 1 ? std::string(", keep fewer (train.keep_checkpoints) or save less often (train.checkpoint_every)")
                : std::string()) +
         (shared ? " (or point offload.ssd_dir at another disk)" : "");
}

void save_checkpoint(const std::string& dir, const EngineConfig& cfg, Model& model, AdamWOptimizer* opt,
                     const TrainerState* state, ExpertStateHome* experts) {
  check_checkpoint_target(dir);
  if (json::dump(model_config_to_json(cfg.model)) != json::dump(model_config_to_json(model.config())))
    fail(dir + ": cannot save: the config's model section differs from the model's own config; pass the config "
               "the model was built from");
  const std::string config_text = json::dump(config_to_json(cfg), 2) + "\n";
  const std::string state_text = state ? json::dump(state_to_json(*state), 2) + "\n" : "";
  Backend& be = model.backend();
  be.synchronize();
  const ParamLayout& layout = model.layout();
  const TrainableSet& trainable = model.trainable();

  fs::write_dir_atomic(dir, [&](const std::string& tmp) {
    fs::write_file_atomic(fs::join(tmp, "config.json"), config_text);
    {
      ArenaView params(be, model.params(), layout.expert_ranges(), experts, kWeights);
      st::Writer w;
      w.set_metadata("format", "pt");
      for (const ParamTensor& t : layout.tensors())
        w.add_f32_streamed(t.name, t.shape, [&params, &t, &dir] {
          const float* p = params.tensor(t.offset, t.numel);
          // A diverged run's weights are never written: a checkpoint is what a resume or an export trusts.
          if (!std::all_of(p, p + t.numel, [](float v) { return std::isfinite(v); }))
            fail(dir + ": not saved: parameter '" + t.name + "' holds a NaN or an infinity (the run diverged); "
                       "resume or restart from an earlier checkpoint");
          return p;
        });
      w.write(fs::join(tmp, "model.safetensors"));
    }
    if (opt) {
      // Moments of trained tensors only (a frozen tensor has none).
      ArenaView m(be, opt->m(), trainable.grad_expert_ranges(), experts, kMoment1);
      ArenaView v(be, opt->v(), trainable.grad_expert_ranges(), experts, kMoment2);
      st::Writer w;
      w.set_metadata("format", "pt");
      for (ArenaView* moment : {&m, &v})
        for (size_t i = 0; i < layout.tensors().size(); ++i) {
          const ParamTensor& t = layout.tensors()[i];
          if (!trainable.trains(i)) continue;
          const size_t at = trainable.grad_offset(i);
          w.add_f32_streamed((moment == &m ? "m." : "v.") + t.name, t.shape,
                             [moment, at, n = t.numel] { return moment->tensor(at, n); });
        }
      w.write(fs::join(tmp, "optimizer.safetensors"));
    }
    if (state) fs::write_file_atomic(fs::join(tmp, "trainer_state.json"), state_text);
    std::vector<std::string> files{"config.json", "model.safetensors"};
    if (opt) files.push_back("optimizer.safetensors");
    if (state) files.push_back("trainer_state.json");
    write_checksums(tmp, files);
  });
}

bool is_hf_checkpoint(const std::string& dir) {
  const std::string path = fs::join(dir, "config.json");
  if (!fs::exists(path)) return false;
  const json::Value root = read_json(path);
  return root.is_object() && root.find("model_type") != nullptr;
}

ModelConfig read_checkpoint_model_config(const std::string& dir) {
  const std::string path = fs::join(dir, "config.json");
  if (!fs::exists(path))
    fail(dir + ": no config.json; pass a checkpoint directory written by the engine or a Hugging Face model "
               "directory");
  verify_checksum(dir, "config.json");
  const json::Value root = read_json(path);
  if (root.is_object() && root.find("model_type")) return hf_to_model_config(root, path);
  try {
    return parse_config(root).model;
  } catch (const EngineError& e) {
    fail(path + ": " + e.what());
  }
}

std::vector<std::string> check_hf_tensors(const st::TensorSet& ts, const ModelConfig& m, HfType type,
                                          const HfStorage& storage) {
  std::vector<std::string> problems;
  try {
    check_hf_tensors_supported(ts, type);
  } catch (const EngineError& e) {
    problems.push_back(e.what());
  }
  const ParamLayout layout(m);
  const std::vector<TensorSource> sources = hf_tensor_sources(m, layout, type, stored_expert_layout(ts));
  check_stored(ts, {{&sources, nullptr}}, &storage, &problems);
  return problems;
}

void load_weights(const std::string& dir, Model& model, ExpertStateHome* experts, const uint64_t* init_rest) {
  const ParamLayout& layout = model.layout();
  const bool hf = is_hf_checkpoint(dir);
  if (!hf) verify_checksum(dir, "model.safetensors");  // before a byte of it is parsed
  const st::TensorSet ts(dir);
  std::vector<TensorSource> sources;
  HfStorage storage;
  if (hf) {
    const std::string path = fs::join(dir, "config.json");
    HfType type = HfType::Mixtral;
    try {
      const json::Value config = read_json(path);
      type = parse_hf_model_type(config.find("model_type")->string);
      model_to_hf_config(model.config(), type, st::DType::F32);
      storage = hf_storage(config, path, hf_family(type));
    } catch (const EngineError& e) {
      fail(path + ": cannot load this Hugging Face checkpoint into the model: " + e.what());
    }
    check_hf_tensors_supported(ts, type);
    sources = hf_tensor_sources(model.config(), layout, type, stored_expert_layout(ts));
  } else {
    sources = identity_sources(layout, "");
    // A base checkpoint (no adapters) under a LoRA model: the adapters keep their values.
    const auto has_adapters = std::any_of(layout.tensors().begin(), layout.tensors().end(),
                                          [&](const ParamTensor& t) { return t.adapter && ts.find(t.name); });
    if (!has_adapters)
      sources.erase(std::remove_if(sources.begin(), sources.end(), [](const TensorSource& x) { return x.param->adapter; }),
                    sources.end());
  }
  // Whether some model tensor is left as it is (the adapters beside a base checkpoint).
  std::set<const ParamTensor*> read;
  for (const TensorSource& s : sources) {
    read.insert(s.param);
    for (const StoredPart& p : s.parts) read.insert(p.experts.begin(), p.experts.end());
  }
  if (init_rest)
    for (const ParamTensor& t : layout.tensors())
      if (!read.count(&t) && !(experts && layout.in_expert_range(t.offset)))
        model.init_range(*init_rest, t.offset, t.offset + t.numel);
  ArenaStaging host(model.backend(), model.params(), model.num_params(), experts ? &layout.expert_ranges() : nullptr);
  ArenaTarget target{&sources, host.data(), nullptr, &layout.expert_ranges(), experts, kWeights,
                     read.size() < layout.tensors().size()};
  if (host.in_place() && model.lays_out_while_loading()) {
    target.take = [&model](size_t begin, size_t end, const float* values) { model.weights_loaded(begin, end, values); };
    target.takes = [&model](size_t begin, size_t end) { return model.lays_out_any(begin, end); };
  }
  read_checked(ts, {target}, hf ? &storage : nullptr);
  host.put();
}

bool read_trainer_state(const std::string& dir, TrainerState& state) {
  const std::string path = fs::join(dir, "trainer_state.json");
  if (!fs::exists(path)) return false;
  verify_checksum(dir, "trainer_state.json");
  state = state_from_json(read_json(path), path);
  return true;
}

bool load_optimizer_state(const std::string& dir, Model& model, AdamWOptimizer& opt, TrainerState& state,
                          ExpertStateHome* experts) {
  const std::string path = fs::join(dir, "optimizer.safetensors");
  if (!fs::exists(path)) return false;
  TrainerState s;
  if (!read_trainer_state(dir, s))
    fail(dir + ": has optimizer.safetensors but no trainer_state.json, so the step and data position are unknown; "
               "resume from a complete checkpoint, or start from its weights only");
  verify_checksum(dir, "optimizer.safetensors");
  const st::TensorSet ts(path);
  // Only the trained tensors' moments are stored and read.
  const TrainableSet& trainable = model.trainable();
  const ParamLayout& layout = model.layout();
  std::vector<TensorSource> m_src = identity_sources(layout, "m."), v_src = identity_sources(layout, "v.");
  for (std::vector<TensorSource>* src : {&m_src, &v_src})
    src->erase(std::remove_if(src->begin(), src->end(),
                              [&](const TensorSource& x) { return !trainable.trains(x.param - layout.tensors().data()); }),
               src->end());
  // Straight into the packed layout: one host copy of each moment's non-expert part, not a layout-sized one.
  std::vector<size_t> packed;
  for (const TensorSource& x : m_src) packed.push_back(trainable.grad_offset(x.param - layout.tensors().data()));
  Backend& be = model.backend();
  const std::vector<ExpertRange>& ranges = trainable.grad_expert_ranges();
  const std::vector<ExpertRange>* skip = experts ? &ranges : nullptr;
  ArenaStaging pm(be, opt.m(), model.num_grads(), skip), pv(be, opt.v(), model.num_grads(), skip);
  read_checked(ts,
               {{&m_src, pm.data(), &packed, &ranges, experts, kMoment1}, {&v_src, pv.data(), &packed, &ranges, experts, kMoment2}},
               nullptr);
  pm.put();
  pv.put();
  state = s;
  return true;
}

}  // namespace moe
