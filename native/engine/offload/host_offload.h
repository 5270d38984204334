// Host-tier expert offload (ES-MoE §4.1/§4.3, MoESys §III-B). Every routed expert's master state (fp32 weights,
// gradient, AdamW moments) lives in the host tier: the expert ranges of the model's and optimizer's arenas. The
// device tier holds the non-expert state and `slots` expert slots (weights + gradient buffer each). An expert
// computes only while it occupies a slot:
//   * plan() starts uploading the first experts of the pass (up to `lookahead` ahead of the one computing) on
//     the copy worker; weights() waits for its upload (stall time); done_forward() frees its slot.
//   * backward also uploads the gradient accumulated by earlier micro-batches (or zeroes the slot), and
//     done_backward() queues the gradient's download and frees the slot (the copy worker is FIFO, so the next
//     upload into it runs after the download).
//   * pinned experts keep their slot for the whole step: uploaded once, gradient accumulated in the slot over
//     all micro-batches and downloaded once.
//   * expert-wise optimizer: each expert's AdamW runs on a host worker pool, separate from the compute pool.
//     Without clipping an expert's update starts as soon as its last gradient is down (overlapping the rest of
//     backward); with clipping all expert updates start once the global norm is known (overlapping the dense
//     update). The updates run on into the next step: an expert's next upload waits for its own update only, so
//     no step ever sees stale weights. settle() waits for all of them.
// The copies and kernels are the ones resident training runs on the same values in the same order, so losses
// and weights are bit-identical to resident training.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/threadpool.h"
#include "model/config.h"
#include "model/model.h"
#include "offload/expert_access.h"
#include "offload/memory_tier.h"
#include "offload/pin_selector.h"
#include "offload/serial_worker.h"
#include "optim/optimizer.h"

namespace moe {

// What one step of offload did, all measured.
struct OffloadStepStats {
  double upload_ms = 0;         // copy-worker time spent uploading
  double upload_hidden_ms = 0;  // the part of it compute did not wait for
  double stall_ms = 0;          // compute waiting for uploads
  int64_t bytes_h2d = 0, bytes_d2h = 0;
  int64_t peak_device_bytes = 0, peak_host_bytes = 0;
  int slots = 0, pin_slots = 0;
  std::vector<std::vector<uint8_t>> pinned;   // [MoE layer][expert]
  std::vector<std::vector<int32_t>> uploads;  // [MoE layer][expert]: weight uploads this step
};

class HostOffload final : public ExpertAccess {
 public:
  HostOffload(Model& model, AdamWOptimizer& optimizer, const OffloadConfig& cfg, int host_threads);
  ~HostOffload() override;

  int slots() const { return static_cast<int>(slots_.size()); }
  int pin_slots() const { return pin_slots_; }
  size_t expert_bytes() const { return expert_floats_ * sizeof(float); }
  const MemoryTier& device_tier() const { return device_; }
  const MemoryTier& host_tier() const { return host_; }

  // The step protocol the trainer follows.
  void begin_step(int t, double lr, const TrainConfig& hp);
  void begin_micro(int micro, int count);
  void start_expert_updates(double clip_scale);  // after every gradient is down and the norm is known
  void finish_gradients();                        // waits for every gradient download
  // Returns with the expert updates still running; the next use of an expert waits for its own.
  OffloadStepStats end_step(const std::vector<std::vector<int32_t>>& step_tokens);
  // Waits for every copy and update: the host arenas are current (before checkpoints, loads and reads).
  void settle();

  void plan(int layer, ExpertPass pass, const std::vector<int>& experts) override;
  FfnParams weights(int layer, int e) override;
  FfnParams grads(int layer, int e) override;
  void done_forward(int layer, int e) override;
  void done_backward(int layer, int e) override;

 private:
  struct Slot {
    TierBlock w, g;
    uint64_t ticket = 0;  // the upload that filled it
  };
  struct Expert {
    int moe_layer = 0, e = 0;
    size_t begin = 0;                                   // float offset of its range in the arenas
    std::vector<const ParamTensor*> tensors;  // its tensors, for the optimizer
    int slot = -1;                            // occupied slot, -1 when only on the host
    int pin_slot = -1;                        // its reserved slot this step, -1 when not pinned
    bool grad_down = false;     // the host gradient holds this step's earlier micro-batches
    bool grad_in_slot = false;  // a pinned expert's slot holds gradient not yet downloaded
    bool updated = false;       // its optimizer update for this step was submitted
  };

  int id(int layer, int e) const { return layer_base_[layer] + e; }
  void enter_idle();
  void issue_ahead();
  void issue(int id);
  void release(int id);
  void download_grad(int id, bool then_update);
  void submit_update(int id);
  FfnParams rebase(const FfnParams& f, const float* arena, const Expert& x, float* slot) const;
  void add_upload_time(double ms);

  Model& model_;
  AdamWOptimizer& optimizer_;
  float *params_, *grads_;  // the host masters (the model's and optimizer's arenas)
  MemoryTier device_, host_;
  size_t expert_floats_ = 0;
  std::vector<int> layer_base_;  // model layer -> first expert id (-1: dense layer)
  std::vector<Expert> experts_;
  std::vector<Slot> slots_;
  std::vector<int> free_;  // streaming slots, FIFO
  int pin_slots_ = 0, lookahead_ = 1;
  PinSelector pins_;
  std::vector<std::vector<uint8_t>> pinned_;

  // Current pass.
  int layer_ = -1;
  ExpertPass pass_ = ExpertPass::Forward;
  std::vector<int> order_;
  size_t cursor_ = 0, next_issue_ = 0;
  bool last_micro_ = true;

  // Current step (in_step_ false: a pass outside training, which never updates experts).
  bool in_step_ = false;
  int t_ = 0;
  double lr_ = 0;
  double clip_scale_ = 1;  // set before any clipped update is submitted
  TrainConfig hp_;
  OffloadStepStats stats_;
  std::atomic<int64_t> upload_ns_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> update_ticket_;  // per expert: its latest update on optimizer_worker_
  uint64_t previous_step_updates_ = 0;                       // the last update ticket of the previous step

  ThreadPool host_pool_;
  SerialWorker copy_worker_, optimizer_worker_;
};

}  // namespace moe
