// Killing the engine mid-step (SIGKILL, no chance to clean up) and resuming from the run directory gives the
// losses of an uninterrupted run, on the host and the SSD tier (and a LoRA fine-tune on the SSD tier): checkpoints
// are atomic and hold the settled expert state, and the resumed run rebuilds its SSD file from them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/json.h"
#include "testing.h"

namespace {

namespace fs = std::filesystem;

// The moe-engine CLI (train) and moe-engine-dev (tokenize), from ctest's environment or beside this test.
std::string tool_path(const char* env, const char* name) {
  if (const char* path = std::getenv(env)) return path;
  return (fs::read_symlink("/proc/self/exe").parent_path() / name).string();
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* out = std::freopen(log.c_str(), "a", stdout);
    if (out) ::dup2(::fileno(out), 2);  // the messages too
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t lines_in(const std::string& path) {
  std::ifstream f(path);
  size_t n = 0;
  for (std::string line; std::getline(f, line);) n += !line.empty();
  return n;
}

// step -> every loss logged for it (a resumed run logs the steps after its checkpoint again).
std::map<int, std::vector<double>> losses(const std::string& log) {
  std::map<int, std::vector<double>> out;
  std::ifstream f(log);
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    const moe::json::Value v = moe::json::parse(line, log);
    out[static_cast<int>(v.find("step")->number)].push_back(v.find("loss")->number);
  }
  return out;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// finetune: a "finetune" section, or empty.
std::string config(const std::string& offload, const std::string& finetune) {
  return R"({"model": {"arch": "mixtral", "vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 4,
    "max_seq_len": 64, "d_ff": 256, "n_experts": 8, "top_k": 2},
  "train": {"batch_size": 4, "seq_len": 64, "steps": 8, "checkpoint_every": 4, "warmup_steps": 2, "threads": 2},
  "offload": )" + offload + (finetune.empty() ? "" : R"(, "finetune": )" + finetune) + "}";
}

}  // namespace

TEST(killed_mid_step_then_resumed_gives_the_same_losses) {
  const std::string cli = tool_path("MOE_CLI", "moe-engine"), dev_cli = tool_path("MOE_DEV_CLI", "moe-engine-dev");
  const fs::path work = fs::temp_directory_path() / ("moe_test_kill_" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string corpus = std::string(std::getenv("MOE_SOURCE_DIR") ? std::getenv("MOE_SOURCE_DIR")
                                                                         : fs::path(__FILE__).parent_path() / "../..") +
                             "/resources/corpus/python-tutorial.txt";
  const std::string data = (work / "tokens.bin").string();
  CHECK(wait_exit(spawn({dev_cli, "tokenize", "--bytes", corpus, "--out", data}, (work / "tok.txt").string())) == 0);
  const std::string ssd = R"({"mode": "ssd", "expert_slots": 3, "cache_experts": 5})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"mode": "host", "expert_slots": 3})", ""}, {ssd, ""},
      {ssd, R"({"method": "lora", "lora": {"rank": 4, "alpha": 8}})"}};
  for (const auto& [offload, finetune] : cases) {
    const std::string cfg = (work / "config.json").string();
    write(cfg, config(offload, finetune));
    const std::string whole = (work / "whole").string(), killed = (work / "killed").string();
    fs::remove_all(whole);
    fs::remove_all(killed);
    CHECK(wait_exit(spawn({cli, "train", "--config", cfg, "--data", data, "--out", whole, "--quiet"},
                          (work / "out.txt").string())) == 0);
    // The same command again is a new run: refused, the finished run's log and checkpoints untouched.
    const std::string before = read_text(whole + "/log.jsonl");
    CHECK(wait_exit(spawn({cli, "train", "--config", cfg, "--data", data, "--out", whole, "--quiet"},
                          (work / "again.txt").string())) != 0);
    CHECK(read_text((work / "again.txt").string()).find("already holds files") != std::string::npos);
    CHECK(read_text(whole + "/log.jsonl") == before);

    // Kill as soon as step 5 is logged: step 6 is then running, after checkpoint-4.
    const pid_t pid = spawn({cli, "train", "--config", cfg, "--data", data, "--out", killed, "--quiet"},
                            (work / "out.txt").string());
    const std::string log = killed + "/log.jsonl";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (lines_in(log) < 5 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    const size_t logged = lines_in(log);
    CHECK_MSG(logged >= 5 && logged < 8, "killed after " + std::to_string(logged) + " steps");
    CHECK(fs::exists(killed + "/checkpoint-4/trainer_state.json"));

    CHECK(wait_exit(spawn({cli, "train", "--config", cfg, "--data", data, "--out", killed, "--resume", killed, "--quiet"},
                          (work / "out.txt").string())) == 0);
    const auto expected = losses(whole + "/log.jsonl"), got = losses(log);
    CHECK(expected.size() == 8 && got.size() == 8);
    for (const auto& [step, values] : got)
      for (double loss : values)
        CHECK_MSG(expected.count(step) && loss == expected.at(step)[0],
                  offload + finetune + ": step " + std::to_string(step) + " loss differs after the kill and resume");
  }
  fs::remove_all(work);
}

TEST_MAIN()
