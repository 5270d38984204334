#!/usr/bin/python3
"""Training throughput of a preset, the engine against PyTorch eager, measured side by side in one run.

    /usr/bin/python3 test/bench/train_throughput.py --cli native/build/moe-engine [--config resources/presets/tiny.json]
        [--threads 2] [--steps 8] [--rounds 2] [--precision fp32|bf16]

Ours: `moe-engine train` on the bundled corpus with train.compute_dtype = --precision, tokens/s = tokens / step time,
median over the steps after the first two.
PyTorch: test/reference/torch_train_bench.py on the same config, at its strongest on this machine (OpenMP OpenBLAS,
tcmalloc preloaded, torch.set_num_threads): in fp32, and for --precision bf16 also with its forward under bf16 autocast,
PyTorch's own mixed precision. The setups alternate for `rounds` rounds (the machine's speed drifts) and each keeps its
best round. Prints a table and one JSON line {"precision": ..., "ours": ..., "torch": {setup: ...}, "ratio": {setup: ...}}.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TORCH_ENV = {
    "LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/openblas-openmp",
    "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
}


def ours_tokens_per_s(cli, config, tokens, threads, steps, precision, work):
    with open(config) as f:
        cfg = json.load(f)
    cfg["train"]["threads"] = threads
    cfg["train"]["compute_dtype"] = precision
    cfg["train"]["checkpoint_every"] = 0
    cfg["train"]["steps"] = steps
    cfg_path = os.path.join(work, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    out = tempfile.mkdtemp(dir=work)
    subprocess.run([cli, "train", "--config", cfg_path, "--data", tokens, "--out", out, "--quiet"],
                   check=True)
    with open(os.path.join(out, "log.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return statistics.median(r["tokens"] / (r["step_ms"] / 1000.0) for r in records[2:])


def torch_tokens_per_s(config, threads, steps, setup):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **TORCH_ENV)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    script = os.path.join(ROOT, "test", "reference", "torch_train_bench.py")
    # A bounded time per run keeps the bench within minutes where a setup is slow (bf16 autocast without bf16 units).
    argv = ["/usr/bin/python3", script, config, "--threads", str(threads), "--warmup", "2", "--steps", str(steps),
            "--max-seconds", "60"]
    if setup == "bf16_autocast":
        argv.append("--autocast-bf16")
    run = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return json.loads(run.stdout.strip().splitlines()[-1])["tokens_per_s"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--config", default=os.path.join(ROOT, "resources", "presets", "tiny.json"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="our train.compute_dtype")
    parser.add_argument("--dev-cli", help="moe-engine-dev (for tokenize); default: beside --cli")
    args = parser.parse_args()
    dev_cli = args.dev_cli or os.path.join(os.path.dirname(os.path.abspath(args.cli)), "moe-engine-dev")
    setups = ["fp32"] + (["bf16_autocast"] if args.precision == "bf16" else [])
    with tempfile.TemporaryDirectory() as work:
        tokens = os.path.join(work, "corpus.bin")
        subprocess.run([dev_cli, "tokenize", "--bytes", os.path.join(ROOT, "resources", "corpus", "python-tutorial.txt"),
                        "--out", tokens], check=True, capture_output=True)
        ours, theirs = [], {setup: [] for setup in setups}
        for r in range(args.rounds):
            ours.append(ours_tokens_per_s(args.cli, args.config, tokens, args.threads, args.steps, args.precision, work))
            line = f"round {r + 1}: ours {args.precision} {ours[-1]:8.0f} tok/s"
            for setup in setups:
                theirs[setup].append(torch_tokens_per_s(args.config, args.threads, args.steps, setup))
                line += f"   pytorch {setup} {theirs[setup][-1]:8.0f} tok/s"
            print(line, file=sys.stderr)
    best_ours = max(ours)
    best_torch = {setup: max(runs) for setup, runs in theirs.items()}
    ratio = {setup: best_ours / best for setup, best in best_torch.items()}
    summary = ", ".join(f"PyTorch eager {setup} {best_torch[setup]:.0f} tok/s (ratio {ratio[setup]:.2f})"
                        for setup in setups)
    print(f"training {os.path.basename(args.config)}: ours {args.precision} {best_ours:.0f} tok/s; {summary}; "
          f"PyTorch on OpenMP OpenBLAS, tcmalloc, {args.threads} threads", file=sys.stderr)
    print(json.dumps({"precision": args.precision, "ours": best_ours, "torch": best_torch, "ratio": ratio}))


if __name__ == "__main__":
    main()
