#include "train_loop.h"

#include "step_record_pack.h"

namespace moe_addon {

namespace {

struct Listener {
  std::atomic<int64_t>& last_step;
  const PostMessage& post;
  bool done = false;

  static int on_event(const moe_train_event* e, void* user) {
    auto& self = *static_cast<Listener*>(user);
    TrainMessage message;
    if (e->kind == MOE_TRAIN_STEP) {
      self.last_step = e->step;
      message.kind = TrainMessage::Kind::Step;
      message.record = pack_step_record(*e->record);
    } else if (e->kind == MOE_TRAIN_NONFINITE) {
      message.kind = TrainMessage::Kind::NonFinite;
      message.step = e->step;
      message.text = e->error ? e->error : "";
    } else if (e->kind == MOE_TRAIN_CHECKPOINT) {
      message.kind = TrainMessage::Kind::Checkpoint;
      message.step = e->step;
      message.text = e->checkpoint_dir;
    } else {
      message.kind = TrainMessage::Kind::Done;
      self.done = true;
      message.text = e->status == MOE_FINISHED ? "finished" : e->status == MOE_STOPPED ? "stopped" : "failed";
      if (e->error) message.error = e->error;
    }
    return self.post(std::move(message)) ? 0 : 1;
  }
};

}  // namespace

void train(moe_engine* engine, int64_t total_steps, std::atomic<int64_t>& last_step, const PostMessage& post) {
  last_step = moe_engine_step_count(engine);
  Listener listener{last_step, post};
  moe_train_options options{};
  options.struct_size = sizeof options;
  options.total_steps = total_steps;
  if (moe_engine_train(engine, &options, &Listener::on_event, &listener) == MOE_ERROR && !listener.done) {
    // Refused before it began (e.g. no run directory): still exactly one outcome.
    TrainMessage done;
    done.text = "failed";
    done.error = moe_engine_last_error(engine);
    post(std::move(done));
  }
}

}  // namespace moe_addon
