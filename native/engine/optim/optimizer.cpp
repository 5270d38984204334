#include "optim/optimizer.h"

#include <cmath>

#include "core/error.h"

namespace moe {

AdamWParams adamw_params(int t, double lr, const TrainConfig& hp, double clip_scale, bool decay) {
  AdamWParams ap;
  ap.lr = static_cast<float>(lr);
  ap.beta1 = static_cast<float>(hp.beta1);
  ap.beta2 = static_cast<float>(hp.beta2);
  ap.eps = static_cast<float>(hp.eps);
  ap.grad_scale = static_cast<float>(clip_scale);
  ap.step = t;
  ap.weight_decay = decay ? static_cast<float>(hp.weight_decay) : 0.0f;
  return ap;
}

AdamWOptimizer::AdamWOptimizer(Model& model) : model_(model) {
  // Moments only for trained tensors, in the gradient arena's packed layout.
  reserve_floats(model.backend(), m_, model.num_grads());
  reserve_floats(model.backend(), v_, model.num_grads());
  const ParamLayout& layout = model.layout();
  for (const ParamTensor& pt : layout.tensors()) {
    bool in_expert = false;
    for (const ExpertRange& r : layout.expert_ranges()) in_expert |= pt.offset >= r.begin && pt.offset < r.end;
    expert_tensor_.push_back(in_expert);
  }
}

// Summed stretch by stretch in arena order — the dense stretches between routed experts, then each expert's
// range — so an offloaded expert's share can be computed wherever its gradient lives, with the same bits.
double AdamWOptimizer::grad_sum_squares(const ExpertSumSquares& expert_sum) {
  Backend& be = model_.backend();
  const float* g = model_.grads();
  const std::vector<ExpertRange>& ranges = model_.trainable().grad_expert_ranges();
  double total = 0.0;
  size_t from = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    total += be.sum_squares(g + from, static_cast<int64_t>(ranges[i].begin - from));
    total += expert_sum ? expert_sum(static_cast<int>(i))
                        : be.sum_squares(g + ranges[i].begin, static_cast<int64_t>(ranges[i].end - ranges[i].begin));
    from = ranges[i].end;
  }
  return total + be.sum_squares(g + from, static_cast<int64_t>(model_.num_grads() - from));
}

OptimizerStepInfo AdamWOptimizer::norm_and_clip(const TrainConfig& hp, const ExpertSumSquares& expert_sum) {
  OptimizerStepInfo info;
  info.grad_norm = std::sqrt(grad_sum_squares(expert_sum));
  if (hp.grad_clip > 0) {
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) only when that is below 1.
    const double coef = hp.grad_clip / (info.grad_norm + 1e-6);
    if (coef < 1.0) info.clip_scale = coef;
  }
  return info;
}

void AdamWOptimizer::update(int t, double lr, const TrainConfig& hp, double clip_scale, bool skip_experts) {
  Backend& be = model_.backend();
  float *p = model_.params_for_update(), *g = model_.grads();
  const std::vector<ParamTensor>& tensors = model_.layout().tensors();
  const TrainableSet& trainable = model_.trainable();
  // The bf16 copies the arena keeps are written with the weights. The routed experts' are not among them when
  // someone else updates them (expert offload): an offloaded expert's copy is made from its own weights where it
  // computes.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ParamTensor& pt = tensors[i];
    if ((skip_experts && expert_tensor_[i]) || !trainable.trains(i)) continue;  // frozen: never written
    const size_t at = trainable.grad_offset(i);
    const AdamWParams hpi = adamw_params(t, lr, hp, clip_scale, pt.decay);
    const int64_t n = static_cast<int64_t>(pt.numel);
    if (uint16_t* p16 = model_.bf16_copy_for_update(i))
      be.adamw_update_bf16(p + pt.offset, g + at, m_.f() + at, v_.f() + at, p16, n, hpi);
    else be.adamw_update(p + pt.offset, g + at, m_.f() + at, v_.f() + at, n, hpi);
  }
  check(!skip_experts || model_.compute_dtype() == ComputeDtype::F32 || model_.bf16_experts_apart(),
        "optimizer: the routed experts' bf16 copies in the arena would go stale");
  model_.bf16_copies_written();
}

OptimizerStepInfo AdamWOptimizer::step(int t, double lr, const TrainConfig& hp) {
  OptimizerStepInfo info = norm_and_clip(hp, nullptr);
  // A NaN or infinite gradient would make every weight it touches non-finite: the step is left out instead.
  if (!std::isfinite(info.grad_norm)) return info;
  update(t, lr, hp, info.clip_scale, false);
  return info;
}

OptimizerStepInfo AdamWOptimizer::step_without_experts(int t, double lr, const TrainConfig& hp,
                                                       const ExpertSumSquares& expert_sum,
                                                       const std::function<void(double)>& start_expert_updates) {
  OptimizerStepInfo info = norm_and_clip(hp, expert_sum);
  start_expert_updates(info.clip_scale);
  update(t, lr, hp, info.clip_scale, true);
  return info;
}

}  // namespace moe
