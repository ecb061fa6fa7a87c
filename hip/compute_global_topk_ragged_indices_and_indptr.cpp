/* compute_global_topk_ragged_indices_and_indptr.cpp - the ROCm C4A decode
 * CSR form of the global top-k slots (docs/semantics/indices.md A5.7),
 * bit-exact with ref/indices.c.
 *
 * The production op is a chain (lens, cumsum, scatter: A5.7 steps 1-3 [S6]);
 * here it is one launch, one block per row (the row from the block's
 * ticket, idx_common.h lookback_ticket):
 *   1. the row's first FUSED_CHUNK columns read into registers (8 a
 *      thread, all in flight together; wider rows count the rest in further
 *      passes), lens[t] = valid ? #{v >= 0} : 0 by a block sum;
 *   2. the block-table reads of the first chunk's kept columns go out, and
 *      the decoupled look-back (idx_common.h lookback_prefix) gives
 *      indptr[t], the sum of every earlier row's length;
 *   3. flat[indptr[t] + j] for j < lens[t] from the registers (the rest of
 *      a wider row re-read, 8 columns a thread a pass).
 * So the top-k rows are read once, not twice.  More than FUSED_MAX_ROWS rows
 * take the three-launch chain below instead (faster there, see below):
 *   1. one block per row: lens[t] = valid ? #{v >= 0} : 0;
 *   2. one block: indptr = exclusive cumsum of lens (idx::lens_scan_kernel);
 *   3. one block per row: flat[indptr[t] + j] for j < lens[t], 8 columns a
 *      thread in flight per pass. */
#include "gtopk_common.h"

