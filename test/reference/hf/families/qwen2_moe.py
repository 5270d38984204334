"""Qwen2-MoE, after transformers' models/qwen2_moe/modeling_qwen2_moe.py: LLaMA attention with q/k/v biases
(config.qkv_bias, default true; o_proj never has one);
layer l is sparse iff l is not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0, else a dense SwiGLU MLP
of intermediate_size; the sparse block is softmax top-k (renormalised when norm_topk_prob) over experts of
moe_intermediate_size, plus a shared expert scaled by sigmoid(shared_expert_gate(x))."""

import torch

import common as c

MODEL_TYPE = "qwen2_moe"


def cases():
    base = {
        "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 40, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4,
        "num_experts_per_tok": 2, "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "router_aux_loss_coef": 0.0, "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
        "torch_dtype": "float32",
    }
    return [
        {"name": "shared-gated-norenorm", "config": base},
        {"name": "renorm-every2-f16", "config": {**base, "num_hidden_layers": 4, "decoder_sparse_step": 2,
                                                  "norm_topk_prob": True, "max_window_layers": 4},
         "dtype": "F16"},
        {"name": "dense-list-and-step-bf16-sharded",
         "config": {**base, "num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [0, 3],
                    "max_window_layers": 4},
         "dtype": "BF16", "shards": 2},
        {"name": "dense-list-renorm", "config": {**base, "num_hidden_layers": 3, "mlp_only_layers": [1],
                                                 "norm_topk_prob": True, "max_window_layers": 3}},
        {"name": "no-qkv-bias", "config": {**base, "qkv_bias": False}},
        # The older "type" key, no original length (the config's max_position_embeddings), a narrower ramp.
        {"name": "yarn-legacy-type", "config": {**base, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                         "beta_fast": 16.0}}},
    ]


def is_sparse(config, l):
    return l not in config.get("mlp_only_layers", []) and config["num_experts"] > 0 and \
        (l + 1) % config.get("decoder_sparse_step", 1) == 0


def random_tensors(config, rng):
    C, V = config["hidden_size"], config["vocab_size"]
    NH = config["num_attention_heads"]
    NKV = config["num_key_value_heads"]
    D = C // NH
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}

    def ffn(prefix, F):
        t[prefix + "gate_proj.weight"] = c.random_tensor(rng, (F, C))
        t[prefix + "up_proj.weight"] = c.random_tensor(rng, (F, C))
        t[prefix + "down_proj.weight"] = c.random_tensor(rng, (C, F))

    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        for name, rows in (("q_proj", NH * D), ("k_proj", NKV * D), ("v_proj", NKV * D)):
            t[p + f"self_attn.{name}.weight"] = c.random_tensor(rng, (rows, C))
            if config.get("qkv_bias", True):
                t[p + f"self_attn.{name}.bias"] = c.random_tensor(rng, (rows,))
        t[p + "self_attn.o_proj.weight"] = c.random_tensor(rng, (C, NH * D))
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        if not is_sparse(config, l):
            ffn(p + "mlp.", config["intermediate_size"])
            continue
        t[p + "mlp.gate.weight"] = c.random_tensor(rng, (config["num_experts"], C), std=0.5)
        for e in range(config["num_experts"]):
            ffn(f"{p}mlp.experts.{e}.", config["moe_intermediate_size"])
        ffn(p + "mlp.shared_expert.", config["shared_expert_intermediate_size"])
        t[p + "mlp.shared_expert_gate.weight"] = c.random_tensor(rng, (1, C))
    return c.with_head(config, t, rng)


def forward(config, P, ids, margins):
    def swiglu(prefix, x):
        return c.ffn_swiglu(x, P[prefix + "gate_proj.weight"], P[prefix + "up_proj.weight"],
                            P[prefix + "down_proj.weight"])

    def attention(l, x):
        return c.gqa_attention(config, P, l, x)

    def mlp(l, x):
        p = f"model.layers.{l}.mlp."
        if not is_sparse(config, l):
            return swiglu(p, x)
        routed = c.softmax_topk_moe(x, P[p + "gate.weight"], lambda e, rows: swiglu(f"{p}experts.{e}.", rows),
                                    config["num_experts_per_tok"], config.get("norm_topk_prob", False), margins)
        shared = swiglu(p + "shared_expert.", x) * torch.sigmoid(c.linear(x, P[p + "shared_expert_gate.weight"]))
        return routed + shared

    return c.decoder(config, P, ids, attention, mlp)
