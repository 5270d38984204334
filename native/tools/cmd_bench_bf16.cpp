// `moe-engine-dev bench --bf16`: what train.compute_dtype "bf16" buys on this machine.
//   --gemm    GFLOP/s of sgemm_bf16 against the fp32 sgemm on the expert-FFN shapes (T x C x F: forward up/down,
//             backward dx/dh with the bf16 weight copy, dW with both operands rounded while packing), median of reps
//   --train   training tokens/s of a config (default resources/presets/tiny.json) in fp32 and in bf16, each run by
//             `moe-engine train` (the CLI beside this tool) on a copy of the config with only train.compute_dtype changed; tokens/s is the
//             median over the steps after the first two of OUT/log.jsonl, best of --rounds alternating rounds
//   --packers ns per element of every kernel family's operand packers (bench_families.h)
//   --families GFLOP/s of every fp32 and bf16 kernel family this CPU runs on an expert's shapes (bench_families.h)
//   --threads N (default 2), --steps N (default 8), --rounds N (default 2), --config PATH, --data PATH (a token
//   file; default: the bundled corpus tokenized as bytes), --json (one JSON object per line)
// With none of --gemm, --train, --packers and --families, the first two run.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/convert_bf16.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "bench_families.h"
#include "bench_memory.h"
#include "bench_timing.h"
#include "commands.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "core/threadpool.h"

extern char** environ;

namespace {

using bench::median;
using bench::time_median;

struct Options {
  int threads = 2, steps = 8, rounds = 2;
  bool gemm = false, train = false, packers = false, families = false, json = false;
  std::string config, data;
};

int positive(const std::string& flag, const char* value) {
  const int v = std::atoi(value);
  moe::check(v >= 1, "bench --bf16: " + flag + " must be at least 1, got '" + value + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool valued = a == "--threads" || a == "--steps" || a == "--rounds" || a == "--config" || a == "--data";
    if (valued && i + 1 >= argc) moe::fail("bench --bf16: " + a + " needs a value");
    if (a == "--bf16") continue;
    if (a == "--threads") o.threads = positive(a, argv[++i]);
    else if (a == "--steps") o.steps = positive(a, argv[++i]);
    else if (a == "--rounds") o.rounds = positive(a, argv[++i]);
    else if (a == "--config") o.config = argv[++i];
    else if (a == "--data") o.data = argv[++i];
    else if (a == "--gemm") o.gemm = true;
    else if (a == "--train") o.train = true;
    else if (a == "--packers") o.packers = true;
    else if (a == "--families") o.families = true;
    else if (a == "--json") o.json = true;
    else
      moe::fail("bench --bf16: unknown argument '" + a +
                "' (expected --gemm, --train, --packers, --families, --threads N, --steps N, --rounds N, --config PATH, --data PATH, --json)");
  }
  if (!o.gemm && !o.train && !o.packers && !o.families) o.gemm = o.train = true;
  return o;
}

// ---- sgemm_bf16 against sgemm on the expert-FFN shapes ----

struct GemmCase {
  const char* op;  // up: x·W1ᵀ, down: h·W2ᵀ, dx: dy·W1, dh: dy·W2, dw_up: dyᵀ·x, dw_down: dyᵀ·h
  bool ta, tb;
  int M, N, K;
  bool b_is_weight;  // B is a weight matrix (bf16 copy in bf16 mode) rather than an activation
};

std::vector<GemmCase> ffn_cases(int T, int C, int F) {
  return {{"up", false, true, T, F, C, true},       {"down", false, true, T, C, F, true},
          {"dx", false, false, T, C, F, true},      {"dh", false, false, T, F, C, true},
          {"dw_up", true, false, F, C, T, false},   {"dw_down", true, false, C, F, T, false}};
}

void bench_gemm(moe::ThreadPool& tp, const Options& o) {
  if (!o.json)
    std::printf("%-8s %5s %5s %5s  %-5s %6s %6s %6s  %10s %10s %7s\n", "op", "T", "C", "F", "trans", "M", "N", "K",
                "fp32 GF/s", "bf16 GF/s", "speedup");
  for (auto [C, F] : {std::pair{512, 2048}, std::pair{1024, 4096}})
    for (int T : {64, 256, 1024, 4096}) {
      double flops_all = 0, t32_all = 0, t16_all = 0;
      for (const GemmCase& c : ffn_cases(T, C, F)) {
        const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
        const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
        const bench::HostArray<float> A = bench::random_floats(tp, a_rows * a_cols, 1),
                                      B = bench::random_floats(tp, b_rows * b_cols, 2), out(int64_t(c.M) * c.N);
        bench::HostArray<uint16_t> B16(B.size());
        moe::cpu::to_bf16(tp, B16.data(), B.data(), int64_t(B.size()));
        const double t32 = time_median([&] {
          moe::cpu::sgemm(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B.data(), int(b_cols), 0.0f,
                          out.data(), c.N);
        });
        const double t16 = time_median([&] {
          if (c.b_is_weight)
            moe::cpu::sgemm_bf16(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B16.data(), int(b_cols),
                                 0.0f, out.data(), c.N);
          else
            moe::cpu::sgemm_bf16(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B.data(), int(b_cols),
                                 0.0f, out.data(), c.N);
        });
        const double flops = 2.0 * c.M * c.N * c.K;
        flops_all += flops, t32_all += t32, t16_all += t16;
        const char* trans = c.ta ? "T,N" : c.tb ? "N,T" : "N,N";
        if (o.json)
          std::printf("{\"bench\":\"gemm_bf16\",\"op\":\"%s\",\"T\":%d,\"C\":%d,\"F\":%d,\"trans_a\":%d,\"trans_b\":%d,"
                      "\"M\":%d,\"N\":%d,\"K\":%d,\"fp32_gflops\":%.2f,\"bf16_gflops\":%.2f}\n",
                      c.op, T, C, F, int(c.ta), int(c.tb), c.M, c.N, c.K, flops / t32 / 1e9, flops / t16 / 1e9);
        else
          std::printf("%-8s %5d %5d %5d  %-5s %6d %6d %6d  %10.1f %10.1f %6.2fx\n", c.op, T, C, F, trans, c.M, c.N, c.K,
                      flops / t32 / 1e9, flops / t16 / 1e9, t32 / t16);
        std::fflush(stdout);
      }
      if (o.json)
        std::printf(
            "{\"bench\":\"gemm_bf16_ffn\",\"T\":%d,\"C\":%d,\"F\":%d,\"fp32_gflops\":%.2f,\"bf16_gflops\":%.2f}\n", T,
            C, F, flops_all / t32_all / 1e9, flops_all / t16_all / 1e9);
      else
        std::printf("%-8s %5d %5d %5d  %-5s %6s %6s %6s  %10.1f %10.1f %6.2fx\n", "ffn", T, C, F, "all", "", "", "",
                    flops_all / t32_all / 1e9, flops_all / t16_all / 1e9, t32_all / t16_all);
    }
}

// ---- training tokens/s, fp32 against bf16 ----

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  moe::check(n > 0, "bench --bf16: cannot find this executable through /proc/self/exe");
  return std::string(buf, n);
}

