#!/usr/bin/python3
"""The engine against independent float64 PyTorch implementations of Hugging Face families' modeling code.

For every case of every family module (families/<model_type>.py): random weights in the HF layout (stored as
the case's dtype, optionally sharded with model.safetensors.index.json; redrawn until no routing decision is
within 1e-5), then
  - forward: the engine's logits, loss and every gradient (exported under HF names through the engine's own
    exporter) against the module's forward and torch autograd;
  - generation: `moe-engine generate` on the folder (a session with no engine; its experts resident, and
    streamed into the SSD tier) gives the same greedy tokens both ways, each the module's argmax (within the
    logits tolerance) at its position when the module is fed the engine's own sequence;
  - round trip: importing the folder and exporting it in the same dtype gives the same tensors bit for bit and
    the same config values.
Usage: hf_check.py --cli moe-engine --dev-cli moe-engine-dev [--family TYPE] [--case SUBSTR] [--workdir DIR]
Exit status 0 only if every check passes; the last line is `N passed, M failed`.
"""

import argparse
import importlib
import json
import math
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import families  # noqa: E402
import safetensors_io as st  # noqa: E402

B, T = 2, 8
LOGITS_TOL, LOSS_TOL, GRAD_TOL = 1e-4, 1e-5, 1e-4
MIN_MARGIN = 1e-5


def rope_scaling_values(rs):
    """A rope_scaling as the values it means: the older "type" key read as rope_type, and the optional keys
    modeling_rope_utils.py defaults (beta_fast 32, beta_slow 1, truncate, no mscale) filled in, so an export that
    writes a default out is the same config."""
    if not rs:
        return None
    d = dict(rs)
    legacy = d.pop("type", None)
    d.setdefault("rope_type", legacy)
    d["beta_fast"], d["beta_slow"] = d.get("beta_fast") or 32.0, d.get("beta_slow") or 1.0
    d["truncate"] = d.get("truncate", True)
    for k in ("mscale", "mscale_all_dim", "attention_factor"):
        if not d.get(k):
            d.pop(k, None)
    return {k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in d.items()}


def family_modules(only=None):
    mods = []
    for info in pkgutil.iter_modules(families.__path__):
        mod = importlib.import_module("families." + info.name)
        if only is None or mod.MODEL_TYPE == only:
            mods.append(mod)
    return mods


