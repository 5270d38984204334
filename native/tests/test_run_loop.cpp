// The engine's training loop through the C API (moe_engine_open + moe_engine_train): checkpoint cadence from
// train.checkpoint_every, total_steps, pause and resume from another thread, a checkpoint requested while
// paused, stop, options sized by struct_size, the SSD file in the run directory, and exactly one outcome.
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/run_loop.h"
#include "train/token_data.h"

namespace fs = std::filesystem;

namespace {

std::string config(int steps, int checkpoint_every, const std::string& sections = "") {
  return R"({"model": {"arch": "mixtral", "vocab_size": 256, "d_model": 16, "n_layers": 2, "n_heads": 2,
    "n_kv_heads": 2, "max_seq_len": 8, "d_ff": 32, "n_experts": 4, "top_k": 2},
  "train": {"batch_size": 2, "seq_len": 8, "steps": )" +
         std::to_string(steps) + R"(, "checkpoint_every": )" + std::to_string(checkpoint_every) +
         R"(, "warmup_steps": 1, "threads": 1})" + sections + "}";
}

std::string tokens() {
  static const std::string path = [] {
    std::vector<uint32_t> t(4096);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>((i * 37 + i / 7) % 256);
    const std::string p = moe_test::tmp_path("tokens.bin");
    moe::write_token_file(p, t, nullptr, 2, 256);
    return p;
  }();
  return path;
}

// Everything the loop reported, collected on the training thread and read after it ended.
struct Events {
  std::mutex mutex;
  std::vector<int64_t> steps, checkpoints;
  std::vector<std::string> dirs;
  std::vector<int32_t> outcomes;
  std::string error;
  std::atomic<int64_t> last{0};
  std::function<void(int64_t)> on_step;

  static int callback(const moe_train_event* e, void* user) {
    auto& self = *static_cast<Events*>(user);
    CHECK(e->struct_size == sizeof(moe_train_event));
    std::lock_guard<std::mutex> lock(self.mutex);
    CHECK_MSG(self.outcomes.empty(), "an event after the outcome");
    if (e->kind == MOE_TRAIN_STEP) {
      CHECK(e->record != nullptr && e->record->step == e->step);
      self.steps.push_back(e->step);
      self.last = e->step;
      if (self.on_step) self.on_step(e->step);
    } else if (e->kind == MOE_TRAIN_CHECKPOINT) {
      self.checkpoints.push_back(e->step);
      self.dirs.push_back(e->checkpoint_dir);
    } else {
      self.outcomes.push_back(e->status);
      if (e->error) self.error = e->error;
    }
    return 0;
  }
};

struct Run {
  moe_engine* e = nullptr;
  std::string dir;
  Run(const std::string& name, const std::string& cfg, const char* init_dir = nullptr) {
    dir = moe_test::tmp_path(name);
    char err[1024] = {};
    moe_engine_options o{};
    o.struct_size = sizeof o;
    o.config_json = cfg.c_str();
    o.init_dir = init_dir;
    o.run_dir = dir.c_str();
    e = moe_engine_open(&o, err, sizeof err);
    if (!e) moe::fail(err);
    CHECK(moe_engine_set_data(e, tokens().c_str()) == MOE_OK);
  }
  ~Run() { moe_engine_destroy(e); }
  int train(Events& events, int64_t total_steps = 0) {
    moe_train_options o{};
    o.struct_size = sizeof o;
    o.total_steps = total_steps;
    return moe_engine_train(e, &o, &Events::callback, &events);
  }
};

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t s = from; s <= to; ++s) v.push_back(s);
  return v;
}

bool saved(const std::string& dir, int64_t step) {
  return fs::exists(fs::path(dir) / ("checkpoint-" + std::to_string(step)) / "trainer_state.json");
}

void wait_for(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(done());
}

}  // namespace

TEST(checkpoint_cadence_comes_from_the_config_and_the_last_step_is_saved_once) {
  Run run("cadence", config(7, 3));
  Events ev;
  CHECK(run.train(ev) == MOE_FINISHED);
  CHECK(ev.steps == range(1, 7));
  CHECK((ev.checkpoints == std::vector<int64_t>{3, 6, 7}));
  CHECK(ev.dirs.size() == 3 && ev.dirs[0] == run.dir + "/checkpoint-3");
  CHECK((ev.outcomes == std::vector<int32_t>{MOE_FINISHED}));
  for (int64_t s : {3, 6, 7}) CHECK(saved(run.dir, s));

  // A cadence that lands on the last step saves it once; a finished engine trains no further.
  Run even("cadence-even", config(4, 2));
  Events ev2;
  CHECK(even.train(ev2) == MOE_FINISHED);
  CHECK((ev2.checkpoints == std::vector<int64_t>{2, 4}));
  Events again;
  CHECK(even.train(again) == MOE_FINISHED);
  CHECK(again.steps.empty() && again.checkpoints.empty() && again.outcomes.size() == 1);
}

