#include "backend/cuda/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

namespace {

constexpr size_t kStageAlign = 256;  // what the stream-ordered pool aligns its allocations to

struct OpTotals {
  int64_t calls = 0;
  double device_ms = 0, wall_ms = 0;
};

struct OpProfile {
  std::mutex mutex;
  std::map<std::string, OpTotals> ops;
  OpProfile() {
    std::atexit([] { std::fputs(op_profile_table().c_str(), stderr); });
  }
};

// Null unless MOE_CUDA_PROFILE is set (read once).
OpProfile* op_profile() {
  static OpProfile* profile = [] {
    const char* env = std::getenv("MOE_CUDA_PROFILE");
    return env && *env ? new OpProfile() : nullptr;  // lives to the exit handler
  }();
  return profile;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string op_profile_table() {
  OpProfile* p = op_profile();
  if (!p) return "";
  std::lock_guard<std::mutex> lock(p->mutex);
  std::vector<std::pair<std::string, OpTotals>> rows(p->ops.begin(), p->ops.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.wall_ms > b.second.wall_ms; });
  double wall = 0;
  for (const auto& r : rows) wall += r.second.wall_ms;
  std::string out = "cuda op profile (MOE_CUDA_PROFILE): op, calls, device ms, wall ms, share of wall\n";
  char line[160];
  for (const auto& [name, t] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %8lld %10.1f %10.1f %5.1f%%\n", name.c_str(), (long long)t.calls,
                  t.device_ms, t.wall_ms, wall > 0 ? 100.0 * t.wall_ms / wall : 0.0);
    out += line;
  }
  return out;
}

Stage::Stage(cudaStream_t stream, const char* op) : stream_(stream) {
  if (!op || !op_profile()) return;
  op_ = op;
  wall_from_ns_ = now_ns();
  cuda_check(cudaEventCreate(&begin_), "profiling event");
  cuda_check(cudaEventCreate(&end_), "profiling event");
  cuda_check(cudaEventRecord(begin_, stream_), "profiling event");
}

void* Stage::stage(void* p, size_t bytes, bool copy_in, bool copy_out) {
  if (p == nullptr || bytes == 0) return p;
  if (void* view = device_view(p)) return view;
  Staged* st = nullptr;
  for (Staged& s : staged_)
    if (s.host == p && s.bytes == bytes) st = &s;
  if (!st) {
    // The copy keeps p's offset within 256 bytes (scratch is 256-aligned): a range staged alone and the same range
    // inside a larger staged one (a group's rows of a grouped op's activations) then have the same alignment, so a
    // library that picks its kernel by alignment (cuBLAS) picks the same one for both.
    const size_t offset = reinterpret_cast<uintptr_t>(p) % kStageAlign;
    staged_.push_back({p, static_cast<char*>(scratch(bytes + offset)) + offset, bytes, false, false});
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
  if (op_) cuda_check(cudaEventRecord(end_, stream_), "profiling event");
  cuda_check(cudaStreamSynchronize(stream_), "kernel execution");
  if (!op_) return;
  float device_ms = 0;
  cuda_check(cudaEventElapsedTime(&device_ms, begin_, end_), "profiling event");
  OpProfile* p = op_profile();
  std::lock_guard<std::mutex> lock(p->mutex);
  OpTotals& t = p->ops[op_];
  ++t.calls;
  t.device_ms += device_ms;
  t.wall_ms += (now_ns() - wall_from_ns_) / 1e6;
}

void Stage::release_scratch() noexcept {
  for (void* d : scratch_) cudaFreeAsync(d, stream_);
  scratch_.clear();
}

Stage::~Stage() {
  if (begin_) cudaEventDestroy(begin_);
  if (end_) cudaEventDestroy(end_);
  if (finished_) return;
  // An op failed before finish(): let queued work drain so no kernel outlives the scratch it uses.
  cudaStreamSynchronize(stream_);
  release_scratch();
  cudaStreamSynchronize(stream_);
}

}  // namespace moe::cuda
