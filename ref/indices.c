/* indices.c - index builders; see indices.h.  Every rule cites
 * docs/semantics/indices.md and its sources. */
#include "indices.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "indices_internal.h"
#include "parallel.h"
#include "simd.h"

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>
#define IDX512 __attribute__((target("avx512f,avx2")))
#endif

int64_t dsv4_combine_width(int64_t topk, int64_t window_size)
{
    const int64_t align = DSV4_SPARSE_PREFILL_TOPK_ALIGNMENT;
    return (topk + window_size + align - 1) / align * align;
}

int dsv4_combine_check(const dsv4_combine_args *a, dsv4_combine_variant v, dsv4_status *st)
{
    if ((unsigned)v >= DSV4_COMBINE_VARIANT_COUNT)
        return dsv4_fail(st, DSV4_EINPUT, "unknown combine variant %d", (int)v);
    /* Torch's floor division by zero raises; the fused Triton [S5] clamps to
     * 1, which is a different contract: reject here. */
    if (a->compress_ratio < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be >= 1",
                         a->compress_ratio);
    if (a->window_size < 0 || a->topk < 0 || a->M < 0 || a->N < 0)
        return dsv4_fail(st, DSV4_EINPUT,
                         "window_size, topk, M and N must be >= 0 (got %" PRId64 ", %" PRId64
                         ", %" PRId64 ", %" PRId64 ")",
                         a->window_size, a->topk, a->M, a->N);
    if (a->topk_width < 0 || a->num_tokens < 0 || a->num_reqs < 0)
        return dsv4_fail(st, DSV4_EINPUT, "negative tensor size");
    if (v == DSV4_COMBINE_NO_VALIDATE && a->topk > a->topk_width)
        return dsv4_fail(st, DSV4_EINPUT,
                         "validate_topk=none needs topk (%" PRId64 ") <= topk_indices width (%" PRId64
                         "): the kernel reads past the row otherwise",
                         a->topk, a->topk_width);
    if (v == DSV4_COMBINE_WIDTH_COL0 && a->topk > 0 && a->topk_width == 0)
        return dsv4_fail(st, DSV4_EINPUT, "width_guard=col0 needs a non-empty topk_indices row");
    /* repeat_interleave needs non-negative query lengths summing to T. */
    const int32_t *qsl = a->query_start_loc;
    for (int64_t r = 0; r < a->num_reqs; r++)
        if (qsl[r + 1] < qsl[r])
            return dsv4_fail(st, DSV4_EINPUT,
                             "query_start_loc[%" PRId64 "] = %d < query_start_loc[%" PRId64
                             "] = %d: query lengths must be >= 0",
                             r + 1, qsl[r + 1], r, qsl[r]);
    int64_t covered = a->num_reqs > 0 ? (int64_t)qsl[a->num_reqs] - qsl[0] : 0;
    if (covered != a->num_tokens)
        return dsv4_fail(st, DSV4_EINPUT,
                         "query_start_loc covers %" PRId64 " tokens but topk_indices has %" PRId64
                         " rows",
                         covered, a->num_tokens);
    return DSV4_OK;
}

/* Row t of request r.  docs/semantics/indices.md A6.2: qs/qe relative to qsl[0]; positions
 * p0 + (t - qs) with p0 = S - L; g0 = S - G. */
