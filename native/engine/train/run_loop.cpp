#include "train/run_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>

#include "train/checkpoint.h"

namespace moe {

void RunControl::set_paused(bool paused) {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = paused;
  changed_.notify_all();
}

void RunControl::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = true;
  changed_.notify_all();
}

void RunControl::request_checkpoint() {
  std::lock_guard<std::mutex> lock(mutex_);
  checkpoint_ = true;
  changed_.notify_all();
}

bool RunControl::stop_requested() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_;
}

RunControl::Boundary RunControl::wait_at_boundary() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !paused_ || stop_ || checkpoint_; });
  if (checkpoint_) {
    checkpoint_ = false;
    return Boundary::Checkpoint;
  }
  if (stop_) return Boundary::Stop;
  step_granted_ = true;
  return Boundary::Step;
}

bool RunControl::wait_to_step() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!step_granted_) changed_.wait(lock, [&] { return !paused_ || stop_; });
  step_granted_ = false;
  return !stop_;
}

namespace {
constexpr std::string_view kCheckpointPrefix = "checkpoint-";  // run_dir/checkpoint-<step>
}  // namespace

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  std::string dir = run_dir;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + std::string(kCheckpointPrefix) + std::to_string(step);
}

int64_t checkpoints_at_once(const RunPlan& plan) {
  if (plan.last_step <= plan.first_step) return 0;
  // Without retention they pile up, but a run is often stopped long before its last step (a huge train.steps):
  // only the next save is certain to come, so only it is counted.
  if (plan.keep_checkpoints <= 0) return 1;
  const int64_t every = plan.checkpoint_every;
  const int64_t cadence = every > 0 ? plan.last_step / every - plan.first_step / every : 0;
  const int64_t saves = cadence + (every > 0 && plan.last_step % every == 0 ? 0 : 1);
  return std::min(plan.keep_checkpoints + 1, saves);
}

std::vector<std::string> remove_old_checkpoints(const std::string& run_dir, int64_t keep, int64_t saved_step) {
  namespace sfs = std::filesystem;
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  // Only what the loop writes: checkpoint-<step> directories holding a config.json that the guard of a save's
  // replacement (check_checkpoint_target) accepts as ours, so nothing else in the directory is ever touched.
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const sfs::directory_entry& e : sfs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= kCheckpointPrefix.size() || name.compare(0, kCheckpointPrefix.size(), kCheckpointPrefix) != 0)
      continue;
    const std::string digits = name.substr(kCheckpointPrefix.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const int64_t step = std::stoll(digits);
    if (step == saved_step || !e.is_directory(ec) || !sfs::exists(e.path() / "config.json", ec)) continue;
    try {
      check_checkpoint_target(e.path().string());
    } catch (const std::exception&) {
      continue;  // a Hugging Face model, or a config.json that does not parse: not known to be ours, left alone
    }
    found.emplace_back(step, e.path().string());
  }
  // The one just saved, and the newest keep - 1 others.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep - 1); i < found.size(); ++i) {
    // A directory that cannot be removed now (permissions, a file system gone read-only) stays; the next save
    // tries again, and training goes on.
    sfs::remove_all(found[i].second, ec);
    if (!ec) removed.push_back(found[i].second);
  }
  return removed;
}

namespace {

class Loop {
 public:
  Loop(const RunPlan& plan, RunControl& control, const RunEngine& engine, moe_train_callback callback, void* user)
      : plan_(plan), control_(control), engine_(engine), callback_(callback), user_(user), step_(plan.first_step) {}

  int run() {
    int outcome = MOE_FINISHED;
    while (outcome == MOE_FINISHED) {
      const RunControl::Boundary at = control_.wait_at_boundary();
      if (at == RunControl::Boundary::Checkpoint) {
        if (!save()) outcome = MOE_ERROR;
        continue;
      }
      if (at == RunControl::Boundary::Stop) {
        outcome = MOE_STOPPED;
        break;
      }
      if (step_ >= plan_.last_step) break;
      moe_step_record record{};
      record.struct_size = sizeof record;
      const int rc = engine_.step(&record);
      if (rc == MOE_FINISHED) break;
      if (rc == MOE_STOPPED) {
        outcome = MOE_STOPPED;
        break;
      }
      if (rc != MOE_OK) {
        fail();
        outcome = MOE_ERROR;
        break;
      }
      step_ = record.step;
      moe_train_event event = make(MOE_TRAIN_STEP);
      event.record = &record;
      if (!emit(event)) return MOE_OK;
      if (!std::isfinite(record.loss) || !std::isfinite(record.grad_norm)) {
        if (!diverged(record)) return MOE_OK;
        if (plan_.on_nonfinite == NonFinitePolicy::Stop) {
          outcome = MOE_STOPPED;
          break;
        }
        if (plan_.on_nonfinite == NonFinitePolicy::Pause) control_.set_paused(true);
        continue;  // no cadence checkpoint of a diverged step
      }
      last_finite_ = {step_, record.loss, record.grad_norm};
      if (plan_.checkpoint_every > 0 && step_ % plan_.checkpoint_every == 0 && !save()) outcome = MOE_ERROR;
    }
    if (gone_) return MOE_OK;
    // The final checkpoint, after a stop too: a stopped run can be resumed from where it stood.
    if (outcome != MOE_ERROR && step_ > plan_.first_step && !save()) outcome = MOE_ERROR;
    if (gone_) return MOE_OK;
    moe_train_event done = make(MOE_TRAIN_DONE);
    done.status = outcome;
    done.error = outcome == MOE_ERROR ? error_.c_str() : nullptr;
    emit(done);
    return outcome;
  }

