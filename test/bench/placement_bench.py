"""Placement benchmark: each placement policy under controlled routing skew on 8 virtual devices (64 experts,
top-2, 4096 tokens per step), from what the engine records per step and MoE layer while it runs the experts on
the devices: max/mean device load, step time, the devices' peak bytes, and pipelined (n partitions) vs n = 1.

Step time on the devices: the virtual devices share this machine's 2 cores, so the wall time of the expert phase
is not what 8 devices would take. Each device's jobs are timed by their own thread's CPU time and replayed
through the device's stream order (critical_ms, the slowest device): device step time = step time − the layers'
expert-phase wall time + their critical time. Wall-clock ratios are printed beside them.
Ends with BENCH placement static_skew95=R greedy_skew95=R llep_skew95=R llep_uniform_vs_static=R pipelined_vs_n1=R
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MODEL = {"arch": "mixtral", "vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 4, "max_seq_len": 128,
         "d_ff": 256, "n_experts": 64, "top_k": 2}
SKEWS = {"skew95": {"distribution": "hot", "hot_fraction": 0.95, "seed": 1},
         "zipf1.2": {"distribution": "zipf", "zipf_s": 1.2, "seed": 1},
         "uniform": {"distribution": "uniform", "seed": 1}}
POLICIES = ["static", "greedy", "least-loaded"]


def run(cli, data, work, skew, policy, steps, pipeline=None):
    """One training run; returns its step records (each with the placement of every MoE layer)."""
    cfg = {"model": MODEL, "train": {"batch_size": 32, "seq_len": 128, "steps": steps, "threads": 2},
           "routing_skew": skew, "placement": {"devices": 8, "policy": policy}}
    if pipeline:
        cfg["pipeline"] = pipeline
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, "run")
    subprocess.run(["rm", "-rf", out], check=True)
    subprocess.run([cli, "train", "--config", path, "--data", data, "--out", out, "--quiet"], check=True)
    with open(os.path.join(out, "log.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def summarize(runs):
    """Loads from every step; times from every step but each run's first, which pays for start-up and
    Algorithm 1's trials."""
    records = [r for run_records in runs for r in run_records]
    layers = [p for r in records for p in r["placement"]]
    timed = [r for run_records in runs for r in (run_records[1:] or run_records)]
    device_ms = [r["step_ms"] - sum(p["wall_ms"] for p in r["placement"]) + sum(p["critical_ms"] for p in r["placement"])
                 for r in timed]
    last = records[-1]["placement"]
    return {"after": statistics.mean(p["imbalance_after"] for p in layers),
            "before": statistics.mean(p["imbalance_before"] for p in layers),
            "spilled": statistics.mean(p["spilled_tokens"] for p in layers),
            "moved": statistics.mean(p["moved_experts"] for p in layers),
            "device_ms": statistics.median(device_ms),
            "wall_ms": statistics.median(r["step_ms"] for r in timed),
            "peak": max(records[-1]["device_peak_bytes"]),
            "n": last[0]["partitions"], "reuse": last[0]["reuse_strategy"],
            "predicted": statistics.mean(p["predicted_ms"] for p in layers),
            "critical": statistics.mean(p["critical_ms"] for p in layers)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    configs = {(s, p): (SKEWS[s], p, None) for s in SKEWS for p in POLICIES}
    pipelines = [("n=1", None), ("n=4", {"partitions": 4}), ("n=4 reuse auto", {"partitions": 4, "memory_reuse": "auto"}),
                 ("n=auto", {"partitions": "auto"})]
    configs.update({name: (SKEWS["skew95"], "least-loaded", pipe) for name, pipe in pipelines})
    # Rounds interleave the configurations, so a slow spell of this shared machine hits all of them alike.
    runs = {key: [] for key in configs}
    for _ in range(a.rounds):
        for key, (skew, policy, pipe) in configs.items():
            runs[key].append(run(a.cli, a.data, work, skew, policy, a.steps, pipe))
    subprocess.run(["rm", "-rf", work], check=True)
    results = {(s, p): summarize(runs[(s, p)]) for s in SKEWS for p in POLICIES}
    pipelined = {name: summarize(runs[name]) for name, _ in pipelines}
    print(f"8 virtual devices, {MODEL['n_experts']} experts, top-{MODEL['top_k']}, d_model {MODEL['d_model']}, "
          f"4096 tokens per step; {a.rounds} rounds of {a.steps} steps per configuration; loads: mean over steps and "
          f"{MODEL['n_layers']} MoE layers; times: median of steps 2..{a.steps}; ratios against static under the same "
          f"routing")
    print(f"{'routing':<9}{'policy':<14}{'max/mean before':>16}{'after':>7}{'spilled':>9}{'copies':>8}"
          f"{'device step ms':>16}{'vs static':>10}{'wall ms':>9}{'vs static':>10}{'peak MiB':>10}{'vs static':>10}")
    for (s, p), r in results.items():
        base = results[(s, "static")]
        print(f"{s:<9}{p:<14}{r['before']:>16.3f}{r['after']:>7.3f}{r['spilled']:>9.0f}{r['moved']:>8.1f}"
              f"{r['device_ms']:>16.1f}{r['device_ms'] / base['device_ms']:>10.3f}{r['wall_ms']:>9.1f}"
              f"{r['wall_ms'] / base['wall_ms']:>10.3f}{r['peak'] / 2**20:>10.2f}{r['peak'] / base['peak']:>10.3f}")
    print("pipelining (least-loaded, 95% skew):")
    print(f"{'':<18}{'n':>3}{'reuse':>7}{'device step ms':>16}{'vs n=1':>8}{'wall ms':>9}{'vs n=1':>8}"
          f"{'peak MiB':>10}{'layer critical ms':>19}{'eq.10 predicted':>17}")
    one = pipelined["n=1"]
    for name, r in pipelined.items():
        reuse = ["none", "S1", "S2", "S3", "S4"][r["reuse"]]
        print(f"{name:<18}{r['n']:>3}{reuse:>7}{r['device_ms']:>16.1f}{r['device_ms'] / one['device_ms']:>8.3f}"
              f"{r['wall_ms']:>9.1f}{r['wall_ms'] / one['wall_ms']:>8.3f}{r['peak'] / 2**20:>10.2f}"
              f"{r['critical']:>19.2f}{r['predicted']:>17.2f}")
    uniform = results[("uniform", "least-loaded")]["device_ms"] / results[("uniform", "static")]["device_ms"]
    print("BENCH placement static_skew95=%.2f greedy_skew95=%.2f llep_skew95=%.2f llep_uniform_vs_static=%.3f "
          "pipelined_vs_n1=%.3f" % (results[("skew95", "static")]["after"], results[("skew95", "greedy")]["after"],
                                    results[("skew95", "least-loaded")]["after"], uniform,
                                    pipelined["n=auto"]["device_ms"] / one["device_ms"]))


if __name__ == "__main__":
    main()
