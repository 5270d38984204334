#!/usr/bin/env python3
"""The CUDA backend against cuBLAS and against the CPU backend, on the machine it runs on.

    python3 test/bench/cuda/bench.py --build native/build-gpu [--steps 8]

1. GEMM: `moe-engine-dev bench --backend cuda --gemm --json` (our fp32 SIMT and bf16 WMMA kernels through the
   backend) and torch.matmul (cuBLAS) on the same shapes, fp32 with TF32 off and bf16; ratio = ours / cuBLAS
   GFLOP/s, geometric mean over the shapes.
2. Training: tokens/s of the tiny preset through `moe-engine train`, train.backend cuda against cpu (median step
   after the first two).
Prints one table per part and, last, `BENCH cuda gemm_bf16_vs_cublas=R gemm_fp32_vs_cublas=R tiny_tokens_per_s=X
tiny_cpu_tokens_per_s=Y tiny_cuda_vs_cpu=Z`.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def ours_gemm(dev_cli):
    run = subprocess.run([dev_cli, "bench", "--backend", "cuda", "--gemm", "--json"], check=True,
                         capture_output=True, text=True)
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def cublas_gflops(tokens, n_in, n_out, dtype):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.rand(tokens, n_in, device="cuda", dtype=dtype) * 2 - 1
    w = torch.rand(n_out, n_in, device="cuda", dtype=dtype) * 2 - 1
    for _ in range(3):
        torch.matmul(x, w.t())
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(x, w.t())
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return 2.0 * tokens * n_in * n_out / statistics.median(times) / 1e9


def tiny_tokens_per_s(cli, dev_cli, backend, steps, work):
    with open(os.path.join(ROOT, "resources", "presets", "tiny.json")) as f:
        cfg = json.load(f)
    cfg["train"].update({"backend": backend, "steps": steps, "checkpoint_every": 0, "threads": os.cpu_count() or 2})
    cfg.pop("offload", None)
    cfg_path = os.path.join(work, f"tiny-{backend}.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    tokens = os.path.join(work, "corpus.bin")
    if not os.path.exists(tokens):
        subprocess.run([dev_cli, "tokenize", "--bytes", os.path.join(ROOT, "resources", "corpus", "python-tutorial.txt"),
                        "--out", tokens], check=True, capture_output=True)
    out = tempfile.mkdtemp(dir=work)
    subprocess.run([cli, "train", "--config", cfg_path, "--data", tokens, "--out", out, "--quiet"], check=True)
    with open(os.path.join(out, "log.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return statistics.median(r["tokens"] / (r["step_ms"] / 1000.0) for r in records[2:])


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True, help="the CUDA build directory (moe-engine, moe-engine-dev)")
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    cli, dev_cli = os.path.join(a.build, "moe-engine"), os.path.join(a.build, "moe-engine-dev")
    import torch
    ratios_fp32, ratios_bf16 = [], []
    print(f"{'shape':16} {'ours fp32':>10} {'cuBLAS fp32':>12} {'ours bf16':>10} {'cuBLAS bf16':>12}   GFLOP/s")
    for r in ours_gemm(dev_cli):
        c32 = cublas_gflops(r["tokens"], r["in"], r["out"], torch.float32)
        c16 = cublas_gflops(r["tokens"], r["in"], r["out"], torch.bfloat16)
        ratios_fp32.append(r["fp32_gflops"] / c32)
        ratios_bf16.append(r["bf16_gflops"] / c16)
        print(f"{r['shape']:16} {r['fp32_gflops']:10.0f} {c32:12.0f} {r['bf16_gflops']:10.0f} {c16:12.0f}")
    with tempfile.TemporaryDirectory() as work:
        gpu = tiny_tokens_per_s(cli, dev_cli, "cuda", a.steps, work)
        cpu = tiny_tokens_per_s(cli, dev_cli, "cpu", a.steps, work)
    print(f"tiny preset: cuda {gpu:.0f} tokens/s, cpu {cpu:.0f} tokens/s")
    print(f"BENCH cuda gemm_bf16_vs_cublas={geomean(ratios_bf16):.3f} gemm_fp32_vs_cublas={geomean(ratios_fp32):.3f} "
          f"tiny_tokens_per_s={gpu:.0f} tiny_cpu_tokens_per_s={cpu:.0f} tiny_cuda_vs_cpu={gpu / cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
