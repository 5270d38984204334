#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <limits>
#include <utility>

#include "backend/registry.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "optim/schedule.h"
#include "train/evaluation.h"
#include "train/load_balance.h"
#include "train/lora_adapter.h"

namespace moe {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void record_offload(StepRecord& rec, const OffloadStepStats& s) {
  rec.offloaded = true;
  rec.upload_ms = s.upload_ms;
  rec.upload_hidden_ms = s.upload_hidden_ms;
  rec.stall_ms = s.stall_ms;
  rec.bytes_h2d = s.bytes_h2d;
  rec.bytes_d2h = s.bytes_d2h;
  rec.peak_device_bytes = s.peak_device_bytes;
  rec.peak_host_bytes = s.peak_host_bytes;
  rec.peak_ssd_bytes = s.peak_ssd_bytes;
  rec.ssd_ms = s.store.io_ms;
  rec.ssd_read_ms = s.store.read_ms;
  rec.bytes_ssd_read = s.store.bytes_read;
  rec.bytes_ssd_write = s.store.bytes_written;
  rec.cache_hits = s.store.hits;
  rec.cache_misses = s.store.misses;
  rec.prefetch_lead_ms = s.store.prefetch_lead_ms;
  rec.expert_pinned = s.pinned;
  for (const auto& layer : s.pinned) rec.expert_tiers.emplace_back(layer.size(), s.home_tier);
}

}  // namespace

namespace {

// ESFT trains the experts measured for it; without a chosen set the section would read as "every expert", which
// is not what the method means, so no engine trains that way by accident.
const EngineConfig& with_esft_experts_chosen(const EngineConfig& cfg) {
  if (cfg.finetune.enabled && cfg.finetune.method == FinetuneMethod::Esft && cfg.finetune.experts.empty())
    fail("finetune.experts: method \"esft\" trains the experts measured for it, and none are chosen; measure "
         "them first (moe-engine esft, or moe-engine train, which measures before the run) and set "
         "finetune.experts");
  return cfg;
}

// Offloaded experts whose home is apart from the arenas, as checkpoints, loads and exports see them: read from
// and written to the home an expert at a time, never all copied into the arenas.
class OffloadedExperts final : public ExpertStateHome {
 public:
  explicit OffloadedExperts(ExpertOffload& offload) : offload_(offload) {}
  void read_expert(int k, ExpertPart part, float* dst) override { offload_.read_expert(k, part, dst); }
  void write_expert(int k, ExpertPart part, const float* src) override { offload_.write_expert(k, part, src); }

 private:
  ExpertOffload& offload_;
};

}  // namespace

Trainer::Trainer(const EngineConfig& cfg, Backend& be, bool draw)
    : cfg_(with_esft_experts_chosen(cfg)), be_(be), model_(cfg_.model, be, cfg_.train.compute_dtype, cfg_.finetune), opt_(model_) {
  if (draw) draw_weights();
  undrawn_ = !draw;  // else zeros until the load
  if (cfg_.runs_on_devices()) {
    DeviceGroupConfig group = cfg_.device_group;
    if (group.threads == 0) group.threads = std::max(1, cfg_.train.threads / cfg_.placement.devices);
    model_.run_experts_on_devices(cfg_.placement, cfg_.pipeline, group);
  }
  state_.seed = cfg_.train.seed;
  if (cfg_.offload.mode != OffloadMode::None) {
    HostBackends host{make_backend("cpu", {cfg_.train.threads}), make_backend("cpu", {1})};
    offload_ = std::make_unique<ExpertOffload>(model_, opt_, cfg_.offload, std::move(host), cfg_.train.batch_size,
                                               cfg_.train.seq_len, [this](size_t begin, size_t end) {
                                                 model_.init_range(cfg_.train.seed, begin, end);
                                               });
    model_.set_expert_access(offload_.get());
    if (offload_->experts_apart()) home_ = std::make_unique<OffloadedExperts>(*offload_);
  }
}

void Trainer::set_data(const std::string& path) {
  auto data = std::make_unique<TokenData>(path);
  data->validate_max_token(cfg_.model.vocab_size);
  const uint64_t window = (uint64_t)cfg_.train.batch_size * cfg_.train.seq_len + 1;
  if (data->size() < window)
    fail(path + ": holds " + std::to_string(data->size()) + " tokens but one batch needs " + std::to_string(window) +
         " (train.batch_size × train.seq_len + 1); use more data or a smaller batch");
  data_ = std::move(data);
  state_.data_path = path;
}

void Trainer::set_eval_data(const std::string& path) {
  auto data = std::make_unique<TokenData>(path);
  data->validate_max_token(cfg_.model.vocab_size);
  const uint64_t window = (uint64_t)cfg_.train.batch_size * cfg_.train.seq_len + 1;
  if (data->size() < window)
    fail(path + ": evaluation data holds " + std::to_string(data->size()) + " tokens but one batch needs " +
         std::to_string(window) + " (train.batch_size × train.seq_len + 1); hold out more data");
  eval_data_ = std::move(data);
}

