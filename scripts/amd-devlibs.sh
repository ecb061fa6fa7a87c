#!/usr/bin/env bash
# scripts/amd-devlibs.sh DEST - a ROCm device-library folder with which
# Debian 12's clang-19 and clang-22 can compile (not run) HIP code for the
# production targets gfx942 (MI300X) and gfx950 (MI355X).
#
# Why: Debian's rocm-device-libs 5.2 ships oclc_isa_version_*.bc only up to
# gfx940, so clang stops with "cannot find ROCm device library for gfx942";
# and clang-22 no longer links hip.bc on its own (undefined hidden symbol
# __atomic_work_item_fence).  This folder holds links to Debian's bitcode,
# an oclc_isa_version file for 941/942/950 (the 940 file with its one
# constant, __oclc_ISA_version, set to the target's number), and ockl.bc with
# hip.bc merged in (its linkonce_odr definitions made weak_odr so that the
# link keeps them).  The code objects are compile checks: the device
# libraries are 5.2-era, with nothing specific to gfx942/gfx950, and the HIP
# 5.2 runtime cannot load them; an MI300/MI355 machine builds with its own
# ROCm (make hip HIP_ARCHS=gfx942 with hipcc >= 6).
#
# Idempotent: an up-to-date DEST is left alone.  Exit 77 when a tool is
# missing (scripts/setup.sh --hip installs them).
set -euo pipefail
dest=${1:?usage: scripts/amd-devlibs.sh DEST}
src=${AMD_BITCODE:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
llvm=${AMD_DEVLIBS_LLVM:-/usr/lib/llvm-19/bin}

for t in "$llvm/llvm-dis" "$llvm/llvm-as" "$llvm/llvm-link"; do
    [ -x "$t" ] || { echo "amd-devlibs: $t not found (scripts/setup.sh --hip)" >&2; exit 77; }
done
[ -f "$src/oclc_isa_version_940.bc" ] && [ -f "$src/ockl.bc" ] && [ -f "$src/hip.bc" ] ||
    { echo "amd-devlibs: Debian's device libraries not found in $src (rocm-device-libs)" >&2; exit 77; }

stamp="$dest/.complete"
if [ -f "$stamp" ] && [ "$stamp" -nt "$src/ockl.bc" ] && [ "$stamp" -nt "$0" ]; then
    exit 0
fi
tmp=$(mktemp -d "${dest%/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for f in "$src"/*.bc; do
    ln -s "$f" "$tmp/$(basename "$f")"
done

# The ISA version files: one constant each (9400 in the 940 file).
"$llvm/llvm-dis" "$src/oclc_isa_version_940.bc" -o "$tmp/isa940.ll"
grep -q '@__oclc_ISA_version = .* i32 9400,' "$tmp/isa940.ll" ||
    { echo "amd-devlibs: unexpected oclc_isa_version_940.bc (no constant 9400)" >&2; exit 1; }
for v in 941 942 950; do
    sed "s/\(@__oclc_ISA_version = .* i32 \)9400,/\1${v}0,/" "$tmp/isa940.ll" > "$tmp/isa$v.ll"
    "$llvm/llvm-as" "$tmp/isa$v.ll" -o "$tmp/oclc_isa_version_$v.bc"
done

# ockl.bc with hip.bc in it, so that a compiler that links only ockl finds
# hip.bc's helpers too.
# (llvm-link drops linkonce_odr definitions nothing references yet, so
# both files are made weak_odr before the link.)
rm "$tmp/ockl.bc"
for f in ockl hip; do
    "$llvm/llvm-dis" "$src/$f.bc" -o - | sed 's/\blinkonce_odr\b/weak_odr/g' > "$tmp/$f.weak.ll"
    "$llvm/llvm-as" "$tmp/$f.weak.ll" -o "$tmp/$f.weak.bc"
done
"$llvm/llvm-link" "$tmp/ockl.weak.bc" "$tmp/hip.weak.bc" -o "$tmp/ockl.bc"
rm -f "$tmp"/*.ll "$tmp"/*.weak.bc

touch "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