// train.keep_checkpoints: after each save the oldest beyond the newest N go, the one just saved always stays, and
// nothing but the loop's own checkpoint-<step> directories is touched (a folder of notes, a Hugging Face model).
TEST(keep_checkpoints_removes_the_oldest_and_touches_nothing_else) {
  std::string cfg = config(5, 1);
  const std::string cadence = R"("checkpoint_every": 1)";
  cfg.replace(cfg.find(cadence), cadence.size(), cadence + R"(, "keep_checkpoints": 2)");
  Run run("keep", cfg);
  fs::create_directories(run.dir + "/checkpoint-notes");
  fs::create_directories(run.dir + "/checkpoint-0");
  moe_test::write_raw(run.dir + "/checkpoint-0/config.json", R"({"model_type": "olmoe"})");
  fs::create_directories(run.dir + "/checkpoint-1000");  // a config.json that does not parse: not known to be ours
  moe_test::write_raw(run.dir + "/checkpoint-1000/config.json", "{not json");
  Events ev;
  CHECK(run.train(ev) == MOE_FINISHED);
  CHECK(ev.checkpoints == range(1, 5));  // every save is reported as it happens
  for (int64_t s : {1, 2, 3}) CHECK_MSG(!fs::exists(run.dir + "/checkpoint-" + std::to_string(s)), std::to_string(s));
  for (int64_t s : {4, 5}) CHECK(saved(run.dir, s));
  CHECK(fs::is_directory(run.dir + "/checkpoint-notes") && fs::exists(run.dir + "/checkpoint-0/config.json"));
  CHECK(fs::exists(run.dir + "/checkpoint-1000/config.json"));
  fs::remove_all(run.dir + "/checkpoint-1000");
  CHECK(std::string(moe_engine_config_json(run.e)).find("\"keep_checkpoints\": 2") != std::string::npos);

  // Keep 1 on a resume: the new checkpoint stays even where an abandoned branch left a higher step, which is the
  // newest other and goes with the next save.
  fs::copy(run.dir + "/checkpoint-5", run.dir + "/checkpoint-9", fs::copy_options::recursive);
  std::vector<std::string> gone = moe::remove_old_checkpoints(run.dir, 1, 5);
  CHECK(saved(run.dir, 5) && !fs::exists(run.dir + "/checkpoint-4") && !fs::exists(run.dir + "/checkpoint-9"));
  CHECK(gone.size() == 2);
  CHECK(moe::remove_old_checkpoints(run.dir, 0, 5).empty() && saved(run.dir, 5));
}

// What the start's disk check counts: with retention keep + 1 or the plan's saves (cadence and last) if fewer;
// without it the next save.
TEST(checkpoints_at_once_counts_the_plans_saves) {
  auto at_once = [](int64_t first, int64_t last, int64_t every, int64_t keep) {
    moe::RunPlan p;
    p.first_step = first, p.last_step = last, p.checkpoint_every = every, p.keep_checkpoints = keep;
    return moe::checkpoints_at_once(p);
  };
  CHECK(at_once(0, 300, 0, 0) == 1);       // the last step's only
  CHECK(at_once(0, 100000, 10, 0) == 1);   // no retention: the next save
  CHECK(at_once(0, 1000, 10, 2) == 3);     // two kept and the next being written
  CHECK(at_once(0, 300, 100, 5) == 3);     // 100, 200, 300 (the last on the cadence, saved once)
  CHECK(at_once(0, 7, 3, 5) == 3);         // 3, 6 and the last
  CHECK(at_once(150, 300, 100, 5) == 2);   // a resume at 150: 200 and 300
  CHECK(at_once(300, 300, 100, 0) == 0);  // nothing to train, nothing to save
}

