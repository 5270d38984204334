// The D devices of a run and what their MoE layers share: the placement and pipeline settings, each device's
// scratch (partition slots, backward buffers), and the speeds measured on them (compute, comm and mem
// streams), which feed the greedy cost model and equation 10.
#pragma once
#include <memory>
#include <vector>

#include "devices/virtual_device.h"
#include "pipeline/memory_reuse.h"
#include "pipeline/pipeline_config.h"
#include "placement/placement.h"

namespace moe {

// Per-device buffers reused by every MoE layer: the forward slots under memory reuse and the backward slots.
struct DeviceScratch {
  DeviceBuffer x, h, act, y;  // forward partition slots (memory reuse) and restored activations (backward)
  DeviceBuffer dy, dx;        // backward partition slots
  DeviceBuffer dh, dact;      // ffn_backward's scratch, one chunk at a time
};

// Running measures of the streams (exponential means over passes), from the jobs' times.
struct MeasuredSpeeds {
  double flop_per_ms = 0;   // compute stream, expert GEMMs
  double comm_bytes_per_ms = 0;
  double mem_bytes_per_ms = 0;
  void add_compute(double flop, double ms);
  void add_comm(double bytes, double ms);
  void add_mem(double bytes, double ms);
  bool known() const { return flop_per_ms > 0 && comm_bytes_per_ms > 0; }
  StreamSpeeds stream_speeds() const;  // per second, as equation 10 takes them; mem falls back to comm
};

class DeviceGroup {
 public:
  DeviceGroup(const PlacementConfig& placement, const PipelineConfig& pipeline, const DeviceGroupConfig& devices);

  int size() const { return int(devices_.size()); }
  VirtualDevice& device(int d) { return *devices_[d]; }
  DeviceScratch& scratch(int d) { return scratch_[d]; }
  const PlacementConfig& placement() const { return placement_; }
  const PipelineConfig& pipeline() const { return pipeline_; }
  bool thread_time() const { return threads_ <= 1; }
  MeasuredSpeeds& speeds() { return speeds_; }
  std::vector<int64_t> peak_bytes() const;

 private:
  PlacementConfig placement_;
  PipelineConfig pipeline_;
  int threads_;
  std::vector<std::unique_ptr<VirtualDevice>> devices_;
  std::vector<DeviceScratch> scratch_;
  MeasuredSpeeds speeds_;
};

}  // namespace moe
