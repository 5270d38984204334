#include "offload/pin_selector.h"

#include <algorithm>
#include <tuple>

namespace moe {

PinSelector::PinSelector(PinPolicy policy, int pin_slots, const std::vector<int>& experts_per_layer)
    : policy_(policy), pin_slots_(policy == PinPolicy::None ? 0 : pin_slots) {
  for (int E : experts_per_layer) score_.emplace_back(E, 0.0);
}

void PinSelector::observe(const std::vector<std::vector<int32_t>>& tokens) {
  for (size_t l = 0; l < score_.size(); ++l)
    for (size_t e = 0; e < score_[l].size(); ++e) {
      const double t = tokens[l][e];
      score_[l][e] = policy_ == PinPolicy::Ema ? kEmaWeight * t + (1 - kEmaWeight) * score_[l][e] : t;
    }
}

std::vector<std::vector<uint8_t>> PinSelector::choose() const {
  std::vector<std::vector<uint8_t>> pinned;
  std::vector<std::tuple<double, int, int>> ranked;  // (-score, layer, expert): ascending = hottest first
  for (size_t l = 0; l < score_.size(); ++l) {
    pinned.emplace_back(score_[l].size(), 0);
    for (size_t e = 0; e < score_[l].size(); ++e)
      if (score_[l][e] > 0) ranked.emplace_back(-score_[l][e], (int)l, (int)e);
  }
  std::sort(ranked.begin(), ranked.end());
  for (int i = 0; i < std::min<int>(pin_slots_, (int)ranked.size()); ++i)
    pinned[std::get<1>(ranked[i])][std::get<2>(ranked[i])] = 1;
  return pinned;
}

}  // namespace moe
