#!/usr/bin/env bash
# The main job on the bundled defaults: tokenizes the bundled corpus (byte-level) and trains the
# `tiny` preset on it, writing the run (log.jsonl, checkpoints) to runs/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
bash scripts/build-native.sh
mkdir -p runs
native/build/moe-engine tokenize --bytes resources/corpus/python-tutorial.txt --out runs/python-tutorial.bin
native/build/moe-engine train --config resources/presets/tiny.json --data runs/python-tutorial.bin --out runs/demo "$@"
