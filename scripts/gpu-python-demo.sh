#!/usr/bin/env bash
# gpu-python-demo.sh - the Python front end on a GPU machine that has only
# python3 with numpy, torch (CUDA) and triton: a torch-CUDA mxfp8_quant and
# a Triton combine_topk_swa_indices (python/examples/) judged through
# `python3 -m dsv4check run`, then identify and the overhead benchmark.
#
#   scripts/gpu-python-demo.sh --bundle DEST [--tar]   (here, after `make`)
#       DEST: bin/dsv4check, lib/libdsv4.so and every library they need per
#       ldd outside glibc, python/, cases/, data/ and this script
#   DEST/scripts/gpu-python-demo.sh [OUTDIR]           (there)
#       runs the demo; each step's output goes to the console and OUTDIR
#       (default ./python-demo-out); exit 0 when every step did what it
#       should (the examples pass; identify names the default variants).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = "--bundle" ]; then
    dest=${2:?"usage: $0 --bundle DEST [--tar]"}
    for f in build/dsv4check build/libdsv4.so; do
        [ -f "$here/$f" ] || { echo "gpu-python-demo: $here/$f missing (make)" >&2; exit 1; }
    done
    rm -rf "$dest"
    mkdir -p "$dest/bin" "$dest/lib" "$dest/scripts"
    cp "$here/build/dsv4check" "$dest/bin/"
    cp "$here/build/libdsv4.so" "$dest/lib/"
    ldd "$here/build/dsv4check" "$here/build/libdsv4.so" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    while read -r lib; do
        case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
        *) cp -L "$lib" "$dest/lib/" ;;
        esac
    done
    mkdir -p "$dest/python"
    cp -r "$here/python/dsv4check" "$here/python/examples" "$dest/python/"
    find "$dest/python" -name __pycache__ -prune -exec rm -rf {} +
    cp -r "$here/cases" "$here/data" "$dest/"
    cp "$here/scripts/gpu-python-demo.sh" "$dest/scripts/"
    echo "gpu-python-demo: $dest ($(du -sh "$dest" | cut -f1))"
    if [ "${3:-}" = "--tar" ]; then
        tar -C "$(dirname "$dest")" -I "xz -T0" -cf "$dest.tar.xz" "$(basename "$dest")"
        echo "gpu-python-demo: $dest.tar.xz ($(du -sh "$dest.tar.xz" | cut -f1))"
    fi
    exit 0
fi

out=${1:-python-demo-out}
mkdir -p "$out"
cd "$here"
if [ -x bin/dsv4check ]; then cli=bin/dsv4check lib=lib/libdsv4.so; else cli=build/dsv4check lib=build/libdsv4.so; fi
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DSV4CHECK="$here/$cli" DSV4CHECK_LIB="$here/$lib"
export PYTHONPATH="$here/python:$here/python/examples${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
fail=0

step() { # step NAME EXPECTED-EXIT COMMAND...: runs it, output to the console and OUTDIR/NAME.txt
    local name=$1 want=$2 rc=0
    shift 2
    echo "== $name: $*"
    "$@" > >(tee "$out/$name.txt") 2>&1 || rc=$?
    wait
    if [ "$rc" != "$want" ]; then echo "gpu-python-demo: $name exited $rc, expected $want"; fail=1; fi
}

step environment 0 "$PY" -c 'import numpy, torch, triton; print("numpy", numpy.__version__, "torch", torch.__version__,
    "triton", triton.__version__, "cuda", torch.cuda.is_available(),
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")'
step torch_mxfp8 0 "$PY" -m dsv4check run cases/ci.yaml --impl torch_mxfp8:impl --filter mxfp8 \
    --junit "$out/torch_mxfp8.xml"
step triton_combine 0 "$PY" -m dsv4check run cases/ci.yaml --impl triton_combine:impl --filter combine \
    --junit "$out/triton_combine.xml" -j 4
step identify_mxfp8 0 "$PY" -m dsv4check identify cases/ci.yaml --impl torch_mxfp8:impl
step identify_combine 0 "$PY" -m dsv4check identify cases/ci.yaml --impl triton_combine:impl
step bench_overhead 0 "$PY" -m dsv4check bench-overhead cases/ci.yaml
for name in identify_mxfp8 identify_combine; do
    grep -q '  => default' "$out/$name.txt" || { echo "gpu-python-demo: $name did not name the default"; fail=1; }
done
echo "gpu-python-demo: $([ $fail = 0 ] && echo ok || echo FAILED); outputs in $out"
exit $fail