void Trainer::feed_batch(const int32_t* inputs, const int32_t* targets, int B, int T) {
  check(B > 0 && T > 0, "feed_batch: B and T must be positive");
  check(T <= cfg_.model.max_seq_len, "feed_batch: T = " + std::to_string(T) + " exceeds model.max_seq_len");
  Batch b;
  b.B = B;
  b.T = T;
  b.inputs.assign(inputs, inputs + (size_t)B * T);
  b.targets.assign(targets, targets + (size_t)B * T);
  fed_.push_back(std::move(b));
}

Trainer::Batch Trainer::next_batch() {
  if (!fed_.empty()) {
    Batch b = std::move(fed_.front());
    fed_.pop_front();
    return b;
  }
  check(data_ != nullptr, "no training data: set a token file (or feed batches) before stepping");
  Batch b;
  b.B = cfg_.train.batch_size;
  b.T = cfg_.train.seq_len;
  b.inputs.resize((size_t)b.B * b.T);
  b.targets.resize((size_t)b.B * b.T);
  state_.data_cursor = data_->next_batch(state_.data_cursor, b.B, b.T, b.inputs.data(), b.targets.data());
  return b;
}

StepRecord Trainer::step() {
  // The SSD tier's deferred start-up (the initial weights no load wrote), timed and counted apart from the step.
  if (offload_) offload_->initialise_remaining();
  const auto t0 = std::chrono::steady_clock::now();
  const int A = cfg_.train.grad_accum;
  StepRecord rec;
  rec.step = state_.step + 1;
  rec.expert_tokens.resize(model_.moe_layer_count());
  for (int i = 0; i < model_.moe_layer_count(); ++i) rec.expert_tokens[i].assign(model_.moe_layer(i).shape().E, 0);

  rec.lr = lr_at(cfg_.train, state_.step);
  if (offload_) offload_->begin_step(static_cast<int>(rec.step), rec.lr, cfg_.train);
  if (offload_) model_.zero_dense_grads();
  else model_.zero_grads();
  for (int micro = 0; micro < A; ++micro) {
    if (offload_) offload_->begin_micro(micro, A);
    Batch b = next_batch();
    if (cfg_.train.routing_skew.distribution != SkewDistribution::None)
      model_.set_routing_skew(&cfg_.train.routing_skew, static_cast<uint64_t>(state_.step) * A + micro);
    // LoRA dropout's masks: this micro-batch's, the same in its forward and backward.
    model_.set_lora_dropout(true, cfg_.train.seed, static_cast<uint64_t>(state_.step) * A + micro);
    auto tf = std::chrono::steady_clock::now();
    ForwardResult fr = model_.forward(b.inputs.data(), b.targets.data(), b.B, b.T);
    rec.forward_ms += ms_since(tf);
    auto tb = std::chrono::steady_clock::now();
    model_.backward(1.0f / A);
    rec.backward_ms += ms_since(tb);
    model_.set_lora_dropout(false);
    rec.loss += fr.loss / A;
    rec.aux_loss += fr.aux_loss / A;
    rec.tokens += (int64_t)b.B * b.T;
    for (int i = 0; i < model_.moe_layer_count(); ++i) {
      const DispatchPlan& plan = model_.moe_layer(i).plan();
      for (int e = 0; e < plan.E; ++e) rec.expert_tokens[i][e] += plan.counts[e];
    }
  }

  auto to = std::chrono::steady_clock::now();
  OptimizerStepInfo info;
  if (offload_) {
    offload_->finish_gradients();
    info = opt_.step_without_experts(
        static_cast<int>(rec.step), rec.lr, cfg_.train, [&](int i) { return offload_->expert_sum_squares(i); },
        [&](double clip_scale) { offload_->start_expert_updates(clip_scale); });
    record_offload(rec, offload_->end_step(rec.expert_tokens));
  } else {
    info = opt_.step(static_cast<int>(rec.step), rec.lr, cfg_.train);
  }
  rec.optimizer_ms = ms_since(to);
  rec.grad_norm = info.grad_norm;
  // A diverged step moves nothing (its update is skipped or the run stops).
  if (cfg_.train.balance_bias_rate > 0 && std::isfinite(rec.loss) && std::isfinite(rec.grad_norm))
    balance_selection_biases(model_, rec.expert_tokens, cfg_.train.balance_bias_rate);
  rec.selection_bias = read_selection_biases(model_);
  if (model_.on_devices()) {
    rec.placements = model_.take_device_records();
    rec.device_peak_bytes = model_.device_peak_bytes();
  }

  state_.step = rec.step;
  state_.tokens_seen += rec.tokens;
  rec.step_ms = ms_since(t0);
  // After the step's time: evaluation is not part of training throughput.
  rec.eval_loss = std::numeric_limits<double>::quiet_NaN();
  const int every = cfg_.train.eval_every;
  if (eval_data_ && every > 0 && (rec.step % every == 0 || rec.step == cfg_.train.steps))
    rec.eval_loss = evaluate_loss(model_, *eval_data_, cfg_.train.eval_batches, cfg_.train.batch_size, cfg_.train.seq_len);
  return rec;
}

