#!/usr/bin/env bash
# Every test: the native suite (unit tests, gradient checks, equivalences, PyTorch reference) through
# ctest, then the type checks and bundles, then the TypeScript unit, integration and browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
[ -d node_modules ] || npm ci
bash scripts/build-native.sh
ctest --test-dir native/build --output-on-failure
npm run build
npx vitest run
E2E_SKIP_BUILD=1 npx vitest run -c test/e2e/vitest.config.ts