TEST(total_steps_stops_early_as_finished_and_a_resume_continues_from_the_checkpoint) {
  Run run("total", config(10, 0));
  Events ev;
  CHECK(run.train(ev, 4) == MOE_FINISHED);
  CHECK(ev.steps == range(1, 4));
  CHECK((ev.checkpoints == std::vector<int64_t>{4}));

  Run resumed("total-resumed", config(10, 0));
  CHECK(moe_engine_resume_from(resumed.e, (run.dir + "/checkpoint-4").c_str()) == MOE_OK);
  Events rest;
  CHECK(resumed.train(rest) == MOE_FINISHED);
  CHECK(rest.steps == range(5, 10));
  CHECK((rest.checkpoints == std::vector<int64_t>{10}));
}

TEST(pause_checkpoint_while_paused_resume_and_stop_from_another_thread) {
  Run run("control", config(1 << 30, 0));
  Events ev;
  ev.on_step = [&](int64_t step) {
    if (step == 3) moe_engine_set_paused(run.e, 1);
  };
  int outcome = -1;
  std::thread trainer([&] { outcome = run.train(ev); });
  wait_for([&] { return ev.last.load() >= 3; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(ev.last.load() == 3);  // paused at the boundary after step 3
  moe_engine_request_checkpoint(run.e);
  wait_for([&] {
    std::lock_guard<std::mutex> lock(ev.mutex);
    return !ev.checkpoints.empty();
  });
  CHECK(saved(run.dir, 3));
  CHECK(ev.last.load() == 3);  // still paused after saving
  moe_engine_request_checkpoint(run.e);  // the same step again: saved once
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  moe_engine_set_paused(run.e, 0);
  wait_for([&] { return ev.last.load() >= 6; });
  moe_engine_request_stop(run.e);
  trainer.join();
  CHECK(outcome == MOE_STOPPED);
  const int64_t last = ev.steps.back();
  CHECK(ev.steps == range(1, last));
  CHECK((ev.checkpoints == std::vector<int64_t>{3, last}));
  CHECK((ev.outcomes == std::vector<int32_t>{MOE_STOPPED}));
  CHECK(moe_engine_step_count(run.e) == last);
}

TEST(stop_while_paused_saves_the_final_checkpoint) {
  Run run("paused-stop", config(1 << 30, 0));
  Events ev;
  ev.on_step = [&](int64_t step) {
    if (step == 2) moe_engine_set_paused(run.e, 1);
  };
  int outcome = -1;
  std::thread trainer([&] { outcome = run.train(ev); });
  wait_for([&] { return ev.last.load() >= 2; });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  moe_engine_request_stop(run.e);
  trainer.join();
  CHECK(outcome == MOE_STOPPED);
  CHECK(ev.steps == range(1, 2));
  CHECK((ev.checkpoints == std::vector<int64_t>{2}));
  CHECK((ev.outcomes == std::vector<int32_t>{MOE_STOPPED}));
}

TEST(a_callback_that_returns_nonzero_ends_the_loop_without_more_events) {
  Run run("gone", config(20, 2));
  struct Count {
    int events = 0;
  } count;
  moe_train_options o{};
  o.struct_size = sizeof o;
  const int rc = moe_engine_train(
      run.e, &o,
      [](const moe_train_event* e, void* user) {
        ++static_cast<Count*>(user)->events;
        return e->kind == MOE_TRAIN_STEP && e->step == 3 ? 1 : 0;
      },
      &count);
  CHECK(rc == MOE_OK);
  CHECK(count.events == 4);  // steps 1, 2, checkpoint 2, step 3
  CHECK(!saved(run.dir, 3));
}

TEST(a_failing_step_is_the_one_outcome_with_the_engine_message) {
  const std::string cfg = config(5, 0), dir = moe_test::tmp_path("failing");
  moe_engine_options o{};
  o.struct_size = sizeof o;
  o.config_json = cfg.c_str();
  o.run_dir = dir.c_str();
  char err[256] = {};
  moe_engine* e = moe_engine_open(&o, err, sizeof err);  // no data set: the first step fails
  CHECK(e != nullptr);
  Events ev;
  moe_train_options t{};
  t.struct_size = sizeof t;
  CHECK(moe_engine_train(e, &t, &Events::callback, &ev) == MOE_ERROR);
  CHECK(ev.steps.empty() && ev.checkpoints.empty());
  CHECK((ev.outcomes == std::vector<int32_t>{MOE_ERROR}));
  CHECK(!ev.error.empty() && ev.error == moe_engine_last_error(e));
  moe_engine_destroy(e);
}

TEST(options_are_read_by_struct_size_and_bad_options_name_the_field) {
  // An older, smaller options struct: only struct_size and config_json; the run directory is then unset.
  struct OldOptions {
    uint32_t struct_size;
    const char* config_json;
  };
  const std::string cfg = config(2, 0);
  OldOptions old{sizeof(OldOptions), cfg.c_str()};
  char err[512] = {};
  moe_engine* e = moe_engine_open(reinterpret_cast<const moe_engine_options*>(&old), err, sizeof err);
  CHECK(e != nullptr);
  moe_train_options t{};
  t.struct_size = sizeof t;
  CHECK(moe_engine_train(e, &t, nullptr, nullptr) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(e)).find("run_dir") != std::string::npos);
  moe_train_options unsized{};
  CHECK(moe_engine_train(e, &unsized, nullptr, nullptr) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(e)).find("struct_size") != std::string::npos);
  moe_engine_destroy(e);

  moe_engine_options none{};
  CHECK(moe_engine_open(&none, err, sizeof err) == nullptr);
  CHECK(std::string(err).find("struct_size") != std::string::npos);
}

