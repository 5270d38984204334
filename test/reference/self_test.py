#!/usr/bin/python3
"""Checks of the reference itself (no engine needed): `check_engine.py --self-test` or run this file.

Gradients against float64 finite differences, the routing/capacity rules on hand-made examples, structural
identities (capacity >= N*K is dropless, 1 expert top-1 is a dense FFN, GQA equals MHA with repeated kv heads,
causality, RoPE relative-position invariance), lr schedule, batching, AdamW groups, clipping, file formats, and
that the benchmark model computes the same function as the reference.
"""

import json
import math
import os
import struct
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_ref  # noqa: E402
import safetensors_io  # noqa: E402
import tokens_io  # noqa: E402

F64 = torch.float64


def tiny_model(arch, **overrides):
    m = {"arch": arch, "vocab_size": 16, "d_model": 8, "n_layers": 2, "n_heads": 2,
         "n_kv_heads": 2 if arch == moe_ref.GPT_MOE else 1, "max_seq_len": 6, "d_ff": 12, "expert_d_ff": 6,
         "n_experts": 4, "top_k": 2, "aux_loss_coef": 0.1, "z_loss_coef": 0.01}
    m.update(overrides)
    return moe_ref.resolve_config({"model": m})["model"]


def random_batch(m, seed, B=2, T=5):
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(0, m["vocab_size"], size=(B, T + 1)))
    return ids[:, :-1], ids[:, 1:]


def tie_free_params(m, tokens, targets, min_margin=1e-4, seed=0):
    """Random weights whose routing is far from any tie, so small perturbations keep it."""
    for s in range(seed, seed + 100):
        params = moe_ref.to_torch(moe_ref.random_params(m, s, std=0.3), F64)
        if moe_ref.forward(params, m, tokens, targets).min_margin >= min_margin:
            return params
    raise RuntimeError("no tie-free weights")


def autograd_grads(params, m, tokens, targets):
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    moe_ref.forward(leaves, m, tokens, targets).objective.backward()
    return {k: v.grad if v.grad is not None else torch.zeros_like(v) for k, v in leaves.items()}


# ------------------------------------------------------------------------------------------------------- gradients

def check_finite_differences(m, seed):
    """Per tensor, the directional derivative along two random directions (central differences, float64) must
    match autograd's gradient; a wrong element shows up unless its error cancels against a random direction."""
    tokens, targets = random_batch(m, seed)
    targets[0, 1] = -1  # a masked target
    params = tie_free_params(m, tokens, targets, seed=seed)
    grads = autograd_grads(params, m, tokens, targets)
    generator = torch.Generator().manual_seed(seed)
    h = 1e-6
    worst = 0.0
    with torch.no_grad():
        for name, p in params.items():
            for _ in range(2):
                direction = torch.randn(p.shape, generator=generator, dtype=F64)
                saved = p.clone()
                p.add_(h * direction)
                up = float(moe_ref.forward(params, m, tokens, targets).objective)
                p.copy_(saved - h * direction)
                down = float(moe_ref.forward(params, m, tokens, targets).objective)
                p.copy_(saved)
                numeric, analytic = (up - down) / (2 * h), float((grads[name] * direction).sum())
                scale = float((grads[name] * direction).abs().sum())
                err = abs(numeric - analytic)
                assert err <= 1e-8 + 1e-6 * scale, f"{name}: autograd {analytic:.10g} fd {numeric:.10g}"
                worst = max(worst, err / max(scale, 1e-12))
    return f"worst |autograd - fd| / sum|g*d| {worst:.1e}"


def test_gradients_gpt_moe_capacity_shared_residual():
    m = tiny_model(moe_ref.GPT_MOE, n_experts=[3, 4], capacity_factor=1.0, renormalize=False,
                   shared_expert_d_ff=5, residual_mlp=True, tie_embeddings=False)
    return check_finite_differences(m, seed=1)


def test_gradients_gpt_moe_dropless_every2():
    m = tiny_model(moe_ref.GPT_MOE, moe_every=2, top_k=1)
    return check_finite_differences(m, seed=2)


def test_gradients_mixtral_capacity_gated_shared():
    m = tiny_model(moe_ref.MIXTRAL, capacity_factor=1.25, shared_expert_d_ff=5, shared_expert_gate=True,
                   n_heads=4, n_kv_heads=2)
    return check_finite_differences(m, seed=3)


def test_gradients_mixtral_dropless_residual_tied():
    m = tiny_model(moe_ref.MIXTRAL, n_layers=3, moe_every=1, n_experts=[2, 3, 4], residual_mlp=True,
                   tie_embeddings=True, top_k=1)
    return check_finite_differences(m, seed=4)


