// The host tier apart from the model's arenas: every expert's state, in the parts an SSD record has (weights, a
// split expert's trained weights kept apart, gradient, two moments), in one block of the host tier's page-locked
// memory. A device backend's arenas are device memory (CUDA: managed), where the host tier cannot live: an
// upload from a managed page moves the page to the device, and the host optimizer's next touch moves it back, a
// fault per page each way; page-locked memory is what the copy engine reads at full speed (on an H200: 54 GB/s,
// where pages moving back and forth let the host optimizer touch them at half its speed and uploads from pageable
// memory run at 6.5).
#pragma once
#include <vector>

#include "offload/expert_store.h"
#include "offload/memory_tier.h"

namespace moe {

class PinnedExpertStore final : public ApartExpertStore {
 public:
  // sizes: floats per expert and part; the block is charged to `host`.
  PinnedExpertStore(const std::vector<ExpertSizes>& sizes, MemoryTier& host);

  ExpertState acquire(int i, unsigned, unsigned) override { return at_[i]; }
  void release(int, unsigned, unsigned, unsigned) override {}
  void store(int i, const ExpertState& from) override { copy_parts(sizes_[i], at_[i], from); }
  void load(int i, const ExpertState& to) override { copy_parts(sizes_[i], to, at_[i]); }

 private:
  std::vector<ExpertSizes> sizes_;
  TierBlock block_;
  std::vector<ExpertState> at_;  // each expert's parts in block_ (null where a part has no floats)
};

}  // namespace moe
