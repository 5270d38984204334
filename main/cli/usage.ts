// The CLI's help text and its usage error (exit code 2).
import { HF_EXPERT_LAYOUTS, HF_MODEL_TYPE_NAMES } from '../api/model-families'

export const USAGE = `Usage: moe-workbench <command> [options]

Commands:
  train --config C [--data FILE] [--tokenizer T] [--name N] [--steps N] [--init DIR]
        Train a run. C is a config file or a preset name (tiny, moe-s, ...). FILE is .txt, .jsonl
        or a .bin token shard (default: the bundled corpus); T a Hugging Face tokenizer.json.
  runs  List runs.
  show RUN
        A run's summary, last metrics, checkpoints and events.
  export RUN --to DIR [--step N] [--model-type ${HF_MODEL_TYPE_NAMES.join('|')}] [--bf16] [--experts ${HF_EXPERT_LAYOUTS.join('|')}] [--adapter]
        Write a checkpoint (default: the latest) as a Hugging Face checkpoint directory.
  export MODEL_DIR --to DIR [--model-type T] [--bf16] [--experts LAYOUT] [--base-model BASE]
        Write a Hugging Face model folder again (default: its own model type, f32): another dtype, expert
        layout or model type, MXFP4/FP8 weights decoded; its experts pass through a file beside DIR.
        A PEFT adapter folder is merged into its base (BASE, default the one its adapter_config.json names).
  export RUN --placement --to DIR [--last N | --from S --until S] [--vram SIZE] [--bytes-per-param X]
         [--pin-slots N] [--pin-policy previous|ema|sum]
        Write serving hints from the run's recorded expert loads (default: its last 100 steps):
        SGLang's --init-expert-location JSON, llama.cpp -ot arguments keeping the layers that serve
        the most expert traffic on a GPU of SIZE (default 8GiB), and the hot experts pinning would keep.
  chat RUN|DIR [--prompt TEXT] [--system TEXT] [--temperature T] [--top-p P] [--top-k K] [--max-tokens N]
       [--seed S] [--step N | --base] [--base-model BASE] [--tokenizer T] [--experts] [--offload host|ssd]
       [--precision fp32|bf16]
        Talk to a model folder (Hugging Face, a checkpoint, or a PEFT adapter on BASE, default the base its
        adapter_config.json names) or a run's checkpoint (default the latest; --base: the model it started
        from) with the model's chat template, streaming the answer.
        --prompt answers once; otherwise each line is a turn. --experts lists each token's experts
        per MoE layer; --offload keeps experts in the host or SSD tier (a cache of device slots);
        --precision bf16 computes the linear layers on bf16 weights (about half the memory).
  inspect DIR [--json]
        A Hugging Face model folder's card: family, layers, experts, top-k, total and active parameters,
        dtypes and shards on disk, tokenizer and chat template, and what the engine supports of it, read
        from config.json and the safetensors headers only. Exit 1 when the engine cannot import it as it is.
  resume RUN
        Continue a stopped or failed run from its newest checkpoint that verifies (skipping, and
        naming, newer ones whose files no longer match their checksums).
  verify RUN [--step N]
        Check a run's checkpoints (or the one at step N) against the checksums written with them.
  serve [--port P]
        Serve the workbench UI to a browser on 127.0.0.1 until Ctrl-C.
  demo [--quick] [--fresh] [--steps N] [--port P]
        Serve the UI and train the demo's ablation set on the bundled corpus (the tiny preset resident,
        with host and SSD offload, and with static and least-loaded placement on 4 devices under a
        routing skew; N steps each, default 60), printing the URL of Compare with the set. Finished
        runs of the set are reused (--fresh trains them anew); --quick trains the tiny preset alone.

Runs, telemetry and checkpoints live in $MOE_WORKBENCH_HOME (default ~/.moe-workbench).
Exit codes: 0 ok, 1 failure, 2 usage.`

export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}
