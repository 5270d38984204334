#!/usr/bin/python3
"""Compare the native engine with the PyTorch reference (moe_ref.py).

    /usr/bin/python3 test/reference/check_engine.py --cli PATH/TO/moe-engine [--dev-cli PATH/TO/moe-engine-dev]
                                                    [--arch gpt-moe|mixtral|all] [--workdir DIR] [--case SUBSTRING]
    /usr/bin/python3 test/reference/check_engine.py --self-test

For every case: random test weights and tokens, the engine's `forward --grads` (moe-engine-dev) against the float64 reference
(logits, loss, objective, every gradient), then a 20-step `train` run against the reference's (per-step telemetry,
final weights). Exit status 0 only when every case passes. Tolerances and their reasons: README.md.
"""

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_ref  # noqa: E402
import safetensors_io  # noqa: E402
import tokens_io  # noqa: E402

# Tolerances (README.md explains them)
LOGITS_TOL = 1e-4        # max |Δlogit| / max |logit_ref|
SCALAR_TOL = 1e-5        # loss and objective, relative
GRAD_TOL = 1e-4          # per tensor ‖g − g_ref‖ / ‖g_ref‖
GRAD_ELEM_RTOL = 1e-3    # per element |g − g_ref| <= RTOL·|g_ref| + ATOL·max|g_ref of that tensor|
GRAD_ELEM_ATOL = 1e-4
STEP_TOL = 1e-4          # per-step loss, aux_loss and grad_norm, relative
LR_TOL = 1e-6            # per-step lr, relative
PARAM_TOL = 1e-4         # final weights, per tensor ‖w − w_ref‖ / ‖w_ref‖
FORWARD_MARGIN_MIN = 1e-5  # smallest router-probability gap (top k+1) accepted in the forward batch
TRAIN_MARGIN_MIN = 5e-6    # ... and along the reference's training trajectory

B, T = 2, 16
SHARD_TOKENS = 300       # not a multiple of B·T + 1, so the batcher wraps during 20 steps
ENGINE_TIMEOUT_S = 600


@dataclass
class Case:
    name: str
    arch: str
    model: dict = field(default_factory=dict)   # overrides of base_model(arch)
    train: dict = field(default_factory=dict)   # overrides of BASE_TRAIN
    masked: bool = False                        # token shard carries a target mask
    token_bytes: int = 2

    @property
    def label(self):
        return f"{self.arch}/{self.name}"


# eps 1e-6, not 1e-8: with 1e-8, AdamW turns fp32 rounding noise of near-zero gradient elements into O(lr) updates,
# and an exact fp32 engine drifts ~1e-4 from the float64 reference within 20 steps (README.md)
BASE_TRAIN = {
    "batch_size": B, "seq_len": T, "steps": 20, "grad_accum": 1, "lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 5,
    "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-6, "grad_clip": 1.0, "seed": 1337, "threads": 2,
    "checkpoint_every": 0,
}


def base_model(arch):
    """Tiny model with every field explicit, so no default can differ between engine and reference."""
    return {
        "arch": arch, "vocab_size": 64, "d_model": 32, "n_layers": 2, "n_heads": 4,
        "n_kv_heads": 4 if arch == moe_ref.GPT_MOE else 2, "max_seq_len": T, "d_ff": 48, "expert_d_ff": 24,
        "n_experts": 4, "top_k": 2, "moe_every": 1, "renormalize": True, "shared_expert_d_ff": 0,
        "shared_expert_gate": False, "residual_mlp": False, "aux_loss_coef": 0.1, "z_loss_coef": 0.01,
        "capacity_factor": None, "rope_theta": 10000.0, "norm_eps": 1e-5,
        "tie_embeddings": arch == moe_ref.GPT_MOE, "init_std": 0.02,
    }


