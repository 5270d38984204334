#include "train/evaluation.h"

#include <cmath>
#include <limits>
#include <vector>

namespace moe {

double evaluate_loss(Model& model, const TokenData& data, int batches, int B, int T) {
  const uint64_t window = (uint64_t)B * T;
  const int available = static_cast<int>(std::min<uint64_t>(batches, (data.size() - 1) / window));
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  model.set_routing_skew(nullptr, 0);
  double sum = 0;
  int64_t count = 0;
  uint64_t cursor = 0;
  for (int b = 0; b < std::max(available, 1); ++b) {
    cursor = data.next_batch(cursor, B, T, inputs.data(), targets.data());
    const ForwardResult r = model.forward(inputs.data(), targets.data(), B, T);
    sum += r.loss * static_cast<double>(r.targets);
    count += r.targets;
  }
  if (model.on_devices()) model.take_device_records();
  return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace moe
