#!/usr/bin/env bash
# gpu-bundle.sh - one self-contained folder for the GPU machine (it runs
# Ubuntu 24.04, installs nothing, lacks libyaml-0 and
# libcheck): build/dsv4check, build/libdsv4_hip.so (the nvcc build), every
# shared library they need per ldd outside glibc, cases/, data/ and the run
# scripts.  Run there: BUNDLE/scripts/gpu-run.sh [OUTDIR].
# Usage: scripts/gpu-bundle.sh [DEST [--tar]]   (default .gpu/bundle, git-ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpu/bundle}
for f in build/dsv4check build/libdsv4_hip.so; do
    [ -f "$f" ] || { echo "gpu-bundle: $f missing (make all hip)" >&2; exit 1; }
done
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib/fallback" "$dest/scripts"
cp build/dsv4check build/libdsv4_hip.so "$dest/bin/"
# glibc itself stays behind (binaries built on glibc 2.36 run on newer ones);
# the compiler runtime goes to lib/fallback, used only where the machine has
# none: an older libstdc++ on the path could break compute-sanitizer's own
# injected library.
ldd build/dsv4check build/libdsv4_hip.so | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
while read -r lib; do
    case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
    libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$dest/lib/fallback/" ;;
    *) cp -L "$lib" "$dest/lib/" ;;
    esac
done
cp -r cases data "$dest/"
cp scripts/gpu-run.sh scripts/gpu-profile.sh scripts/torch_*.py "$dest/scripts/"
echo "gpu-bundle: $dest ($(du -sh "$dest" | cut -f1), $(ls "$dest/lib" | wc -l) libraries)"
# --tar: also DEST.tar.xz (about a third of the size: the device tool carries
# at most 64 MiB, and libopenblas alone is 35 MB).
if [ "${2:-}" = "--tar" ]; then
    tar -C "$(dirname "$dest")" -I "xz -T0" -cf "$dest.tar.xz" "$(basename "$dest")"
    echo "gpu-bundle: $dest.tar.xz ($(du -sh "$dest.tar.xz" | cut -f1))"
fi
