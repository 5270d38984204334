// An owning buffer in one of the backend's memory kinds, zero-filled on (re)allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace moe {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(be_, o.be_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  // Ensures room for `bytes`; keeps the block when it is already large enough.
  void reserve(Backend& be, size_t bytes, MemKind kind = MemKind::Device) {
    if (ptr_ && bytes <= bytes_) return;
    reset();
    be_ = &be;
    kind_ = kind;
    bytes_ = bytes;
    ptr_ = be.alloc_zeroed(kind, bytes == 0 ? 64 : bytes);
  }
  void reset() {
    if (ptr_) be_->release(kind_, ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void zero() {
    if (ptr_) be_->zero(ptr_, bytes_);
  }

  float* f() const { return static_cast<float*>(ptr_); }
  int32_t* i32() const { return static_cast<int32_t*>(ptr_); }
  uint16_t* u16() const { return static_cast<uint16_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  Backend* be_ = nullptr;
  MemKind kind_ = MemKind::Device;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A buffer of bf16 weight copies, parts of which are declared to its backend (Backend::keep_bf16_weights) until
// the buffer goes: the backend may keep the weights there in layouts of its own between to_bf16 writes.
class KeptBf16Buffer {
 public:
  KeptBf16Buffer() = default;
  KeptBf16Buffer(const KeptBf16Buffer&) = delete;
  KeptBf16Buffer& operator=(const KeptBf16Buffer&) = delete;
  ~KeptBf16Buffer() { forget(); }

  void reserve(Backend& be, size_t count) {
    forget();
    buf_.reserve(be, count * sizeof(uint16_t));
    be_ = &be;
  }
  // Declares [offset, offset + count) (in bf16 values).
  void keep(size_t offset, size_t count) {
    kept_.emplace_back(offset, count);
    be_->keep_bf16_weights(u16() + offset, u16() + offset + count);
  }
  uint16_t* u16() const { return buf_.u16(); }
  // Undeclares every kept range (the backend drops its layouts of them).
  void forget_kept() { forget(); }

 private:
  void forget() {
    for (auto [offset, count] : kept_) be_->forget_bf16_weights(u16() + offset, u16() + offset + count);
    kept_.clear();
  }
  DeviceBuffer buf_;
  Backend* be_ = nullptr;
  std::vector<std::pair<size_t, size_t>> kept_;
};

inline void reserve_floats(Backend& be, DeviceBuffer& b, size_t n) { b.reserve(be, n * sizeof(float)); }

}  // namespace moe