static void combine_token(const dsv4_combine_args *a, dsv4_combine_variant v, int64_t r, int64_t t,
                          int64_t P, int32_t *combined, int32_t *lens)
{
    const int32_t *qsl = a->query_start_loc;
    const int64_t qs = (int64_t)qsl[r] - qsl[0], qe = (int64_t)qsl[r + 1] - qsl[0];
    const int64_t L = qe - qs, S = a->seq_lens[r], g0 = S - a->gather_lens[r];
    const int64_t rM = r * a->M;
    /* logical_topk_width = min(topk, Wk) in the Torch function [S4]; the
     * older Triton versions use topk itself [S1, S2]. */
    const int64_t width = v == DSV4_COMBINE_TORCH ? (a->topk < a->topk_width ? a->topk : a->topk_width)
                                                  : a->topk;
    const int64_t pos = S - L + (t - qs);
    int32_t *row = combined + t * P;
    const int32_t *src = a->topk_indices + t * a->topk_width;
    int64_t tk = floor_div(pos + 1, a->compress_ratio);
    if (tk > width)
        tk = width;
    if (tk < 0)
        tk = 0; /* .clamp_min(0) [S4] */
    int64_t sw = pos + 1 < a->window_size ? pos + 1 : a->window_size;
    if (sw < 0)
        sw = 0;
    for (int64_t j = 0; j < P; j++)
        row[j] = -1; /* torch.full(..., -1) [S4] */
    for (int64_t j = 0; j < tk; j++) {
        /* width_guard=col0: columns past the stored row read column 0 [S2]. */
        int64_t val = j < a->topk_width ? src[j] : src[0];
        if (v == DSV4_COMBINE_NO_VALIDATE)
            row[j] = wrap_i32(rM + val); /* no check: -1 becomes r*M - 1 [S1] */
        else
            row[j] = (val >= 0 && val < a->N) ? wrap_i32(rM + val) : -1;
    }
    /* Window part, relative to the gathered SWA buffer at offset N:
     * r*M + N + (pos - sw + 1 + i) - g0 (docs/semantics/indices.md A6.2). */
    for (int64_t i = 0; i < sw && tk + i < P; i++)
        row[tk + i] = wrap_i32(rM + a->N + (pos - sw + 1 + i) - g0);
    lens[t] = wrap_i32(tk + sw);
}

typedef struct combine_job {
    const dsv4_combine_args *a;
    dsv4_combine_variant v;
    int64_t P;
    int32_t *combined, *lens;
} combine_job;

/* Rows [t0, t1) (relative to qsl[0]); the request of a row by search over
 * query_start_loc (non-decreasing, checked). */
static int combine_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const combine_job *j = ctx;
    const int32_t *qsl = j->a->query_start_loc;
    int64_t lo = 0, hi = j->a->num_reqs; /* the first r with qsl[r + 1] - qsl[0] > t0 */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)qsl[mid + 1] - qsl[0] > t0)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (int64_t r = lo, t = t0; t < t1; t++) {
        while ((int64_t)qsl[r + 1] - qsl[0] <= t)
            r++;
        combine_token(j->a, j->v, r, t, j->P, j->combined, j->lens);
    }
    return DSV4_OK;
}

int dsv4_ref_combine_topk_swa_indices(const dsv4_combine_args *a, dsv4_combine_variant v,
                                      int32_t *combined, int32_t *combined_lens,
                                      dsv4_status *st)
{
    int rc = dsv4_combine_check(a, v, st);
    if (rc)
        return rc;
    combine_job j = {a, v, dsv4_combine_width(a->topk, a->window_size), combined, combined_lens};
    return dsv4_parallel_for(a->num_tokens, TOKEN_GRAIN, 0, combine_range, &j, st);
}

/* compute_global_topk_indices_and_lens and its ragged form: global_topk.c */

/* ------------------------------------------------------------------ */
/* build_prefill_topk_ragged_indices (docs/semantics/indices.md A5.9, inferred from [S29])   */

/* Position of batch token t in request r (docs/semantics/indices.md A5.1). */
static int64_t token_pos(const int32_t *qsl, const int32_t *seq, int64_t r, int64_t t)
{
    return ((int64_t)seq[r] - ((int64_t)qsl[r + 1] - qsl[r])) + (t - qsl[r]);
}

/* Token t must lie in request r's query range for its position to mean
 * anything (docs/semantics/indices.md A5.1). */
static int check_token_req(const int32_t *qsl, int64_t R, const int32_t *t2r, int64_t t,
                           dsv4_status *st)
{
    const int64_t r = t2r[t];
    if (r < 0 || r >= R)
        return dsv4_fail(st, DSV4_EINPUT, "token_to_req_indices[%" PRId64 "] = %" PRId64
                         ": not a request (%" PRId64 " requests)", t, r, R);
    if (t < qsl[r] || t >= qsl[r + 1])
        return dsv4_fail(st, DSV4_EINPUT, "token %" PRId64 " is outside request %" PRId64
                         "'s query_start_loc range [%d, %d)", t, r, qsl[r], qsl[r + 1]);
    return DSV4_OK;
}

