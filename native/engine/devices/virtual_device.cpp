#include "devices/virtual_device.h"

#include <algorithm>
#include <string>

#include "backend/registry.h"
#include "core/error.h"

namespace moe {
namespace {

std::string mib(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

VirtualDevice::VirtualDevice(int index, const DeviceGroupConfig& cfg)
    : index_(index), budget_bytes_(cfg.budget_bytes), backend_(make_backend("cpu", {std::max(1, cfg.threads)})) {}

float* VirtualDevice::reserve(DeviceBuffer& b, size_t n) {
  const int64_t want = int64_t(n * sizeof(float));
  if (want <= int64_t(b.bytes())) return b.f();
  const int64_t grown = live_bytes_ - int64_t(b.bytes()) + want;
  if (budget_bytes_ > 0 && grown > budget_bytes_)
    fail("placement.device_budget_bytes: device " + std::to_string(index_) + " needs " + mib(grown) +
         " for its experts' rows and buffers this step, over its budget of " + mib(budget_bytes_) +
         "; raise the budget, spread the load (policy \"least-loaded\" or \"greedy\") or turn on "
         "pipeline.memory_reuse");
  b.reserve(*backend_, size_t(want));
  live_bytes_ = grown;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return b.f();
}

float* VirtualDevice::reserve_host(DeviceBuffer& b, size_t n) {
  b.reserve(*backend_, n * sizeof(float), MemKind::PinnedHost);
  return b.f();
}

}  // namespace moe
