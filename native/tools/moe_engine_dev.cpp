// moe-engine-dev: the developer tools that need the engine's internals (they link moe_engine_internal):
// forward passes and gradients to files (the PyTorch reference check), tokenizing, kernel benchmarks and the
// whole-model gradient check. Training and export are the moe-engine CLI.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: moe-engine-dev <command> [options]\n"
               "  forward  --checkpoint CKPT --tokens IDS.safetensors --out DIR [--grads] [--threads N]\n"
               "  tokenize (--bytes IN.txt | --jsonl IN.jsonl) --out TOKENS.bin\n"
               "  bench    [--threads N] [--gemm] [--adamw] [--stream] [--json]\n"
               "  bench    --bf16 [--gemm] [--train] [--threads N] [--steps N] [--rounds N] [--config C.json] [--json]\n"
               "  selftest [--backend cpu|cuda]\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "forward") return cmd_forward(argc - 1, argv + 1);
    if (cmd == "tokenize") return cmd_tokenize(argc - 1, argv + 1);
    if (cmd == "bench") return cmd_bench(argc - 1, argv + 1);
    if (cmd == "selftest") return cmd_selftest(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe-engine-dev %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "moe-engine-dev: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
