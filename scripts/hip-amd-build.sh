#!/usr/bin/env bash
# scripts/hip-amd-build.sh BUILD OUT.so "ARCH..." SRC... - the hip backend
# for AMD targets, with the compiler that can build every named target.
#
#   hipcc (ROCm >= 6, or HIPCC set)  any target it knows
#   Debian's hipcc 5.2 (clang 15)    up to gfx940
#   clang-19 + a patched device lib  gfx90a, gfx940, gfx941, gfx942
#   clang-22 + a patched device lib  gfx90a, gfx942, gfx950 (MI355X)
#
# Debian 12 has no ROCm newer than 5.2, so the production targets (gfx942
# MI300X, gfx950 MI355X) are built with clang-19/22 against device libraries
# that scripts/amd-devlibs.sh completes: compile checks, not code to run
# (README "GPU backend").  A list no one compiler here takes (gfx940 with
# gfx950) is refused with exit 2.  Extra flags: HIP_EXTRA_FLAGS.
set -euo pipefail
build=${1:?usage: hip-amd-build.sh BUILD OUT.so "ARCH..." SRC...}
out=${2:?}
archs=${3:?}
shift 3
flags=(-x hip -O2 -std=c++17 -fPIC -shared -Wall -Wextra -Werror -Iinclude ${HIP_EXTRA_FLAGS:-})
offload=()
for a in $archs; do offload+=("--offload-arch=$a"); done

all_in() { # all_in "SET": every requested target is in SET
    for a in $archs; do case " $1 " in *" $a "*) ;; *) return 1 ;; esac; done
}

hipcc_bin=${HIPCC:-$(command -v hipcc || true)}
hipcc_major=0
if [ -n "$hipcc_bin" ]; then
    hipcc_major=$("$hipcc_bin" --version 2>/dev/null | sed -n 's/^HIP version: \([0-9]*\).*/\1/p' | head -1)
    hipcc_major=${hipcc_major:-0}
fi

if [ -n "$hipcc_bin" ] && [ "$hipcc_major" -ge 6 ]; then
    exec env HIP_PLATFORM=amd "$hipcc_bin" "${flags[@]}" "${offload[@]}" -o "$out" "$@"
fi
if [ -n "$hipcc_bin" ] && all_in "gfx803 gfx900 gfx906 gfx908 gfx90a gfx940 gfx1030 gfx1100"; then
    exec env HIP_PLATFORM=amd "$hipcc_bin" "${flags[@]}" "${offload[@]}" -o "$out" "$@"
fi

# Debian's clang-19/22 with the HIP 5.2 headers and completed device libs.
extra=()
if all_in "gfx90a gfx940 gfx941 gfx942" && [ -x /usr/lib/llvm-19/bin/clang++ ]; then
    llvm=/usr/lib/llvm-19/bin
elif all_in "gfx90a gfx942 gfx950" && [ -x /usr/lib/llvm-22/bin/clang++ ]; then
    llvm=/usr/lib/llvm-22/bin
    # clang 22 defaults to code object 6 (needs ROCm 6.3 libraries) and no
    # longer defines the wave size macro the 5.2 headers read (64: CDNA).
    extra=(-mcode-object-version=5 -D__AMDGCN_WAVEFRONT_SIZE=64)
elif all_in "gfx90a gfx940 gfx941 gfx942" || all_in "gfx90a gfx942 gfx950"; then
    echo "hip-amd-build: targets $archs need clang-19 or clang-22 (scripts/setup.sh --hip)" >&2
    exit 77
else
    echo "hip-amd-build: no compiler here builds all of: $archs (hipcc 5.2: up to gfx940;" \
         "clang-19: gfx90a gfx940 gfx941 gfx942; clang-22: gfx90a gfx942 gfx950); build them in two runs" >&2
    exit 2
fi
devlibs="$build/amd-devlibs-$(basename "$(dirname "$llvm")")"
AMD_DEVLIBS_LLVM=$llvm "$(dirname "$0")/amd-devlibs.sh" "$devlibs"
exec "$llvm/clang++" "${flags[@]}" "${extra[@]}" "${offload[@]}" --rocm-path=/usr --hip-version=5.2.21153 \
    --hip-device-lib-path="$devlibs" -isystem /usr/hsa/include -o "$out" "$@" -lamdhip64
