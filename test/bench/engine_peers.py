"""Peer measurements for test/bench/engine, run by /usr/bin/python3.

  engine_peers.py openblas OURS.jsonl   cblas_sgemm on every GEMM shape listed in our bench output
  engine_peers.py torch-adamw N         torch.optim.AdamW.step() on one N-parameter tensor
  engine_peers.py report OURS OPENBLAS TORCH
                                        side-by-side table (best of the rounds in each file), ratios
                                        and their medians

Each measuring command prints JSON lines. Timing follows `moe-engine-dev bench`: one warm-up call, then the
median of enough repetitions for ~0.3 s (3 to 15) for GEMM, and the median of 10 steps for AdamW.
"""
import ctypes
import ctypes.util
import json
import os
import statistics
import sys
import time


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


# A call of over a second (PyTorch's bf16 matmul on a CPU without bf16 units: 1-4 GFLOP/s) is timed once, its
# warm-up being lost in it: repeating it kept the shapes bench running for many minutes. Same rule as the dev CLI's
# bench::time_median.
SLOW_CALL_S = 1.0


def time_median(fn):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > SLOW_CALL_S:
        return first
    reps = min(15, max(3, int(0.3 / max(first, 1e-9))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def openblas(ours_path):
    import numpy as np

    path = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
    lib = ctypes.CDLL(path)
    lib.openblas_get_corename.restype = ctypes.c_char_p
    lib.openblas_get_config.restype = ctypes.c_char_p
    lib.cblas_sgemm.restype = None
    print(json.dumps({"bench": "openblas_info", "library": os.path.realpath(path),
                      "corename": lib.openblas_get_corename().decode(),
                      "config": lib.openblas_get_config().decode(),
                      "threads": lib.openblas_get_num_threads(),
                      "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                      "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}), flush=True)
    row_major, no_trans, trans = 101, 111, 112
    rng = np.random.default_rng(0)
    for case in read_jsonl(ours_path):
        if case.get("bench") != "gemm":
            continue
        M, N, K, ta, tb = case["M"], case["N"], case["K"], case["trans_a"], case["trans_b"]
        A = rng.uniform(-1, 1, (K, M) if ta else (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (N, K) if tb else (K, N)).astype(np.float32)
        C = np.zeros((M, N), np.float32)
        args = (row_major, trans if ta else no_trans, trans if tb else no_trans, M, N, K, ctypes.c_float(1.0),
                ctypes.c_void_p(A.ctypes.data), A.shape[1], ctypes.c_void_p(B.ctypes.data), B.shape[1],
                ctypes.c_float(0.0), ctypes.c_void_p(C.ctypes.data), N)
        seconds = time_median(lambda: lib.cblas_sgemm(*args))
        out = {k: case[k] for k in ("op", "T", "C", "F", "trans_a", "trans_b", "M", "N", "K")}
        out.update(bench="gemm", seconds=seconds, gflops=2.0 * M * N * K / seconds / 1e9)
        print(json.dumps(out), flush=True)


def torch_adamw(n):
    import inspect

    import torch

    threads = int(os.environ.get("THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(n))
    param.grad = torch.randn(n) * 0.01
    accepted = inspect.signature(torch.optim.AdamW.__init__).parameters
    configs = [{"foreach": False}, {"foreach": True}]
    if "fused" in accepted:
        configs.append({"fused": True})
    results = []
    for options in configs:
        try:
            opt = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.01, **options)
            opt.step()  # allocates the moment buffers
        except (RuntimeError, TypeError) as e:
            print(json.dumps({"bench": "torch_adamw_skipped", "options": options, "why": str(e)}), flush=True)
            continue
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        seconds = statistics.median(times)
        results.append({"bench": "torch_adamw", "options": options, "params": n, "seconds": seconds,
                        "params_per_s": n / seconds})
        print(json.dumps(results[-1]), flush=True)
        del opt
    best = max(results, key=lambda r: r["params_per_s"])
    print(json.dumps({**best, "bench": "torch_adamw_best", "torch": torch.__version__, "threads": threads,
                      "ld_preload": os.environ.get("LD_PRELOAD", ""),
                      "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}), flush=True)


def best_by(rows, key, value):
    """Highest `value` per `key` over all rounds, in first-seen order."""
    best = {}
    for r in rows:
        k = key(r)
        if k not in best or r[value] > best[k][value]:
            best[k] = r
    return list(best.values())


def report(ours_path, openblas_path, torch_path):
    ours, blas, tch = read_jsonl(ours_path), read_jsonl(openblas_path), read_jsonl(torch_path)
    rounds = sum(1 for r in ours if r["bench"] == "info")
    info = next(r for r in ours if r["bench"] == "info")
    peak = max(r["fma_peak_gflops"] for r in ours if r["bench"] == "info")
    binfo = next(r for r in blas if r["bench"] == "openblas_info")
    print(f"each figure is the best of {rounds} round(s); a round runs ours, then OpenBLAS, then torch, so load from "
          f"other processes hits both sides alike")
    print(f"ours: {info['threads']} threads, sgemm kernels {info['sgemm_isa']}, "
          f"FMA peak {peak:.1f} GFLOP/s ({info['fma_isa']} register-only loop)")
    print(f"OpenBLAS: {binfo['library']} core={binfo['corename']} threads={binfo['threads']} "
          f"(OPENBLAS_CORETYPE={binfo['OPENBLAS_CORETYPE']}, OPENBLAS_L2_SIZE={binfo['OPENBLAS_L2_SIZE']}: autodetected)")
    key = lambda r: (r["op"], r["T"], r["C"], r["F"])
    peer = {key(r): r for r in best_by([r for r in blas if r["bench"] == "gemm"], key, "gflops")}
    print()
    print(f"{'op':<8} {'T':>5} {'C':>5} {'F':>5} {'trans':<5} {'M':>5} {'N':>5} {'K':>5}  "
          f"{'ours GF/s':>9} {'OpenBLAS':>9} {'ratio':>6}")
    ratios = []
    for r in best_by([r for r in ours if r["bench"] == "gemm"], key, "gflops"):
        p = peer[key(r)]
        ratio = r["gflops"] / p["gflops"]
        ratios.append(ratio)
        trans = "T,N" if r["trans_a"] else "N,T" if r["trans_b"] else "N,N"
        print(f"{r['op']:<8} {r['T']:>5} {r['C']:>5} {r['F']:>5} {trans:<5} {r['M']:>5} {r['N']:>5} {r['K']:>5}  "
              f"{r['gflops']:>9.1f} {p['gflops']:>9.1f} {ratio:>6.2f}")
    gemm_ratio = statistics.median(ratios)
    print(f"median ours/OpenBLAS over {len(ratios)} shapes: {gemm_ratio:.2f}  "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")

    adamw = max((r for r in ours if r["bench"] == "adamw"), key=lambda r: r["params_per_s"])
    streams = max((r for r in ours if r["bench"] == "adamw_streams"), key=lambda r: r["params_per_s"])
    triad = max((r for r in ours if r["bench"] == "stream_triad"), key=lambda r: r["bytes_per_s"])
    torch_runs = best_by([r for r in tch if r["bench"] == "torch_adamw"], lambda r: json.dumps(r["options"]),
                         "params_per_s")
    best = max(torch_runs, key=lambda r: r["params_per_s"])
    setup = next(r for r in tch if r["bench"] == "torch_adamw_best")
    bound = triad["bytes_per_s"] / 28.0  # AdamW moves 28 bytes per parameter: read p,g,m,v, write p,m,v
    print()
    print(f"STREAM triad: {triad['bytes_per_s'] / 1e9:.1f} GB/s -> AdamW bandwidth bound {bound / 1e9:.3f} Gparam/s")
    for r in torch_runs:
        print(f"torch {setup['torch']} AdamW {r['options']}: {r['params_per_s'] / 1e9:.3f} Gparam/s")
    print(f"torch setup: {setup['threads']} threads, LD_PRELOAD={setup['ld_preload']}, "
          f"LD_LIBRARY_PATH={setup['ld_library_path']}, fastest {best['options']}")
    print(f"ours AdamW: {adamw['params_per_s'] / 1e9:.3f} Gparam/s on {adamw['params']} parameters")
    adamw_torch = adamw["params_per_s"] / best["params_per_s"]
    adamw_bw = adamw["params_per_s"] / bound
    print(f"AdamW ours/torch {adamw_torch:.2f}, ours/bandwidth bound {adamw_bw:.2f}, ours/its own memory streams "
          f"without arithmetic {adamw['params_per_s'] / streams['params_per_s']:.2f} "
          f"({streams['params_per_s'] / 1e9:.3f} Gparam/s)")
    print(f"RATIOS gemm_vs_openblas={gemm_ratio:.2f} adamw_vs_torch={adamw_torch:.2f} adamw_vs_bandwidth={adamw_bw:.2f}")


def main(argv):
    commands = {"openblas": (openblas, 1), "torch-adamw": (lambda n: torch_adamw(int(n)), 1), "report": (report, 3)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        sys.exit(__doc__)
    fn, _ = commands[argv[1]]
    fn(*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