namespace {

// The first tensor of the arena holding a NaN or an infinity, in layout order or reversed; "" when none.
// offsets: where each tensor sits in the arena (null: its layout offset); SIZE_MAX skips a tensor (frozen, no
// gradient).
std::string first_nonfinite(Backend& be, const ParamLayout& layout, const float* arena, const ExpertOffload* offload,
                            const std::vector<size_t>* offsets = nullptr, bool reversed = false) {
  be.synchronize();
  std::vector<float> host;
  std::vector<size_t> order;
  for (size_t i = 0; i < layout.tensors().size(); ++i) order.push_back(i);
  if (reversed) std::reverse(order.begin(), order.end());
  for (size_t i : order) {
    const ParamTensor& t = layout.tensors()[i];
    const size_t at = offsets ? (*offsets)[i] : t.offset;
    if (at == SIZE_MAX) continue;
    if (offload && std::any_of(layout.expert_ranges().begin(), layout.expert_ranges().end(),
                               [&](const ExpertRange& r) { return t.offset >= r.begin && t.offset < r.end; }))
      continue;
    host.resize(t.numel);
    be.copy(host.data(), arena + at, t.numel * sizeof(float));
    for (float v : host)
      if (!std::isfinite(v)) return t.name;
  }
  return "";
}

}  // namespace

std::string Trainer::locate_nonfinite() {
  if (std::string w = first_nonfinite(be_, model_.layout(), model_.params(), offload_.get()); !w.empty())
    return "weight " + w;
  if (std::string g = first_nonfinite(be_, model_.layout(), model_.grads(), offload_.get(),
                                          &model_.trainable().grad_offsets(), true); !g.empty())
    return "gradient " + g + " (the first in backward order)";
  return "";
}

void Trainer::check_model_matches(const std::string& dir) {
  ModelConfig theirs = read_checkpoint_model_config(dir);
  const std::string a = json::dump(model_config_to_json(theirs)), b = json::dump(model_config_to_json(cfg_.model));
  if (a != b)
    fail(dir + ": the checkpoint's model config differs from this run's model config; start from a config whose "
               "\"model\" section equals the checkpoint's config.json");
}

void Trainer::settle() {
  if (offload_) offload_->settle();
}

void Trainer::experts_to_arenas(bool weights_only) {
  if (offload_) offload_->experts_to_arenas(weights_only);
}

void Trainer::zero_grads() {
  model_.zero_grads();
  if (offload_) offload_->zero_expert_grads();
}


// Offloaded experts are initialised by the offload as it stores each in its home (ExpertOffload's init).
void Trainer::draw_weights() { model_.init(cfg_.train.seed, cfg_.offload.mode == OffloadMode::None); }

void Trainer::init_from(const std::string& dir) {
  settle();
  const bool undrawn = std::exchange(undrawn_, false);
  if (is_peft_adapter(dir)) {
    if (undrawn) draw_weights();  // the seed is its base
    load_peft_adapter(dir, model_, cfg_.finetune, home_.get());
  } else {
    load_weights(dir, model_, home_.get(), undrawn ? &cfg_.train.seed : nullptr);
  }
  if (offload_) offload_->experts_loaded();
}

void Trainer::resume_from(const std::string& dir) {
  check_model_matches(dir);
  settle();
  if (!fs::exists(fs::join(dir, "optimizer.safetensors")) || !fs::exists(fs::join(dir, "trainer_state.json")))
    fail(dir + ": has no optimizer.safetensors / trainer_state.json to resume from; use it with --init instead");
  TrainerState st;
  load_weights(dir, model_, home_.get(), std::exchange(undrawn_, false) ? &cfg_.train.seed : nullptr);
  load_optimizer_state(dir, model_, opt_, st, home_.get());
  if (offload_) offload_->experts_loaded();
  const std::string data_path = state_.data_path;
  state_ = st;
  if (!data_path.empty()) state_.data_path = data_path;
}

void Trainer::save_checkpoint(const std::string& dir) {
  settle();
  moe::save_checkpoint(dir, cfg_, model_, &opt_, &state_, home_.get());
}

void Trainer::check_checkpoint_space(const std::string& run_dir, int64_t count) const {
  const SsdExpertStore* ssd = offload_ ? offload_->ssd_store() : nullptr;
  const bool shared = ssd && fs::same_filesystem(run_dir, ssd->path());
  const std::string why = checkpoint_space_error(run_dir, checkpoint_bytes(model_, true), count,
                                                 shared ? ssd->disk_bytes_to_come() : -1, fs::free_bytes(run_dir));
  if (!why.empty()) fail(why);
}

}  // namespace moe
