/* build_prefill_topk_ragged_indices.cpp - causal-capped local top-k rows of
 * the prefill tokens -> global compressed-cache slots as CSR
 * (docs/semantics/indices.md A5.9, inferred from [S29]), both variants, bit-exact
 * with ref/indices.c.
 *
 * One launch, a row a block (the row from the block's ticket, idx_common.h
 * lookback_ticket), the lengths -> indptr cumsum of docs/semantics/indices.md
 * A5.8 by the decoupled look-back (idx_common.h lookback_prefix):
 *   invalid=-1 (default): a row's length is valid ? cap : 0 with cap =
 *     min((pos+1)//c, Wk) -- metadata only: every thread computes it (the
 *     same reads), the first FUSED_CHUNK entries go into registers (8 a
 *     thread, their reads in flight during the look-back), then the first
 *     cap columns are stored, -1 for rejected entries;
 *   invalid=drop: the length counts the surviving entries: the first
 *     FUSED_CHUNK entries in registers (8 consecutive columns a thread), a
 *     block scan gives each thread's rank, the rest of a wider row is
 *     counted in further passes; after the look-back the survivors are
 *     stored in column order (the rest by idx::block_compact).
 * More than FUSED_MAX_ROWS rows take the chains (faster there, see below):
 *   invalid=-1: 1. one block: lengths computed and scanned into indptr;
 *     2. one block per row: the first cap columns, -1 for rejected entries
 *        (8 columns a thread in flight a pass).
 *   invalid=drop: 1. one block per row: its count into indptr[i + 1];
 *     2. one block: in-place scan of indptr;
 *     3. one block per row: survivors compacted (idx::block_compact). */
#include "idx_common.h"

namespace {

using idx::global_slot;

const char *const variants[] = {"default", "invalid=drop", NULL};
enum { V_KEEP = 0, V_DROP = 1 };
enum { ROW_THREADS = 256 };
/* 8 entries a thread in registers; the look-back reads 64 predecessors a
 * round (rows start in ticket order).  FUSED_MAX_ROWS: the one launch for
 * small calls only; at 8192 rows (Wk 2048) the H200 ran it in 0.119 ms
 * against the chain's 0.071 (a block a row at one block an SM puts too few
 * rows in flight), as compute_global_topk_ragged_indices_and_indptr. */
enum { FUSED_ITEMS = 8, FUSED_CHUNK = FUSED_ITEMS * ROW_THREADS, FUSED_WINDOW = 64, FUSED_MAX_ROWS = 2048 };

struct pf_dev {
    const int32_t *topk;
    long long Wk;
    const int32_t *t2r;
    const uint8_t *valid;
    const int32_t *qsl, *seq;
    const int32_t *bt;
    long long bt_cols;
    uint32_t bc;
    long long c, N, token_offset, num_rows, R;

    /* Columns read for row i: valid ? min((pos+1)//c, Wk) clamped at 0 : 0,
     * pos = (S - L) + (t - qs) (docs/semantics/indices.md A5.1, A5.9).  No
     * branch on the token's own reads, so that a caller's unrolled rows
     * (lens_scan_kernel: 8 a thread) have all their reads in flight in two
     * rounds: valid[t] and t2r[t] together, then the request's.  An invalid
     * token's t2r may hold anything: it reads request 0 (there is one when
     * R > 0; with R = 0 no token is valid) and its result is dropped. */
    __device__ long long cap(long long i) const
    {
        const long long t = i + token_offset;
        const bool ok = valid[t] != 0;
        const int32_t rr = t2r[t];
        if (R == 0)
            return 0; /* uniform over the launch */
        const long long r = ok ? rr : 0;
        const long long q0 = qsl[r], pos = ((long long)seq[r] - ((long long)qsl[r + 1] - q0)) + (t - q0);
        long long n = idx::floor_div(pos + 1, c);
        n = n > Wk ? Wk : n;
        n = n < 0 ? 0 : n;
        return ok ? n : 0; /* lens 0 for an invalid token, as A5.6/A5.7 treat them (inferred) */
    }