static int check_qsl(const int32_t *qsl, int64_t R, int64_t T, dsv4_status *st)
{
    for (int64_t r = 0; r < R; r++)
        if (qsl[r + 1] < qsl[r])
            return dsv4_fail(st, DSV4_EINPUT, "query_start_loc[%" PRId64 "] = %d < query_start_loc[%" PRId64
                             "] = %d", r + 1, qsl[r + 1], r, qsl[r]);
    if (qsl[0] < 0 || qsl[R] > T)
        return dsv4_fail(st, DSV4_EINPUT, "query_start_loc spans [%d, %d): outside the %" PRId64 " tokens",
                         qsl[0], qsl[R], T);
    return DSV4_OK;
}

/* Entries read: j < cap with 0 <= v < N of valid tokens. */
static int64_t pftopk_cap(const dsv4_pftopk_args *a, int64_t i)
{
    const int64_t t = i + a->token_offset, r = a->token_to_req[t];
    int64_t cap = floor_div(token_pos(a->query_start_loc, a->seq_lens, r, t) + 1, a->compress_ratio);
    cap = cap > a->topk_width ? a->topk_width : cap;
    return cap < 0 ? 0 : cap;
}

#if DSV4_HAVE_AVX2_PATHS
/* The prefill top-k rows sixteen entries at a time (AVX-512F), for
 * power-of-two pages: the same integer operations per entry as the scalar
 * loops below, which finish the row from the entry returned
 * (tests/test_simd.c holds both to the same bytes and errors).
 *
 * Whether any entry k < cap with 0 <= v < nc has its page v >> sh at or
 * past cols (cols clamped to 2^31: an entry's page is below it). */
IDX512 static int64_t pftopk_any_bad_512(const int32_t *row, int64_t cap, int64_t nc, uint32_t sh, int64_t cols,
                                         unsigned *bad)
{
    const __m512i zero = _mm512_setzero_si512(), vnc = _mm512_set1_epi32((int32_t)(nc > INT32_MAX ? INT32_MAX : nc));
    const __m512i vcols = _mm512_set1_epi32((int32_t)(uint32_t)(cols > 0x80000000LL ? 0x80000000LL : cols));
    const __m128i count = _mm_cvtsi32_si128((int)sh);
    __mmask16 m = 0;
    int64_t k = 0;
    for (; k + 16 <= cap; k += 16) {
        const __m512i v = _mm512_loadu_si512((const void *)(row + k));
        const __mmask16 ok = _mm512_cmpge_epi32_mask(v, zero) & _mm512_cmplt_epi32_mask(v, vnc);
        m |= _mm512_mask_cmpge_epu32_mask(ok, _mm512_srl_epi32(v, count), vcols);
    }
    *bad = m != 0;
    return k;
}

/* The keep variant's slots of one row: v's page from the request's block
 * table (entry 0 for an entry out of range, as the scalar loop reads),
 * slot = page * b + (v & mask) wrapped to int32 (the low 32 bits of the
 * 64-bit sum: a 32-bit multiply-add), -1 unless 0 <= v < nc and (nrows >=
 * 0) 0 <= slot < nrows. */
