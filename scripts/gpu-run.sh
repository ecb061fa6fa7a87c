#!/usr/bin/env bash
# gpu-run.sh - everything the hip backend needs checked on a GPU machine, in
# one go (run from a bundle made by scripts/gpu-bundle.sh):
#   1. the ci suite, --impl hip --rerun 3 --junit (every case bit-exact and
#      bitwise identical over 3 runs);
#   1b. the indexer cases again with runs of 3 key tiles a logits block
#      (DSV4_HIP_LOGITS_RUN=3: the small cases otherwise run one);
#   2. the same suite under compute-sanitizer memcheck (0 errors required,
#      device leaks included; the logits blocks at runs of 3 tiles, whose
#      single-tile form is the same loop once);
#   3. dsv4check bench --impl hip --no-ref: kernel times, GB/s, % of the device copy
#      bandwidth measured in the same run by the backend's copy kernel;
#   4. scripts/torch_combine_bench.py: PyTorch eager on the same production
#      case, and the speed-up of the kernel over it;
#   5. scripts/torch_attn_decode_bench.py: PyTorch eager gather + matmul +
#      softmax of the paged decode bench case, against the decode kernel.
# Usage: scripts/gpu-run.sh [OUTDIR]   (default $OUT, else /tmp/dsv4-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/dsv4-gpu}}
mkdir -p "$out"
libs="$PWD/lib"
ldconfig -p 2>/dev/null | grep -q 'libstdc++.so.6 ' || libs="$libs:$PWD/lib/fallback"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
dsv4=bin/dsv4check
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

echo "== 1. ci suite: --impl hip --rerun 3"
$dsv4 run cases/ci.yaml --impl hip --rerun 3 --junit "$out/ci-hip.xml" >"$out/ci-hip.txt" 2>&1
rc_ci=$?
cat "$out/ci-hip.txt"

echo "== 1b. indexer cases, runs of 3 key tiles a block (DSV4_HIP_LOGITS_RUN=3), --rerun 3"
DSV4_HIP_LOGITS_RUN=3 $dsv4 run cases/ci.yaml --impl hip --rerun 3 --filter 'idx_logits|idx_sa|idx_mqa' \
    >"$out/ci-hip-run3.txt" 2>&1
rc_run3=$?
tail -3 "$out/ci-hip-run3.txt"

echo "== 2. compute-sanitizer memcheck"
DSV4_HIP_LOGITS_RUN=3 compute-sanitizer --tool memcheck --leak-check full --target-processes all \
    --error-exitcode 99 $dsv4 run cases/ci.yaml --impl hip >"$out/memcheck.txt" 2>&1
rc_mc=$?
grep -E "ERROR SUMMARY|LEAK SUMMARY|passed|failed" "$out/memcheck.txt" | tail -5
mc_errors=$(grep -oE "ERROR SUMMARY: [0-9]+" "$out/memcheck.txt" | tail -1 | grep -oE "[0-9]+$")

echo "== 3. bench --impl hip"
$dsv4 bench --impl hip --no-ref >"$out/bench.txt" 2>&1
rc_bench=$?
cat "$out/bench.txt"

echo "== 4. PyTorch eager, same production case"
env -u LD_LIBRARY_PATH python3 scripts/torch_combine_bench.py >"$out/torch.txt" 2>&1
rc_torch=$?
cat "$out/torch.txt"

echo "== 5. PyTorch eager attention decode, same shape as attn_decode_paged_64tok_H64"
env -u LD_LIBRARY_PATH python3 scripts/torch_attn_decode_bench.py >"$out/torch-attn.txt" 2>&1
rc_tattn=$?
cat "$out/torch-attn.txt"

hip_ms=$(awk '$1 == "combine_prefill_8192" && $2 ~ /^hip/ {print $3}' "$out/bench.txt")
attn_ms=$(awk '$1 == "attn_decode_paged_64tok_H64" && $2 ~ /^hip/ {print $3}' "$out/bench.txt")
echo "== summary"
echo "ci (--rerun 3): rc $rc_ci; indexer at runs of 3: rc $rc_run3; memcheck: rc $rc_mc, ${mc_errors:-?} errors; bench: rc $rc_bench; torch: rc $rc_torch, $rc_tattn"
for impl in per_request vectorized; do
    t=$(awk -v k="$impl" '$1 == "torch_ms" && $2 == k {print $3}' "$out/torch.txt")
    if [ -n "$t" ] && [ -n "$hip_ms" ]; then
        awk -v t="$t" -v h="$hip_ms" -v k="$impl" 'BEGIN {printf "speed-up over torch %s: %.3f ms / %.4f ms = %.1fx\n", k, t, h, t / h}'
    fi
done
for form in fp32 bf16; do
    t=$(awk -v k="$form" '$1 == "torch_ms" && $2 == k {print $3}' "$out/torch-attn.txt")
    if [ -n "$t" ] && [ -n "$attn_ms" ]; then
        awk -v t="$t" -v h="$attn_ms" -v k="$form" 'BEGIN {printf "attention decode: torch %s %.3f ms / kernel %.3f ms = %.2fx\n", k, t, h, t / h}'
    fi
done
[ $rc_ci -eq 0 ] && [ $rc_run3 -eq 0 ] && [ $rc_mc -eq 0 ] && [ "${mc_errors:-1}" = 0 ] && [ $rc_bench -eq 0 ]
