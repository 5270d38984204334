#include "optim/optimizer.h"

#include <cmath>

namespace moe {

AdamWOptimizer::AdamWOptimizer(Model& model) : model_(model) {
  reserve_floats(model.backend(), m_, model.num_params());
  reserve_floats(model.backend(), v_, model.num_params());
}

OptimizerStepInfo AdamWOptimizer::step(int t, double lr, const TrainConfig& hp) {
  Backend& be = model_.backend();
  OptimizerStepInfo info;
  info.grad_norm = std::sqrt(be.sum_squares(model_.grads(), static_cast<int64_t>(model_.num_params())));
  if (hp.grad_clip > 0) {
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) only when that is below 1.
    const double coef = hp.grad_clip / (info.grad_norm + 1e-6);
    if (coef < 1.0) info.clip_scale = coef;
  }
  AdamWParams ap;
  ap.lr = static_cast<float>(lr);
  ap.beta1 = static_cast<float>(hp.beta1);
  ap.beta2 = static_cast<float>(hp.beta2);
  ap.eps = static_cast<float>(hp.eps);
  ap.grad_scale = static_cast<float>(info.clip_scale);
  ap.step = t;
  float *p = model_.params(), *g = model_.grads();
  for (const ParamTensor& pt : model_.layout().tensors()) {
    ap.weight_decay = pt.decay ? static_cast<float>(hp.weight_decay) : 0.0f;
    be.adamw_update(p + pt.offset, g + pt.offset, m_.f() + pt.offset, v_.f() + pt.offset,
                    static_cast<int64_t>(pt.numel), ap);
  }
  return info;
}

}  // namespace moe
