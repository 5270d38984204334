#!/usr/bin/env python3
"""The CUDA backend against cuBLAS and against the CPU backend, on the machine it runs on.

    python3 test/bench/cuda/bench.py --build native/build-gpu [--steps 8]

1. GEMM: `moe-engine-dev bench --backend cuda --gemm --json` (our fp32 SIMT and bf16 WMMA kernels through the
   backend) and torch.matmul (cuBLAS) on the same shapes, fp32 with TF32 off and bf16; ratio = ours / cuBLAS
   GFLOP/s, geometric mean over the shapes. The grouped shapes (one layer's experts, equal segments) compare our
   one-launch grouped GEMM with torch.bmm (cuBLAS batched) and with our own GEMM called once per expert.
2. Training: tokens/s of the tiny preset through `moe-engine train`, train.backend cuda against cpu (median step
   after the first two).
3. Offload on the device: an OLMoE-shaped model (the olmoe-1b-7b preset's layer widths, --olmoe-layers layers,
   byte vocabulary, --olmoe-batch sequences of 512 tokens a step) on cuda, resident against experts offloaded to
   host memory with --slots device slots per layer and --lookahead (default 3: runs of experts as grouped GEMMs):
   tokens/s of each, and the share of upload time hidden behind compute (Σ upload_hidden_ms / Σ upload_ms).
   With --parts ...,sweep: the same pair with 4 micro-batches a step and with the `delayed` expert update
   (offload_sweep), to show how much of the gap is the host optimizer; with ...,profile: the resident run's
   device and wall time per op (op_profile); with ...,bf16: the same pair in bf16 compute (train.compute_dtype).
4. Where MOE_CUBLAS names a libcublas (test/gpu/validate.sh finds PyTorch's), the backend on cuBLAS
   (train.gemm "cublas"): parts 1 and 3 again, its GEMMs through the backend against cuBLAS alone.
Prints one table per part and, last, `BENCH cuda gemm_bf16_vs_cublas=R gemm_fp32_vs_cublas=R
grouped_bf16_vs_cublas=R grouped_fp32_vs_cublas=R grouped_vs_per_expert=R tiny_tokens_per_s=X
tiny_cpu_tokens_per_s=Y tiny_cuda_vs_cpu=Z olmoe_tokens_per_s=X olmoe_offload_vs_resident=R upload_hidden_frac=F
lib_gemm_bf16_vs_cublas=R lib_gemm_fp32_vs_cublas=R olmoe_cublas_tokens_per_s=X olmoe_cublas_offload_vs_resident=R
olmoe_bf16_tokens_per_s=X olmoe_bf16_offload_vs_resident=R`
(a part that failed or did not run reports nan).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def ours_gemm(dev_cli, library="own"):
    run = subprocess.run([dev_cli, "bench", "--backend", "cuda", "--gemm", "--library", library, "--json"],
                         check=True, capture_output=True, text=True)
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


def cublas_batched_gflops(experts, tokens, n_in, n_out, dtype):
    """A layer's expert GEMM as cuBLAS does it best when every segment has the same rows: one batched matmul."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.rand(experts, tokens, n_in, device="cuda", dtype=dtype) * 2 - 1
    w = torch.rand(experts, n_out, n_in, device="cuda", dtype=dtype) * 2 - 1
    for _ in range(3):
        torch.bmm(x, w.transpose(1, 2))
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.bmm(x, w.transpose(1, 2))
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return 2.0 * experts * tokens * n_in * n_out / statistics.median(times) / 1e9


def cublas_reference(r, measured):
    """cuBLAS's (fp32, bf16) GFLOP/s on the shape of our bench row r: batched for a grouped row. Measured once per
    shape and kept in `measured`, so every ratio of a run divides by the same figure."""
    import torch
    if r["shape"] not in measured:
        if r["bench"] == "backend_grouped_gemm":
            shape = (r["experts"], r["tokens"], r["in"], r["out"])
            measured[r["shape"]] = tuple(cublas_batched_gflops(*shape, t) for t in (torch.float32, torch.bfloat16))
        else:
            shape = (r["tokens"], r["in"], r["out"])
            measured[r["shape"]] = tuple(cublas_gflops(*shape, t) for t in (torch.float32, torch.bfloat16))
    return measured[r["shape"]]


