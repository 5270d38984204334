#!/usr/bin/python3
"""One MoE layer of real models' shapes, ours against PyTorch, side by side in one run (test/bench/shapes runs it).

    /usr/bin/python3 test/bench/shapes_bench.py --dev-cli native/build/moe-engine-dev [--threads 2]
        [--tokens N,...] [--shapes olmoe,qwen3,deepseek-v2-lite,mixtral] [--steps N] [--lora R] [--torch-limit S]
    /usr/bin/python3 test/bench/shapes_bench.py torch-layer|torch-gemm JSON   (the PyTorch side, run in its own process)

A step is the layer's forward (router, top-k, per-expert SwiGLU on the tokens routed to it, weighted combine, the
shared experts), backward of sum(y · dy) plus the load-balancing loss down to the layer's input (as inside a model),
and AdamW over the layer's parameters.
Ours: `moe-engine-dev bench --layer` in fp32 and in bf16 (train.compute_dtype "bf16"). PyTorch 1.13 at its strongest
here: OpenMP OpenBLAS, tcmalloc preloaded, torch.set_num_threads, the fused-weight expert loop transformers uses
(index the tokens of each expert, F.linear, index_add_), in fp32 and under bf16 autocast (oneDNN; it uses AMX tiles
itself where the CPU has them). Each side runs in its own process, one after the other, so memory holds one layer.
The expert GEMMs alone (rows = tokens·K/E): ours sgemm / sgemm_bf16 against torch.matmul in fp32 / bf16, with our
GEMMs' fraction of the machine's peak for the ISA they use (measured in the same run by the dev CLI).
With --lora R (default 16; 0 leaves it out) also a LoRA step of the layer (on the shapes with an optimizer step): its weights frozen, rank-R adapters on
every routed expert's gate, up and down, AdamW for the adapters (`bench --layer --lora`; PyTorch the same with PEFT's
initialisation, frozen weights in bf16 under autocast, and the input's gradient as inside a model), each side's
faster setup compared.
Ends with one line: BENCH shapes bf16_vs_torch_bf16=R fp32_vs_torch=R gemm_bf16_vs_torch=R gemm_bf16_peak_frac=R isa=...
lora_vs_torch=R (medians over the shapes) [torch_capped=N]. A PyTorch setup whose first step runs past --torch-limit
seconds (default FIRST_STEP_LIMIT_S: bf16 autocast on a CPU without bf16 units) is stopped there; its tokens/s shows
as "<N" and the ratio as ">R", the bound enters the medians (which are then lower bounds too), and torch_capped
counts such setups.
"""
import argparse
import json
import math
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

# name: (C, E, F, K, shared F, optimizer, default tokens, default timed steps). Mixtral's AdamW state (22 GB for the
# layer with its weights and gradients) does not fit beside both sides on a 24 GiB machine: its step is forward +
# backward only, on both sides, and at 512 tokens (128 rows per expert, as the others' 64–128). Its steps take 10–30 s
# each here, so two timed steps per setup (after the warm-up) rather than three keep the default run under 15 minutes
# on two cores (15.2 minutes with three on a slow day).
SHAPES = {
    "olmoe": (2048, 64, 1024, 8, 0, True, 1024, 3),
    "qwen3": (2048, 128, 768, 8, 0, True, 1024, 3),
    "deepseek-v2-lite": (2048, 64, 1408, 6, 2 * 1408, True, 1024, 3),
    "mixtral": (4096, 8, 14336, 2, 0, False, 512, 2),
}
# PyTorch's bf16 autocast on a CPU without bf16 units takes minutes a step of these layers (about 100x its fp32), where
# no one would train with it: a step of over SLOW_STEP_S is timed once, and a setup whose first step has not ended
# after FIRST_STEP_LIMIT_S is stopped there and reported as a bound (PyTorch slower than that; ours / PyTorch at
# least the ratio shown), which keeps the default run under 15 minutes on two such cores.
SLOW_STEP_S = 15
FIRST_STEP_LIMIT_S = 40
SMOKE = {"smoke": (256, 8, 512, 2, 256, True, 1024, 3)}  # --shapes smoke: checks the script itself in seconds
# Debian's PyTorch at its strongest: the OpenMP OpenBLAS and tcmalloc, where installed. MOE_PEER_PYTHON names another
# Python with PyTorch (a machine whose own build brings its BLAS: MKL, oneDNN).
TORCH_ENV = {k: v for k, v in {
    "LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/openblas-openmp",
    "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
}.items() if os.path.exists(v)}
PEER_PYTHON = os.environ.get("MOE_PEER_PYTHON", "/usr/bin/python3")
GEMM_OPS = ("up", "down", "dx", "dh", "dw_up", "dw_down")


