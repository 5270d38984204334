// The training loop the addon runs on its own thread: steps the engine, saves checkpoints, and hands
// every step, checkpoint and the final outcome to a post function. Knows nothing of Node-API.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "moe_engine.h"

namespace moe_addon {

struct TrainOptions {
  std::string run_dir;
  int64_t checkpoint_every = 0;  // 0: only the final checkpoint
  int64_t total_steps = 0;       // stop after this step; 0: the config's train.steps
};

// What the loop reports, in order: steps and checkpoints, then exactly one Done.
struct TrainMessage {
  enum class Kind { Step, Checkpoint, Done };
  Kind kind = Kind::Done;
  std::vector<uint8_t> record;  // Step: packed as in step_record_pack.h
  int64_t step = 0;             // Checkpoint
  std::string text;             // Checkpoint: its directory; Done: "finished", "stopped" or "failed"
  std::string error;            // Done when failed: the engine's message
};

// Returns false once nobody listens any more (the JS side is being torn down).
using PostMessage = std::function<bool(TrainMessage&&)>;

// Flags set from the JS thread and read by the loop at step boundaries.
class TrainControl {
 public:
  explicit TrainControl(moe_engine* engine) : engine_(engine) {}

  void pause();
  void resume();
  void stop();
  void request_checkpoint();
  // Blocks while paused (and no stop or checkpoint is pending); true when a checkpoint was requested,
  // which clears the request.
  bool wait_at_step_boundary();

  std::atomic<int64_t> last_step{0};  // readable from JS while training

 private:
  moe_engine* engine_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool paused_ = false, stop_ = false, checkpoint_ = false;
};

class TrainLoop {
 public:
  TrainLoop(moe_engine* engine, TrainOptions options, TrainControl& control, PostMessage post)
      : engine_(engine), options_(std::move(options)), control_(control), post_(std::move(post)) {}
  void run();

 private:
  bool save_checkpoint();  // false when the save failed (done_ then holds the error)
  bool send(TrainMessage&& message);
  void fail_with_engine_error();
  std::string checkpoint_dir() const;

  moe_engine* engine_;
  TrainOptions options_;
  TrainControl& control_;
  PostMessage post_;
  int64_t step_ = 0, saved_step_ = -1;
  bool listener_gone_ = false;
  TrainMessage done_;
};

}  // namespace moe_addon
