#include "offload/expert_offload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/threadpool.h"

namespace moe {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

ExpertOffload::ExpertOffload(Model& model, AdamWOptimizer& optimizer, const OffloadConfig& cfg, HostBackends host, int B,
                             int T, const ExpertInit& init)
    : model_(model),
      optimizer_(optimizer),
      cfg_(cfg),
      params_(model.params()),
      grads_(model.grads()),
      device_("device", model.backend(), MemKind::Device, static_cast<size_t>(cfg.device_budget_bytes)),
      host_("host", model.backend(), MemKind::PinnedHost,
            cfg.mode == OffloadMode::Ssd ? static_cast<size_t>(cfg.host_budget_bytes) : 0),
      ssd_tier_("ssd", model.backend(), MemKind::PageableHost, 0),
      pins_(cfg.pin_policy, 0, {}),
      update_ticket_(std::make_unique<std::atomic<uint64_t>[]>(model.layout().expert_ranges().size())),
      in_slot_(std::make_unique<std::atomic<bool>[]>(model.layout().expert_ranges().size())),
      host_compute_(std::move(host)) {
  const ModelConfig& mc = model.config();
  const ParamLayout& layout = model.layout();
  check(!layout.expert_ranges().empty(), "offload.mode: expert offload needs routed experts; this model has none");
  const TrainableSet& trainable = model.trainable();
  layer_base_.assign(mc.n_layers, -1);
  std::vector<int> experts_per_layer;
  std::vector<ExpertSizes> sizes;
  size_t all_weights = 0, all_grads = 0;
  bf16_ = model.compute_dtype() == ComputeDtype::BF16;
  for (size_t k = 0; k < layout.expert_ranges().size(); ++k) {
    const ExpertRange& r = layout.expert_ranges()[k];
    const ExpertRange& g = trainable.grad_expert_ranges()[k];
    if (layer_base_[r.layer] < 0) {
      layer_base_[r.layer] = static_cast<int>(experts_.size());
      experts_per_layer.push_back(mc.experts_at(r.layer));
      moe_model_layers_.push_back(r.layer);
    }
    Expert x;
    x.layer = r.layer;
    x.moe_layer = mc.moe_index(r.layer);
    x.e = r.expert;
    x.begin = r.begin;
    x.floats = r.end - r.begin;
    x.grad_begin = g.begin;
    x.grad_floats = g.end - g.begin;
    x.pending_at = all_grads;
    bool frozen_tensor = false;
    const FfnParams& f = model.param_ptrs().layers[r.layer].experts[r.expert];
    std::vector<std::pair<size_t, size_t>> linear;  // (offset, padded span) from the expert's start
    const std::vector<ParamTensor>& tensors = layout.tensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const ParamTensor& t = tensors[i];
      if (t.offset < r.begin || t.offset >= r.end) continue;
      // Its span up to the next tensor (or the expert's end): the padding the layout keeps after it.
      const size_t next = i + 1 < tensors.size() && tensors[i + 1].offset < r.end ? tensors[i + 1].offset : r.end;
      if (params_ + t.offset == f.w_in) x.in_at = t.offset - r.begin, x.in_n = t.numel;
      if (params_ + t.offset == f.w_out) x.out_at = t.offset - r.begin, x.out_n = t.numel;
      if (params_ + t.offset == f.w_in || params_ + t.offset == f.w_out)
        linear.push_back({t.offset - r.begin, next - t.offset});
      if (trainable.trains(i)) x.trained.push_back({&t, t.offset - r.begin, trainable.grad_offset(i) - g.begin});
      else frozen_tensor = true;
    }
    check(linear.size() == 2, "offload: an expert's two linear weights were not found in the parameter layout");
    std::sort(linear.begin(), linear.end());
    if (bf16_)
      for (int k = 0; k < 2; ++k) x.lin_at[k] = linear[k].first, x.lin_span[k] = linear[k].second;
    x.split = frozen_tensor && !x.trained.empty();
    for (const TrainedTensor& t : x.trained) x.trains_linear = x.trains_linear || t.at == x.in_at || t.at == x.out_at;
    sizes.push_back({x.floats, x.split ? x.grad_floats : 0, x.grad_floats});
    expert_floats_ = std::max(expert_floats_, x.floats);
    slot_floats_ = std::max(slot_floats_, x.floats - x.linear_span());
    slot_bf16_ = std::max(slot_bf16_, x.linear_span());
    grad_floats_ = std::max(grad_floats_, x.grad_floats);
    all_weights += x.floats;
    all_grads += x.grad_floats;
    experts_.push_back(std::move(x));
  }
  forward_order_.resize(moe_model_layers_.size());
  sum_squares_.assign(experts_.size(), 0.0);
  const int entries = cfg.mode == OffloadMode::Ssd ? cache_entries_for(cfg, sizes) : 0;
  choose_copy_stream(cfg, entries);
  // A mapped slot computes on the host copy: it needs no weights buffer of its own. With bf16 compute a slot holds
  // its expert's linear weights only as their bf16 copy: converted on the host as they are uploaded (half the
  // bytes), or where the expert computes for a mapped slot. Every backend's to_bf16 rounds as moe::f32_to_bf16, so
  // the copy holds the bits resident training's conversion of the arena gives.
  const size_t slot_w = mapped_ ? 0 : slot_floats_ * sizeof(float), slot_g = grad_floats_ * sizeof(float);
  const size_t slot_w16 = slot_bf16_ * sizeof(uint16_t);

