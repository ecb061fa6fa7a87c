/* idx_common.h - device helpers shared by the index/metadata builder kernels
 * (hip/compute_global_topk.cpp, build_prefill_topk_ragged_indices.cpp,
 * decode_swa_indices_and_lens.cpp and others): int32 wrap, floor division,
 * the block-table slot, a row's request by query_start_loc, a block-wide exclusive scan on warp shuffles (warpSize read at run time),
 * an order-preserving block compaction, the single-block lengths ->
 * indptr scan, and the single-pass (decoupled look-back) scan.  Semantics:
 * ref/indices.c (docs/semantics/indices.md A5). */
#ifndef DSV4_HIP_IDX_COMMON_H
#define DSV4_HIP_IDX_COMMON_H

#include "kernels.h"
#include "lookback_rules.h"

namespace idx {

/* Torch's .to(int32) wraps modulo 2^32 (ref/indices.c wrap_i32). */
__device__ __host__ inline int32_t wrap_i32(long long v)
{
    return (int32_t)(uint32_t)(unsigned long long)v;
}

/* Torch integer // is floor division (docs/semantics/numerics.md A1 [S4]). */
__device__ __host__ inline long long floor_div(long long a, long long b)
{
    long long q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* block_table[r, v // Bc] * Bc + v % Bc in int32 arithmetic (docs/semantics/indices.md A5.6
 * [S1]); v >= 0 and Bc < 2^31, so 32-bit unsigned division is exact. */
__device__ inline int32_t global_slot(const int32_t *__restrict__ bt, long long cols, long long r, int32_t v,
                                      uint32_t bc)
{
    const uint32_t uv = (uint32_t)v, page = uv / bc;
    return wrap_i32((long long)bt[r * cols + page] * bc + (uv - page * bc));
}

/* The request of row t: the last r in [0, R) with qsl[r] <= t, so empty
 * requests (equal neighbours) are skipped.  qsl is non-decreasing with
 * qsl[0] <= t (the caller's guard), R >= 1. */
__device__ inline long long request_of_row(const int32_t *qsl, long long R, long long t)
{
    long long lo = 0, hi = R - 1;
    while (lo < hi) {
        const long long mid = lo + (hi - lo + 1) / 2;
        if (qsl[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Shuffle up by d lanes; every lane of the warp takes part (gpu_compat.h
 * rules: no shuffles in divergent branches). */
__device__ inline int shfl_up_i32(int v, int d)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    return __shfl_up_sync(0xffffffffu, v, d);
#else
    return __shfl_up(v, d);
#endif
}

/* Exclusive scan of one int per thread over the whole block; *total gets
 * the block's sum.  Every thread calls it; blockDim.x is a multiple of
 * warpSize (all launches here use 256 or 1024 threads).  Contains
 * __syncthreads, and its shared scratch may be reused on return. */
__device__ inline int block_exclusive_scan(int x, int *total)
{
    __shared__ int warp_sums[GPU_MAX_WARPS];
    const int ws = warpSize, lane = (int)threadIdx.x % ws, warp = (int)threadIdx.x / ws;
    const int nwarps = (int)blockDim.x / ws;
    int inc = x;
    for (int d = 1; d < ws; d <<= 1) {
        const int y = shfl_up_i32(inc, d);
        if (lane >= d)
            inc += y;
    }
    if (lane == ws - 1)
        warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) { /* nwarps <= warpSize: 1024 / 32 = 32 */
        int w = lane < nwarps ? warp_sums[lane] : 0;
        for (int d = 1; d < ws; d <<= 1) {
            const int y = shfl_up_i32(w, d);
            if (lane >= d)
                w += y;
        }
        if (lane < nwarps)
            warp_sums[lane] = w; /* inclusive over warps */
    }
    __syncthreads();
    const int before = warp == 0 ? 0 : warp_sums[warp - 1];
    *total = warp_sums[nwarps - 1];
    __syncthreads();
    return before + inc - x;
}

/* Order-preserving compaction of entries [0, n) of one row by the whole
 * block: f(j, &v) says whether entry j survives and its value; survivors
 * go to dst[0 .. count) in column order.  Each pass covers 4 * blockDim
 * columns, 4 consecutive ones per thread, so the kept entries of a pass
 * are scanned once.  Returns the count (all threads). */
template <class F> __device__ inline int block_compact(F f, long long n, int32_t *__restrict__ dst)
{
    int count = 0;
    for (long long j0 = 0; j0 < n; j0 += 4LL * blockDim.x) {
        const long long j = j0 + 4LL * threadIdx.x;
        int32_t v[4];
        int keep[4], mine = 0;
        for (int e = 0; e < 4; e++) {
            keep[e] = j + e < n ? f(j + e, &v[e]) : 0;
            mine += keep[e];
        }
        int total;
        int at = count + block_exclusive_scan(mine, &total);
        for (int e = 0; e < 4; e++)
            if (keep[e])
                dst[at++] = v[e];
        count += total;
    }
    return count;
}

/* The single-block lengths -> indptr scan (docs/semantics/indices.md A5.7 step 2, A5.8:
 * exclusive cumsum, int32, length n + 1), for the lengths f(i), i < n.
 * One block of SCAN_THREADS threads walks tiles of SCAN_THREADS *
 * SCAN_ITEMS lengths: each thread computes its SCAN_ITEMS lengths of the
 * tile before storing any (their reads overlap), coalesced into shared memory, each thread
 * sums SCAN_ITEMS consecutive lengths, one block scan, coalesced stores.
 * lens_out (nullable) also receives f(i).  The host guarantees the total
 * is < 2^31 (so the int32 cumsum never wraps).  indptr may alias the
 * source of f when f(i) reads indptr[i + 1]: every tile reads all its
 * lengths before it writes indptr[base .. base + tile), and a later tile
 * reads only beyond that. */
enum { SCAN_THREADS = 1024, SCAN_ITEMS = 8, SCAN_TILE = SCAN_THREADS * SCAN_ITEMS };

template <class F>
__global__ void __launch_bounds__(SCAN_THREADS)
    lens_scan_kernel(F f, long long n, int32_t *__restrict__ lens_out, int32_t *indptr)
{
    /* +1 per SCAN_ITEMS row against shared-memory bank conflicts. */
    __shared__ int tile[SCAN_THREADS * (SCAN_ITEMS + 1)];
    const int t = (int)threadIdx.x;
    int carry = 0;
    for (long long base = 0; base < n; base += SCAN_TILE) {
        /* every length of the tile first (no store in between, so the loads of
         * the SCAN_ITEMS lengths are in flight together), then the stores */
        int v[SCAN_ITEMS];
#pragma unroll
        for (int e = 0; e < SCAN_ITEMS; e++) {
            const long long i = base + t + e * SCAN_THREADS;
            v[e] = i < n ? f(i) : 0;
        }
#pragma unroll
        for (int e = 0; e < SCAN_ITEMS; e++) {
            const int k = t + e * SCAN_THREADS;
            tile[k + k / SCAN_ITEMS] = v[e];
            if (lens_out && base + k < n)
                lens_out[base + k] = v[e];
        }
        __syncthreads();
        int *mine = tile + t * (SCAN_ITEMS + 1), sum = 0;
        for (int e = 0; e < SCAN_ITEMS; e++)
            sum += mine[e];
        int total, run = carry + block_exclusive_scan(sum, &total);
        for (int e = 0; e < SCAN_ITEMS; e++) {
            const int v = mine[e];
            mine[e] = run;
            run += v;
        }
        __syncthreads();
        for (int k = t; k < SCAN_TILE && base + k < n; k += SCAN_THREADS)
            indptr[base + k] = tile[k + k / SCAN_ITEMS];
        carry += total;
        __syncthreads();
    }
    if (t == 0)
        indptr[n] = carry;
}

/* ---- single-pass scan: decoupled look-back (docs/semantics/indices.md A5.8:
 * indptr = the exclusive cumsum of the lengths, int32) ----
 *
 * A kernel whose blocks each own a contiguous range of rows computes its
 * rows' lengths and their sum (the block's aggregate), then
 *   k = lookback_ticket(st);          the block's logical index
 *   off = lookback_prefix(st, k, agg) the sum of every earlier block's lengths
 * and writes its rows at offset off.  The status words and the word format
 * are kernels.h dsv4_hip_lookback and lookback_rules.h.
 *
 * Why it cannot deadlock.  A block waits only for status words of blocks
 * with a smaller logical index, and logical indices are tickets taken in
 * the order the blocks start (not blockIdx, whose start order is not
 * guaranteed): a block that holds ticket k is running, so every block with
 * a ticket below k has started earlier and is resident (or has finished).
 * Block 0 waits for nothing; by induction every block publishes.
 *
 * Why the sum is exact.  No data other than the status words passes
 * between blocks, and each word carries its flag and value together in one
 * single-copy-atomic 64-bit store (gpu_compat.h gpu_store_relaxed_u64), so
 * relaxed loads that see this launch's epoch see exactly a value its
 * writer published: either that block's aggregate or its inclusive prefix,
 * both final.  A word of another epoch (zeroed memory, an earlier launch)
 * is unpublished and re-read.  No fence is needed: nothing is ordered
 * against the words.  The sum of an inclusive prefix and the aggregates of
 * the blocks after it is the exclusive prefix of the block, as integers
 * (< 2^31: the host bounds the total), whatever order the loads ran in.
 *
 * The window is up to the whole block (one word a thread): with W threads
 * reading and up to W + 1 blocks, every block finds block 0's inclusive
 * prefix in its first round, so no block waits on a chain of other blocks'
 * look-backs, only on its predecessors' aggregates, which each publishes as
 * soon as its lengths are summed.  With many more blocks than are resident
 * at once, blocks start in ticket order and the nearest inclusive prefix is
 * a few blocks back: a smaller window reads fewer words. */

/* The block's logical index: a ticket from the launch's counter.  The
 * block that takes the last ticket (gridDim.x - 1) stores 0 back for the
 * next launch: every other block has taken its ticket before (its atomic
 * add precedes the last one in the counter's modification order).  Every
 * thread calls it; contains __syncthreads. */
__device__ inline unsigned lookback_ticket(const dsv4_hip_lookback &st)
{
    __shared__ unsigned ticket;
    if (threadIdx.x == 0) {
        const unsigned k = atomicAdd(st.ticket, 1u);
        if (k == gridDim.x - 1)
            (void)atomicExch(st.ticket, 0u);
        ticket = k;
    }
    __syncthreads();
    return ticket;
}

/* The exclusive prefix of block k, whose lengths sum to agg (0 <= agg,
 * uniform over the block).  Publishes agg at once (block 0: its inclusive
 * prefix agg), walks back over windows of `window` predecessors (1 <=
 * window <= blockDim.x; thread tt < window spins on the word of block
 * base - tt until this launch's epoch is there; lookback_rules.h
 * dsv4l_window_*: the nearest inclusive prefix and the aggregates after it),
 * then publishes the inclusive prefix.  Every thread calls it, with the same
 * k, agg and window; returns the same value to all.  Contains __syncthreads
 * on every path, so shared writes made before the call are visible to every
 * thread after it. */
__device__ inline int lookback_prefix(const dsv4_hip_lookback &st, unsigned k, int agg, int window)
{
    __shared__ int first_inclusive;
    const int tt = (int)threadIdx.x;
    const bool reader = tt < window;
    unsigned long long *const me = st.status + k;
    if (k == 0) {
        if (tt == 0)
            gpu_store_relaxed_u64(me, dsv4l_word(st.epoch, 1, agg));
        __syncthreads();
        return 0;
    }
    if (tt == 0) {
        gpu_store_relaxed_u64(me, dsv4l_word(st.epoch, 0, agg));
        first_inclusive = window;
    }
    __syncthreads();
    int excl = 0;
    for (long long base = (long long)k - 1;; base -= window) {
        const long long j = base - tt;
        unsigned long long w = 0;
        if (reader && j >= 0)
            do
                w = gpu_load_relaxed_u64(st.status + j);
            while (!dsv4l_current(w, st.epoch));
        if (reader && dsv4l_window_is_inclusive(j, w))
            (void)atomicMin(&first_inclusive, tt);
        __syncthreads(); /* every atomicMin of the window done */
        const int first = first_inclusive;
        int part_sum;
        (void)block_exclusive_scan(reader ? dsv4l_window_part(j, w, tt, first) : 0, &part_sum);
        excl += part_sum; /* uniform: the block's total */
        if (first < window)
            break;
        /* every thread read first_inclusive before the scan's barriers */
        if (tt == 0)
            first_inclusive = window;
        __syncthreads(); /* the reset before the next window's atomicMin */
    }
    if (tt == 0)
        gpu_store_relaxed_u64(me, dsv4l_word(st.epoch, 1, excl + agg));
    return excl;
}

/* Host side: lengths of a 1-D tensor, rank checks. */
#define IDX_FAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

} // namespace idx

#endif
