#include "offload/ssd_weights_home.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "offload/ssd_store.h"

namespace moe {

SsdWeightsHome::SsdWeightsHome(Backend& be, const ParamLayout& layout, uint64_t seed, const std::string& dir,
                               int cache_experts, const std::vector<bool>& in_bf16)
    : layout_(layout),
      seed_(seed),
      written_(layout.expert_ranges().size(), false),
      host_("host", be, MemKind::PinnedHost, 0),
      ssd_("ssd", be, MemKind::PageableHost, 0) {
  std::vector<ExpertSizes> sizes;
  const bool compact = std::find(in_bf16.begin(), in_bf16.end(), true) != in_bf16.end();
  if (compact) parts_.resize(layout.expert_ranges().size());
  const std::vector<ParamTensor>& tensors = layout.tensors();
  size_t t = 0;
  for (size_t k = 0; k < layout.expert_ranges().size(); ++k) {
    const ExpertRange& r = layout.expert_ranges()[k];
    if (!compact) {
      sizes.push_back({r.end - r.begin, 0, 0});
      continue;
    }
    // Each tensor spans up to the next one's offset (its padding included), bf16 ones at half the floats.
    while (t < tensors.size() && tensors[t].offset < r.begin) ++t;
    size_t record = 0;
    for (; t < tensors.size() && tensors[t].offset < r.end; ++t) {
      const size_t next = t + 1 < tensors.size() ? std::min(tensors[t + 1].offset, r.end) : r.end;
      const bool half = t < in_bf16.size() && in_bf16[t];
      const size_t floats = next - tensors[t].offset;
      parts_[k].push_back({tensors[t].offset - r.begin, floats, record, half});
      record += half ? (floats + 1) / 2 : floats;
    }
    sizes.push_back({record, 0, 0});
  }
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
  read_record(k, dst, std::vector<const Bf16Words*>(parts_.empty() ? 0 : parts_[k].size(), nullptr));
}

bool SsdWeightsHome::read_expert_bf16(int k, float* dst, const std::vector<Bf16Words>& tensors) {
  if (parts_.empty() || !written_[k]) return false;
  std::vector<const Bf16Words*> words(parts_[k].size(), nullptr);
  for (const Bf16Words& t : tensors) {
    auto p = std::find_if(parts_[k].begin(), parts_[k].end(), [&](const Part& x) { return x.at == t.at; });
    if (p == parts_[k].end() || !p->bf16 || t.count > p->floats) return false;
    words[p - parts_[k].begin()] = &t;
  }
  read_record(k, dst, words);
  return true;
}

void SsdWeightsHome::read_record(int k, float* dst, const std::vector<const Bf16Words*>& words) {
  const ExpertRange& r = layout_.expert_ranges()[k];
  const ExpertState s = store_->acquire(k, kWeights);
  if (parts_.empty()) {
    std::memcpy(dst, s.w, (r.end - r.begin) * sizeof(float));
  } else {
    for (size_t j = 0; j < parts_[k].size(); ++j) {
      const Part& p = parts_[k][j];
      if (!p.bf16) {
        std::memcpy(dst + p.at, s.w + p.record_at, p.floats * sizeof(float));
        continue;
      }
      const uint16_t* half = reinterpret_cast<const uint16_t*>(s.w + p.record_at);
      if (words[j]) std::memcpy(words[j]->words, half, words[j]->count * sizeof(uint16_t));
      else for (size_t i = 0; i < p.floats; ++i) dst[p.at + i] = bf16_to_f32(half[i]);
    }
  }
  store_->release(k, kWeights, 0, 0);
}

void SsdWeightsHome::write_expert(int k, ExpertPart part, const float* src) {
  check(part == kWeights, "experts: a model without a trainer keeps its experts' weights alone");
  const ExpertRange& r = layout_.expert_ranges()[k];
  const ExpertState s = store_->acquire(k, 0, kWeights);
  if (parts_.empty()) {
    std::memcpy(s.w, src, (r.end - r.begin) * sizeof(float));
  } else {
    for (const Part& p : parts_[k]) {
      if (!p.bf16) {
        std::memcpy(s.w + p.record_at, src + p.at, p.floats * sizeof(float));
        continue;
      }
      uint16_t* half = reinterpret_cast<uint16_t*>(s.w + p.record_at);
      for (size_t i = 0; i < p.floats; ++i) half[i] = f32_to_bf16(src[p.at + i]);
      if (p.floats % 2) half[p.floats] = 0;
    }
  }
  store_->release(k, kWeights, kWeights, 0);
  written_[k] = true;
}

}  // namespace moe
