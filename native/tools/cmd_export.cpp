// moe-engine export: writes a checkpoint's weights as a Hugging Face checkpoint directory (a LoRA run's adapters
// merged, or --adapter: its PEFT adapter directory); one of our checkpoints streams from its file a tensor at a time.
// A PEFT adapter folder as --checkpoint is merged into its base (--base-model, else the one it names).
#include <cstdio>
#include <stdexcept>
#include <string>

#include "args.h"
#include "commands.h"
#include "moe_engine.h"

int cmd_export(int argc, char** argv) {
  cli::Args args(argc, argv, {"--checkpoint", "--out", "--model-type", "--experts", "--base-model"},
                 {"--bf16", "--f16", "--adapter", "--merged"});
  const std::string ckpt = args.require("--checkpoint"), out = args.require("--out");
  const std::string type = args.get("--model-type", "mixtral");
  const int dtype = args.has("--bf16") ? MOE_EXPORT_BF16 : args.has("--f16") ? MOE_EXPORT_F16 : MOE_EXPORT_F32;
  const std::string experts = args.get("--experts", "default");
  moe_export_options options{};
  options.struct_size = sizeof options;
  options.dtype = dtype;
  if (experts == "per-expert") options.expert_layout = MOE_EXPERTS_PER_EXPERT;
  else if (experts == "fused") options.expert_layout = MOE_EXPERTS_FUSED;
  else if (experts != "default") {
    std::fprintf(stderr, "export: --experts %s: use per-expert, fused or default\n", experts.c_str());
    return 2;
  }
  if (args.has("--adapter") && args.has("--merged")) {
    std::fprintf(stderr, "export: use either --adapter (the PEFT adapter) or --merged (the whole model), not both\n");
    return 2;
  }
  const bool adapter = args.has("--adapter");
  if (adapter) options.format = MOE_EXPORT_ADAPTER;
  // The adapter's base: named by an adapter export; a PEFT adapter folder as --checkpoint merges into it.
  const std::string base = args.get("--base-model");
  if (!base.empty()) options.base_dir = base.c_str();
  // Ours streams from its file a tensor at a time; a Hugging Face folder streams its experts through a file beside out.
  char err[4096] = {0};
  if (moe_export_checkpoint(ckpt.c_str(), out.c_str(), type.c_str(), &options, err, sizeof err) != MOE_OK)
    throw std::runtime_error(err);
  if (adapter) {
    std::printf("exported the LoRA adapter of %s for %s (PEFT, f32) to %s\n", ckpt.c_str(), type.c_str(), out.c_str());
    return 0;
  }
  // Said plainly, because a gpt-oss checkpoint may have come in as MXFP4: what goes out is never quantized.
  std::printf("exported %s as %s (%s, %s experts, no quantization) to %s\n", ckpt.c_str(), type.c_str(),
              dtype == MOE_EXPORT_BF16 ? "bf16" : dtype == MOE_EXPORT_F16 ? "f16" : "f32", experts.c_str(),
              out.c_str());
  return 0;
}
