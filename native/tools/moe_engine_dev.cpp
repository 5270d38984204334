// moe-engine-dev: the developer tools that need the engine's internals (they link moe_engine_internal):
// forward passes and gradients to files (the PyTorch reference check), tokenizing, kernel benchmarks and the
// whole-model gradient check. Training and export are the moe-engine CLI.
#include "commands.h"
#include "run_command.h"

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: moe-engine-dev <command> [options]\n"
      "  forward  --checkpoint CKPT --tokens IDS.safetensors --out DIR [--grads] [--threads N]\n"
      "           [--finetune F.json --adapter PEFT_DIR]\n"
      "  tokenize (--bytes IN.txt | --jsonl IN.jsonl) --out TOKENS.bin\n"
      "  bench    [--threads N] [--gemm] [--adamw] [--stream] [--json]\n"
      "  bench    --bf16 [--gemm] [--train] [--threads N] [--steps N] [--rounds N] [--config C.json] [--json]\n"
      "  bench    --layer --C N --E N --F N --K N [--shared-F N] [--tokens N] [--dtype fp32|bf16|fp32,bf16] [--gemm]\n"
      "           [--no-optimizer] [--lora R] [--steps N] [--threads N] [--json]\n"
      "  bench    --backend NAME --gemm [--shapes T×I×O,...] [--json]\n"
      "  selftest [--backend cpu|cuda] [--threads N] [--gemm own|cublas|auto]\n";
  static const Command commands[] = {
      {"forward", cmd_forward}, {"tokenize", cmd_tokenize}, {"bench", cmd_bench}, {"selftest", cmd_selftest}};
  return run_command("moe-engine-dev", usage, commands, argc, argv);
}
