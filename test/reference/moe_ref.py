"""Plain PyTorch reference of the model family in docs/model.md.

Everything is written with simple torch ops so autograd supplies the gradients; nothing here is meant to be fast.
Parameters are a dict name -> tensor using the names of docs/model.md, and the config is the docs' JSON
(`{"model": {...}, "train": {...}}`) after `resolve_config` filled in the defaults.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

GPT_MOE = "gpt-moe"
MIXTRAL = "mixtral"

MODEL_DEFAULTS = {
    "arch": GPT_MOE, "vocab_size": 256, "d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": None,
    "max_seq_len": 256, "d_ff": 1024, "expert_d_ff": None, "n_experts": 8, "top_k": 2, "moe_every": 1,
    "renormalize": True, "shared_expert_d_ff": 0, "shared_expert_gate": False, "residual_mlp": False,
    "aux_loss_coef": 0.01, "z_loss_coef": 0.0, "capacity_factor": None, "rope_theta": 10000.0,
    "norm_eps": 1e-5, "tie_embeddings": None, "init_std": 0.02,
}
TRAIN_DEFAULTS = {
    "batch_size": 8, "seq_len": 256, "steps": 1000, "grad_accum": 1,
    "lr": 3e-4, "min_lr": 3e-5, "warmup_steps": 100,
    "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "grad_clip": 1.0,
    "seed": 1337, "threads": 2, "checkpoint_every": 0,
}


# ----------------------------------------------------------------------------------------------------------- config

def resolve_config(raw):
    """Fill defaults of a {"model": ..., "train": ...} config and check it; returns a new dict."""
    unknown = set(raw) - {"model", "train"}
    if unknown:
        raise ValueError(f"unknown config section(s): {sorted(unknown)}")
    model = _with_defaults(raw.get("model", {}), MODEL_DEFAULTS, "model")
    train = _with_defaults(raw.get("train", {}), TRAIN_DEFAULTS, "train")
    if model["n_kv_heads"] is None:
        model["n_kv_heads"] = model["n_heads"]
    if model["expert_d_ff"] is None:
        model["expert_d_ff"] = model["d_ff"]
    if model["tie_embeddings"] is None:
        model["tie_embeddings"] = model["arch"] == GPT_MOE
    _check_model(model)
    return {"model": model, "train": train}


def _with_defaults(section, defaults, section_name):
    unknown = set(section) - set(defaults)
    if unknown:
        raise ValueError(f"unknown {section_name} field(s): {sorted(unknown)}")
    return {**defaults, **section}


def _check_model(m):
    if m["arch"] not in (GPT_MOE, MIXTRAL):
        raise ValueError(f"arch must be {GPT_MOE!r} or {MIXTRAL!r}")
    if m["d_model"] % m["n_heads"] or m["n_heads"] % m["n_kv_heads"]:
        raise ValueError("need d_model % n_heads == 0 and n_heads % n_kv_heads == 0")
    if m["arch"] == GPT_MOE and m["n_kv_heads"] != m["n_heads"]:
        raise ValueError("gpt-moe requires n_kv_heads == n_heads")
    if m["shared_expert_gate"] and m["shared_expert_d_ff"] <= 0:
        raise ValueError("shared_expert_gate needs shared_expert_d_ff > 0")
    n_moe = len(moe_layers(m))
    if isinstance(m["n_experts"], list) and len(m["n_experts"]) != n_moe:
        raise ValueError(f"n_experts lists {len(m['n_experts'])} entries for {n_moe} MoE layers")
    for layer in moe_layers(m):
        if not 1 <= m["top_k"] <= layer_experts(m, layer):
            raise ValueError(f"top_k {m['top_k']} invalid for {layer_experts(m, layer)} experts")


def moe_layers(m):
    return [layer for layer in range(m["n_layers"]) if (layer + 1) % m["moe_every"] == 0]


def layer_experts(m, layer):
    """Number of experts of MoE layer `layer` (0 for a dense layer)."""
    layers = moe_layers(m)
    if layer not in layers:
        return 0
    n = m["n_experts"]
    return n[layers.index(layer)] if isinstance(n, list) else n


def head_size(m):
    return m["d_model"] // m["n_heads"]


# ------------------------------------------------------------------------------------------------------- parameters

def param_shapes(m):
    """Name -> shape of every parameter, in the canonical (checkpoint) order."""
    gpt = m["arch"] == GPT_MOE
    C, V, HS = m["d_model"], m["vocab_size"], head_size(m)
    shapes = {"wte": (V, C)}
    if gpt:
        shapes["wpe"] = (m["max_seq_len"], C)
    for layer in range(m["n_layers"]):
        pre = f"layers.{layer}."
        shapes.update(_norm_shapes(pre + "norm1.", C, gpt))
        qkv_rows = (m["n_heads"] + 2 * m["n_kv_heads"]) * HS
        shapes[pre + "attn.qkv.weight"] = (qkv_rows, C)
        if gpt:
            shapes[pre + "attn.qkv.bias"] = (qkv_rows,)
        shapes[pre + "attn.out.weight"] = (C, m["n_heads"] * HS)
        if gpt:
            shapes[pre + "attn.out.bias"] = (C,)
        shapes.update(_norm_shapes(pre + "norm2.", C, gpt))
        n_experts = layer_experts(m, layer)
        if n_experts == 0:
            shapes.update(_ffn_shapes(pre + "mlp.", m["d_ff"], C, gpt))
            continue
        shapes[pre + "moe.router.weight"] = (n_experts, C)
        for e in range(n_experts):
            shapes.update(_ffn_shapes(pre + f"moe.experts.{e}.", m["expert_d_ff"], C, gpt))
        if m["shared_expert_d_ff"] > 0:
            shapes.update(_ffn_shapes(pre + "moe.shared.", m["shared_expert_d_ff"], C, gpt))
            if m["shared_expert_gate"]:
                shapes[pre + "moe.shared_gate.weight"] = (1, C)
        if m["residual_mlp"]:
            shapes.update(_ffn_shapes(pre + "moe.residual.", m["d_ff"], C, gpt))
    shapes.update(_norm_shapes("norm_f.", C, gpt))
    if not m["tie_embeddings"]:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def _norm_shapes(prefix, C, with_bias):
    return {prefix + "weight": (C,), **({prefix + "bias": (C,)} if with_bias else {})}


def _ffn_shapes(prefix, F_, C, gpt):
    if gpt:
        return {prefix + "fc.weight": (F_, C), prefix + "fc.bias": (F_,),
                prefix + "proj.weight": (C, F_), prefix + "proj.bias": (C,)}
    return {prefix + "gate_up.weight": (2 * F_, C), prefix + "down.weight": (C, F_)}


def random_params(m, seed, std=0.1):
    """Test weights: every tensor ~ N(0, std) (biases too, so they matter), norm weights ~ 1 + N(0, std)."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in param_shapes(m).items():
        values = rng.normal(0.0, std, size=shape)
        if "norm" in name and name.endswith(".weight"):
            values += 1.0
        params[name] = values.astype(np.float32)
    return params


