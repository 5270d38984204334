// moe-engine export: writes a checkpoint's weights as a Hugging Face checkpoint directory.
#include <cstdio>
#include <string>

#include "args.h"
#include "commands.h"
#include "engine_handle.h"

int cmd_export(int argc, char** argv) {
  cli::Args args(argc, argv, {"--checkpoint", "--out", "--model-type"}, {"--bf16", "--f16"});
  const std::string ckpt = args.require("--checkpoint"), out = args.require("--out");
  const std::string type = args.get("--model-type", "mixtral");
  cli::Engine engine("{\"train\": {\"seq_len\": 1, \"batch_size\": 1}}", ckpt);
  engine.check(moe_engine_init_from(engine.get(), ckpt.c_str()));
  const int dtype = args.has("--bf16") ? MOE_EXPORT_BF16 : args.has("--f16") ? MOE_EXPORT_F16 : MOE_EXPORT_F32;
  engine.check(moe_engine_export_hf(engine.get(), out.c_str(), type.c_str(), dtype));
  std::printf("exported %s as %s (%s) to %s\n", ckpt.c_str(), type.c_str(),
              dtype == MOE_EXPORT_BF16 ? "bf16" : dtype == MOE_EXPORT_F16 ? "f16" : "f32", out.c_str());
  return 0;
}