def train_records(cli, dev_cli, cfg, name, work):
    return train_run(cli, dev_cli, cfg, name, work)[0]


def train_run(cli, dev_cli, cfg, name, work, env=None):
    """(the step records, the process's peak resident host memory in GB)."""
    cfg_path = os.path.join(work, f"{name}.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    tokens = os.path.join(work, "corpus.bin")
    if not os.path.exists(tokens):
        subprocess.run([dev_cli, "tokenize", "--bytes", os.path.join(ROOT, "resources", "corpus", "python-tutorial.txt"),
                        "--out", tokens], check=True, capture_output=True)
    out = tempfile.mkdtemp(dir=work)
    args = [cli, "train", "--config", cfg_path, "--data", tokens, "--out", out, "--quiet"]
    proc = subprocess.Popen(args, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args)
    with open(os.path.join(out, "log.jsonl")) as f:
        return [json.loads(line) for line in f], usage.ru_maxrss / 1e6


def tokens_per_s(records):
    return statistics.median(r["tokens"] / (r["step_ms"] / 1000.0) for r in records[2:])


def tiny_tokens_per_s(cli, dev_cli, backend, steps, work):
    with open(os.path.join(ROOT, "resources", "presets", "tiny.json")) as f:
        cfg = json.load(f)
    cfg["train"].update({"backend": backend, "steps": steps, "checkpoint_every": 0, "threads": os.cpu_count() or 2,
                         "allow_unvalidated_backend": True})
    cfg.pop("offload", None)
    return tokens_per_s(train_records(cli, dev_cli, cfg, f"tiny-{backend}", work))


def olmoe_config(layers, batch, grad_clip, steps, grad_accum=1, gemm="own", dtype="fp32"):
    with open(os.path.join(ROOT, "resources", "presets", "olmoe-1b-7b.json")) as f:
        cfg = json.load(f)
    cfg["model"].update({"n_layers": layers, "vocab_size": 256, "max_seq_len": 512})
    cfg["train"].update({"backend": "cuda", "steps": steps, "batch_size": batch, "seq_len": 512, "warmup_steps": 1,
                         "grad_accum": grad_accum, "checkpoint_every": 0, "threads": os.cpu_count() or 2,
                         "allow_unvalidated_backend": True, "gemm": gemm, "compute_dtype": dtype})
    if grad_clip is not None:
        cfg["train"]["grad_clip"] = grad_clip
    return cfg


def olmoe_offload(cli, dev_cli, layers, slots, lookahead, batch, grad_clip, steps, work, gemm="own", dtype="fp32"):
    """(resident tokens/s, offloaded tokens/s, hidden share of upload time) on cuda."""
    cfg = olmoe_config(layers, batch, grad_clip, steps, gemm=gemm, dtype=dtype)
    resident, resident_rss = train_run(cli, dev_cli, dict(cfg, offload={"mode": "none"}),
                                       f"olmoe-resident-{gemm}-{dtype}", work)
    offloaded, offloaded_rss = train_run(cli, dev_cli, dict(cfg, offload={"mode": "host", "expert_slots": slots,
                                                                         "lookahead": lookahead}),
                                         f"olmoe-host-{gemm}-{dtype}", work)
    # The host tier is page-locked memory of its own; the arenas' expert pages are handed back, so the offloaded
    # process should hold about the tier's bytes more than the resident one, not twice them.
    print(f"  peak host RSS: resident {resident_rss:.2f} GB, offloaded {offloaded_rss:.2f} GB; host tier "
          f"{max(r.get('peak_host_bytes', 0) for r in offloaded) / 1e9:.2f} GB")
    for a, b in zip(resident, offloaded):
        print(f"  step {a['step']}: loss resident {a['loss']:.6f} offloaded {b['loss']:.6f}  "
              f"ms {a['step_ms']:.0f} / {b['step_ms']:.0f}  upload {b.get('upload_ms', 0):.1f} "
              f"hidden {b.get('upload_hidden_ms', 0):.1f} stall {b.get('stall_ms', 0):.1f} "
              f"optimizer {b.get('optimizer_ms', 0):.0f}  GB up {b.get('bytes_h2d', 0) / 1e9:.2f} "
              f"down {b.get('bytes_d2h', 0) / 1e9:.2f}")
    upload = sum(r.get("upload_ms", 0.0) for r in offloaded[2:])
    hidden = sum(r.get("upload_hidden_ms", 0.0) for r in offloaded[2:])
    return tokens_per_s(resident), tokens_per_s(offloaded), (hidden / upload if upload > 0 else float("nan"))


def offload_sweep(cli, dev_cli, layers, slots, lookahead, batch, grad_clip, steps, work):
    """Where host offload loses to resident. Every expert's AdamW runs on the host once a step, over the host tier's
    memory (7 fp32 streams a parameter); with clipping it starts only when the global norm is known, after backward,
    and the next forward's uploads wait for it. So the share of the step it costs falls as tokens per step grow
    (grad_accum micro-batches: one update for several), and vanishes when the update may lag a step (`delayed`, an
    ablation that is not equivalent to resident). Without clipping a layer's updates start when its backward ends,
    so the next forward waits for the first layer's, which come last: a share of all updates that falls as layers
    are added (twice the layers). Prints one row per setup: resident and offloaded tokens/s, their ratio, the
    offloaded run's median optimizer, upload and stall ms a step."""
    setups = [("as benched", 1, "expert", layers), ("grad_accum 4", 4, "expert", layers),
              ("delayed update", 1, "delayed", layers), (f"{2 * layers} layers", 1, "expert", 2 * layers)]
    print(f"  {'setup':16} {'resident':>9} {'offloaded':>9} {'ratio':>6} {'optimizer':>9} {'upload':>7} "
          f"{'stall':>7}   tokens/s; ms a step")
    for name, accum, optimizer, n_layers in setups:
        cfg = olmoe_config(n_layers, batch, grad_clip, steps, accum)
        tag = f"{accum}-{optimizer}-{n_layers}"
        resident = train_records(cli, dev_cli, dict(cfg, offload={"mode": "none"}), f"sweep-r-{tag}", work)
        offloaded = train_records(cli, dev_cli, dict(cfg, offload={"mode": "host", "expert_slots": slots,
                                                                   "lookahead": lookahead, "optimizer": optimizer}),
                                  f"sweep-o-{tag}", work)
        r, o = tokens_per_s(resident), tokens_per_s(offloaded)

        def med(key):
            return statistics.median(x.get(key, 0.0) for x in offloaded[2:])

        print(f"  {name:16} {r:9.0f} {o:9.0f} {o / r:6.2f} {med('optimizer_ms'):9.0f} {med('upload_ms'):7.0f} "
              f"{med('stall_ms'):7.0f}")


def op_profile(cli, dev_cli, layers, batch, work):
    """Where a resident OLMoE-shaped step's time goes on the device: three steps with MOE_CUDA_PROFILE set, whose
    table (device and wall ms per op, runtime.h's Stage) the engine prints at exit; once on our GEMMs and once on
    cuBLAS where MOE_CUBLAS names it."""
    for gemm in ["own", "cublas"] if os.environ.get("MOE_CUBLAS") else ["own"]:
        print(f"  op profile, gemm {gemm}, 3 steps:", flush=True)
        train_run(cli, dev_cli, dict(olmoe_config(layers, batch, None, 3, gemm=gemm), offload={"mode": "none"}),
                  f"profile-{gemm}", work, env=dict(os.environ, MOE_CUDA_PROFILE="1"))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True, help="the CUDA build directory (moe-engine, moe-engine-dev)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--olmoe-layers", type=int, default=2)
    p.add_argument("--olmoe-batch", type=int, default=16, help="sequences of 512 tokens per step")
    p.add_argument("--grad-clip", type=float, default=None,
                   help="train.grad_clip of the OLMoE-shaped runs (0: expert updates start during backward)")
    p.add_argument("--parts", default="gemm,tiny,olmoe",
                   help="which parts run (the others report nan); `sweep` adds offload_sweep's table")
    p.add_argument("--slots", type=int, default=8, help="device expert slots per layer in the offloaded OLMoE run")
    p.add_argument("--lookahead", type=int, default=3,
                   help="offload.lookahead of that run (above 1: runs of that many experts, at most half the "
                        "streaming slots, computed as grouped GEMMs)")
    a = p.parse_args()
    cli, dev_cli = os.path.join(a.build, "moe-engine"), os.path.join(a.build, "moe-engine-dev")
    ratios_fp32, ratios_bf16 = [], []
    print(f"{'shape':16} {'ours fp32':>10} {'cuBLAS fp32':>12} {'ours bf16':>10} {'cuBLAS bf16':>12}   GFLOP/s")
    parts = a.parts.split(",")
    t0 = time.time()

    def lap(what):  # a device lease is short: say where the time went
        print(f"  ({what}: {time.time() - t0:.0f} s since start)")

    try:
        gemms = ours_gemm(dev_cli) if "gemm" in parts else []
        if not gemms:
            ratios_fp32, ratios_bf16 = [float("nan")], [float("nan")]
    except Exception as e:
        print(f"our GEMM bench failed: {e}")
        gemms, ratios_fp32, ratios_bf16 = [], [float("nan")], [float("nan")]
    grouped_fp32, grouped_bf16, grouped_vs_loop = [], [], []
    measured = {}  # shape -> cuBLAS's (fp32, bf16) GFLOP/s
    for r in gemms:
        c32, c16 = cublas_reference(r, measured)
        if r["bench"] == "backend_grouped_gemm":
            grouped_fp32.append(r["fp32_gflops"] / c32)
            grouped_bf16.append(r["bf16_gflops"] / c16)
            grouped_vs_loop.append(r["bf16_gflops"] / r["bf16_loop_gflops"])
            print(f"{r['shape']:16} {r['fp32_gflops']:10.0f} {c32:12.0f} {r['bf16_gflops']:10.0f} {c16:12.0f}"
                  f"   (grouped, {r['experts']} experts; cuBLAS batched; ours per expert: fp32 "
                  f"{r['fp32_loop_gflops']:.0f}, bf16 {r['bf16_loop_gflops']:.0f})")
            continue
        ratios_fp32.append(r["fp32_gflops"] / c32)
        ratios_bf16.append(r["bf16_gflops"] / c16)
        print(f"{r['shape']:16} {r['fp32_gflops']:10.0f} {c32:12.0f} {r['bf16_gflops']:10.0f} {c16:12.0f}")
    for xs in (grouped_fp32, grouped_bf16, grouped_vs_loop):
        if not xs:
            xs.append(float("nan"))
    lap("GEMMs")
    # The backend on cuBLAS (train.gemm "cublas"): the same shapes through its linear layers, which round the fp32
    # activations to bf16 before each bf16 call, against cuBLAS alone; shows what the backend adds around it.
    lib_fp32, lib_bf16 = [], []
    if "gemm" in parts and os.environ.get("MOE_CUBLAS"):
        try:
            for r in ours_gemm(dev_cli, "cublas"):
                c32, c16 = cublas_reference(r, measured)
                lib_fp32.append(r["fp32_gflops"] / c32)
                lib_bf16.append(r["bf16_gflops"] / c16)
                print(f"{r['shape']:16} on cuBLAS through the backend: fp32 {r['fp32_gflops']:.0f} "
                      f"(cuBLAS alone {c32:.0f}), bf16 {r['bf16_gflops']:.0f} (cuBLAS alone {c16:.0f})")
        except Exception as e:
            print(f"the backend on cuBLAS failed: {e}")
    elif "gemm" in parts:
        print("the backend on cuBLAS: not measured (MOE_CUBLAS is not set)")
    for xs in (lib_fp32, lib_bf16):
        if not xs:
            xs.append(float("nan"))
    nan = float("nan")
    gpu = cpu = olmoe = olmoe_host = hidden = nan
    with tempfile.TemporaryDirectory() as work:
        try:
            if "tiny" not in parts:
                raise RuntimeError("not asked for")
            gpu = tiny_tokens_per_s(cli, dev_cli, "cuda", a.steps, work)
            cpu = tiny_tokens_per_s(cli, dev_cli, "cpu", a.steps, work)
            print(f"tiny preset: cuda {gpu:.0f} tokens/s, cpu {cpu:.0f} tokens/s")
            lap("tiny preset")
        except Exception as e:  # the other parts still run: a lease is short
            print(f"tiny preset failed: {e}")
        try:
            if "olmoe" not in parts:
                raise RuntimeError("not asked for")
            olmoe, olmoe_host, hidden = olmoe_offload(cli, dev_cli, a.olmoe_layers, a.slots, a.lookahead,
                                                      a.olmoe_batch, a.grad_clip, a.steps, work)
            print(f"olmoe-shaped, {a.olmoe_layers} layers, {a.olmoe_batch}x512 tokens a step, cuda: resident "
                  f"{olmoe:.0f} tokens/s, host-offloaded with {a.slots} slots (lookahead {a.lookahead}) "
                  f"{olmoe_host:.0f} tokens/s, "
                  f"upload hidden {hidden:.0%}")
            lap("olmoe-shaped")
        except Exception as e:
            print(f"olmoe-shaped offload failed: {e}")
        # The same pair on cuBLAS GEMMs and in bf16 compute: (resident, offloaded) tokens/s, nan where not run.
        variants = {"cuBLAS GEMMs": ("olmoe" in parts and bool(os.environ.get("MOE_CUBLAS")), {"gemm": "cublas"}),
                    "bf16 compute": ("bf16" in parts, {"dtype": "bf16"})}
        pairs = {}
        for label, (wanted, kw) in variants.items():
            pairs[label] = (nan, nan)
            if not wanted:
                continue
            try:
                res, off, hid = olmoe_offload(cli, dev_cli, a.olmoe_layers, a.slots, a.lookahead, a.olmoe_batch,
                                              a.grad_clip, a.steps, work, **kw)
                pairs[label] = (res, off)
                print(f"the same on {label}: resident {res:.0f} tokens/s, host-offloaded {off:.0f} tokens/s, "
                      f"upload hidden {hid:.0%}")
                lap(f"olmoe-shaped on {label}")
            except Exception as e:
                print(f"olmoe-shaped on {label} failed: {e}")
        (lib_olmoe, lib_olmoe_host), (bf16_olmoe, bf16_olmoe_host) = pairs["cuBLAS GEMMs"], pairs["bf16 compute"]
        if "profile" in parts:
            try:
                op_profile(cli, dev_cli, a.olmoe_layers, a.olmoe_batch, work)
                lap("op profile")
            except Exception as e:
                print(f"op profile failed: {e}")
        if "sweep" in parts:
            try:
                offload_sweep(cli, dev_cli, a.olmoe_layers, a.slots, a.lookahead, a.olmoe_batch, a.grad_clip,
                              a.steps, work)
                lap("offload sweep")
            except Exception as e:
                print(f"offload sweep failed: {e}")
    print(f"BENCH cuda gemm_bf16_vs_cublas={geomean(ratios_bf16):.3f} gemm_fp32_vs_cublas={geomean(ratios_fp32):.3f} "
          f"grouped_bf16_vs_cublas={geomean(grouped_bf16):.3f} grouped_fp32_vs_cublas={geomean(grouped_fp32):.3f} "
          f"grouped_vs_per_expert={geomean(grouped_vs_loop):.2f} "
          f"tiny_tokens_per_s={gpu:.0f} tiny_cpu_tokens_per_s={cpu:.0f} tiny_cuda_vs_cpu={gpu / cpu:.2f} "
          f"olmoe_tokens_per_s={olmoe:.0f} olmoe_offload_vs_resident={olmoe_host / olmoe:.2f} "
          f"upload_hidden_frac={hidden:.2f} lib_gemm_bf16_vs_cublas={geomean(lib_bf16):.3f} "
          f"lib_gemm_fp32_vs_cublas={geomean(lib_fp32):.3f} olmoe_cublas_tokens_per_s={lib_olmoe:.0f} "
          f"olmoe_cublas_offload_vs_resident={lib_olmoe_host / lib_olmoe:.2f} olmoe_bf16_tokens_per_s={bf16_olmoe:.0f} "
          f"olmoe_bf16_offload_vs_resident={bf16_olmoe_host / bf16_olmoe:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
