// The C API over Trainer: converts arguments, catches every exception into a status code plus
// message, and keeps the last step record's arrays alive for the caller.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <signal.h>
#include <unistd.h>

#include "backend/registry.h"
#include "capi_engine.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "include/moe_engine.h"
#include "telemetry/step_record_capi.h"
#include "train/arena_view.h"
#include "train/checkpoint_checksums.h"
#include "train/checkpoint_export.h"
#include "train/compute_backend.h"
#include "train/expert_shares.h"
#include "train/hf_interchange.h"
#include "train/lora_adapter.h"
#include "train/run_loop.h"
#include "train/trainer.h"

namespace moe_capi {

void copy_error(char* err, size_t err_len, const std::string& msg) {
  if (!err || err_len == 0) return;
  size_t n = std::min(err_len - 1, msg.size());
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

moe::EngineConfig config_from(const char* config_json, const char* init_dir) {
  moe::json::Value root = moe::json::parse(config_json ? config_json : "", "config");
  if (root.is_object() && !root.find("model") && init_dir && *init_dir) {
    // Fine-tuning from a checkpoint: its model config, this config's training settings.
    root.set("model", moe::model_config_to_json(moe::read_checkpoint_model_config(init_dir)));
    // A fine-tune's checkpoint holds its adapters: the model takes them unless this config says otherwise.
    const std::string path = moe::fs::join(init_dir, "config.json");
    if (!root.find("finetune") && !moe::is_hf_checkpoint(init_dir)) {
      const moe::json::Value saved = moe::json::parse(moe::fs::read_file(path, 1 << 24), path);
      if (const moe::json::Value* f = saved.find("finetune")) root.set("finetune", *f);
    }
  }
  return moe::parse_config(root);
}

}  // namespace moe_capi

using moe_capi::config_from;
using moe_capi::copy_error;
using moe_capi::guarded;

namespace {

// An options struct as this engine knows it, from what the caller's struct_size covers (the rest stays 0).
template <typename Options>
Options fitted(const Options* given, const char* what) {
  moe::check(given != nullptr, std::string(what) + " is required");
  moe::check(given->struct_size >= sizeof(uint32_t), std::string(what) + ": struct_size must be set to the struct's size");
  Options o{};
  std::memcpy(&o, given, std::min<size_t>(given->struct_size, sizeof(Options)));
  o.struct_size = sizeof(Options);
  return o;
}

// The SSD tier's expert file lives in the run directory unless the config names a place.
std::string with_run_directory(const char* config_json, const std::string& run_dir) {
  moe::json::Value root = moe::json::parse(config_json ? config_json : "", "config");
  const moe::json::Value* offload = root.is_object() ? root.find("offload") : nullptr;
  if (run_dir.empty() || !offload || !offload->is_object()) return config_json;
  const moe::json::Value* mode = offload->find("mode");
  const moe::json::Value* dir = offload->find("ssd_dir");
  if (!mode || !mode->is_string() || mode->string != "ssd" || (dir && !dir->is_null())) return config_json;
  moe::json::Value section = *offload;
  section.set("ssd_dir", moe::json::Value::of((std::filesystem::path(run_dir) / "ssd").string()));
  root.set("offload", section);
  return moe::json::dump(root);
}

const moe::ParamTensor& tensor_named(moe_engine* engine, const char* name) {
  const moe::ParamTensor* t = engine->trainer->model().layout().find(name ? name : "");
  if (!t) moe::fail(std::string("no tensor named '") + (name ? name : "") + "' in this model");
  return *t;
}

// draw false: the caller loads a folder before anything else runs (Trainer's draw).
std::unique_ptr<moe_engine> create_engine(const char* config_json, const char* init_dir, bool draw) {
  auto engine = std::make_unique<moe_engine>();
  moe::EngineConfig cfg = config_from(config_json, init_dir);
  engine->backend = moe::make_compute_backend(cfg.train);
  engine->backend_name = engine->backend->name();
  engine->backend_description = engine->backend->describe();
  engine->trainer = std::make_unique<moe::Trainer>(cfg, *engine->backend, draw);
  return engine;
}

}  // namespace

extern "C" {

moe_engine* moe_engine_create(const char* config_json, const char* init_dir, char* err, size_t err_len) {
  try {
    return create_engine(config_json, init_dir, true).release();
  } catch (const std::exception& e) {
    copy_error(err, err_len, e.what());
    return nullptr;
  }
}

void moe_engine_destroy(moe_engine* engine) { delete engine; }

const char* moe_engine_last_error(const moe_engine* engine) { return engine ? engine->last_error.c_str() : "no engine"; }

int moe_engine_api_version(void) { return MOE_ENGINE_API_VERSION; }

const char* moe_engine_backend_name(const moe_engine* engine) { return engine->backend_name.c_str(); }

const char* moe_engine_backend_description(const moe_engine* engine) { return engine->backend_description.c_str(); }

int64_t moe_engine_num_params(const moe_engine* engine) {
  int64_t n = 0;
  for (const auto& t : engine->trainer->model().layout().tensors()) n += static_cast<int64_t>(t.numel);
  return n;
}

int64_t moe_engine_step_count(const moe_engine* engine) { return engine->trainer->state().step; }

int32_t moe_engine_vocab_size(const moe_engine* engine) { return engine->trainer->config().model.vocab_size; }

const char* moe_engine_config_json(moe_engine* engine) {
  engine->config_json = moe::json::dump(moe::config_to_json(engine->trainer->config()), 2);
  return engine->config_json.c_str();
}

int moe_engine_init_from(moe_engine* engine, const char* dir) {
  return guarded(engine, [&] {
    engine->trainer->init_from(dir ? dir : "");
    return MOE_OK;
  });
}

int moe_engine_resume_from(moe_engine* engine, const char* dir) {
  return guarded(engine, [&] {
    engine->trainer->resume_from(dir ? dir : "");
    return MOE_OK;
  });
}

int moe_engine_save_checkpoint(moe_engine* engine, const char* dir) {
  return guarded(engine, [&] {
    engine->trainer->save_checkpoint(dir ? dir : "");
    return MOE_OK;
  });
}

int moe_engine_set_data(moe_engine* engine, const char* token_file) {
  return guarded(engine, [&] {
    engine->trainer->set_data(token_file ? token_file : "");
    return MOE_OK;
  });
}

int moe_engine_set_eval_data(moe_engine* engine, const char* token_file) {
  return guarded(engine, [&] {
    engine->trainer->set_eval_data(token_file ? token_file : "");
    return MOE_OK;
  });
}

int moe_engine_feed_batch(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B, int32_t T) {
  return guarded(engine, [&] {
    moe::check(inputs && targets, "feed_batch: inputs and targets are required");
    engine->trainer->feed_batch(inputs, targets, B, T);
    return MOE_OK;
  });
}

int moe_engine_step(moe_engine* engine, moe_step_record* out) {
  return guarded(engine, [&] {
    moe::check_step_record_size(out);
    if (!engine->control.wait_to_step()) return static_cast<int>(MOE_STOPPED);
    if (engine->trainer->finished()) return static_cast<int>(MOE_FINISHED);
    moe::StepRecord r = engine->trainer->step();
    moe::write_step_record(r, engine->record_arrays, out);
    return static_cast<int>(MOE_OK);
  });
}

int moe_engine_forward(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B, int32_t T,
                       float* logits_out, double* loss_out, double* aux_loss_out) {
  return guarded(engine, [&] {
    moe::check(inputs != nullptr && B > 0 && T > 0, "forward: inputs with positive B and T are required");
    engine->trainer->settle();
    moe::Model& model = engine->trainer->model();
    moe::ForwardResult r = model.forward(inputs, targets, B, T);
    if (logits_out)
      model.backend().copy(logits_out, model.logits(), sizeof(float) * B * T * model.config().vocab_size);
    if (loss_out) *loss_out = r.loss;
    if (aux_loss_out) *aux_loss_out = r.aux_loss;
    return MOE_OK;
  });
}

int moe_engine_compute_gradients(moe_engine* engine, const int32_t* inputs, const int32_t* targets, int32_t B,
                                 int32_t T, double* loss_out, double* objective_out) {
  return guarded(engine, [&] {
    moe::check(inputs && targets && B > 0 && T > 0, "compute_gradients: inputs and targets are required");
    engine->trainer->settle();
    moe::Model& model = engine->trainer->model();
    engine->trainer->zero_grads();
    moe::ForwardResult r = model.forward(inputs, targets, B, T);
    model.backward(1.0f);
    if (loss_out) *loss_out = r.loss;
    if (objective_out) *objective_out = r.loss + r.aux_loss;
    return MOE_OK;
  });
}

int moe_engine_read_tensor(moe_engine* engine, const char* name, int which, float* dst, int64_t numel) {
  return guarded(engine, [&] {
    const moe::ParamTensor& t = tensor_named(engine, name);
    moe::check(numel == static_cast<int64_t>(t.numel), std::string("read_tensor '") + name + "': expected " +
                                                          std::to_string(t.numel) + " elements, got " +
                                                          std::to_string(numel));
    engine->trainer->settle();
    moe::Model& model = engine->trainer->model();
    model.backend().synchronize();
    // From where the tensor lives: an offloaded expert's from its home, never every expert copied out.
    if (which == 0) {
      moe::ArenaView(model.backend(), model.params(), model.layout().expert_ranges(), engine->trainer->expert_home(),
                     moe::kWeights)
          .read(t.offset, t.numel, dst);
      return MOE_OK;
    }
    const size_t i = static_cast<size_t>(&t - model.layout().tensors().data());
    moe::check(model.trainable().trains(i), std::string("read_tensor '") + name +
                                                "': the tensor is frozen (finetune), so it has no gradient");
    moe::ArenaView(model.backend(), model.grads(), model.trainable().grad_expert_ranges(),
                   engine->trainer->expert_home(), moe::kGrad)
        .read(model.trainable().grad_offset(i), t.numel, dst);
    return MOE_OK;
  });
}

int32_t moe_engine_tensor_count(const moe_engine* engine) {
  return static_cast<int32_t>(engine->trainer->model().layout().tensors().size());
}

int moe_engine_tensor_info(const moe_engine* engine, int32_t i, const char** name, int32_t* rank, int64_t dims[8]) {
  const auto& tensors = engine->trainer->model().layout().tensors();
  if (i < 0 || i >= static_cast<int32_t>(tensors.size())) return MOE_ERROR;
  const moe::ParamTensor& t = tensors[i];
  if (name) *name = t.name.c_str();
  if (rank) *rank = static_cast<int32_t>(t.shape.size());
  for (size_t d = 0; d < t.shape.size() && d < 8; ++d) dims[d] = t.shape[d];
  return MOE_OK;
}

int moe_engine_export_hf(moe_engine* engine, const char* dir, const char* model_type, int dtype) {
  moe_export_options options{};
  options.struct_size = sizeof options;
  options.dtype = dtype;
  return moe_engine_export_hf_with(engine, dir, model_type, &options);
}

namespace {

// What moe_export_options ask, checked field by field.
struct ExportAsked {
  moe::st::DType dtype = moe::st::DType::F32;
  moe::HfExpertLayout layout = moe::HfExpertLayout::PerExpert;
  bool default_layout = true, adapter = false;
  std::string base_dir;  // the adapter's base model folder; empty: none given
  const moe::HfExpertLayout* layout_or_default() const { return default_layout ? nullptr : &layout; }
};

ExportAsked export_asked(const moe_export_options* given) {
  moe::check(given != nullptr && given->struct_size >= offsetof(moe_export_options, dtype) + sizeof(int32_t),
             "export: the options are missing or too short (set struct_size)");
  moe_export_options options{};
  std::memcpy(&options, given, std::min<size_t>(given->struct_size, sizeof options));
  moe::check(options.expert_layout >= MOE_EXPERTS_DEFAULT && options.expert_layout <= MOE_EXPERTS_FUSED,
             "export: expert_layout " + std::to_string(options.expert_layout) +
                 " is not MOE_EXPERTS_DEFAULT, MOE_EXPERTS_PER_EXPERT or MOE_EXPERTS_FUSED");
  moe::check(options.dtype >= MOE_EXPORT_F32 && options.dtype <= MOE_EXPORT_F16,
             "export: dtype " + std::to_string(options.dtype) +
                 " is not MOE_EXPORT_F32, MOE_EXPORT_BF16 or MOE_EXPORT_F16");
  moe::check(options.format == MOE_EXPORT_CHECKPOINT || options.format == MOE_EXPORT_ADAPTER,
             "export: format " + std::to_string(options.format) + " is not MOE_EXPORT_CHECKPOINT or MOE_EXPORT_ADAPTER");
  ExportAsked a;
  a.dtype = options.dtype == MOE_EXPORT_BF16 ? moe::st::DType::BF16
            : options.dtype == MOE_EXPORT_F16 ? moe::st::DType::F16
                                              : moe::st::DType::F32;
  a.default_layout = options.expert_layout == MOE_EXPERTS_DEFAULT;
  a.layout = options.expert_layout == MOE_EXPERTS_FUSED ? moe::HfExpertLayout::Fused : moe::HfExpertLayout::PerExpert;
  a.adapter = options.format == MOE_EXPORT_ADAPTER;
  if (a.adapter)
    moe::check(a.dtype == moe::st::DType::F32, "export: a PEFT adapter is written in f32 (the adapters' own precision)");
  a.base_dir = options.base_dir ? options.base_dir : "";
  return a;
}

// A directory of its own beside `out` (on the disk that receives the export) for an export's SSD-tier file. One an
// export to the same folder left when its process died (named for that process) is removed first.
std::string scratch_beside(const std::string& out) {
  std::filesystem::path p = std::filesystem::path(out).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string prefix = "." + p.filename().string() + ".experts-";
  const std::filesystem::path parent = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string entry = e.path().filename().string();
    if (entry.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(entry.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(e.path(), ec);
  }
  return (parent / (prefix + std::to_string(::getpid()))).string();
}

}  // namespace

int moe_engine_export_hf_with(moe_engine* engine, const char* dir, const char* model_type,
                              const moe_export_options* given) {
  return guarded(engine, [&] {
    const ExportAsked a = export_asked(given);
    engine->trainer->settle();
    moe::Trainer& t = *engine->trainer;
    const std::string out = dir ? dir : "", type = model_type ? model_type : "mixtral";
    if (a.adapter)
      moe::export_peft_adapter(out, t.model(), t.config().finetune, type, t.expert_home(), a.base_dir);
    else
      moe::export_hf(out, t.model(), type, a.dtype, a.layout_or_default(), t.expert_home());
    return MOE_OK;
  });
}

int moe_export_checkpoint(const char* checkpoint_dir, const char* out_dir, const char* model_type,
                          const moe_export_options* options, char* err, size_t err_len) {
  try {
    const ExportAsked a = export_asked(options);
    const std::string src = checkpoint_dir ? checkpoint_dir : "";
    moe::check(!src.empty(), "export: checkpoint_dir is required");
    moe::check_export_target(out_dir ? out_dir : "");  // before a byte is read: never over the source itself
    // A PEFT adapter's folder on its base (as a chat opens it), merged into a whole model.
    const bool on_base = moe_capi::adapter_on_base(src, a.base_dir);
    if (!moe::is_hf_checkpoint(src) && !on_base) {
      moe::export_checkpoint(src, out_dir ? out_dir : "", model_type ? model_type : "mixtral", a.dtype,
                             a.layout_or_default(), a.adapter, a.base_dir);
      return MOE_OK;
    }
    // A Hugging Face folder (or an adapter on one): its model's weights alone (no trainer), the routed experts going
    // from its files into an SSD-tier file beside the output as they are read, and from there into the export an
    // expert at a time, so a model larger than memory exports again (to another layout, dtype or model type). The
    // train settings only need to be valid; the model comes from the folder.
    const std::string out = out_dir ? out_dir : "", type = model_type ? model_type : "mixtral";
    const std::string scratch = scratch_beside(out);
    moe_capi::FolderModel f = moe_capi::load_folder_model(src, nullptr, &scratch, 4, a.base_dir);
    if (a.adapter)
      moe::export_peft_adapter(out, *f.model, f.config.finetune, type, f.experts.get(), on_base ? f.base : a.base_dir);
    else moe::export_hf(out, *f.model, type, a.dtype, a.layout_or_default(), f.experts.get());
    return MOE_OK;
  } catch (const std::exception& e) {
    copy_error(err, err_len, e.what());
    return MOE_ERROR;
  }
}

int moe_engine_measure_experts(moe_engine* engine, const moe_expert_shares_options* given, const char** json_out) {
  return guarded(engine, [&] {
    const auto options = fitted(given, "measure experts: options");
    moe::check(options.token_file && *options.token_file, "measure experts: token_file is required");
    moe::check(options.score == MOE_SHARE_GATE || options.score == MOE_SHARE_TOKENS,
               "measure experts: score " + std::to_string(options.score) + " is not MOE_SHARE_GATE or MOE_SHARE_TOKENS");
    // The measurement reads every expert through the model's own forward; offloaded experts are stepped by the
    // training loop's tiers, which a forward-only pass does not drive.
    moe::check(engine->trainer->offload() == nullptr,
               "measure experts: offload.mode must be \"none\" (the measurement runs with resident experts)");
    moe::TokenData data(options.token_file);
    moe::Model& model = engine->trainer->model();
    data.validate_max_token(model.config().vocab_size);
    const auto& train = engine->trainer->config().train;
    const moe::ExpertShares shares =
        moe::measure_expert_shares(model, data, options.batches, train.batch_size, train.seq_len);
    engine->expert_shares = moe::expert_shares_json(
        shares, options.threshold, options.score == MOE_SHARE_GATE ? moe::ShareScore::Gate : moe::ShareScore::Tokens);
    if (json_out) *json_out = engine->expert_shares.c_str();
    return MOE_OK;
  });
}

int moe_esft_measure(const moe_esft_options* given, const char** config_out, const char** shares_out, char* err,
                     size_t err_len) {
  thread_local std::string config_text, shares_text;
  try {
    const auto o = fitted(given, "moe_esft_measure: options");
    moe::check(o.config_json != nullptr, "moe_esft_measure: config_json is required");
    config_text = o.config_json;
    shares_text.clear();
    if (config_out) *config_out = config_text.c_str();
    if (shares_out) *shares_out = shares_text.c_str();
    const char* init = o.init_dir && *o.init_dir ? o.init_dir : nullptr;
    const moe::EngineConfig cfg = config_from(o.config_json, init);
    const bool esft = cfg.finetune.enabled && cfg.finetune.method == moe::FinetuneMethod::Esft;
    if (!o.always && (!esft || !cfg.finetune.experts.empty())) return MOE_FINISHED;
    moe::check(o.token_file && *o.token_file, "moe_esft_measure: token_file is required (the run's training data)");
    moe::check(o.score == MOE_SHARE_CONFIG || o.score == MOE_SHARE_GATE || o.score == MOE_SHARE_TOKENS,
               "moe_esft_measure: score " + std::to_string(o.score) + " is not MOE_SHARE_GATE, MOE_SHARE_TOKENS or MOE_SHARE_CONFIG");
    const moe::EsftConfig defaults = esft ? cfg.finetune.esft : moe::EsftConfig{};
    const int batches = o.batches > 0 ? o.batches : defaults.sample_batches;
    const double threshold = o.threshold > 0 ? o.threshold : defaults.threshold;
    const moe::ShareScore score = o.score == MOE_SHARE_TOKENS || (o.score == MOE_SHARE_CONFIG && defaults.score == moe::EsftScore::Tokens)
                                      ? moe::ShareScore::Tokens
                                      : moe::ShareScore::Gate;
    moe::check(threshold <= 1, "moe_esft_measure: threshold must be in (0, 1]");

    // The base model alone: the fine-tune's own sections would refuse (no experts yet) or move experts away.
    moe::EngineConfig base = cfg;
    base.finetune = moe::FinetuneConfig{};
    base.offload = moe::OffloadConfig{};
    base.placement = moe::PlacementConfig{};
    base.pipeline = moe::PipelineConfig{};
    base.device_group = moe::DeviceGroupConfig{};
    auto backend = moe::make_compute_backend(base.train);
    moe::Trainer trainer(base, *backend);
    if (init) trainer.init_from(init);
    moe::TokenData data(o.token_file);
    data.validate_max_token(base.model.vocab_size);
    const moe::ExpertShares shares =
        moe::measure_expert_shares(trainer.model(), data, batches, base.train.batch_size, base.train.seq_len);
    shares_text = moe::expert_shares_json(shares, threshold, score);

    moe::json::Value root = moe::json::parse(o.config_json, "config");
    if (esft) {
      // The section as given (or as the init checkpoint's config carried it), with the chosen set.
      const moe::json::Value* section = root.find("finetune");
      moe::json::Value f = section && section->is_object() ? *section : moe::finetune_config_to_json(cfg.finetune);
      f.set("experts", *moe::json::parse(shares_text, "measurement").find("experts"));
      root.set("finetune", f);
    }
    config_text = moe::json::dump(root, 2);
    if (config_out) *config_out = config_text.c_str();
    if (shares_out) *shares_out = shares_text.c_str();
    return MOE_OK;
  } catch (const std::exception& e) {
    copy_error(err, err_len, e.what());
    return MOE_ERROR;
  }
}

void moe_engine_request_stop(moe_engine* engine) { engine->control.stop(); }

void moe_engine_set_paused(moe_engine* engine, int paused) { engine->control.set_paused(paused != 0); }

moe_engine* moe_engine_open(const moe_engine_options* options, char* err, size_t err_len) {
  try {
    const moe_engine_options o = fitted(options, "moe_engine_open: options");
    const std::string run_dir = o.run_dir ? o.run_dir : "";
    const std::string config = with_run_directory(o.config_json, run_dir);
    const bool load = o.load_dir && *o.load_dir;
    std::unique_ptr<moe_engine> engine = create_engine(config.c_str(), o.init_dir, !load);
    engine->run_dir = run_dir;
    if (load && o.load_resume) engine->trainer->resume_from(o.load_dir);
    else if (load) engine->trainer->init_from(o.load_dir);
    return engine.release();
  } catch (const std::exception& e) {
    copy_error(err, err_len, e.what());
    return nullptr;
  }
}

int moe_engine_train(moe_engine* engine, const moe_train_options* options, moe_train_callback callback, void* user) {
  moe::RunPlan plan;
  const int checked = guarded(engine, [&] {
    const moe_train_options o = fitted(options, "moe_engine_train: options");
    moe::check(!engine->run_dir.empty(), "moe_engine_train: the engine has no run directory (moe_engine_open's run_dir)");
    moe::check(o.total_steps >= 0, "moe_engine_train: options.total_steps must be 0 or more");
    const moe::TrainConfig& train = engine->trainer->config().train;
    plan.run_dir = engine->run_dir;
    plan.first_step = engine->trainer->state().step;
    plan.last_step = o.total_steps > 0 ? std::min<int64_t>(o.total_steps, train.steps) : train.steps;
    plan.checkpoint_every = train.checkpoint_every;
    plan.keep_checkpoints = train.keep_checkpoints;
    plan.on_nonfinite = train.on_nonfinite;
    if (const int64_t at_once = moe::checkpoints_at_once(plan); at_once > 0)
      engine->trainer->check_checkpoint_space(plan.run_dir, at_once);
    return static_cast<int>(MOE_OK);
  });
  if (checked != MOE_OK) return checked;
  const moe::RunEngine steps{
      [engine](moe_step_record* record) { return moe_engine_step(engine, record); },
      [engine](const std::string& dir) { return moe_engine_save_checkpoint(engine, dir.c_str()); },
      [engine] { return std::string(moe_engine_last_error(engine)); },
      [engine] { return engine->trainer->locate_nonfinite(); },
  };
  return moe::run_training(plan, engine->control, steps, callback, user);
}

int moe_checkpoint_verify(const char* dir, char* err, size_t err_len) {
  try {
    return moe::verify_checkpoint(dir ? dir : "") ? MOE_OK : MOE_FINISHED;
  } catch (const std::exception& e) {
    copy_error(err, err_len, e.what());
    return MOE_ERROR;
  }
}

void moe_engine_request_checkpoint(moe_engine* engine) { engine->control.request_checkpoint(); }

}  // extern "C"
