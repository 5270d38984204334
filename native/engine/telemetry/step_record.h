// One record per training step: what the C API hands out and what the workbench stores.
// Observers receive records through a TelemetrySink; nothing is kept in globals.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

// One MoE layer's placement decision for the step's tokens (issue: load balance), from the placement policy.
struct LayerPlacement {
  std::vector<int64_t> load_before, load_after;  // [D] tokens per device: static homes vs the placement
  double imbalance_before = 1, imbalance_after = 1;  // max/mean of those
  int64_t spilled_tokens = 0;                    // tokens computed away from their expert's home device
  int moved_experts = 0;                         // weight copies the placement needs
  std::vector<int32_t> expert_device;            // [E] device of the expert's first rows (-1: no rows)

  // How the layer ran on the devices (measured, forward + backward; devices/device_experts.h).
  std::vector<double> device_busy_ms;  // [D] each device's time on its streams (compute, copies), CPU time
  double critical_ms = 0;    // the slowest device's pipelined time: what the layer's expert phase takes on D devices
  double wall_ms = 0;        // wall time of the expert phase in this process (devices share its cores)
  double predicted_ms = 0;   // equation 10's forward + backward time for the chosen reuse strategy (0: none)
  int64_t token_bytes = 0;   // token rows sent between devices: dispatch, return, re-sends
  int64_t weight_bytes = 0;  // weights sent to experts' guest devices and gradients sent home
  int64_t offload_bytes = 0;  // activations offloaded to the host and restored by the reuse strategy
  int partitions = 1;        // pipeline n
  int reuse_strategy = 0;    // 0 none, 1..4 S1..S4
};

struct StepRecord {
  int64_t step = 0;  // 1-based optimizer step
  double loss = 0, aux_loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;  // tokens processed this step (all micro-batches)
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  std::vector<std::vector<int32_t>> expert_tokens;  // [MoE layer][expert] tokens computed this step

  // Expert offload (docs/offload.md), measured; all zero / empty when `offloaded` is false (resident run).
  bool offloaded = false;
  double upload_ms = 0, upload_hidden_ms = 0, stall_ms = 0;  // copy time, the part hidden behind compute, waits
  int64_t bytes_h2d = 0, bytes_d2h = 0;
  // Tier bookings: device (non-expert state, activations, slots), host (expert masters or the SSD cache), SSD.
  int64_t peak_device_bytes = 0, peak_host_bytes = 0, peak_ssd_bytes = 0;
  // SSD tier (zero on the host tier): file I/O time and bytes, host cache hits and misses, and the mean time a
  // prefetched expert waited in the cache before its first use.
  double ssd_ms = 0, ssd_read_ms = 0, prefetch_lead_ms = 0;
  int64_t bytes_ssd_read = 0, bytes_ssd_write = 0, cache_hits = 0, cache_misses = 0;
  std::vector<std::vector<uint8_t>> expert_tiers;    // [MoE layer][expert] home tier: 0 device, 1 host, 2 SSD
  std::vector<std::vector<uint8_t>> expert_pinned;   // [MoE layer][expert] 1 when pinned this step
  std::vector<std::vector<int32_t>> expert_uploads;  // [MoE layer][expert] weight uploads this step

  // Placement across devices (empty with one device): per MoE layer.
  std::vector<LayerPlacement> placements;
  std::vector<int64_t> device_peak_bytes;  // [D] the largest each device's buffers grew to (empty: one device)
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void on_step(const StepRecord& record) = 0;
};

}  // namespace moe
