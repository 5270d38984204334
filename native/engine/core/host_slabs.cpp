#include "core/host_slabs.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "core/host_memory.h"

namespace moe {
namespace {

constexpr size_t kAlign = 64;

}  // namespace

HostSlabs::~HostSlabs() {
  for (auto& [base, slab] : slabs_) host_free(reinterpret_cast<void*>(base));
}

void* HostSlabs::alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (open_) {
    Slab& s = slabs_.at(open_);
    if (s.bytes - s.used >= bytes) {
      void* p = reinterpret_cast<void*>(open_ + s.used);
      s.used += bytes, ++s.live;
      return p;
    }
  }
  // A new slab; a block larger than a slab gets one of its own, and the open slab stays open for smaller ones.
  const size_t slab = std::max(slab_bytes_, bytes);
  void* base = host_alloc(slab);
  if (!base) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(base);
  slabs_[at] = Slab{slab, bytes, 1};
  reserved_ += slab;
  if (slab == slab_bytes_ || !open_) open_ = at;
  return base;
}

void HostSlabs::free(void* p) {
  if (!p) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  auto it = slabs_.upper_bound(at);
  check(it != slabs_.begin(), "HostSlabs::free: the pointer is not from these slabs");
  --it;
  Slab& s = it->second;
  check(at < it->first + s.used, "HostSlabs::free: the pointer is not from these slabs");
  if (--s.live > 0) return;
  if (it->first == open_) {  // emptied: reuse it from the start rather than give it back
    s.used = 0;
    return;
  }
  host_free(reinterpret_cast<void*>(it->first));
  reserved_ -= s.bytes;
  slabs_.erase(it);
}

}  // namespace moe
