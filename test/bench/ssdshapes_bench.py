#!/usr/bin/python3
"""SSD-tier benchmark on real shapes: full fine-tuning of an OLMoE-shaped stack with every expert's weights and
AdamW state in the SSD tier, its step time against the time the disk needs for the bytes the step moves.

    /usr/bin/python3 test/bench/ssdshapes_bench.py --cli native/build/moe-engine --data TOKENS.bin
        [--layers 2] [--threads 2] [--steps 5] [--seq 128] [--cache-experts 32] [--workdir DIR]

The model: d_model 2048, 16 heads, 64 routed experts of d_ff 1024 (SwiGLU), top-8 softmax routing without
renormalisation, q/k projection norms, byte vocabulary (256); every parameter trains (no finetune section), fp32,
AdamW with the engine's default clipping (1.0). Each expert's record in the SSD tier is its weights, gradient and
two moments: 4 x 25.2 MB, 100.7 MB; 2 layers hold 128 experts, 12.9 GB.

The SSD run: `moe-engine train` with offload {"mode": "ssd", "expert_slots": 16, "cache_experts": 32,
"lookahead": 2, "ssd_dir": DIR/ssd-tier}, so the host cache holds a quarter of the experts (3.2 GB of 12.9 GB) and
every step streams the experts through it: forward reads each expert's weights, backward reads them again where
they were evicted and puts its gradient in the cache; the updates wait for the global norm (clipping), so the
gradients evicted before their update are written and read back; an update reads the moments (and whatever
else was evicted), and the evictions write weights and moments back (an applied gradient is not written). The
updates run on into the next step (the engine's optimizer overlap), so a step's time and bytes include the
previous step's updates: one step's worth once the run is steady. The resident run trains the same config without
offload; the engine's offload is bit-identical to resident training, so the two runs' losses must be equal
(same_losses).

Per step (the engine's log.jsonl): step_ms, forward/backward/optimizer ms (forward includes waiting for the
previous step's updates), stall (compute waiting for an upload, and so for its reads), upload (the copy worker's
copies into the slots), ssd_ms (time inside file reads and writes, summed over the threads doing them, so it can
exceed step_ms), bytes read and written, cache hits/misses. Medians over the steps after the first (the first
starts from an empty cache and has no earlier updates to finish).

The disk: sequential direct-I/O bandwidth (O_DIRECT, 32 MiB requests, a 2 GiB file) in the directory the
engine's SSD file goes to, read and write, measured three times: before the SSD run, right after it (before its
expert file is removed: removing 13 GB keeps the disk busy discarding for a while) and after the resident run;
other tenants of the disk make single probes vary by up to 2.5x here. Reads and writes together: one thread
reads the probe file while another writes a second one, and the pair's wall time is set against the two ways the
disk could serve them, in series (one shared bandwidth: read time + write time) and side by side (independent
channels: the longer of the two). On the virtio disk this bench was written on the pair fell in between and
moved from run to run (a 2 GiB read and a 2 GiB write: 3.4 s against 3.3 s in series and 2.0 s side by side;
4.1 s against 4.9 s and 3.0 s; 4.8 s against 5.1 s and 3.5 s), so neither formula alone is the disk: each
probe's bound takes its measured overlap f = (series - pair) / (series - side), clipped to [0, 1]:

    read_ms = bytes_read / read_bw, write_ms = bytes_written / write_bw
    bound_ms = max(read_ms, write_ms) + (1 - f) * min(read_ms, write_ms)

which is read_ms + write_ms for a disk that serves one at a time (f = 0) and max(read_ms, write_ms) for one that
serves both at full speed (f = 1). The bound is the smallest of the three probes' (the fastest state of the disk
seen, so the strict choice). The fastest read, write and overlap taken from different probes would be stricter
still but describe no disk: an overlap is measured against its own probe's read and write, and a read slowed by
another tenant inflates it (one probe gave 0.91 beside 0.00 and 0.25; with the others' fastest read and write it
halved the bound). That combination is printed too.
io_vs_disk_bound = bound_ms / step_ms, medians over the steps after the first: 1.0 means the step takes
exactly the time the disk needs for what the step moves; the target is >= 0.8 (within 1.25x of it) when the disk
is the bottleneck. ssd_vs_resident: tokens/s of the SSD run over the resident run's. The probes move from run to
run, so the step is also set against the disk itself: disk_busy is the fraction of each step the disk had I/O in
flight (its io_ticks in /proc/diskstats, iostat's %util), median after the first. Near 1 the engine never left the
disk idle, and a step slower than the bound means the disk served less than its fastest probe while it ran.

Also the SSD run's peak resident memory (start-up and its final checkpoint included) against the bytes its host
and device tiers book: rss_vs_tiers near 1 means the process never held more than the plan says (a fresh start
streams its experts into the tier one at a time, a checkpoint streams them out of it). Then a new process resumes
from that final checkpoint for one more step (`moe-engine train --resume`): its peak against the same tiers
(resume_rss_vs_tiers: a load streams each expert from the files into the tier), and its loss against the resident
run's at that step (the resident run trains one step more than the SSD run, outside the medians).

Ends with: BENCH ssdshapes io_vs_disk_bound=R ssd_vs_resident=R rss_vs_tiers=R resume_rss_vs_tiers=R disk_busy=R
(disk_busy n/a where the directory's device has no diskstats line)
"""
import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from finetune_bench import model_config, train_records  # the same OLMoE-shaped model, run the same way

