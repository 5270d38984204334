#!/usr/bin/python3
"""Fine-tuning benchmark: LoRA and ESFT training steps of an OLMoE-shaped stack, the engine against an independent
PyTorch implementation of the same step, side by side in one run with alternating rounds.

    /usr/bin/python3 test/bench/finetune_bench.py --cli native/build/moe-engine --data TOKENS.bin
        [--layers 2] [--threads 2] [--steps 3] [--rounds 2] [--batch 1] [--seq 128] [--esft-threshold 0.9]

The model: d_model 2048, 16 heads, 64 routed experts of d_ff 1024, top-8 softmax routing without renormalisation,
q/k RMS norms over the whole projection (OLMoE), SwiGLU experts, byte vocabulary (256); aux and z losses off on both
sides (the router is frozen in both methods).
  * LoRA: rank 16, alpha 32 on q/k/v/o and every routed expert's gate/up/down; everything else frozen.
  * ESFT: the experts the engine's own measurement (`moe-engine esft`, gate score, threshold p) picks per layer
    on the bench data train fully; everything else frozen.
Ours: `moe-engine train` with train.compute_dtype bf16 (the frozen weights feed bf16 GEMMs; their masters are still
fp32 in memory today). Tokens/s = tokens / step_ms, median over the steps after the first.
PyTorch (1.13, this script's `Olmoe` module, run in a child process at its strongest: OpenMP OpenBLAS, tcmalloc,
torch.set_num_threads, OMP_WAIT_POLICY passive): the same layer math (RMSNorm, rotary attention, softmax top-k router, SwiGLU experts through
the per-expert index loop of transformers' modeling_olmoe.py), base tensors with requires_grad False, AdamW (foreach)
over the trained tensors only; in fp32, and under bf16 autocast with the frozen base stored in bf16. The ratio is
against the faster of the two.
Peak RSS of our LoRA run (wait4's ru_maxrss) against the planned bytes of a full fine-tune of the same config:
16 bytes per parameter (fp32 weight, gradient, two AdamW moments) plus saved activations and backward scratch,
computed here with main/host/planner/activations.ts's formula for this shape.
LoRA with every expert in the SSD tier (a host cache of 3/4 of the experts, --ssd-cache; the experts compute on the
cache's copies in place, so the 16 slots hold gradients alone) against resident LoRA, both fp32 and
both from the same bf16 Hugging Face folder (as a released checkpoint is, so the frozen base holds bf16 values);
na with the engine's message if the engine refuses the run. The SSD run's step breakdown (stall, upload, SSD reads,
bytes read and written, medians after the first step) is printed beside it.
Ends with: BENCH finetune lora_vs_torch=R esft_vs_torch=R lora_rss_vs_full_plan=R lora_ssd_vs_resident=R|na
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

D, NH, E, F, K, V, RANK, ALPHA = 2048, 16, 64, 1024, 8, 256, 16, 32
# OMP_WAIT_POLICY passive: on a loaded machine OpenMP's spinning barriers make PyTorch's 2-thread step several
# times slower than its 1-thread one; sleeping waits keep it at its best.
TORCH_ENV = {"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/openblas-openmp",
             "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "OMP_WAIT_POLICY": "PASSIVE"}


def model_config(layers, seq):
    return {"arch": "mixtral", "vocab_size": V, "d_model": D, "n_layers": layers, "n_heads": NH, "n_kv_heads": NH,
            "max_seq_len": seq, "d_ff": F, "expert_d_ff": F, "n_experts": E, "top_k": K, "renormalize": False,
            "qk_norm": "projection", "rope_theta": 10000.0, "norm_eps": 1e-5, "aux_loss_coef": 0.0,
            "z_loss_coef": 0.0}


def run_config(a, finetune, steps, offload=None, dtype="bf16"):
    cfg = {"model": model_config(a.layers, a.seq),
           "train": {"batch_size": a.batch, "seq_len": a.seq, "steps": steps, "warmup_steps": 1, "threads": a.threads,
                     "lr": 1e-4, "seed": 7, "checkpoint_every": 0, "compute_dtype": dtype},
           "finetune": finetune}
    if offload:
        cfg["offload"] = offload
    return cfg


def lora_section():
    return {"method": "lora", "lora": {"rank": RANK, "alpha": ALPHA, "targets": ["attention", "experts"]}}


def train_records(cli, data, work, name, cfg, init=None):
    """Runs `moe-engine train` (from the weights in `init`, else the seed's) up to its last step; returns
    (log.jsonl's step records, the CLI's output, wait4's resource usage)."""
    path = os.path.join(work, name + ".json")
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)  # each round a new run (the CLI never trains over one)
    with open(path, "w") as f:
        json.dump(cfg, f)
    proc = subprocess.Popen([cli, "train", "--config", path, "--data", data, "--out", out] +
                            (["--init", init] if init else []),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # The engine writes a final checkpoint (gigabytes here) after the last step; the bench needs only the step
    # records, which are in log.jsonl once the last step's line is printed, so the run ends there.
    last = f"step {cfg['train']['steps']}/{cfg['train']['steps']} "
    lines, finished = [], False
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(last):
            finished = True
            proc.kill()
            break
    text = "".join(lines)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0 if finished else os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(text.strip().splitlines()[-1] if text.strip() else f"exit {proc.returncode}")
    with open(os.path.join(out, "log.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    subprocess.run(["rm", "-rf", out], check=True)
    return recs, text, usage


def ours(cli, data, work, name, cfg, init=None):
    """Runs `moe-engine train`; returns median tokens/s after the first step, peak RSS bytes, the parameters line,
    the losses and the step breakdown."""
    recs, text, usage = train_records(cli, data, work, name, cfg, init)
    params = next((int(l.split()[2]) for l in text.splitlines() if l.startswith("moe-engine train:")), 0)
    tok_s = statistics.median(r["tokens"] / r["step_ms"] * 1e3 for r in recs[1:])
    where = {k: statistics.median(r.get(k) or 0 for r in recs[1:])
             for k in ("step_ms", "stall_ms", "upload_ms", "ssd_read_ms", "bytes_ssd_read", "bytes_ssd_write")}
    return {"tok_s": tok_s, "rss": usage.ru_maxrss * 1024, "params": params, "loss": [r["loss"] for r in recs],
            "where": where}


def bf16_base(a, work):
    """The bench model as a released MoE checkpoint is: a Hugging Face folder in bf16 (the seed's weights after one
    LoRA step, exported merged by the engine), so that a fine-tune's frozen base holds bf16 values."""
    cfg = run_config(a, lora_section(), 1, None, "fp32")
    path, run, hf = (os.path.join(work, n) for n in ("base.json", "base-run", "base-hf"))
    with open(path, "w") as f:
        json.dump(cfg, f)
    subprocess.run([a.cli, "train", "--config", path, "--data", a.data, "--out", run, "--quiet"], check=True,
                   capture_output=True)
    subprocess.run([a.cli, "export", "--checkpoint", os.path.join(run, "checkpoint-1"), "--out", hf, "--model-type",
                    "olmoe", "--bf16"], check=True, capture_output=True)
    subprocess.run(["rm", "-rf", run], check=True)
    return hf


def ssd_part(a, work):
    """LoRA with the experts in the SSD tier (offload computes in fp32, so against resident fp32 LoRA), both from a
    bf16 checkpoint as a user's fine-tune starts. Returns (SSD run, resident run) or the engine's refusal."""
    offload = {"mode": "ssd", "expert_slots": 16, "cache_experts": a.ssd_cache, "lookahead": 2,
               "cache_policy": a.ssd_policy}
    ssd = resident = None
    try:
        base = bf16_base(a, work)
        # Alternating rounds, each side keeping its best, as the methods above do.
        for rnd in range(a.rounds):
            print(f"== round {rnd + 1}/{a.rounds} LoRA from a bf16 checkpoint: experts in the SSD tier (fp32), then "
                  "resident fp32", flush=True)
            s = ours(a.cli, a.data, work, "lora-ssd", run_config(a, lora_section(), a.steps, offload, "fp32"), base)
            r = ours(a.cli, a.data, work, "lora-fp32", run_config(a, lora_section(), a.steps, None, "fp32"), base)
            ssd = s if ssd is None or s["tok_s"] > ssd["tok_s"] else ssd
            resident = r if resident is None or r["tok_s"] > resident["tok_s"] else resident
        return ssd, resident
    except (RuntimeError, subprocess.CalledProcessError) as err:
        return str(err)


def print_ssd(a, runs):
    """Prints the SSD run against the resident one; returns the ratio's text for the BENCH line."""
    if isinstance(runs, str):
        print(f"lora_ssd_vs_resident: not measured: the engine refuses LoRA with experts in the SSD tier: {runs}")
        return "na"
    ssd, resident = runs
    ratio = ssd["tok_s"] / resident["tok_s"]
    w = ssd["where"]
    print(f"LoRA from a bf16 checkpoint, experts in the SSD tier (host cache {a.ssd_cache} of {E * a.layers} experts, "
          f"{a.ssd_policy} eviction, fp32) vs resident fp32: {ratio:.2f} (per step: {w['step_ms']:.0f} ms against resident "
          f"{resident['where']['step_ms']:.0f} ms, stall {w['stall_ms']:.0f} ms, upload {w['upload_ms']:.0f} ms, "
          f"SSD reads {w['ssd_read_ms']:.0f} ms, {w['bytes_ssd_read'] / 1e9:.2f} GB read, "
          f"{w['bytes_ssd_write'] / 1e6:.1f} MB written; same losses: {ssd['loss'] == resident['loss']})")
    return f"{ratio:.2f}"


def torch_child(a, method, setup, experts):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), **TORCH_ENV)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    argv = ["/usr/bin/python3", os.path.abspath(__file__), "--torch", method, "--setup", setup,
            "--layers", str(a.layers), "--threads", str(a.threads), "--steps", str(a.steps), "--batch", str(a.batch),
            "--seq", str(a.seq), "--experts", json.dumps(experts)]
    run = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return json.loads(run.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------------------
# The PyTorch side (runs in a child process).

def torch_main(a):
    import torch
    import torch.nn.functional as fn
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    chosen = {int(k): v for k, v in json.loads(a.experts).items()}
    bf16 = a.setup == "bf16_autocast"
    base_dtype = torch.bfloat16 if bf16 else torch.float32
    hs = D // NH
    scale = ALPHA / RANK
    trained = []

    def frozen(*shape, std=0.02):
        return (torch.randn(*shape) * std).to(base_dtype)

    def param(t):
        t = t.float().requires_grad_(True)
        trained.append(t)
        return t

    class Linear:
        """y = x W^T (+ s (x A^T) B^T): W frozen unless trained, A/B the LoRA pair (B = 0 at init, as PEFT)."""
        def __init__(self, out_f, in_f, lora, train=False):
            w = frozen(out_f, in_f)
            self.w = param(w) if train else w
            self.a = param(torch.empty(RANK, in_f).uniform_(-1 / math.sqrt(in_f), 1 / math.sqrt(in_f))) if lora else None
            self.b = param(torch.zeros(out_f, RANK)) if lora else None

        def __call__(self, x):
            y = fn.linear(x, self.w)
            if self.a is not None:
                y = y + scale * fn.linear(fn.linear(x, self.a), self.b)
            return y

    def rms(x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

    lora = a.torch == "lora"
    T = a.seq
    inv = 1.0 / (10000.0 ** (torch.arange(0, hs, 2).float() / hs))
    ang = torch.outer(torch.arange(T).float(), inv)
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    mask = torch.full((T, T), float("-inf")).triu(1)

    def rope(x):  # [B, NH, T, hs], rotate_half as transformers
        x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
        return x * cos.to(x.dtype) + torch.cat([-x2, x1], -1) * sin.to(x.dtype)

    class Layer:
        def __init__(self, index):
            self.n1, self.n2 = torch.ones(D, dtype=base_dtype), torch.ones(D, dtype=base_dtype)
            self.q, self.k, self.v, self.o = (Linear(D, D, lora) for _ in range(4))
            self.qn, self.kn = torch.ones(D, dtype=base_dtype), torch.ones(D, dtype=base_dtype)
            self.router = frozen(E, D)
            keep = set(chosen.get(index, [])) if not lora else set()
            self.experts = [(Linear(F, D, lora, e in keep), Linear(F, D, lora, e in keep), Linear(D, F, lora, e in keep))
                            for e in range(E)]

        def __call__(self, x):
            B = x.shape[0]
            h = rms(x, self.n1)
            q, k, v = rms(self.q(h), self.qn), rms(self.k(h), self.kn), self.v(h)
            q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
            q, k = rope(q), rope(k)
            att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(hs) + mask, dim=-1, dtype=torch.float32).to(v.dtype)
            x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, D))
            h = rms(x, self.n2).view(-1, D)
            # OlmoeSparseMoeBlock: softmax over every expert in fp32, top-k, no renormalisation, per-expert index loop
            probs = torch.softmax(fn.linear(h, self.router), dim=-1, dtype=torch.float32)
            weights, selected = torch.topk(probs, K, dim=-1)
            weights = weights.to(h.dtype)
            out = torch.zeros_like(h)
            expert_mask = fn.one_hot(selected, num_classes=E).permute(2, 1, 0)
            for e in range(E):
                idx, top_x = torch.where(expert_mask[e])
                if top_x.numel() == 0:
                    continue
                gate, up, down = self.experts[e]
                cur = h[top_x]
                y = down(fn.silu(gate(cur)) * up(cur)) * weights[top_x, idx, None]
                out.index_add_(0, top_x, y.to(h.dtype))
            return x + out.view(B, T, D)

    wte, lm_head, norm_f = frozen(V, D), frozen(V, D), torch.ones(D, dtype=base_dtype)
    layers = [Layer(i) for i in range(a.layers)]
    opt = torch.optim.AdamW(trained, lr=1e-4, foreach=True)
    ntrained = sum(t.numel() for t in trained)

    def step(tokens):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            x = fn.embedding(tokens[:, :-1], wte).float() if not bf16 else fn.embedding(tokens[:, :-1], wte)
            for layer in layers:
                x = layer(x)
            logits = fn.linear(rms(x, norm_f), lm_head)
        loss = fn.cross_entropy(logits.float().reshape(-1, V), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    times, losses = [], []
    for _ in range(a.steps):
        tokens = torch.randint(0, V, (a.batch, T + 1))
        t0 = time.perf_counter()
        losses.append(step(tokens))
        times.append(time.perf_counter() - t0)
    print(json.dumps({"tok_s": a.batch * T / statistics.median(times[1:]), "trained": ntrained, "loss": losses}))


# ---------------------------------------------------------------------------------------------------------------

def full_plan_bytes(layers, batch, seq, params):
    """A full fine-tune's planned bytes: 16 per parameter plus activations.ts's saved activations and scratch for
    this shape (mixtral family, q/k projection norm, rope, gated FFN, no capacity factor, untied lm_head)."""
    N, C, Q, A = batch * seq, D, 3 * D, D
    saved = N * C
    for _ in range(layers):
        saved += 5 * N * C + 4 * N + N * A + N * Q * 3 + 2 * N + N * NH
        S = N * K
        saved += 2 * N * E + 2 * N * K + 2 * S * C + S * (2 * F + F)
    saved += N * C + 3 * N + N * V
    S = N * K
    scratch = N * V + 2 * N * C + N * C + 2 * N * Q + 2 * S * C + S * (2 * F + F)
    return 16 * params + 4 * (saved + scratch)


def base_params(layers):
    attn = 4 * D * D + 2 * D  # q, k, v, out, q/k norms
    per_layer = attn + 2 * D + E * D + E * 3 * D * F
    return 2 * V * D + D + layers * per_layer


def lora_params(layers):
    return layers * (4 * RANK * 2 * D + E * RANK * (2 * (D + F) + (F + D)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli")
    ap.add_argument("--data")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--esft-threshold", type=float, default=0.9)
    ap.add_argument("--esft-batches", type=int, default=4)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--ssd-cache", type=int, default=None,
                    help="host cache entries of the SSD run (default: 3/4 of the experts; the 16 slots beside it hold "
                         "gradients only, as the experts compute on the cache's copies in place)")
    ap.add_argument("--ssd-policy", default="next-use", choices=["lru", "lfu", "next-use"])
    ap.add_argument("--ssd-only", action="store_true", help="only the SSD run and its resident run (no BENCH line)")
    ap.add_argument("--torch", choices=["lora", "esft"])
    ap.add_argument("--setup", choices=["fp32", "bf16_autocast"])
    ap.add_argument("--experts", default="{}")
    a = ap.parse_args()
    if a.torch:
        return torch_main(a)
    if not 1 <= a.layers <= 4:
        sys.exit("--layers: 1 to 4")
    if a.ssd_cache is None:
        a.ssd_cache = E * a.layers * 3 // 4
    work = tempfile.mkdtemp(dir=a.workdir)
    if a.ssd_only:
        print_ssd(a, ssd_part(a, work))
        subprocess.run(["rm", "-rf", work], check=True)
        return None

    # ESFT's chosen experts: the engine's measurement over the bench data with the same (fresh, seed 7) model.
    esft_cfg = run_config(a, lora_section(), a.steps)
    esft_cfg.pop("finetune")
    path = os.path.join(work, "measure.json")
    with open(path, "w") as f:
        json.dump(esft_cfg, f)
    measured = json.loads(subprocess.run(
        [a.cli, "esft", "--config", path, "--data", a.data, "--batches", str(a.esft_batches),
         "--threshold", str(a.esft_threshold), "--score", "gate"], check=True, capture_output=True, text=True).stdout)
    experts = measured["experts"]
    print(f"ESFT measurement (gate score, p {a.esft_threshold}, {measured['tokens_seen']} tokens): chosen experts per "
          f"layer {[len(v) for v in experts.values()]} of {E}", flush=True)

    plan = [("lora", run_config(a, lora_section(), a.steps)),
            ("esft", run_config(a, {"method": "esft", "experts": experts}, a.steps))]
    setups = ["fp32", "bf16_autocast"]
    best = {}

    def keep(key, r):
        if key not in best or r["tok_s"] > best[key]["tok_s"]:
            best[key] = r

    for rnd in range(a.rounds):
        for method, cfg in plan:
            print(f"== round {rnd + 1}/{a.rounds} {method}: ours bf16", flush=True)
            keep(("ours", method), ours(a.cli, a.data, work, method, cfg))
            for setup in setups:
                print(f"== round {rnd + 1}/{a.rounds} {method}: PyTorch {setup}", flush=True)
                keep(("torch " + setup, method), torch_child(a, method, setup, experts))

    ssd = ssd_part(a, work)
    subprocess.run(["rm", "-rf", work], check=True)

    print(f"\nmodel: {json.dumps(model_config(a.layers, a.seq))}\nbatch {a.batch} x {a.seq} tokens per step, "
          f"{a.threads} threads, {a.steps} steps (median after the first), best of {a.rounds} rounds")
    print(f"{'method':<8}{'side':<24}{'tok/s':>9}{'trained params':>16}")
    ratio = {}
    for method, _ in plan:
        o = best[("ours", method)]
        n = sum(len(v) for v in experts.values()) * 3 * D * F if method == "esft" else lora_params(a.layers)
        trained = f"{n:,}"
        print(f"{method:<8}{'ours bf16':<24}{o['tok_s']:>9.1f}{trained:>16}")
        for setup in setups:
            t = best[("torch " + setup, method)]
            print(f"{method:<8}{'PyTorch ' + setup:<24}{t['tok_s']:>9.1f}{t['trained']:>16,}")
        faster = max(best[("torch " + s, method)]["tok_s"] for s in setups)
        ratio[method] = o["tok_s"] / faster
        print(f"{method:<8}{'ours / faster PyTorch':<24}{ratio[method]:>9.2f}")

    lora = best[("ours", "lora")]
    params = base_params(a.layers)
    if lora["params"] and lora["params"] != params + lora_params(a.layers):
        print(f"note: the engine counts {lora['params']:,} parameters with adapters; this script {params:,} + "
              f"{lora_params(a.layers):,}", file=sys.stderr)
    plan_bytes = full_plan_bytes(a.layers, a.batch, a.seq, params)
    print(f"\nLoRA peak RSS {lora['rss'] / 1e9:.2f} GB (frozen fp32 masters: {4 * params / 1e9:.2f} GB); full fine-tune "
          f"planned {plan_bytes / 1e9:.2f} GB (16 bytes x {params:,} parameters + activations and scratch as "
          f"main/host/planner/activations.ts)")
    ssd_text = print_ssd(a, ssd)
    print(f"BENCH finetune lora_vs_torch={ratio['lora']:.2f} esft_vs_torch={ratio['esft']:.2f} "
          f"lora_rss_vs_full_plan={lora['rss'] / plan_bytes:.2f} lora_ssd_vs_resident={ssd_text}")


if __name__ == "__main__":
    main()