# ---------------------------------------------------------------------------------------------- routing, capacity

def test_ties_go_to_lower_index():
    router = torch.zeros(5, 3, dtype=F64)
    router[2] = router[4] = 1.0  # experts 2 and 4 tie for first place
    h = torch.ones(2, 3, dtype=F64)
    _, _, experts, _ = moe_ref.route(h, router, top_k=3)
    assert experts.tolist() == [[2, 4, 0], [2, 4, 0]], experts.tolist()


def test_capacity_rule():
    experts = torch.tensor([[0, 1], [0, 2], [0, 1], [1, 0]])
    # first choices in token order: t0→0, t1→0, t2→0 (3rd for expert 0: dropped), t3→1;
    # then second choices: t0→1 (2nd for 1), t1→2, t2→1 (3rd: dropped), t3→0 (dropped)
    keep = moe_ref.capacity_keep(experts, n_experts=3, cap=2)
    assert keep.tolist() == [[True, True], [True, True], [False, False], [True, False]], keep.tolist()
    assert moe_ref.capacity(1.0, 32, 2, 4) == 16 and moe_ref.capacity(1.1, 32, 1, 4) == 9


def test_capacity_at_least_nk_is_dropless():
    for arch in (moe_ref.GPT_MOE, moe_ref.MIXTRAL):
        m_drop = tiny_model(arch)
        m_cap = tiny_model(arch, capacity_factor=float(m_drop["n_experts"]))  # capacity = N*K
        tokens, targets = random_batch(m_drop, 5)
        params = tie_free_params(m_drop, tokens, targets)
        a, b = moe_ref.forward(params, m_drop, tokens, targets), moe_ref.forward(params, m_cap, tokens, targets)
        assert b.dropped == 0 and torch.equal(a.logits, b.logits) and float(a.objective) == float(b.objective)
        ga, gb = autograd_grads(params, m_drop, tokens, targets), autograd_grads(params, m_cap, tokens, targets)
        assert all(torch.equal(ga[k], gb[k]) for k in ga)


def test_capacity_drops_change_output():
    m = tiny_model(moe_ref.GPT_MOE, capacity_factor=0.5)
    tokens, targets = random_batch(m, 6)
    params = tie_free_params(m, tokens, targets)
    out = moe_ref.forward(params, m, tokens, targets)
    # N=10, K=2, E=4: capacity ceil(0.5*10*2/4) = 3 per expert, so at most 12 of the 20 assignments survive
    assert out.dropped >= 8, out.dropped


def test_one_expert_top1_is_dense_ffn():
    for arch in (moe_ref.GPT_MOE, moe_ref.MIXTRAL):
        m_moe = tiny_model(arch, n_experts=1, top_k=1, d_ff=6, expert_d_ff=6, aux_loss_coef=0.0, z_loss_coef=0.0)
        m_dense = tiny_model(arch, n_experts=1, top_k=1, d_ff=6, expert_d_ff=6, moe_every=99)
        tokens, targets = random_batch(m_moe, 7)
        params = moe_ref.to_torch(moe_ref.random_params(m_moe, 7), F64)
        dense = {k.replace("moe.experts.0.", "mlp."): v for k, v in params.items() if "router" not in k}
        assert set(dense) == set(moe_ref.param_shapes(m_dense))
        a, b = moe_ref.forward(params, m_moe, tokens, targets), moe_ref.forward(dense, m_dense, tokens, targets)
        diff = float((a.logits - b.logits).abs().max())
        assert diff < 1e-12 and abs(float(a.objective - b.objective)) < 1e-12, diff


# ---------------------------------------------------------------------------------------------------- attention

