"""DeepSeek-V3, after transformers' models/deepseek_v3/modeling_deepseek_v3.py: the latent attention of
DeepSeek-V2 with the rope part de-interleaved then rotated by halves (rope_interleave; else rotated by halves
as stored), cos and sin times the YaRN attention factor, softmax scale qk_head_dim^-0.5 times
yarn_get_mscale(factor, mscale_all_dim)²; the router scores experts by sigmoid, chooses with
e_score_correction_bias added (groups ranked by the sum of their two best, topk_group kept, the rest 0), weighs by
the unbiased scores, normalised when norm_topk_prob, times routed_scaling_factor; ungated shared experts.
The fp8 case stores every projection as block-wise FP8 (DeepSeek-V3/R1's layout: F8_E4M3 codes and a float32
weight_scale_inv per weight_block_size block, partial blocks at the edges; integrations/finegrained_fp8.py's
Fp8Dequantize: float32(fp8) * scale) and carries a multi-token-prediction layer at model.layers.<num_hidden_layers>,
which DeepseekV3 does not load (_keys_to_ignore_on_load_unexpected)."""

import numpy as np
import torch

import common as c
import mla
import safetensors_io as st

MODEL_TYPE = "deepseek_v3"


def cases():
    base = {
        "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 64,
        "hidden_size": 32, "intermediate_size": 40, "moe_intermediate_size": 12, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 12, "kv_lora_rank": 16,
        "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 6, "n_routed_experts": 8,
        "num_experts_per_tok": 3, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "routed_scaling_factor": 2.5, "norm_topk_prob": True, "topk_method": "noaux_tc", "n_group": 4,
        "topk_group": 2, "scoring_func": "sigmoid", "rope_interleave": True, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False, "aux_loss_alpha": 0.0,
        "torch_dtype": "float32",
        "rope_scaling": {"type": "yarn", "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.8},
    }
    plain = {**base, "q_lora_rank": None, "norm_topk_prob": False, "rope_interleave": False, "rope_scaling": None,
             "routed_scaling_factor": 1.0, "n_shared_experts": 2, "v_head_dim": 20}
    return [
        {"name": "qlora-noaux-norm-yarn", "config": base},
        {"name": "qlora-null-nonorm-halfsplit-bf16-sharded", "config": plain, "dtype": "BF16", "shards": 3},
        {"name": "fp8-blocks-mtp", "fp8": True,
         "config": {**base, "num_nextn_predict_layers": 1,
                    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                            "weight_block_size": [8, 12]}}},
        {"name": "one-group-dense2-f16", "config": {**base, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 2,
                                                   "num_hidden_layers": 4}, "dtype": "F16"},
    ]


def e4m3_value(code):
    """OCP e4m3fn by definition: (1 + m/8) 2^(e-7), subnormal m/8 2^-6 (code 0x7F / 0xFF, NaN, never drawn)."""
    e, m = (code >> 3) & 15, code & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e.astype(np.float64) - 7))
    return np.where(code & 0x80, -v, v)


def random_tensors(config, rng, fp8=False):
    t = mla.random_tensors(config, rng, correction_bias=True)
    if not fp8:
        return t
    C, n = config["hidden_size"], config["num_hidden_layers"]
    mtp = f"model.layers.{n}."
    # A few of the multi-token-prediction layer's tensors (the import must skip them all).
    t[mtp + "enorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
    t[mtp + "hnorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
    t[mtp + "eh_proj.weight"] = c.random_tensor(rng, (C, 2 * C))
    t[mtp + "self_attn.kv_a_proj_with_mqa.weight"] = c.random_tensor(rng, (24, C))
    t[mtp + "shared_head.norm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
    br, bc = config["quantization_config"]["weight_block_size"]
    out = {}
    for name, a in t.items():
        if not (name.endswith("_proj.weight") and a.ndim == 2):
            out[name] = a
            continue
        R, K = a.shape
        # codes with |value| <= 2 (exponent field <= 8), either sign; factors about std / 1
        codes = rng.integers(0, 0x42, size=a.shape).astype(np.uint8) | (rng.integers(0, 2, size=a.shape) << 7).astype(np.uint8)
        scales = rng.uniform(0.04, 0.12, size=(-(-R // br), -(-K // bc))).astype(np.float32)
        out[name] = codes.view(st.F8_E4M3)
        out[name + "_scale_inv"] = scales
    return out


def dequantize(config, tensors):
    """The float tensors the model computes with: FP8 ones as float32(code) * scale of their block, the MTP layer
    dropped."""
    br, bc = config["quantization_config"]["weight_block_size"]
    mtp = f"model.layers.{config['num_hidden_layers']}."
    out = {}
    for name, a in tensors.items():
        if name.startswith(mtp) or name.endswith("_scale_inv"):
            continue
        if a.dtype == st.F8_E4M3:
            values = e4m3_value(a.view(np.uint8)).astype(np.float32)
            scale = tensors[name + "_scale_inv"].astype(np.float32)
            full = np.repeat(np.repeat(scale, br, axis=0), bc, axis=1)[: a.shape[0], : a.shape[1]]
            out[name] = (values * full).astype(np.float32)
        else:
            out[name] = a
    return out


def forward(config, P, ids, margins):
    inv_freq, factor = mla.rope_parameters(config)
    scale = (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5
    rs = config.get("rope_scaling")
    if rs is not None and rs.get("mscale_all_dim"):
        scale *= mla.yarn_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2
    cos, sin = c.rope_cos_sin(64, inv_freq, factor)

    def rope(q_pe, k_pe):
        T = q_pe.shape[-2]
        apply = c.apply_rope_interleaved if config.get("rope_interleave", True) else c.apply_rope_half
        return apply(q_pe, cos[:T], sin[:T]), apply(k_pe, cos[:T], sin[:T])

    def attention(l, x):
        return mla.latent_attention(config, P, l, x, rope, scale)

    def route(flat, m):
        scores = torch.sigmoid(c.linear(flat, P[m + "gate.weight"]))
        choice = scores.detach() + P[m + "gate.e_score_correction_bias"].detach()
        mask = mla.group_mask(choice, config["n_group"], config["topk_group"], margins,
                              lambda g: g.topk(2, dim=-1).values.sum(-1))
        idx = margins.topk(choice.masked_fill(~mask, 0.0), config["num_experts_per_tok"])
        w = scores.gather(-1, idx)
        if config["norm_topk_prob"]:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * config["routed_scaling_factor"]

    def mlp(l, x):
        if not mla.is_moe_layer(config, l):
            return mla.dense_mlp(P, l, x)
        return mla.moe_block(config, P, l, x, route)

    return c.decoder(config, P, ids, attention, mlp)
