#include "offload/ssd_weights_home.h"

#include <cstring>

#include "core/error.h"
#include "offload/ssd_store.h"

namespace moe {

SsdWeightsHome::SsdWeightsHome(Backend& be, const ParamLayout& layout, uint64_t seed, const std::string& dir,
                               int cache_experts)
    : layout_(layout),
      seed_(seed),
      written_(layout.expert_ranges().size(), false),
      host_("host", be, MemKind::PinnedHost, 0),
      ssd_("ssd", be, MemKind::PageableHost, 0) {
  std::vector<ExpertSizes> sizes;
  for (const ExpertRange& r : layout.expert_ranges()) sizes.push_back({r.end - r.begin, 0, 0});
  OffloadConfig cfg;
  cfg.cache_experts = cache_experts;
  store_ = std::make_unique<SsdExpertStore>(dir.empty() ? SsdExpertStore::fresh_dir("moe-weights") : dir, sizes,
                                            cache_experts, cfg, host_, ssd_);
}

SsdWeightsHome::~SsdWeightsHome() = default;

void SsdWeightsHome::read_expert(int k, ExpertPart part, float* dst) {
  check(part == kWeights, "experts: a model without a trainer keeps its experts' weights alone");
  const ExpertRange& r = layout_.expert_ranges()[k];
  if (!written_[k]) {
    init_params(layout_, dst, r.begin, r.end, seed_, 1);
    return;
  }
  const ExpertState s = store_->acquire(k, kWeights);
  std::memcpy(dst, s.w, (r.end - r.begin) * sizeof(float));
  store_->release(k, kWeights, 0, 0);
}

void SsdWeightsHome::write_expert(int k, ExpertPart part, const float* src) {
  check(part == kWeights, "experts: a model without a trainer keeps its experts' weights alone");
  const ExpertRange& r = layout_.expert_ranges()[k];
  const ExpertState s = store_->acquire(k, 0, kWeights);
  std::memcpy(s.w, src, (r.end - r.begin) * sizeof(float));
  store_->release(k, kWeights, kWeights, 0);
  written_[k] = true;
}

}  // namespace moe