IDX512 static int64_t pftopk_keep_row_512(const int32_t *row, int64_t cap, const int32_t *btrow, int64_t nc,
                                          uint32_t sh, uint32_t b, int64_t nrows, int32_t *dst)
{
    const __m512i zero = _mm512_setzero_si512(), vnc = _mm512_set1_epi32((int32_t)(nc > INT32_MAX ? INT32_MAX : nc));
    const __m512i vb = _mm512_set1_epi32((int32_t)b), vmask = _mm512_set1_epi32((int32_t)(b - 1));
    const __m512i vnrows = _mm512_set1_epi32((int32_t)(nrows > INT32_MAX ? INT32_MAX : nrows < 0 ? 0 : nrows));
    const __m512i none = _mm512_set1_epi32(-1);
    const __m128i count = _mm_cvtsi32_si128((int)sh);
    int64_t k = 0;
    for (; k + 16 <= cap; k += 16) {
        const __m512i v = _mm512_loadu_si512((const void *)(row + k));
        __mmask16 keep = _mm512_cmpge_epi32_mask(v, zero) & _mm512_cmplt_epi32_mask(v, vnc);
        const __m512i page = _mm512_i32gather_epi32(_mm512_maskz_srl_epi32(keep, v, count), (const void *)btrow, 4);
        const __m512i sl = _mm512_add_epi32(_mm512_mullo_epi32(page, vb), _mm512_and_si512(v, vmask));
        if (nrows >= 0) /* an int32 slot is below any nrows past INT32_MAX */
            keep &= _mm512_cmpge_epi32_mask(sl, zero) &
                    (nrows > INT32_MAX ? (__mmask16)0xFFFF : _mm512_cmplt_epi32_mask(sl, vnrows));
        _mm512_storeu_si512((void *)(dst + k), _mm512_mask_blend_epi32(keep, none, sl));
    }
    return k;
}
#endif

typedef struct pftopk_job {
    const dsv4_pftopk_args *a;
    dsv4_pftopk_variant v;
    page_div d;
    int32_t *flat, *indptr;
    int use512; /* the AVX-512 rows (power-of-two pages) */
} pftopk_job;

static int pftopk_use512(void)
{
#if DSV4_HAVE_AVX2_PATHS
    return dsv4_simd_level() >= DSV4_SIMD_AVX512;
#else
    return 0;
#endif
}

/* The reads of top-k row i (dsv4_pftopk_check). */
static inline int pftopk_check_row(const pftopk_job *j, int64_t i, dsv4_status *st)
{
    const dsv4_pftopk_args *a = j->a;
    const int64_t t = i + a->token_offset;
    if (a->is_valid_token[t] > 1)
        return dsv4_fail(st, DSV4_EINPUT, "is_valid_token[%" PRId64 "] must be 0 or 1", t);
    if (!a->is_valid_token[t])
        return DSV4_OK;
    int rc = check_token_req(a->query_start_loc, a->num_reqs, a->token_to_req, t, st);
    if (rc)
        return rc;
    const int64_t r = a->token_to_req[t], cap = pftopk_cap(a, i);
    const int32_t *row = a->topk_indices + i * a->topk_width;
    if (r < a->bt_rows && j->d.shift >= 0) { /* the common case branch-free: any bad entry? */
        const int64_t nc = a->num_compressed, cols = a->bt_cols;
        const uint32_t sh = (uint32_t)j->d.shift;
        unsigned bad = 0;
        int64_t k = 0;
#if DSV4_HAVE_AVX2_PATHS
        if (j->use512)
            k = pftopk_any_bad_512(row, cap, nc, sh, cols, &bad);
#endif
        for (; k < cap; k++)
            bad |= (row[k] >= 0) & (row[k] < nc) & ((int64_t)((uint32_t)row[k] >> sh) >= cols);
        if (!bad)
            return DSV4_OK;
    }
    for (int64_t k = 0; k < cap; k++)
        if (row[k] >= 0 && row[k] < a->num_compressed &&
            (r >= a->bt_rows || (int64_t)page_of((uint32_t)row[k], j->d) >= a->bt_cols))
            return dsv4_fail(st, DSV4_EINPUT, "topk_indices[%" PRId64 ", %" PRId64 "] = %d (token %" PRId64
                             ", request %" PRId64 "): block_table [%" PRId64 ", %" PRId64 "] has no page %" PRId64,
                             i, k, row[k], t, r, a->bt_rows, a->bt_cols, (int64_t)row[k] / a->block_size);
    return DSV4_OK;
}

CHECK_RANGE_OF(pftopk_check_range, pftopk_check_row)

/* The arguments' shapes and query_start_loc (the rows are checked with
 * the work). */