  // Device tier: the non-expert parameters (and their bf16 copies), the trained ones' gradients and moments, the
  // activations, then the slots (a slot's gradient buffer holds only trained tensors).
  const size_t dense = ((layout.total() - all_weights) + 3 * (model.num_grads() - all_grads)) * sizeof(float) +
                       (bf16_ ? model.bf16_copy_bytes(false) : 0);
  device_.charge(dense, bf16_ ? "the non-expert parameters, their bf16 copies, gradients and AdamW moments"
                              : "the non-expert parameters, gradients and AdamW moments");
  model.reserve_activations(B, T);
  charge_activations();
  int n_slots = cfg.expert_slots;
  if (n_slots == 0) {
    const size_t used = device_.current();
    const size_t left = static_cast<size_t>(cfg.device_budget_bytes) > used ? cfg.device_budget_bytes - used : 0;
    const size_t slot = slot_w + slot_g + slot_w16;
    n_slots = slot > 0 ? static_cast<int>(left / slot) : static_cast<int>(experts_.size());
    check(n_slots >= 1, "device tier: offload.device_budget_bytes " + std::to_string(cfg.device_budget_bytes) +
                            " leaves " + std::to_string(left) + " bytes after the non-expert state (" +
                            std::to_string(dense) + ") and the activations (" + std::to_string(activations_charged_) +
                            "); one expert slot (weights + gradient" + (bf16_ ? " + bf16 copy" : "") + ") needs " +
                            std::to_string(slot));
  }
  n_slots = std::min<int>(n_slots, static_cast<int>(experts_.size()));
  for (int s = 0; s < n_slots; ++s) {
    Slot slot;
    slot.w = TierBlock(device_, slot_w, "expert slot " + std::to_string(s) + " (weights)");
    slot.g = TierBlock(device_, slot_g, "expert slot " + std::to_string(s) + " (gradient)");
    if (bf16_) slot.w16 = TierBlock(device_, slot_w16, "expert slot " + std::to_string(s) + " (bf16 copy)");
    slots_.push_back(std::move(slot));
  }
  // At least one slot streams; the rest up to pin_fraction are reserved for pinned experts.
  pin_slots_ = std::min(n_slots - 1, static_cast<int>(std::floor(cfg.pin_fraction * n_slots + 1e-9)));
  if (cfg.pin_policy == PinPolicy::None) pin_slots_ = 0;
  pins_ = PinSelector(cfg.pin_policy, pin_slots_, experts_per_layer);

