// A per-thread packing buffer for the GEMM drivers, grown on demand and reused across calls (pool
// workers are persistent), 64-byte aligned for the vector kernels.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace moe::cpu {

template <typename T>
class PackBuffer {
 public:
  explicit PackBuffer(const char* owner) : owner_(owner) {}
  ~PackBuffer() { std::free(data_); }
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;

  T* get(size_t count) {
    if (count > capacity_) {
      std::free(data_);
      const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
      data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
      capacity_ = data_ ? count : 0;
      if (!data_) fail(std::string(owner_) + ": out of memory allocating a " + std::to_string(bytes) + "-byte packing buffer");
    }
    return data_;
  }

 private:
  const char* owner_;
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace moe::cpu
