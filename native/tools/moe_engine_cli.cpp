// moe-engine: train, run forward passes, export, tokenize, benchmark and self-test from the command
// line, through the engine's C API (no Node needed, e.g. on a GPU server).
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
               "  forward  --checkpoint CKPT --tokens IDS.safetensors --out DIR [--grads] [--threads N]\n"
               "  export   --checkpoint CKPT --out DIR [--model-type mixtral|qwen2_moe|olmoe] [--bf16]\n"
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
    if (cmd == "train") return cmd_train(argc - 1, argv + 1);
    if (cmd == "forward") return cmd_forward(argc - 1, argv + 1);
    if (cmd == "export") return cmd_export(argc - 1, argv + 1);
    if (cmd == "tokenize") return cmd_tokenize(argc - 1, argv + 1);
    if (cmd == "bench") return cmd_bench(argc - 1, argv + 1);
    if (cmd == "selftest") return cmd_selftest(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe-engine %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "moe-engine: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