def test_gqa_equals_mha_with_repeated_kv_heads():
    m_gqa = tiny_model(moe_ref.MIXTRAL, n_heads=4, n_kv_heads=2)
    m_mha = tiny_model(moe_ref.MIXTRAL, n_heads=4, n_kv_heads=4)
    tokens, targets = random_batch(m_gqa, 8)
    params = moe_ref.to_torch(moe_ref.random_params(m_gqa, 8), F64)
    HS, NH, NKV = moe_ref.head_size(m_gqa), 4, 2
    mha = dict(params)
    for layer in range(m_gqa["n_layers"]):
        name = f"layers.{layer}.attn.qkv.weight"
        q, k, v = params[name].split([NH * HS, NKV * HS, NKV * HS])
        repeat = (lambda w: w.reshape(NKV, HS, -1).repeat_interleave(NH // NKV, dim=0).reshape(NH * HS, -1))
        mha[name] = torch.cat([q, repeat(k), repeat(v)])
    a, b = moe_ref.forward(params, m_gqa, tokens, targets), moe_ref.forward(mha, m_mha, tokens, targets)
    assert float((a.logits - b.logits).abs().max()) < 1e-12


def test_causal():
    for arch in (moe_ref.GPT_MOE, moe_ref.MIXTRAL):
        m = tiny_model(arch)
        tokens, _ = random_batch(m, 9)
        params = moe_ref.to_torch(moe_ref.random_params(m, 9), F64)
        changed = tokens.clone()
        changed[:, -1] = (changed[:, -1] + 1) % m["vocab_size"]
        a, b = moe_ref.forward(params, m, tokens), moe_ref.forward(params, m, changed)
        # Not bitwise: an expert's rows are one matrix product, and changing one token changes the products'
        # shapes, so a BLAS (OpenBLAS, say) may block them differently. A leak from the future is O(1), not 1e-15.
        earlier = (a.logits[:, :-1] - b.logits[:, :-1]).abs().max().item()
        assert earlier <= 1e-12 * a.logits.abs().max().item(), f"earlier positions moved by {earlier}"
        assert not torch.equal(a.logits, b.logits)


def test_rope_scores_depend_on_relative_position_only():
    HS, T = 8, 12
    cos, sin = moe_ref.rope_tables(T, HS, 10000.0, F64)
    q, k = torch.randn(HS, dtype=F64), torch.randn(HS, dtype=F64)
    rot = lambda x, t: moe_ref.apply_rope(x, (cos[t], sin[t]))  # noqa: E731
    for shift in (1, 5):
        assert abs(float(rot(q, 6) @ rot(k, 2)) - float(rot(q, 6 + shift) @ rot(k, 2 + shift))) < 1e-12
    # rotate-half pairs dimension i with i + HS/2 at frequency theta^(-2i/HS)
    x = torch.zeros(HS, dtype=F64)
    x[1] = 1.0
    y = rot(x, 3)
    angle = 3 * 10000.0 ** (-2 / HS)
    assert abs(float(y[1]) - math.cos(angle)) < 1e-12 and abs(float(y[1 + HS // 2]) - math.sin(angle)) < 1e-12


# ------------------------------------------------------------------------------------------------------- training

def test_lr_schedule():
    t = {"lr": 1.0, "min_lr": 0.1, "warmup_steps": 2, "steps": 10}
    expected = {0: 0.5, 1: 1.0, 2: 1.0, 6: 0.55, 10: 0.1}
    for step, lr in expected.items():
        assert abs(moe_ref.lr_at(step, t) - lr) < 1e-12, (step, moe_ref.lr_at(step, t))


def test_batcher_windows_wrap_and_mask():
    tokens = np.arange(20)
    mask = np.ones(20, dtype=np.uint8)
    mask[4] = 0
    batcher = moe_ref.Batcher(tokens, mask, batch_size=2, seq_len=3)
    inputs, targets = batcher.next()
    assert inputs.tolist() == [[0, 1, 2], [3, 4, 5]] and targets.tolist() == [[1, 2, 3], [-1, 5, 6]]
    assert batcher.next()[0].tolist() == [[6, 7, 8], [9, 10, 11]]
    assert batcher.next()[0].tolist() == [[12, 13, 14], [15, 16, 17]]  # 8 tokens were left: enough for 7
    assert batcher.next()[0].tolist() == [[0, 1, 2], [3, 4, 5]]       # 2 left: wrapped


def test_adamw_decays_only_matrices():
    t = {**moe_ref.TRAIN_DEFAULTS, "lr": 0.1, "weight_decay": 0.5}
    params = {"w": torch.ones(2, 2, dtype=F64, requires_grad=True), "b": torch.ones(2, dtype=F64, requires_grad=True)}
    optimizer = moe_ref.make_optimizer(params, t)
    for p in params.values():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    assert torch.allclose(params["w"], torch.full((2, 2), 1 - 0.1 * 0.5, dtype=F64))
    assert torch.equal(params["b"].detach(), torch.ones(2, dtype=F64))


def test_clip_grad_norm():
    params = {"a": torch.zeros(2, dtype=F64), "b": torch.zeros(1, dtype=F64)}
    params["a"].grad = torch.tensor([3.0, 0.0], dtype=F64)
    params["b"].grad = torch.tensor([4.0], dtype=F64)
    assert moe_ref.clip_grad_norm(params, 1.0) == 5.0
    clipped = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params.values()))
    assert abs(clipped - 1.0) < 1e-6
    assert moe_ref.clip_grad_norm(params, 0.0) == clipped  # 0 = off


def test_grad_accum_is_mean_of_micro_batches():
    m = tiny_model(moe_ref.GPT_MOE)
    t = {**moe_ref.TRAIN_DEFAULTS, "batch_size": 1, "seq_len": 5, "grad_accum": 2, "grad_clip": 0.0}
    tokens = np.random.default_rng(10).integers(0, 16, size=40)
    params = moe_ref.to_torch(moe_ref.random_params(m, 10), F64, requires_grad=True)
    record = moe_ref.train_step(params, m, t, moe_ref.make_optimizer(params, t), moe_ref.Batcher(tokens, None, 1, 5),
                                step=0)
    ids = torch.from_numpy(tokens)
    fresh = moe_ref.to_torch(moe_ref.random_params(m, 10), F64)
    losses = [moe_ref.forward(fresh, m, ids[i:i + 5][None], ids[i + 1:i + 6][None]).loss for i in (0, 5)]
    assert abs(record["loss"] - float(sum(losses)) / 2) < 1e-12


# ---------------------------------------------------------------------------------------------------------- files

def test_safetensors_roundtrip():
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.array([[1, -2]], dtype=np.int32),
               "scalar": np.array(1.5, dtype=np.float32)}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.safetensors")
        safetensors_io.write(path, tensors)
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
        assert header_len % 8 == 0
        back = safetensors_io.read(path)
        assert list(back) == list(tensors)
        assert all(back[k].dtype == v.dtype and np.array_equal(back[k], v) for k, v in tensors.items())


def test_safetensors_reads_half_types():
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    f16 = values.astype("<f2").tobytes()
    header = json.dumps({"b": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
                         "h": {"dtype": "F16", "shape": [3], "data_offsets": [6, 12]}}).encode()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "half.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + bf16 + f16)
        back = safetensors_io.read(path)
    assert np.array_equal(back["b"], values) and np.array_equal(back["h"], values)


def test_token_shard_roundtrip():
    tokens = np.array([0, 5, 300, 65535])
    with tempfile.TemporaryDirectory() as d:
        for token_bytes, mask in ((2, np.array([1, 0, 1, 1])), (4, None)):
            path = os.path.join(d, f"t{token_bytes}.bin")
            tokens_io.write(path, tokens, 65536, mask, token_bytes)
            with open(path, "rb") as f:
                raw = f.read()
            assert raw[:8] == b"MOETOK01" and len(raw) == 64 + 4 * token_bytes + (4 if mask is not None else 0)
            shard = tokens_io.read(path)
            assert np.array_equal(shard.tokens, tokens) and shard.vocab_size == 65536
            assert (shard.mask is None) == (mask is None) and (mask is None or np.array_equal(shard.mask, mask))


# ------------------------------------------------------------------------------------------------------ benchmark

def test_bench_model_matches_reference():
    import torch_train_bench
    for arch in (moe_ref.GPT_MOE, moe_ref.MIXTRAL):
        m = tiny_model(arch, n_experts=[3, 4], shared_expert_d_ff=5, shared_expert_gate=arch == moe_ref.MIXTRAL,
                       residual_mlp=True)
        tokens, targets = random_batch(m, 11)
        params = tie_free_params(m, tokens, targets)
        model = torch_train_bench.MoeModel(m).double()
        model.load_state_dict(params, strict=True)
        loss, reg = model(tokens, targets)
        (loss + reg).backward()
        ref = moe_ref.forward(params, m, tokens, targets)
        assert abs(float(loss + reg) - float(ref.objective)) < 1e-10, (float(loss + reg), float(ref.objective))
        ref_grads = autograd_grads(params, m, tokens, targets)
        for name, p in model.named_parameters():
            grad = p.grad if p.grad is not None else torch.zeros_like(p)
            assert float((grad - ref_grads[name]).abs().max()) < 1e-10, name


# ------------------------------------------------------------------------------------------------------------ main

def main():
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    tests = [(name, fn) for name, fn in globals().items() if name.startswith("test_") and callable(fn)]
    failed = 0
    for name, fn in tests:
        start = time.time()
        try:
            note = fn()
            print(f"ok    {name} ({time.time() - start:.2f}s){'  ' + note if note else ''}")
        except Exception as exc:  # report every failing test, not just the first
            failed += 1
            print(f"FAIL  {name}: {type(exc).__name__}: {exc}")
    print(f"self-test: {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
