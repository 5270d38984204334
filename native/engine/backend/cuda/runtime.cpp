#include "backend/cuda/runtime.h"

#include <string>

#include "core/error.h"

namespace moe::cuda {

void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  fail(std::string("cuda: ") + what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

namespace {

std::string dotted(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

std::string driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? dotted(v) : "none";
}

std::string runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? dotted(v) : "unknown";
}

void* device_view(const void* p) {
  cudaPointerAttributes a{};
  const cudaError_t err = cudaPointerGetAttributes(&a, p);
  if (err == cudaErrorInvalidValue || err == cudaErrorInvalidDevice) {
    cudaGetLastError();  // clear the error a pointer the runtime does not know leaves
    return nullptr;
  }
  // Any other failure is an earlier error still pending (a kernel fault): report it, not a staging failure later.
  cuda_check(err, "querying a pointer's memory type");
  switch (a.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
      return const_cast<void*>(p);
    case cudaMemoryTypeHost:
      return a.devicePointer;
    default:
      return nullptr;
  }
}

void* Stage::stage(void* p, size_t bytes, bool copy_in, bool copy_out) {
  if (p == nullptr || bytes == 0) return p;
  if (void* view = device_view(p)) return view;
  Staged* st = nullptr;
  for (Staged& s : staged_)
    if (s.host == p && s.bytes == bytes) st = &s;
  if (!st) {
    staged_.push_back({p, scratch(bytes), bytes, false, false});
    st = &staged_.back();
  }
  // Copies queue before any kernel of the op, so an input staged after its output still arrives first.
  if (copy_in && !st->copied_in) {
    cuda_check(cudaMemcpyAsync(st->device, p, bytes, cudaMemcpyHostToDevice, stream_), "staging an input");
    st->copied_in = true;
  }
  st->copy_out |= copy_out;
  return st->device;
}

void* Stage::scratch(size_t bytes) {
  void* d = nullptr;
  cuda_check(cudaMallocAsync(&d, bytes ? bytes : 1, stream_), "scratch allocation");
  scratch_.push_back(d);
  return d;
}

void Stage::finish() {
  cuda_check(cudaGetLastError(), "kernel launch");
  for (const Staged& s : staged_)
    if (s.copy_out)
      cuda_check(cudaMemcpyAsync(s.host, s.device, s.bytes, cudaMemcpyDeviceToHost, stream_), "staging an output back");
  release_scratch();
  finished_ = true;
  cuda_check(cudaStreamSynchronize(stream_), "kernel execution");
}

void Stage::release_scratch() noexcept {
  for (void* d : scratch_) cudaFreeAsync(d, stream_);
  scratch_.clear();
}

Stage::~Stage() {
  if (finished_) return;
  // An op failed before finish(): let queued work drain so no kernel outlives the scratch it uses.
  cudaStreamSynchronize(stream_);
  release_scratch();
  cudaStreamSynchronize(stream_);
}

}  // namespace moe::cuda