    /* Entry j of row i: the slot for 0 <= v < N, else -1; slots outside
     * [0, num_rows) -> -1 when num_rows >= 0 (A5.8 bound, inferred). */
    __device__ int32_t entry(long long i, long long j) const
    {
        return slot_of(t2r[i + token_offset], topk[i * Wk + j]);
    }

    /* The same for a value v already read, of request r. */
    __device__ int32_t slot_of(long long r, int32_t v) const
    {
        long long slot = -1;
        if (v >= 0 && v < N)
            slot = global_slot(bt, bt_cols, r, v, bc);
        if (num_rows >= 0 && (slot < 0 || slot >= num_rows))
            slot = -1;
        return (int32_t)slot;
    }
};

struct cap_len {
    pf_dev a;
    __device__ int operator()(long long i) const { return (int)a.cap(i); }
};

/* In-place lengths left in indptr[i + 1] by count_kernel. */
struct shifted_len {
    const int32_t *indptr;
    __device__ int operator()(long long i) const { return indptr[i + 1]; }
};

/* invalid=-1: the first cap columns [S29], rejected entries kept as -1;
 * FUSED_ITEMS columns a thread a pass, each phase for all of them before
 * the next (the top-k reads, then the block-table reads, then the stores),
 * as the global top-k scatter does: the stores may alias nothing the
 * compiler can prove, so a one-column loop waits out both reads for every
 * column. */
__global__ void __launch_bounds__(ROW_THREADS)
    keep_kernel(pf_dev a, const int32_t *__restrict__ indptr, int32_t *__restrict__ flat)
{
    const long long i = blockIdx.x, n = indptr[i + 1] - indptr[i];
    if (n <= 0)
        return;
    int32_t *dst = flat + indptr[i];
    const int32_t *src = a.topk + i * a.Wk;
    const long long r = a.t2r[i + a.token_offset]; /* a valid token's (cap > 0) */
    for (long long base = 0; base < n; base += FUSED_CHUNK) {
        int32_t v[FUSED_ITEMS];
#pragma unroll
        for (int e = 0; e < FUSED_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + threadIdx.x;
            v[e] = j < n ? src[j] : -1;
        }
#pragma unroll
        for (int e = 0; e < FUSED_ITEMS; e++)
            v[e] = a.slot_of(r, v[e]);
#pragma unroll
        for (int e = 0; e < FUSED_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + threadIdx.x;
            if (j < n)
                dst[j] = v[e];
        }
    }
}

/* invalid=drop, step 1: the number of surviving entries of row i. */
__global__ void __launch_bounds__(ROW_THREADS) count_kernel(pf_dev a, int32_t *__restrict__ indptr)
{
    const long long i = blockIdx.x, n = a.cap(i);
    int mine = 0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
        mine += a.entry(i, j) >= 0;
    int total;
    (void)idx::block_exclusive_scan(mine, &total);
    if (threadIdx.x == 0)
        indptr[i + 1] = total;
}

/* invalid=drop, step 3: survivors in column order from indptr[i]. */
__global__ void __launch_bounds__(ROW_THREADS)
    drop_kernel(pf_dev a, const int32_t *__restrict__ indptr, int32_t *__restrict__ flat)
{
    const long long i = blockIdx.x;
    const pf_dev &aa = a;
    (void)idx::block_compact(
        [&](long long j, int32_t *out) {
            *out = aa.entry(i, j);
            return *out >= 0 ? 1 : 0;
        },
        a.cap(i), flat + indptr[i]);
}

/* The look-back's bookkeeping of row i = k (k < rows; with rows = 0 the one
 * block writes indptr[0] = 0): indptr[i] = off, and the last block the
 * total. */
__device__ inline void write_indptr(unsigned k, long long rows, int off, int len, int32_t *__restrict__ indptr)
{
    if (threadIdx.x == 0) {
        if ((long long)k < rows)
            indptr[k] = off;
        if (k == gridDim.x - 1)
            indptr[rows] = off + len;
    }
}

/* invalid=-1 in one launch: the same entries at the same offsets as
 * keep_kernel (entry(i, j) for j < cap(i), at the exclusive prefix of the
 * caps). */
/* (ROW_THREADS, 1): without the blocks hint nvcc 13 held the kernel to 32
 * registers and spilled */
__global__ void GPU_LAUNCH_BOUNDS_OCC(ROW_THREADS, 1)
    keep_fused_kernel(pf_dev a, long long rows, dsv4_hip_lookback st, int32_t *__restrict__ indptr,
                      int32_t *__restrict__ flat)
{
    const unsigned k = idx::lookback_ticket(st);
    const long long i = k;
    const int tid = (int)threadIdx.x;
    const int n = i < rows ? (int)a.cap(i) : 0; /* cap <= Wk, and T_pf * Wk < 2^31 */
    int32_t v[FUSED_ITEMS];
#pragma unroll
    for (int e = 0; e < FUSED_ITEMS; e++) {
        const long long j = e * ROW_THREADS + tid;
        v[e] = j < n ? a.entry(i, j) : -1;
    }
    const int off = idx::lookback_prefix(st, k, n, FUSED_WINDOW);
    write_indptr(k, rows, off, n, indptr);
    int32_t *const dst = flat + off;
#pragma unroll
    for (int e = 0; e < FUSED_ITEMS; e++) {
        const long long j = e * ROW_THREADS + tid;
        if (j < n)
            dst[j] = v[e];
    }
    for (long long base = FUSED_CHUNK; base < n; base += FUSED_CHUNK) {
#pragma unroll
        for (int e = 0; e < FUSED_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + tid;
            v[e] = j < n ? a.entry(i, j) : -1;
        }
#pragma unroll
        for (int e = 0; e < FUSED_ITEMS; e++) {
            const long long j = base + e * ROW_THREADS + tid;
            if (j < n)
                dst[j] = v[e];
        }
    }
}

/* invalid=drop in one launch: the survivors (entry >= 0) of the first cap
 * columns in column order, as count_kernel + drop_kernel: columns
 * [0, FUSED_CHUNK) ranked by a block scan over threads that own 8
 * consecutive columns each (thread order = column order), the columns past
 * it counted before the look-back and compacted after it from the first
 * chunk's end. */
__global__ void __launch_bounds__(ROW_THREADS)
    drop_fused_kernel(pf_dev a, long long rows, dsv4_hip_lookback st, int32_t *__restrict__ indptr,
                      int32_t *__restrict__ flat)
{
    const unsigned k = idx::lookback_ticket(st);
    const long long i = k;
    const int tid = (int)threadIdx.x;
    const int n = i < rows ? (int)a.cap(i) : 0;
    int32_t v[FUSED_ITEMS];
    int mine = 0;
#pragma unroll
    for (int e = 0; e < FUSED_ITEMS; e++) {
        const long long j = tid * FUSED_ITEMS + e;
        v[e] = j < n ? a.entry(i, j) : -1;
        mine += v[e] >= 0;
    }
    int rest = 0;
    for (long long j = FUSED_CHUNK + tid; j < n; j += ROW_THREADS)
        rest += a.entry(i, j) >= 0;
    int first_total, rest_total;
    const int rank = idx::block_exclusive_scan(mine, &first_total);
    (void)idx::block_exclusive_scan(rest, &rest_total);
    const int len = first_total + rest_total;
    const int off = idx::lookback_prefix(st, k, len, FUSED_WINDOW);
    write_indptr(k, rows, off, len, indptr);
    int32_t *at = flat + off + rank;
#pragma unroll
    for (int e = 0; e < FUSED_ITEMS; e++)
        if (v[e] >= 0)
            *at++ = v[e];
    if (n > FUSED_CHUNK) {
        const pf_dev &aa = a;
        (void)idx::block_compact(
            [&](long long j, int32_t *out) {
                *out = aa.entry(i, FUSED_CHUNK + j);
                return *out >= 0 ? 1 : 0;
            },
            n - FUSED_CHUNK, flat + off + first_total);
    }
}

/* ---- host side ---- */

struct pf_shape {
    int topk, t2r, valid, qsl, seq, bt, flat, indptr;
    int64_t T_pf, Wk, T, R, bc, c, N, off, num_rows;
    pf_dev dev;
};

int shape_of(const dsv4_hip_call *c, pf_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "topk_indices:int32:2 token_to_req_indices:int32:1 is_valid_token:uint8:1 "
                                  "query_start_loc:int32:1 seq_lens:int32:1 block_table:int32:2 -> "
                                  "topk_ragged_indices:int32:1 topk_ragged_indptr:int32:1",
                               {&s->topk, &s->t2r, &s->valid, &s->qsl, &s->seq, &s->bt, &s->flat,
                                &s->indptr}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "block_size compress_ratio num_compressed token_offset num_rows",
                            {&s->bc, &s->c, &s->N, &s->off, &s->num_rows}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->topk], &s->T_pf, &s->Wk);
    s->T = c->in[s->t2r].shape[0];
    s->R = c->in[s->seq].shape[0];
    const void *const *d = c->din;
    s->dev = pf_dev{d ? (const int32_t *)d[s->topk] : NULL, (long long)s->Wk,
                    d ? (const int32_t *)d[s->t2r] : NULL, d ? (const uint8_t *)d[s->valid] : NULL,
                    d ? (const int32_t *)d[s->qsl] : NULL, d ? (const int32_t *)d[s->seq] : NULL,
                    d ? (const int32_t *)d[s->bt] : NULL, (long long)c->in[s->bt].shape[1], (uint32_t)s->bc,
                    (long long)s->c, (long long)s->N, (long long)s->off, (long long)s->num_rows, (long long)s->R};
    return DSV4_PLUGIN_OK;
}