TEST(the_ssd_file_lives_in_the_run_directory_unless_the_config_names_one) {
  const std::string ssd = R"(, "offload": {"mode": "ssd", "expert_slots": 2, "cache_experts": 5})";
  Run run("ssd", config(2, 0, ssd));
  CHECK(std::string(moe_engine_config_json(run.e)).find("\"ssd_dir\": \"" + run.dir + "/ssd\"") != std::string::npos);
  Events ev;
  CHECK(run.train(ev) == MOE_FINISHED);
  CHECK(fs::is_directory(run.dir + "/ssd") && !fs::is_empty(run.dir + "/ssd"));

  const std::string named = moe_test::tmp_path("named-ssd");
  Run own("ssd-named", config(2, 0,
                              R"(, "offload": {"mode": "ssd", "expert_slots": 2, "cache_experts": 5, "ssd_dir": ")" +
                                  named + "\"}"));
  CHECK(std::string(moe_engine_config_json(own.e)).find("\"ssd_dir\": \"" + named + "\"") != std::string::npos);
  CHECK(!fs::exists(own.dir + "/ssd"));
}

// A run directory on a disk that cannot hold one checkpoint is refused before the first step (every run saves at
// least its last), naming both sizes; the same run on a disk that can trains and saves. The small disk is a tmpfs,
// which needs root to mount; elsewhere this test says it could not run (checkpoint_space_error's test in
// test_checkpoint covers the decision and the message everywhere).
TEST(a_run_whose_checkpoint_cannot_fit_its_disk_is_refused_before_its_first_step) {
  if (::geteuid() != 0) {
    std::printf("  not run: mounting a small tmpfs needs root\n");
    return;
  }
  struct Mount {
    std::string at;
    bool mounted = false;
    Mount(const std::string& where, const std::string& size) : at(where) {
      fs::create_directories(at);
      mounted = ::mount("tmpfs", at.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    }
    ~Mount() {
      if (mounted) ::umount(at.c_str());
      std::error_code ec;
      fs::remove(at, ec);
    }
  };
  const std::string cfg = config(3, 0);
  for (const auto& [size, fits] : {std::pair<std::string, bool>{"256k", false}, {"16m", true}}) {
    Mount disk(moe_test::tmp_path("small-disk-" + size), size);
    if (!disk.mounted) {
      std::printf("  not run: mount tmpfs failed (%s)\n", std::strerror(errno));
      return;
    }
    const std::string dir = disk.at + "/run";
    moe_engine_options o{};
    o.struct_size = sizeof o;
    o.config_json = cfg.c_str();
    o.run_dir = dir.c_str();
    char err[512] = {};
    moe_engine* e = moe_engine_open(&o, err, sizeof err);
    CHECK(e != nullptr && moe_engine_set_data(e, tokens().c_str()) == MOE_OK);
    Events ev;
    moe_train_options t{};
    t.struct_size = sizeof t;
    const int rc = moe_engine_train(e, &t, &Events::callback, &ev);
    if (fits) {
      CHECK(rc == MOE_FINISHED && saved(dir, 3));
    } else {
      CHECK(rc == MOE_ERROR && ev.steps.empty());
      const std::string why = moe_engine_last_error(e);
      for (const char* needle : {"a checkpoint of this run takes about", " MB free", "would train and then"})
        CHECK_MSG(why.find(needle) != std::string::npos, "'" + why + "' lacks '" + needle + "'");
      CHECK(why.find(dir) != std::string::npos);
    }
    moe_engine_destroy(e);
  }
}

TEST_MAIN()
