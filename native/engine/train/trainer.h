// The training loop of one run: data, micro-batches with gradient accumulation, clipping, AdamW,
// the lr schedule, checkpoints and one StepRecord per step. Single-threaded caller; the ops inside
// run on the backend's workers.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/model.h"
#include "offload/expert_offload.h"
#include "optim/optimizer.h"
#include "telemetry/step_record.h"
#include "train/checkpoint.h"
#include "train/token_data.h"

namespace moe {

class Trainer {
 public:
  // draw false: the weights are zeros until the first init_from or resume_from, which draws from the seed only
  // the tensors its folder lacks (a model whose weights a load overwrites is never drawn whole first); for an
  // engine opened with the folder to load, which loads it before anything else runs.
  Trainer(const EngineConfig& cfg, Backend& be, bool draw = true);

  const EngineConfig& config() const { return cfg_; }
  Model& model() { return model_; }
  AdamWOptimizer& optimizer() { return opt_; }
  const ExpertOffload* offload() const { return offload_.get(); }
  const TrainerState& state() const { return state_; }
  bool finished() const { return state_.step >= cfg_.train.steps; }

  // Memory-maps a token shard and checks every token against the vocabulary.
  void set_data(const std::string& path);
  // The held-out data train.eval_every evaluates on (same checks as set_data).
  void set_eval_data(const std::string& path);
  // Queues one micro-batch ([B, T] inputs and targets, -1 = masked) to be used before the shard.
  void feed_batch(const int32_t* inputs, const int32_t* targets, int B, int T);

  // Starts from a checkpoint's weights (ours or Hugging Face; names and shapes must match this model);
  // optimizer and step start fresh, so training knobs (aux loss, capacity, ...) may differ. A PEFT adapter
  // directory (adapter_config.json) loads only the adapters and the modules it saved, over the weights already
  // there: init from the base, then from the adapter.
  void init_from(const std::string& dir);
  // Continues a checkpoint of this run (same model config): weights, AdamW moments, step and data cursor.
  void resume_from(const std::string& dir);
  void save_checkpoint(const std::string& dir);
  // Fails before a run starts when the disk of run_dir cannot hold `count` checkpoints of it at once (every run
  // saves at least its last) beside what the SSD tier's file may still take there; the message gives the sizes.
  void check_checkpoint_space(const std::string& run_dir, int64_t count) const;

  // Waits for offloaded experts' updates still running after step(): on the host tier the model and
  // optimizer arenas are then current.
  void settle();
  // settle(), and with the experts' home apart from the arenas (the SSD tier; the host tier beside a device) also
  // copies every expert's state (weights_only: its weights) into the arenas, for a caller that compares the arenas
  // whole (tests; everything else reads through expert_home()); the next step works from the home again.
  void experts_to_arenas(bool weights_only = false);
  // The routed experts' home when it lives apart from the arenas (the SSD tier; the host tier beside a device): read
  // and written one expert's part at a time, after settle(); null where the arenas hold every expert.
  ExpertStateHome* expert_home() { return home_.get(); }
  // Zeroes every gradient, wherever it lives (a gradient pass outside training).
  void zero_grads();

  // One optimizer step over grad_accum micro-batches.
  StepRecord step();
  // Where a non-finite step came from, "" when nothing is found: the first weight holding a NaN or an infinity
  // (a corrupt start), else the first gradient that does in backward order (where the backward first broke).
  // Offloaded experts' state lives in its tier and is not looked at.
  std::string locate_nonfinite();

 private:
  struct Batch {
    std::vector<int32_t> inputs, targets;
    int B = 0, T = 0;
  };
  Batch next_batch();
  void draw_weights();  // the seed's weights (the offload draws its experts itself)
  void check_model_matches(const std::string& dir);

  bool undrawn_ = false;  // constructed with draw false, and no load has run yet
  EngineConfig cfg_;
  Backend& be_;
  Model model_;
  AdamWOptimizer opt_;
  std::unique_ptr<ExpertOffload> offload_;  // null: every expert resident
  std::unique_ptr<ExpertStateHome> home_;    // the offload's home when apart
  std::unique_ptr<TokenData> data_, eval_data_;
  std::deque<Batch> fed_;
  TrainerState state_;
};

}  // namespace moe
