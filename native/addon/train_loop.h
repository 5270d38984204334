// The addon's side of the engine's training loop (moe_engine_train): turns each event into a message for
// JS, packed on the training thread. The loop itself, pause, stop and checkpoints are the engine's.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "moe_engine.h"

namespace moe_addon {

// What the loop reports, in order: steps and checkpoints, then exactly one Done.
struct TrainMessage {
  enum class Kind { Step, Checkpoint, NonFinite, Done };
  Kind kind = Kind::Done;
  std::vector<uint8_t> record;  // Step: packed as in step_record_pack.h
  int64_t step = 0;             // Checkpoint, NonFinite
  std::string text;             // Checkpoint: its directory; NonFinite: what and what now; Done: "finished", "stopped" or "failed"
  std::string error;            // Done when failed: the engine's message
};

// Returns false once nobody listens any more (the JS side is being torn down).
using PostMessage = std::function<bool(TrainMessage&&)>;

// Runs moe_engine_train on the calling thread, posting every event; last_step follows the engine's step.
void train(moe_engine* engine, int64_t total_steps, std::atomic<int64_t>& last_step, const PostMessage& post);

}  // namespace moe_addon
