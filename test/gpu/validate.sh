#!/usr/bin/env bash
# Validates the CUDA backend on a machine with an NVIDIA GPU (sm_90: H100 / H200), nvcc and PyTorch with CUDA in
# python3; no Node needed. Run from the repository root of any copy:   bash test/gpu/validate.sh
#   1. configure and build the native engine with CUDA (-DCMAKE_CUDA_ARCHITECTURES=90) in native/build-gpu; with
#      PREBUILT=1, binaries already in that folder are used when they run here (built on another machine, e.g. with
#      BUILD_ONLY=1, which runs this step alone and needs no GPU)
#   2. the op tests (every op on every usable backend, cuda included, against the CPU reference and double
#      references, finite differences, += semantics, and run-to-run bit-identity), each program run directly
#   3. moe-engine-dev selftest --backend cuda: whole-model gradients by finite differences for every family;
#      a pass is recorded in $MOE_WORKBENCH_HOME/validated-backends.json (default ~/.moe-workbench)
#   4. training on cuda with experts offloaded (host tier, SSD tier, host tier with LoRA, host tier computing runs of
#      three experts as grouped GEMMs, in fp32 and in bf16 compute) against resident training:
#      the same losses and gradient norms bit for bit; then generation on cuda from the resident run's checkpoint
#      (`moe-engine generate`, a session with no engine) gives the same greedy tokens with its experts resident, in
#      the host tier and streamed into the SSD tier (and says whether the cpu backend's agree)
#   5. test/bench/cuda/bench.py: our GEMMs against cuBLAS (torch.matmul), tokens/s cuda against cpu, and
#      host-offloaded against resident, and where a resident OLMoE-shaped step spends its device time per op;
#      its last line, printed last here too, is `BENCH cuda ...`
# Steps 2 to 5 also cover the backend on cuBLAS (train.gemm "cublas"): the library PyTorch loads is found and
# named in MOE_CUBLAS (unless set already), so the op tests run the cuda backend a second time on it, the
# self-test checks both, step 4 adds a pair on it and the benchmarks measure it; without it they say so.
# A device lease is short, so every step whose prerequisites hold runs even after an earlier one failed; the
# summary names each step's result and the exit status is non-zero if any failed. Logs go to $LOGS (default: a
# temporary folder). Budget: about 5 minutes on an H200 with PREBUILT binaries (the benchmarks take most of it).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD="$(mkdir -p "${BUILD:-native/build-gpu}" && cd "${BUILD:-native/build-gpu}" && pwd)"
JOBS="${JOBS:-$(nproc)}"
LOGS="${LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
SUMMARY=()
FAILED=0
T0=$(date +%s)

# run_step NAME FUNCTION: runs it with errexit in a subshell, records pass/fail and its seconds. Never call it
# inside a condition (`if`, `||`): bash ignores errexit in everything such a context runs.
run_step() {
  local name="$1" fn="$2" t=$(date +%s) rc
  echo
  echo "=== step $name"
  (set -e; "$fn")
  rc=$?
  if [ "$rc" = 0 ]; then
    SUMMARY+=("PASS  $name ($(( $(date +%s) - t )) s)")
  else
    SUMMARY+=("FAIL  $name ($(( $(date +%s) - t )) s)")
    FAILED=1
  fi
}

finish() {
  echo
  echo "=== summary (logs in $LOGS, $(( $(date +%s) - T0 )) s in all)"
  printf '%s\n' "${SUMMARY[@]}"
  if [ "$FAILED" = 0 ]; then
    echo "validate.sh: all 5 steps passed (build, op tests, self-test, offload equivalence, benchmarks)"
    grep "^BENCH cuda" "$LOGS/bench.txt"
  else
    echo "validate.sh: FAILED"
  fi
  exit "$FAILED"
}

# The test programs that run every usable registered backend (ops_checks.h), and the registry's own.
TESTS=$( (cd native/tests && grep -l "for_each_backend\|backends_under_test" test_*.cpp; ls test_backend_*.cpp) |
  sed 's/\.cpp$//' | sort -u)

# MOE_CUBLAS: the libcublas PyTorch maps after one matmul on the device (its wheels carry their own).
find_cublas() {
  if [ -n "${MOE_CUBLAS:-}" ]; then echo "cuBLAS: $MOE_CUBLAS (MOE_CUBLAS)"; return 0; fi
  local lib
  lib=$(python3 - 2>/dev/null <<'PY'
import torch
a = torch.ones(8, 8, device="cuda")
(a @ a).sum().item()
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if "/libcublas.so" in path:
        print(path)
        break
PY
  ) || true
  if [ -n "$lib" ]; then
    export MOE_CUBLAS="$lib"
    echo "cuBLAS: $MOE_CUBLAS (the one PyTorch loads)"
  else
    echo "cuBLAS: not found through PyTorch; the cuBLAS path is not validated in this run"
  fi
}

