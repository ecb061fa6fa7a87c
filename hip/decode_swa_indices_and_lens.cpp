/* decode_swa_indices_and_lens.cpp - the SWA window slots of decode (or,
 * with token_offset, prefill) tokens, dense [rows, 1, W] + lens
 * (docs/semantics/indices.md A5.2, _compute_swa_indices_and_lens_kernel [S12]) and
 * their ragged CSR form (docs/semantics/indices.md A5.8, build_ragged_indices_from_dense with
 * decode_swa_lens [S6, S4]), bit-exact with ref/indices.c.
 *
 * One launch.  The lengths are metadata only (valid ? min(pos + 1, W) : 0;
 * the A5.8 clamp to [0, W] is the identity on them), so each block of 256
 * threads owns 32 consecutive rows and
 *   1. 32 threads compute their row's request, window start and length
 *      (one dependent read chain a row, all in flight together), write
 *      lens, and the block scans them (each row's offset inside the block,
 *      the block's aggregate);
 *   2. every thread reads the block-table slots of its first pass of
 *      columns (4 rows x 4 columns), and while those reads are in flight
 *      the block finds the sum of all earlier blocks' lengths by the
 *      decoupled look-back (idx_common.h lookback_prefix), writes indptr;
 *   3. the dense rows (only for valid tokens: an invalid token's row is NOT
 *      rewritten [S12]) and, from the same values, the rows' ragged entries
 *      at indptr[i] with the num_rows bound (A5.8).
 * The block's rows come from its ticket (the look-back's logical index),
 * not from blockIdx.  Every shape takes this path: the status words are 8
 * bytes a block, rows / 4 bytes, at most 1 / (16 W) of the dense output. */
#include "idx_common.h"