def to_torch(params, dtype, requires_grad=False):
    """numpy/tensor dict -> dict of fresh leaf tensors of `dtype`."""
    return {name: torch.tensor(np.asarray(v), dtype=dtype).requires_grad_(requires_grad)
            for name, v in params.items()}


# ---------------------------------------------------------------------------------------------------------- forward

@dataclass
class ForwardResult:
    logits: torch.Tensor          # [B, T, V]
    loss: torch.Tensor            # mean CE over unmasked targets (None without targets)
    reg: torch.Tensor             # sum over MoE layers of aux_loss_coef*aux + z_loss_coef*z
    objective: torch.Tensor       # loss + reg
    aux: list = field(default_factory=list)        # per MoE layer
    z: list = field(default_factory=list)          # per MoE layer
    min_margin: float = math.inf  # smallest gap between router probabilities that decide routing
    dropped: int = 0              # assignments dropped by capacity


def forward(params, m, tokens, targets=None):
    """tokens, targets: int64 [B, T] (target -1 = masked). Computes in the dtype of `params`."""
    B, T = tokens.shape
    gpt = m["arch"] == GPT_MOE
    x = params["wte"][tokens]
    if gpt:
        x = x + params["wpe"][:T]
    rope = None if gpt else rope_tables(T, head_size(m), m["rope_theta"], x.dtype)
    stats = ForwardResult(None, None, x.new_zeros(()), None)
    for layer in range(m["n_layers"]):
        pre = f"layers.{layer}."
        x = x + attention(params, pre + "attn.", m, norm(params, pre + "norm1.", m, x), rope)
        h = norm(params, pre + "norm2.", m, x)
        if layer_experts(m, layer) == 0:
            x = x + ffn(params, pre + "mlp.", m["arch"], h)
        else:
            y, moe = moe_ffn(params, pre + "moe.", m, layer_experts(m, layer), h.reshape(B * T, -1))
            x = x + y.reshape(B, T, -1)
            stats.aux.append(moe.aux)
            stats.z.append(moe.z)
            stats.reg = stats.reg + m["aux_loss_coef"] * moe.aux + m["z_loss_coef"] * moe.z
            stats.min_margin = min(stats.min_margin, moe.min_margin)
            stats.dropped += moe.dropped
    head = params["wte"] if m["tie_embeddings"] else params["lm_head.weight"]
    stats.logits = norm(params, "norm_f.", m, x) @ head.T
    if targets is not None:
        stats.loss = F.cross_entropy(stats.logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
        stats.objective = stats.loss + stats.reg
    return stats


def norm(params, prefix, m, x):
    w, eps = params[prefix + "weight"], m["norm_eps"]
    if m["arch"] == GPT_MOE:
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance
        return (x - mean) / torch.sqrt(var + eps) * w + params[prefix + "bias"]
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_tables(T, HS, theta, dtype):
    """cos/sin [T, HS] for rotate-half RoPE (frequencies repeated for both halves)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, rope):
    cos, sin = rope
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def attention(params, prefix, m, h, rope):
    B, T, _ = h.shape
    NH, NKV, HS = m["n_heads"], m["n_kv_heads"], head_size(m)
    qkv = F.linear(h, params[prefix + "qkv.weight"], params.get(prefix + "qkv.bias"))
    q, k, v = qkv.split([NH * HS, NKV * HS, NKV * HS], dim=-1)
    q = q.reshape(B, T, NH, HS).transpose(1, 2)
    k = k.reshape(B, T, NKV, HS).transpose(1, 2)
    v = v.reshape(B, T, NKV, HS).transpose(1, 2)
    if rope is not None:
        q, k = apply_rope(q, rope), apply_rope(k, rope)
    # GQA: query head j reads kv head j // (NH / NKV)
    k = k.repeat_interleave(NH // NKV, dim=1)
    v = v.repeat_interleave(NH // NKV, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(HS)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, NH * HS)
    return F.linear(a, params[prefix + "out.weight"], params.get(prefix + "out.bias"))


def ffn(params, prefix, arch, x):
    if arch == GPT_MOE:
        hidden = F.gelu(F.linear(x, params[prefix + "fc.weight"], params[prefix + "fc.bias"]), approximate="tanh")
        return F.linear(hidden, params[prefix + "proj.weight"], params[prefix + "proj.bias"])
    gate, up = F.linear(x, params[prefix + "gate_up.weight"]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, params[prefix + "down.weight"])


# -------------------------------------------------------------------------------------------------------------- MoE

@dataclass
class MoeStats:
    aux: torch.Tensor
    z: torch.Tensor
    min_margin: float
    dropped: int


def route(h, router_weight, top_k):
    """Router logits [N, E], probabilities [N, E], chosen experts [N, K] (best first) and their probabilities."""
    logits = h @ router_weight.T
    probs = logits.softmax(-1)
    # a stable descending sort keeps equal probabilities in index order: ties go to the lower expert index
    # (torch.topk gives no such guarantee)
    experts = torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices[:, :top_k]
    return logits, probs, experts, probs.gather(1, experts)


def capacity(capacity_factor, n_tokens, top_k, n_experts):
    return math.ceil(capacity_factor * n_tokens * top_k / n_experts)


def capacity_keep(experts, n_experts, cap):
    """bool [N, K]: which assignments survive. Priority: every token's 1st choice in token order, then every
    2nd choice, ...; an assignment is kept while its expert has fewer than `cap` kept assignments."""
    N, K = experts.shape
    priority = experts.T.reshape(-1)                        # k-major order
    one_hot = F.one_hot(priority, n_experts)
    queue_pos = (one_hot.cumsum(0) * one_hot).sum(-1) - 1   # 0-based position in its expert's queue
    return (queue_pos < cap).reshape(K, N).T


def routing_margin(probs, top_k):
    """Smallest gap between consecutive sorted probabilities among the top k+1: how close routing is to a tie."""
    top = torch.sort(probs.detach(), dim=-1, descending=True).values[:, :top_k + 1]
    if top.shape[1] < 2:
        return math.inf
    return float((top[:, :-1] - top[:, 1:]).min())


def moe_ffn(params, prefix, m, n_experts, h):
    """h [N, C] -> y [N, C] and the layer's router statistics."""
    N, K = h.shape[0], m["top_k"]
    logits, probs, experts, weights = route(h, params[prefix + "router.weight"], K)
    if m["renormalize"]:
        weights = weights / weights.sum(-1, keepdim=True)
    keep = torch.ones_like(experts, dtype=torch.bool)
    if m["capacity_factor"] is not None:
        keep = capacity_keep(experts, n_experts, capacity(m["capacity_factor"], N, K, n_experts))

    y = torch.zeros_like(h)
    for e in range(n_experts):
        token, slot = torch.nonzero((experts == e) & keep, as_tuple=True)
        if token.numel() == 0:
            continue
        out = ffn(params, prefix + f"experts.{e}.", m["arch"], h.index_select(0, token))
        y = y.index_add(0, token, out * weights[token, slot, None])

    if m["shared_expert_d_ff"] > 0:
        shared = ffn(params, prefix + "shared.", m["arch"], h)
        if m["shared_expert_gate"]:
            shared = torch.sigmoid(h @ params[prefix + "shared_gate.weight"].T) * shared
        y = y + shared
    if m["residual_mlp"]:
        y = y + ffn(params, prefix + "residual.", m["arch"], h)

    # Switch aux loss; f_e counts all N*K assignments before dropping and is a constant for autograd
    f = torch.bincount(experts.reshape(-1), minlength=n_experts).to(h.dtype) / (N * K)
    aux = n_experts * (f * probs.mean(0)).sum()
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return y, MoeStats(aux, z, routing_margin(probs, K), int((~keep).sum()))


# --------------------------------------------------------------------------------------------------------- training

def lr_at(step, t):
    """Learning rate of 0-based step `step`: linear warmup, then cosine from lr to min_lr."""
    if step < t["warmup_steps"]:
        return t["lr"] * (step + 1) / t["warmup_steps"]
    progress = (step - t["warmup_steps"]) / max(1, t["steps"] - t["warmup_steps"])
    return t["min_lr"] + 0.5 * (t["lr"] - t["min_lr"]) * (1.0 + math.cos(math.pi * progress))


class Batcher:
    """Consecutive windows of B*T + 1 tokens; wraps to the start when fewer than B*T + 1 tokens remain."""

    def __init__(self, tokens, mask, batch_size, seq_len):
        self.tokens = np.asarray(tokens, dtype=np.int64)
        self.mask = None if mask is None else np.asarray(mask)
        self.B, self.T = batch_size, seq_len
        if self.tokens.size < self.B * self.T + 1:
            raise ValueError(f"{self.tokens.size} tokens are fewer than one batch ({self.B * self.T + 1})")
        self.cursor = 0

    def next(self):
        """inputs, targets: int64 tensors [B, T]; targets are -1 where the mask excludes them."""
        B, T, c = self.B, self.T, self.cursor
        inputs = self.tokens[c:c + B * T].reshape(B, T)
        targets = self.tokens[c + 1:c + B * T + 1].reshape(B, T).copy()
        if self.mask is not None:
            targets[self.mask[c + 1:c + B * T + 1].reshape(B, T) == 0] = -1
        self.cursor += B * T
        if self.tokens.size - self.cursor < B * T + 1:
            self.cursor = 0
        return torch.from_numpy(inputs.copy()), torch.from_numpy(targets)


def make_optimizer(params, t):
    """torch AdamW with weight decay on rank >= 2 tensors only."""
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])


