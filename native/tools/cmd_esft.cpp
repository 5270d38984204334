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
  // Left out: the config's finetune.esft (else 32 batches, 0.9, gate).
  const double batches = args.has("--batches") ? number_flag(args, "--batches", "32") : 0;
  if (args.has("--batches") && (batches < 1 || batches != static_cast<double>(static_cast<int>(batches))))
    throw std::runtime_error("--batches must be a whole number of at least 1");
  const std::string score = args.get("--score", "config");
  if (args.has("--score") && score != "gate" && score != "tokens")
    throw std::runtime_error("--score " + score + ": use gate or tokens");

  const std::string data = args.require("--data");
  moe_esft_options options{};
  options.struct_size = sizeof options;
  options.config_json = config_text.c_str();
  options.init_dir = init.empty() ? nullptr : init.c_str();
  options.token_file = data.c_str();
  options.batches = static_cast<int32_t>(batches);
  options.threshold = args.has("--threshold") ? number_flag(args, "--threshold", "0.9") : 0;
  if (args.has("--threshold") && !(options.threshold > 0 && options.threshold <= 1))
    throw std::runtime_error("--threshold must be in (0, 1]");
  options.score = score == "gate"     ? static_cast<int32_t>(MOE_SHARE_GATE)
                  : score == "tokens" ? static_cast<int32_t>(MOE_SHARE_TOKENS)
                                      : static_cast<int32_t>(MOE_SHARE_CONFIG);
  options.always = 1;
  const char* config_out = nullptr;
  const char* shares = nullptr;
  char err[4096];
  if (moe_esft_measure(&options, &config_out, &shares, err, sizeof err) == MOE_ERROR) throw std::runtime_error(err);
  std::printf("%s\n", shares);
  return 0;
}