def cases_for(arch):
    return [
        Case("top2-dropless", arch),
        Case("top1-capacity1.0", arch, {"top_k": 1, "renormalize": False, "capacity_factor": 1.0}),
        Case("top2-norenorm-capacity1.25-shared", arch,
             {"renormalize": False, "capacity_factor": 1.25, "shared_expert_d_ff": 40,
              "shared_expert_gate": arch == moe_ref.MIXTRAL, "tie_embeddings": arch == moe_ref.MIXTRAL},
             {"grad_clip": 0.0}),
        Case("pyramid-every2-residual-masked-accum2", arch,
             {"n_layers": 4, "moe_every": 2, "n_experts": [4, 6], "top_k": 1 if arch == moe_ref.GPT_MOE else 2,
              "residual_mlp": True, "shared_expert_d_ff": 16},
             {"grad_accum": 2}, masked=True, token_bytes=4),
    ]


def all_cases():
    return [case for arch in (moe_ref.GPT_MOE, moe_ref.MIXTRAL) for case in cases_for(arch)]


def case_config(case):
    raw = {"model": {**base_model(case.arch), **case.model}, "train": {**BASE_TRAIN, **case.train}}
    moe_ref.resolve_config(raw)  # validates
    return raw


# ------------------------------------------------------------------------------------------------------ reporting

class Report:
    """Rows of (check, error, tolerance) for one case, plus detail lines printed under a failing row."""

    def __init__(self, label):
        self.label = label
        self.rows = []
        self.notes = []

    def check(self, name, error, tol, details=()):
        ok = error <= tol  # NaN fails
        self.rows.append((name, error, tol, ok, list(details) if not ok else []))
        return ok

    def fail(self, name, message):
        self.rows.append((name, math.inf, 0.0, False, [message]))

    @property
    def passed(self):
        return bool(self.rows) and all(row[3] for row in self.rows)

    def print(self):
        print(f"== {self.label}  " + "  ".join(self.notes))
        print(f"  {'check':<52} {'error':>9} {'tol':>9}  result")
        for name, error, tol, ok, details in self.rows:
            print(f"  {name:<52} {error:9.2e} {tol:9.1e}  {'ok' if ok else 'FAIL'}")
            for line in details:
                print(f"      {line}")


def rel_err(ours, ref):
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref)
    diff = np.linalg.norm(ours - ref)
    return float(diff / denom) if denom > 0 else float(diff)


# ----------------------------------------------------------------------------------------------------- case inputs

@dataclass
class CaseInputs:
    config: dict          # as written to config.json (all fields explicit)
    resolved: dict        # moe_ref.resolve_config(config)
    seed: int
    params: dict          # name -> float32 array
    input_ids: np.ndarray  # int32 [B, T + 1] for `forward`
    tokens: np.ndarray    # token stream for `train`
    mask: np.ndarray | None
    ref_forward: dict
    ref_log: list
    ref_final: dict


def make_case_inputs(case):
    """Random weights whose routing (forward batch and the whole reference trajectory) has no near-ties, so fp32
    and fp64 route alike; everything the reference computes for them, in float64."""
    config = case_config(case)
    resolved = moe_ref.resolve_config(config)
    m = resolved["model"]
    tokens, mask = make_shard(case, m, case_seed(case))
    for seed in range(case_seed(case), case_seed(case) + 50):
        params = moe_ref.random_params(m, seed)
        rng = np.random.default_rng(seed)
        input_ids = rng.integers(0, m["vocab_size"], size=(B, T + 1)).astype(np.int32)
        ref = reference_forward(m, params, input_ids)
        if ref["min_margin"] < FORWARD_MARGIN_MIN:
            continue
        log, final = moe_ref.train(params, resolved, tokens, mask, dtype=torch.float64)
        if min(r["min_margin"] for r in log) >= TRAIN_MARGIN_MIN:
            return CaseInputs(config, resolved, seed, params, input_ids, tokens, mask, ref, log, final)
    raise RuntimeError(f"{case.label}: no tie-free random weights found")


def reference_forward(m, params, input_ids):
    """float64 reference: logits, loss, objective and the objective's gradient for every parameter."""
    weights = moe_ref.to_torch(params, torch.float64, requires_grad=True)
    ids = torch.from_numpy(input_ids.astype(np.int64))
    out = moe_ref.forward(weights, m, ids[:, :-1], ids[:, 1:])
    out.objective.backward()
    grads = {name: (w.grad if w.grad is not None else torch.zeros_like(w)).numpy() for name, w in weights.items()}
    return {"logits": out.logits.detach().numpy(), "loss": float(out.loss), "objective": float(out.objective),
            "grads": grads, "min_margin": out.min_margin, "dropped": out.dropped}