static int pftopk_check_shape(const dsv4_pftopk_args *a, dsv4_status *st)
{
    if (a->block_size < 1 || a->block_size > INT32_MAX || a->compress_ratio < 1 || a->num_compressed < 0 ||
        a->token_offset < 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size and compress_ratio must be >= 1, num_compressed "
                         "and token_offset >= 0");
    if (a->num_prefill_tokens < 0 || a->topk_width < 0 || a->num_reqs < 0 ||
        a->token_offset + a->num_prefill_tokens > a->num_tokens)
        return dsv4_fail(st, DSV4_EINPUT, "token_offset %" PRId64 " + %" PRId64
                         " top-k rows exceed the %" PRId64 " tokens", a->token_offset,
                         a->num_prefill_tokens, a->num_tokens);
    return check_qsl(a->query_start_loc, a->num_reqs, a->num_tokens, st);
}

int dsv4_pftopk_check(const dsv4_pftopk_args *a, dsv4_status *st)
{
    int rc = pftopk_check_shape(a, st);
    if (rc)
        return rc;
    pftopk_job j = {a, DSV4_PFTOPK_KEEP, page_div_of(a->block_size), NULL, NULL, pftopk_use512()};
    return dsv4_parallel_for(a->num_prefill_tokens, TOKEN_GRAIN, 0, pftopk_check_range, &j, st);
}

/* Pass 1 (flat == NULL): each row checked, then the entries it writes
 * (into indptr[i + 1]); pass 2: the entries, from indptr[i] on.  An entry
 * is its slot when 0 <= v < num_compressed (and, with num_rows >= 0, the
 * slot is in [0, num_rows), the 5.8 bound, inferred), else -1; the drop
 * variant writes only slots >= 0. */
static int pftopk_range(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)worker;
    const pftopk_job *j = ctx;
    const dsv4_pftopk_args *a = j->a;
    const int keep = j->v == DSV4_PFTOPK_KEEP;
    const int64_t nc = a->num_compressed, nrows = a->num_rows, b = j->d.b;
    int32_t row_buf[256];
    for (int64_t i = i0; i < i1; i++) {
        if (!j->flat) {
            int rc = pftopk_check_row(j, i, st);
            if (rc)
                return rc;
        }
        const int64_t t = i + a->token_offset;
        int64_t n = 0;
        if (a->is_valid_token[t] && keep && !j->flat) {
            n = pftopk_cap(a, i); /* keep: one entry per column read */
        } else if (a->is_valid_token[t]) { /* else lens 0, as 5.6/5.7 treat invalid tokens (inferred) */
            const int64_t r = a->token_to_req[t], cap = pftopk_cap(a, i);
            const int32_t *restrict row = a->topk_indices + i * a->topk_width;
            const int32_t *restrict btrow = a->block_table + r * a->bt_cols;
            int32_t *restrict dst = j->flat ? j->flat + (uint32_t)j->indptr[i] : row_buf;
            if (j->d.shift >= 0 && a->bt_cols > 0 && j->flat && keep) {
                /* keep, power-of-two pages: branch-free, one entry per column */
                const uint32_t sh = (uint32_t)j->d.shift, mask = j->d.b - 1;
                int64_t k = 0;
#if DSV4_HAVE_AVX2_PATHS
                if (j->use512)
                    k = pftopk_keep_row_512(row, cap, btrow, nc, sh, j->d.b, nrows, dst);
#endif
                for (; k < cap; k++) { /* k >= cap never read [S29] */
                    const int32_t v = row[k];
                    const uint32_t uv = (uint32_t)v;
                    const int ok = (v >= 0) & (v < nc);
                    const int64_t sl = (int64_t)wrap_i32((int64_t)btrow[ok ? uv >> sh : 0] * b + (uv & mask));
                    /* with num_rows >= 0 only slots in [0, num_rows) stay (the 5.8 bound, inferred) */
                    dst[k] = ok && (nrows < 0 || (sl >= 0 && sl < nrows)) ? (int32_t)sl : -1;
                }
                n = cap;
            } else {
                const int fast = j->d.shift >= 0 && a->bt_cols > 0;
                for (int64_t k = 0; k < cap; k++) { /* k >= cap never read [S29] */
                    const int32_t v = row[k];
                    const uint32_t uv = (uint32_t)v;
                    const int ok = v >= 0 && v < nc;
                    int64_t slot = -1;
                    if (fast)
                        slot = ok ? (int64_t)wrap_i32((int64_t)btrow[ok ? uv >> j->d.shift : 0] * b +
                                                      (uv & (j->d.b - 1)))
                                  : -1;
                    else if (ok)
                        slot = global_slot(a->block_table, a->bt_cols, r, v, j->d);
                    slot = nrows >= 0 && (slot < 0 || slot >= nrows) ? -1 : slot;
                    dst[j->flat ? n : n & 255] = (int32_t)slot;
                    n += slot >= 0 || keep;
                }
            }
        }
        if (!j->flat)
            j->indptr[i + 1] = (int32_t)n;
    }
    return DSV4_OK;
}

