#!/usr/bin/python3
"""PyTorch-eager training throughput of a model config (docs/model.md), the baseline the engine is compared with.

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp LD_PRELOAD=libtcmalloc_minimal.so.4 \
        /usr/bin/python3 test/reference/torch_train_bench.py [CONFIG.json] [--threads 2] [--warmup 2] [--steps 5] [--max-seconds S]

Without CONFIG.json it runs the `tiny` preset (mixtral arch: L=4, d_model 256, 4 heads, seq 256, batch 8, vocab 256,
8 SwiGLU experts of d_ff 1024, top-2). Random tokens, fp32 (or, with --autocast-bf16, the forward
under torch.autocast("cpu", bfloat16), PyTorch's own mixed precision); times forward + backward + clipping + AdamW
steps and prints one JSON line with "tokens_per_s".

The MoE layer is the fast eager formulation: sort the N*K assignments by expert once, gather the tokens into
contiguous per-expert segments, one matmul chain per expert, scale by the routing weights, one index_add back.
Parameter names equal the checkpoint names (self_test.py checks this model against moe_ref.py).
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_ref  # noqa: E402

TINY_PRESET = {
    "model": {"arch": "mixtral", "vocab_size": 256, "d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": 4,
              "max_seq_len": 256, "d_ff": 1024, "expert_d_ff": 1024, "n_experts": 8, "top_k": 2},
    "train": {"batch_size": 8, "seq_len": 256},
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(m):
    if m["arch"] == moe_ref.GPT_MOE:
        return nn.LayerNorm(m["d_model"], eps=m["norm_eps"])
    return RMSNorm(m["d_model"], m["norm_eps"])


class FFN(nn.Module):
    """gpt-moe: proj(gelu_tanh(fc(x))); mixtral: down(silu(gate(x)) * up(x)) with gate and up fused."""

    def __init__(self, m, width):
        super().__init__()
        C = m["d_model"]
        self.gpt = m["arch"] == moe_ref.GPT_MOE
        if self.gpt:
            self.fc, self.proj = nn.Linear(C, width), nn.Linear(width, C)
        else:
            self.gate_up, self.down = nn.Linear(C, 2 * width, bias=False), nn.Linear(width, C, bias=False)

    def forward(self, x):
        if self.gpt:
            return self.proj(F.gelu(self.fc(x), approximate="tanh"))
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Attention(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.NH, self.NKV, self.HS = m["n_heads"], m["n_kv_heads"], moe_ref.head_size(m)
        gpt = m["arch"] == moe_ref.GPT_MOE
        self.qkv = nn.Linear(m["d_model"], (self.NH + 2 * self.NKV) * self.HS, bias=gpt)
        self.out = nn.Linear(self.NH * self.HS, m["d_model"], bias=gpt)

    def forward(self, x, causal_mask, rope):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split([self.NH * self.HS, self.NKV * self.HS, self.NKV * self.HS], dim=-1)
        q = q.view(B, T, self.NH, self.HS).transpose(1, 2)
        k = k.view(B, T, self.NKV, self.HS).transpose(1, 2)
        v = v.view(B, T, self.NKV, self.HS).transpose(1, 2)
        if rope is not None:
            q, k = moe_ref.apply_rope(q, rope), moe_ref.apply_rope(k, rope)
        if self.NKV != self.NH:
            k = k.repeat_interleave(self.NH // self.NKV, dim=1)
            v = v.repeat_interleave(self.NH // self.NKV, dim=1)
        scores = torch.baddbmm(causal_mask.expand(B * self.NH, T, T), q.reshape(B * self.NH, T, self.HS),
                               k.reshape(B * self.NH, T, self.HS).transpose(1, 2), alpha=1.0 / math.sqrt(self.HS))
        a = torch.bmm(scores.softmax(-1), v.reshape(B * self.NH, T, self.HS))
        return self.out(a.view(B, self.NH, T, self.HS).transpose(1, 2).reshape(B, T, self.NH * self.HS))


class MoE(nn.Module):
    def __init__(self, m, n_experts):
        super().__init__()
        if m["capacity_factor"] is not None:
            raise ValueError("the benchmark implements dropless routing only (capacity_factor null)")
        self.E, self.K, self.renormalize = n_experts, m["top_k"], m["renormalize"]
        self.router = nn.Linear(m["d_model"], n_experts, bias=False)
        self.experts = nn.ModuleList(FFN(m, m["expert_d_ff"]) for _ in range(n_experts))
        if m["shared_expert_d_ff"] > 0:
            self.shared = FFN(m, m["shared_expert_d_ff"])
            if m["shared_expert_gate"]:
                self.shared_gate = nn.Linear(m["d_model"], 1, bias=False)
        if m["residual_mlp"]:
            self.residual = FFN(m, m["d_ff"])

    def forward(self, h):
        """h [N, C] -> y [N, C], aux, z."""
        N = h.shape[0]
        logits = self.router(h)
        probs = logits.softmax(-1)
        weights, experts = probs.topk(self.K, dim=-1)
        if self.renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
        flat_experts = experts.view(-1)
        order = flat_experts.argsort()
        token = order // self.K                       # token of each assignment, grouped by expert
        counts = torch.bincount(flat_experts, minlength=self.E)
        segments = h.index_select(0, token).split(counts.tolist())
        outputs = [expert(seg) for expert, seg in zip(self.experts, segments) if seg.shape[0]]
        routed = torch.cat(outputs) * weights.view(-1).index_select(0, order).unsqueeze(1)
        y = torch.zeros_like(h).index_add(0, token, routed.to(h.dtype))
        if hasattr(self, "shared"):
            shared = self.shared(h)
            y = y + (torch.sigmoid(self.shared_gate(h)) * shared if hasattr(self, "shared_gate") else shared)
        if hasattr(self, "residual"):
            y = y + self.residual(h)
        aux = self.E * (counts.to(h.dtype) / (N * self.K) * probs.mean(0)).sum()
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        return y, aux, z


class Block(nn.Module):
    def __init__(self, m, layer):
        super().__init__()
        self.norm1, self.attn, self.norm2 = make_norm(m), Attention(m), make_norm(m)
        n_experts = moe_ref.layer_experts(m, layer)
        if n_experts:
            self.moe = MoE(m, n_experts)
        else:
            self.mlp = FFN(m, m["d_ff"])

    def forward(self, x, causal_mask, rope):
        x = x + self.attn(self.norm1(x), causal_mask, rope)
        h = self.norm2(x)
        if hasattr(self, "mlp"):
            return x + self.mlp(h), None
        B, T, C = h.shape
        y, aux, z = self.moe(h.reshape(B * T, C))
        return x + y.view(B, T, C), (aux, z)


class MoeModel(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
        C, V = m["d_model"], m["vocab_size"]
        self.wte = nn.Parameter(torch.empty(V, C))
        if m["arch"] == moe_ref.GPT_MOE:
            self.wpe = nn.Parameter(torch.empty(m["max_seq_len"], C))
        self.layers = nn.ModuleList(Block(m, layer) for layer in range(m["n_layers"]))
        self.norm_f = make_norm(m)
        if not m["tie_embeddings"]:
            self.lm_head = nn.Linear(C, V, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        """docs/model.md's distributions: N(0, init_std), output projections scaled by 1/sqrt(2L), biases 0."""
        std = self.m["init_std"]
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name:
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                elif name.endswith("bias"):
                    p.zero_()
                elif name.endswith(("out.weight", "proj.weight", "down.weight")):
                    p.normal_(0.0, std / math.sqrt(2 * self.m["n_layers"]))
                else:
                    p.normal_(0.0, std)

    def forward(self, tokens, targets):
        """Returns (mean CE over unmasked targets, sum of the aux and z regularisers)."""
        m = self.m
        B, T = tokens.shape
        x = F.embedding(tokens, self.wte)
        rope = None
        if m["arch"] == moe_ref.GPT_MOE:
            x = x + self.wpe[:T]
        else:
            rope = moe_ref.rope_tables(T, moe_ref.head_size(m), m["rope_theta"], x.dtype)
        causal_mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)
        reg = x.new_zeros(())
        for block in self.layers:
            x, router_losses = block(x, causal_mask, rope)
            if router_losses is not None:
                reg = reg + m["aux_loss_coef"] * router_losses[0] + m["z_loss_coef"] * router_losses[1]
        head = self.wte if m["tie_embeddings"] else self.lm_head.weight
        logits = F.linear(self.norm_f(x), head)
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(-1), ignore_index=-1)
        return loss, reg