def write_folder(path, config, tensors, dtype="F32", shards=1):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    names = list(tensors)
    if shards <= 1:
        st.write(os.path.join(path, "model.safetensors"), tensors, {"format": "pt"}, dtype=dtype)
        return
    weight_map = {}
    per = math.ceil(len(names) / shards)
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i * per:(i + 1) * per]}
        st.write(os.path.join(path, file), part, {"format": "pt"}, dtype=dtype)
        weight_map.update({n: file for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


def read_folder_raw(path):
    out = {}
    for file in sorted(os.listdir(path)):
        if file.endswith(".safetensors"):
            out.update(st.read_raw(os.path.join(path, file)))
    return out


def run(cmd, log):
    with open(log, "w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    if done.returncode != 0:
        with open(log) as f:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{f.read()[-2000:]}")


def draw(mod, case, dtype, seed, ids):
    """Weights (as stored in dtype) whose every routing decision has a margin of at least MIN_MARGIN, and the
    float tensors the model computes with: the same unless the case stores some as MXFP4 or FP8 (the module's
    dequantize, which also drops layers the import skips), or converted to the fused expert layout (the module's fuse) when the case says so."""
    config = case["config"]
    for attempt in range(50):
        rng = np.random.default_rng(seed + 1000 * attempt)
        quantized = {k: True for k in ("mxfp4", "fp8") if case.get(k)}
        drawn = mod.random_tensors(config, rng, **quantized)
        if case.get("experts") == "fused" and hasattr(mod, "fuse"):
            drawn = mod.fuse(config, drawn)
        tensors = {n: st.round_to(a, dtype) if a.dtype == np.float32 else a for n, a in drawn.items()}
        ref = mod.dequantize(config, tensors) if quantized else tensors
        margins = _Margins()
        with torch.no_grad():
            mod.forward(config, to_torch(ref), ids, margins)
        if margins.value >= MIN_MARGIN:
            return tensors, ref, margins.value
    raise RuntimeError("no weights with routing margins >= 1e-5 in 50 draws")


def to_torch(tensors, grad=False):
    out = {}
    for n, a in tensors.items():
        t = torch.from_numpy(np.asarray(a)).to(torch.float64) if a.dtype == np.float32 else torch.from_numpy(a)
        if grad and t.is_floating_point():
            t.requires_grad_(True)
        out[n] = t
    return out


def _Margins():
    import common
    return common.Margins()


def rel(a, b):
    """‖a - b‖ / ‖b‖; absolute where b is ~0 (a gradient that is zero mathematically, like a top-1 router's
    under renormalisation, comes out of float64 autograd as ~1e-17 noise)."""
    den = float(np.linalg.norm(b))
    num = float(np.linalg.norm(a - b))
    return num / den if den > 1e-9 else num


class Report:
    def __init__(self, label):
        self.label, self.rows = label, []

    def check(self, name, err, tol):
        self.rows.append((name, err, tol, bool(err <= tol)))

    def fail(self, name, message):
        self.rows.append((name, math.inf, 0.0, False))
        print(f"  {name}: {message}")

    @property
    def passed(self):
        return bool(self.rows) and all(r[3] for r in self.rows)

    def print(self):
        print(f"== {self.label}")
        for name, err, tol, ok in self.rows:
            print(f"  {name:<64} {err:9.2e} {tol:9.1e}  {'ok' if ok else 'FAIL'}")


def generated(args, hf, prompt, n, home, log):
    """The token ids `moe-engine generate` samples greedily from the folder, the experts at `home`."""
    run([args.cli, "generate", "--model", hf, "--tokens", ",".join(str(t) for t in prompt), "--max-tokens", str(n),
         "--experts", home, "--expert-slots", "2", "--cache-experts", "4"], log)
    with open(log) as f:
        return json.loads([line for line in f if line.startswith("{")][-1])["tokens"]


def check_generation(mod, config, ref_tensors, hf, base, args, rep, prompt):
    limit = config.get("max_position_embeddings", 64)
    n = max(1, min(6, limit - len(prompt)))
    resident = generated(args, hf, prompt, n, "resident", os.path.join(base, "generate-resident.log"))
    ssd = generated(args, hf, prompt, n, "ssd", os.path.join(base, "generate-ssd.log"))
    rep.check(f"generation: {len(resident)} greedy tokens, the same with the experts in the SSD tier",
              0.0 if resident == ssd and len(resident) == n else 1.0, 0.0)
    seq = torch.tensor([list(prompt) + resident[:-1]], dtype=torch.int64)
    margins = _Margins()
    with torch.no_grad():
        logits = mod.forward(config, to_torch(ref_tensors), seq, margins)[0]
    if margins.value < MIN_MARGIN:
        print(f"  generation: a routing decision of the generated sequence is within {margins.value:.1e} of a tie; "
              "the tokens are not compared with the reference")
        return
    worst = 0.0
    for j, token in enumerate(resident):
        row = logits[len(prompt) - 1 + j]
        worst = max(worst, float(row.max() - row[token]) / float(row.abs().max()))
    rep.check("generation: each token's gap to the reference argmax / max|logit|", worst, LOGITS_TOL)


def check_case(mod, case, args, workdir):
    label = f"{mod.MODEL_TYPE}/{case['name']}"
    rep = Report(label)
    config, dtype = case["config"], case.get("dtype", "F32")
    base = os.path.join(workdir, mod.MODEL_TYPE, case["name"])
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    rng = np.random.default_rng(7)
    ids_np = rng.integers(0, config["vocab_size"], size=(B, T + 1)).astype(np.int32)
    ids = torch.from_numpy(ids_np[:, :T].astype(np.int64))
    targets = torch.from_numpy(ids_np[:, 1:].astype(np.int64))
    try:
        tensors, ref_tensors, margin = draw(mod, case, dtype, case.get("seed", 1), ids)
        hf = os.path.join(base, "hf")
        write_folder(hf, config, tensors, dtype, case.get("shards", 1))
        st.write(os.path.join(base, "tokens.safetensors"), {"input_ids": ids_np})

        # Reference: float64 forward and autograd.
        P = to_torch(ref_tensors, grad=True)
        logits = mod.forward(config, P, ids, _Margins())
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()

        out, grads = os.path.join(base, "engine"), os.path.join(base, "grads")
        run([args.dev_cli, "forward", "--checkpoint", hf, "--tokens", os.path.join(base, "tokens.safetensors"),
             "--out", out, "--grads-dir", grads], os.path.join(base, "forward.log"))
        layout = ["--experts", case["experts"]] if case.get("experts") else []
        run([args.cli, "export", "--checkpoint", grads, "--model-type", mod.MODEL_TYPE, "--out", grads + "-hf",
             *layout],
            os.path.join(base, "export-grads.log"))
        eng = st.read(os.path.join(out, "logits.safetensors"))
        ref_logits = logits.detach().numpy()
        rep.check("logits max|d|/max|ref|", float(np.abs(eng["logits"] - ref_logits).max() / np.abs(ref_logits).max()),
                  LOGITS_TOL)
        rep.check("loss", abs(float(eng["loss"]) - loss.item()) / abs(loss.item()), LOSS_TOL)
        check_generation(mod, config, ref_tensors, hf, base, args, rep, ids_np[0, :4].tolist())
        eng_grads = st.read(os.path.join(grads + "-hf", "model.safetensors"))
        worst, worst_name = 0.0, ""
        for name, t in P.items():
            if not t.is_floating_point():
                continue
            if name not in eng_grads:
                rep.fail("gradient " + name, "missing from the engine's export")
                continue
            ref = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
            err = rel(eng_grads[name].astype(np.float64), ref)
            if err > worst:
                worst, worst_name = err, name
            if err > GRAD_TOL:
                rep.check("gradient " + name, err, GRAD_TOL)
        rep.check(f"every gradient (worst: {worst_name})", worst, GRAD_TOL)

        # Round trip: import, export in the same dtype, compare bit for bit.
        rt = os.path.join(base, "roundtrip")
        flags = {"F32": [], "BF16": ["--bf16"], "F16": ["--f16"]}[dtype]
        run([args.cli, "export", "--checkpoint", hf, "--model-type", mod.MODEL_TYPE, "--out", rt, *flags, *layout],
            os.path.join(base, "export.log"))
        expected = hf
        if case.get("mxfp4") or case.get("fp8"):
            # MXFP4 and FP8 are decoded on import and exported as the decoded values: compare with those, stored as
            # dtype (without the multi-token-prediction layers the import skips).
            expected = os.path.join(base, "expected")
            write_folder(expected, config, ref_tensors, dtype)
        a, b = read_folder_raw(expected), read_folder_raw(rt)
        differ = sorted(set(a) ^ set(b)) + [n for n in a if n in b and a[n] != b[n]]
        rep.check(f"round trip: {len(differ)} of {len(a)} tensors differ" + (f" ({differ[:3]})" if differ else ""),
                  float(len(differ)), 0.0)
        with open(os.path.join(rt, "config.json")) as f:
            back = json.load(f)
        changed = [k for k, v in config.items()
                   if k not in ("torch_dtype", "quantization_config", "num_nextn_predict_layers")
                   and (rope_scaling_values(back.get(k)) != rope_scaling_values(v) if k == "rope_scaling"
                        else back.get(k, "absent") != v)]
        if "quantization_config" in back:
            changed.append("quantization_config written")
        rep.check(f"round trip config: {changed or 'same values'}", float(len(changed)), 0.0)
        print(f"# {label}: routing margin {margin:.2e}")
    except Exception as e:  # noqa: BLE001 - a failing case is reported, the others still run
        rep.fail("run", str(e))
    rep.print()
    return rep.passed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dev-cli", required=True)
    ap.add_argument("--family")
    ap.add_argument("--case")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="hf-check-")
    torch.set_default_dtype(torch.float64)
    passed = failed = 0
    for mod in family_modules(args.family):
        for case in mod.cases():
            if args.case and args.case not in case["name"]:
                continue
            if check_case(mod, case, args, workdir):
                passed += 1
            else:
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
