#!/usr/bin/python3
"""LoRA adapters against the float64 PyTorch family modules: for the first float32 case of every family module, a
random PEFT adapter (adapter_config.json + adapter_model.safetensors with PEFT's keys, written here from the
Hugging Face tensor names, independently of the engine) on every module the engine adapts for the targets; the
engine loads the base folder and the adapter (moe-engine-dev forward --finetune --adapter) and its logits must
equal the module's forward on W + (alpha/r)·B·A (PEFT's merge) within the reference tolerance. A second adapter
per family covers fewer modules, as PEFT adapters often do (q_proj and v_proj only, or the attention and the
first MoE layer's first two experts), and comes with no finetune section: the engine reads it back from the keys.
Usage: lora_check.py --dev-cli moe-engine-dev [--family TYPE] [--workdir DIR]. Last line: `N passed, M failed`.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import hf_check  # noqa: E402
import safetensors_io as st  # noqa: E402

RANK, ALPHA = 4, 8.0
# The Hugging Face modules each LoRA target adapts (per-expert layouts; gpt_oss stores experts fused, so only its
# attention takes adapters in PEFT's format).
PATTERNS = {
    "attention": r"\.self_attn\.(q_proj|k_proj|v_proj|o_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj)\.weight$",
    "experts": r"\.experts\.\d+\.[a-z0-9_]+\.weight$",
    "shared_experts": r"\.(shared_expert|shared_experts)\.(gate_proj|up_proj|down_proj)\.weight$",
    "dense_mlp": r"^model\.layers\.\d+\.mlp\.(gate_proj|up_proj|down_proj)\.weight$",
}


def targets_for(model_type):
    if model_type == "gpt_oss":
        return ["attention"]
    return ["attention", "experts", "shared_experts", "dense_mlp"]


# The modules of the partial adapter: PEFT's usual attention pair where the family has it, else its first
# attention projection; for families with routed experts in PEFT's format also the first MoE layer's experts 0-1.
PARTIAL = r"\.self_attn\.(q_proj|v_proj|q_a_proj|kv_a_proj_with_mqa)\.weight$"


def partial_modules(adapted, model_type):
    attention = [n for n in adapted if re.search(PARTIAL, n)]
    experts = [n for n in adapted if re.search(PATTERNS["experts"], n)]
    if experts:
        first = min(int(re.search(r"layers\.(\d+)\.", n).group(1)) for n in experts)
        experts = [n for n in experts if f"layers.{first}." in n and re.search(r"\.experts\.[01]\.", n)]
    return sorted(attention + experts)


def check_family(mod, args, workdir):
    ok = True
    for partial in (False, True):
        ok = check_adapter(mod, args, workdir, partial) and ok
    return ok


def check_adapter(mod, args, workdir, partial):
    case = next(c for c in mod.cases() if c.get("dtype", "F32") == "F32" and not c.get("mxfp4"))
    config = case["config"]
    label = f"{mod.MODEL_TYPE}/{case['name']} lora" + (" (fewer modules)" if partial else "")
    base = os.path.join(workdir, mod.MODEL_TYPE + ("-partial" if partial else ""))
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    rng = np.random.default_rng(11)
    ids_np = rng.integers(0, config["vocab_size"], size=(hf_check.B, hf_check.T + 1)).astype(np.int32)
    ids = torch.from_numpy(ids_np[:, :hf_check.T].astype(np.int64))
    tensors, ref, _ = hf_check.draw(mod, case, "F32", case.get("seed", 1), ids)
    hf = os.path.join(base, "hf")
    hf_check.write_folder(hf, config, tensors)
    st.write(os.path.join(base, "tokens.safetensors"), {"input_ids": ids_np})

    targets = targets_for(mod.MODEL_TYPE)
    adapted = sorted(n for n in tensors if any(re.search(PATTERNS[t], n) for t in targets))
    if partial:
        adapted = partial_modules(adapted, mod.MODEL_TYPE)
    for attempt in range(20):
        arng = np.random.default_rng(100 + attempt)
        adapter, merged = {}, dict(ref)
        for name in adapted:
            out_f, in_f = tensors[name].shape
            a = (arng.standard_normal((RANK, in_f)) / np.sqrt(in_f)).astype(np.float32)
            b = (0.05 * arng.standard_normal((out_f, RANK))).astype(np.float32)
            module = "base_model.model." + name[: -len(".weight")]
            adapter[module + ".lora_A.weight"], adapter[module + ".lora_B.weight"] = a, b
            merged[name] = (ref[name].astype(np.float64) + ALPHA / RANK * (b.astype(np.float64) @ a.astype(np.float64)))
        margins = hf_check._Margins()
        with torch.no_grad():
            logits = mod.forward(config, hf_check.to_torch(merged), ids, margins).numpy()
        if margins.value >= hf_check.MIN_MARGIN:
            break
    ad = os.path.join(base, "adapter")
    os.makedirs(ad)
    st.write(os.path.join(ad, "adapter_model.safetensors"), adapter)
    with open(os.path.join(ad, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.0,
                   "use_rslora": False, "bias": "none", "target_modules": [a[: -len(".weight")] for a in adapted]}, f)
    with open(os.path.join(base, "finetune.json"), "w") as f:
        json.dump({"method": "lora", "lora": {"rank": RANK, "alpha": ALPHA, "targets": targets}}, f)
    out = os.path.join(base, "engine")
    section = [] if partial else ["--finetune", os.path.join(base, "finetune.json")]
    hf_check.run([args.dev_cli, "forward", "--checkpoint", hf, "--tokens", os.path.join(base, "tokens.safetensors"),
                  "--out", out, *section, "--adapter", ad],
                 os.path.join(base, "forward.log"))
    eng = st.read(os.path.join(out, "logits.safetensors"))["logits"]
    err = float(np.abs(eng - logits).max() / np.abs(logits).max())
    # The adapter must change the model, or the comparison says nothing.
    with torch.no_grad():
        plain = mod.forward(config, hf_check.to_torch(ref), ids, hf_check._Margins()).numpy()
    moved = float(np.abs(plain - logits).max() / np.abs(logits).max())
    ok = err <= hf_check.LOGITS_TOL and moved > 100 * hf_check.LOGITS_TOL
    print(f"  {label:<58} {len(adapted):3d} modules  logits {err:9.2e} (tol {hf_check.LOGITS_TOL:.0e})  "
          f"adapter moved logits by {moved:.2e}  {'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev-cli", required=True)
    ap.add_argument("--family")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="lora-check-")
    torch.set_default_dtype(torch.float64)
    passed = failed = 0
    for mod in hf_check.family_modules(args.family):
        try:
            ok = check_family(mod, args, workdir)
        except Exception as e:  # noqa: BLE001 - a failing family is reported, the others still run
            print(f"  {mod.MODEL_TYPE}: {e}")
            ok = False
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
