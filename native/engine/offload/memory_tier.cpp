#include "offload/memory_tier.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace moe {

MemoryTier::MemoryTier(std::string name, Backend& be, MemKind kind, size_t budget_bytes)
    : name_(std::move(name)), be_(be), kind_(kind), budget_(budget_bytes) {}

void MemoryTier::charge(size_t bytes, const std::string& what) {
  if (budget_ && current_ + bytes > budget_)
    fail(name_ + " tier: " + what + " needs " + std::to_string(bytes) + " bytes but only " +
         std::to_string(budget_ - current_) + " of its " + std::to_string(budget_) +
         "-byte budget are free; raise offload.device_budget_bytes or use fewer offload.expert_slots");
  current_ += bytes;
  peak_ = std::max(peak_, current_);
}

void MemoryTier::uncharge(size_t bytes) { current_ -= std::min(bytes, current_); }

void* MemoryTier::alloc(size_t bytes, const std::string& what) {
  charge(bytes, what);
  void* p = nullptr;
  try {
    p = be_.alloc(kind_, bytes == 0 ? 64 : bytes);
  } catch (const std::exception& e) {
    // The backend's reason alone ("out of memory") would not say which tier, for what, or how much.
    uncharge(bytes);
    fail(name_ + " tier: allocating " + std::to_string(bytes) + " bytes for " + what + " failed: " + e.what());
  }
  be_.zero(p, bytes);
  return p;
}

void MemoryTier::release(void* ptr, size_t bytes) {
  if (!ptr) return;
  be_.release(kind_, ptr);
  uncharge(bytes);
}

TierBlock::TierBlock(MemoryTier& tier, size_t bytes, const std::string& what)
    : tier_(&tier), ptr_(tier.alloc(bytes, what)), bytes_(bytes) {}

TierBlock::TierBlock(TierBlock&& o) noexcept { *this = std::move(o); }

TierBlock& TierBlock::operator=(TierBlock&& o) noexcept {
  std::swap(tier_, o.tier_);
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

TierBlock::~TierBlock() {
  if (tier_) tier_->release(ptr_, bytes_);
}

}  // namespace moe
