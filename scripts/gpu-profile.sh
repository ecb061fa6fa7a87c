#!/usr/bin/env bash
# gpu-profile.sh - what bounds each hip kernel of `dsv4check bench --impl hip`:
# one Nsight Compute (ncu) pass per bench line, profiling the second and third
# launch of every kernel the line runs (the bench's probes excluded), and a
# small table of the counters that say why a kernel is where it is: DRAM and
# SM throughput as % of peak, achieved occupancy, registers, grid, the issue
# rate and the largest stall reasons.  Run from a bundle (gpu-bundle.sh) on
# the GPU machine: scripts/gpu-profile.sh OUTDIR [LINE-REGEX].
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/dsv4-prof}}
filter=${2:-.}
mkdir -p "$out"
libs="$PWD/lib"
ldconfig -p 2>/dev/null | grep -q 'libstdc++.so.6 ' || libs="$libs:$PWD/lib/fallback"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
dsv4=bin/dsv4check
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics=$metrics,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__shared_mem_per_block
metrics=$metrics,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio
metrics=$metrics,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio
metrics=$metrics,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
# every kernel but the bench's copy and matrix-unit probes
kernels='regex:^(?!copy_kernel|mma_peak_kernel)'
# the bench's lines (harness/bench.c), in its order
lines="combine_prefill_8192 global_topk_8192x2048 global_topk_ragged_256x2048 global_topk_ragged_8192x2048 prefill_topk_ragged_8192 swa_indices_8192 graph_copy_256x2048 chunk_plan_64 mxfp4_4096x7168 mxfp8_4096x7168 fp8_group_4096x7168 fused_qk_norm_quant_4096 kv_insert_prefill_8192 kv_gather_4x8192 attn_prefill_T512_H64_topk2048 attn_decode_64tok_H64_topk2048 attn_decode_paged_64tok_H64 idx_kstore_8192 idx_qquant_4096_h64 idx_logits_decode_64x16k idx_sa_decode_64x16k_top2048 idx_mqa_decode_64x16k gemm_a8w8_4096x7168x1536_f32 gemm_a8w8_4096x7168x1536_f64 indexer_logits_4096x64x32k shuffle_7168x1536 qnorm_insert_1024_H16 inv_rope_mxfp8_4096_H16 wo_a_bmm_16tok_g8_r1024_k4096"
for line in $lines; do
    [[ "$line" =~ $filter ]] || continue
    ncu --kernel-name "$kernels" --launch-skip 1 --launch-count 2 --metrics "$metrics" --csv --page raw \
        $dsv4 bench --impl hip --no-ref --filter "^$line\$" >"$out/$line.csv" 2>"$out/$line.err"
    echo "== $line (ncu rc $?)"
    python3 - "$out/$line.csv" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if len(rows) < 3:
    print("  no kernel profiled"); sys.exit(0)
head, units, data = rows[0], rows[1], rows[2:]
col = {n: i for i, n in enumerate(head)}
def g(r, n):
    i = col.get(n)
    return r[i] if i is not None else "?"
stalls = ["long_scoreboard", "barrier", "short_scoreboard", "lg_throttle", "wait", "math_pipe_throttle", "mio_throttle"]
for r in data:
    name = g(r, "Kernel Name")[:40]
    st = sorted(((float(g(r, "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio" % s) or 0), s) for s in stalls), reverse=True)[:2]
    print("  %-40s %8s %s dram %5s%% sm %5s%% occ %5s%% issue %5s%% tensor %5s%% regs %3s grid %7s x %4s smem %6s | %s" % (
        name, g(r, "gpu__time_duration.sum"), g(units, "gpu__time_duration.sum") or "?",
        g(r, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        g(r, "sm__throughput.avg.pct_of_peak_sustained_elapsed"), g(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        g(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
        g(r, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
        g(r, "launch__registers_per_thread"), g(r, "launch__grid_size"), g(r, "launch__block_size"),
        g(r, "launch__shared_mem_per_block"), ", ".join("%s %.2f" % (s, v) for v, s in st)))
EOF
done
