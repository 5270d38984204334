"""DeepSeek-V2, after transformers' models/deepseek_v2/modeling_deepseek_v2.py: multi-head latent attention
(q_proj or q_a_proj → q_a_layernorm → q_b_proj; kv_a_proj_with_mqa split into the latent and one shared rope key;
kv_a_layernorm, kv_b_proj per head k_nope | v), its rope as complex products of (2i, 2i+1) pairs with YaRN
frequencies and attention factor, softmax scale qk_head_dim^-0.5 (this file applies no mscale to it); layers
before first_k_dense_replace are dense MLPs of intermediate_size, the others softmax routers (greedy, or
group_limited_greedy: groups ranked by their best expert) whose top-k weights are times routed_scaling_factor
and never normalised, plus n_shared_experts × moe_intermediate_size shared experts."""

import torch

import common as c
import mla

MODEL_TYPE = "deepseek_v2"


def cases():
    base = {
        "model_type": "deepseek_v2", "architectures": ["DeepseekV2ForCausalLM"], "vocab_size": 64,
        "hidden_size": 32, "intermediate_size": 40, "moe_intermediate_size": 12, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": None, "kv_lora_rank": 16,
        "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 6, "n_routed_experts": 8,
        "num_experts_per_tok": 2, "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "routed_scaling_factor": 1.5, "norm_topk_prob": False, "topk_method": "greedy", "n_group": None,
        "topk_group": None, "scoring_func": "softmax", "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "aux_loss_alpha": 0.0, "torch_dtype": "float32",
        "rope_scaling": {"type": "yarn", "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.5},
    }
    grouped = {**base, "q_lora_rank": 12, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
               "routed_scaling_factor": 2.0, "rope_scaling": None, "n_shared_experts": 1, "v_head_dim": 20}
    return [
        {"name": "qlora-null-greedy-yarn", "config": base},
        {"name": "qlora-group-limited-bf16-sharded", "config": grouped, "dtype": "BF16", "shards": 3},
        {"name": "group-limited-yarn-f16", "config": {**grouped, "rope_scaling": base["rope_scaling"],
                                                      "first_k_dense_replace": 0, "routed_scaling_factor": 1.0},
         "dtype": "F16"},
    ]


def random_tensors(config, rng):
    return mla.random_tensors(config, rng)


def forward(config, P, ids, margins):
    inv_freq, factor = mla.rope_parameters(config)
    scale = (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5

    def rope(q_pe, k_pe):
        return mla.rope_complex(q_pe, inv_freq, factor), mla.rope_complex(k_pe, inv_freq, factor)

    def attention(l, x):
        return mla.latent_attention(config, P, l, x, rope, scale)

    def route(flat, m):
        probs = torch.softmax(c.linear(flat, P[m + "gate.weight"]), dim=-1)
        K = config["num_experts_per_tok"]
        if config["topk_method"] == "greedy":
            idx = margins.topk(probs, K)
        else:
            mask = mla.group_mask(probs, config["n_group"], config["topk_group"], margins, lambda g: g.max(-1).values)
            idx = margins.topk(probs.masked_fill(~mask, 0.0), K)
        return idx, probs.gather(-1, idx) * config["routed_scaling_factor"]

    def mlp(l, x):
        if not mla.is_moe_layer(config, l):
            return mla.dense_mlp(P, l, x)
        return mla.moe_block(config, P, l, x, route)

    return c.decoder(config, P, ids, attention, mlp)
