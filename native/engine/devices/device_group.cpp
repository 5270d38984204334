#include "devices/device_group.h"

namespace moe {
namespace {

// Recent passes weigh most, so the measures follow a machine whose load changes.
void blend(double& mean, double sample) {
  if (!(sample > 0)) return;
  mean = mean > 0 ? 0.8 * mean + 0.2 * sample : sample;
}

}  // namespace

void MeasuredSpeeds::add_compute(double flop, double ms) {
  if (ms > 0) blend(flop_per_ms, flop / ms);
}
void MeasuredSpeeds::add_comm(double bytes, double ms) {
  if (ms > 0) blend(comm_bytes_per_ms, bytes / ms);
}
void MeasuredSpeeds::add_mem(double bytes, double ms) {
  if (ms > 0) blend(mem_bytes_per_ms, bytes / ms);
}

StreamSpeeds MeasuredSpeeds::stream_speeds() const {
  StreamSpeeds s;
  s.w_comp = flop_per_ms * 1e3;
  s.w_comm = comm_bytes_per_ms * 1e3;
  // Until an offload has run, host copies are taken to move as fast as device copies: both are memcpy here.
  s.w_mem = (mem_bytes_per_ms > 0 ? mem_bytes_per_ms : comm_bytes_per_ms) * 1e3;
  return s;
}

DeviceGroup::DeviceGroup(const PlacementConfig& placement, const PipelineConfig& pipeline,
                         const DeviceGroupConfig& devices)
    : placement_(placement), pipeline_(pipeline), threads_(devices.threads), scratch_(placement.devices) {
  for (int d = 0; d < placement.devices; ++d) devices_.push_back(std::make_unique<VirtualDevice>(d, devices));
}

std::vector<int64_t> DeviceGroup::peak_bytes() const {
  std::vector<int64_t> out;
  for (const auto& d : devices_) out.push_back(d->peak_bytes());
  return out;
}

}  // namespace moe
