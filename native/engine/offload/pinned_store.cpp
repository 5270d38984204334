#include "offload/pinned_store.h"

namespace moe {

PinnedExpertStore::PinnedExpertStore(const std::vector<ExpertSizes>& sizes, MemoryTier& host) : sizes_(sizes) {
  // Every part starts 64-byte aligned (16 floats), as the arenas' tensors do, for the vector kernels.
  auto rounded = [](size_t floats) { return (floats + 15) / 16 * 16; };
  size_t floats = 0;
  for (const ExpertSizes& n : sizes) floats += rounded(n.weights) + rounded(n.trained) + 3 * rounded(n.grads);
  block_ = TierBlock(host, floats * sizeof(float), "the experts' master weights, gradients and AdamW moments");
  float* next = block_.f();
  auto take = [&](size_t n) {
    float* p = n ? next : nullptr;
    next += rounded(n);
    return p;
  };
  for (const ExpertSizes& n : sizes) {
    ExpertState s;
    s.w = take(n.weights);
    s.t = take(n.trained);
    s.g = take(n.grads);
    s.m = take(n.grads);
    s.v = take(n.grads);
    at_.push_back(s);
  }
}

}  // namespace moe
