// A diverged run is caught at the step it happens: the loop reports the step, which quantity, the last finite
// values and the first non-finite weight (here a NaN planted in one expert), then pauses, stops or goes on as
// train.on_nonfinite says; no checkpoint with non-finite weights is ever written; "skip" needs resident experts.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fsutil.h"
#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/safetensors.h"
#include "train/token_data.h"

namespace {

const char* kBad = "layers.1.moe.experts.2.gate_up.weight";

std::string config(const std::string& policy, int steps = 3) {
  return R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 16, "n_layers": 2, "n_heads": 2,
    "n_kv_heads": 2, "max_seq_len": 8, "d_ff": 32, "n_experts": 4, "top_k": 2},
  "train": {"batch_size": 4, "seq_len": 8, "steps": )" + std::to_string(steps) +
         R"(, "checkpoint_every": 1, "warmup_steps": 1, "threads": 1, "on_nonfinite": ")" + policy + R"("}})";
}

std::string tokens() {
  static const std::string path = [] {
    std::vector<uint32_t> t(2048);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>((i * 13 + i / 5) % 64);
    const std::string p = moe_test::tmp_path("tokens.bin");
    moe::write_token_file(p, t, nullptr, 2, 64);
    return p;
  }();
  return path;
}

moe_engine* open(const std::string& cfg, const std::string& run_dir, std::string* error = nullptr) {
  char err[1024] = {};
  moe_engine_options o{};
  o.struct_size = sizeof o;
  o.config_json = cfg.c_str();
  o.run_dir = run_dir.c_str();
  moe_engine* e = moe_engine_open(&o, err, sizeof err);
  if (error) *error = err;
  return e;
}

// A checkpoint of a fresh model whose one expert weight holds a NaN: a start that will diverge at once.
std::string poisoned_checkpoint() {
  const std::string dir = moe_test::tmp_path("poisoned");
  moe_engine* e = open(config("pause"), moe_test::tmp_path("poison-src"));
  CHECK(e != nullptr);
  std::vector<std::vector<float>> data;
  moe::st::Writer w;
  bool planted = false;
  for (int32_t i = 0; i < moe_engine_tensor_count(e); ++i) {
    const char* name = nullptr;
    int32_t rank = 0;
    int64_t dims[8] = {};
    moe_engine_tensor_info(e, i, &name, &rank, dims);
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    data.emplace_back(static_cast<size_t>(n));
    CHECK(moe_engine_read_tensor(e, name, 0, data.back().data(), n) == MOE_OK);
    if (std::strcmp(name, kBad) == 0) data.back()[3] = std::nanf(""), planted = true;
    w.add_f32(name, data.back().data(), std::vector<int64_t>(dims, dims + rank));
  }
  CHECK_MSG(planted, std::string("no tensor ") + kBad);
  std::filesystem::create_directories(dir);
  moe::fs::write_file_atomic(moe::fs::join(dir, "config.json"), std::string(moe_engine_config_json(e)));
  w.write(moe::fs::join(dir, "model.safetensors"));
  moe_engine_destroy(e);
  return dir;
}

struct Seen {
  moe_engine* engine = nullptr;
  std::vector<int64_t> steps, checkpoints;
  std::vector<std::string> nonfinite;
  int32_t outcome = -1;
  std::string error;
  bool stop_when_paused = false;

  static int on_event(const moe_train_event* e, void* user) {
    auto& s = *static_cast<Seen*>(user);
    if (e->kind == MOE_TRAIN_STEP) s.steps.push_back(e->step);
    if (e->kind == MOE_TRAIN_CHECKPOINT) s.checkpoints.push_back(e->step);
    if (e->kind == MOE_TRAIN_NONFINITE) {
      s.nonfinite.push_back(e->error);
      if (s.stop_when_paused) moe_engine_request_stop(s.engine);  // the loop is about to pause
    }
    if (e->kind == MOE_TRAIN_DONE) {
      s.outcome = e->status;
      if (e->error) s.error = e->error;
    }
    return 0;
  }
};

