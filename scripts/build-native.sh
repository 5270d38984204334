#!/usr/bin/env bash
# Configures and builds the native engine (library, moe-engine CLI, native tests) in native/build.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S native -B native/build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build native/build -j"$(nproc)"