namespace {

using namespace gtopk;

const char *const ragged_variants[] = {"default", NULL};
enum { SCATTER_ITEMS = 8 };
/* FUSED_WINDOW: the look-back reads 64 predecessors a round (T blocks start
 * in ticket order, so the nearest published prefix is a few rows back).
 * FUSED_MAX_ROWS: the one launch for decode-sized calls only.  On the H200
 * it ran 256 rows x 2048 in 0.010 ms against the chain's 0.015, but 8192
 * rows in 0.105 ms against 0.074: a block a row at one block an SM (its
 * register hint) puts too few rows in flight, where the chain's row kernels
 * run many blocks an SM. */
enum { FUSED_CHUNK = SCATTER_ITEMS * ROW_THREADS, FUSED_WINDOW = 64, FUSED_MAX_ROWS = 2048 };

/* Ragged step 1 (docs/semantics/indices.md A5.7): lens[t] = valid ? #{j < K : v >= 0} : 0. */
__global__ void __launch_bounds__(ROW_THREADS) ragged_lens_kernel(gtopk_dev a, int32_t *__restrict__ lens)
{
    const long long t = blockIdx.x, K = a.K;
    int mine = 0;
    if (a.valid[t]) {
        const int32_t *src = a.topk + t * K;
        if ((K & 3) == 0) {
            const int4 *s4 = reinterpret_cast<const int4 *>(src);
            for (long long q = threadIdx.x; q < K / 4; q += blockDim.x) {
                int4 x = s4[q];
                mine += (x.x >= 0) + (x.y >= 0) + (x.z >= 0) + (x.w >= 0);
            }
        } else {
            for (long long j = threadIdx.x; j < K; j += blockDim.x)
                mine += src[j] >= 0;
        }
    }
    const int count = block_sum(mine); /* uniform branch above: every thread reaches the scan */
    if (threadIdx.x == 0)
        lens[t] = count;
}

struct lens_reader {
    const int32_t *lens;
    __device__ int operator()(long long i) const { return lens[i]; }
};

/* Columns [base0, n) of the top-k row src (request r) through the block
 * table into dst, -1 kept: SCATTER_ITEMS columns a thread per pass, each
 * phase for all of them before the next (the top-k reads, then the
 * block-table reads, then the stores): the stores may alias nothing the
 * compiler can prove, so a one-column loop would wait out both reads for
 * every column.  base0 is a multiple of SCATTER_ITEMS * ROW_THREADS. */
__device__ inline void scatter_columns(const gtopk_dev &a, long long r, const int32_t *src, int32_t *dst,
                                       long long base0, long long n)
{
    for (long long base = base0; base < n; base += (long long)SCATTER_ITEMS * ROW_THREADS) {
        int32_t v[SCATTER_ITEMS];
#pragma unroll
        for (int e = 0; e < SCATTER_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + threadIdx.x;
            v[e] = j < n ? src[j] : -1;
        }
#pragma unroll
        for (int e = 0; e < SCATTER_ITEMS; e++)
            v[e] = v[e] >= 0 ? global_slot(a.bt, a.bt_cols, r, v[e], a.bc) : -1;
#pragma unroll
        for (int e = 0; e < SCATTER_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + threadIdx.x;
            if (j < n)
                dst[j] = v[e];
        }
    }
}

/* Ragged step 3: the FIRST lens[t] columns, -1 kept, trailing valid ones
 * dropped (docs/semantics/indices.md A5.7 [S6]). */
__global__ void __launch_bounds__(ROW_THREADS)
    ragged_scatter_kernel(gtopk_dev a, const int32_t *__restrict__ lens, const int32_t *__restrict__ indptr,
                          int32_t *__restrict__ flat)
{
    const long long t = blockIdx.x;
    scatter_columns(a, a.t2r[t], a.topk + t * a.K, flat + indptr[t], 0, lens[t]);
}

/* The one-launch form (steps 1-3 of the header).  Block k takes row t = k
 * when k < T; with T = 0 the one block has no row and writes indptr[0] = 0.
 * Bit-exact with the chain: the same count, the same first lens[t] columns
 * through the same global_slot, at the same exclusive prefix (the
 * look-back's sum of the earlier rows' counts, integers < 2^31: T*K is). */
/* (ROW_THREADS, 1): without the blocks hint nvcc 13 held the kernel to 32
 * registers and spilled */
__global__ void GPU_LAUNCH_BOUNDS_OCC(ROW_THREADS, 1)
    ragged_fused_kernel(gtopk_dev a, long long T, dsv4_hip_lookback st, int32_t *__restrict__ lens,
                        int32_t *__restrict__ indptr, int32_t *__restrict__ flat)
{
    const unsigned k = idx::lookback_ticket(st);
    const long long t = k, K = a.K;
    const int tid = (int)threadIdx.x;
    const bool row = t < T && a.valid[t] != 0; /* uniform over the block */
    const int32_t *src = a.topk + t * K;
    int32_t v[SCATTER_ITEMS];
    int mine = 0;
#pragma unroll
    for (int e = 0; e < SCATTER_ITEMS; e++) {
        const long long j = e * ROW_THREADS + tid;
        v[e] = row && j < K ? src[j] : -1;
        mine += v[e] >= 0;
    }
    for (long long base = FUSED_CHUNK; row && base < K; base += FUSED_CHUNK)
#pragma unroll
        for (int e = 0; e < SCATTER_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + tid;
            mine += j < K && src[j] >= 0;
        }
    const int n = block_sum(mine); /* lens[t] (A5.7 step 1) */
    const long long r = row ? a.t2r[t] : 0;
    /* step 3's values for the first chunk: the FIRST n columns, -1 kept [S6];
     * their block-table reads are in flight during the look-back */
#pragma unroll
    for (int e = 0; e < SCATTER_ITEMS; e++) {
        const long long j = e * ROW_THREADS + tid;
        v[e] = j < n && v[e] >= 0 ? global_slot(a.bt, a.bt_cols, r, v[e], a.bc) : -1;
    }
    const int off = idx::lookback_prefix(st, k, n, FUSED_WINDOW); /* indptr[t] (step 2) */
    if (tid == 0) {
        if (t < T) {
            lens[t] = n;
            indptr[t] = off;
        }
        if (k == gridDim.x - 1)
            indptr[T] = off + n;
    }
    int32_t *dst = flat + off;
#pragma unroll
    for (int e = 0; e < SCATTER_ITEMS; e++) {
        const long long j = e * ROW_THREADS + tid;
        if (j < n)
            dst[j] = v[e];
    }
    scatter_columns(a, r, src, dst, FUSED_CHUNK, n); /* the rest of a wider row */
}

struct ragged_out {
    int flat, indptr, lens;
};

int ragged_outputs(const dsv4_hip_call *c, ragged_out *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "-> topk_ragged_indices:int32:1 topk_ragged_indptr:int32:1 topk_lens:int32:1",
                               {&o->flat, &o->indptr, &o->lens}, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

int ragged_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gtopk_shape s;
    ragged_out o;
    int rc = check_common(c, &s, true, err, errlen);
    if (rc || (rc = ragged_outputs(c, &o, err, errlen)))
        return rc;
    if (c->out[o.flat].shape[0] != s.T * s.K || c->out[o.indptr].shape[0] != s.T + 1 ||
        c->out[o.lens].shape[0] != s.T)
        return IDX_FAIL("gtopk ragged: outputs must be [T*K], [T+1], [T]");
    /* The int32 cumsum never wraps, and every flat offset is < 2^31. */
    if (s.T * s.K > INT32_MAX)
        return IDX_FAIL("gtopk ragged: T*K = %lld exceeds int32 offsets", (long long)(s.T * s.K));
    return DSV4_PLUGIN_OK;
}

hipError_t ragged_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    gtopk_shape s;
    ragged_out o;
    char err[256];
    if (shape_of(c, &s, err, sizeof err) || ragged_outputs(c, &o, err, sizeof err))
        return hipErrorInvalidValue;
    int32_t *flat = (int32_t *)c->dout[o.flat], *indptr = (int32_t *)c->dout[o.indptr];
    int32_t *lens = (int32_t *)c->dout[o.lens];
    if (s.T <= FUSED_MAX_ROWS) {
        const long long blocks = s.T > 0 ? s.T : 1;
        dsv4_hip_lookback st;
        hipError_t e = dsv4_hip_lookback_state((size_t)blocks, stream, &st);
        if (e != hipSuccess)
            return e;
        hipLaunchKernelGGL(ragged_fused_kernel, dim3((unsigned)blocks), dim3(ROW_THREADS), 0, stream, s.dev,
                           (long long)s.T, st, lens, indptr, flat);
        return hipGetLastError();
    }
    if (s.T > 0) {
        hipLaunchKernelGGL(ragged_lens_kernel, dim3((unsigned)s.T), dim3(ROW_THREADS), 0, stream, s.dev, lens);
        hipError_t e = hipGetLastError();
        if (e != hipSuccess)
            return e;
    }
    hipLaunchKernelGGL(idx::lens_scan_kernel<lens_reader>, dim3(1), dim3(idx::SCAN_THREADS), 0, stream,
                       lens_reader{lens}, (long long)s.T, (int32_t *)NULL, indptr);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess || s.T == 0)
        return e;
    hipLaunchKernelGGL(ragged_scatter_kernel, dim3((unsigned)s.T), dim3(ROW_THREADS), 0, stream, s.dev,
                       (const int32_t *)lens, (const int32_t *)indptr, flat);
    return hipGetLastError();
}

} // namespace

/* Not const: see DSV4_HIP_SHAPE_KERNEL in kernels.h. */
dsv4_hip_kernel dsv4_hip_compute_global_topk_ragged_indices_and_indptr = {
    "compute_global_topk_ragged_indices_and_indptr", ragged_variants, ragged_check, ragged_launch};
