"""Pieces of transformers' DeepSeek-V2/V3 modeling code (models/deepseek_v2/modeling_deepseek_v2.py,
models/deepseek_v3/modeling_deepseek_v3.py) shared by both family modules, in float64: the rope part's
frequencies (common.rope_parameters), multi-head latent attention, and the random tensors of the DeepSeek layout
(per-expert MLPs, ungated shared experts, dense-first layers)."""

import torch

import common as c


yarn_mscale = c.yarn_mscale


def rope_parameters(config, dim=None):
    """inv_freq and the attention factor of the rope part (default qk_rope_head_dim wide): common.rope_parameters."""
    return c.rope_parameters(config, dim or config["qk_rope_head_dim"])


def rope_complex(x, inv_freq, factor):
    """DeepSeek-V2's apply_rotary_emb: pairs (2i, 2i+1) as complex numbers times factor·e^(i·t·f), output
    interleaved."""
    T = x.shape[-2]
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    cos, sin = ang.cos() * factor, ang.sin() * factor
    re, im = x[..., 0::2], x[..., 1::2]
    out = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1)
    return out.flatten(-2)


def latent_attention(config, P, l, x, rope, scale):
    """DeepseekV2Attention / DeepseekV3Attention forward; rope(q_pe, k_pe) applies the family's rotation."""
    B, T, C = x.shape
    NH = config["num_attention_heads"]
    dn, dr, dv = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    kvr = config["kv_lora_rank"]
    a = f"model.layers.{l}.self_attn."
    if config.get("q_lora_rank") is None:
        q = c.linear(x, P[a + "q_proj.weight"])
    else:
        q = c.linear(c.rms_norm(c.linear(x, P[a + "q_a_proj.weight"]), P[a + "q_a_layernorm.weight"], 1e-6),
                     P[a + "q_b_proj.weight"])
    q = q.view(B, T, NH, dn + dr).transpose(1, 2)
    q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
    ckv = c.linear(x, P[a + "kv_a_proj_with_mqa.weight"])
    k_nope, k_pe = torch.split(ckv, [kvr, dr], dim=-1)
    kv = c.linear(c.rms_norm(k_nope, P[a + "kv_a_layernorm.weight"], 1e-6), P[a + "kv_b_proj.weight"])
    kv = kv.view(B, T, NH, dn + dv).transpose(1, 2)
    k_nope, v = torch.split(kv, [dn, dv], dim=-1)
    k_pe = k_pe.view(B, 1, T, dr)
    q_pe, k_pe = rope(q_pe, k_pe)
    k_pe = k_pe.expand(B, NH, T, dr)
    att = c.causal_attention(torch.cat([q_nope, q_pe], -1), torch.cat([k_nope, k_pe], -1), v, scale)
    att = att.transpose(1, 2).reshape(B, T, NH * dv)
    return c.linear(att, P[a + "o_proj.weight"])


def is_moe_layer(config, l):
    return l >= config.get("first_k_dense_replace", 0)


def random_tensors(config, rng, correction_bias=False):
    C, V = config["hidden_size"], config["vocab_size"]
    NH = config["num_attention_heads"]
    dn, dr, dv = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    kvr, qr = config["kv_lora_rank"], config.get("q_lora_rank")
    E, F = config["n_routed_experts"], config["moe_intermediate_size"]
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}

    def mlp(prefix, width):
        t[prefix + "gate_proj.weight"] = c.random_tensor(rng, (width, C))
        t[prefix + "up_proj.weight"] = c.random_tensor(rng, (width, C))
        t[prefix + "down_proj.weight"] = c.random_tensor(rng, (C, width))

    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        if qr is None:
            t[a + "q_proj.weight"] = c.random_tensor(rng, (NH * (dn + dr), C))
        else:
            t[a + "q_a_proj.weight"] = c.random_tensor(rng, (qr, C))
            t[a + "q_a_layernorm.weight"] = c.random_tensor(rng, (qr,), mean=1.0)
            t[a + "q_b_proj.weight"] = c.random_tensor(rng, (NH * (dn + dr), qr), std=0.3)
        t[a + "kv_a_proj_with_mqa.weight"] = c.random_tensor(rng, (kvr + dr, C))
        t[a + "kv_a_layernorm.weight"] = c.random_tensor(rng, (kvr,), mean=1.0)
        t[a + "kv_b_proj.weight"] = c.random_tensor(rng, (NH * (dn + dv), kvr), std=0.3)
        t[a + "o_proj.weight"] = c.random_tensor(rng, (C, NH * dv))
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        if not is_moe_layer(config, l):
            mlp(p + "mlp.", config["intermediate_size"])
            continue
        t[p + "mlp.gate.weight"] = c.random_tensor(rng, (E, C), std=0.5)
        if correction_bias:
            t[p + "mlp.gate.e_score_correction_bias"] = c.random_tensor(rng, (E,), std=0.1)
        for e in range(E):
            mlp(f"{p}mlp.experts.{e}.", F)
        mlp(p + "mlp.shared_experts.", F * config["n_shared_experts"])
    return c.with_head(config, t, rng)


def moe_block(config, P, l, x, route):
    """Routed experts weighted by route(flat x) -> (idx [N, K], w [N, K]), plus the shared experts."""
    B, T, C = x.shape
    m = f"model.layers.{l}.mlp."
    flat = x.reshape(-1, C)
    idx, w = route(flat, m)
    out = torch.zeros_like(flat)
    for e in range(config["n_routed_experts"]):
        rows, slot = (idx == e).nonzero(as_tuple=True)
        if rows.numel():
            x_ = f"{m}experts.{e}."
            y = c.ffn_swiglu(flat[rows], P[x_ + "gate_proj.weight"], P[x_ + "up_proj.weight"], P[x_ + "down_proj.weight"])
            out = out.index_add(0, rows, y * w[rows, slot].unsqueeze(-1))
    s = m + "shared_experts."
    shared = c.ffn_swiglu(flat, P[s + "gate_proj.weight"], P[s + "up_proj.weight"], P[s + "down_proj.weight"])
    return (out + shared).view(B, T, C)


def dense_mlp(P, l, x):
    m = f"model.layers.{l}.mlp."
    return c.ffn_swiglu(x, P[m + "gate_proj.weight"], P[m + "up_proj.weight"], P[m + "down_proj.weight"])


def group_mask(scores_for_groups, G, topk_group, margins, reduce):
    """The experts of the topk_group groups with the largest reduce(group) scores, as a bool mask [N, E]."""
    N, E = scores_for_groups.shape
    group_scores = reduce(scores_for_groups.view(N, G, E // G))
    gidx = margins.topk(group_scores, topk_group)
    mask = torch.zeros(N, G, dtype=torch.bool)
    mask.scatter_(1, gidx, True)
    return mask.unsqueeze(-1).expand(N, G, E // G).reshape(N, E)
