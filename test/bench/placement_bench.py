"""Placement benchmark: max/mean device load of each placement policy under controlled routing skew, from the
decisions the engine records per step and MoE layer (8 devices, 64 experts, top-2, 4096 tokens per step).
Step-time ratios need execution on the devices, which the engine does not do yet: those ratios print NA.
Ends with BENCH placement static_skew95=R greedy_skew95=R llep_skew95=R llep_uniform_vs_static=NA pipelined_vs_n1=NA
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

MODEL = {"arch": "mixtral", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 128,
         "d_ff": 128, "n_experts": 64, "top_k": 2}
SKEWS = {"skew95": {"distribution": "hot", "hot_fraction": 0.95, "seed": 1},
         "zipf1.2": {"distribution": "zipf", "zipf_s": 1.2, "seed": 1},
         "uniform": {"distribution": "uniform", "seed": 1}}
POLICIES = ["static", "greedy", "least-loaded"]


def run(cli, data, work, skew, policy, steps):
    cfg = {"model": MODEL, "train": {"batch_size": 32, "seq_len": 128, "steps": steps, "threads": 2},
           "routing_skew": skew, "placement": {"devices": 8, "policy": policy}}
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, "run")
    subprocess.run(["rm", "-rf", out], check=True)
    subprocess.run([cli, "train", "--config", path, "--data", data, "--out", out, "--quiet"], check=True)
    with open(os.path.join(out, "log.jsonl")) as f:
        layers = [p for line in f if line.strip() for p in json.loads(line)["placement"]]
    return {"before": statistics.mean(p["imbalance_before"] for p in layers),
            "after": statistics.mean(p["imbalance_after"] for p in layers),
            "spilled": statistics.mean(p["spilled_tokens"] for p in layers),
            "moved": statistics.mean(p["moved_experts"] for p in layers)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    results = {(s, p): run(a.cli, a.data, work, SKEWS[s], p, a.steps) for s in SKEWS for p in POLICIES}
    subprocess.run(["rm", "-rf", work], check=True)
    print(f"8 devices, {MODEL['n_experts']} experts, top-{MODEL['top_k']}, 4096 tokens per step, mean over "
          f"{a.steps} steps x {MODEL['n_layers']} MoE layers")
    print(f"{'routing':<10}{'policy':<14}{'max/mean before':>16}{'after':>8}{'spilled tokens':>16}{'weight copies':>15}")
    for (s, p), r in results.items():
        print(f"{s:<10}{p:<14}{r['before']:>16.3f}{r['after']:>8.3f}{r['spilled']:>16.0f}{r['moved']:>15.1f}")
    print("BENCH placement static_skew95=%.2f greedy_skew95=%.2f llep_skew95=%.2f llep_uniform_vs_static=NA "
          "pipelined_vs_n1=NA" % (results[("skew95", "static")]["after"], results[("skew95", "greedy")]["after"],
                                  results[("skew95", "least-loaded")]["after"]))


if __name__ == "__main__":
    main()