build() {
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  if [ "${PREBUILT:-0}" = 1 ] && [ -x "$BUILD/moe-engine-dev" ] && "$BUILD/test_backend_registry" >"$LOGS/prebuilt.txt" 2>&1; then
    echo "using the prebuilt binaries in $BUILD (they run here)"
    return 0
  fi
  [ "${PREBUILT:-0}" = 1 ] && { echo "prebuilt binaries do not run here; building"; tail -5 "$LOGS/prebuilt.txt" || true; }
  rm -f "$BUILD/CMakeCache.txt"
  cmake -S native -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGS/configure.txt"
  grep -q "CUDA backend enabled" "$LOGS/configure.txt" || { echo "nvcc was not found: the CUDA backend is not built"; false; }
  timeout 420 cmake --build "$BUILD" -j"$JOBS" --target moe-engine moe-engine-dev $TESTS >"$LOGS/build.txt" 2>&1 ||
    { tail -30 "$LOGS/build.txt"; false; }
  echo "built: $BUILD (moe-engine, moe-engine-dev, $(echo $TESTS | wc -w) test programs)"
}

op_tests() {
  local failed=0 t
  for t in $TESTS; do
    if MOE_SOURCE_DIR="$ROOT" MOE_CLI="$BUILD/moe-engine" MOE_DEV_CLI="$BUILD/moe-engine-dev" \
       timeout 150 "$BUILD/$t" >"$LOGS/op-$t.txt" 2>&1; then
      echo "pass  $t"
    else
      echo "FAIL  $t (exit $?):"
      grep -E -m12 "FAIL|rror|mismatch|Assert|abort" "$LOGS/op-$t.txt" | sed 's/^/      /' || tail -8 "$LOGS/op-$t.txt"
      failed=1
    fi
    grep -q "\[cuda cublas\]" "$LOGS/op-$t.txt" && CUBLAS_COVERED=$((CUBLAS_COVERED + 1))
    grep -m1 "backend cuda on cuBLAS skipped" "$LOGS/op-$t.txt" || true
    if grep -q "backend cuda skipped" "$LOGS/op-$t.txt"; then
      grep -m1 "backend cuda skipped" "$LOGS/op-$t.txt"
      echo "the cuda backend is not usable on this machine"
      return 1
    fi
  done
  echo "the cuda backend on cuBLAS ran in $CUBLAS_COVERED of $(echo $TESTS | wc -w) programs"
  return $failed
}

selftest() {
  timeout 180 "$BUILD/moe-engine-dev" selftest --backend cuda >"$LOGS/selftest.txt" 2>&1 || { tail -20 "$LOGS/selftest.txt"; false; }
  grep -E "^cuBLAS not checked|passed, .* failed|^recorded" "$LOGS/selftest.txt"
}

offload_equivalence() {
  python3 - "$BUILD" "$LOGS" <<'PY'
import json, os, shutil, subprocess, sys
build, work = sys.argv[1], sys.argv[2]
root = os.getcwd()
tokens = os.path.join(work, "corpus.bin")
subprocess.run([os.path.join(build, "moe-engine-dev"), "tokenize", "--bytes",
                os.path.join(root, "resources", "corpus", "python-tutorial.txt"), "--out", tokens],
               check=True, capture_output=True)
def records(offload, finetune, name, gemm="own", dtype="fp32"):
    with open(os.path.join(root, "resources", "presets", "tiny.json")) as f:
        cfg = json.load(f)
    cfg["train"].update({"backend": "cuda", "steps": 6, "checkpoint_every": 0, "allow_unvalidated_backend": True,
                         "gemm": gemm, "compute_dtype": dtype})
    cfg["offload"] = offload
    if finetune:
        cfg["finetune"] = finetune
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)  # a rerun into the same LOGS: a new run (the CLI never trains over one)
    subprocess.run([os.path.join(build, "moe-engine"), "train", "--config", path, "--data", tokens, "--out", out,
                    "--quiet"], check=True, timeout=240)
    with open(os.path.join(out, "log.jsonl")) as f:
        return [(r["loss"], r["grad_norm"], r.get("upload_ms", 0.0), r.get("upload_hidden_ms", 0.0))
                for r in map(json.loads, f)]
# The host AdamW of offloaded experts rounds as the device's does, so each pair is the same bit for bit.
lora = {"method": "lora", "lora": {"rank": 4, "alpha": 8}}
runs = {"mode": "host", "expert_slots": 6, "lookahead": 3, "pin_fraction": 0}
# bf16: the slots convert their experts' fp32 weights with the device's own to_bf16, as resident training
# converts the arena's (the device AdamW's bf16 copy rounds as to_bf16 does).
cases = [("host tier", {"mode": "host", "expert_slots": 2}, None, "own", "fp32"),
         ("SSD tier", {"mode": "ssd", "expert_slots": 2, "cache_experts": 6}, None, "own", "fp32"),
         ("host tier, LoRA", {"mode": "host", "expert_slots": 2}, lora, "own", "fp32"),
         ("host tier, runs of 3 experts", runs, None, "own", "fp32"),
         ("host tier, runs of 3 experts, bf16 compute", runs, None, "own", "bf16")]