int dsv4_ref_build_prefill_topk_ragged_indices(const dsv4_pftopk_args *a, dsv4_pftopk_variant v,
                                               int32_t *flat, int32_t *indptr, dsv4_status *st)
{
    if ((unsigned)v >= DSV4_PFTOPK_VARIANT_COUNT)
        return dsv4_fail(st, DSV4_EINPUT, "unknown build_prefill_topk_ragged_indices variant %d", (int)v);
    int rc = pftopk_check_shape(a, st);
    if (rc)
        return rc;
    pftopk_job j = {a, v, page_div_of(a->block_size), NULL, indptr, pftopk_use512()};
    const int64_t n = a->num_prefill_tokens;
    if ((rc = dsv4_parallel_for(n, TOKEN_GRAIN, 0, pftopk_range, &j, st)))
        return rc;
    int64_t off = 0; /* the counts to offsets (int32 indptr) */
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = indptr[i + 1];
        indptr[i] = wrap_i32(off);
        off += c;
    }
    indptr[n] = wrap_i32(off);
    j.flat = flat;
    return dsv4_parallel_for(n, TOKEN_GRAIN, 0, pftopk_range, &j, st);
}

/* ------------------------------------------------------------------ */
/* decode_swa_indices_and_lens (docs/semantics/indices.md A5.2 [S12]), ragged form (A5.8)    */

typedef struct swa_job {
    const dsv4_swa_args *a;
    page_div d;
    int32_t *indices, *lens;
} swa_job;

/* fn over the out rows of a (the check's pass and the op's share the job). */
static int swa_for(const dsv4_swa_args *a, dsv4_par_fn fn, int32_t *indices, int32_t *lens, dsv4_status *st)
{
    swa_job j = {a, page_div_of(a->block_size), indices, lens};
    return dsv4_parallel_for(a->out_rows, TOKEN_GRAIN, 0, fn, &j, st);
}

static int swa_check_range(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)worker;
    const swa_job *j = ctx;
    const dsv4_swa_args *a = j->a;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = i + a->token_offset;
        if (a->is_valid_token[t] > 1)
            return dsv4_fail(st, DSV4_EINPUT, "is_valid_token[%" PRId64 "] must be 0 or 1", t);
        if (!a->is_valid_token[t])
            continue;
        int rc = check_token_req(a->query_start_loc, a->num_reqs, a->token_to_req, t, st);
        if (rc)
            return rc;
        const int64_t r = a->token_to_req[t], pos = token_pos(a->query_start_loc, a->seq_lens, r, t);
        if (pos < 0)
            return dsv4_fail(st, DSV4_EINPUT, "token %" PRId64 ": position %" PRId64 " < 0 (seq_lens[%" PRId64
                             "] shorter than the query)", t, pos, r);
        if (pos >= 0 && (r >= a->bt_rows || pos / a->block_size >= a->bt_cols))
            return dsv4_fail(st, DSV4_EINPUT, "token %" PRId64 " (request %" PRId64 ", position %" PRId64
                             "): block_table [%" PRId64 ", %" PRId64 "] has no page %" PRId64,
                             t, r, pos, a->bt_rows, a->bt_cols, pos / a->block_size);
    }
    return DSV4_OK;
}