  make_store(cfg, sizes, entries, all_weights + 3 * all_grads, init);
  // One expert's linear weights in bf16 at a time: the copy worker converts and uploads them in turn.
  if (bf16_ && !mapped_ && !model.backend().device_memory_is_host())
    bf16_staging_ = TierBlock(host_, slot_w16, "the bf16 upload staging");
  if (cfg.optimizer == ExpertOptimizer::Delayed)
    pending_ = TierBlock(host_, all_grads * sizeof(float), "the experts' pending (previous step's) gradients");
  // Sizes the per-step bookkeeping, then waits idle: passes before the first step (evaluation) work too.
  begin_step(0, 0.0, TrainConfig{});
  enter_idle();
}

// ascends after a backward, is treated as the next forward): an expert of the layer in hand or one the sweep has
// passed is next needed in the following sweep.
ExpertOffload::~ExpertOffload() {
  // A pass cut short (an exception between weights() and done_*()) leaves mapped experts held.
  copy_worker_.drain();
  for (Slot& s : slots_) unmap(s);
  settle();
}

// On a host backend a copy worker competing with compute threads that take every core hides nothing and slows
// their barriers; an expert that can compute where it lives is not copied at all.
void ExpertOffload::choose_copy_stream(const OffloadConfig& cfg, int entries) {
  const Backend& be = model_.backend();
  const int experts = static_cast<int>(experts_.size());
  // The experts of the lookahead window stay held in the cache beside the optimizer's and the reader's entries.
  const int need = std::min(experts, std::max(1, cfg.lookahead) + 3);
  const bool room = cfg.mode != OffloadMode::Ssd || std::min(entries, experts) >= need;
  if (cfg.copy_stream == CopyStream::Mapped) {
    check(be.device_memory_is_host(), "offload.copy_stream: \"mapped\" computes on the experts' host copies in place, "
                                      "which the " + be.name() + " backend cannot; use \"auto\", \"worker\" or \"inline\"");
    check(room, "offload.cache_experts: \"mapped\" holds the lookahead window's experts in the cache beside the "
                "workers' entries: it needs at least " + std::to_string(need) + " entries (lookahead + 3), got " +
                std::to_string(entries));
    mapped_ = true;
  } else {
    mapped_ = cfg.copy_stream == CopyStream::Auto && cfg.mode == OffloadMode::Ssd && be.device_memory_is_host() && room;
  }
  // A device's copies run on its copy engine (Backend::transfer), which competes with no core: never inline.
  inline_copies_ = cfg.copy_stream == CopyStream::Inline ||
                   (cfg.copy_stream == CopyStream::Auto && cfg.mode == OffloadMode::Host && be.device_memory_is_host() &&
                    usable_cpus() <= be.threads());
}

void ExpertOffload::settle() {
  copy_worker_.drain();
  optimizer_worker_.drain();
  if (ssd_) ssd_->flush();
}

// Sweeps alternate direction (forward ascends the MoE layers, backward descends; the optimizer's sweep, which
// ascends after a backward, is treated as the next forward): an expert of the layer in hand or one the sweep has
// passed is next needed in the following sweep.
int64_t ExpertOffload::next_use(int expert) const {
  // An expert whose frozen weights sit in a slot they keep until its next use (the pass's last experts at the
  // turn from forward to backward, a frozen base across steps, pinned experts) is next uploaded from the slot,
  // not from the cache: its entry goes first, so the cache and the slots hold different experts.
  if (in_slot_[expert].load(std::memory_order_relaxed)) return std::numeric_limits<int64_t>::max();
  const int64_t sweep = sweep_.load(std::memory_order_relaxed);
  const int L = static_cast<int>(moe_model_layers_.size());
  const int cur = static_cast<int>(sweep / 2), layer = experts_[expert].moe_layer;
  const bool descending = sweep % 2 != 0;
  if (descending ? layer < cur : layer > cur) return descending ? cur - layer : layer - cur;
  const int left = descending ? cur : L - 1 - cur;
  return left + 1 + (descending ? layer : L - 1 - layer);
}

