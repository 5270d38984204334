// One record per training step: what the C API hands out and what the workbench stores.
// Observers receive records through a TelemetrySink; nothing is kept in globals.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

struct StepRecord {
  int64_t step = 0;  // 1-based optimizer step
  double loss = 0, aux_loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;  // tokens processed this step (all micro-batches)
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  std::vector<std::vector<int32_t>> expert_tokens;  // [MoE layer][expert] tokens computed this step
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void on_step(const StepRecord& record) = 0;
};

}  // namespace moe
