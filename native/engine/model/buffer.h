// An owning buffer in one of the backend's memory kinds, zero-filled on (re)allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

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
    ptr_ = be.alloc(kind, bytes == 0 ? 64 : bytes);
    be.zero(ptr_, bytes_);
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

inline void reserve_floats(Backend& be, DeviceBuffer& b, size_t n) { b.reserve(be, n * sizeof(float)); }

}  // namespace moe