void ExpertOffload::charge_activations() {
  const size_t now = model_.activation_bytes();
  if (now > activations_charged_) device_.charge(now - activations_charged_, "the activations and scratch buffers");
  else device_.uncharge(activations_charged_ - now);
  activations_charged_ = now;
}

// Weights change between steps (updates) and on loads: no slot's contents may be reused across them, except a
// frozen expert's between steps.
void ExpertOffload::forget_slot_contents(bool all) {
  for (Slot& s : slots_) {
    const int was = s.holds;
    if (all || s.holds < 0) s.holds = -1;
    else if (experts_[s.holds].split) s.trained_stale = true;
    else if (experts_[s.holds].grad_floats > 0) s.holds = -1;
    if (s.holds != was) note_slot_holder(was, -1);
  }
}

// Only a frozen base counts: an expert that trains whole needs its entry's weights for its update.
void ExpertOffload::note_slot_holder(int was, int holder) {
  if (was >= 0) in_slot_[was].store(false, std::memory_order_relaxed);
  if (holder >= 0 && (experts_[holder].grad_floats == 0 || experts_[holder].split))
    in_slot_[holder].store(true, std::memory_order_relaxed);
}

// Reads ahead what an upload of expert id will read: nothing while a slot holds its weights, its trained
// tensors alone while a slot holds its frozen base.
void ExpertOffload::prefetch_weights(int id) {
  for (const Slot& s : slots_)
    if (s.holds == id) {
      if (s.trained_stale) store_->prefetch(id, kTrained);
      return;
    }
  store_->prefetch(id, weight_parts(experts_[id]));
}

bool ExpertOffload::base_in_slot(int i) const {
  return std::any_of(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.holds == i && s.trained_stale; });
}

// Between steps (evaluation, C API gradients): no pins, every slot streams, and no update ever starts, so a
// pass outside training computes what resident training would.
void ExpertOffload::enter_idle() {
  in_step_ = false;
  forget_slot_contents(false);
  free_.clear();
  for (Expert& x : experts_) {
    x.slot = x.pin_slot = -1;
    x.grad_down = x.grad_in_slot = false;
  }
  for (int s = 0; s < slots(); ++s) free_.push_back(s);
}

void ExpertOffload::begin_step(int t, double lr, const TrainConfig& hp) {
  in_step_ = true;
  forget_slot_contents(false);
  t_ = t;
  lr_ = lr;
  hp_ = hp;
  stats_ = OffloadStepStats{};
  upload_ns_ = 0;
  copy_stall_ms_ = 0;
  device_.reset_peak();
  host_.reset_peak();
  ssd_tier_.reset_peak();
  pinned_ = pins_.choose();
  stats_.pinned = pinned_;
  stats_.slots = slots();
  stats_.pin_slots = pin_slots_;
  stats_.cache_entries = cache_entries();
  stats_.home_tier = ssd_ ? 2 : 1;
  free_.clear();
  int next_pin = 0;
  for (Expert& x : experts_) {
    x.slot = -1;
    x.grad_down = false;
    x.grad_in_slot = false;
    x.updated = false;
    x.pin_slot = pinned_[x.moe_layer][x.e] ? next_pin++ : -1;
  }
  std::fill(sum_squares_.begin(), sum_squares_.end(), -1.0);
  for (int s = pin_slots_; s < slots(); ++s) free_.push_back(s);
  for (const auto& layer : pinned_) stats_.uploads.emplace_back(layer.size(), 0);
}

void ExpertOffload::begin_micro(int micro, int count) { last_micro_ = micro == count - 1; }

