// moe-engine train: runs a training job from a JSON config and a token shard through the engine's training
// loop (moe_engine_train), printing one progress line per step and appending every step record to
// OUT/log.jsonl. The engine writes the checkpoints into OUT: OUT/checkpoint-<step> every
// train.checkpoint_every steps and at the end (or on Ctrl-C); with the SSD offload tier its expert file
// lives in OUT/ssd unless offload.ssd_dir says otherwise.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "args.h"
#include "commands.h"
#include "engine_handle.h"
#include "step_record_json.h"
#include "text_file.h"

namespace {

moe_engine* g_engine_for_signal = nullptr;

void on_signal(int) {
  if (g_engine_for_signal) moe_engine_request_stop(g_engine_for_signal);
}

namespace fs = std::filesystem;

// A run killed while writing a step's line leaves part of it: the resumed run appends after the last whole line.
void drop_partial_line(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.back() == '\n') return;
  const size_t keep = text.rfind('\n');
  std::error_code ec;
  fs::resize_file(path, keep == std::string::npos ? 0 : keep + 1, ec);
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
  fs::rename(tmp, path);
}

// A run directory given to --resume means its newest checkpoint-<step>.
std::string resolve_checkpoint(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "trainer_state.json")) return dir;
  std::string best;
  long long best_step = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint-", 0) != 0 || !fs::exists(entry.path() / "trainer_state.json")) continue;
    char* end = nullptr;
    const long long step = std::strtoll(name.c_str() + 11, &end, 10);
    if (*end == '\0' && step > best_step) {
      best_step = step;
      best = entry.path().string();
    }
  }
  if (best.empty()) throw std::runtime_error(dir + ": no checkpoint-<step> with a trainer_state.json to resume from");
  return best;
}

struct Progress {
  moe_engine* engine = nullptr;
  std::ofstream log;
  bool quiet = false;
  std::string error;

  static int on_event(const moe_train_event* e, void* user) {
    auto& self = *static_cast<Progress*>(user);
    if (e->kind == MOE_TRAIN_STEP) self.step(*e->record, e->last_step);
    if (e->kind == MOE_TRAIN_CHECKPOINT && !self.quiet) std::printf("saved %s\n", e->checkpoint_dir);
    if (e->kind == MOE_TRAIN_DONE && e->error) self.error = e->error;
    if (e->kind == MOE_TRAIN_NONFINITE) {
      std::fprintf(stderr, "diverged at %s\n", e->error);
      // Nothing here could resume a paused run: a pause ends it (with a checkpoint only if the weights are finite).
      if (self.engine && std::string(e->error).find("; paused (") != std::string::npos) {
        std::fprintf(stderr, "stopping: this command cannot resume a paused run\n");
        moe_engine_request_stop(self.engine);
      }
    }
    return 0;
  }

  void step(const moe_step_record& r, int64_t last_step) {
    log << moe_cli::record_json(r) << '\n';
    log.flush();
    if (quiet) return;
    std::printf("step %lld/%lld | loss %.4f | aux %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | %.0f ms",
                static_cast<long long>(r.step), static_cast<long long>(last_step), r.loss, r.aux_loss, r.lr,
                r.grad_norm, r.tokens / (r.step_ms / 1000.0), r.step_ms);
    if (r.offloaded)
      std::printf(" | up %.1f ms (%.1f hidden) stall %.1f ms | h2d %.1f MB d2h %.1f MB", r.upload_ms,
                  r.upload_hidden_ms, r.stall_ms, r.bytes_h2d / 1e6, r.bytes_d2h / 1e6);
    if (r.bytes_ssd_read || r.bytes_ssd_write)
      std::printf(" | ssd %.1f MB in %.1f MB out %.1f ms, cache %lld hit %lld miss", r.bytes_ssd_read / 1e6,
                  r.bytes_ssd_write / 1e6, r.ssd_ms, static_cast<long long>(r.cache_hits),
                  static_cast<long long>(r.cache_misses));
    std::printf("\n");
    std::fflush(stdout);
  }
};

}  // namespace

