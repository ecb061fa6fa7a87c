#!/usr/bin/env bash
# setup.sh - install the Debian packages dsv4check needs, only when missing.
# Idempotent: a second run installs nothing and prints one line.
# Usage: scripts/setup.sh [--hip]   (--hip adds the AMD HIP compile toolchain)
set -euo pipefail

# python3-h5py: the end-to-end test that a golden written with h5py (data/README.md) checks.
want=(libhdf5-dev hdf5-tools check libyaml-dev libopenblas-dev pkg-config make gcc valgrind python3-h5py python3-numpy)
if [ "${1:-}" = "--hip" ]; then
    want+=(hipcc libamdhip64-dev rocm-device-libs)
fi

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all dependencies present (${want[*]})"
    exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