def clip_grad_norm(params, max_norm):
    """Global L2 norm of the gradients (returned, before clipping); when max_norm > 0 scales them by
    max_norm / (norm + 1e-6) if that is below 1, exactly like torch.nn.utils.clip_grad_norm_."""
    total = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params.values()))
    coef = max_norm / (total + 1e-6)
    if max_norm > 0 and coef < 1:
        for p in params.values():
            p.grad.mul_(coef)
    return total


def train_step(params, m, t, optimizer, batcher, step):
    """One optimizer step over grad_accum micro-batches; returns the step's log record."""
    A = t["grad_accum"]
    for p in params.values():
        p.grad = torch.zeros_like(p)  # a tensor without gradient this step (an idle expert) counts as zero grad
    loss = reg = 0.0
    min_margin = math.inf
    for _ in range(A):
        inputs, targets = batcher.next()
        out = forward(params, m, inputs, targets)
        (out.objective / A).backward()
        loss += float(out.loss) / A
        reg += float(out.reg) / A
        min_margin = min(min_margin, out.min_margin)
    grad_norm = clip_grad_norm(params, t["grad_clip"])
    lr = lr_at(step, t)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return {"step": step + 1, "loss": loss, "aux_loss": reg, "lr": lr, "grad_norm": grad_norm,
            "min_margin": min_margin}


def train(params, config, tokens, mask, dtype=torch.float64):
    """Run config["train"]["steps"] steps from `params` (name -> array). Returns (log records, final params)."""
    m, t = config["model"], config["train"]
    weights = to_torch(params, dtype, requires_grad=True)
    optimizer = make_optimizer(weights, t)
    batcher = Batcher(tokens, mask, t["batch_size"], t["seq_len"])
    log = [train_step(weights, m, t, optimizer, batcher, step) for step in range(t["steps"])]
    return log, {name: p.detach() for name, p in weights.items()}