int dsv4_swa_check(const dsv4_swa_args *a, dsv4_status *st)
{
    if (a->block_size < 1 || a->block_size > INT32_MAX || a->window_size < 0 || a->token_offset < 0 || a->out_rows < 0 ||
        a->num_reqs < 0 || a->token_offset + a->out_rows > a->num_tokens)
        return dsv4_fail(st, DSV4_EINPUT, "block_size must be >= 1, window_size, token_offset >= 0, and "
                         "token_offset + rows (%" PRId64 " + %" PRId64 ") <= tokens (%" PRId64 ")",
                         a->token_offset, a->out_rows, a->num_tokens);
    int rc = check_qsl(a->query_start_loc, a->num_reqs, a->num_tokens, st);
    return rc ? rc : swa_for(a, swa_check_range, NULL, NULL, st);
}

static int swa_range(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const swa_job *j = ctx;
    const dsv4_swa_args *a = j->a;
    const int64_t W = a->window_size;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = i + a->token_offset;
        if (!a->is_valid_token[t]) {
            j->lens[i] = 0; /* the indices row is NOT rewritten [S12] */
            continue;
        }
        const int64_t r = a->token_to_req[t], pos = token_pos(a->query_start_loc, a->seq_lens, r, t);
        const int64_t start = pos - W + 1 > 0 ? pos - W + 1 : 0, len = pos + 1 - start;
        int32_t *row = j->indices + i * W;
        for (int64_t k = 0; k < W; k++) /* SWA page size B (64) [S12] */
            row[k] = k < len ? global_slot(a->block_table, a->bt_cols, r, start + k, j->d) : -1;
        j->lens[i] = wrap_i32(len);
    }
    return DSV4_OK;
}

int dsv4_ref_decode_swa_indices_and_lens(const dsv4_swa_args *a, int32_t *indices, int32_t *lens,
                                         dsv4_status *st)
{
    int rc = dsv4_swa_check(a, st);
    return rc ? rc : swa_for(a, swa_range, indices, lens, st);
}

void dsv4_ref_build_ragged_indices_from_dense(const int32_t *indices, int64_t n, int64_t width,
                                              const int32_t *lengths, int64_t num_rows,
                                              int32_t *flat, int32_t *indptr)
{
    int64_t off = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t len = lengths[r] < 0 ? 0 : (lengths[r] > width ? width : lengths[r]); /* clamp [S9] */
        indptr[r] = wrap_i32(off);
        for (int64_t j = 0; j < len; j++) {
            int32_t x = indices[r * width + j];
            flat[off + j] = (num_rows >= 0 && (x < 0 || x >= num_rows)) ? -1 : x;
        }
        off += len;
    }
    indptr[n] = wrap_i32(off);
}

/* ------------------------------------------------------------------ */
/* _copy_ragged_to_graph_buffers (vllm deepseek_v41/amd/rocm.py [SEED1]) */

/* Torch's dst.copy_(src) for 1-D tensors: equal sizes, or src broadcast
 * from one element; anything else raises. */
static int copy_broadcast(int32_t *dst, int64_t nd, const int32_t *src, int64_t ns, const char *what,
                          dsv4_status *st)
{
    if (ns != nd && ns != 1)
        return dsv4_fail(st, DSV4_EINPUT, "%s: copy_ of %" PRId64 " elements into a view of %" PRId64
                         " (torch raises: sizes do not broadcast)", what, ns, nd);
    for (int64_t i = 0; i < nd; i++)
        dst[i] = src[ns == 1 ? 0 : i];
    return DSV4_OK;
}

