#!/usr/bin/env bash
# Every test: native unit tests, gradient checks, equivalences and the PyTorch reference (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/build-native.sh
ctest --test-dir native/build --output-on-failure
