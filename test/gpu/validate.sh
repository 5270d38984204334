#!/usr/bin/env bash
# Validates the CUDA backend on a machine with an NVIDIA GPU (sm_90: H100 / H200), nvcc and PyTorch with CUDA in
# python3; no Node needed. Run from the repository root of any copy:   bash test/gpu/validate.sh
#   1. configure and build the native engine with CUDA (-DCMAKE_CUDA_ARCHITECTURES=90) in native/build-gpu
#   2. the op tests (every op on every usable backend, cuda included, against the CPU reference and double
#      references, finite differences, += semantics, and run-to-run bit-identity)
#   3. moe-engine-dev selftest --backend cuda: whole-model gradients by finite differences for every family;
#      a pass is recorded in $MOE_WORKBENCH_HOME/validated-backends.json (default ~/.moe-workbench)
#   4. training on cuda with experts offloaded to host memory against resident training: the same losses
#   5. test/bench/cuda/bench.py: our GEMMs against cuBLAS (torch.matmul) and the tiny preset's tokens/s, cuda
#      against cpu; its last line, printed last here too, is `BENCH cuda ...`
# Stops at the first failure, saying which step failed. Budget: about 10 minutes on a 16-core H100 machine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-native/build-gpu}"
JOBS="${JOBS:-$(nproc)}"
STEP="setup"
LOG="$(mktemp -d)"
trap 'echo; echo "validate.sh: FAILED at step: $STEP (logs in $LOG)" >&2' ERR

step() {
  STEP="$1"
  echo
  echo "=== step $STEP"
}

step "1/5 build with CUDA"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
cmake -S native -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOG/configure.txt"
grep -q "CUDA backend enabled" "$LOG/configure.txt" || { echo "nvcc was not found: the CUDA backend is not built"; false; }
# The test programs that run every usable registered backend (ops_checks.h), and the registry's own.
tests=$( (cd native/tests && grep -l "for_each_backend\|backends_under_test" test_*.cpp; ls test_backend_*.cpp) |
  sed 's/\.cpp$//' | sort -u)
timeout 420 cmake --build "$BUILD" -j"$JOBS" --target moe-engine moe-engine-dev $tests >"$LOG/build.txt" 2>&1 ||
  { tail -30 "$LOG/build.txt"; false; }
echo "built: $BUILD (moe-engine, moe-engine-dev, $(echo $tests | wc -w) test programs)"

step "2/5 op tests on every usable backend"
pattern="^($(echo $tests | tr ' ' '|'))\$"
timeout 300 ctest --test-dir "$BUILD" -R "$pattern" --output-on-failure -V >"$LOG/ops.txt" 2>&1 ||
  { grep -E "FAIL|Error|error" "$LOG/ops.txt" | head -40; false; }
if grep -q "backend cuda skipped" "$LOG/ops.txt"; then
  grep -m1 "backend cuda skipped" "$LOG/ops.txt"
  echo "the cuda backend is not usable on this machine; nothing below can run"
  false
fi
echo "passed: $(grep -c 'Test #' "$LOG/ops.txt" || true) op test programs, each on [cuda] as well as the CPU backends"

step "3/5 whole-model self-test on cuda"
timeout 300 "$BUILD/moe-engine-dev" selftest --backend cuda | tee "$LOG/selftest.txt" | tail -3

step "4/5 offloaded against resident training on cuda"
python3 - "$BUILD" "$LOG" <<'PY'
import json, os, subprocess, sys
build, work = sys.argv[1], sys.argv[2]
root = os.getcwd()
tokens = os.path.join(work, "corpus.bin")
subprocess.run([os.path.join(build, "moe-engine-dev"), "tokenize", "--bytes",
                os.path.join(root, "resources", "corpus", "python-tutorial.txt"), "--out", tokens],
               check=True, capture_output=True)
def losses(offload, name):
    with open(os.path.join(root, "resources", "presets", "tiny.json")) as f:
        cfg = json.load(f)
    cfg["train"].update({"backend": "cuda", "steps": 6, "checkpoint_every": 0})
    cfg["offload"] = offload
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, name)
    subprocess.run([os.path.join(build, "moe-engine"), "train", "--config", path, "--data", tokens, "--out", out,
                    "--quiet"], check=True)
    with open(os.path.join(out, "log.jsonl")) as f:
        return [json.loads(line)["loss"] for line in f]
resident = losses({"mode": "none"}, "resident")
offloaded = losses({"mode": "host", "expert_slots": 2}, "offloaded")
worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(resident, offloaded))
print("resident losses: ", " ".join(f"{x:.6f}" for x in resident))
print("offloaded losses:", " ".join(f"{x:.6f}" for x in offloaded))
print(f"worst relative difference {worst:.2e} over {len(resident)} steps")
sys.exit(0 if len(resident) == len(offloaded) == 6 and worst <= 1e-5 else 1)
PY

step "5/5 benchmarks: our GEMMs against cuBLAS, tiny preset cuda against cpu"
timeout 240 python3 test/bench/cuda/bench.py --build "$BUILD" | tee "$LOG/bench.txt"

STEP="done"
echo
echo "validate.sh: all 5 steps passed (build, op tests, self-test, offload equivalence, benchmarks)"
grep "^BENCH cuda" "$LOG/bench.txt"