BLOCK = 32 << 20
PROBE = 2 << 30


def run_config(a, offload=None):
    # One step more than the medians' runs: the SSD run's last step is the resumed one.
    cfg = {"model": model_config(a.layers, a.seq),
           "train": {"batch_size": 1, "seq_len": a.seq, "steps": a.steps + 1, "warmup_steps": 1, "threads": a.threads,
                     "lr": 1e-4, "seed": 7, "checkpoint_every": 0, "compute_dtype": "fp32"}}
    if offload:
        cfg["offload"] = offload
    return cfg


def train(cli, data, work, name, cfg):
    """The run's step records and its peak resident memory in bytes (wait4's ru_maxrss)."""
    recs, text, usage = train_records(cli, data, work, name, cfg)
    print("".join("   " + line for line in text.splitlines(True)), end="", flush=True)
    return recs, usage.ru_maxrss * 1024


def run_cli(args, stop=None, on_step=None):
    """Runs the CLI to its end, or kills it once a line starts with `stop`; returns its peak resident memory in
    bytes (wait4's ru_maxrss). `on_step` is called as each step's line arrives (the CLI prints it when the step
    ends), and once before the process starts."""
    if on_step:
        on_step()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, stopped = [], False
    for line in proc.stdout:
        if on_step and line.startswith("step "):
            on_step()
        lines.append(line)
        print("   " + line, end="", flush=True)
        if stop and line.startswith(stop):
            stopped = True
            proc.kill()
            break
    _, status, usage = os.wait4(proc.pid, 0)
    if not stopped and os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(lines[-1].strip() if lines else f"exit {os.waitstatus_to_exitcode(status)}")
    return usage.ru_maxrss * 1024


