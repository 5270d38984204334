// The CPU backend's fp32 weights laid out for a model that only answers: each linear weight [O, I] packed once as
// the forward's x·wᵀ reads it (sgemm_pack_bt), after which the model hands its fp32 values back. The forward's
// product on w reads the layout from then on (sgemm_packed_bt: the same bits as reading w). A decode step then
// streams each weight in order, where reading it as it lies means transposing it in registers on every call.
// Anything else that would read w (another shape, the backward's products) is an error, never a product on what
// was handed back.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/host_slabs.h"
#include "core/threadpool.h"

namespace moe::cpu {

class LaidOutWeights {
 public:
  LaidOutWeights() = default;
  LaidOutWeights(const LaidOutWeights&) = delete;
  LaidOutWeights& operator=(const LaidOutWeights&) = delete;

  // The weight that belongs at w, from its values (at w, or elsewhere).
  void lay_out(ThreadPool& tp, const float* w, const float* values, int I, int O);
  // w's layout, or null where it has none (a weight laid out as another shape is an error).
  const float* get(const float* w, int I, int O) const;
  // Fails, naming op, where a layout starts inside [w, w + floats): what op would read was handed back.
  void check_unlaid(const float* w, int64_t floats, const char* op) const;
  bool empty() const { return empty_.load(std::memory_order_acquire); }
  int64_t bytes() const;

 private:
  struct Entry {
    int I = 0, O = 0;
    float* data = nullptr;
  };
  mutable std::mutex mu_;
  HostSlabs slabs_;  // on huge pages, as the bf16 layouts
  std::map<std::uintptr_t, Entry> entries_;  // by the weight's first byte
  std::string isa_;                          // the sgemm family the layouts are for (every one the same)
  std::atomic<bool> empty_{true};            // read by every product without the lock
  int64_t bytes_ = 0;
};

}  // namespace moe::cpu
