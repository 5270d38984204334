// Gradients and the host optimizer of expert offload: each expert's gradient going down (with its share of the
// global norm), and its AdamW update on the optimizer worker, started as the `optimizer` mode says (expert_offload.h).
#include <cstring>
#include <vector>

#include "offload/expert_offload.h"

namespace moe {

// Without clipping (the scale is known to be 1) and with overlap on, expert and layer updates start during
// backward; `delayed` always does (the scale it applies is the previous step's).
bool ExpertOffload::updates_at_backward() const {
  if (!cfg_.optimizer_overlap) return false;
  return cfg_.optimizer == ExpertOptimizer::Delayed || hp_.grad_clip <= 0;
}

// Queues the slot gradient's download; a final one also measures the gradient's squared norm, and may start
// the expert's update right after.
void ExpertOffload::download_grad(int i, bool final, bool then_update) {
  Expert& x = experts_[i];
  const size_t bytes = x.grad_floats * sizeof(float);
  const float* src = slots_[x.slot].g.f();
  // Beside a device the slot's gradient is measured there, on the compute thread, before it goes down: the host
  // would read it again on the copy worker's one thread (an OLMoE-shaped layer's experts: 1.6 GB), delaying the
  // uploads queued behind it. Backend::sum_squares sums the same fixed chunks in order everywhere: the same bits.
  const bool measured = final && !model_.backend().device_memory_is_host();
  if (measured) sum_squares_[i] = model_.backend().sum_squares(src, static_cast<int64_t>(x.grad_floats));
  copy_worker_.submit([=, this] {
    const ExpertState host = store_->acquire(i, 0, kGrad);
    model_.backend().transfer(host.g, src, bytes);
    if (final && !measured)
      sum_squares_[i] = host_compute_.norms->sum_squares(host.g, static_cast<int64_t>(experts_[i].grad_floats));
    store_->release(i, kGrad, kGrad, 0);
    if (then_update) {
      if (cfg_.optimizer == ExpertOptimizer::Delayed) submit_delayed_update(i, false);
      else submit_update(i, false);
    }
  });
  x.updated |= then_update;
  x.grad_down = true;
  x.grad_in_slot = false;
  stats_.bytes_d2h += static_cast<int64_t>(bytes);
}

void ExpertOffload::update_layer(int layer) {
  for (int i = layer_base_[layer]; i < static_cast<int>(experts_.size()) && experts_[i].layer == layer; ++i) {
    Expert& x = experts_[i];
    if (!x.grad_down || x.updated) continue;
    x.updated = true;
    copy_worker_.submit([this, i] { submit_update(i, false); });  // after the layer's downloads (FIFO)
  }
}

// The resident optimizer's AdamW, trained tensor by trained tensor, on one expert's host state with the given
// gradient (packed); the weights are where the store keeps them (apart, or in place).
void ExpertOffload::apply_adamw(const Expert& x, const ExpertState& s, const float* grad, const UpdateStep& step,
                                const TrainConfig& hp) {
  for (const TrainedTensor& t : x.trained) {
    float* w = s.t ? s.t + t.grad_at : s.w + t.at;
    host_compute_.updates->adamw_update(w, grad + t.grad_at, s.m + t.grad_at, s.v + t.grad_at,
                                        static_cast<int64_t>(t.t->numel),
                                        adamw_params(step.t, step.lr, hp, step.clip_scale, t.t->decay));
  }
}

// Runs on whichever thread learns the gradient is complete; only touches this expert's state.
void ExpertOffload::submit_update(int i, bool zero_grad, int ahead, unsigned ahead_parts) {
  // The step's values are taken now, not when the update runs: an update of an expert the next step does not use
  // may still be queued when that step sets its own clip scale. Without clipping the scale is exactly 1, as in
  // the resident optimizer.
  const double clip_scale = hp_.grad_clip > 0 ? clip_scale_ : 1.0;
  update_ticket_[i] = optimizer_worker_.submit([=, this, t = t_, lr = lr_, hp = hp_] {
    if (ahead >= 0) store_->prefetch(ahead, ahead_parts);
    const Expert& x = experts_[i];
    const unsigned parts = updated_weights(x) | kMoment1 | kMoment2;
    const ExpertState s = store_->acquire(i, parts | (zero_grad ? 0u : kGrad), zero_grad ? kGrad : 0u);
    if (zero_grad) std::memset(s.g, 0, x.grad_floats * sizeof(float));
    apply_adamw(x, s, s.g, UpdateStep{t, lr, clip_scale}, hp);
    // The gradient has been applied: its file copy may stay stale (docs/offload.md, "SSD tier").
    store_->release(i, parts | kGrad, parts, kGrad);
  });
}

// ZeRO-Offload's delayed parameter update: apply the previous step's gradient (with that step's learning rate
// and clip scale), and keep this step's for the next.
void ExpertOffload::submit_delayed_update(int i, bool zero_grad) {
  update_ticket_[i] = optimizer_worker_.submit(
      [this, i, zero_grad, valid = pending_valid_, t = pending_t_, lr = pending_lr_, scale = pending_scale_, hp = hp_] {
        const Expert& x = experts_[i];
        float* pending = pending_.f() + x.pending_at;
        const unsigned parts = updated_weights(x) | kGrad | kMoment1 | kMoment2;
        const ExpertState s = store_->acquire(i, parts);
        if (zero_grad) std::memset(s.g, 0, x.grad_floats * sizeof(float));
        if (valid) apply_adamw(x, s, pending, UpdateStep{t, lr, scale}, hp);
        std::memcpy(pending, s.g, x.grad_floats * sizeof(float));
        store_->release(i, parts, parts, 0);
      });
}

void ExpertOffload::finish_gradients() {
  // Pinned experts that computed in earlier micro-batches but not in the last one.
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i)
    if (experts_[i].grad_in_slot) download_grad(i, in_step_, false);
  copy_worker_.drain();
  // Each expert's share of the global norm: measured at its final download, else read now (it computed only
  // in earlier micro-batches), else zero (it computed nothing; its update zeroes the stale host gradient).
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i) {
    if (sum_squares_[i] >= 0) continue;
    if (!experts_[i].grad_down || experts_[i].grad_floats == 0) {
      sum_squares_[i] = 0.0;
      continue;
    }
    const ExpertState s = store_->acquire(i, kGrad);
    sum_squares_[i] = host_compute_.norms->sum_squares(s.g, static_cast<int64_t>(experts_[i].grad_floats));
    store_->release(i, kGrad, 0, 0);
  }
}

void ExpertOffload::start_expert_updates(double clip_scale) {
  clip_scale_ = clip_scale;
  sweep_.store(0, std::memory_order_relaxed);
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(experts_.size()); ++i)
    if (!experts_[i].updated && experts_[i].grad_floats > 0) order.push_back(i);  // frozen experts are never updated
  // SSD tier: read the updates' state ahead of the optimizer worker, in its order, and keep that lead while they
  // run (each update's start asks for the one `ahead` places on): the reads, and the write-backs their entries
  // need, then run on the prefetch worker beside the updates' compute instead of between them on the optimizer
  // worker.
  const size_t ahead = ssd_ && cfg_.prefetch ? prefetch_lead() : 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    Expert& x = experts_[i];
    if (k < ahead) store_->prefetch(i, update_parts(x));
    x.updated = true;
    const int next = k + ahead < order.size() ? order[k + ahead] : -1;
    if (cfg_.optimizer == ExpertOptimizer::Delayed) submit_delayed_update(i, !x.grad_down);
    else if (ahead > 0 && next >= 0) submit_update(i, !x.grad_down, next, update_parts(experts_[next]));
    else submit_update(i, !x.grad_down);
  }
}

}  // namespace moe
