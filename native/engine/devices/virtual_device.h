// One of the D devices a run's experts compute on. On the CPU backend a device is
// virtual: a backend of its own (threads_per_device threads), one worker per stream (compute, comm, mem) and a
// buffer budget. Every buffer the device holds is reserved through it, so its bytes are booked, the peak is
// known, and going past the budget is an error that says which device, how much and what to change.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "devices/device_group_config.h"
#include "devices/job_graph.h"
#include "model/buffer.h"

namespace moe {

class VirtualDevice {
 public:
  VirtualDevice(int index, const DeviceGroupConfig& cfg);
  VirtualDevice(const VirtualDevice&) = delete;
  VirtualDevice& operator=(const VirtualDevice&) = delete;

  int index() const { return index_; }
  Backend& backend() { return *backend_; }
  StreamWorkers workers() { return {&compute_, &comm_, &mem_}; }

  // Grows b to hold n floats on this device (zero-filled when it grows), booking the bytes.
  float* reserve(DeviceBuffer& b, size_t n);
  // Host memory beside this device for offloaded activations (not booked on the device).
  float* reserve_host(DeviceBuffer& b, size_t n);

  int64_t live_bytes() const { return live_bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }

 private:
  int index_;
  int64_t budget_bytes_;
  std::unique_ptr<Backend> backend_;
  SerialWorker compute_, comm_, mem_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace moe
