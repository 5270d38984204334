// moe-engine generate: greedy or sampled tokens from a model folder (ours, Hugging Face, or a PEFT adapter's on its
// base: --base-model, else the one its adapter_config.json names)
// through a generation session with no engine (moe_generation_open), as JSON: each token, the experts each MoE
// layer chose for the position it was sampled from, and the expert slots' misses and hits. Token ids in, token
// ids out: tokenizing is the workbench's. With the wall times of the open, the prefill and the mean decode step, and
// the process's resident memory with the session open and at its peak.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "json_out.h"
#include "moe_engine.h"
#include "text_file.h"

namespace {

// A "Name:   123 kB" line of /proc/self/status, in KiB; -1 where there is none.
double status_kib(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kib = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0) kib = std::atof(line + n);
  std::fclose(f);
  return kib;
}

std::vector<int32_t> token_list(const std::string& text) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      throw std::runtime_error("--tokens: '" + item + "' is not a token id (comma-separated non-negative integers)");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw std::runtime_error("--tokens: no token ids");
  return out;
}

int32_t home_of(const std::string& name) {
  if (name == "resident") return MOE_EXPERTS_RESIDENT;
  if (name == "host") return MOE_EXPERTS_HOST;
  if (name == "ssd") return MOE_EXPERTS_SSD;
  throw std::runtime_error("--experts " + name + ": use resident, host or ssd");
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  cli::Args args(argc, argv,
                 {"--model", "--tokens", "--max-tokens", "--experts", "--config", "--temperature", "--top-k", "--top-p",
                  "--seed", "--expert-slots", "--cache-experts", "--ssd-dir", "--base-model"},
                 {});
  const std::string model = args.require("--model");
  const std::vector<int32_t> prompt = token_list(args.require("--tokens"));
  const int max_tokens = std::stoi(args.get("--max-tokens", "16"));
  if (max_tokens < 1) throw std::runtime_error("--max-tokens must be at least 1");
  const std::string config = args.has("--config") ? cli::read_text(args.get("--config")) : "";
  const std::string ssd_dir = args.get("--ssd-dir"), base_dir = args.get("--base-model");
  moe_generate_options o{};
  o.struct_size = sizeof o;
  o.temperature = std::stod(args.get("--temperature", "0"));
  o.top_k = std::stoi(args.get("--top-k", "0"));
  o.top_p = std::stod(args.get("--top-p", "1"));
  o.seed = std::stoull(args.get("--seed", "0"));
  o.expert_home = home_of(args.get("--experts", "resident"));
  o.expert_slots = std::stoi(args.get("--expert-slots", "0"));
  o.cache_experts = std::stoi(args.get("--cache-experts", "0"));
  o.ssd_dir = ssd_dir.empty() ? nullptr : ssd_dir.c_str();
  o.base_dir = base_dir.empty() ? nullptr : base_dir.c_str();
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const Clock::time_point started = Clock::now();
  char err[4096] = {0};
  moe_generation* g = moe_generation_open(model.c_str(), config.empty() ? nullptr : config.c_str(), &o, err, sizeof err);
  if (!g) throw std::runtime_error(err);
  auto fail = [&](const std::string& what) {
    const std::string message = what + ": " + moe_generation_last_error(g);
    moe_generation_destroy(g);
    throw std::runtime_error(message);
  };
  const Clock::time_point opened = Clock::now();
  if (moe_generation_feed(g, prompt.data(), static_cast<int32_t>(prompt.size())) != MOE_OK) fail("feed");
  const Clock::time_point prefilled = Clock::now();
  Clock::time_point first = prefilled;  // after the first token, sampled from the prefill's logits
  int decoded = 0;                      // tokens after it: each feeds the one before it as a new position
  using cli::json::Value;
  Value tokens = Value::make_array(), experts = Value::make_array(), layers = Value::make_array();
  for (int i = 0; i < max_tokens; ++i) {
    moe_generated_token t{};
    t.struct_size = sizeof t;
    const int status = moe_generation_step(g, &t);
    if (status == MOE_FINISHED) break;
    if (status != MOE_OK) fail("step");
    tokens.push(Value::of(t.token));
    if (i == 0) first = Clock::now();
    else ++decoded;
    Value chosen = Value::make_array();
    for (int m = 0; m < t.moe_layers; ++m) {
      Value layer = Value::make_array();
      for (int k = 0; k < t.top_k; ++k) layer.push(Value::of(t.experts[m * t.top_k + k]));
      chosen.push(std::move(layer));
      if (i == 0) layers.push(Value::of(t.layers[m]));
    }
    experts.push(std::move(chosen));
  }
  const Clock::time_point done = Clock::now();
  int64_t misses = 0, hits = 0, bytes = 0;
  moe_generation_expert_stats(g, &misses, &hits, &bytes);
  // The process's memory with the session open, and its peak, where the OS reports them.
  const double resident_kib = status_kib("VmRSS:"), peak_kib = status_kib("VmHWM:");
  moe_generation_destroy(g);
  Value out = Value::make_object();
  out.set("tokens", std::move(tokens));
  out.set("layers", std::move(layers));
  out.set("experts", std::move(experts));
  out.set("misses", Value::of(static_cast<double>(misses)));
  out.set("hits", Value::of(static_cast<double>(hits)));
  out.set("bytes_uploaded", Value::of(static_cast<double>(bytes)));
  // Wall times: the session's opening (the folder's load), the prompt's prefill, and the mean decode step (with
  // at least two tokens).
  out.set("open_ms", Value::of(ms(started, opened)));
  out.set("prefill_ms", Value::of(ms(opened, prefilled)));
  if (decoded > 0) out.set("decode_ms_per_token", Value::of(ms(first, done) / decoded));
  if (resident_kib >= 0) out.set("resident_mb", Value::of(resident_kib / 1024.0));
  if (peak_kib >= 0) out.set("peak_resident_mb", Value::of(peak_kib / 1024.0));
  std::printf("%s\n", cli::json::dump(out).c_str());
  return 0;
}
