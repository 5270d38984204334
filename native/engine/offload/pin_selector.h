// Chooses the experts that stay in device slots for a whole step (ES-MoE pinning): the hottest experts by the
// token counts of past steps, over all MoE layers together (slots are one device-wide pool).
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace moe {

class PinSelector {
 public:
  // experts_per_layer: E of each MoE layer. pin_slots: how many experts may be pinned at once.
  PinSelector(PinPolicy policy, int pin_slots, const std::vector<int>& experts_per_layer);

  // Tokens per expert of a finished step: [MoE layer][expert].
  void observe(const std::vector<std::vector<int32_t>>& tokens);
  // [MoE layer][expert] = 1 for the pinned ones: the top pin_slots scores above zero (ties: lower layer, then
  // lower expert). Nothing is pinned before the first observed step.
  std::vector<std::vector<uint8_t>> choose() const;

  // EMA weight of the newest step (policy "ema").
  static constexpr double kEmaWeight = 0.5;

 private:
  PinPolicy policy_;
  int pin_slots_;
  std::vector<std::vector<double>> score_;
};

}  // namespace moe
