#!/usr/bin/env bash
# Builds the native engine twice over the same sources, incrementally: native/build (library,
# moe-engine CLI, moe-engine-dev tools, native tests) and native/build-addon (the Node addon the workbench loads; also
# built by `npm install`), so neither is ever stale against the sources.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S native -B native/build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build native/build -j"$(nproc)"
npx cmake-js compile --directory native --out native/build-addon --CDMOE_BUILD_TESTS=OFF >/dev/null
