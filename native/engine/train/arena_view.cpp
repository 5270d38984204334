#include "train/arena_view.h"

#include <algorithm>

namespace moe {

const float* ArenaView::tensor(size_t offset, size_t numel) {
  if (home_) {
    auto it = std::upper_bound(experts_.begin(), experts_.end(), offset,
                               [](size_t at, const ExpertRange& r) { return at < r.begin; });
    if (it != experts_.begin() && offset < std::prev(it)->end) {
      const int k = static_cast<int>(std::prev(it) - experts_.begin());
      const ExpertRange& r = experts_[k];
      if (k != held_) {
        expert_.resize(r.end - r.begin);
        home_->read_expert(k, part_, expert_.data());
        held_ = k;
      }
      return expert_.data() + (offset - r.begin);
    }
  }
  if (be_.device_memory_is_host()) return arena_ + offset;
  copy_.resize(numel);
  be_.copy(copy_.data(), arena_ + offset, numel * sizeof(float));
  return copy_.data();
}

void ArenaView::read(size_t offset, size_t numel, float* dst) {
  const float* p = tensor(offset, numel);
  std::copy(p, p + numel, dst);
}

}  // namespace moe
