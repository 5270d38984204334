// moe-engine: train and export from the command line, through the engine's C API only (no Node needed,
// e.g. on a GPU server). The tools that need the engine's internals are moe-engine-dev.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: moe-engine <command> [options]\n"
               "  train    --config C.json --data TOKENS.bin --out DIR [--init CKPT | --resume CKPT] [--steps N] [--quiet]\n"
               "  export   --checkpoint CKPT --out DIR [--model-type mixtral|qwen2_moe|olmoe] [--bf16]\n"
               "forward passes, tokenizing, benchmarks and the self-test: moe-engine-dev\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "train") return cmd_train(argc - 1, argv + 1);
    if (cmd == "export") return cmd_export(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe-engine %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "moe-engine: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
