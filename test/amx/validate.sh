#!/usr/bin/env bash
# Validates the CPU backend's AMX path on a machine whose CPU has AMX (amx_bf16; e.g. a Sapphire Rapids Xeon,
# which the GPU machines' hosts may be), with no network needed. Run from the repository root of any copy:
#   bash test/amx/validate.sh
#   1. build (or, with PREBUILT=1, use the binaries already in $BUILD when they run here) the GEMM and dense-op
#      tests and moe-engine-dev
#   2. the exactness tests: every bf16 kernel family this CPU runs, AMX included, within the bf16 path's bound,
#      deterministic across threads, the hardware AMX packers against the emulated tile chains; the dense ops on
#      every registered backend; the backend listing saying that AMX runs
#   3. the kernel families' GFLOP/s and fraction of the measured peak (bench --bf16 --families), 2 threads and all
#   4. one OLMoE-shaped MoE layer (test/bench/shapes_bench.py, 1024 tokens, 2 threads) against PyTorch in the
#      machine's own Python ($MOE_PEER_PYTHON, default python3), ending with its `BENCH shapes ...` line
# Where the CPU has no AMX it says so and exits 0 having run nothing: the AMX path is then not validated.
# BUILD_ONLY=1 runs step 1 alone, on any machine, so that another runs the rest with PREBUILT=1.
# Logs go to $LOGS (default: a temporary folder).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD="$(mkdir -p "${BUILD:-native/build}" && cd "${BUILD:-native/build}" && pwd)"
LOGS="${LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
TESTS="test_gemm_bf16_amx test_gemm_bf16 test_gemm test_ops_dense test_backend_registry"
FAILED=0

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads;" \
     "flags: $(grep -o 'amx_bf16\|amx_tile\|amx_int8\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
if [ "${BUILD_ONLY:-0}" != 1 ] && ! grep -q amx_bf16 /proc/cpuinfo; then
  echo "this CPU has no AMX (no amx_bf16 flag): the AMX path was not validated here"
  exit 0
fi

if [ "${PREBUILT:-0}" = 1 ] && [ -x "$BUILD/moe-engine-dev" ] && "$BUILD/test_backend_registry" >"$LOGS/prebuilt.txt" 2>&1; then
  echo "using the prebuilt binaries in $BUILD"
else
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S native -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$LOGS/configure.txt"
  cmake --build "$BUILD" -j"$(nproc)" --target moe-engine-dev $TESTS >"$LOGS/build.txt" 2>&1 ||
    { tail -30 "$LOGS/build.txt"; echo "amx validate: the build failed"; exit 1; }
fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

echo "=== exactness tests"
for t in $TESTS; do
  if MOE_SOURCE_DIR="$ROOT" timeout 300 "$BUILD/$t" >"$LOGS/$t.txt" 2>&1; then
    echo "pass  $t"
  else
    echo "FAIL  $t"
    grep -E -m12 "FAIL|rror|mismatch" "$LOGS/$t.txt" | sed 's/^/      /'
    FAILED=1
  fi
  grep -i -m3 "skip" "$LOGS/$t.txt" | sed 's/^/      /' || true
done

echo "=== kernel families (bench --bf16 --families)"
for threads in 2 "$(nproc)"; do
  timeout 240 "$BUILD/moe-engine-dev" bench --bf16 --families --threads "$threads" 2>&1 | tee "$LOGS/families-$threads.txt"
done

echo "=== one OLMoE-shaped layer against PyTorch"
# The peer: the first Python with PyTorch, unless named.
if [ -z "${MOE_PEER_PYTHON:-}" ]; then
  for p in "$(command -v python3)" /usr/bin/python3; do
    if [ -n "$p" ] && "$p" -c "import torch" 2>/dev/null; then MOE_PEER_PYTHON="$p"; break; fi
  done
fi
[ -n "${MOE_PEER_PYTHON:-}" ] || echo "no Python with PyTorch here: the layer comparison fails"
MOE_PEER_PYTHON="${MOE_PEER_PYTHON:-python3}" timeout 600 python3 test/bench/shapes_bench.py \
  --dev-cli "$BUILD/moe-engine-dev" --threads 2 --shapes olmoe --tokens 1024 --steps 2 2>&1 | tee "$LOGS/shapes.txt" |
  tail -25
[ "$FAILED" = 0 ] && echo "amx validate: the exactness tests passed" || echo "amx validate: FAILED"
exit "$FAILED"
