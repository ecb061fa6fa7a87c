/* decode_swa_indices_and_lens.cpp - the SWA window slots of decode (or,
 * with token_offset, prefill) tokens, dense [rows, 1, W] + lens
 * (docs/semantics/indices.md A5.2, _compute_swa_indices_and_lens_kernel [S12]) and
 * their ragged CSR form (docs/semantics/indices.md A5.8, build_ragged_indices_from_dense with
 * decode_swa_lens [S6, S4]), bit-exact with ref/indices.c.
 *
 * Two launches, no host round trip.  The lengths are metadata only
 * (valid ? min(pos + 1, W) : 0), so
 *   1. one block: lens computed, written, and scanned into the ragged
 *      indptr (the A5.8 clamp to [0, W] is the identity on them);
 *   2. a 32-lane team per row, 8 rows per block: the dense row (only for valid tokens: an invalid
 *      token's row is NOT rewritten [S12]) and, from the same values, the
 *      row's ragged entries at indptr[i] with the num_rows bound (A5.8). */
#include "idx_common.h"

namespace {

using idx::global_slot;

const char *const variants[] = {"default", NULL};
/* rows_kernel: a team of 32 lanes per row, 8 rows per 256-thread block
 * (W = 128 is 4 columns a lane); 8 rows' dependent reads (valid, request,
 * block table) in flight per block instead of one. */
enum { ROW_TEAM = 32, ROWS_PER_BLOCK = 8, ROW_THREADS = ROW_TEAM * ROWS_PER_BLOCK };

struct swa_dev {
    const int32_t *qsl, *seq, *t2r;
    const uint8_t *valid;
    const int32_t *bt;
    long long bt_cols;
    uint32_t B;
    long long W, token_offset, num_rows, rows;

    /* pos = (S - L) + (t - qs) (docs/semantics/indices.md A5.1); the host checked pos >= 0. */
    __device__ long long pos(long long t, long long r) const
    {
        return ((long long)seq[r] - ((long long)qsl[r + 1] - qsl[r])) + (t - qsl[r]);
    }
    /* len = pos + 1 - max(pos - W + 1, 0) = min(pos + 1, W); 0 for an
     * invalid token (docs/semantics/indices.md A5.2). */
    __device__ int len(long long i) const
    {
        const long long t = i + token_offset;
        const bool ok = valid[t] != 0;
        const int32_t r = t2r[t];
        /* no branch: an invalid token reads qsl[0] (always present) in place of its request's entries,
         * so the scan's lengths have their reads in flight together */
        const int32_t s = *(ok ? seq + r : qsl), q0 = *(ok ? qsl + r : qsl), q1 = *(ok ? qsl + r + 1 : qsl);
        const long long p = ((long long)s - ((long long)q1 - q0)) + (t - q0);
        return ok ? (int)(p + 1 < W ? p + 1 : W) : 0;
    }
};

struct swa_len {
    swa_dev a;
    __device__ int operator()(long long i) const { return a.len(i); }
};

__global__ void __launch_bounds__(ROW_THREADS)
    rows_kernel(swa_dev a, const int32_t *__restrict__ indptr, int32_t *__restrict__ dense,
                int32_t *__restrict__ flat)
{
    const long long i = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / ROW_TEAM, t = i + a.token_offset;
    if (i >= a.rows || !a.valid[t])
        return; /* lens 0 (written by the scan), the indices row is NOT rewritten [S12] */
    const long long r = a.t2r[t], p = a.pos(t, r);
    const long long start = p - a.W + 1 > 0 ? p - a.W + 1 : 0, len = p + 1 - start;
    int32_t *row = dense + i * a.W, *out = flat + indptr[i];
    for (long long j = threadIdx.x % ROW_TEAM; j < a.W; j += ROW_TEAM) {
        /* SWA page size B (64) [S12]; start + j < 2^31 as pos < 2^31. */
        const int32_t x = j < len ? global_slot(a.bt, a.bt_cols, r, (int32_t)(start + j), a.B) : -1;
        row[j] = x;
        if (j < len) /* flat[indptr[i] + j] = indices[i, j], num_rows bound (A5.8 [S9]) */
            out[j] = (a.num_rows >= 0 && (x < 0 || x >= a.num_rows)) ? -1 : x;
    }
}

/* ---- host side ---- */

struct swa_shape {
    int qsl, seq, t2r, valid, bt, stale, dense, lens, flat, indptr;
    int64_t R, T, W, B, off, rows, num_rows;
    swa_dev dev;
};

int shape_of(const dsv4_hip_call *c, swa_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "query_start_loc:int32:1 seq_lens:int32:1 token_to_req_indices:int32:1 "
                                  "is_valid_token:uint8:1 block_table:int32:2 -> decode_swa_indices:int32:3 "
                                  "decode_swa_lens:int32:1 decode_swa_ragged_indices:int32:1 "
                                  "decode_swa_ragged_indptr:int32:1",
                               {&s->qsl, &s->seq, &s->t2r, &s->valid, &s->bt, &s->dense, &s->lens,
                                &s->flat, &s->indptr}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "window_size block_size token_offset num_out_rows ragged_num_rows",
                            {&s->W, &s->B, &s->off, &s->rows, &s->num_rows}, err, errlen)))
        return rc;
    s->R = c->in[s->seq].shape[0];
    s->T = c->in[s->t2r].shape[0];
    const void *const *d = c->din;
    s->dev = swa_dev{d ? (const int32_t *)d[s->qsl] : NULL, d ? (const int32_t *)d[s->seq] : NULL,
                     d ? (const int32_t *)d[s->t2r] : NULL, d ? (const uint8_t *)d[s->valid] : NULL,
                     d ? (const int32_t *)d[s->bt] : NULL, (long long)c->in[s->bt].shape[1], (uint32_t)s->B,
                     (long long)s->W, (long long)s->off, (long long)s->num_rows, (long long)s->rows};
    return DSV4_PLUGIN_OK;
}

