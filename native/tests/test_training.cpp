// Training through the C API: same seed → bit-identical losses (any thread count), a resumed run
// continues exactly like an uninterrupted one, pause/stop work at step boundaries, bad input is
// rejected without side effects, and a small model learns the bundled corpus.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/fsutil.h"
#include "moe_engine.h"
#include "testing.h"
#include "train/token_data.h"

namespace {

std::string source_dir() {
  const char* s = std::getenv("MOE_SOURCE_DIR");
  return s ? s : "..";
}

std::string temp_dir(const std::string& name) {
  std::string d = (std::filesystem::temp_directory_path() / ("moe_test_training_" + name)).string();
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Byte tokens of the bundled corpus as a token shard.
std::string corpus_tokens() {
  static std::string path;
  if (!path.empty()) return path;
  std::ifstream in(source_dir() + "/resources/corpus/python-tutorial.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::vector<uint32_t> tokens(text.begin(), text.end());
  for (auto& t : tokens) t &= 0xFF;
  path = temp_dir("corpus") + "/tokens.bin";
  moe::write_token_file(path, tokens, nullptr, 2, 256);
  return path;
}

// sections: more top-level sections, each after a comma.
std::string config(int threads, int steps, const std::string& arch = "mixtral", int grad_accum = 1,
                   const std::string& sections = "") {
  return R"({"model": {"arch": ")" + arch +
         R"(", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": )" +
         (arch == "mixtral" ? "2" : "4") +
         R"(, "max_seq_len": 64, "d_ff": 128, "n_experts": 4, "top_k": 2, "z_loss_coef": 0.001},
  "train": {"batch_size": 8, "seq_len": 64, "steps": )" +
         std::to_string(steps) + R"(, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10, "threads": )" +
         std::to_string(threads) + R"(, "seed": 7, "grad_accum": )" + std::to_string(grad_accum) + "}" + sections + "}";
}

struct Engine {
  moe_engine* e;
  explicit Engine(const std::string& cfg) {
    char err[1024] = {};
    e = moe_engine_create(cfg.c_str(), nullptr, err, sizeof err);
    if (!e) throw std::runtime_error(err);
  }
  ~Engine() { moe_engine_destroy(e); }
};

std::vector<double> train(moe_engine* e, int steps) {
  std::vector<double> losses;
  moe_step_record r{sizeof(moe_step_record)};
  for (int i = 0; i < steps && moe_engine_step(e, &r) == MOE_OK; ++i) losses.push_back(r.loss);
  return losses;
}

}  // namespace

TEST(same_seed_same_losses_any_thread_count) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 2, 3}) {
      Engine en(config(threads, 6, arch, 2));
      CHECK(moe_engine_set_data(en.e, corpus_tokens().c_str()) == MOE_OK);
      runs.push_back(train(en.e, 6));
    }
    CHECK(runs[0].size() == 6);
    CHECK(runs[1] == runs[0]);
    CHECK(runs[2] == runs[0]);
  }
}

// Trains 8 steps straight, and 4 steps + checkpoint + resume + 4 steps: the losses must be the same bits.
void check_resume_is_exact(const std::string& name, const std::string& cfg) {
  std::vector<double> full;
  {
    Engine en(cfg);
    moe_engine_set_data(en.e, corpus_tokens().c_str());
    full = train(en.e, 8);
  }
  const std::string dir = temp_dir(name) + "/ckpt";
  std::vector<double> resumed;
  {
    Engine en(cfg);
    moe_engine_set_data(en.e, corpus_tokens().c_str());
    resumed = train(en.e, 4);
    CHECK(moe_engine_save_checkpoint(en.e, dir.c_str()) == MOE_OK);
  }
  {
    Engine en(cfg);
    moe_engine_set_data(en.e, corpus_tokens().c_str());
    CHECK_MSG(moe_engine_resume_from(en.e, dir.c_str()) == MOE_OK, moe_engine_last_error(en.e));
    CHECK(moe_engine_step_count(en.e) == 4);
    auto rest = train(en.e, 8);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
  }
  CHECK_MSG(resumed.size() == 8 && resumed == full, name + ": the resumed losses differ");
}