void ExpertOffload::plan(int layer, ExpertPass pass, const std::vector<int>& experts) {
  check(cursor_ == order_.size(), "offload: a pass started before the previous one finished");
  if (uninitialised_left_ > 0) initialise_remaining();  // a pass outside a step (evaluation) before any step
  layer_ = layer;
  pass_ = pass;
  order_.clear();
  for (int e : experts) order_.push_back(id(layer, e));
  cursor_ = requested_ = next_issue_ = 0;
  keep_from_ = order_.size() - std::min(order_.size(), free_.size());  // every streaming slot is free here
  const int moe = model_.config().moe_index(layer);
  if (pass == ExpertPass::Forward) forward_order_[moe] = experts;
  sweep_.store(int64_t{moe} * 2 + (pass == ExpertPass::Backward ? 1 : 0), std::memory_order_relaxed);
  issue_ahead();
  if (ssd_ && cfg_.prefetch) prefetch_for(layer, pass);
}

// Reads ahead into the host cache: the rest of this pass, then the next MoE layer's likely experts. A lead goes
// out now and every expert the pass finishes sends one more (release()), so the reads keep the disk busy through
// the whole pass instead of stopping after the first batch.
void ExpertOffload::prefetch_for(int layer, ExpertPass pass) {
  ahead_.clear();
  ahead_sent_ = 0;
  const size_t lead = prefetch_lead();
  if (lead == 0) return;
  ahead_.assign(order_.begin() + static_cast<std::ptrdiff_t>(next_issue_), order_.end());
  const int moe = model_.config().moe_index(layer);
  const int next = pass == ExpertPass::Forward ? moe + 1 : moe - 1;
  if (next >= 0 && next < static_cast<int>(moe_model_layers_.size())) {
    const int next_layer = moe_model_layers_[next];
    const std::vector<int>& likely = forward_order_[next];
    if (pass == ExpertPass::Forward)
      for (int e : likely) ahead_.push_back(id(next_layer, e));
    else
      for (size_t k = likely.size(); k-- > 0;) ahead_.push_back(id(next_layer, likely[k]));
  }
  send_prefetches(lead);
}

// Half of what the cache holds beside the workers' entries: with one read sent per finished expert, the entries
// read ahead stay younger than the ones a sweep has finished with, so LRU evicts those and not the reads ahead.
size_t ExpertOffload::prefetch_lead() const {
  const int room = cache_entries() - std::max(1, cfg_.lookahead) - 3;
  return room > 0 ? static_cast<size_t>(std::max(1, room / 2)) : 0;
}

void ExpertOffload::send_prefetches(size_t n) {
  for (; n > 0 && ahead_sent_ < ahead_.size(); --n) prefetch_weights(ahead_[ahead_sent_++]);
}

// Issues uploads in compute order while the lookahead window (past the last expert requested, or the first one
// not yet done) has room and a slot is free.
void ExpertOffload::issue_ahead() {
  const size_t base = std::max(cursor_, requested_ > 0 ? requested_ - 1 : 0);
  while (next_issue_ < order_.size() && next_issue_ <= base + static_cast<size_t>(cfg_.lookahead)) {
    const Expert& x = experts_[order_[next_issue_]];
    if (x.pin_slot < 0 && free_.empty()) return;
    issue(order_[next_issue_++]);
  }
}

