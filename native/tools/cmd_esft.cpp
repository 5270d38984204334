// moe-engine esft: expert-specialised fine-tuning's measurement. Runs the (frozen) model's forward over the
// first batches of a token shard and prints, as JSON, each MoE layer's per-expert shares of the gate scores and
// of the routed tokens, and the experts chosen per layer (the smallest set reaching the threshold), ready for
// the config's finetune.experts.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "args.h"
#include "commands.h"
#include "engine_handle.h"
#include "text_file.h"

namespace {

double number_flag(const cli::Args& args, const char* flag, const char* fallback) {
  const std::string text = args.get(flag, fallback);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw std::runtime_error(std::string(flag) + " " + text + ": not a number");
  return v;
}

}  // namespace

int cmd_esft(int argc, char** argv) {
  cli::Args args(argc, argv, {"--config", "--init", "--data", "--batches", "--threshold", "--score"}, {});
  const std::string config_text = args.has("--config") ? cli::read_text(args.get("--config")) : "{}";
  const std::string init = args.get("--init");
  const double batches = number_flag(args, "--batches", "32");
  if (batches < 1 || batches != static_cast<double>(static_cast<int>(batches)))
    throw std::runtime_error("--batches must be a whole number of at least 1");
  const std::string score = args.get("--score", "gate");
  if (score != "gate" && score != "tokens") throw std::runtime_error("--score " + score + ": use gate or tokens");

  cli::Engine engine(config_text, init);
  if (!init.empty()) engine.check(moe_engine_init_from(engine.get(), init.c_str()));
  moe_expert_shares_options options{};
  options.struct_size = sizeof options;
  const std::string data = args.require("--data");
  options.token_file = data.c_str();
  options.batches = static_cast<int32_t>(batches);
  options.threshold = number_flag(args, "--threshold", "0.9");
  options.score = score == "gate" ? MOE_SHARE_GATE : MOE_SHARE_TOKENS;
  const char* json = nullptr;
  engine.check(moe_engine_measure_experts(engine.get(), &options, &json));
  std::printf("%s\n", json);
  return 0;
}
