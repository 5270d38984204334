// AdamW over the whole parameter arena with global-norm clipping. Moments live beside the
// parameters in the same layout, so a checkpoint stores them under the parameters' names.
#pragma once
#include "model/buffer.h"
#include "model/model.h"

namespace moe {

struct OptimizerStepInfo {
  double grad_norm = 0;  // before clipping
  double clip_scale = 1;
};

class AdamWOptimizer {
 public:
  explicit AdamWOptimizer(Model& model);

  // Applies one update (t is the 1-based update count used for bias correction).
  OptimizerStepInfo step(int t, double lr, const TrainConfig& hp);

  float* m() { return m_.f(); }
  float* v() { return v_.f(); }

 private:
  Model& model_;
  DeviceBuffer m_, v_;
};

}  // namespace moe
