#include "backend/cpu/packed_weights.h"

#include <string>

#include "backend/cpu/gemm_bf16.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace moe::cpu {
namespace {

int64_t packed_bytes(int I, int O, bool forward) {
  return (forward ? sgemm_bf16_packed_words(O, I) : sgemm_bf16_packed_words(I, O)) * int64_t{sizeof(uint32_t)};
}

}  // namespace

PackedBf16Weights::~PackedBf16Weights() {
  for (auto& [key, e] : entries_) host_free(e.words);
}

void PackedBf16Weights::keep(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  drop_overlapping(begin, end, true);  // whatever was packed from this memory before belongs to its old owner
  regions_.emplace_back(begin, end);
}

void PackedBf16Weights::changed(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  drop_overlapping(begin, end, false);
}

void PackedBf16Weights::forget(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  drop_overlapping(begin, end, true);
  std::erase_if(regions_, [&](const auto& r) { return r.first < end && begin < r.second; });
}

void PackedBf16Weights::drop_overlapping(const uint16_t* begin, const uint16_t* end, bool erase) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    const uint16_t* w = it->first.first;
    if (w < end && begin < w + int64_t{e.I} * e.O) {
      if (erase) {
        bytes_ -= packed_bytes(e.I, e.O, it->first.second);
        host_free(e.words);
        it = entries_.erase(it);
        continue;
      }
      e.fresh = false;
    }
    ++it;
  }
}

const uint32_t* PackedBf16Weights::get(ThreadPool& tp, const uint16_t* w, int I, int O, bool forward) {
  const std::lock_guard<std::mutex> lock(mu_);
  const uint16_t* end = w + int64_t{I} * O;
  bool kept = false;
  for (const auto& [b, e] : regions_) kept = kept || (b <= w && end <= e);
  if (!kept || I <= 0 || O <= 0) return nullptr;
  Entry& e = entries_[{w, forward}];
  if (e.words && (e.I != I || e.O != O)) {  // the same bytes read as another shape: a new weight
    bytes_ -= packed_bytes(e.I, e.O, forward);
    host_free(e.words);
    e = Entry{};
  }
  if (!e.words) {
    const int64_t bytes = packed_bytes(I, O, forward);
    e.words = static_cast<uint32_t*>(host_alloc(static_cast<size_t>(bytes)));
    if (!e.words) fail("bf16 weight packing: out of memory allocating " + std::to_string(bytes) + " bytes");
    e.I = I, e.O = O, bytes_ += bytes;
  }
  if (!e.fresh) {
    if (forward) sgemm_bf16_pack_b(tp, true, O, I, w, I, e.words);
    else sgemm_bf16_pack_b(tp, false, I, O, w, I, e.words);
    e.fresh = true;
  }
  return e.words;
}

int64_t PackedBf16Weights::bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace moe::cpu
