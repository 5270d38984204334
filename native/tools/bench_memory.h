// Host arrays for the benchmark subcommands: from the engine's own allocator (large blocks on huge pages), so the
// kernels run on memory as training gives it to them, uninitialised (std::vector would zero 800 MB serially), and
// filled with reproducible random values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/host_memory.h"
#include "core/rng.h"
#include "core/threadpool.h"

namespace bench {

template <class T>
class HostArray {
 public:
  explicit HostArray(size_t n) : ptr_(static_cast<T*>(moe::host_alloc(n * sizeof(T))), &moe::host_free), n_(n) {
    if (!ptr_ && n) moe::fail("bench: cannot allocate " + std::to_string(n * sizeof(T)) + " bytes");
  }
  T* data() const { return ptr_.get(); }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<T, decltype(&moe::host_free)> ptr_;
  size_t n_;
};

// x[i] uniform in [-scale, scale), a function of (stream, i) alone.
inline void fill_random(moe::ThreadPool& tp, float* x, int64_t n, uint64_t stream, float scale = 1.0f) {
  tp.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) x[i] = (2.0f * moe::random_uniform(7, stream, uint64_t(i)) - 1.0f) * scale;
  });
}

inline HostArray<float> random_floats(moe::ThreadPool& tp, int64_t n, uint64_t stream) {
  HostArray<float> a(n);
  fill_random(tp, a.data(), n, stream);
  return a;
}

}  // namespace bench