Seen train(const std::string& policy, int steps = 3) {
  static const std::string init = poisoned_checkpoint();
  Seen seen;
  moe_engine* e = open(config(policy, steps), moe_test::tmp_path("run-" + policy));
  CHECK(e != nullptr);
  CHECK(moe_engine_init_from(e, init.c_str()) == MOE_OK);
  CHECK(moe_engine_set_data(e, tokens().c_str()) == MOE_OK);
  seen.engine = e;
  seen.stop_when_paused = policy == "pause";
  moe_train_options o{};
  o.struct_size = sizeof o;
  moe_engine_train(e, &o, &Seen::on_event, &seen);
  moe_engine_destroy(e);
  return seen;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(pause_reports_the_step_the_quantity_and_the_expert_and_writes_no_bad_checkpoint) {
  const Seen s = train("pause");
  CHECK(s.steps == std::vector<int64_t>{1});
  CHECK(s.nonfinite.size() == 1);
  const std::string& m = s.nonfinite.at(0);
  CHECK_MSG(contains(m, "step 1: the loss is NaN and the gradient norm is NaN"), m);
  CHECK_MSG(contains(m, "(no finite step before it in this session)"), m);
  CHECK_MSG(contains(m, std::string("first non-finite: weight ") + kBad), m);
  CHECK_MSG(contains(m, "the update was skipped, the weights are unchanged"), m);
  CHECK_MSG(contains(m, "paused (train.on_nonfinite \"pause\")"), m);
  // Stopped while paused: the final checkpoint would hold the NaN, so it is refused, naming the weight.
  CHECK(s.checkpoints.empty());
  CHECK(s.outcome == MOE_ERROR);
  CHECK_MSG(contains(s.error, std::string("not saved: parameter '") + kBad + "' holds a NaN"), s.error);
  CHECK(!std::filesystem::exists(moe_test::tmp_path("run-pause/checkpoint-1")));
}

TEST(stop_ends_the_run_at_the_diverged_step) {
  const Seen s = train("stop");
  CHECK(s.steps == std::vector<int64_t>{1});
  CHECK(s.nonfinite.size() == 1 && contains(s.nonfinite[0], "stopping (train.on_nonfinite \"stop\")"));
  CHECK(s.checkpoints.empty());  // no cadence checkpoint of a diverged step, and the final one is refused
  CHECK(s.outcome == MOE_ERROR && contains(s.error, "not saved"));
}

TEST(skip_goes_on_and_reports_every_diverged_step) {
  const Seen s = train("skip", 3);
  CHECK(s.steps == (std::vector<int64_t>{1, 2, 3}));
  CHECK(s.nonfinite.size() == 3);
  CHECK_MSG(contains(s.nonfinite[2], "step 3: the loss is NaN") && contains(s.nonfinite[2], "going on with the next batch"),
            s.nonfinite[2]);
  CHECK(s.checkpoints.empty());
}

TEST(skip_needs_resident_experts) {
  std::string err;
  const std::string cfg = R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 16, "n_layers": 2, "n_heads": 2,
    "max_seq_len": 8, "d_ff": 32, "n_experts": 4, "top_k": 2}, "train": {"on_nonfinite": "skip"},
    "offload": {"mode": "host", "expert_slots": 2}})";
  CHECK(open(cfg, moe_test::tmp_path("skip-offload"), &err) == nullptr);
  CHECK_MSG(contains(err, "train.on_nonfinite: \"skip\" needs resident experts"), err);
  CHECK(open(R"({"model": {"arch": "mixtral"}, "train": {"on_nonfinite": "panic"}})", moe_test::tmp_path("x"), &err) == nullptr);
  CHECK_MSG(contains(err, "train.on_nonfinite: \"panic\" is not supported"), err);
}

TEST(cleanup) { moe::fs::remove_all(moe_test::tmp_dir()); }

TEST_MAIN()
