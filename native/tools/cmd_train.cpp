// moe-engine train: runs a training job from a JSON config and a token shard, printing one progress
// line per step, appending every step record to OUT/log.jsonl and writing checkpoints into OUT
// (OUT/checkpoint-<step> every train.checkpoint_every steps, OUT/final at the end or on Ctrl-C). With the
// SSD offload tier the expert file lives in OUT/ssd unless offload.ssd_dir says otherwise.
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <string>

#include "args.h"
#include "commands.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "engine_handle.h"

namespace {

moe_engine* g_engine_for_signal = nullptr;

void on_signal(int) {
  if (g_engine_for_signal) moe_engine_request_stop(g_engine_for_signal);
}

std::string record_json(const moe_step_record& r) {
  using moe::json::Value;
  Value o = Value::make_object();
  o.set("step", Value::of(static_cast<double>(r.step)));
  o.set("loss", Value::of(r.loss));
  o.set("aux_loss", Value::of(r.aux_loss));
  o.set("lr", Value::of(r.lr));
  o.set("grad_norm", Value::of(r.grad_norm));
  o.set("tokens", Value::of(static_cast<double>(r.tokens)));
  o.set("step_ms", Value::of(r.step_ms));
  o.set("forward_ms", Value::of(r.forward_ms));
  o.set("backward_ms", Value::of(r.backward_ms));
  o.set("optimizer_ms", Value::of(r.optimizer_ms));
  // [MoE layer][expert] arrays from the record's concatenated per-expert values.
  auto per_layer = [&](const auto* values) {
    Value layers = Value::make_array();
    for (int l = 0; l < r.n_moe_layers; ++l) {
      Value layer = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) layer.push(Value::of(static_cast<int>(*values++)));
      layers.push(layer);
    }
    return layers;
  };
  o.set("expert_tokens", per_layer(r.expert_tokens));
  if (r.offloaded) {
    o.set("upload_ms", Value::of(r.upload_ms));
    o.set("upload_hidden_ms", Value::of(r.upload_hidden_ms));
    o.set("stall_ms", Value::of(r.stall_ms));
    o.set("bytes_h2d", Value::of(static_cast<double>(r.bytes_h2d)));
    o.set("bytes_d2h", Value::of(static_cast<double>(r.bytes_d2h)));
    o.set("peak_device_bytes", Value::of(static_cast<double>(r.peak_device_bytes)));
    o.set("peak_host_bytes", Value::of(static_cast<double>(r.peak_host_bytes)));
    o.set("peak_ssd_bytes", Value::of(static_cast<double>(r.peak_ssd_bytes)));
    o.set("ssd_ms", Value::of(r.ssd_ms));
    o.set("ssd_read_ms", Value::of(r.ssd_read_ms));
    o.set("bytes_ssd_read", Value::of(static_cast<double>(r.bytes_ssd_read)));
    o.set("bytes_ssd_write", Value::of(static_cast<double>(r.bytes_ssd_write)));
    o.set("cache_hits", Value::of(static_cast<double>(r.cache_hits)));
    o.set("cache_misses", Value::of(static_cast<double>(r.cache_misses)));
    o.set("prefetch_lead_ms", Value::of(r.prefetch_lead_ms));
    o.set("expert_tiers", per_layer(r.expert_tiers));
    o.set("expert_pinned", per_layer(r.expert_pinned));
  }
  if (r.n_devices > 0 && r.layer_ms) {
    Value layers = Value::make_array();
    const int32_t* device = r.expert_device;
    for (int l = 0; l < r.n_moe_layers; ++l) {
      Value p = Value::make_object();
      p.set("imbalance_before", Value::of(r.imbalance[2 * l]));
      p.set("imbalance_after", Value::of(r.imbalance[2 * l + 1]));
      Value before = Value::make_array(), after = Value::make_array();
      for (int d = 0; d < r.n_devices; ++d) {
        before.push(Value::of(static_cast<double>(r.device_loads[(2 * l) * r.n_devices + d])));
        after.push(Value::of(static_cast<double>(r.device_loads[(2 * l + 1) * r.n_devices + d])));
      }
      p.set("device_tokens_before", before);
      p.set("device_tokens_after", after);
      p.set("spilled_tokens", Value::of(static_cast<double>(r.spilled_tokens[l])));
      p.set("moved_experts", Value::of(r.moved_experts[l]));
      Value map = Value::make_array();
      for (int e = 0; e < r.experts_per_layer[l]; ++e) map.push(Value::of(*device++));
      p.set("expert_device", map);
      Value busy = Value::make_array();
      for (int d = 0; d < r.n_devices; ++d) busy.push(Value::of(r.device_busy_ms[l * r.n_devices + d]));
      p.set("device_busy_ms", busy);
      p.set("critical_ms", Value::of(r.layer_ms[3 * l]));
      p.set("wall_ms", Value::of(r.layer_ms[3 * l + 1]));
      p.set("predicted_ms", Value::of(r.layer_ms[3 * l + 2]));
      p.set("token_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l])));
      p.set("weight_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l + 1])));
      p.set("offload_bytes", Value::of(static_cast<double>(r.layer_bytes[3 * l + 2])));
      p.set("partitions", Value::of(r.layer_pipeline[2 * l]));
      p.set("reuse_strategy", Value::of(r.layer_pipeline[2 * l + 1]));
      layers.push(p);
    }
    o.set("placement", layers);
    Value peaks = Value::make_array();
    for (int d = 0; d < r.n_devices; ++d) peaks.push(Value::of(static_cast<double>(r.device_peak_bytes[d])));
    o.set("device_peak_bytes", peaks);
  }
  return moe::json::dump(o);
}

// A run directory given to --resume means its newest checkpoint.
std::string resolve_checkpoint(const std::string& dir) {
  if (moe::fs::exists(moe::fs::join(dir, "trainer_state.json"))) return dir;
  std::string best;
  int64_t best_step = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string state = moe::fs::join(entry.path().string(), "trainer_state.json");
    if (!moe::fs::exists(state)) continue;
    moe::json::Value v = moe::json::parse(moe::fs::read_file(state, 1 << 20), state);
    const moe::json::Value* step = v.find("step");
    if (step && step->is_number() && step->number > best_step) {
      best_step = static_cast<int64_t>(step->number);
      best = entry.path().string();
    }
  }
  if (best.empty()) throw std::runtime_error(dir + ": no checkpoint (trainer_state.json) found to resume from");
  return best;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  cli::Args args(argc, argv, {"--config", "--data", "--out", "--init", "--resume", "--steps"}, {"--quiet"});
  const std::string out = args.require("--out");
  std::string config_text = moe::fs::read_file(args.require("--config"), 16 << 20);
  {
    moe::json::Value cfg = moe::json::parse(config_text, args.get("--config"));
    if (args.has("--steps")) {
      moe::json::Value train = cfg.find("train") ? *cfg.find("train") : moe::json::Value::make_object();
      train.set("steps", moe::json::Value::of(std::stod(args.get("--steps"))));
      cfg.set("train", train);
    }
    // The SSD tier's expert file goes into the run directory unless the config names a place.
    const moe::json::Value* offload = cfg.find("offload");
    if (offload && offload->is_object() && offload->find("mode") && offload->find("mode")->string == "ssd" &&
        (!offload->find("ssd_dir") || offload->find("ssd_dir")->is_null())) {
      moe::json::Value o = *offload;
      o.set("ssd_dir", moe::json::Value::of(moe::fs::join(out, "ssd")));
      cfg.set("offload", o);
    }
    config_text = moe::json::dump(cfg);
  }
  if (args.has("--init") && args.has("--resume")) throw std::runtime_error("use either --init or --resume, not both");
  const std::string resume = args.has("--resume") ? resolve_checkpoint(args.get("--resume")) : "";
  const std::string source = args.has("--init") ? args.get("--init") : resume;

  cli::Engine engine(config_text, source);
  if (args.has("--init")) engine.check(moe_engine_init_from(engine.get(), args.get("--init").c_str()));
  if (!resume.empty()) engine.check(moe_engine_resume_from(engine.get(), resume.c_str()));
  engine.check(moe_engine_set_data(engine.get(), args.require("--data").c_str()));

  moe::fs::mkdirs(out);
  moe::fs::write_file_atomic(moe::fs::join(out, "config.json"), moe_engine_config_json(engine.get()));
  const moe::json::Value cfg = moe::json::parse(moe_engine_config_json(engine.get()), "config");
  const int total = static_cast<int>(cfg.find("train")->find("steps")->number);
  const int every = static_cast<int>(cfg.find("train")->find("checkpoint_every")->number);
  std::ofstream log(moe::fs::join(out, "log.jsonl"), std::ios::app);
  const bool quiet = args.has("--quiet");
  if (!quiet)
    std::printf("moe-engine train: %lld parameters, backend %s, steps %lld -> %d\n",
                static_cast<long long>(moe_engine_num_params(engine.get())), moe_engine_backend_description(engine.get()),
                static_cast<long long>(moe_engine_step_count(engine.get())), total);

  g_engine_for_signal = engine.get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  moe_step_record r{};
  int status = MOE_OK;
  while ((status = engine.check(moe_engine_step(engine.get(), &r))) == MOE_OK) {
    log << record_json(r) << '\n';
    log.flush();
    if (!quiet) {
      std::printf("step %lld/%d | loss %.4f | aux %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | %.0f ms",
                  static_cast<long long>(r.step), total, r.loss, r.aux_loss, r.lr, r.grad_norm,
                  r.tokens / (r.step_ms / 1000.0), r.step_ms);
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
    if (every > 0 && r.step % every == 0 && r.step < total) {
      std::string dir = moe::fs::join(out, "checkpoint-" + std::to_string(r.step));
      engine.check(moe_engine_save_checkpoint(engine.get(), dir.c_str()));
    }
  }
  g_engine_for_signal = nullptr;
  engine.check(moe_engine_save_checkpoint(engine.get(), moe::fs::join(out, "final").c_str()));
  if (!quiet) std::printf("saved %s\n", moe::fs::join(out, "final").c_str());
  return status == MOE_STOPPED ? 130 : 0;
}
