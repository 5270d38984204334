// Mapped slots (offload.copy_stream "mapped"): on a backend whose device memory is host memory, copying an
// expert's weights from its host copy into a slot only spends memory bandwidth and a core. A mapped expert
// computes on its host copy in place instead: the copy worker waits for its last update and for the store to
// have its weights (the SSD tier's read), and holds them in the store until the expert's done_forward() or
// done_backward(); the slot keeps only the gradient buffer, which moves as it does with copies. The values the
// kernels read are the ones a copy would have held, so results stay bit-identical to resident training.
#include <chrono>
#include <cstring>

#include "offload/expert_offload.h"

namespace moe {

void ExpertOffload::issue_mapped(int i) {
  Expert& x = experts_[i];
  const bool pinned = x.pin_slot >= 0;
  // A pinned expert keeps its slot, and the gradient accumulating there, for the whole step; its weights are
  // held again for each pass.
  const bool first = !(pinned && x.slot >= 0);
  if (pinned) {
    x.slot = x.pin_slot;
  } else {
    x.slot = free_.front();
    free_.erase(free_.begin());
  }
  Slot& s = slots_[x.slot];
  s.bf16_of = -1;  // the host copy it maps may have changed since (an update)
  const size_t grad_bytes = x.grad_floats * sizeof(float);
  const bool grad_up = first && pass_ == ExpertPass::Backward && !pinned && x.grad_down;
  const bool grad_zero = first && (pinned || (pass_ == ExpertPass::Backward && !x.grad_down));
  float* g_dst = s.g.f();
  Slot* slot = &s;
  s.ticket = copy_worker_.submit([=, this] {
    slot->copy_from = slot->copy_to = {};
    optimizer_worker_.wait(update_ticket_[i]);  // the next use of an expert waits for its last update
    const unsigned parts = weight_parts(experts_[i]);
    slot->mapped = store_->acquire(i, parts);
    slot->mapped_parts = parts;
    slot->mapped_expert = i;
    if (grad_up) {
      const ExpertState host = store_->acquire(i, kGrad);
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(g_dst, host.g, grad_bytes);
      slot->copy_from = t0;
      slot->copy_to = std::chrono::steady_clock::now();
      add_upload_time(std::chrono::duration<double, std::milli>(slot->copy_to - t0).count());
      store_->release(i, kGrad, 0, 0);
    }
    if (grad_zero) std::memset(g_dst, 0, grad_bytes);
  });
  if (grad_up) stats_.bytes_h2d += static_cast<int64_t>(grad_bytes);
}

// The pointers resident training would use, moved from the expert's range of the parameter arena to where the
// store keeps its state: the trained tensors apart (t) when the store keeps them so, everything else in w.
FfnParams ExpertOffload::map_params(int layer, int e, const ExpertState& host) const {
  const Expert& x = experts_[id(layer, e)];
  const float* from = params_ + x.begin;
  auto move = [&](float* p) -> float* {
    if (!p) return nullptr;
    const size_t at = static_cast<size_t>(p - from);
    if (host.t)
      for (const TrainedTensor& t : x.trained)
        if (at >= t.at && at < t.at + t.t->numel) return host.t + t.grad_at + (at - t.at);
    return host.w + at;
  };
  return moved(model_.param_ptrs().layers[layer].experts[e], move);
}

void ExpertOffload::unmap(Slot& s) {
  if (!s.mapped_parts) return;
  store_->release(s.mapped_expert, s.mapped_parts, 0, 0);
  s.mapped = ExpertState{};
  s.mapped_parts = 0;
  s.mapped_expert = -1;
}

}  // namespace moe
