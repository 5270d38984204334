// The virtual devices' own resources (JSON: placement.device_budget_bytes, placement.threads_per_device).
#pragma once
#include <cstdint>

namespace moe {

struct DeviceGroupConfig {
  int64_t budget_bytes = 0;  // each device's buffer budget; 0: unlimited (JSON null)
  int threads = 0;           // compute threads of each device's backend; 0: the run's threads split across the
                             // devices, at least 1 (JSON null)
};

}  // namespace moe
