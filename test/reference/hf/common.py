"""Building blocks for the per-family references of Hugging Face modeling code, in float64 PyTorch.

Each family module under families/ implements its `modeling_*.py` forward from these pieces; nothing here
knows a family. Routing helpers record the smallest gap that decided a choice (`Margins`), so the driver can
redraw weights whose routing rounding could flip.
"""

import math

import numpy as np
import torch


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


def silu(x):
    return x * torch.sigmoid(x)


def rope_inv_freq(dim, theta):
    """Default rope: inv_freq[i] = theta^(-2i/dim) for i < dim/2."""
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_parameters(config, dim):
    """inv_freq [dim/2] and the attention factor of a rope part `dim` wide, as modeling_rope_utils.py's
    _compute_default_rope_parameters / _compute_yarn_parameters compute them from the config's rope_scaling (or
    rope_parameters): the explicit factor, as current transformers reads it (rope_parameters' validation warns
    where max_position_embeddings / original_max_position_embeddings says otherwise and keeps the factor)."""
    base = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta") or 10000.0
    inv_freq = rope_inv_freq(dim, base)
    rs = config.get("rope_scaling") or config.get("rope_parameters")
    if not rs or rs.get("rope_type", rs.get("type")) in (None, "default"):
        return inv_freq, 1.0
    factor = rs["factor"]
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = yarn_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1
    original = rs.get("original_max_position_embeddings") or config["max_position_embeddings"]

    def correction_dim(rot):
        return (dim * math.log(original / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv = (1.0 / (factor * pos)) * (1 - extrapolation) + (1.0 / pos) * extrapolation
    return inv, attention_factor


def rope_cos_sin(T, inv_freq, attention_factor=1.0):
    """cos and sin [T, dim] in the half-split layout ("rotate_half": frequencies repeated twice)."""
    t = torch.arange(T, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos() * attention_factor, emb.sin() * attention_factor


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope_half(x, cos, sin):
    """x [..., T, dim] rotated in the half-split layout (LLaMA, Mixtral, Qwen, OLMoE, gpt-oss)."""
    return x * cos + rotate_half(x) * sin


def apply_rope_interleaved(x, cos, sin):
    """x [..., T, dim] rotated by pairs (x[2i], x[2i+1]) (DeepSeek's rope part): de-interleave, rotate half,
    which is what the DeepSeek modeling code does before rotate_half."""
    *lead, T, d = x.shape
    x = x.reshape(*lead, T, d // 2, 2).transpose(-1, -2).reshape(*lead, T, d)
    return apply_rope_half(x, cos, sin)


def causal_attention(q, k, v, scale, sinks=None, window=None):
    """q [B, NH, T, D], k [B, NKV, T, D], v [B, NKV, T, Dv] -> [B, NH, T, Dv].

    GQA by repeating kv heads; sinks [NH]: a learned logit per head in the softmax denominator (gpt-oss);
    window: a query sees only the last `window` keys (itself included)."""
    B, NH, T, _ = q.shape
    rep = NH // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)) * scale
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    allowed = j <= i
    if window is not None:
        allowed = allowed & (i - j < window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        sink = sinks.view(1, NH, 1, 1).expand(B, NH, T, 1)
        full = torch.cat([scores, sink], dim=-1)
        probs = torch.softmax(full, dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return probs @ v


class Margins:
    """The smallest gap between a chosen and the best unchosen score over every routing decision."""

    def __init__(self):
        self.value = math.inf

    def topk(self, scores, k):
        """Indices of the k largest scores per row, descending, ties to the lower index; records the margin."""
        s = scores.detach()
        order = torch.sort(-s, dim=-1, stable=True).indices
        chosen = order[..., :k]
        if s.shape[-1] > k:
            kth = s.gather(-1, order[..., k - 1:k])
            nxt = s.gather(-1, order[..., k:k + 1])
            self.value = min(self.value, float((kth - nxt).min()))
        return chosen


def random_tensor(rng, shape, std=0.1, mean=0.0):
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def with_head(config, t, rng):
    """Adds the final norm and (untied) lm_head to the tensors t of a LLaMA-named model."""
    C, V = config["hidden_size"], config["vocab_size"]
    t["model.norm.weight"] = random_tensor(rng, (C,), mean=1.0)
    if not config.get("tie_word_embeddings", False):
        t["lm_head.weight"] = random_tensor(rng, (V, C))
    return t


def ffn_swiglu(x, gate_w, up_w, down_w, gate_b=None, up_b=None, down_b=None):
    return linear(silu(linear(x, gate_w, gate_b)) * linear(x, up_w, up_b), down_w, down_b)


def decoder(config, P, ids, attention, mlp, final_norm="model.norm.weight"):
    """The pre-norm decoder every family here shares (LLaMA-style names): embed, then per layer
    h += attention(l, rms_norm(h)); h += mlp(l, rms_norm(h)); a final norm and the head (tied when the config
    says tie_word_embeddings). attention(l, x [B, T, C]) and mlp(l, x) are the family's."""
    eps = config.get("rms_norm_eps", 1e-6)
    h = P["model.embed_tokens.weight"][ids]
    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = h + attention(l, rms_norm(h, P[p + "input_layernorm.weight"], eps))
        h = h + mlp(l, rms_norm(h, P[p + "post_attention_layernorm.weight"], eps))
    h = rms_norm(h, P[final_norm], eps)
    head = P["model.embed_tokens.weight"] if config.get("tie_word_embeddings", False) else P["lm_head.weight"]
    return h @ head.T


def gqa_attention(config, P, l, x, head_dim=None, q_norm=None, k_norm=None, scale=None, window=None, sinks=None,
                  inv_freq=None, attention_factor=1.0):
    """q/k/v projections (biases when present), optional q/k norms (callables on [B, T, H, D] or the flat
    projection, the family decides), half-split rope, causal softmax attention and o_proj."""
    B, T, C = x.shape
    NH = config["num_attention_heads"]
    NKV = config.get("num_key_value_heads") or NH
    D = head_dim or C // NH
    a = f"model.layers.{l}.self_attn."
    q = linear(x, P[a + "q_proj.weight"], P.get(a + "q_proj.bias"))
    k = linear(x, P[a + "k_proj.weight"], P.get(a + "k_proj.bias"))
    v = linear(x, P[a + "v_proj.weight"], P.get(a + "v_proj.bias"))
    if q_norm is not None:
        q, k = q_norm(q), k_norm(k)
    q = q.view(B, T, NH, D).transpose(1, 2)
    k = k.view(B, T, NKV, D).transpose(1, 2)
    v = v.view(B, T, NKV, D).transpose(1, 2)
    if inv_freq is None:
        inv_freq, attention_factor = rope_parameters(config, D)
    cos, sin = rope_cos_sin(T, inv_freq, attention_factor)
    q, k = apply_rope_half(q, cos, sin), apply_rope_half(k, cos, sin)
    att = causal_attention(q, k, v, scale if scale is not None else D ** -0.5, sinks=sinks, window=window)
    att = att.transpose(1, 2).reshape(B, T, NH * D)
    return linear(att, P[a + "o_proj.weight"], P.get(a + "o_proj.bias"))


def softmax_topk_moe(x, router_w, experts, k, renormalize, margins, router_b=None):
    """Softmax over every expert, top-k, optional renormalisation; experts(e, rows) computes expert e."""
    B, T, C = x.shape
    flat = x.reshape(-1, C)
    probs = torch.softmax(linear(flat, router_w, router_b), dim=-1)
    idx = margins.topk(probs, k)
    w = probs.gather(-1, idx)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    out = torch.zeros_like(flat)
    for e in range(router_w.shape[0]):
        rows, slot = (idx == e).nonzero(as_tuple=True)
        if rows.numel():
            out = out.index_add(0, rows, experts(e, flat[rows]) * w[rows, slot].unsqueeze(-1))
    return out.view(B, T, C)
