// Where generation reaches the routed experts: their weights live in a home tier — the model's arena (host), a
// file behind a host cache (SSD, the offload engine's SsdExpertStore), or an offloaded trainer's own home apart
// from the arenas (ExpertStateHome, read an expert's weights at a time) — and compute only from one of `slots`
// device slots. The slots are a cache of the most recently used experts (LRU), so an expert a token chose again
// costs no copy; a miss copies the expert's weights from its home into the least recently used slot. This is the
// inference half of expert offload: no gradients, no optimizer state, no step protocol. A model in bf16 compute
// (its experts' *_bf16 pointers set) gets each slot's linear weights as a bf16 copy made when the slot is filled,
// so its experts compute as the resident ones do.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/buffer.h"
#include "model/config.h"
#include "model/params.h"
#include "offload/expert_access.h"
#include "offload/expert_store.h"
#include "offload/memory_tier.h"

namespace moe {

// Apart: the trainer's home apart from the arenas (the second constructor).
enum class ExpertHome { Host, Ssd, Apart };

struct ExpertSlotStats {
  int64_t hits = 0, misses = 0;  // weights() calls served from a slot / copied in
  int64_t bytes_uploaded = 0;
  ExpertStoreStats store;        // SSD home: the cache's reads
};

class ExpertSlotCache final : public ExpertAccess {
 public:
  // params: the model's parameter arena and its layout (the experts' home in the host tier, and where the SSD
  // tier's records are written from). slots >= 1. ssd: the SSD tier's directory and host cache (cache_experts
  // entries, 0: 4; ssd_dir empty: a fresh temporary directory).
  ExpertSlotCache(Backend& be, const ParamLayout& layout, const ModelParams& params, float* arena, ExpertHome home,
                  int slots, const OffloadConfig& ssd = {});
  // The experts of an offloaded trainer whose home is apart from the arenas (whose expert ranges hold nothing):
  // a miss reads the expert's weights from `source` (which must outlive this).
  ExpertSlotCache(Backend& be, const ParamLayout& layout, const ModelParams& params, float* arena,
                  ExpertStateHome& source, int slots);
  ~ExpertSlotCache() override;

  // SSD home: overwrites the arena's experts with zeros, so nothing but the SSD records can serve an expert from
  // now on (the arena is the model's: only for a model that is used for nothing else).
  void release_arena_experts();

  int slots() const { return static_cast<int>(slots_.size()); }
  ExpertSlotStats take_stats();
  const ExpertSlotStats& stats() const { return stats_; }  // slot counts since the last take_stats()

  void plan(int layer, ExpertPass pass, const std::vector<int>& experts) override;
  FfnParams weights(int layer, int e) override;
  FfnParams grads(int layer, int e) override;
  void done_forward(int layer, int e) override;
  void done_backward(int layer, int e) override;

 private:
  struct Slot {
    DeviceBuffer w;
    DeviceBuffer w16;  // bf16 compute: the linear weights' bf16 copy, w_in's then w_out's
    int holds = -1;  // expert id whose weights it holds
    uint64_t last_use = 0;
  };
  int id(int layer, int e) const;

  Backend& be_;
  const ModelParams& params_;
  float* arena_;
  ExpertHome home_;
  std::vector<ExpertRange> experts_;
  // bf16 compute: each expert's in- and out-projection sizes (floats); empty in fp32 compute.
  std::vector<std::pair<size_t, size_t>> linear_floats_;
  std::vector<int> layer_base_;  // model layer -> first expert id, -1 for dense layers
  std::vector<int> where_;       // expert id -> slot, -1 when only at home
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  std::unique_ptr<MemoryTier> host_tier_, ssd_tier_;
  std::unique_ptr<ExpertStore> store_;
  // A home apart that a miss reads into the slot directly (in bf16, the linear weights' words where it keeps them).
  ExpertStateHome* source_ = nullptr;
  ExpertSlotStats stats_;
};

}  // namespace moe
