// moe-engine: train, export and generate from the command line, through the engine's C API only (no Node needed,
// e.g. on a GPU server). The tools that need the engine's internals are moe-engine-dev.
#include "commands.h"
#include "run_command.h"

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: moe-engine <command> [options]\n"
      "  train    --config C.json --data TOKENS.bin --out DIR [--init CKPT [--adapter PEFT_DIR] | --resume CKPT]\n"
      "           [--steps N] [--quiet]   (DIR new or empty, unless --resume continues the run in it)\n"
      "  export   --checkpoint CKPT --out DIR [--model-type mixtral|qwen2_moe|olmoe|qwen3_moe|gpt_oss] [--bf16|--f16]\n"
      "           [--experts per-expert|fused] [--adapter (a LoRA run's PEFT adapter) | --merged (default)]\n"
      "           [--base-model DIR]   (the adapter's base: an adapter export names it; a PEFT adapter folder as\n"
      "           CKPT merges into it, default the one its adapter_config.json names)\n"
      "  esft     --data TOKENS.bin [--config C.json] [--init CKPT] [--batches N] [--threshold P] [--score gate|tokens]\n"
      "           (expert shares per layer and the chosen experts, as JSON)\n"
      "  inspect  DIR   a Hugging Face model folder as the import sees it (JSON; headers only, no weights read)\n"
      "  generate --model DIR --tokens 1,2,3 [--max-tokens N] [--experts resident|host|ssd] [--config C.json]\n"
      "           [--temperature T] [--top-k K] [--top-p P] [--seed S] [--expert-slots N] [--cache-experts N]\n"
      "           [--ssd-dir DIR] [--base-model DIR]   tokens from a model folder (or a PEFT adapter's on its base),\n"
      "           with no engine (JSON: tokens, experts, slot misses)\n"
      "forward passes, tokenizing, benchmarks and the self-test: moe-engine-dev\n";
  static const Command commands[] = {{"train", cmd_train}, {"export", cmd_export}, {"esft", cmd_esft}, {"inspect", cmd_inspect},
                                     {"generate", cmd_generate}};
  return run_command("moe-engine", usage, commands, argc, argv);
}