/* What the kernels rely on: dsv4_pftopk_check (ref/indices.c) -- each valid
 * token inside its request's query range, every block-table read in range
 * -- plus the shapes. */
int check_shape(const dsv4_hip_call *c, const pf_shape &s, char *err, size_t errlen)
{
    if (s.bc < 1 || s.bc > INT32_MAX || s.c < 1 || s.N < 0 || s.off < 0)
        return IDX_FAIL("pftopk: block_size and compress_ratio must be >= 1, num_compressed, token_offset >= 0");
    if (s.off + s.T_pf > s.T || c->in[s.valid].shape[0] != s.T || c->in[s.qsl].shape[0] != s.R + 1)
        return IDX_FAIL("pftopk: token_offset + %lld rows exceed the %lld tokens, or inconsistent shapes",
                        (long long)s.T_pf, (long long)s.T);
    if (c->out[s.flat].shape[0] != s.T_pf * s.Wk || c->out[s.indptr].shape[0] != s.T_pf + 1)
        return IDX_FAIL("pftopk: outputs must be [T_pf*Wk] and [T_pf+1]");
    if (s.T_pf * s.Wk > INT32_MAX || s.T_pf > 0x7fffffff)
        return IDX_FAIL("pftopk: T_pf*Wk = %lld exceeds int32 offsets", (long long)(s.T_pf * s.Wk));
    const int32_t *q = (const int32_t *)c->in[s.qsl].data, *seq = (const int32_t *)c->in[s.seq].data;
    const int32_t *t2r = (const int32_t *)c->in[s.t2r].data, *topk = (const int32_t *)c->in[s.topk].data;
    const uint8_t *valid = (const uint8_t *)c->in[s.valid].data;
    const int64_t rows = c->in[s.bt].shape[0], cols = c->in[s.bt].shape[1];
    for (int64_t r = 0; r < s.R; r++)
        if (q[r + 1] < q[r])
            return IDX_FAIL("pftopk: query_start_loc[%lld] < query_start_loc[%lld]", (long long)r + 1, (long long)r);
    if (s.R >= 0 && (q[0] < 0 || q[s.R] > s.T))
        return IDX_FAIL("pftopk: query_start_loc spans [%d, %d): outside the %lld tokens", q[0], q[s.R], (long long)s.T);
    for (int64_t i = 0; i < s.T_pf; i++) {
        const int64_t t = i + s.off, r = t2r[t];
        if (valid[t] > 1)
            return IDX_FAIL("pftopk: is_valid_token[%lld] must be 0 or 1", (long long)t);
        if (!valid[t])
            continue;
        if (r < 0 || r >= s.R || t < q[r] || t >= q[r + 1])
            return IDX_FAIL("pftopk: token %lld (request %lld) is outside its query_start_loc range",
                            (long long)t, (long long)r);
        const int64_t pos = ((int64_t)seq[r] - ((int64_t)q[r + 1] - q[r])) + (t - q[r]);
        int64_t cap = idx::floor_div(pos + 1, s.c);
        cap = cap > s.Wk ? s.Wk : (cap < 0 ? 0 : cap);
        for (int64_t j = 0; j < cap; j++) {
            const int32_t v = topk[i * s.Wk + j];
            if (v >= 0 && v < s.N && (r >= rows || v / s.bc >= cols))
                return IDX_FAIL("pftopk: topk_indices[%lld, %lld] = %d: block_table [%lld, %lld] has no page",
                                (long long)i, (long long)j, v, (long long)rows, (long long)cols);
        }
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const pf_shape &s, hipStream_t stream)
{
    int32_t *flat = (int32_t *)c->dout[s.flat], *indptr = (int32_t *)c->dout[s.indptr];
    const unsigned rows = (unsigned)s.T_pf;
    hipError_t e;
    if (s.T_pf <= FUSED_MAX_ROWS) {
        const unsigned blocks = rows > 0 ? rows : 1;
        dsv4_hip_lookback st;
        if ((e = dsv4_hip_lookback_state(blocks, stream, &st)) != hipSuccess)
            return e;
        if (c->variant == V_KEEP)
            hipLaunchKernelGGL(keep_fused_kernel, dim3(blocks), dim3(ROW_THREADS), 0, stream, s.dev,
                               (long long)s.T_pf, st, indptr, flat);
        else
            hipLaunchKernelGGL(drop_fused_kernel, dim3(blocks), dim3(ROW_THREADS), 0, stream, s.dev,
                               (long long)s.T_pf, st, indptr, flat);
        return hipGetLastError();
    }
    if (c->variant == V_KEEP) {
        hipLaunchKernelGGL(idx::lens_scan_kernel<cap_len>, dim3(1), dim3(idx::SCAN_THREADS), 0, stream,
                           cap_len{s.dev}, (long long)s.T_pf, (int32_t *)NULL, indptr);
        if ((e = hipGetLastError()) != hipSuccess || rows == 0)
            return e;
        hipLaunchKernelGGL(keep_kernel, dim3(rows), dim3(ROW_THREADS), 0, stream, s.dev, (const int32_t *)indptr,
                           flat);
        return hipGetLastError();
    }
    if (rows > 0) {
        hipLaunchKernelGGL(count_kernel, dim3(rows), dim3(ROW_THREADS), 0, stream, s.dev, indptr);
        if ((e = hipGetLastError()) != hipSuccess)
            return e;
    }
    hipLaunchKernelGGL(idx::lens_scan_kernel<shifted_len>, dim3(1), dim3(idx::SCAN_THREADS), 0, stream,
                       shifted_len{indptr}, (long long)s.T_pf, (int32_t *)NULL, indptr);
    if ((e = hipGetLastError()) != hipSuccess || rows == 0)
        return e;
    hipLaunchKernelGGL(drop_kernel, dim3(rows), dim3(ROW_THREADS), 0, stream, s.dev, (const int32_t *)indptr, flat);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(build_prefill_topk_ragged_indices, variants, pf_shape);
