// Host-side helpers of the CUDA backend: error checks on runtime calls, and the staging of op arguments.
// Every op of the contract may be handed device (managed) memory, pinned host memory or plain host memory (the
// tests and the host arenas pass std::vector data); Stage gives each argument a pointer the device can use,
// copying through stream-ordered scratch only what the device cannot reach, and copies staged outputs back.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moe::cuda {

// Elements of an a×b block (0 when either is not positive): the sizes Stage copies.
inline size_t sz(int64_t a, int64_t b = 1) { return a > 0 && b > 0 ? (size_t)a * (size_t)b : 0; }

// Fails (EngineError) naming the call and the runtime's message when err is not cudaSuccess.
void cuda_check(cudaError_t err, const char* what);

// "13.0"-style versions of the installed driver's CUDA support and of the runtime linked in ("none" without a driver).
std::string driver_version();
std::string runtime_version();

// A pointer the device can dereference for p (p itself for device or managed memory, the mapped address of
// pinned host memory), or null when p is ordinary host memory the device cannot reach.
void* device_view(const void* p);

// The arguments of one op. in(): read only; out(): written wholesale; inout(): read and written (the += outputs).
// Null pointers and empty ranges pass through unchanged; the same host range staged twice (an in-place op) gets
// one device copy. finish() waits for the op and copies staged outputs
// back; the contract is synchronous, so every op ends with it (a later version can keep work queued).
// With MOE_CUDA_PROFILE set in the environment, each named op's device time (CUDA events around its work,
// staging included) and wall time (construction to finish, host staging and the wait included) add up per
// name, and the process prints the table at exit (op_profile_table).
class Stage {
 public:
  explicit Stage(cudaStream_t stream, const char* op = nullptr);
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage();

  template <class T>
  const T* in(const T* p, size_t count) {
    return static_cast<const T*>(stage(const_cast<T*>(p), count * sizeof(T), true, false));
  }
  template <class T>
  T* out(T* p, size_t count) {
    return static_cast<T*>(stage(p, count * sizeof(T), false, true));
  }
  template <class T>
  T* inout(T* p, size_t count) {
    return static_cast<T*>(stage(p, count * sizeof(T), true, true));
  }
  // Device scratch for the op's own intermediates, freed after finish().
  template <class T>
  T* temp(size_t count) {
    return static_cast<T*>(scratch(count * sizeof(T)));
  }
  // Host data (a plan's vectors) copied to device scratch.
  template <class T>
  const T* upload(const std::vector<T>& v) {
    if (v.empty()) return nullptr;
    T* d = temp<T>(v.size());
    cuda_check(cudaMemcpyAsync(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream_), "upload");
    return d;
  }
  cudaStream_t stream() const { return stream_; }
  void finish();

 private:
  struct Staged {  // a host range and its device copy
    void* host;
    void* device;
    size_t bytes;
    bool copied_in, copy_out;
  };
  void* stage(void* p, size_t bytes, bool copy_in, bool copy_out);
  void* scratch(size_t bytes);
  void release_scratch() noexcept;

  cudaStream_t stream_;
  std::vector<void*> scratch_;
  std::vector<Staged> staged_;
  bool finished_ = false;
  // Profiling (MOE_CUDA_PROFILE): the op's name, its events and its start on the host clock.
  const char* op_ = nullptr;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  int64_t wall_from_ns_ = 0;
};

// The MOE_CUDA_PROFILE table so far: one line per op name, by wall time: calls, device ms, wall ms, share.
std::string op_profile_table();

}  // namespace moe::cuda
