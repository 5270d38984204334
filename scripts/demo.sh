#!/usr/bin/env bash
# The main job on the bundled defaults: installs what is missing, builds, then trains the `tiny` preset on
# the bundled corpus through the workbench host (telemetry in SQLite) while serving the workbench in
# browser mode — open the printed http://127.0.0.1 URL. Extra arguments go to `moe-workbench demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
[ -d node_modules ] || npm ci
npx cmake-js compile --directory native --out native/build-addon --CDMOE_BUILD_TESTS=OFF >/dev/null
npx electron-vite build >/dev/null
exec node bin/moe-workbench.js demo "$@"