namespace {

using idx::global_slot;

const char *const variants[] = {"default", NULL};
/* A team of 32 lanes per row (lane = column j mod 32, each store of a team
 * 128 contiguous bytes), 8 teams per block, ROW_PASS rows per team: 32 rows
 * a block (8192 rows: 256 blocks, so every block's first look-back window
 * reaches block 0).  A pass covers COL_PASS * 32 = 128 columns (W = 128 is
 * one pass), so a thread holds ROW_PASS * COL_PASS = 16 slots. */
enum {
    TEAM = 32,
    TEAMS = 8,
    THREADS = TEAM * TEAMS,
    ROW_PASS = 4,
    ROWS_PER_BLOCK = TEAMS * ROW_PASS,
    COL_PASS = 4,
    PASS_COLS = TEAM * COL_PASS
};

struct swa_dev {
    const int32_t *qsl, *seq, *t2r;
    const uint8_t *valid;
    const int32_t *bt;
    long long bt_cols;
    uint32_t B;
    long long W, token_offset, num_rows, rows;
};

/* One row as the block keeps it in shared memory: write = 0 for an
 * invalid token (lens 0, the dense row NOT rewritten [S12]; r = 0) and for
 * rows past the end; then len = 0 and r, start are unused. */
struct row_info {
    int32_t write, r, start, len;
};

/* Row i (< a.rows): the reads of an invalid token go to qsl[0] (always
 * present) in place of its request's entries, so no branch holds them
 * back; its length is 0 (docs/semantics/indices.md A5.2). */
__device__ inline row_info row_of(const swa_dev &a, long long i)
{
    const long long t = i + a.token_offset;
    const bool ok = a.valid[t] != 0;
    const int32_t r = a.t2r[t];
    const int32_t s = *(ok ? a.seq + r : a.qsl), q0 = *(ok ? a.qsl + r : a.qsl),
                  q1 = *(ok ? a.qsl + r + 1 : a.qsl);
    const long long p = dsv4l_swa_pos(s, q0, q1, t);
    const int32_t len = ok ? dsv4l_swa_len(p, a.W) : 0;
    /* start = pos + 1 - len = max(pos - W + 1, 0) < 2^31 (lookback_rules.h) */
    return row_info{ok ? 1 : 0, ok ? r : 0, (int32_t)(p + 1 - len), len};
}

/* The slots of one pass: rows team + TEAMS * q, columns j0 + lane + TEAM * c.
 * j < len: block_table[r, (start + j) // B] * B + (start + j) % B [S12]
 * (start + j < 2^31, so global_slot's 32-bit unsigned division is exact);
 * len <= j < W: -1; columns past W and rows not written are never stored.
 * With B >= TEAM the page and offset of the first column are divided once
 * and stepped by TEAM after: offset + TEAM < 2B, so one conditional
 * subtraction keeps offset = (start + j) % B and page = (start + j) // B
 * (the same integers as the division; start + j0 + lane + TEAM * c < 2^32,
 * as start < 2^31 and j < W < 2^31). */
__device__ inline void load_pass(const swa_dev &a, const row_info *rows, long long j0, int team, int lane,
                                 int32_t (&v)[ROW_PASS][COL_PASS])
{
#pragma unroll
    for (int q = 0; q < ROW_PASS; q++) {
        const row_info ri = rows[team + TEAMS * q];
        if (a.B >= TEAM) {
            const uint32_t u = (uint32_t)ri.start + (uint32_t)(j0 + lane);
            uint32_t page = u / a.B, offset = u - page * a.B;
            const int32_t *const bt_row = a.bt + (long long)ri.r * a.bt_cols;
#pragma unroll
            for (int c = 0; c < COL_PASS; c++) {
                const long long j = j0 + lane + TEAM * c;
                v[q][c] = ri.write && j < ri.len ? idx::wrap_i32((long long)bt_row[page] * a.B + offset) : -1;
                offset += TEAM;
                const bool next = offset >= a.B;
                offset -= next ? a.B : 0u;
                page += next ? 1u : 0u;
            }
        } else {
#pragma unroll
            for (int c = 0; c < COL_PASS; c++) {
                const long long j = j0 + lane + TEAM * c;
                v[q][c] = ri.write && j < ri.len ? global_slot(a.bt, a.bt_cols, ri.r, (int32_t)(ri.start + j), a.B)
                                                 : -1;
            }
        }
    }
}

/* dense[i, j] = v for j < W; flat[off + row_off + j] = v with the num_rows
 * bound (A5.8 [S9]: a value outside [0, num_rows) becomes -1) for j < len. */
__device__ inline void store_pass(const swa_dev &a, const row_info *rows, const int *row_off, long long i0,
                                  long long j0, int team, int lane, const int32_t (&v)[ROW_PASS][COL_PASS],
                                  int off, int32_t *__restrict__ dense, int32_t *__restrict__ flat)
{
#pragma unroll
    for (int q = 0; q < ROW_PASS; q++) {
        const int rho = team + TEAMS * q;
        const row_info ri = rows[rho];
        if (!ri.write)
            continue;
        int32_t *const row = dense + (i0 + rho) * a.W, *const out = flat + off + row_off[rho];
#pragma unroll
        for (int c = 0; c < COL_PASS; c++) {
            const long long j = j0 + lane + TEAM * c;
            const int32_t x = v[q][c];
            if (j < a.W)
                row[j] = x;
            if (j < ri.len)
                out[j] = (a.num_rows >= 0 && (x < 0 || x >= a.num_rows)) ? -1 : x;
        }
    }
}

__global__ void __launch_bounds__(THREADS)
    swa_kernel(swa_dev a, dsv4_hip_lookback st, int32_t *__restrict__ lens, int32_t *__restrict__ indptr,
               int32_t *__restrict__ dense, int32_t *__restrict__ flat)
{
    __shared__ row_info rows[ROWS_PER_BLOCK];
    __shared__ int row_off[ROWS_PER_BLOCK];
    const int tid = (int)threadIdx.x, team = tid / TEAM, lane = tid % TEAM;
    const unsigned k = idx::lookback_ticket(st);
    const long long i0 = (long long)k * ROWS_PER_BLOCK;

    int len = 0;
    if (tid < ROWS_PER_BLOCK) {
        const long long i = i0 + tid;
        row_info ri{0, 0, 0, 0};
        if (i < a.rows) {
            ri = row_of(a, i);
            lens[i] = ri.len;
        }
        rows[tid] = ri;
        len = ri.len;
    }
    int agg;
    const int mine = idx::block_exclusive_scan(len, &agg); /* its barriers publish rows[] */
    if (tid < ROWS_PER_BLOCK)
        row_off[tid] = mine; /* read after lookback_prefix's barriers */

    /* the first pass's slot reads go out before the look-back; nothing
     * waits on them until the stores */
    int32_t v[ROW_PASS][COL_PASS];
    load_pass(a, rows, 0, team, lane, v);
    const int off = idx::lookback_prefix(st, k, agg, THREADS); /* 8192 rows: one window */
    if (tid < ROWS_PER_BLOCK && i0 + tid < a.rows)
        indptr[i0 + tid] = off + mine;
    if (k == gridDim.x - 1 && tid == 0)
        indptr[a.rows] = off + agg; /* the last block ends at row a.rows */
    store_pass(a, rows, row_off, i0, 0, team, lane, v, off, dense, flat);
    for (long long j0 = PASS_COLS; j0 < a.W; j0 += PASS_COLS) {
        load_pass(a, rows, j0, team, lane, v);
        store_pass(a, rows, row_off, i0, j0, team, lane, v, off, dense, flat);
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
    /* at least one block: with no rows it writes indptr[0] = 0 */
    const long long blocks = s.rows > 0 ? (s.rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK : 1;
    dsv4_hip_lookback st;
    hipError_t e = dsv4_hip_lookback_state((size_t)blocks, stream, &st);
    if (e != hipSuccess)
        return e;
    hipLaunchKernelGGL(swa_kernel, dim3((unsigned)blocks), dim3(THREADS), 0, stream, s.dev, st,
                       (int32_t *)c->dout[s.lens], (int32_t *)c->dout[s.indptr], (int32_t *)c->dout[s.dense],
                       (int32_t *)c->dout[s.flat]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(decode_swa_indices_and_lens, variants, swa_shape);