void ExpertOffload::issue(int i) {
  Expert& x = experts_[i];
  const bool pinned = x.pin_slot >= 0;
  if (mapped_) return issue_mapped(i);
  if (pinned && x.slot >= 0) return;  // still in its slot from an earlier pass of this step
  if (pinned) {
    x.slot = x.pin_slot;
  } else {
    // A free slot that still holds this expert's weights saves their upload (the turn from forward to
    // backward, and between micro-batches); otherwise the longest-free slot, whose contents are least likely
    // to be wanted again.
    auto it = std::find_if(free_.begin(), free_.end(), [&](int slot) { return slots_[slot].holds == i; });
    if (it == free_.end()) it = free_.begin();
    x.slot = *it;
    free_.erase(it);
  }
  Slot& s = slots_[x.slot];
  const bool weights_up = s.holds != i;
  // Only the trained tensors changed since the slot took this expert's frozen base.
  const bool trained_up = !weights_up && s.trained_stale;
  if (weights_up) note_slot_holder(s.holds, -1);
  // The upload below marks i once the slot holds it, if the slot keeps it to its next use: a pinned slot, or a
  // streaming one that no later upload of this pass takes (the pass's last experts).
  const bool kept = pinned || next_issue_ - 1 >= keep_from_;
  s.holds = i;
  s.trained_stale = false;
  // The upload below writes the slot's bf16 copy from the same fp32 weights (mapped slots convert in weights()).
  if (weights_up || (trained_up && x.trains_linear)) s.bf16_of = bf16_ ? i : -1;
  const size_t grad_bytes = x.grad_floats * sizeof(float);
  // The gradient buffer starts as the host gradient of earlier micro-batches, or zero (pinned experts keep
  // theirs in the slot until the last micro-batch).
  const bool grad_up = pass_ == ExpertPass::Backward && !pinned && x.grad_down;
  const bool grad_zero = pinned || (pass_ == ExpertPass::Backward && !x.grad_down);
  float *w_dst = s.w.f(), *g_dst = s.g.f();
  uint16_t* w16_dst = s.w16.u16();
  Slot* slot = &s;
  auto upload = [=, this] {
    slot->copy_from = slot->copy_to = {};
    if (weights_up || trained_up || grad_up) {
      // The next use of an expert waits for its last update (no staleness); other experts' updates run on.
      optimizer_worker_.wait(update_ticket_[i]);
      const Expert& x = experts_[i];
      const unsigned parts = weights_up ? weight_parts(x) : trained_up ? updated_weights(x) : 0u;
      const ExpertState host = store_->acquire(i, parts | (grad_up ? kGrad : 0u));
      const auto t0 = Clock::now();
      Backend& dev = model_.backend();
      if (weights_up) upload_weights(x, 0, host.w, x.floats, w_dst, w16_dst);
      if ((weights_up && host.t) || trained_up)  // the trained tensors' current weights (apart, or in place)
        for (const TrainedTensor& t : x.trained)
          upload_weights(x, t.at, host.t ? host.t + t.grad_at : host.w + t.at, t.t->numel, w_dst, w16_dst);
      if (grad_up) dev.transfer(g_dst, host.g, grad_bytes);
      slot->copy_from = t0;
      slot->copy_to = Clock::now();
      add_upload_time(ms_between(t0, slot->copy_to));
      store_->release(i, parts | (grad_up ? kGrad : 0u), 0, 0);
      if (weights_up && kept) note_slot_holder(-1, i);
    }
    if (grad_zero) model_.backend().transfer_zero(g_dst, grad_bytes);
  };
  if (inline_copies_) {
    // The compute thread copies: nothing is hidden, so the whole time counts as a stall. Downloads queued on
    // the copy worker (possibly from this slot) finish first, as they would in the worker's FIFO order.
    const auto t0 = Clock::now();
    copy_worker_.drain();
    upload();
    stats_.stall_ms += ms_between(t0, Clock::now());
    copy_stall_ms_ += ms_between(s.copy_from, s.copy_to);
    s.ticket = 0;
  } else {
    s.ticket = copy_worker_.submit(upload);
  }
  // The trained tensors alone: their packed gradient's size in fp32, tensor by tensor in bf16.
  size_t trained_bytes = bf16_ ? 0 : grad_bytes;
  if (bf16_)
    for (const TrainedTensor& t : x.trained) trained_bytes += upload_bytes(x, t.at, t.t->numel);
  const size_t weight_bytes = weights_up ? upload_bytes(x, 0, x.floats) : trained_up ? trained_bytes : 0;
  stats_.bytes_h2d += static_cast<int64_t>(weight_bytes + (grad_up ? grad_bytes : 0));
  if (weights_up || trained_up) ++stats_.uploads[x.moe_layer][x.e];
}

