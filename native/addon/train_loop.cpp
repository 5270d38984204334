#include "train_loop.h"

#include "step_record_pack.h"

namespace moe_addon {

void TrainControl::pause() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = true;
  moe_engine_set_paused(engine_, 1);
}

void TrainControl::resume() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = false;
  moe_engine_set_paused(engine_, 0);
  changed_.notify_all();
}

void TrainControl::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = true;
  moe_engine_request_stop(engine_);
  changed_.notify_all();
}

void TrainControl::request_checkpoint() {
  std::lock_guard<std::mutex> lock(mutex_);
  checkpoint_ = true;
  changed_.notify_all();
}

bool TrainControl::wait_at_step_boundary() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Waiting here rather than inside moe_engine_step lets a checkpoint be saved while paused.
  changed_.wait(lock, [&] { return !paused_ || stop_ || checkpoint_; });
  const bool requested = checkpoint_;
  checkpoint_ = false;
  return requested;
}

void TrainLoop::run() {
  step_ = moe_engine_step_count(engine_);
  control_.last_step = step_;
  const int64_t first_step = step_;
  done_.kind = TrainMessage::Kind::Done;
  done_.text = "finished";
  bool ok = true;
  while (ok && !listener_gone_) {
    if (control_.wait_at_step_boundary()) {
      ok = save_checkpoint();
      continue;
    }
    if (options_.total_steps > 0 && step_ >= options_.total_steps) break;
    moe_step_record record{};
    const int rc = moe_engine_step(engine_, &record);
    if (rc == MOE_FINISHED) break;
    if (rc == MOE_STOPPED) {
      done_.text = "stopped";
      break;
    }
    if (rc != MOE_OK) {
      fail_with_engine_error();
      ok = false;
      break;
    }
    step_ = record.step;
    control_.last_step = step_;
    TrainMessage message;
    message.kind = TrainMessage::Kind::Step;
    message.record = pack_step_record(record);
    if (!send(std::move(message))) break;
    if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) ok = save_checkpoint();
  }
  if (listener_gone_) return;
  if (ok && step_ > first_step) save_checkpoint();
  send(std::move(done_));
}

bool TrainLoop::save_checkpoint() {
  if (step_ == saved_step_) return true;
  const std::string dir = checkpoint_dir();
  if (moe_engine_save_checkpoint(engine_, dir.c_str()) != MOE_OK) {
    fail_with_engine_error();
    return false;
  }
  saved_step_ = step_;
  TrainMessage message;
  message.kind = TrainMessage::Kind::Checkpoint;
  message.step = step_;
  message.text = dir;
  send(std::move(message));
  return true;
}

bool TrainLoop::send(TrainMessage&& message) {
  if (listener_gone_) return false;
  listener_gone_ = !post_(std::move(message));
  return !listener_gone_;
}

void TrainLoop::fail_with_engine_error() {
  done_.text = "failed";
  done_.error = moe_engine_last_error(engine_);
}

std::string TrainLoop::checkpoint_dir() const {
  std::string dir = options_.run_dir;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + "checkpoint-" + std::to_string(step_);
}

}  // namespace moe_addon
