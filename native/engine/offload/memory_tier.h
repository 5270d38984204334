// A memory tier: a named byte budget over one backend memory kind. Every block the offload engine owns is
// charged to a tier, so peak bytes are measured, and a request past the budget fails naming the tier.
// The SSD tier (files in the run directory read through a host cache) will implement the same accounting.
#pragma once
#include <cstddef>
#include <string>

#include "backend/backend.h"

namespace moe {

class MemoryTier {
 public:
  // budget 0 means unlimited.
  MemoryTier(std::string name, Backend& be, MemKind kind, size_t budget_bytes);
  MemoryTier(const MemoryTier&) = delete;
  MemoryTier& operator=(const MemoryTier&) = delete;

  const std::string& name() const { return name_; }
  size_t budget() const { return budget_; }
  size_t current() const { return current_; }
  size_t peak() const { return peak_; }
  void reset_peak() { peak_ = current_; }

  // Books bytes that live elsewhere (e.g. the model's non-expert parameters on the device) against the budget.
  void charge(size_t bytes, const std::string& what);
  void uncharge(size_t bytes);

  void* alloc(size_t bytes, const std::string& what);
  void release(void* ptr, size_t bytes);

 private:
  std::string name_;
  Backend& be_;
  MemKind kind_;
  size_t budget_, current_ = 0, peak_ = 0;
};

// An owning block in a tier (zero-filled).
class TierBlock {
 public:
  TierBlock() = default;
  TierBlock(MemoryTier& tier, size_t bytes, const std::string& what);
  TierBlock(const TierBlock&) = delete;
  TierBlock& operator=(const TierBlock&) = delete;
  TierBlock(TierBlock&& o) noexcept;
  TierBlock& operator=(TierBlock&& o) noexcept;
  ~TierBlock();

  float* f() const { return static_cast<float*>(ptr_); }
  uint16_t* u16() const { return static_cast<uint16_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  MemoryTier* tier_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace moe
