#!/usr/bin/env bash
# Installs the Debian packages the build, tests and benchmarks need, when missing.
# Needs root (CI and the dev machines run as root); otherwise prints the apt-get line to run.
set -euo pipefail
packages=(cmake g++ ccache python3-torch python3-numpy chromium)
[ "${1:-}" = "--bench" ] && packages+=(libopenblas-dev libopenblas0-openmp libtcmalloc-minimal4)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