def gemm_cases(C, E, F, K, tokens):
    """(op, trans_a, trans_b, M, N, Kdim) as `bench --layer --gemm` lists them."""
    R = max(1, tokens * K // E)
    return [("up", 0, 1, R, 2 * F, C), ("down", 0, 1, R, C, F), ("dx", 0, 0, R, C, 2 * F), ("dh", 0, 0, R, F, C),
            ("dw_up", 1, 0, 2 * F, C, R), ("dw_down", 1, 0, C, F, R)]


def torch_env(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **TORCH_ENV)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    return env


def run_torch(mode, spec, threads):
    out = subprocess.run([PEER_PYTHON, os.path.abspath(__file__), mode, json.dumps(spec)], check=True,
                         capture_output=True, text=True, env=torch_env(threads)).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_torch_layer(spec, threads, limit_s):
    """The PyTorch layer's setups (spec["setups"], in order), a record each. A setup whose first step has not ended
    after limit_s seconds is stopped there (its process killed; the setups after it go on in a new one): its record
    says "bound", and its tokens_per_s is an upper bound, the tokens over limit_s."""
    records, todo = [], list(spec["setups"])
    while todo:
        errors = tempfile.TemporaryFile()
        proc = subprocess.Popen([PEER_PYTHON, os.path.abspath(__file__), "torch-layer",
                                 json.dumps(dict(spec, setups=todo))],
                                stdout=subprocess.PIPE, stderr=errors, env=torch_env(threads))
        pending, deadline, current = b"", None, None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.time())
            ready, _, _ = select.select([proc.stdout], [], [], wait)
            if not ready:  # the setup's first step ran past the limit
                proc.kill()
                proc.wait()
                records.append({"bench": "torch_layer", "setup": current, "lora": spec.get("lora", 0),
                                "tokens": spec["tokens"], "seconds": None, "tokens_per_s": spec["tokens"] / limit_s,
                                "bound": True, "limit_s": limit_s})
                todo = todo[todo.index(current) + 1:]
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                if proc.wait() != 0:
                    errors.seek(0)
                    sys.exit(f"PyTorch layer ({spec}) failed:\n{errors.read().decode(errors='replace')}")
                todo = []
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(b"{"):
                    continue
                rec = json.loads(line)
                if rec.get("event") == "setup":
                    current, deadline = rec["setup"], time.time() + limit_s
                elif rec.get("event") == "step":
                    deadline = None
                else:
                    records.append(rec)
    return records


