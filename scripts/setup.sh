#!/usr/bin/env bash
# setup.sh - install the Debian packages dsv4check needs, only when missing.
# Idempotent: a second run installs nothing and prints one line.
# Usage: scripts/setup.sh [--hip] [--slurm] [--chromium]
#   --hip       adds the AMD HIP compile toolchain: Debian's hipcc 5.2 (gfx90a,
#               gfx940) and clang/lld/llvm 19 and 22 for the production
#               targets gfx942 and gfx950 (scripts/hip-amd-build.sh)
#   --slurm     adds Debian's slurm-wlm and munge for the one-node Slurm test
#               (tests/test_slurm.sh starts private daemons of its own and
#               never uses the system's munge or slurm services)
#   --chromium  also tries to install Debian's chromium (large) for the HTML
#               report's end-to-end test (make check passes it); if that
#               install fails, the test skips (exit 77) and setup still succeeds
set -euo pipefail

want_chromium=0
args=()
for a in "$@"; do
    if [ "$a" = "--chromium" ]; then want_chromium=1; else args+=("$a"); fi
done
set -- "${args[@]+"${args[@]}"}"

try_chromium() {
    [ "$want_chromium" = 1 ] || return 0
    if command -v chromium >/dev/null 2>&1; then
        return 0
    fi
    echo "setup: installing chromium (for the HTML report test)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
            --no-install-recommends chromium >/dev/null; }; then
        echo "setup: chromium could not be installed; the HTML rendering test will skip"
    fi
    return 0
}
trap try_chromium EXIT

# python3-h5py: the end-to-end test that a golden written with h5py (data/README.md) checks.
# python3-pytest, python3-torch: the Python front end's tests (tests/python; torch 1.13, CPU).
# libgfortran-12-dev: a static link against libdsv4.a pulls OpenBLAS's -lgfortran
# (pkg-config --static; tests/test_install.sh links one).
want=(libhdf5-dev hdf5-tools check libyaml-dev zlib1g-dev libopenblas-dev pkg-config make gcc valgrind python3-h5py python3-numpy
      python3-pytest python3-torch libgfortran-12-dev)
for a in "$@"; do
    case "$a" in
        --hip) want+=(hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19 llvm-19 clang-tools-19 clang-22 lld-22 llvm-22 clang-tools-22) ;;
        --slurm) want+=(slurm-wlm munge) ;;
        *) echo "setup: unknown option $a (expected --hip, --slurm, --chromium)" >&2; exit 2 ;;
    esac
done

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