def make_shard(case, m, seed):
    """A learnable stream (noisy affine recurrence) and, for masked cases, a mask hiding ~30% of targets."""
    rng = np.random.default_rng(seed)
    V = m["vocab_size"]
    tokens = np.empty(SHARD_TOKENS, dtype=np.int64)
    tokens[0] = 1
    for j in range(1, SHARD_TOKENS):
        tokens[j] = (5 * tokens[j - 1] + 3) % V if rng.random() < 0.8 else rng.integers(V)
    mask = (rng.random(SHARD_TOKENS) > 0.3).astype(np.uint8) if case.masked else None
    return tokens, mask


def write_checkpoint(directory, config, params):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    safetensors_io.write(os.path.join(directory, "model.safetensors"), params)


# ------------------------------------------------------------------------------------------------------ engine runs

def run_engine(cli, args, out_dir, log_path):
    """Run the engine into a fresh out_dir; returns None on success, else a short error message (the full output
    is in log_path)."""
    shutil.rmtree(out_dir, ignore_errors=True)  # the engine appends to log.jsonl: start from nothing
    command = [cli, *args]
    try:
        with open(log_path, "w") as log:
            log.write(" ".join(command) + "\n")
            log.flush()
            proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=ENGINE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"timed out after {ENGINE_TIMEOUT_S}s (see {log_path})"
    except OSError as exc:
        return f"cannot run {cli}: {exc}"
    if proc.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-600:].strip().replace("\n", " | ")
        return f"exit status {proc.returncode}: {tail}"
    return None


