"""Mixtral, after transformers' models/mixtral/modeling_mixtral.py: LLaMA attention (GQA, half-split rope, no
biases) and a sparse MoE block whose router takes a softmax over every expert, the top-k and always
renormalises; experts are w2(silu(w1 x) * w3 x). Newer transformers (its conversion_mapping.py for "mixtral")
stores the experts fused: model.layers.<l>.mlp.gate.weight, mlp.experts.gate_up_proj [E, 2F, C] (w1 rows then w3
rows; gate, up = F.linear(x, gate_up_proj[e]).chunk(2)) and mlp.experts.down_proj [E, C, F]."""

import numpy as np

import common as c

MODEL_TYPE = "mixtral"


def cases():
    base = {
        "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "router_aux_loss_coef": 0.0,
        "sliding_window": None, "router_jitter_noise": 0.0, "torch_dtype": "float32",
    }
    return [
        {"name": "gqa-top2", "config": base},
        {"name": "yarn-factor2-bf16", "config": {**base, "rope_scaling": {"rope_type": "yarn", "factor": 2.0,
                                                                          "original_max_position_embeddings": 32}},
         "dtype": "BF16"},
        {"name": "top1-bf16-sharded", "config": {**base, "num_experts_per_tok": 1, "rope_theta": 1e6},
         "dtype": "BF16", "shards": 3},
        {"name": "fused-experts", "config": base, "experts": "fused"},
    ]


def fuse(config, t):
    """The per-expert tensors t in the fused layout."""
    out = {}
    E = config["num_local_experts"]
    for name, a in t.items():
        if ".block_sparse_moe.experts." not in name:
            out[name.replace(".block_sparse_moe.gate.", ".mlp.gate.")] = a
    for l in range(config["num_hidden_layers"]):
        m = f"model.layers.{l}.block_sparse_moe.experts."
        out[f"model.layers.{l}.mlp.experts.gate_up_proj"] = np.stack(
            [np.concatenate([t[f"{m}{e}.w1.weight"], t[f"{m}{e}.w3.weight"]], axis=0) for e in range(E)])
        out[f"model.layers.{l}.mlp.experts.down_proj"] = np.stack([t[f"{m}{e}.w2.weight"] for e in range(E)])
    return out


def random_tensors(config, rng):
    C, V, F = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    NH = config["num_attention_heads"]
    NKV = config["num_key_value_heads"]
    D = C // NH
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}
    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        t[p + "self_attn.q_proj.weight"] = c.random_tensor(rng, (NH * D, C))
        t[p + "self_attn.k_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[p + "self_attn.v_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[p + "self_attn.o_proj.weight"] = c.random_tensor(rng, (C, NH * D))
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        m = p + "block_sparse_moe."
        t[m + "gate.weight"] = c.random_tensor(rng, (config["num_local_experts"], C), std=0.5)
        for e in range(config["num_local_experts"]):
            x = f"{m}experts.{e}."
            t[x + "w1.weight"] = c.random_tensor(rng, (F, C))
            t[x + "w3.weight"] = c.random_tensor(rng, (F, C))
            t[x + "w2.weight"] = c.random_tensor(rng, (C, F))
    return c.with_head(config, t, rng)


def forward(config, P, ids, margins):
    def attention(l, x):
        return c.gqa_attention(config, P, l, x)

    def mlp(l, x):
        m = f"model.layers.{l}.block_sparse_moe."
        fused = f"model.layers.{l}.mlp."
        if fused + "gate.weight" in P:
            def fused_expert(e, rows):
                gate, up = c.linear(rows, P[fused + "experts.gate_up_proj"][e]).chunk(2, dim=-1)
                return c.linear(c.silu(gate) * up, P[fused + "experts.down_proj"][e])

            return c.softmax_topk_moe(x, P[fused + "gate.weight"], fused_expert, config["num_experts_per_tok"], True,
                                      margins)

        def expert(e, rows):
            x_ = f"{m}experts.{e}."
            return c.ffn_swiglu(rows, P[x_ + "w1.weight"], P[x_ + "w3.weight"], P[x_ + "w2.weight"])

        return c.softmax_topk_moe(x, P[m + "gate.weight"], expert, config["num_experts_per_tok"], True, margins)

    return c.decoder(config, P, ids, attention, mlp)