// The first `rel` found walking up from the executable's directory, then from the working directory.
std::string find_resource(const std::string& rel) {
  std::vector<std::string> starts{self_exe()};
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd)) starts.push_back(std::string(cwd) + "/.");
  for (std::string dir : starts)
    for (size_t cut; (cut = dir.rfind('/')) != std::string::npos && cut > 0;) {
      dir.resize(cut);
      if (moe::fs::exists(moe::fs::join(dir, rel))) return moe::fs::join(dir, rel);
    }
  moe::fail("bench --bf16: cannot find " + rel + " above the executable or the working directory; pass it explicitly");
}

// The moe-engine CLI beside this executable (training goes through it, as a user would train).
std::string cli_exe() {
  const std::string self = self_exe();
  return self.substr(0, self.rfind('/') + 1) + "moe-engine";
}

// Runs `exe args...` with its stdout discarded (its errors still reach stderr).
void run_tool(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int spawned = posix_spawn(&pid, exe.c_str(), &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  moe::check(spawned == 0, "bench --bf16: cannot start " + exe);
  int status = 0;
  waitpid(pid, &status, 0);
  moe::check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench --bf16: `" + exe + " " + args[0] + "` failed");
}

struct TrainResult {
  double tokens_per_s = 0, last_loss = 0;
};

TrainResult train_once(const Options& o, const std::string& work, const std::string& data, const char* dtype,
                       int round) {
  moe::json::Value cfg = moe::json::parse(moe::fs::read_file(o.config, 16 << 20), o.config);
  moe::json::Value train = cfg.find("train") ? *cfg.find("train") : moe::json::Value::make_object();
  train.set("compute_dtype", moe::json::Value::of(dtype));
  train.set("threads", moe::json::Value::of(o.threads));
  train.set("checkpoint_every", moe::json::Value::of(0));
  train.set("steps", moe::json::Value::of(o.steps));
  cfg.set("train", train);
  const std::string tag = std::string(dtype) + "-" + std::to_string(round);
  const std::string cfg_path = moe::fs::join(work, "config-" + tag + ".json"), out = moe::fs::join(work, "run-" + tag);
  moe::fs::write_file_atomic(cfg_path, moe::json::dump(cfg));
  run_tool(cli_exe(), {"train", "--config", cfg_path, "--data", data, "--out", out, "--quiet"});
  std::istringstream log(moe::fs::read_file(moe::fs::join(out, "log.jsonl"), 64 << 20));
  std::vector<double> rates;
  TrainResult r;
  int step = 0;
  for (std::string line; std::getline(log, line); ++step) {
    const moe::json::Value rec = moe::json::parse(line, "log.jsonl");
    r.last_loss = rec.find("loss")->number;
    if (step >= 2) rates.push_back(rec.find("tokens")->number / (rec.find("step_ms")->number / 1000.0));
  }
  moe::check(!rates.empty(), "bench --bf16: needs --steps of at least 3 (the first two steps are warm-up)");
  r.tokens_per_s = median(rates);
  return r;
}

void bench_train(const Options& opts) {
  Options o = opts;
  if (o.config.empty()) o.config = find_resource("resources/presets/tiny.json");
  char tmpl[] = "/tmp/moe-bench-bf16-XXXXXX";
  moe::check(mkdtemp(tmpl) != nullptr, "bench --bf16: cannot create a temporary directory");
  const std::string work = tmpl;
  std::string data = o.data;
  if (data.empty()) {
    data = moe::fs::join(work, "corpus.bin");
    run_tool(self_exe(), {"tokenize", "--bytes", find_resource("resources/corpus/python-tutorial.txt"), "--out", data});
  }
  TrainResult best[2];
  const char* dtypes[2] = {"fp32", "bf16"};
  for (int round = 0; round < o.rounds; ++round)
    for (int d = 0; d < 2; ++d) {
      const TrainResult r = train_once(o, work, data, dtypes[d], round);
      if (r.tokens_per_s > best[d].tokens_per_s) best[d] = r;
      if (!o.json) std::fprintf(stderr, "round %d %s: %.0f tok/s\n", round + 1, dtypes[d], r.tokens_per_s);
    }
  moe::fs::remove_all(work);
  if (o.json)
    std::printf("{\"bench\":\"train_bf16\",\"config\":\"%s\",\"steps\":%d,\"fp32_tokens_per_s\":%.1f,"
                "\"bf16_tokens_per_s\":%.1f,\"fp32_loss\":%.6g,\"bf16_loss\":%.6g}\n",
                o.config.c_str(), o.steps, best[0].tokens_per_s, best[1].tokens_per_s, best[0].last_loss,
                best[1].last_loss);
  else
    std::printf("training %s, %d steps: fp32 %.0f tok/s, bf16 %.0f tok/s (%.2fx); loss after the last step: fp32 "
                "%.4f, bf16 %.4f\n",
                o.config.c_str(), o.steps, best[0].tokens_per_s, best[1].tokens_per_s,
                best[1].tokens_per_s / best[0].tokens_per_s, best[0].last_loss, best[1].last_loss);
}

}  // namespace

int cmd_bench_bf16(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    moe::ThreadPool tp(o.threads);
    if (o.json)
      std::printf("{\"bench\":\"info_bf16\",\"threads\":%d,\"sgemm_isa\":\"%s\",\"sgemm_bf16_isa\":\"%s\"}\n",
                  o.threads, moe::cpu::sgemm_isa(), moe::cpu::sgemm_bf16_isa());
    else
      std::printf("threads %d, sgemm kernels %s, sgemm_bf16 kernels %s\n", o.threads, moe::cpu::sgemm_isa(),
                  moe::cpu::sgemm_bf16_isa());
    std::fflush(stdout);
    if (o.gemm) bench_gemm(tp, o);
    if (o.train) bench_train(o);
    if (o.packers) bench::bf16_packers(o.json);
    if (o.families) bench::gemm_families(tp, o.json);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe-engine-dev %s\n", e.what());
    return 2;
  }
}
