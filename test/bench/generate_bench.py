#!/usr/bin/python3
"""Decode speed and memory of an OLMoE-shaped model folder against the memory-bandwidth bound, in one run.

The folder: the olmoe-1b-7b preset's shape with --layers layers (d_model 2048, 64 experts of 1024, top-8, 16 heads,
vocabulary 50304) and random weights, written by the engine as a Hugging Face olmoe folder in bf16, as a download
would be. `moe-engine generate` answers a prompt of 8 tokens with 1 + --tokens tokens and reports its wall times
(the session's opening, i.e. the folder's load, and prefill: the start-up here; the mean decode step) and the
process's resident memory with the session open and its peak (the load's, where a bf16 session lays each weight
out as it reads it). Each decode step reads every non-expert weight (attention, norms,
router, LM head) and top-k experts per layer once: in fp32 compute their fp32 bytes, in bf16 compute
(train.compute_dtype) the linear weights' bf16 and the rest fp32. Those bytes over the read bandwidth (a read-only
sweep of 768 MiB, the fastest of the probes made before each session in this run) are the step's lower bound.
Sessions: resident fp32, whose session keeps its linear weights laid out in the GEMM's panels (the same bytes,
read in order); resident bf16, whose session keeps only its linear weights' laid-out bf16 form (about half the
fp32 session's memory); the experts in the SSD tier (a file behind a host cache of 4 x top-k experts and 2 x
top-k slots) in fp32 and in bf16 (whose records keep the linear weights in bf16: half the reads), whose greedy
tokens must be the resident ones.
Last line: BENCH generate decode_vs_bandwidth=R tokens_per_s=X start_s=S ssd_decode_vs_resident=R
  bf16_decode_vs_fp32=R bf16_decode_vs_bandwidth=R bf16_memory_vs_fp32=R bf16_peak_vs_fp32=R
  ssd_bf16_decode_vs_fp32=R
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADDON = os.path.join(ROOT, "native", "build-addon", "Release", "moe_engine_addon.node")
PROMPT = "1,2,3,4,5,6,7,8"

MAKE_FOLDER = """
const addon = require(process.argv[1])
const fs = require('fs')
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
cfg.model.n_layers = Number(process.argv[3])
cfg.model.max_seq_len = 512
cfg.train = { batch_size: 1, seq_len: 8, threads: Number(process.argv[5]), seed: 1 }
new addon.Engine(JSON.stringify(cfg)).exportHf(process.argv[4], 'olmoe', true)
"""


def model_config(layers):
    with open(os.path.join(ROOT, "resources", "presets", "olmoe-1b-7b.json")) as f:
        m = json.load(f)["model"]
    m["n_layers"] = layers
    return m


def decode_bytes(m, linear_bytes=4):
    """Bytes one decode step reads: each layer's attention, norms, router and top-k experts, and the head; the linear
    weights (attention, experts, head) at linear_bytes each, the rest in fp32."""
    d, f, v = m["d_model"], m["expert_d_ff"], m["vocab_size"]
    linear = m["n_layers"] * (4 * d * d + m["top_k"] * 3 * d * f) + v * d
    rest = m["n_layers"] * (2 * d + 2 * d + m["n_experts"] * d) + d
    return linear_bytes * linear + 4 * rest


def read_bandwidth(dev_cli, threads):
    out = subprocess.run([dev_cli, "bench", "--stream", "--json", "--threads", str(threads)], check=True,
                         capture_output=True, text=True).stdout
    return next(json.loads(l)["bytes_per_s"] for l in out.splitlines() if '"stream_read"' in l)


def generate(cli, folder, tokens, experts, config):
    """(start-up s, decode s per token, tokens, resident MB with the session open, the process's peak MB) of one
    session."""
    out = json.loads(subprocess.run([cli, "generate", "--model", folder, "--tokens", PROMPT, "--max-tokens",
                                     str(tokens), "--experts", experts, "--config", config], check=True,
                                    capture_output=True, text=True).stdout)
    return ((out["open_ms"] + out["prefill_ms"]) / 1000, out["decode_ms_per_token"] / 1000, out["tokens"],
            out.get("resident_mb", float("nan")), out.get("peak_resident_mb", float("nan")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    cli, dev = os.path.join(a.build, "moe-engine"), os.path.join(a.build, "moe-engine-dev")
    if not os.path.exists(ADDON):
        sys.exit(f"{ADDON} is missing: build the addon first (npm ci, or scripts/build-native.sh)")
    folder = os.path.join(a.workdir, "olmoe")
    t0 = time.perf_counter()
    subprocess.run(["node", "-e", MAKE_FOLDER, ADDON, os.path.join(ROOT, "resources", "presets", "olmoe-1b-7b.json"),
                    str(a.layers), folder, str(a.threads)], check=True)
    print(f"folder: OLMoE shape, {a.layers} layers, bf16, written in {time.perf_counter() - t0:.1f} s")
    configs = {}
    for dtype in ("fp32", "bf16"):
        configs[dtype] = os.path.join(a.workdir, f"config-{dtype}.json")
        with open(configs[dtype], "w") as f:
            json.dump({"train": {"threads": a.threads, "compute_dtype": dtype}}, f)

    m = model_config(a.layers)
    bw = 0.0
    rows = {}
    # The SSD session last: its tier's file I/O can push the folder out of a small page cache, and the next start-up
    # would time the disk.
    sessions = ((("resident", "fp32"), "resident"), (("resident", "bf16"), "bf16"), (("ssd", "fp32"), "ssd"),
                (("ssd", "bf16"), "ssd_bf16"))
    for (experts, dtype), key in sessions:
        bw = max(bw, read_bandwidth(dev, a.threads))  # the machine's load drifts: probe before each session
        rows[key] = generate(cli, folder, 1 + a.tokens, experts, configs[dtype])
    for (experts, dtype), key in sessions:
        start, decode, _, mb, peak = rows[key]
        bound = decode_bytes(m, 2 if dtype == "bf16" else 4) / bw
        print(f"{experts:<9} {dtype}  start {start:6.2f} s   decode {1000 * decode:8.1f} ms/token "
              f"({1 / decode:6.1f} tokens/s)   bound {1000 * bound:6.1f} ms/token   bound / decode {bound / decode:.2f}"
              f"   resident {mb / 1024:5.2f} GB (peak {peak / 1024:5.2f})")
    print(f"decode reads {decode_bytes(m) / 1e9:.2f} GB per token in fp32, {decode_bytes(m, 2) / 1e9:.2f} GB in bf16; "
          f"read bandwidth {bw / 1e9:.1f} GB/s (best probe); {a.threads} threads")
    same = rows["resident"][2] == rows["ssd"][2] and rows["bf16"][2] == rows["ssd_bf16"][2]
    print(f"SSD-tier greedy tokens equal the resident ones (fp32 and bf16): {same}")
    if not same:
        sys.exit("the SSD tier's tokens differ from the resident ones")
    start, decode, _, mb, peak = rows["resident"]
    bf16_decode, bf16_mb, bf16_peak = rows["bf16"][1], rows["bf16"][3], rows["bf16"][4]
    print(f"BENCH generate decode_vs_bandwidth={decode_bytes(m) / bw / decode:.2f} tokens_per_s={1 / decode:.1f} "
          f"start_s={start:.1f} ssd_decode_vs_resident={decode / rows['ssd'][1]:.2f} "
          f"bf16_decode_vs_fp32={decode / bf16_decode:.2f} "
          f"bf16_decode_vs_bandwidth={decode_bytes(m, 2) / bw / bf16_decode:.2f} bf16_memory_vs_fp32={bf16_mb / mb:.2f} "
          f"bf16_peak_vs_fp32={bf16_peak / peak:.2f} "
          f"ssd_bf16_decode_vs_fp32={rows['ssd'][1] / rows['ssd_bf16'][1]:.2f}")

if __name__ == "__main__":
    main()