 private:
  moe_train_event make(int32_t kind) const {
    moe_train_event e{};
    e.struct_size = sizeof(moe_train_event);
    e.kind = kind;
    e.step = step_;
    e.last_step = plan_.last_step;
    return e;
  }

  bool emit(const moe_train_event& event) {
    if (gone_) return false;
    gone_ = callback_ && callback_(&event, user_) != 0;
    return !gone_;
  }

  void fail() { error_ = engine_.last_error(); }

  // Reports a step whose loss or gradient norm is not finite: which, the last finite values, the first
  // non-finite gradient, what became of the update and what the loop does now. False when the listener is gone.
  bool diverged(const moe_step_record& r) {
    auto value = [](double v) {
      char s[32];
      std::snprintf(s, sizeof s, "%.6g", v);
      return std::string(std::isnan(v) ? "NaN" : s);
    };
    std::string what;
    if (!std::isfinite(r.loss)) what = "the loss is " + value(r.loss);
    if (!std::isfinite(r.grad_norm)) what += (what.empty() ? "the" : " and the") + std::string(" gradient norm is ") + value(r.grad_norm);
    std::string text = "step " + std::to_string(step_) + ": " + what;
    text += last_finite_.step > 0 ? " (last finite at step " + std::to_string(last_finite_.step) + ": loss " +
                                        value(last_finite_.loss) + ", gradient norm " + value(last_finite_.grad_norm) + ")"
                                  : " (no finite step before it in this session)";
    const std::string where = engine_.locate_nonfinite ? engine_.locate_nonfinite() : "";
    if (!where.empty()) text += "; first non-finite: " + where;
    // The resident optimizer leaves out a step whose gradient norm is not finite; offloaded experts update as
    // their gradients arrive, before the norm is known.
    const bool skipped = !r.offloaded && !std::isfinite(r.grad_norm);
    text += skipped ? "; the update was skipped, the weights are unchanged" : "; the update was applied";
    const NonFinitePolicy p = plan_.on_nonfinite;
    text += p == NonFinitePolicy::Pause  ? "; paused (train.on_nonfinite \"pause\"): resume, or restart from a checkpoint"
            : p == NonFinitePolicy::Stop ? "; stopping (train.on_nonfinite \"stop\")"
                                         : "; going on with the next batch (train.on_nonfinite \"skip\")";
    moe_train_event event = make(MOE_TRAIN_NONFINITE);
    event.error = text.c_str();
    return emit(event);
  }

  // Each step is saved once, whatever asked for it (cadence, request, the end).
  bool save() {
    if (step_ == saved_step_) return true;
    const std::string dir = checkpoint_dir(plan_.run_dir, step_);
    if (engine_.save(dir) != MOE_OK) {
      fail();
      return false;
    }
    saved_step_ = step_;
    remove_old_checkpoints(plan_.run_dir, plan_.keep_checkpoints, step_);
    moe_train_event event = make(MOE_TRAIN_CHECKPOINT);
    event.checkpoint_dir = dir.c_str();
    emit(event);
    return true;
  }

  const RunPlan& plan_;
  RunControl& control_;
  const RunEngine& engine_;
  moe_train_callback callback_;
  void* user_;
  int64_t step_, saved_step_ = -1;
  struct {
    int64_t step = 0;
    double loss = 0, grad_norm = 0;
  } last_finite_;
  bool gone_ = false;
  std::string error_;
};

}  // namespace

int run_training(const RunPlan& plan, RunControl& control, const RunEngine& engine, moe_train_callback callback,
                 void* user) {
  return Loop(plan, control, engine, callback, user).run();
}

}  // namespace moe