size_t ExpertOffload::upload_bytes(const Expert& x, size_t at, size_t n) const {
  size_t bytes = n * sizeof(float);
  if (!bf16_) return bytes;
  // A linear weight's span moves as the weight in bf16, its padding not at all.
  for (int k = 0; k < 2; ++k) {
    const size_t span_lo = x.lin_at[k], w_hi = span_lo + linear_numel(x, k), span_hi = span_lo + x.lin_span[k];
    const auto overlap = [&](size_t hi) {
      const size_t lo = std::max(at, span_lo), up = std::min(at + n, hi);
      return up > lo ? up - lo : 0;
    };
    bytes -= overlap(span_hi) * sizeof(float);
    bytes += overlap(w_hi) * sizeof(uint16_t);
  }
  return bytes;
}

void ExpertOffload::upload_weights(const Expert& x, size_t at, const float* src, size_t n, float* w_dst,
                                   uint16_t* w16_dst) {
  Backend& dev = model_.backend();
  if (!bf16_) return dev.transfer(w_dst + at, src, n * sizeof(float));
  // [at, at + n) in pieces: the two linear weights (in either order) converted, the rest (biases, adapters) as is.
  size_t pos = at;
  const size_t end = at + n;
  auto plain = [&](size_t to) {
    if (to <= pos) return;
    dev.transfer(w_dst + x.slot_at(pos), src + (pos - at), (to - pos) * sizeof(float));
    pos = to;
  };
  for (int k = 0; k < 2; ++k) {
    const size_t span_lo = x.lin_at[k], span_hi = span_lo + x.lin_span[k];
    if (end <= span_lo || pos >= span_hi) continue;
    plain(span_lo);
    // The weight itself converted into the slot's copy; its padding (which nothing reads) moves nowhere.
    const size_t lo = pos, hi = std::min(end, span_lo + linear_numel(x, k));
    if (hi > lo) {
      const int64_t count = static_cast<int64_t>(hi - lo);
      if (dev.device_memory_is_host()) {
        host_compute_.norms->to_bf16(w16_dst + x.bf16_at(lo), src + (lo - at), count);
      } else {
        host_compute_.norms->to_bf16(bf16_staging_.u16(), src + (lo - at), count);
        dev.transfer(w16_dst + x.bf16_at(lo), bf16_staging_.u16(), static_cast<size_t>(count) * sizeof(uint16_t));
      }
    }
    pos = std::min(end, span_hi);
  }
  plain(end);
}

void ExpertOffload::add_upload_time(double ms) { upload_ns_ += static_cast<int64_t>(ms * 1e6); }

// The same pointers, moved from an expert's start in an arena to its slot (null stays null: a frozen tensor's
// gradient).
FfnParams ExpertOffload::rebase(const FfnParams& f, const float* from, float* to) {
  return moved(f, [&](float* p) { return p ? to + (p - from) : nullptr; });
}

FfnParams ExpertOffload::slot_params(const Expert& x, float* w) const {
  const float* from = params_ + x.begin;
  return moved(model_.param_ptrs().layers[x.layer].experts[x.e], [&](float* p) -> float* {
    if (!p) return nullptr;
    const size_t at = static_cast<size_t>(p - from);
    return x.in_linear(at) ? nullptr : w + x.slot_at(at);
  });
}

int ExpertOffload::max_held() const {
  if (mapped_) return 1;
  return std::max(1, std::min(cfg_.lookahead, (slots() - pin_slots_) / 2));
}

FfnParams ExpertOffload::weights(int layer, int e) {
  const int i = id(layer, e);
  check(requested_ < order_.size() && order_[requested_] == i, "offload: expert computed out of its planned order");
  check(requested_ - cursor_ < static_cast<size_t>(max_held()), "offload: more experts held than max_held()");
  while (next_issue_ <= requested_) issue(order_[next_issue_++]);
  ++requested_;
  // The run's uploads are in; the next run's start behind them while it computes.
  if (max_held() > 1) issue_ahead();
  Slot& s = slots_[experts_[i].slot];
  if (!copy_worker_.done(s.ticket)) {
    const auto t0 = Clock::now();
    copy_worker_.wait(s.ticket);
    const auto t1 = Clock::now();
    stats_.stall_ms += ms_between(t0, t1);
    // Only the wait that overlapped the upload's own copies is copy time compute did not hide.
    const auto from = std::max(t0, s.copy_from), to = std::min(t1, s.copy_to);
    if (to > from) copy_stall_ms_ += ms_between(from, to);
  }
  FfnParams f = mapped_ ? map_params(layer, e, s.mapped)
                        : slot_params(experts_[i], s.w.f());
  if (bf16_) bf16_weights(s, i, f);
  return f;
}

