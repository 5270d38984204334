// The engine's one training loop (moe_engine_train): steps until train.steps, a total_steps limit, a stop
// or an error; saves run_dir/checkpoint-<step> every train.checkpoint_every steps, on request (also while
// paused) and once at the end; and reports each step, each checkpoint and exactly one outcome to a callback.
// RunControl is the one pause/stop/checkpoint-request state, set from any thread.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "include/moe_engine.h"
#include "model/config.h"

namespace moe {

class RunControl {
 public:
  enum class Boundary { Step, Checkpoint, Stop };

  void set_paused(bool paused);
  void stop();
  void request_checkpoint();
  bool stop_requested();

  // The loop's wait at a step boundary: blocks while paused with nothing pending. Returns Checkpoint once per
  // request (clearing it), else Stop or Step; Step also lets the next wait_to_step() pass at once, so a
  // pause that arrives in between is seen at the following boundary, where a checkpoint can still be taken.
  Boundary wait_at_boundary();
  // moe_engine_step's wait: blocks while paused (unless the loop has just let this step through); false on stop.
  bool wait_to_step();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool paused_ = false, stop_ = false, checkpoint_ = false, step_granted_ = false;
};

// What the loop drives: the C API's own calls on one engine, so a step here is exactly moe_engine_step.
struct RunEngine {
  std::function<int(moe_step_record*)> step;               // moe_engine_step
  std::function<int(const std::string& dir)> save;         // moe_engine_save_checkpoint
  std::function<std::string()> last_error;                 // moe_engine_last_error
  // Which weight or gradient first holds a NaN or an infinity ("" when none): which layer or expert blew up.
  std::function<std::string()> locate_nonfinite;
};

struct RunPlan {
  std::string run_dir;
  int64_t first_step = 0;        // the engine's step when the loop starts (after a resume: the checkpoint's)
  int64_t last_step = 0;         // train.steps, or the caller's smaller total_steps
  int64_t checkpoint_every = 0;  // train.checkpoint_every; 0: only the final checkpoint
  int64_t keep_checkpoints = 0;  // train.keep_checkpoints; 0: every checkpoint stays
  NonFinitePolicy on_nonfinite = NonFinitePolicy::Pause;  // train.on_nonfinite
};

std::string checkpoint_dir(const std::string& run_dir, int64_t step);

// The checkpoints of this plan a disk must hold at once for its saves to be sure to succeed: with keep_checkpoints
// K, K + 1 (a save writes the next before the oldest goes) or the plan's saves (cadence and last step) if fewer;
// without retention 1, the next save (they pile up, but a run is often stopped long before its train.steps).
int64_t checkpoints_at_once(const RunPlan& plan);

// train.keep_checkpoints: removes run_dir's checkpoints beyond the keep newest by step, the one at saved_step
// always kept (also where an older branch of the run left higher steps); only checkpoint-<step> directories of
// ours are considered. Returns the directories removed; keep 0 removes none.
std::vector<std::string> remove_old_checkpoints(const std::string& run_dir, int64_t keep, int64_t saved_step);

// Returns the outcome it reported: MOE_FINISHED, MOE_STOPPED or MOE_ERROR; MOE_OK when the callback asked
// to end early (no further events, no final checkpoint).
int run_training(const RunPlan& plan, RunControl& control, const RunEngine& engine, moe_train_callback callback,
                 void* user);

}  // namespace moe
