#pragma once
#include <cmath>

#include "model/config.h"

namespace moe {

// Linear warmup to lr over warmup_steps, then cosine decay to min_lr at the last step (step is 0-based).
inline double lr_at(const TrainConfig& t, int step) {
  if (step < t.warmup_steps) return t.lr * (step + 1) / t.warmup_steps;
  const int decay_steps = t.steps - t.warmup_steps;
  if (decay_steps <= 0) return t.lr;
  const double progress = std::fmin(1.0, static_cast<double>(step - t.warmup_steps) / decay_steps);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(3.14159265358979323846 * progress));
}

}  // namespace moe