int dsv4_ref_copy_ragged_to_graph_buffers(const dsv4_graphcopy_args *a, int32_t *indices_buffer,
                                          int32_t *indptr_buffer, int64_t view_lens[2],
                                          dsv4_status *st)
{
    if (a->num_rows < 0 || a->max_entries_per_row < 0 || a->num_entries < 0 || a->indptr_len < 0 ||
        a->indices_capacity < 0 || a->indptr_capacity < 0)
        return dsv4_fail(st, DSV4_EINPUT, "num_rows, max_entries_per_row and sizes must be >= 0");
    /* indptr_out = buffer[:num_rows + 1]: Python slicing clamps to the buffer. */
    int64_t n_ip = a->num_rows + 1 < a->indptr_capacity ? a->num_rows + 1 : a->indptr_capacity;
    int rc = copy_broadcast(indptr_buffer, n_ip, a->ragged_indptr, a->indptr_len, "ragged_indptr", st);
    if (rc)
        return rc;
    /* max_entries = max(num_rows * max_entries_per_row, 1); ragged_out = buffer[:max_entries]. */
    int64_t max_entries = a->num_rows * a->max_entries_per_row;
    max_entries = max_entries < 1 ? 1 : max_entries;
    int64_t n_out = max_entries < a->indices_capacity ? max_entries : a->indices_capacity;
    if (a->num_entries > 0) {
        /* ragged_out[:source_entries].copy_(ragged_indices): the rest stays stale. */
        int64_t nd = a->num_entries < n_out ? a->num_entries : n_out;
        if ((rc = copy_broadcast(indices_buffer, nd, a->ragged_indices, a->num_entries, "ragged_indices", st)))
            return rc;
    }
    /* gfx950: trimmed to max(source_entries, 1), same base pointer. */
    if (a->gfx950 && n_out > (a->num_entries > 1 ? a->num_entries : 1))
        n_out = a->num_entries > 1 ? a->num_entries : 1;
    view_lens[0] = n_out;
    view_lens[1] = n_ip;
    return DSV4_OK;
}

/* ------------------------------------------------------------------ */
/* get_prefill_chunk_plan (docs/semantics/indices.md A7 [S12])         */

int dsv4_chunkplan_check(const dsv4_chunkplan_args *a, dsv4_status *st)
{
    if (a->num_prefills < 0 || a->chunk_size < 0 || a->window_size < 1 || a->max_model_len < 0 ||
        a->max_num_batched_tokens < 0)
        return dsv4_fail(st, DSV4_EINPUT, "window_size must be >= 1 (torch.clamp(max = W - 1)); "
                         "chunk_size, max_model_len, max_num_batched_tokens >= 0");
    for (int64_t i = 0; i < a->num_prefills; i++)
        if (a->seq_lens[i] < 0 || a->query_lens[i] < 0)
            return dsv4_fail(st, DSV4_EINPUT, "prefill %" PRId64 ": seq_lens %d / query_lens %d must be >= 0",
                             i, a->seq_lens[i], a->query_lens[i]);
    return DSV4_OK;
}

int dsv4_ref_get_prefill_chunk_plan(const dsv4_chunkplan_args *a, int64_t *plan, int64_t *num_chunks,
                                    dsv4_status *st)
{
    int rc = dsv4_chunkplan_check(a, st);
    if (rc)
        return rc;
    const int comp = a->has_compressed && a->compress_ratio > 1; /* c <= 1: zeros [S12] */
    const int64_t nc = comp ? (a->max_model_len + a->compress_ratio - 1) / a->compress_ratio : 0;
    const int64_t area = a->chunk_size * (nc + a->window_size + a->max_num_batched_tokens);
    int64_t n = 0;
    for (int64_t start = 0; start < a->num_prefills; n++) {
        int64_t mc = 0, mg = 0, end = start;
        /* The first request always opens a chunk; extend while the chunk's
         * area (count * (max_comp + max_gather)) stays within budget. */
        for (; end < a->num_prefills; end++) {
            int64_t S = a->seq_lens[end], q = a->query_lens[end], pre = S - q;
            int64_t g = q + (pre < 0 ? 0 : (pre > a->window_size - 1 ? a->window_size - 1 : pre));
            int64_t c = comp ? S / a->compress_ratio : 0;
            int64_t cmc = c > mc ? c : mc, cmg = g > mg ? g : mg;
            if (end > start && (end - start + 1) * (cmc + cmg) > area)
                break;
            mc = cmc;
            mg = cmg;
        }
        int64_t *row = plan + n * 4;
        row[0] = start;
        row[1] = end;
        row[2] = mc;
        row[3] = mc + mg;
        start = end;
    }
    *num_chunks = n;
    return DSV4_OK;
}