def read_outputs(path, report, check_name):
    try:
        return safetensors_io.read(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        report.fail(check_name, f"cannot read {path}: {exc}")
        return None


# --------------------------------------------------------------------------------------------------------- forward

def check_forward(cli, case_dir, m, ref, report):
    out_dir = os.path.join(case_dir, "forward")
    error = run_engine(cli, ["forward", "--checkpoint", os.path.join(case_dir, "checkpoint"),
                             "--tokens", os.path.join(case_dir, "tokens.safetensors"), "--out", out_dir, "--grads"],
                       out_dir, os.path.join(case_dir, "forward.log"))
    if error:
        report.fail("forward run", error)
        return
    logits_file = read_outputs(os.path.join(out_dir, "logits.safetensors"), report, "forward logits.safetensors")
    grads_file = read_outputs(os.path.join(out_dir, "grads.safetensors"), report, "forward grads.safetensors")
    if logits_file is not None:
        check_logits(logits_file, m, ref, report)
    if grads_file is not None:
        check_scalar(grads_file, "objective", ref["objective"], report)
        check_grads(grads_file, ref["grads"], report)


def check_logits(outputs, m, ref, report):
    logits = outputs.get("logits")
    expected_shape = (B, T, m["vocab_size"])
    if logits is None or logits.shape != expected_shape:
        got = "missing" if logits is None else list(logits.shape)
        report.fail("logits", f"expected `logits` {list(expected_shape)}, got {got}")
    else:
        err = float(np.abs(logits - ref["logits"]).max() / np.abs(ref["logits"]).max())
        report.check("logits max|Δ| / max|ref|", err, LOGITS_TOL)
    check_scalar(outputs, "loss", ref["loss"], report)


def check_scalar(outputs, key, expected, report):
    value = outputs.get(key)
    if value is None or value.size != 1:
        report.fail(key, f"expected a scalar `{key}`")
        return
    report.check(f"{key} rel (engine {float(value):.6f}, ref {expected:.6f})",
                 abs(float(value) - expected) / abs(expected), SCALAR_TOL)


def check_grads(grads, ref_grads, report):
    names = [n for n in grads if n != "objective"]
    missing = [n for n in ref_grads if n not in grads]
    extra = [n for n in names if n not in ref_grads]
    if missing or extra:
        report.fail("gradient names", f"missing {missing[:8]}{'…' if len(missing) > 8 else ''}, extra {extra[:8]}")
    worst, worst_name, failing, bad_elements, total = 0.0, "", [], 0, 0
    for name, ref in ref_grads.items():
        if name not in grads:
            continue
        ours = grads[name]
        if ours.shape != ref.shape:
            failing.append(f"{name}: shape {list(ours.shape)} != {list(ref.shape)}")
            continue
        err = rel_err(ours, ref)
        limit = GRAD_ELEM_RTOL * np.abs(ref) + GRAD_ELEM_ATOL * np.abs(ref).max()
        n_bad = int((np.abs(ours - ref) > limit).sum())
        bad_elements += n_bad
        total += ref.size
        if err > worst or math.isnan(err):
            worst, worst_name = err, name
        if not err <= GRAD_TOL or n_bad:
            failing.append(f"{name}: ‖Δ‖/‖ref‖ {err:.2e}, {n_bad} elements outside tolerance, ‖ref‖ "
                           f"{np.linalg.norm(ref):.3e}")
    report.check(f"grads worst ‖Δ‖/‖ref‖ ({worst_name})", worst, GRAD_TOL, failing)
    report.check(f"grad elements outside tol ({bad_elements} of {total})", bad_elements, 0)


# ----------------------------------------------------------------------------------------------------------- train

def check_train(cli, case_dir, case, inputs, report):
    data_path = os.path.join(case_dir, "tokens.bin")
    tokens_io.write(data_path, inputs.tokens, inputs.resolved["model"]["vocab_size"], inputs.mask,
                    token_bytes=case.token_bytes)
    config_path = os.path.join(case_dir, "train_config.json")
    with open(config_path, "w") as f:
        json.dump(inputs.config, f, indent=2)
    run_dir = os.path.join(case_dir, "run")
    error = run_engine(cli, ["train", "--config", config_path, "--data", data_path, "--out", run_dir,
                             "--init", os.path.join(case_dir, "checkpoint")], run_dir, os.path.join(case_dir, "train.log"))
    if error:
        report.fail("train run", error)
        return
    log = read_log(os.path.join(run_dir, "log.jsonl"), report)
    if log is not None:
        compare_log(log, inputs.ref_log, report)
    final = find_final_weights(run_dir)
    if final is None:
        report.fail("final weights", f"no final/model.safetensors or checkpoint*/model.safetensors in {run_dir}")
        return
    weights = read_outputs(final, report, "final weights")
    if weights is not None:
        compare_final_weights(weights, inputs.ref_final, inputs.resolved["model"], report)


def read_log(path, report):
    """Step records of log.jsonl (objects with "step" and "loss"), keyed by step."""
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as exc:
        report.fail("train log.jsonl", f"cannot read {path}: {exc}")
        return None
    return {r["step"]: r for r in records if isinstance(r, dict) and "step" in r and "loss" in r}


def compare_log(log, ref_log, report):
    steps = [r["step"] for r in ref_log]
    if sorted(log) != steps:
        report.fail("train steps logged", f"expected steps {steps[0]}..{steps[-1]}, got {sorted(log)[:25]}")
        return
    for key, tol in (("loss", STEP_TOL), ("aux_loss", STEP_TOL), ("lr", LR_TOL), ("grad_norm", STEP_TOL)):
        worst, worst_step, bad = -1.0, 0, []
        for ref in ref_log:
            value = log[ref["step"]].get(key)
            err = math.inf
            if isinstance(value, (int, float)):
                err = abs(value - ref[key]) / max(abs(ref[key]), 1e-12)
            if not err <= worst:  # NaN counts as worst
                worst, worst_step = err, ref["step"]
            if not err <= tol:
                bad.append(f"step {ref['step']}: engine {value} ref {ref[key]:.8g} (rel {err:.2e}; "
                           f"ref router margin {ref['min_margin']:.1e})")
        report.check(f"train {key} per step, worst rel (step {worst_step})", worst, tol, bad[:6])


def find_final_weights(run_dir):
    """RUN/final/model.safetensors (a driver's), else the most recent RUN/checkpoint*/model.safetensors (the engine
    saves its last step as RUN/checkpoint-<step>)."""
    final = os.path.join(run_dir, "final", "model.safetensors")
    if os.path.exists(final):
        return final
    checkpoints = glob.glob(os.path.join(run_dir, "checkpoint*", "model.safetensors"))
    return max(checkpoints, key=os.path.getmtime) if checkpoints else None


def compare_final_weights(weights, ref_params, m, report):
    worst, worst_name, failing = 0.0, "", []
    for name, ref in ref_params.items():
        ref = ref.numpy()
        ours = weights.get(name)
        if ours is None or ours.shape != ref.shape:
            failing.append(f"{name}: missing or wrong shape")
            worst, worst_name = math.inf, name
            continue
        if name.endswith("attn.qkv.bias"):
            ours, ref = without_key_bias(ours, m), without_key_bias(ref, m)
        err = rel_err(ours, ref)
        if err > worst or math.isnan(err):
            worst, worst_name = err, name
        if not err <= PARAM_TOL:
            failing.append(f"{name}: ‖Δ‖/‖ref‖ {err:.2e}")
    report.check(f"final weights worst ‖Δ‖/‖ref‖ ({worst_name})", worst, PARAM_TOL, failing)


def without_key_bias(qkv_bias, m):
    """The key bias has a mathematically zero gradient (softmax is shift-invariant), so AdamW moves it by the sign
    of rounding noise; it does not change the model, and is left out of the weight comparison."""
    q_size = m["n_heads"] * moe_ref.head_size(m)
    k_size = m["n_kv_heads"] * moe_ref.head_size(m)
    return np.concatenate([qkv_bias[:q_size], qkv_bias[q_size + k_size:]])


# ------------------------------------------------------------------------------------------------------------ main

def case_seed(case):
    """A seed that depends only on the case, so results do not change with --arch or --case filters."""
    return zlib.crc32(case.label.encode()) % 100_000


def run_case(cli, dev_cli, case, workdir):
    report = Report(case.label)
    case_dir = os.path.join(workdir, case.label.replace("/", "_"))
    os.makedirs(case_dir, exist_ok=True)
    inputs = make_case_inputs(case)
    report.notes.append(f"seed {inputs.seed}; router margin: forward {inputs.ref_forward['min_margin']:.1e}, "
                        f"train {min(r['min_margin'] for r in inputs.ref_log):.1e}; "
                        f"{inputs.ref_forward['dropped']} dropped assignments")
    write_checkpoint(os.path.join(case_dir, "checkpoint"), inputs.config, inputs.params)
    safetensors_io.write(os.path.join(case_dir, "tokens.safetensors"), {"input_ids": inputs.input_ids})
    check_forward(dev_cli, case_dir, inputs.resolved["model"], inputs.ref_forward, report)
    check_train(cli, case_dir, case, inputs, report)
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", help="path of the engine command-line program (train)")
    parser.add_argument("--dev-cli", help="path of the engine's developer tool (forward); default: moe-engine-dev "
                                          "beside --cli, else --cli itself")
    parser.add_argument("--arch", default="all", choices=["all", moe_ref.GPT_MOE, moe_ref.MIXTRAL])
    parser.add_argument("--workdir", help="where case files and engine outputs go (default: a new temp dir)")
    parser.add_argument("--case", default="", help="only cases whose name contains this")
    parser.add_argument("--self-test", action="store_true", help="check the reference itself (no engine)")
    args = parser.parse_args()
    if args.self_test:
        import self_test
        sys.exit(self_test.main())
    if not args.cli:
        parser.error("--cli is required (or --self-test)")
    torch.set_num_threads(2)
    cli = os.path.abspath(args.cli) if os.path.exists(args.cli) else args.cli
    beside = os.path.join(os.path.dirname(cli), "moe-engine-dev")
    dev_cli = os.path.abspath(args.dev_cli) if args.dev_cli else beside if os.path.exists(beside) else cli
    workdir = args.workdir or tempfile.mkdtemp(prefix="moe-check-")
    os.makedirs(workdir, exist_ok=True)
    print(f"workdir {workdir}")
    cases = [c for c in all_cases() if args.arch in ("all", c.arch) and args.case in c.label]
    passed = failed = 0
    for case in cases:
        report = run_case(cli, dev_cli, case, workdir)
        report.print()
        passed, failed = passed + report.passed, failed + (not report.passed)
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
