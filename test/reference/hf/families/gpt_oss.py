"""gpt-oss, after transformers' models/gpt_oss/modeling_gpt_oss.py (and configuration_gpt_oss.py,
integrations/mxfp4.py): LLaMA-style decoder with q/k/v/o biases; attention with a learned sink logit per head in
the softmax denominator and, on the layers layer_types marks "sliding_attention", a window of the last
sliding_window keys; the router is a biased linear layer, top-k over its logits and a softmax over the chosen K;
experts are fused tensors in x @ W layout, gate_up_proj [E, C, 2F] with gate = [..., ::2] and up = [..., 1::2],
gate clamped above and up on both sides at swiglu_limit, out = ((up + 1) * gate * sigmoid(alpha * gate)) @
down_proj[e] + down_proj_bias[e]. gate_up_proj and down_proj may be stored as MXFP4 (*_blocks, *_scales)."""

import numpy as np
import torch

import common as c
import mla

MODEL_TYPE = "gpt_oss"

FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def cases():
    base = {
        "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 12, "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 150000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "router_aux_loss_coef": 0.0, "sliding_window": 3,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"], "swiglu_limit": 7.0,
        "attention_bias": True, "attention_dropout": 0.0, "hidden_act": "silu", "torch_dtype": "float32",
    }
    return [
        {"name": "sinks-window-biases-clamp", "config": base},
        {"name": "window4-limit3-bf16-sharded",
         "config": {**base, "sliding_window": 4, "swiglu_limit": 3.0, "head_dim": 8,
                    "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]},
         "dtype": "BF16", "shards": 3},
        {"name": "yarn-not-truncated",
         "config": {**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                             "truncate": False, "original_max_position_embeddings": 16}}},
        {"name": "mxfp4-experts-bf16",
         "config": {**base, "quantization_config": {"quant_method": "mxfp4",
                                                    "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                               "model.layers.*.mlp.router",
                                                                               "model.embed_tokens", "lm_head"]}},
         "dtype": "BF16", "mxfp4": True},
    ]


def random_tensors(config, rng, mxfp4=False):
    C, V, F = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    NH, NKV, D = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    E = config["num_local_experts"]
    t = {"model.embed_tokens.weight": c.random_tensor(rng, (V, C))}
    for l in range(config["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        for name, rows in (("q_proj", NH * D), ("k_proj", NKV * D), ("v_proj", NKV * D)):
            t[p + f"self_attn.{name}.weight"] = c.random_tensor(rng, (rows, C))
            t[p + f"self_attn.{name}.bias"] = c.random_tensor(rng, (rows,))
        t[p + "self_attn.o_proj.weight"] = c.random_tensor(rng, (C, NH * D))
        t[p + "self_attn.o_proj.bias"] = c.random_tensor(rng, (C,))
        t[p + "self_attn.sinks"] = c.random_tensor(rng, (NH,), std=1.0)
        t[p + "post_attention_layernorm.weight"] = c.random_tensor(rng, (C,), mean=1.0)
        m = p + "mlp."
        t[m + "router.weight"] = c.random_tensor(rng, (E, C), std=0.5)
        t[m + "router.bias"] = c.random_tensor(rng, (E,), std=0.5)
        if mxfp4:
            # blocks [E, B, A/32, 16] and scales [E, B, A/32] of a parameter [E, A, B]; exponents 2^-3 .. 2^-1
            t[m + "experts.gate_up_proj_blocks"] = rng.integers(0, 256, size=(E, 2 * F, C // 32, 16), dtype=np.uint8)
            t[m + "experts.gate_up_proj_scales"] = rng.integers(124, 127, size=(E, 2 * F, C // 32), dtype=np.uint8)
            t[m + "experts.down_proj_blocks"] = rng.integers(0, 256, size=(E, C, F // 32, 16), dtype=np.uint8)
            t[m + "experts.down_proj_scales"] = rng.integers(121, 124, size=(E, C, F // 32), dtype=np.uint8)
        else:
            # std 1.5: gate/up pre-activations of several units, so some pass swiglu_limit.
            t[m + "experts.gate_up_proj"] = c.random_tensor(rng, (E, C, 2 * F), std=1.5)
            t[m + "experts.down_proj"] = c.random_tensor(rng, (E, F, C))
        t[m + "experts.gate_up_proj_bias"] = c.random_tensor(rng, (E, 2 * F), std=1.0)
        t[m + "experts.down_proj_bias"] = c.random_tensor(rng, (E, C))
    return c.with_head(config, t, rng)


def mxfp4_decode(blocks, scales):
    """integrations/mxfp4.py's convert_moe_packed_tensors in numpy: low nibble first, value * 2^(scale - 127),
    then the last two dimensions of [E, B, A] swapped."""
    lut = np.array(FP4_VALUES, dtype=np.float64)
    *prefix, G, Bk = blocks.shape
    vals = np.empty((*prefix, G, Bk * 2), dtype=np.float64)
    vals[..., 0::2] = lut[blocks & 0x0F]
    vals[..., 1::2] = lut[blocks >> 4]
    vals = np.ldexp(vals, (scales.astype(np.int64) - 127)[..., None])
    vals = vals.reshape(*prefix, G * Bk * 2)
    return np.ascontiguousarray(np.swapaxes(vals, 1, 2)).astype(np.float32)


def dequantize(config, tensors):
    """The float tensors the model computes with (MXFP4 experts decoded)."""
    out = {}
    for name, a in tensors.items():
        if name.endswith("_blocks"):
            stem = name[: -len("_blocks")]
            out[stem] = mxfp4_decode(a, tensors[stem + "_scales"])
        elif not name.endswith("_scales"):
            out[name] = a
    return out


def forward(config, P, ids, margins):
    D, K = config["head_dim"], config["num_experts_per_tok"]
    alpha, limit = config.get("swiglu_alpha", 1.702), config.get("swiglu_limit", 7.0)
    types = config["layer_types"]

    def attention(l, x):
        window = config["sliding_window"] if types[l] == "sliding_attention" else None
        inv_freq, factor = mla.rope_parameters(config, D)
        return c.gqa_attention(config, P, l, x, head_dim=D, window=window, sinks=P[f"model.layers.{l}.self_attn.sinks"],
                               inv_freq=inv_freq, attention_factor=factor)

    def mlp(l, x):
        m = f"model.layers.{l}.mlp."
        B, T, C = x.shape
        flat = x.reshape(-1, C)
        logits = c.linear(flat, P[m + "router.weight"], P[m + "router.bias"])
        idx = margins.topk(logits, K)
        w = torch.softmax(logits.gather(-1, idx), dim=-1)
        out = torch.zeros_like(flat)
        for e in range(P[m + "router.weight"].shape[0]):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if not rows.numel():
                continue
            gate_up = flat[rows] @ P[m + "experts.gate_up_proj"][e] + P[m + "experts.gate_up_proj_bias"][e]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(min=None, max=limit)
            up = up.clamp(min=-limit, max=limit)
            glu = gate * torch.sigmoid(gate * alpha)
            y = ((up + 1) * glu) @ P[m + "experts.down_proj"][e] + P[m + "experts.down_proj_bias"][e]
            out = out.index_add(0, rows, y * w[rows, slot].unsqueeze(-1))
        return out.view(B, T, C)

    return c.decoder(config, P, ids, attention, mlp)