def run_ours(dev_cli, args):
    out = subprocess.run([dev_cli, "bench", "--layer", "--json", *args], check=True, capture_output=True,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ---------------------------------------------------------------- the PyTorch side (its own process)

def torch_layer(spec):
    import torch
    import torch.nn.functional as Fn

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    C, E, F, K, SF, N = spec["C"], spec["E"], spec["F"], spec["K"], spec["shared_F"], spec["tokens"]
    R = spec.get("lora", 0)
    std = 0.02
    # LoRA (PEFT's layout: A [r, in] uniform, B [out, r] zero, scale alpha / r = 2): the layer's weights are frozen,
    # in bf16 under autocast as a bf16 checkpoint loads, and the input needs its gradient as it would inside a model
    # (the layers below have adapters too, and in a full step the layers below train). The setups run one after the
    # other on the same layer (fp32 first).

    def weight(*shape):
        w = torch.randn(*shape) * std
        return w if R else torch.nn.Parameter(w)

    router = weight(E, C)
    # One parameter per expert, as transformers' ModuleList of experts holds them: indexing one 3-D parameter per
    # expert would make autograd build a whole-tensor gradient for every expert.
    w_in = [weight(2 * F, C) for _ in range(E)]
    w_out = [weight(C, F) for _ in range(E)]
    params = [] if R else [router, *w_in, *w_out]
    if SF:
        s_in, s_out = weight(2 * SF, C), weight(C, SF)
        params += [] if R else [s_in, s_out]

    def adapter(out_f, in_f):
        return (torch.nn.Parameter(torch.empty(R, in_f).uniform_(-1 / math.sqrt(in_f), 1 / math.sqrt(in_f))),
                torch.nn.Parameter(torch.zeros(out_f, R)))
    lora = [(adapter(F, C), adapter(F, C), adapter(C, F)) for _ in range(E)] if R else []
    params += [t for e in lora for pair in e for t in pair]
    opt = torch.optim.AdamW(params, lr=1e-5) if spec["optimizer"] else None
    x = torch.rand(N, C) * 2 - 1
    x.requires_grad_(True)  # inside a model the layer's input gradient feeds the layers below (ours computes it)
    dy = (torch.rand(N, C) * 2 - 1) * 1e-3

    def with_lora(y, inp, pair):
        a, b = pair
        return y + 2.0 * Fn.linear(Fn.linear(inp, a), b)

    def swiglu(h):
        g, u = h.chunk(2, dim=-1)
        return Fn.silu(g) * u

    def forward():
        logits = Fn.linear(x, router)
        probs = logits.float().softmax(dim=-1)
        topw, topi = probs.topk(K, dim=-1)
        topw = topw / topw.sum(dim=-1, keepdim=True)
        y = torch.zeros(N, C, dtype=x.dtype)
        mask = Fn.one_hot(topi, E).permute(2, 1, 0)  # [E, K, N]
        hit = (mask.sum(dim=(1, 2)) > 0).nonzero().flatten().tolist()
        for e in hit:
            slot, tok = torch.where(mask[e])
            xe = x[tok]
            h = Fn.linear(xe, w_in[e])
            if R:
                gate, up, down = lora[e]
                h = torch.cat([with_lora(h[:, :F], xe, gate), with_lora(h[:, F:], xe, up)], dim=-1)
            h = swiglu(h)
            out = Fn.linear(h, w_out[e])
            if R:
                out = with_lora(out, h, down)
            out = out * topw[tok, slot, None]
            y = y.index_add(0, tok, out.to(y.dtype))
        if SF:
            y = y + Fn.linear(swiglu(Fn.linear(x, s_in)), s_out)
        frac = mask.sum(dim=(1, 2)).float() / (N * K)
        aux = E * (frac * probs.mean(dim=0)).sum()
        return (y.float() * dy).sum() + 0.01 * aux

    def step():
        if opt:
            opt.zero_grad(set_to_none=True)
        else:
            for p in params:
                p.grad = None
        x.grad = None
        t0 = time.perf_counter()
        if spec["autocast"]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = forward()
        else:
            loss = forward()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if opt:
            opt.step()
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, t3 - t0

    for setup in spec["setups"]:
        spec["autocast"] = setup == "bf16"
        if R and spec["autocast"]:  # the frozen weights as a bf16 checkpoint holds them
            router = router.to(torch.bfloat16)
            w_in[:] = [w.to(torch.bfloat16) for w in w_in]
            w_out[:] = [w.to(torch.bfloat16) for w in w_out]
            if SF:
                s_in, s_out = s_in.to(torch.bfloat16), s_out.to(torch.bfloat16)
        print(json.dumps({"event": "setup", "setup": setup}), flush=True)  # the parent's deadline starts here
        first = step()
        print(json.dumps({"event": "step", "seconds": first[3]}), flush=True)
        # A step of over SLOW_STEP_S (bf16 autocast on a CPU without bf16 units) is itself the measurement: its
        # warm-up share (allocations, a few page faults) is lost in it, and more such steps would keep the bench
        # running for an hour. Otherwise it was the warm-up, and timing stops after 30 s, one step at least.
        slow = first[3] > SLOW_STEP_S
        times, began = [first] if slow else [], time.perf_counter()
        while not slow and len(times) < spec["steps"] and (not times or time.perf_counter() - began < 30):
            times.append(step())
        med = [statistics.median(t[i] for t in times) for i in range(4)]
        print(json.dumps({"bench": "torch_layer", "setup": setup, "lora": R, "tokens": N, "seconds": med[3],
                          "forward_s": med[0], "backward_s": med[1], "optimizer_s": med[2],
                          "tokens_per_s": N / med[3], "timed_steps": len(times),
                          "warm_up_timed": slow, "torch": torch.__version__}),
              flush=True)


def torch_gemm(spec):
    import torch

    from engine_peers import time_median  # the timing `moe-engine-dev bench` uses too

    torch.set_num_threads(spec["threads"])
    for op, ta, tb, M, N, Kd in gemm_cases(spec["C"], spec["E"], spec["F"], spec["K"], spec["tokens"]):
        row = {"bench": "torch_gemm", "op": op, "M": M, "N": N, "Kdim": Kd}
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            a = (torch.rand(Kd, M) if ta else torch.rand(M, Kd)).to(dtype)
            b = (torch.rand(N, Kd) if tb else torch.rand(Kd, N)).to(dtype)
            fn = (lambda: (a.t() if ta else a) @ (b.t() if tb else b))
            row[name + "_gflops"] = 2.0 * M * N * Kd / time_median(fn) / 1e9
        print(json.dumps(row))


# ---------------------------------------------------------------- the driver

def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def rate(rec):
    """A PyTorch setup's tokens/s for the table: "<N" where its step was stopped."""
    return f"<{rec['tokens_per_s']:.0f}" if rec.get("bound") else f"{rec['tokens_per_s']:.0f}"


def ratio(r, rec):
    return f">{r:.2f}" if rec.get("bound") else f"{r:.2f}"


def main():
    if len(sys.argv) == 3 and sys.argv[1] in ("torch-layer", "torch-gemm"):
        (torch_layer if sys.argv[1] == "torch-layer" else torch_gemm)(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev-cli", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", default=None,
                    help="comma-separated token counts per step (default: each shape's own, 1024 or Mixtral's 512)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per setup, after one warm-up (default: each shape's own, 3 or Mixtral's 2)")
    ap.add_argument("--lora", type=int, default=16, help="rank of the LoRA step (0: no LoRA step)")
    ap.add_argument("--torch-limit", type=float, default=FIRST_STEP_LIMIT_S,
                    help="seconds a PyTorch setup's first step may take before it is stopped and reported as a bound")
    a = ap.parse_args()
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    isa = "amx" if "amx_bf16" in flags else "avx512bf16" if "avx512_bf16" in flags else "avx512" if "avx512f" in flags else "avx2"
    print(f"CPU: {cpu_name()}; {a.threads} threads; bf16 ISA available: {isa}")
    print(f"{'shape':<17} {'tokens':>6} {'ours fp32':>10} {'ours bf16':>10} {'torch fp32':>10} {'torch bf16':>10}"
          f" {'fp32 x':>7} {'bf16 x':>7}   (tokens/s; x = ours / torch)")
    fp32_ratios, bf16_ratios, gemm_ratios, peak_fracs, lora_ratios = [], [], [], [], []
    capped = 0  # PyTorch setups stopped at --torch-limit
    kernel = "?"
    started = time.time()
    for name in a.shapes.split(","):
        C, E, F, K, SF, optimizer, default_tokens, default_steps = {**SHAPES, **SMOKE}[name]
        token_counts = [int(t) for t in a.tokens.split(",")] if a.tokens else [default_tokens]
        steps = a.steps or default_steps
        shape_started = time.time()
        phases = {}  # where the shape's time went, in seconds

        def timed(phase, fn, *args):
            t0 = time.time()
            out = fn(*args)
            phases[phase] = phases.get(phase, 0.0) + time.time() - t0
            return out
        for tokens in token_counts:
            base = ["--C", str(C), "--E", str(E), "--F", str(F), "--K", str(K), "--shared-F", str(SF),
                    "--tokens", str(tokens), "--threads", str(a.threads), "--steps", str(steps)]
            base += [] if optimizer else ["--no-optimizer"]
            # Each side runs its two setups in one process on one layer: a layer's initialisation costs as much
            # as its steps.
            ours = {r["dtype"]: r["tokens_per_s"]
                    for r in timed("ours", run_ours, a.dev_cli, base + ["--dtype", "fp32,bf16"])}
            spec = {"C": C, "E": E, "F": F, "K": K, "shared_F": SF, "tokens": tokens, "threads": a.threads,
                    "optimizer": optimizer, "steps": steps, "setups": ["fp32", "bf16"]}
            theirs = {r["setup"]: r for r in timed("torch", run_torch_layer, spec, a.threads, a.torch_limit)}
            r32 = ours["fp32"] / theirs["fp32"]["tokens_per_s"]
            r16 = ours["bf16"] / theirs["bf16"]["tokens_per_s"]  # a lower bound where PyTorch's step was stopped
            fp32_ratios.append(r32)
            bf16_ratios.append(r16)
            capped += sum(1 for r in theirs.values() if r.get("bound"))
            print(f"{name:<17} {tokens:>6} {ours['fp32']:>10.0f} {ours['bf16']:>10.0f} {rate(theirs['fp32']):>10}"
                  f" {rate(theirs['bf16']):>10} {ratio(r32, theirs['fp32']):>7} {ratio(r16, theirs['bf16']):>7}"
                  + ("" if optimizer else "   (no optimizer step)"), flush=True)
            if a.lora and optimizer:
                # The LoRA step: each side's faster setup (ours fp32 or bf16, PyTorch fp32 or bf16 autocast). Not on
                # the shapes measured without an optimizer step (Mixtral): their layers alone take most of the run.
                # PyTorch's bf16 LoRA setup runs the same bf16 GEMMs on the frozen weights as its plain bf16 step:
                # where that step was over 3x slower than fp32 it cannot be the faster setup, and is left out.
                lora = ["--lora", str(a.lora)]
                ours_l = {r["dtype"]: r["tokens_per_s"]
                          for r in timed("ours lora", run_ours, a.dev_cli, base + lora + ["--dtype", "fp32,bf16"])}
                slow16 = theirs["bf16"]["tokens_per_s"] * 3 < theirs["fp32"]["tokens_per_s"]
                spec_l = dict(spec, lora=a.lora, setups=["fp32"] if slow16 else ["fp32", "bf16"])
                theirs_l = {r["setup"]: r
                            for r in timed("torch lora", run_torch_layer, spec_l, a.threads, a.torch_limit)}
                faster = max(theirs_l.values(), key=lambda r: r["tokens_per_s"])
                lora_ratios.append(max(ours_l.values()) / faster["tokens_per_s"])
                capped += sum(1 for r in theirs_l.values() if r.get("bound"))
                torch16 = rate(theirs_l["bf16"]) if "bf16" in theirs_l else "(left out)"
                print(f"{'  lora r=' + str(a.lora):<17} {tokens:>6} {ours_l['fp32']:>10.0f} {ours_l['bf16']:>10.0f}"
                      f" {rate(theirs_l['fp32']):>10} {torch16:>10}   ours / faster PyTorch"
                      f" {ratio(lora_ratios[-1], faster)}", flush=True)
        # The expert GEMMs alone, at the first token count.
        tokens = token_counts[0]
        rows = timed("gemms", run_ours, a.dev_cli, ["--C", str(C), "--E", str(E), "--F", str(F), "--K", str(K),
                                                    "--tokens", str(tokens), "--threads", str(a.threads), "--gemm"])
        peak = rows[0]
        kernel = peak["bf16_kernel"]
        ours_g = {r["op"]: r for r in rows[1:]}
        theirs_g = {r["op"]: r for r in timed("gemms", run_torch, "torch-gemm",
                                              {"C": C, "E": E, "F": F, "K": K, "tokens": tokens, "threads": a.threads},
                                              a.threads)}
        print(f"  expert GEMMs ({name}, {ours_g['up']['M']} rows per expert; peak fp32 {peak['fp32_gflops']:.0f}"
              f" GFLOP/s {peak['fp32_isa']}, bf16 {peak['bf16_gflops']:.0f} GFLOP/s {peak['bf16_isa']}, our bf16"
              f" kernel {kernel})")
        print(f"  {'op':<8} {'M':>6} {'N':>6} {'K':>6} {'ours32':>8} {'torch32':>8} {'ours16':>8} {'torch16':>8}"
              f" {'16 x':>6} {'16 peak':>8}   (GFLOP/s)")
        shape_ratios, shape_fracs = [], []
        for op in GEMM_OPS:
            o, t = ours_g[op], theirs_g[op]
            shape_ratios.append(o["bf16_gflops"] / t["bf16_gflops"])
            shape_fracs.append(o["bf16_peak_frac"])
            print(f"  {op:<8} {o['M']:>6} {o['N']:>6} {o['Kdim']:>6} {o['fp32_gflops']:>8.1f} {t['fp32_gflops']:>8.1f}"
                  f" {o['bf16_gflops']:>8.1f} {t['bf16_gflops']:>8.1f} {shape_ratios[-1]:>6.2f}"
                  f" {o['bf16_peak_frac']:>8.2f}", flush=True)
        gemm_ratios.append(statistics.median(shape_ratios))
        peak_fracs.append(statistics.median(shape_fracs))
        spent = ", ".join(f"{phase} {sec:.0f}" for phase, sec in phases.items())
        print(f"  ({name}: {time.time() - shape_started:.0f} s: {spent}; {time.time() - started:.0f} s since the"
              " start)", flush=True)
    med = statistics.median
    print(f"BENCH shapes bf16_vs_torch_bf16={med(bf16_ratios):.2f} fp32_vs_torch={med(fp32_ratios):.2f}"
          f" gemm_bf16_vs_torch={med(gemm_ratios):.2f} gemm_bf16_peak_frac={med(peak_fracs):.2f}"
          f" isa={kernel.replace('_', '')}" + (f" lora_vs_torch={med(lora_ratios):.2f}" if lora_ratios else "")
          + (f" torch_capped={capped}" if capped else ""))


if __name__ == "__main__":
    main()