/* What the kernels rely on: dsv4_swa_check (ref/indices.c) -- each valid
 * token in its request's range, pos >= 0, its pages in the block table --
 * plus the shapes. */
int check_shape(const dsv4_hip_call *c, const swa_shape &s, char *err, size_t errlen)
{
    if (s.B < 1 || s.B > INT32_MAX || s.W < 0 || s.off < 0 || s.rows < 0 || s.off + s.rows > s.T)
        return IDX_FAIL("swa: block_size >= 1, window_size, token_offset >= 0, token_offset + rows <= tokens");
    if (c->in[s.valid].shape[0] != s.T || c->in[s.qsl].shape[0] != s.R + 1)
        return IDX_FAIL("swa: inconsistent input shapes");
    const int64_t *ds = c->out[s.dense].shape;
    if (ds[0] != s.rows || ds[1] != 1 || ds[2] != s.W || c->out[s.lens].shape[0] != s.rows ||
        c->out[s.flat].shape[0] != s.rows * s.W || c->out[s.indptr].shape[0] != s.rows + 1)
        return IDX_FAIL("swa: outputs must be [rows, 1, W], [rows], [rows*W], [rows+1]");
    if (s.rows * s.W > INT32_MAX || s.rows > 0x7fffffff)
        return IDX_FAIL("swa: rows*W = %lld exceeds int32 offsets", (long long)(s.rows * s.W));
    const int32_t *q = (const int32_t *)c->in[s.qsl].data, *seq = (const int32_t *)c->in[s.seq].data;
    const int32_t *t2r = (const int32_t *)c->in[s.t2r].data;
    const uint8_t *valid = (const uint8_t *)c->in[s.valid].data;
    const int64_t bt_rows = c->in[s.bt].shape[0], cols = c->in[s.bt].shape[1];
    for (int64_t r = 0; r < s.R; r++)
        if (q[r + 1] < q[r])
            return IDX_FAIL("swa: query_start_loc[%lld] < query_start_loc[%lld]", (long long)r + 1, (long long)r);
    if (q[0] < 0 || q[s.R] > s.T)
        return IDX_FAIL("swa: query_start_loc spans [%d, %d): outside the %lld tokens", q[0], q[s.R], (long long)s.T);
    for (int64_t i = 0; i < s.rows; i++) {
        const int64_t t = i + s.off, r = t2r[t];
        if (valid[t] > 1)
            return IDX_FAIL("swa: is_valid_token[%lld] must be 0 or 1", (long long)t);
        if (!valid[t])
            continue;
        if (r < 0 || r >= s.R || t < q[r] || t >= q[r + 1])
            return IDX_FAIL("swa: token %lld (request %lld) is outside its query_start_loc range", (long long)t,
                            (long long)r);
        const int64_t pos = ((int64_t)seq[r] - ((int64_t)q[r + 1] - q[r])) + (t - q[r]);
        if (pos < 0 || r >= bt_rows || pos / s.B >= cols)
            return IDX_FAIL("swa: token %lld (request %lld, position %lld): no page in block_table [%lld, %lld]",
                            (long long)t, (long long)r, (long long)pos, (long long)bt_rows, (long long)cols);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const swa_shape &s, hipStream_t stream)
{
    int32_t *indptr = (int32_t *)c->dout[s.indptr];
    hipLaunchKernelGGL(idx::lens_scan_kernel<swa_len>, dim3(1), dim3(idx::SCAN_THREADS), 0, stream, swa_len{s.dev},
                       (long long)s.rows, (int32_t *)c->dout[s.lens], indptr);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess || s.rows == 0 || s.W == 0)
        return e;
    hipLaunchKernelGGL(rows_kernel, dim3((unsigned)((s.rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK)), dim3(ROW_THREADS), 0, stream, s.dev,
                       (const int32_t *)indptr, (int32_t *)c->dout[s.dense], (int32_t *)c->dout[s.flat]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(decode_swa_indices_and_lens, variants, swa_shape);