if os.environ.get("MOE_CUBLAS"):
    cases.append(("host tier, runs of 3 experts, cuBLAS GEMMs", runs, None, "cublas", "fp32"))
else:
    print("cuBLAS GEMMs: no case (MOE_CUBLAS is not set)")
ok = True
resident = {}
for i, (label, offload, finetune, gemm, dtype) in enumerate(cases):
    key = json.dumps([finetune, gemm, dtype])
    if key not in resident:
        resident[key] = records({"mode": "none"}, finetune, f"resident{i}", gemm, dtype)
    base, off = resident[key], records(offload, finetune, f"offloaded{i}", gemm, dtype)
    same = [a[:2] == b[:2] for a, b in zip(base, off)]
    worst = max(abs(a[0] - b[0]) / max(abs(a[0]), 1e-6) for a, b in zip(base, off))
    print(f"{label}: resident losses  ", " ".join(f"{x[0]:.9f}" for x in base))
    print(f"{label}: offloaded losses ", " ".join(f"{x[0]:.9f}" for x in off))
    print(f"{label}: upload ms (hidden)", " ".join(f"{x[2]:.1f} ({x[3]:.1f})" for x in off))
    print(f"{label}: bit-identical losses and gradient norms: {sum(same)} of {len(same)} steps; worst relative loss "
          f"difference {worst:.2e}")
    ok = ok and len(base) == len(off) == 6 and all(same)

# Generation on cuda from the first resident run's final checkpoint: every expert home the same greedy tokens.
checkpoint = os.path.join(work, "resident0", "checkpoint-6")
cuda_cfg = os.path.join(work, "generate-cuda.json")
with open(cuda_cfg, "w") as f:
    json.dump({"train": {"backend": "cuda", "allow_unvalidated_backend": True}}, f)
def generated(home, config):
    cmd = [os.path.join(build, "moe-engine"), "generate", "--model", checkpoint, "--tokens", "1,2,3,4,5",
           "--max-tokens", "12", "--experts", home, "--expert-slots", "2", "--cache-experts", "4"]
    if config:
        cmd += ["--config", config]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        print(f"generate ({home}, {'cuda' if config else 'cpu'}) failed: {done.stderr.strip()}")
        return None
    return json.loads(done.stdout)["tokens"]
tokens = {home: generated(home, cuda_cfg) for home in ("resident", "host", "ssd")}
cpu = generated("resident", None)
for home, t in tokens.items():
    print(f"generation on cuda, experts {home}: {t}")
print(f"generation on cpu, experts resident: {cpu} ({'the same' if cpu == tokens['resident'] else 'different'} "
      "tokens; greedy choices can differ between backends at near-ties)")
ok = ok and tokens["resident"] is not None and len(tokens["resident"]) == 12 and \
    tokens["resident"] == tokens["host"] == tokens["ssd"]
sys.exit(0 if ok else 1)
PY
}

bench() {
  timeout 400 python3 test/bench/cuda/bench.py --build "$BUILD" --steps 6 --parts gemm,tiny,olmoe,profile 2>&1 |
    tee "$LOGS/bench.txt"
}

# BUILD_ONLY=1: step 1 alone, on a machine with nvcc but no GPU, so that a GPU machine runs the rest with PREBUILT=1.
if [ "${BUILD_ONLY:-0}" = 1 ]; then
  PREBUILT=0 run_step "1/5 build with CUDA" build
  exit "$FAILED"
fi
run_step "1/5 build with CUDA" build
[ "$FAILED" = 0 ] || finish
CUBLAS_COVERED=0
find_cublas
run_step "2/5 op tests on every usable backend" op_tests
run_step "3/5 whole-model self-test on cuda" selftest
run_step "4/5 offloaded against resident training on cuda" offload_equivalence
run_step "5/5 benchmarks: GEMMs against cuBLAS, cuda against cpu, offloaded against resident" bench
# Optional: compute-sanitizer's memcheck over the given op-test programs (a new kernel's out-of-bounds accesses
# that happen to pass); it runs each many times slower, so only when asked: SANITIZE="test_ops_dense test_ops_moe".
sanitize() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer is not on the PATH"; false; }
  local t
  for t in $SANITIZE; do
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 1 "$BUILD/$t" >"$LOGS/sanitize-$t.txt" 2>&1 ||
      { grep -m20 -E "=========|FAIL" "$LOGS/sanitize-$t.txt"; false; }
    echo "memcheck clean: $t"
  done
}
if [ -n "${SANITIZE:-}" ]; then run_step "extra: compute-sanitizer memcheck" sanitize; fi
finish