def train_then_resume(cli, data, work, cfg, on_step=None):
    """The SSD run to its last step but one (stopping there as finished writes its final checkpoint), then the last
    step resumed from that checkpoint by a new process: (the step records of both, the first's peak resident memory,
    the resume's, the checkpoint's bytes, the seconds the resume took to its step). `on_step`: run_cli's, for the
    first run."""
    path, out = os.path.join(work, "ssd.json"), os.path.join(work, "ssd")
    with open(path, "w") as f:
        json.dump(cfg, f)
    steps = cfg["train"]["steps"] - 1
    first_rss = run_cli([cli, "train", "--config", path, "--data", data, "--out", out, "--steps", str(steps)],
                        on_step=on_step)
    ckpt = os.path.join(out, f"checkpoint-{steps}")
    ckpt_bytes = sum(os.path.getsize(os.path.join(ckpt, n)) for n in os.listdir(ckpt))
    t0 = time.perf_counter()
    resume_rss = run_cli([cli, "train", "--config", path, "--data", data, "--out", out, "--resume", out,
                          "--steps", str(steps + 1)], stop=f"step {steps + 1}/{steps + 1} ")
    resume_s = time.perf_counter() - t0
    with open(os.path.join(out, "log.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    subprocess.run(["rm", "-rf", out], check=True)
    return recs, first_rss, resume_rss, ckpt_bytes, resume_s


# ---------------------------------------------------------------------------------------------------------------
# The disk, with the engine's kind of I/O: O_DIRECT, large aligned requests.

def _direct(path, flags):
    return os.open(path, flags | os.O_DIRECT, 0o600)


def _write(path, nbytes, result, key):
    buf = mmap.mmap(-1, BLOCK)  # page aligned, as O_DIRECT needs
    buf.write(os.urandom(1 << 20) * (BLOCK >> 20))
    fd = _direct(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    t0 = time.perf_counter()
    for at in range(0, nbytes, BLOCK):
        os.pwritev(fd, [buf], at)
    os.fsync(fd)
    result[key] = time.perf_counter() - t0
    os.close(fd)


def _read(path, nbytes, result, key):
    buf = mmap.mmap(-1, BLOCK)
    fd = _direct(path, os.O_RDONLY)
    t0 = time.perf_counter()
    for at in range(0, nbytes, BLOCK):
        os.preadv(fd, [buf], at)
    result[key] = time.perf_counter() - t0
    os.close(fd)


def disk(dirpath):
    """Sequential direct-I/O bandwidth (bytes/s) read and write, and the wall time of a read and a write at once."""
    a, b = os.path.join(dirpath, "probe-a.bin"), os.path.join(dirpath, "probe-b.bin")
    r = {}
    try:
        _write(a, PROBE, r, "write")
        _read(a, PROBE, r, "read")
        pair = [threading.Thread(target=_read, args=(a, PROBE, r, "pair_read")),
                threading.Thread(target=_write, args=(b, PROBE, r, "pair_write"))]
        t0 = time.perf_counter()
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        r["pair"] = time.perf_counter() - t0
    finally:
        for p in (a, b):
            if os.path.exists(p):
                os.remove(p)
    return {"read_bw": PROBE / r["read"], "write_bw": PROBE / r["write"], "pair_s": r["pair"]}


class DiskBusy:
    """How much of each step the disk holding `path` had I/O in flight: the block device's io_ticks (the tenth
    field of its /proc/diskstats line, milliseconds with at least one request outstanding; what iostat's %util
    reads) sampled at each step's end. Near 1 the engine never left the disk idle, so a step slower than the bound
    is a disk slower than its fastest probe; well below 1 the engine is waiting on something else. None where the
    device has no diskstats line (a network or FUSE file system)."""

    def __init__(self, path):
        st = os.stat(path)
        self.dev = (os.major(st.st_dev), os.minor(st.st_dev))
        self.samples = []

    def ticks(self):
        with open("/proc/diskstats") as f:
            for line in f:
                v = line.split()
                if (int(v[0]), int(v[1])) == self.dev:
                    return int(v[12])
        return None

    def __call__(self):
        self.samples.append((time.perf_counter(), self.ticks()))

    def per_step(self):
        """Busy fraction of each step, in order; None for a step where the device could not be read."""
        out = []
        for (t0, k0), (t1, k1) in zip(self.samples, self.samples[1:]):
            out.append(None if k0 is None or k1 is None else min(1.0, (k1 - k0) / ((t1 - t0) * 1e3)))
        return out


# ---------------------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--cache-experts", type=int, default=32)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    if not 2 <= a.layers <= 4:
        sys.exit("--layers: 2 to 4")
    if a.steps < 3:
        sys.exit("--steps: at least 3 (medians are over the steps after the first)")
    work = tempfile.mkdtemp(dir=a.workdir)
    ssd_dir = os.path.join(work, "ssd-tier")
    os.makedirs(ssd_dir)
    offload = {"mode": "ssd", "expert_slots": 16, "cache_experts": a.cache_experts, "lookahead": 2,
               "ssd_dir": ssd_dir}
    try:
        print(f"== disk: direct I/O in {ssd_dir}", flush=True)
        probes = [disk(ssd_dir)]
        print(f"== SSD tier: every expert in {ssd_dir}, host cache of {a.cache_experts} experts", flush=True)
        busy = DiskBusy(ssd_dir)
        ssd, ssd_rss, resume_rss, ckpt_bytes, resume_s = train_then_resume(a.cli, a.data, work, run_config(a, offload),
                                                                           on_step=busy)
        resumed, ssd = ssd[-1], ssd[:-1]
        print("== disk after the SSD run", flush=True)
        probes.append(disk(ssd_dir))
        for name in os.listdir(ssd_dir):  # the expert file of the stopped run
            os.remove(os.path.join(ssd_dir, name))
        print("== resident", flush=True)
        resident, resident_rss = train(a.cli, a.data, work, "resident", run_config(a))
        resident_resumed, resident = resident[-1], resident[:-1]
        print("== disk after the resident run", flush=True)
        probes.append(disk(ssd_dir))
    finally:
        subprocess.run(["rm", "-rf", work], check=True)

    # How far the disk overlaps a read and a write: 0 one at a time, 1 both at full speed.
    def overlap(p):
        series = PROBE / p["read_bw"] + PROBE / p["write_bw"]
        side = max(PROBE / p["read_bw"], PROBE / p["write_bw"])
        return min(1.0, max(0.0, (series - p["pair_s"]) / (series - side)))

    def parts_ms(r, p):
        return r["bytes_ssd_read"] / p["read_bw"] * 1e3, r["bytes_ssd_write"] / p["write_bw"] * 1e3

    def probe_bound_ms(r, p):
        rd, wr = parts_ms(r, p)
        return max(rd, wr) + (1 - overlap(p)) * min(rd, wr)

    # Each probe is one state of the disk, its overlap measured against its own read and write times; the bound is
    # the fastest of those states. The fastest read, write and overlap of different probes together would be a
    # disk no probe saw: a read slowed by another tenant makes its probe's overlap look large (0.91 once, beside
    # 0.00 and 0.25), and that overlap beside another probe's fast read halved the bound.
    def bound_ms(r):
        return min(probe_bound_ms(r, p) for p in probes)

    print(f"\nmodel: {json.dumps(model_config(a.layers, a.seq))}\nfull fine-tune, fp32, batch 1 x {a.seq} tokens per "
          f"step, {a.threads} threads, {a.steps} steps (medians after the first)")
    timed = ssd[1:]
    med = {k: statistics.median(r.get(k) or 0 for r in timed)
           for k in ("step_ms", "stall_ms", "upload_ms", "ssd_ms", "ssd_read_ms", "bytes_ssd_read", "bytes_ssd_write")}
    whens = ("before the SSD run", "after the SSD run", "after the resident run")
    for when, p in zip(whens, probes):
        rd, wr = PROBE / p["read_bw"], PROBE / p["write_bw"]
        print(f"disk probe {when}: read {p['read_bw'] / 1e9:.2f} GB/s, write {p['write_bw'] / 1e9:.2f} GB/s, "
              f"2 GiB read + 2 GiB write at once {p['pair_s']:.2f} s (in series {rd + wr:.2f} s, side by side "
              f"{max(rd, wr):.2f} s: overlap {overlap(p):.2f}); the median step's bytes would take "
              f"{probe_bound_ms(med, p):.0f} ms")
    best = min(probes, key=lambda p: probe_bound_ms(med, p))
    mixed = {"read_bw": max(p["read_bw"] for p in probes), "write_bw": max(p["write_bw"] for p in probes)}
    rd, wr = parts_ms(med, mixed)
    f_max = max(overlap(p) for p in probes)
    print(f"disk: the probe {whens[probes.index(best)]} (the fastest); bound = max(read, write) + "
          f"{1 - overlap(best):.2f} x min(read, write). The fastest read, write and overlap of different probes "
          f"together would give {max(rd, wr) + (1 - f_max) * min(rd, wr):.0f} ms")
    cols = [("step", 5), ("step_ms", 9), ("fwd_ms", 8), ("bwd_ms", 8), ("opt_ms", 8), ("stall_ms", 9),
            ("upload_ms", 10), ("ssd_ms", 8), ("read_ms", 8), ("GB_read", 8), ("GB_write", 9), ("hit/miss", 9),
            ("bound_ms", 9), ("bound/step", 11), ("disk_busy", 10)]
    step_busy = busy.per_step()
    step_busy += [None] * (len(ssd) - len(step_busy))  # a line the CLI did not print: no sample
    fmt_busy = lambda b: "n/a" if b is None else f"{b:.2f}"
    print("\nSSD run, per step:")
    print("".join(f"{c:>{w}}" for c, w in cols))
    for r, b in zip(ssd, step_busy):
        row = [r["step"], f"{r['step_ms']:.0f}", f"{r.get('forward_ms', 0):.0f}", f"{r.get('backward_ms', 0):.0f}",
               f"{r.get('optimizer_ms', 0):.0f}", f"{r.get('stall_ms', 0):.0f}", f"{r.get('upload_ms', 0):.0f}",
               f"{r.get('ssd_ms', 0):.0f}", f"{r.get('ssd_read_ms', 0):.0f}", f"{r['bytes_ssd_read'] / 1e9:.2f}",
               f"{r['bytes_ssd_write'] / 1e9:.2f}", f"{r.get('cache_hits', 0)}/{r.get('cache_misses', 0)}",
               f"{bound_ms(r):.0f}", f"{bound_ms(r) / r['step_ms']:.2f}", fmt_busy(b)]
        print("".join(f"{str(v):>{w}}" for v, (_, w) in zip(row, cols)))
    bound = statistics.median(bound_ms(r) for r in timed)
    timed_busy = [b for b in step_busy[1:] if b is not None]
    disk_busy = statistics.median(timed_busy) if timed_busy else None
    io_vs_bound = bound / med["step_ms"]
    ssd_tok = statistics.median(r["tokens"] / r["step_ms"] * 1e3 for r in timed)
    res_tok = statistics.median(r["tokens"] / r["step_ms"] * 1e3 for r in resident[1:])
    res_ms = statistics.median(r["step_ms"] for r in resident[1:])
    same = [r["loss"] for r in ssd] == [r["loss"] for r in resident]
    same_resumed = resumed["loss"] == resident_resumed["loss"]
    print(f"median after the first: step {med['step_ms']:.0f} ms, {med['bytes_ssd_read'] / 1e9:.2f} GB read and "
          f"{med['bytes_ssd_write'] / 1e9:.2f} GB written per step; the disk needs {bound:.0f} ms for them "
          f"(reads {parts_ms(med, best)[0]:.0f} ms, writes {parts_ms(med, best)[1]:.0f} ms); "
          f"stall {med['stall_ms']:.0f} ms, in file I/O "
          f"{med['ssd_ms']:.0f} ms (reads {med['ssd_read_ms']:.0f} ms); the disk had I/O in flight for "
          f"{fmt_busy(disk_busy)} of the step (its io_ticks)")
    print(f"resident: step {res_ms:.0f} ms, {res_tok:.1f} tok/s; SSD tier: {ssd_tok:.1f} tok/s")
    # What the SSD run's tiers book against what the process held at its peak (start-up included).
    tiers = max(r.get("peak_host_bytes", 0) for r in ssd) + max(r.get("peak_device_bytes", 0) for r in ssd)
    print(f"peak resident memory: SSD run {ssd_rss / 1e9:.2f} GB against the {tiers / 1e9:.2f} GB its host and "
          f"device tiers book (rss_vs_tiers {ssd_rss / tiers:.2f}); resident run {resident_rss / 1e9:.2f} GB")
    print(f"the SSD run's final checkpoint ({ckpt_bytes / 2**30:.1f} GiB) resumed by a new process: step "
          f"{resumed['step']} after {resume_s:.0f} s, peak resident memory {resume_rss / 1e9:.2f} GB "
          f"(resume_rss_vs_tiers {resume_rss / tiers:.2f}); loss {resumed['loss']} against the uninterrupted resident "
          f"run's {resident_resumed['loss']}: same_resumed_loss {same_resumed}")
    print(f"losses SSD:      {[r['loss'] for r in ssd]}\nlosses resident: {[r['loss'] for r in resident]}")
    print(f"same_losses: {same}")
    with open("/proc/loadavg") as fh:
        print(f"load average after: {' '.join(fh.read().split()[:3])}")
    print(f"BENCH ssdshapes io_vs_disk_bound={io_vs_bound:.2f} ssd_vs_resident={ssd_tok / res_tok:.2f} "
          f"rss_vs_tiers={ssd_rss / tiers:.2f} resume_rss_vs_tiers={resume_rss / tiers:.2f} "
          f"disk_busy={fmt_busy(disk_busy)}")


if __name__ == "__main__":
    main()