def load_config(path):
    if path is None:
        return moe_ref.resolve_config(TINY_PRESET)
    with open(path) as f:
        return moe_ref.resolve_config(json.load(f))


def train_steps(model, optimizer, t, batches, first_step, n_steps, autocast_bf16):
    for step in range(first_step, first_step + n_steps):
        lr = moe_ref.lr_at(step, t)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        for tokens, targets in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
                loss, reg = model(tokens, targets)
            ((loss + reg) / len(batches)).backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        optimizer.step()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", help="config JSON (docs/model.md); default: the tiny preset")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=5, help="timed steps")
    parser.add_argument("--max-seconds", type=float, default=0,
                        help="stop timing after this many seconds (at least 2 timed steps); 0: run every step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--autocast-bf16", action="store_true", help="run the forward under bf16 autocast")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    config = load_config(args.config)
    m, t = config["model"], config["train"]
    B, T, A = t["batch_size"], t["seq_len"], t["grad_accum"]
    model = MoeModel(m)
    params = dict(model.named_parameters())
    optimizer = moe_ref.make_optimizer(params, t)
    ids = torch.randint(0, m["vocab_size"], (A, B, T + 1))
    batches = [(ids[a, :, :-1], ids[a, :, 1:]) for a in range(A)]

    # A setup that takes many seconds a step (bf16 autocast on a CPU without bf16 units) stops its warm-up after one
    # step and its timing after two, once --max-seconds have passed: per-step noise is small beside such steps.
    warmup = 0
    while warmup < args.warmup:
        began = time.perf_counter()
        train_steps(model, optimizer, t, batches, warmup, 1, args.autocast_bf16)
        warmup += 1
        if args.max_seconds and time.perf_counter() - began > args.max_seconds / 4:
            break
    start = time.perf_counter()
    timed = 0
    while timed < args.steps:
        train_steps(model, optimizer, t, batches, warmup + timed, 1, args.autocast_bf16)
        timed += 1
        if args.max_seconds and timed >= 2 and time.perf_counter() - start > args.max_seconds:
            break
    elapsed = time.perf_counter() - start
    tokens = timed * A * B * T
    # the load average and BLAS/OpenMP settings decide whether a number is meaningful (README.md), so record them
    environment = {k: os.environ.get(k) for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "OMP_WAIT_POLICY")}
    print(json.dumps({"tokens_per_s": tokens / elapsed, "step_ms": 1000 * elapsed / timed,
                      "timed_steps": timed, "warmup_steps": warmup, "tokens_per_step": A * B * T,
                      "threads": args.threads, "autocast_bf16": args.autocast_bf16, "params": sum(p.numel() for p in params.values()),
                      "torch": torch.__version__, "loadavg_1min": os.getloadavg()[0], "env": environment}))


if __name__ == "__main__":
    main()
