#include "infer/expert_slots.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "offload/ssd_store.h"

namespace moe {
namespace {

size_t padded16(size_t n) { return (n + 15) / 16 * 16; }  // each bf16 copy starts 32-byte aligned

// An offloaded trainer's home as the slots' store: an acquire reads the expert's weights into one host buffer (the
// slots acquire one expert at a time and release it before the next).
class HomeStore final : public ExpertStore {
 public:
  HomeStore(ExpertStateHome& home, size_t largest) : home_(home), buffer_(largest) {}
  ExpertState acquire(int i, unsigned need, unsigned) override {
    check(need == kWeights, "generation: an expert's weights alone are read from its home");
    home_.read_expert(i, kWeights, buffer_.data());
    return {buffer_.data()};
  }
  void release(int, unsigned, unsigned, unsigned) override {}

 private:
  ExpertStateHome& home_;
  std::vector<float> buffer_;
};

}  // namespace

ExpertSlotCache::ExpertSlotCache(Backend& be, const ParamLayout& layout, const ModelParams& params, float* arena,
                                 ExpertStateHome& source, int slots)
    : ExpertSlotCache(be, layout, params, arena, ExpertHome::Apart, slots) {
  size_t largest = 0;
  for (const ExpertRange& r : experts_) largest = std::max(largest, r.end - r.begin);
  store_ = std::make_unique<HomeStore>(source, largest);
  // Slots in host memory take a miss straight from the home, without the store's buffer in between.
  if (be.device_memory_is_host()) source_ = &source;
}

ExpertSlotCache::ExpertSlotCache(Backend& be, const ParamLayout& layout, const ModelParams& params, float* arena,
                                 ExpertHome home, int slots, const OffloadConfig& ssd)
    : be_(be), params_(params), arena_(arena), home_(home), experts_(layout.expert_ranges()) {
  check(slots >= 1, "generation: expert slots must be at least 1 (got " + std::to_string(slots) + ")");
  layer_base_.assign(params.layers.size(), -1);
  for (int i = static_cast<int>(experts_.size()) - 1; i >= 0; --i) layer_base_[experts_[i].layer] = i;
  where_.assign(experts_.size(), -1);
  size_t largest = 0;
  std::vector<ExpertSizes> sizes;
  for (const ExpertRange& r : experts_) {
    sizes.push_back({r.end - r.begin, 0, 0});
    largest = std::max(largest, r.end - r.begin);
  }
  slots_.resize(std::min<size_t>(slots, std::max<size_t>(experts_.size(), 1)));
  for (Slot& s : slots_) s.w.reserve(be_, largest * sizeof(float));
  // bf16 compute: the model binds its experts' bf16 pointers (to copies in its arena, which the slots stand in for).
  if (!experts_.empty() && params.layers[experts_[0].layer].experts[experts_[0].expert].w_in_bf16) {
    std::map<size_t, size_t> numel;
    for (const ParamTensor& t : layout.tensors()) numel[t.offset] = t.numel;
    size_t most = 0;
    for (const ExpertRange& r : experts_) {
      const FfnParams& f = params.layers[r.layer].experts[r.expert];
      const size_t in = numel.at(static_cast<size_t>(f.w_in - arena));
      const size_t out = numel.at(static_cast<size_t>(f.w_out - arena));
      linear_floats_.push_back({in, out});
      most = std::max(most, padded16(in) + out);
    }
    for (Slot& s : slots_) s.w16.reserve(be_, most * sizeof(uint16_t));
  }
  if (home_ == ExpertHome::Apart) return;  // the other constructor sets the store
  if (home_ == ExpertHome::Host) {
    std::vector<size_t> begins;
    for (const ExpertRange& r : experts_) begins.push_back(r.begin);
    store_ = std::make_unique<ArenaExpertStore>(arena_, arena_, arena_, arena_, begins, begins);
    return;
  }
  // Generation trains nothing: each record is the expert's weights alone.
  host_tier_ = std::make_unique<MemoryTier>("host", be_, MemKind::PinnedHost, 0);
  ssd_tier_ = std::make_unique<MemoryTier>("ssd", be_, MemKind::PageableHost, 0);
  const int entries = ssd.cache_experts > 0 ? ssd.cache_experts : 4;
  auto store = std::make_unique<SsdExpertStore>(ssd.ssd_dir.empty() ? SsdExpertStore::fresh_dir("moe-generate") : ssd.ssd_dir, sizes, entries,
                                                ssd, *host_tier_, *ssd_tier_);
  for (size_t i = 0; i < experts_.size(); ++i) store->store(static_cast<int>(i), {arena_ + experts_[i].begin});
  store->flush();
  store->take_stats();
  store_ = std::move(store);
}

ExpertSlotCache::~ExpertSlotCache() = default;

void ExpertSlotCache::release_arena_experts() {
  check(home_ == ExpertHome::Ssd, "generation: only experts whose home is the SSD tier can leave the arena");
  for (const ExpertRange& r : experts_) std::fill(arena_ + r.begin, arena_ + r.end, 0.0f);
}

int ExpertSlotCache::id(int layer, int e) const {
  check(layer >= 0 && layer < static_cast<int>(layer_base_.size()) && layer_base_[layer] >= 0,
        "generation: layer " + std::to_string(layer) + " has no routed experts");
  return layer_base_[layer] + e;
}

ExpertSlotStats ExpertSlotCache::take_stats() {
  ExpertSlotStats s = stats_;
  s.store = store_->take_stats();
  stats_ = {};
  return s;
}

// The SSD tier starts reading the experts this pass will need into its host cache while earlier ones compute.
void ExpertSlotCache::plan(int layer, ExpertPass pass, const std::vector<int>& experts) {
  check(pass == ExpertPass::Forward, "generation: experts are only computed forward");
  for (int e : experts) {
    const int i = id(layer, e);
    if (where_[i] < 0) store_->prefetch(i, kWeights);
  }
}

FfnParams ExpertSlotCache::weights(int layer, int e) {
  const int i = id(layer, e);
  int s = where_[i];
  if (s >= 0) {
    ++stats_.hits;
  } else {
    ++stats_.misses;
    s = 0;
    for (int j = 1; j < static_cast<int>(slots_.size()); ++j)
      if (slots_[j].last_use < slots_[s].last_use) s = j;
    if (slots_[s].holds >= 0) where_[slots_[s].holds] = -1;
    const size_t floats = experts_[i].end - experts_[i].begin;
    const FfnParams& f = params_.layers[layer].experts[e];
    const size_t w_in = static_cast<size_t>(f.w_in - (arena_ + experts_[i].begin));
    const size_t w_out = static_cast<size_t>(f.w_out - (arena_ + experts_[i].begin));
    bool words = false;  // the bf16 copies came from the home as they are (its records keep them in bf16)
    if (source_) {
      if (!linear_floats_.empty()) {
        const auto [in, out] = linear_floats_[i];
        uint16_t* w16 = slots_[s].w16.u16();
        words = source_->read_expert_bf16(i, slots_[s].w.f(), {{w_in, in, w16}, {w_out, out, w16 + padded16(in)}});
      }
      if (!words) source_->read_expert(i, kWeights, slots_[s].w.f());
    } else {
      const ExpertState state = store_->acquire(i, kWeights);
      be_.copy(slots_[s].w.f(), state.w, floats * sizeof(float));
      store_->release(i, kWeights, 0, 0);
    }
    if (!linear_floats_.empty() && !words) {
      const auto [in, out] = linear_floats_[i];
      be_.to_bf16(slots_[s].w16.u16(), slots_[s].w.f() + w_in, static_cast<int64_t>(in));
      be_.to_bf16(slots_[s].w16.u16() + padded16(in), slots_[s].w.f() + w_out, static_cast<int64_t>(out));
    }
    const size_t words_read = words ? linear_floats_[i].first + linear_floats_[i].second : 0;
    stats_.bytes_uploaded += static_cast<int64_t>((floats - words_read) * sizeof(float) + words_read * sizeof(uint16_t));
    slots_[s].holds = i;
    where_[i] = s;
  }
  slots_[s].last_use = ++clock_;
  const FfnParams& f = params_.layers[layer].experts[e];
  const float* base = arena_ + experts_[i].begin;
  float* slot = slots_[s].w.f();
  auto move = [&](float* p) { return p ? slot + (p - base) : nullptr; };
  FfnParams r;
  r.w_in = move(f.w_in);
  r.b_in = move(f.b_in);
  r.w_out = move(f.w_out);
  r.b_out = move(f.b_out);
  if (!linear_floats_.empty()) {
    r.w_in_bf16 = slots_[s].w16.u16();
    r.w_out_bf16 = slots_[s].w16.u16() + padded16(linear_floats_[i].first);
  }
  // A fine-tune's adapters sit inside the expert's range and came along with it.
  auto move_lora = [&](const LoraParams& l) { return LoraParams{move(l.A), move(l.B), l.r, l.scale}; };
  r.lora_in[0] = move_lora(f.lora_in[0]);
  r.lora_in[1] = move_lora(f.lora_in[1]);
  r.lora_out = move_lora(f.lora_out);
  return r;
}

FfnParams ExpertSlotCache::grads(int, int) { fail("generation: experts have no gradients"); }
void ExpertSlotCache::done_forward(int, int) {}
void ExpertSlotCache::done_backward(int, int) { fail("generation: experts are only computed forward"); }

}  // namespace moe