TEST(resume_continues_exactly_like_uninterrupted) { check_resume_is_exact("resume", config(2, 8)); }

TEST(resume_on_devices_with_pipelining_continues_exactly) {
  // LLEP spills and memory reuse S3 are deterministic, so a resumed run repeats the same bits.
  check_resume_is_exact("resume_devices",
                        config(2, 8, "mixtral", 1,
                               R"(, "routing_skew": {"distribution": "hot", "hot_fraction": 0.9, "seed": 2},
                                  "placement": {"devices": 3, "policy": "least-loaded", "lambda": 1.0, "min_tokens": 4},
                                  "pipeline": {"partitions": 2, "memory_reuse": "S3"})"));
}

TEST(steps_stop_at_train_steps_and_on_request) {
  Engine en(config(2, 3));
  moe_engine_set_data(en.e, corpus_tokens().c_str());
  moe_step_record r{sizeof(moe_step_record)};
  CHECK(moe_engine_step(en.e, &r) == MOE_OK);
  CHECK(r.step == 1 && r.tokens == 8 * 64 && r.n_moe_layers == 2);
  int64_t routed = 0;
  for (int i = 0; i < 8; ++i) routed += r.expert_tokens[i];
  CHECK(routed == 2 * 2 * 8 * 64);  // 2 layers × top-2 × tokens
  CHECK(moe_engine_step(en.e, &r) == MOE_OK);
  CHECK(moe_engine_step(en.e, &r) == MOE_OK);
  CHECK(moe_engine_step(en.e, &r) == MOE_FINISHED);

  Engine en2(config(2, 10));
  moe_engine_set_data(en2.e, corpus_tokens().c_str());
  moe_engine_set_paused(en2.e, 1);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    moe_engine_request_stop(en2.e);
  });
  CHECK(moe_engine_step(en2.e, &r) == MOE_STOPPED);  // blocked while paused, released by the stop
  stopper.join();
  CHECK(moe_engine_step_count(en2.e) == 0);
}

TEST(bad_input_is_rejected_by_name) {
  char err[1024] = {};
  CHECK(moe_engine_create(R"({"model": {"arch": "mixtral", "top_kk": 2}})", nullptr, err, sizeof err) == nullptr);
  CHECK(std::string(err).find("model.top_kk") != std::string::npos);
  CHECK(moe_engine_create(R"({"model": {"arch": "mixtral", "n_experts": 2, "top_k": 3}})", nullptr, err, sizeof err) ==
        nullptr);
  CHECK(std::string(err).find("model.top_k") != std::string::npos);
  CHECK(moe_engine_create("{\"model\": ", nullptr, err, sizeof err) == nullptr);
  CHECK(std::string(err).find("byte") != std::string::npos);
  CHECK(moe_engine_create(R"({"model": {"arch": "mixtral"}, "train": {"eps": 0}})", nullptr, err, sizeof err) == nullptr);
  CHECK(std::string(err).find("train.eps: must be > 0") != std::string::npos);

  Engine en(config(2, 3));
  CHECK(moe_engine_set_data(en.e, "/nonexistent/tokens.bin") == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(en.e)).find("/nonexistent/tokens.bin") != std::string::npos);
  moe_step_record r{sizeof(moe_step_record)};
  CHECK(moe_engine_step(en.e, &r) == MOE_ERROR);  // no data yet
  const std::string missing = temp_dir("missing") + "/nothing";
  CHECK(moe_engine_resume_from(en.e, missing.c_str()) == MOE_ERROR);
  CHECK(!std::filesystem::exists(missing));
}

TEST(small_model_learns_the_bundled_corpus) {
  // Byte unigram entropy of the corpus is 3.34 nats; a model that learned context goes well below it.
  Engine en(config(2, 500));
  moe_engine_set_data(en.e, corpus_tokens().c_str());
  auto losses = train(en.e, 500);
  CHECK(losses.size() == 500);
  double last = 0;
  for (int i = 490; i < 500; ++i) last += losses[i] / 10;
  std::printf("  loss: first %.3f, mean of last 10 %.3f\n", losses[0], last);
  CHECK(losses[0] > 5.0);
  CHECK(last < 2.6);  // measured 2.49 after 500 steps
}

TEST_MAIN()