int cmd_train(int argc, char** argv) {
  cli::Args args(argc, argv, {"--config", "--data", "--out", "--init", "--adapter", "--resume", "--steps"},
                 {"--quiet"});
  const std::string out = args.require("--out");
  std::string config_text = cli::read_text(args.require("--config"));
  if (args.has("--init") && args.has("--resume")) throw std::runtime_error("use either --init or --resume, not both");
  const long long steps = args.has("--steps") ? std::stoll(args.get("--steps")) : 0;
  if (steps < 0) throw std::runtime_error("--steps must be 0 or more");
  const std::string resume = args.has("--resume") ? resolve_checkpoint(args.get("--resume")) : "";
  const std::string source = args.has("--init") ? args.get("--init") : resume;
  // A new run never writes over another's checkpoints or into its log; a resume continues the run it names.
  std::error_code listing;
  if (resume.empty() && fs::exists(out) && !fs::is_empty(out, listing))
    throw std::runtime_error("--out " + out + ": already holds files (another run's checkpoints or log?); a new run "
                             "never writes over them: choose a new directory, or --resume " + out +
                             " to continue the run there");

  // ESFT without a chosen set: measure the experts on the init weights over the run's data first, and train
  // what was chosen (a resumed run's checkpoint already holds its set).
  std::string shares;
  if (resume.empty()) {
    const std::string data = args.require("--data");
    moe_esft_options esft{};
    esft.struct_size = sizeof esft;
    esft.config_json = config_text.c_str();
    esft.init_dir = args.has("--init") ? source.c_str() : nullptr;
    esft.token_file = data.c_str();
    esft.score = MOE_SHARE_CONFIG;
    const char* measured_config = nullptr;
    const char* measured = nullptr;
    char err[4096];
    const int status = moe_esft_measure(&esft, &measured_config, &measured, err, sizeof err);
    if (status == MOE_ERROR) throw std::runtime_error(err);
    if (status == MOE_OK) {
      config_text = measured_config;
      shares = measured;
    }
  }

  // The folder the run starts from or resumes is loaded as the engine opens.
  if (args.has("--adapter") && !args.has("--init")) throw std::runtime_error("--adapter needs --init (the base model)");
  cli::Engine engine(config_text, source, out, resume.empty() ? args.get("--init", "") : resume, !resume.empty());
  // A PEFT adapter over the base: continue a LoRA run's adapters (the config's finetune section must match).
  if (args.has("--adapter")) engine.check(moe_engine_init_from(engine.get(), args.get("--adapter").c_str()));
  engine.check(moe_engine_set_data(engine.get(), args.require("--data").c_str()));

  fs::create_directories(out);
  write_text_atomic(fs::path(out) / "config.json", moe_engine_config_json(engine.get()));
  if (!shares.empty()) {
    write_text_atomic(fs::path(out) / "expert_shares.json", shares + "\n");
    if (!args.has("--quiet"))
      std::printf("esft: measured the experts; the chosen set is in %s (finetune.experts), the shares in %s\n",
                  (fs::path(out) / "config.json").string().c_str(), (fs::path(out) / "expert_shares.json").string().c_str());
  }
  Progress progress;
  progress.engine = engine.get();
  drop_partial_line(fs::path(out) / "log.jsonl");
  progress.log.open(fs::path(out) / "log.jsonl", std::ios::app);
  progress.quiet = args.has("--quiet");
  if (!progress.quiet)
    std::printf("moe-engine train: %lld parameters, backend %s, from step %lld\n",
                static_cast<long long>(moe_engine_num_params(engine.get())), moe_engine_backend_description(engine.get()),
                static_cast<long long>(moe_engine_step_count(engine.get())));

  g_engine_for_signal = engine.get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  moe_train_options options{};
  options.struct_size = sizeof options;
  options.total_steps = steps;
  const int status = moe_engine_train(engine.get(), &options, &Progress::on_event, &progress);
  g_engine_for_signal = nullptr;
  if (status == MOE_ERROR) throw std::runtime_error(progress.error.empty() ? moe_engine_last_error(engine.get()) : progress.error);
  return status == MOE_STOPPED ? 130 : 0;
}
