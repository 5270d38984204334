#include "offload/host_offload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backend/cpu/adamw.h"
#include "core/error.h"

namespace moe {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

HostOffload::HostOffload(Model& model, AdamWOptimizer& optimizer, const OffloadConfig& cfg, int host_threads)
    : model_(model),
      optimizer_(optimizer),
      params_(model.params()),
      grads_(model.grads()),
      device_("device", model.backend(), MemKind::Device, static_cast<size_t>(cfg.device_budget_bytes)),
      host_("host", model.backend(), MemKind::PinnedHost, 0),
      lookahead_(cfg.lookahead),
      pins_(cfg.pin_policy, 0, {}),
      update_ticket_(std::make_unique<std::atomic<uint64_t>[]>(model.layout().expert_ranges().size())),
      host_pool_(host_threads) {
  const ModelConfig& mc = model.config();
  const ParamLayout& layout = model.layout();
  check(!layout.expert_ranges().empty(), "offload.mode: host offload needs routed experts; this model has none");
  layer_base_.assign(mc.n_layers, -1);
  std::vector<int> experts_per_layer;
  for (const ExpertRange& r : layout.expert_ranges()) {
    if (layer_base_[r.layer] < 0) {
      layer_base_[r.layer] = static_cast<int>(experts_.size());
      experts_per_layer.push_back(mc.experts_at(r.layer));
    }
    Expert x;
    x.moe_layer = mc.moe_index(r.layer);
    x.e = r.expert;
    x.begin = r.begin;
    for (const ParamTensor& t : layout.tensors())
      if (t.offset >= r.begin && t.offset < r.end) x.tensors.push_back(&t);
    experts_.push_back(std::move(x));
    expert_floats_ = std::max(expert_floats_, r.end - r.begin);
  }
  const size_t expert_state = expert_floats_ * sizeof(float);
  size_t all_experts = 0;
  for (const ExpertRange& r : layout.expert_ranges()) all_experts += (r.end - r.begin) * sizeof(float);

  // Host tier: each expert's master weights, gradient and two AdamW moments (the arenas' expert ranges).
  host_.charge(4 * all_experts, "the experts' master weights, gradients and AdamW moments");
  // Device tier: the non-expert parameters, their gradients and moments, then the slots.
  const size_t dense = 4 * (layout.total() * sizeof(float) - all_experts);
  device_.charge(dense, "the non-expert parameters, gradients and AdamW moments");
  int n_slots = cfg.expert_slots;
  if (n_slots == 0) {
    const size_t left = cfg.device_budget_bytes > (int64_t)dense ? cfg.device_budget_bytes - dense : 0;
    n_slots = static_cast<int>(left / (2 * expert_state));
    check(n_slots >= 1, "device tier: offload.device_budget_bytes " + std::to_string(cfg.device_budget_bytes) +
                            " leaves " + std::to_string(left) + " bytes after the non-expert state; one expert slot (" +
                            "weights + gradient) needs " + std::to_string(2 * expert_state));
  }
  n_slots = std::min<int>(n_slots, static_cast<int>(experts_.size()));
  for (int s = 0; s < n_slots; ++s) {
    Slot slot;
    slot.w = TierBlock(device_, expert_state, "expert slot " + std::to_string(s) + " (weights)");
    slot.g = TierBlock(device_, expert_state, "expert slot " + std::to_string(s) + " (gradient)");
    slots_.push_back(std::move(slot));
  }
  // At least one slot streams; the rest up to pin_fraction are reserved for pinned experts.
  pin_slots_ = std::min(n_slots - 1, static_cast<int>(std::floor(cfg.pin_fraction * n_slots + 1e-9)));
  if (cfg.pin_policy == PinPolicy::None) pin_slots_ = 0;
  pins_ = PinSelector(cfg.pin_policy, pin_slots_, experts_per_layer);
  // Sizes the per-step bookkeeping, then waits idle: passes before the first step (evaluation) work too.
  begin_step(0, 0.0, TrainConfig{});
  enter_idle();
}

// Between steps (evaluation, C API gradients): no pins, every slot streams, and no update ever starts, so a
// pass outside training computes what resident training would.
void HostOffload::enter_idle() {
  in_step_ = false;
  free_.clear();
  for (Expert& x : experts_) {
    x.slot = x.pin_slot = -1;
    x.grad_down = x.grad_in_slot = false;
  }
  for (int s = 0; s < slots(); ++s) free_.push_back(s);
}

HostOffload::~HostOffload() { settle(); }

void HostOffload::settle() {
  copy_worker_.drain();
  optimizer_worker_.drain();
}

void HostOffload::begin_step(int t, double lr, const TrainConfig& hp) {
  in_step_ = true;
  t_ = t;
  lr_ = lr;
  hp_ = hp;
  stats_ = OffloadStepStats{};
  upload_ns_ = 0;
  device_.reset_peak();
  host_.reset_peak();
  pinned_ = pins_.choose();
  stats_.pinned = pinned_;
  stats_.slots = slots();
  stats_.pin_slots = pin_slots_;
  free_.clear();
  int next_pin = 0;
  for (Expert& x : experts_) {
    x.slot = -1;
    x.grad_down = false;
    x.grad_in_slot = false;
    x.updated = false;
    x.pin_slot = pinned_[x.moe_layer][x.e] ? next_pin++ : -1;
  }
  for (int s = pin_slots_; s < slots(); ++s) free_.push_back(s);
  for (const auto& layer : pinned_) stats_.uploads.emplace_back(layer.size(), 0);
}

void HostOffload::begin_micro(int micro, int count) { last_micro_ = micro == count - 1; }

void HostOffload::plan(int layer, ExpertPass pass, const std::vector<int>& experts) {
  check(cursor_ == order_.size(), "offload: a pass started before the previous one finished");
  layer_ = layer;
  pass_ = pass;
  order_.clear();
  for (int e : experts) order_.push_back(id(layer, e));
  cursor_ = next_issue_ = 0;
  issue_ahead();
}

// Issues uploads in compute order while the lookahead window has room and a slot is free.
void HostOffload::issue_ahead() {
  while (next_issue_ < order_.size() && next_issue_ <= cursor_ + lookahead_) {
    const Expert& x = experts_[order_[next_issue_]];
    if (x.pin_slot < 0 && free_.empty()) return;
    issue(order_[next_issue_++]);
  }
}

void HostOffload::issue(int i) {
  Expert& x = experts_[i];
  const bool pinned = x.pin_slot >= 0;
  if (pinned && x.slot >= 0) return;  // still in its slot from an earlier pass of this step
  if (pinned) {
    x.slot = x.pin_slot;
  } else {
    x.slot = free_.front();
    free_.erase(free_.begin());
  }
  Slot& s = slots_[x.slot];
  const size_t bytes = expert_bytes();
  // The gradient buffer starts as the host gradient of earlier micro-batches, or zero (pinned experts keep
  // theirs in the slot until the last micro-batch).
  const bool grad_up = pass_ == ExpertPass::Backward && !pinned && x.grad_down;
  const bool grad_zero = pinned || (pass_ == ExpertPass::Backward && !x.grad_down);
  const float* w_src = params_ + x.begin;
  const float* g_src = grads_ + x.begin;
  float *w_dst = s.w.f(), *g_dst = s.g.f();
  s.ticket = copy_worker_.submit([=, this] {
    // The next use of an expert waits for its last update (no staleness); other experts' updates run on.
    optimizer_worker_.wait(update_ticket_[i]);
    const auto t0 = Clock::now();
    std::memcpy(w_dst, w_src, bytes);
    if (grad_up) std::memcpy(g_dst, g_src, bytes);
    add_upload_time(ms_between(t0, Clock::now()));
    if (grad_zero) std::memset(g_dst, 0, bytes);
  });
  stats_.bytes_h2d += static_cast<int64_t>(bytes * (grad_up ? 2 : 1));
  ++stats_.uploads[x.moe_layer][x.e];
}

void HostOffload::add_upload_time(double ms) { upload_ns_ += static_cast<int64_t>(ms * 1e6); }

FfnParams HostOffload::rebase(const FfnParams& f, const float* arena, const Expert& x, float* slot) const {
  auto move = [&](float* p) { return p ? slot + (p - (arena + x.begin)) : nullptr; };
  FfnParams r;
  r.w_in = move(f.w_in);
  r.b_in = move(f.b_in);
  r.w_out = move(f.w_out);
  r.b_out = move(f.b_out);
  return r;
}

FfnParams HostOffload::weights(int layer, int e) {
  const int i = id(layer, e);
  check(cursor_ < order_.size() && order_[cursor_] == i, "offload: expert computed out of its planned order");
  while (next_issue_ <= cursor_) issue(order_[next_issue_++]);
  const Slot& s = slots_[experts_[i].slot];
  if (!copy_worker_.done(s.ticket)) {
    const auto t0 = Clock::now();
    copy_worker_.wait(s.ticket);
    stats_.stall_ms += ms_between(t0, Clock::now());
  }
  return rebase(model_.param_ptrs().layers[layer].experts[e], params_, experts_[i], s.w.f());
}

FfnParams HostOffload::grads(int layer, int e) {
  const Expert& x = experts_[id(layer, e)];
  return rebase(model_.grad_ptrs().layers[layer].experts[e], grads_, x, slots_[x.slot].g.f());
}

void HostOffload::release(int i) {
  Expert& x = experts_[i];
  if (x.pin_slot < 0) {
    free_.push_back(x.slot);
    x.slot = -1;
  }
  ++cursor_;
  issue_ahead();
}

void HostOffload::done_forward(int layer, int e) { release(id(layer, e)); }

void HostOffload::done_backward(int layer, int e) {
  const int i = id(layer, e);
  Expert& x = experts_[i];
  // A pinned expert's gradient waits in its slot for the step's last backward (or finish_gradients()).
  if (x.pin_slot < 0 || last_micro_) download_grad(i, in_step_ && last_micro_ && hp_.grad_clip <= 0);
  else x.grad_in_slot = true;
  release(i);
}

// Queues the slot gradient's download; without clipping the expert's update may start right after it.
void HostOffload::download_grad(int i, bool then_update) {
  Expert& x = experts_[i];
  const size_t bytes = expert_bytes();
  const float* src = slots_[x.slot].g.f();
  float* dst = grads_ + x.begin;
  copy_worker_.submit([=, this] {
    std::memcpy(dst, src, bytes);
    if (then_update) submit_update(i);
  });
  x.updated |= then_update;
  x.grad_down = true;
  x.grad_in_slot = false;
  stats_.bytes_d2h += static_cast<int64_t>(bytes);
}

// Runs on whichever thread learns the gradient is complete; only touches this expert's ranges.
void HostOffload::submit_update(int i) {
  update_ticket_[i] = optimizer_worker_.submit([this, i, t = t_, lr = lr_, hp = hp_] {
    // Without clipping the scale is exactly 1, as in the resident optimizer.
    const double clip_scale = hp.grad_clip > 0 ? clip_scale_ : 1.0;
    for (const ParamTensor* pt : experts_[i].tensors)
      cpu::adamw_update(host_pool_, params_ + pt->offset, grads_ + pt->offset, optimizer_.m() + pt->offset,
                        optimizer_.v() + pt->offset, static_cast<int64_t>(pt->numel),
                        adamw_params(t, lr, hp, clip_scale, pt->decay));
  });
}

void HostOffload::finish_gradients() {
  // Pinned experts that computed in earlier micro-batches but not in the last one.
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i)
    if (experts_[i].grad_in_slot) download_grad(i, false);
  // Experts that computed nothing this step still hold last step's gradient (Model::zero_dense_grads leaves
  // expert ranges alone, since their updates may still be reading them): zero those once the previous step's
  // updates are done. The others were overwritten by this step's downloads.
  optimizer_worker_.wait(previous_step_updates_);
  for (const Expert& x : experts_)
    if (!x.grad_down) std::memset(grads_ + x.begin, 0, expert_bytes());
  copy_worker_.drain();
}

void HostOffload::start_expert_updates(double clip_scale) {
  clip_scale_ = clip_scale;
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i)
    if (!experts_[i].updated) {
      experts_[i].updated = true;
      submit_update(i);
    }
}

OffloadStepStats HostOffload::end_step(const std::vector<std::vector<int32_t>>& step_tokens) {
  copy_worker_.drain();
  previous_step_updates_ = 0;
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i)
    previous_step_updates_ = std::max<uint64_t>(previous_step_updates_, update_ticket_[i]);
  enter_idle();
  pins_.observe(step_tokens);
  stats_.upload_ms = upload_ns_.load() / 1e6;
  stats_.upload_hidden_ms = std::max(0.0, stats_.upload_ms - stats_.stall_ms);
  stats_.peak_device_bytes = static_cast<int64_t>(device_.peak());
  stats_.peak_host_bytes = static_cast<int64_t>(host_.peak());
  return stats_;
}

}  // namespace moe