void ExpertOffload::bf16_weights(Slot& s, int i, FfnParams& f) {
  const Expert& x = experts_[i];
  uint16_t* w16 = s.w16.u16();
  if (s.bf16_of != i) {
    // Only a mapped slot has fp32 linear weights to convert (the host copy); an upload writes the others' copy.
    check(mapped_, "offload: a slot's bf16 copy does not hold the weights of the expert it computes");
    Backend& be = model_.backend();
    be.to_bf16(w16 + x.bf16_at(x.in_at), f.w_in, static_cast<int64_t>(x.in_n));
    be.to_bf16(w16 + x.bf16_at(x.out_at), f.w_out, static_cast<int64_t>(x.out_n));
    s.bf16_of = i;
  }
  f.w_in_bf16 = w16 + x.bf16_at(x.in_at);
  f.w_out_bf16 = w16 + x.bf16_at(x.out_at);
}

FfnParams ExpertOffload::grads(int layer, int e) {
  const Expert& x = experts_[id(layer, e)];
  return rebase(model_.grad_ptrs().layers[layer].experts[e], grads_ + x.grad_begin, slots_[x.slot].g.f());
}

void ExpertOffload::release(int i) {
  check(cursor_ < requested_ && order_[cursor_] == i, "offload: expert done out of its planned order");
  Expert& x = experts_[i];
  if (mapped_) unmap(slots_[x.slot]);
  if (x.pin_slot < 0) {
    free_.push_back(x.slot);
    x.slot = -1;
  }
  ++cursor_;
  issue_ahead();
  send_prefetches(1);
  if (cursor_ == order_.size() && pass_ == ExpertPass::Backward && in_step_ && last_micro_ &&
      cfg_.optimizer == ExpertOptimizer::Layer && updates_at_backward())
    update_layer(layer_);
}

void ExpertOffload::done_forward(int layer, int e) { release(id(layer, e)); }

void ExpertOffload::done_backward(int layer, int e) {
  const int i = id(layer, e);
  Expert& x = experts_[i];
  const bool final = in_step_ && last_micro_;
  // A frozen expert has no gradient: nothing goes down and it is never updated.
  if (x.grad_floats > 0) {
    if (x.pin_slot < 0 || last_micro_)
      download_grad(i, final, final && cfg_.optimizer != ExpertOptimizer::Layer && updates_at_backward());
    else x.grad_in_slot = true;
  }
  release(i);
}

OffloadStepStats ExpertOffload::end_step(const std::vector<std::vector<int32_t>>& step_tokens) {
  copy_worker_.drain();
  if (!cfg_.optimizer_overlap) optimizer_worker_.drain();
  if (cfg_.optimizer == ExpertOptimizer::Delayed) {
    pending_valid_ = true;
    pending_t_ = t_;
    pending_lr_ = lr_;
    pending_scale_ = hp_.grad_clip > 0 ? clip_scale_ : 1.0;
  }
  enter_idle();
  pins_.observe(step_tokens);
  charge_activations();
  stats_.upload_ms = upload_ns_.load() / 1e6;
  stats_.upload_hidden_ms = std::max(0.0, stats_.upload_ms - copy_stall_ms_);
  stats_.store = store_->take_stats();
  stats_.peak_device_bytes = static_cast<int64_t>(device_.peak());
  stats_.peak_host_bytes = static_cast<int64_t>(host_.peak());
  stats_.peak_ssd_bytes = static_cast<int64_t>(ssd_tier_.peak());
  return stats_;
}

}  // namespace moe
