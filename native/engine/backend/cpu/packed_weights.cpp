#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "backend/cpu/gemm_bf16.h"
#include "core/error.h"

namespace moe::cpu {
namespace {

int64_t packed_bytes(int I, int O, bool forward) {
  return (forward ? sgemm_bf16_packed_words(O, I) : sgemm_bf16_packed_words(I, O)) * int64_t{sizeof(uint32_t)};
}

std::uintptr_t address(const uint16_t* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

void PackedBf16Weights::keep(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  drop_overlapping(address(begin), address(end), true);  // what was packed from this memory belonged to its old owner
  regions_[address(begin)] = address(end);
}

void PackedBf16Weights::changed(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  check(!sealed(address(begin), address(end)),
        "bf16 weights: a write into weights whose copies were handed back after packing (a model that only answers)");
  drop_overlapping(address(begin), address(end), false);
}

bool PackedBf16Weights::lay_out(ThreadPool& tp, const uint16_t* w, const float* fp32, int I, int O) {
  if (I <= 0 || O <= 0) return false;
  const std::lock_guard<std::mutex> lock(mu_);
  const Addr begin = address(w), end = address(w + int64_t{I} * O);
  auto region = regions_.upper_bound(begin);
  if (region == regions_.begin() || std::prev(region)->second < end) return false;
  drop_overlapping(begin, end, true);
  const int64_t bytes = packed_bytes(I, O, true);
  Entry e{I, O, true, static_cast<uint32_t*>(slabs_.alloc(static_cast<size_t>(bytes)))};
  if (!e.words) fail("bf16 weight packing: out of memory allocating " + std::to_string(bytes) + " bytes");
  sgemm_bf16_pack_b(tp, true, O, I, fp32, I, e.words);
  entries_[{begin, true}] = e;
  bytes_ += bytes;
  max_span_ = std::max(max_span_, end - begin);
  sealed_[begin] = end;
  return true;
}

bool PackedBf16Weights::sealed(Addr begin, Addr end) const {
  auto it = sealed_.lower_bound(end);  // the first starting at or past end
  return it != sealed_.begin() && std::prev(it)->second > begin;
}

void PackedBf16Weights::forget(const uint16_t* begin, const uint16_t* end) {
  const std::lock_guard<std::mutex> lock(mu_);
  const Addr b = address(begin), e = address(end);
  drop_overlapping(b, e, true);
  auto it = regions_.upper_bound(b);
  if (it != regions_.begin() && std::prev(it)->second > b) --it;
  while (it != regions_.end() && it->first < e) it = regions_.erase(it);
  auto s = sealed_.upper_bound(b);
  if (s != sealed_.begin() && std::prev(s)->second > b) --s;
  while (s != sealed_.end() && s->first < e) s = sealed_.erase(s);
}

void PackedBf16Weights::drop_overlapping(Addr begin, Addr end, bool erase) {
  for (auto it = entries_.lower_bound({begin > max_span_ ? begin - max_span_ : 0, false});
       it != entries_.end() && it->first.first < end;) {
    Entry& e = it->second;
    const Addr w = it->first.first;
    if (begin < w + Addr(e.I) * e.O * sizeof(uint16_t)) {
      if (erase) {
        bytes_ -= packed_bytes(e.I, e.O, it->first.second);
        slabs_.free(e.words);
        it = entries_.erase(it);
        continue;
      }
      e.fresh = false;
    }
    ++it;
  }
}

const uint32_t* PackedBf16Weights::get(ThreadPool& tp, const uint16_t* w, int I, int O, bool forward) {
  if (I <= 0 || O <= 0) return nullptr;
  const std::lock_guard<std::mutex> lock(mu_);
  const Addr begin = address(w), end = address(w + int64_t{I} * O);
  auto region = regions_.upper_bound(begin);
  if (region == regions_.begin() || std::prev(region)->second < end) return nullptr;  // not inside a kept region
  Entry& e = entries_[{begin, forward}];
  const bool ready = e.words && e.fresh && e.I == I && e.O == O;
  if (ready) return e.words;
  if (sealed(begin, end)) {
    if (!e.words) entries_.erase({begin, forward});
    fail("bf16 weights: the weight [" + std::to_string(O) + " x " + std::to_string(I) + "] was read " +
         (forward ? "by the forward" : "by a backward") + " in a form not laid out before its copy was handed back "
         "(a model that only answers lays each weight out once, for the forward, as the shape it is)");
  }
  if (e.words && (e.I != I || e.O != O)) {  // the same bytes read as another shape: a new weight
    bytes_ -= packed_bytes(e.I, e.O, forward);
    slabs_.free(e.words);
    e = Entry{};
  }
  if (!e.words) {
    const int64_t bytes = packed_bytes(I, O, forward);
    e.words = static_cast<uint32_t*>(slabs_.alloc(static_cast<size_t>(bytes)));
    if (!e.words) fail("bf16 weight packing: out of memory allocating " + std::to_string(bytes) + " bytes");
    e.I = I, e.O = O, bytes_ += bytes;
    max_span_ = std::max(max_span_, end - begin);
  }
  if (!e.fresh) {
    if (forward) sgemm_bf16_pack_b(tp, true, O, I, w, I, e.words);
    else sgemm_bf16_pack_b(tp, false, I, O, w, I, e.words);
    e.fresh = true;
  }
  return e.words;
}

void PackedBf16Weights::prepare(ThreadPool& tp, const uint16_t* w, int I, int O, bool backward) {
  for (const bool forward : {true, false}) {
    if (!forward && !backward) continue;
    int i = I, o = O;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      const auto it = entries_.find({address(w), forward});
      if (it != entries_.end() && it->second.words) i = it->second.I, o = it->second.O;
    }
    get(tp, w, i, o, forward);
  }
}

int64_t PackedBf16Weights::bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace moe::cpu
