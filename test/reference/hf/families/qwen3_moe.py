"""Qwen3-MoE, after transformers' models/qwen3_moe/modeling_qwen3_moe.py: Qwen3MoeAttention projects q/k/v to
heads of head_dim (config.head_dim when given, else hidden_size / num_attention_heads; o_proj maps NH * head_dim
back to hidden_size), normalises each head of q and of k with RMSNorm over head_dim (one weight shared by the
heads) before the half-split rope; q_proj, k_proj, v_proj and o_proj all have biases when attention_bias. Layer l is sparse iff l is not in
mlp_only_layers and (l + 1) % decoder_sparse_step == 0, else a dense SwiGLU MLP of intermediate_size; the sparse
block is a softmax over every expert, the top-k, renormalised when norm_topk_prob, with no shared expert."""

import common as c

MODEL_TYPE = "qwen3_moe"


def cases():
    base = {
        "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 40, "moe_intermediate_size": 16, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 12, "num_experts": 6, "num_experts_per_tok": 2,
        "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [1], "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False, "router_aux_loss_coef": 0.0,
        "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "torch_dtype": "float32",
    }
    return [
        {"name": "headdim12-dense-list-renorm", "config": base},
        {"name": "step2-norenorm-bf16-sharded", "config": {**base, "num_hidden_layers": 4, "decoder_sparse_step": 2,
                                                            "mlp_only_layers": [], "norm_topk_prob": False,
                                                            "head_dim": 8},
         "dtype": "BF16", "shards": 3},
        {"name": "headdim16-list-and-step-f16", "config": {**base, "num_hidden_layers": 4, "decoder_sparse_step": 2,
                                                            "mlp_only_layers": [3], "head_dim": 16,
                                                            "num_key_value_heads": 4, "tie_word_embeddings": True},
         "dtype": "F16"},
        {"name": "attention-bias-bf16", "config": {**base, "attention_bias": True}, "dtype": "BF16"},
        # YaRN as Qwen's long-context recipe adds it to config.json.
        {"name": "yarn-factor4", "config": {**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                                     "original_max_position_embeddings": 16}}},
    ]


def head_dim(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def is_sparse(config, l):
    return l not in (config.get("mlp_only_layers") or []) and config["num_experts"] > 0 and \
        (l + 1) % config.get("decoder_sparse_step", 1) == 0


def random_tensors(config, rng):
    C, V = config["hidden_size"], config["vocab_size"]
    NH = config["num_attention_heads"]
    NKV = config["num_key_value_heads"]
    D = head_dim(config)
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}

    def ffn(prefix, F):
        t[prefix + "gate_proj.weight"] = c.random_tensor(rng, (F, C))
        t[prefix + "up_proj.weight"] = c.random_tensor(rng, (F, C))
        t[prefix + "down_proj.weight"] = c.random_tensor(rng, (C, F))

    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        t[a + "q_proj.weight"] = c.random_tensor(rng, (NH * D, C))
        t[a + "k_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[a + "v_proj.weight"] = c.random_tensor(rng, (NKV * D, C))
        t[a + "o_proj.weight"] = c.random_tensor(rng, (C, NH * D))
        if config.get("attention_bias"):
            for name, rows in (("q_proj", NH * D), ("k_proj", NKV * D), ("v_proj", NKV * D), ("o_proj", C)):
                t[a + name + ".bias"] = c.random_tensor(rng, (rows,))
        t[a + "q_norm.weight"] = c.random_tensor(rng, (D,), mean=1.0)
        t[a + "k_norm.weight"] = c.random_tensor(rng, (D,), mean=1.0)
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        if not is_sparse(config, l):
            ffn(p + "mlp.", config["intermediate_size"])
            continue
        t[p + "mlp.gate.weight"] = c.random_tensor(rng, (config["num_experts"], C), std=0.5)
        for e in range(config["num_experts"]):
            ffn(f"{p}mlp.experts.{e}.", config["moe_intermediate_size"])
    return c.with_head(config, t, rng)


def forward(config, P, ids, margins):
    D = head_dim(config)
    eps = config.get("rms_norm_eps", 1e-6)

    def swiglu(prefix, x):
        return c.ffn_swiglu(x, P[prefix + "gate_proj.weight"], P[prefix + "up_proj.weight"],
                            P[prefix + "down_proj.weight"])

    def attention(l, x):
        a = f"model.layers.{l}.self_attn."

        def per_head(w):
            # [B, T, H * D] -> RMSNorm over each head's D values -> back to [B, T, H * D]
            return lambda y: c.rms_norm(y.view(*y.shape[:-1], -1, D), P[w], eps).reshape(y.shape)

        return c.gqa_attention(config, P, l, x, head_dim=D, q_norm=per_head(a + "q_norm.weight"),
                               k_norm=per_head(a + "k_norm.weight"))

    def mlp(l, x):
        p = f"model.layers.{l}.mlp."
        if not is_sparse(config, l):
            return swiglu(p, x)
        return c.softmax_topk_moe(x, P[p + "gate.weight"], lambda e, rows: swiglu(f"{p}experts.{e}.", rows),
                                  config["num_experts_per_tok"], config.get("norm_topk_prob", False), margins)

    return c.decoder(config, P, ids, attention, mlp)
