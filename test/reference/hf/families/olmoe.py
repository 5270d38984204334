"""OLMoE, after transformers' models/olmoe/modeling_olmoe.py: OlmoeAttention normalises the whole q projection
(q_norm over hidden_size) and the whole k projection (k_norm over head_dim * num_key_value_heads) with RMSNorm
before the head split, then, when clip_qkv is set, clamps q, k and v to [-clip_qkv, clip_qkv], then applies the
half-split rope; no biases. The sparse block is a softmax over every expert, the top-k, renormalised only when
norm_topk_prob; experts are down_proj(silu(gate_proj x) * up_proj x); every layer is sparse."""

import torch

import common as c

MODEL_TYPE = "olmoe"


def cases():
    base = {
        "model_type": "olmoe", "architectures": ["OlmoeForCausalLM"], "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_experts": 6, "num_experts_per_tok": 2, "norm_topk_prob": False, "clip_qkv": None,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "router_aux_loss_coef": 0.0, "attention_bias": False, "torch_dtype": "float32",
    }
    return [
        {"name": "qknorm-noclip-norenorm", "config": base},
        # q/k are RMS-normalised (RMS ~ the norm weights ~ 1) and v ~ 0.6: a limit of 0.9 clamps a share of each.
        {"name": "clip-gqa-renorm-bf16-sharded", "config": {**base, "num_key_value_heads": 2, "clip_qkv": 0.9,
                                                             "norm_topk_prob": True, "rope_theta": 1e6},
         "dtype": "BF16", "shards": 3},
        {"name": "clip-tied-top1-f16", "config": {**base, "clip_qkv": 1.5, "num_experts_per_tok": 1,
                                                  "tie_word_embeddings": True, "num_hidden_layers": 3},
         "dtype": "F16"},
        {"name": "yarn-attention-factor", "config": {**base, "rope_scaling": {
            "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8, "attention_factor": 1.2}}},
    ]


def random_tensors(config, rng):
    C, V, F = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    NH = config["num_attention_heads"]
    NKV = config.get("num_key_value_heads") or NH
    D = C // NH
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}
    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        t[a + "q_proj.weight"] = c.random_tensor(rng, (NH * D, C))
        t[a + "k_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[a + "v_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[a + "o_proj.weight"] = c.random_tensor(rng, (C, NH * D))
        t[a + "q_norm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        t[a + "k_norm.weight"] = c.random_tensor(rng, (NKV * D,), mean=1.0)
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        m = p + "mlp."
        t[m + "gate.weight"] = c.random_tensor(rng, (config["num_experts"], C), std=0.5)
        for e in range(config["num_experts"]):
            x = f"{m}experts.{e}."
            t[x + "gate_proj.weight"] = c.random_tensor(rng, (F, C))
            t[x + "up_proj.weight"] = c.random_tensor(rng, (F, C))
            t[x + "down_proj.weight"] = c.random_tensor(rng, (C, F))
    return c.with_head(config, t, rng)


def attention(config, P, l, x):
    B, T, C = x.shape
    NH = config["num_attention_heads"]
    NKV = config.get("num_key_value_heads") or NH
    D = C // NH
    eps = config.get("rms_norm_eps", 1e-5)
    a = f"model.layers.{l}.self_attn."
    q = c.rms_norm(c.linear(x, P[a + "q_proj.weight"]), P[a + "q_norm.weight"], eps)
    k = c.rms_norm(c.linear(x, P[a + "k_proj.weight"]), P[a + "k_norm.weight"], eps)
    v = c.linear(x, P[a + "v_proj.weight"])
    clip = config.get("clip_qkv")
    if clip is not None:
        q, k, v = q.clamp(-clip, clip), k.clamp(-clip, clip), v.clamp(-clip, clip)
    q = q.view(B, T, NH, D).transpose(1, 2)
    k = k.view(B, T, NKV, D).transpose(1, 2)
    v = v.view(B, T, NKV, D).transpose(1, 2)
    cos, sin = c.rope_cos_sin(T, *c.rope_parameters(config, D))
    q, k = c.apply_rope_half(q, cos, sin), c.apply_rope_half(k, cos, sin)
    att = c.causal_attention(q, k, v, D ** -0.5).transpose(1, 2).reshape(B, T, NH * D)
    return c.linear(att, P[a + "o_proj.weight"])


def forward(config, P, ids, margins):
    def mlp(l, x):
        m = f"model.layers.{l}.mlp."

        def expert(e, rows):
            x_ = f"{m}experts.{e}."
            return c.ffn_swiglu(rows, P[x_ + "gate_proj.weight"], P[x_ + "up_proj.weight"], P[x_ + "down_proj.weight"])

        return c.softmax_topk_moe(x, P[m + "gate.weight"], expert, config["num_experts_per_tok"],
                                  config.get("norm_topk_prob", False), margins)

    return c.decoder(config, P, ids, lambda l, x: attention(config, P, l, x), mlp)
