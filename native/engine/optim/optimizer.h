// AdamW over the trained tensors with global-norm clipping. Moments live in the gradient arena's packed layout
// (only trained tensors; Model::trainable()), and a checkpoint stores them under the parameters' names.
#pragma once
#include <functional>
#include <vector>

#include "model/buffer.h"
#include "model/model.h"

namespace moe {

struct OptimizerStepInfo {
  double grad_norm = 0;  // before clipping
  double clip_scale = 1;
};

// The update hyper-parameters of step t for a tensor with or without weight decay.
AdamWParams adamw_params(int t, double lr, const TrainConfig& hp, double clip_scale, bool decay);

// The squared L2 norm of routed expert i's gradient (experts in arena order).
using ExpertSumSquares = std::function<double(int expert)>;

class AdamWOptimizer {
 public:
  explicit AdamWOptimizer(Model& model);

  // Applies one update (t is the 1-based update count used for bias correction).
  OptimizerStepInfo step(int t, double lr, const TrainConfig& hp);
  // The same step with the routed experts' tensors left to someone else (expert offload), who also gives
  // each expert's share of the global norm: once the norm is known, start_expert_updates(clip_scale) is
  // called, then the other tensors are updated here.
  OptimizerStepInfo step_without_experts(int t, double lr, const TrainConfig& hp, const ExpertSumSquares& expert_sum,
                                         const std::function<void(double clip_scale)>& start_expert_updates);

  float* m() { return m_.f(); }
  float* v() { return v_.f(); }
  size_t state_bytes() const { return m_.bytes() + v_.bytes(); }  // both moments' allocations

 private:
  double grad_sum_squares(const ExpertSumSquares& expert_sum);
  OptimizerStepInfo norm_and_clip(const TrainConfig& hp, const ExpertSumSquares& expert_sum);
  void update(int t, double lr, const TrainConfig& hp, double clip_scale, bool skip_experts);

  Model& model_;
  DeviceBuffer m_, v_;
  std::vector<bool> expert_tensor_;  // per layout tensor: inside an ExpertRange
};

}  // namespace moe
