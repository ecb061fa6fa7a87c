/* global_topk.c - compute_global_topk_indices_and_lens and its ragged form;
 * see indices.h.  Semantics: docs/semantics/indices.md A5.6, A5.7. */
#include "indices.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "indices_internal.h"
#include "parallel.h"
#include "simd.h"

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>
#endif

#if DSV4_HAVE_AVX2_PATHS
/* map_row's power-of-two case, eight entries at a time: the page of a
 * negative entry is masked to 0 (the row's first column, as there), the
 * int32 product's low 32 bits plus the offset are the wrapped sum
 * wrap_i32 gives, and the negative entries become -1. */
__attribute__((target("avx2"))) static int64_t map_row_pow2_avx2(const int32_t *restrict src, int64_t n,
                                                                 const int32_t *restrict btrow, page_div d,
                                                                 int32_t *restrict dst)
{
    const __m128i sh = _mm_cvtsi32_si128(d.shift);
    const __m256i minus1 = _mm256_set1_epi32(-1), mask = _mm256_set1_epi32((int32_t)(d.b - 1));
    const __m256i b = _mm256_set1_epi32((int32_t)d.b);
    int64_t count = 0, k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + k));
        const __m256i valid = _mm256_cmpgt_epi32(v, minus1);
        const __m256i page = _mm256_and_si256(_mm256_srl_epi32(v, sh), valid);
        const __m256i bt = _mm256_i32gather_epi32(btrow, page, 4);
        const __m256i slot = _mm256_add_epi32(_mm256_mullo_epi32(bt, b), _mm256_and_si256(v, mask));
        _mm256_storeu_si256((__m256i *)(void *)(dst + k), _mm256_or_si256(_mm256_and_si256(slot, valid),
                                                                          _mm256_andnot_si256(valid, minus1)));
        count += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(valid)));
    }
    const uint32_t shift = (uint32_t)d.shift, low = d.b - 1;
    for (; k < n; k++) {
        const int32_t v = src[k];
        const uint32_t uv = (uint32_t)v;
        const int32_t slot = wrap_i32((int64_t)btrow[v >= 0 ? uv >> shift : 0] * (int64_t)d.b + (uv & low));
        dst[k] = v >= 0 ? slot : -1;
        count += v >= 0;
    }
    return count;
}

/* row_scan, eight entries at a time. */
__attribute__((target("avx2"))) static int64_t row_scan_avx2(const int32_t *row, int64_t n, int32_t *max)
{
    const __m256i minus1 = _mm256_set1_epi32(-1);
    __m256i m = _mm256_set1_epi32(INT32_MIN), c = _mm256_setzero_si256();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(row + k));
        m = _mm256_max_epi32(m, v);
        c = _mm256_sub_epi32(c, _mm256_cmpgt_epi32(v, minus1)); /* at most n / 8 per lane */
    }
    int32_t lanes_m[8], lanes_c[8];
    _mm256_storeu_si256((__m256i *)(void *)lanes_m, m);
    _mm256_storeu_si256((__m256i *)(void *)lanes_c, c);
    int32_t mx = INT32_MIN;
    int64_t count = 0;
    for (int i = 0; i < 8; i++)
        mx = lanes_m[i] > mx ? lanes_m[i] : mx, count += (uint32_t)lanes_c[i];
    for (; k < n; k++)
        mx = row[k] > mx ? row[k] : mx, count += row[k] >= 0;
    *max = mx;
    return count;
}
#endif

/* #{row[k] >= 0} over k < n, and the largest entry (INT32_MIN if n = 0). */
static int64_t row_scan(const int32_t *row, int64_t n, int32_t *max)
{
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2())
        return row_scan_avx2(row, n, max);
#endif
    int32_t mx = INT32_MIN;
    int64_t count = 0;
    for (int64_t k = 0; k < n; k++)
        mx = row[k] > mx ? row[k] : mx, count += row[k] >= 0;
    *max = mx;
    return count;
}

/* dst[k] = src[k] >= 0 ? global_slot(bt row r, src[k]) : -1 for k < n;
 * returns #{src[k] >= 0}.  The row and divider are held in locals (the
 * stores cannot alias them); the power-of-two case is branch-free, reading
 * btrow[0] for the negative entries, so it needs row0_ok (the row exists
 * and has a column). */
static inline int64_t map_row(const int32_t *restrict src, int64_t n, const int32_t *restrict btrow, int row0_ok,
                              page_div d, int32_t *restrict dst)
{
    int64_t count = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (d.shift >= 0 && row0_ok && dsv4_simd_avx2())
        return map_row_pow2_avx2(src, n, btrow, d, dst);
#endif
    if (d.shift >= 0 && row0_ok) {
        const uint32_t sh = (uint32_t)d.shift, mask = d.b - 1;
        const int64_t b = d.b;
        for (int64_t k = 0; k < n; k++) {
            const int32_t v = src[k];
            const uint32_t uv = (uint32_t)v;
            const int32_t slot = wrap_i32((int64_t)btrow[v >= 0 ? uv >> sh : 0] * b + (uv & mask));
            dst[k] = v >= 0 ? slot : -1;
            count += v >= 0;
        }
        return count;
    }
    for (int64_t k = 0; k < n; k++) {
        const int32_t v = src[k];
        if (v >= 0) {
            const uint32_t page = (uint32_t)v / d.b;
            dst[k] = wrap_i32((int64_t)btrow[page] * (int64_t)d.b + ((uint32_t)v - page * d.b));
        } else {
            dst[k] = -1;
        }
        count += v >= 0;
    }
    return count;
}

typedef struct gtopk_job {
    const dsv4_gtopk_args *a;
    dsv4_gtopk_variant v;
    int ragged;
    page_div d;
    int32_t *out, *indptr, *lens;
} gtopk_job;

/* The reads of token t (dsv4_gtopk_check); *count (where not NULL) gets
 * #{v >= 0} over the columns read, for the ragged lens.  One scan finds
 * the row's largest entry: the row is good if it is negative, or if the
 * request is a row and its page (page_of grows with v) is a column;
 * otherwise the loop below names the first bad column. */
static inline int gtopk_check_token_counting(const gtopk_job *j, int64_t t, int64_t *count, dsv4_status *st)
{
    const dsv4_gtopk_args *a = j->a;
    if (a->is_valid_token[t] > 1)
        return dsv4_fail(st, DSV4_EINPUT, "is_valid_token[%" PRId64 "] = %u: must be 0 or 1", t,
                         a->is_valid_token[t]);
    if (j->v == DSV4_GTOPK_CHECKED)
        return DSV4_OK; /* [S26]: every read is bounds-checked */
    const int32_t *row = a->topk_indices + t * a->topk_width;
    const int64_t r = a->token_to_req[t];
    /* The ragged op reads columns j < lens[t] only, i.e. none of an
     * invalid token's (docs/semantics/indices.md A5.7 step 3). */
    int64_t n = a->topk_width;
    if (j->ragged && !a->is_valid_token[t])
        n = 0;
    int32_t max;
    const int64_t valid = row_scan(row, n, &max);
    if (count)
        *count = valid;
    if (max < 0 || (r >= 0 && r < a->bt_rows && (int64_t)page_of((uint32_t)max, j->d) < a->bt_cols))
        return DSV4_OK;
    for (int64_t k = 0; k < n; k++) {
        if (row[k] < 0)
            continue;
        if (r < 0 || r >= a->bt_rows)
            return dsv4_fail(st, DSV4_EINPUT,
                             "token_to_req_indices[%" PRId64 "] = %" PRId64
                             " is not a block_table row (%" PRId64 " rows): the kernel would read out of bounds",
                             t, r, a->bt_rows);
        if ((int64_t)page_of((uint32_t)row[k], j->d) >= a->bt_cols)
            return dsv4_fail(st, DSV4_EINPUT,
                             "topk_indices[%" PRId64 ", %" PRId64 "] = %d: page %" PRId64
                             " >= block_table width %" PRId64 " (out-of-bounds read; use bounds=checked)",
                             t, k, row[k], (int64_t)row[k] / a->block_size, a->bt_cols);
    }
    return DSV4_OK;
}

static inline int gtopk_check_token(const gtopk_job *j, int64_t t, dsv4_status *st)
{
    return gtopk_check_token_counting(j, t, NULL, st);
}

CHECK_RANGE_OF(gtopk_check_range, gtopk_check_token)

/* The arguments' shapes (the token checks run with the work). */
static int gtopk_check_shape(const dsv4_gtopk_args *a, dsv4_gtopk_variant v, dsv4_status *st)
{
    if ((unsigned)v >= DSV4_GTOPK_VARIANT_COUNT)
        return dsv4_fail(st, DSV4_EINPUT, "unknown compute_global_topk variant %d", (int)v);
    if (a->block_size < 1 || a->block_size > INT32_MAX)
        return dsv4_fail(st, DSV4_EINPUT, "block_size = %" PRId64 ": must be in [1, 2^31)", a->block_size);
    if (a->num_tokens < 0 || a->topk_width < 0 || a->bt_rows < 0 || a->bt_cols < 0)
        return dsv4_fail(st, DSV4_EINPUT, "negative tensor size");
    return DSV4_OK;
}

/* The shapes checked, then fn over every token of the job (its token
 * checks run with the work). */
static int gtopk_run(gtopk_job *j, dsv4_par_fn fn, dsv4_status *st)
{
    int rc = gtopk_check_shape(j->a, j->v, st);
    return rc ? rc : dsv4_parallel_for(j->a->num_tokens, TOKEN_GRAIN, 0, fn, j, st);
}

int dsv4_gtopk_check(const dsv4_gtopk_args *a, dsv4_gtopk_variant v, int ragged, dsv4_status *st)
{
    gtopk_job j = {a, v, ragged, page_div_of(a->block_size), NULL, NULL, NULL};
    return gtopk_run(&j, gtopk_check_range, st);
}

/* The dense row of token t into out (docs/semantics/indices.md A5.6);
 * returns its valid count. */
static inline int64_t gtopk_dense_row(const gtopk_job *j, int64_t t)
{
    const dsv4_gtopk_args *a = j->a;
    const int64_t K = a->topk_width;
    const int32_t *src = a->topk_indices + t * K;
    int32_t *dst = j->out + t * K;
    const int64_t r = a->token_to_req[t];
    int64_t count = 0;
    if (j->v == DSV4_GTOPK_BASE) {
        /* Column j -> column j, -1 for v < 0 (docs/semantics/indices.md A5.6 base [S1]); a row
         * with an entry >= 0 has a valid request (checked). */
        const int row_ok = r >= 0 && r < a->bt_rows && a->bt_cols > 0;
        return map_row(src, K, a->block_table + (row_ok ? r : 0) * a->bt_cols, row_ok, j->d, dst);
    }
    /* [S26]: a request outside [0, rows) gives a -1 row and lens 0;
     * survivors (v >= 0, v//Bc < shape[1]) compacted left. */
    const int req_ok = r >= 0 && r < a->bt_rows;
    for (int64_t k = 0; k < K && req_ok; k++)
        if (src[k] >= 0 && (int64_t)page_of((uint32_t)src[k], j->d) < a->bt_cols)
            dst[count++] = global_slot(a->block_table, a->bt_cols, r, src[k], j->d);
    for (int64_t k = count; k < K; k++)
        dst[k] = -1;
    return count;
}

/* Each token checked, then its lens: the dense form writes its row on the
 * way; the ragged form (docs/semantics/indices.md A5.7 [S6], step 1) counts
 * #{v >= 0}, and ragged_fill_range writes the rows once indptr holds the
 * exclusive cumsum.  The first bad token in order fails (the outputs are
 * then discarded). */
static int gtopk_lens_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const gtopk_job *j = ctx;
    const dsv4_gtopk_args *a = j->a;
    const int64_t K = a->topk_width;
    (void)K;
    for (int64_t t = t0; t < t1; t++) {
        int64_t count = 0; /* ragged: counted by the check (0 columns read for an invalid token) */
        int rc = gtopk_check_token_counting(j, t, j->ragged ? &count : NULL, st);
        if (rc)
            return rc;
        if (!j->ragged)
            count = gtopk_dense_row(j, t);
        /* lens = is_valid_token ? count : 0 (docs/semantics/indices.md A5.6, A5.7). */
        j->lens[t] = a->is_valid_token[t] ? wrap_i32(count) : 0;
    }
    return DSV4_OK;
}

/* Ragged step 3: the FIRST lens[t] columns with -1 kept (trailing valid
 * ones dropped). */
static int ragged_fill_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const gtopk_job *j = ctx;
    const dsv4_gtopk_args *a = j->a;
    const int64_t K = a->topk_width;
    for (int64_t t = t0; t < t1; t++) {
        const int32_t *src = a->topk_indices + t * K;
        int32_t *dst = j->out + (uint32_t)j->indptr[t];
        const int64_t r = a->token_to_req[t];
        if (j->lens[t] > 0) /* a row with lens > 0 has a valid request (checked) */
            map_row(src, j->lens[t], a->block_table + r * a->bt_cols, 1, j->d, dst);
    }
    return DSV4_OK;
}

int dsv4_ref_compute_global_topk_indices_and_lens(const dsv4_gtopk_args *a, dsv4_gtopk_variant v,
                                                  int32_t *global, int32_t *lens,
                                                  dsv4_status *st)
{
    gtopk_job j = {a, v, 0, page_div_of(a->block_size), global, NULL, lens};
    return gtopk_run(&j, gtopk_lens_range, st);
}

int dsv4_ref_compute_global_topk_ragged_indices_and_indptr(const dsv4_gtopk_args *a, int32_t *flat,
                                                           int32_t *indptr, int32_t *lens,
                                                           dsv4_status *st)
{
    gtopk_job j = {a, DSV4_GTOPK_BASE, 1, page_div_of(a->block_size), flat, indptr, lens};
    int rc = gtopk_run(&j, gtopk_lens_range, st);
    if (rc)
        return rc;
    /* Step 2: indptr = exclusive cumsum (int32); the flat offsets stay the
     * true sums (lens >= 0 here, and flat holds them all). */
    int64_t off = 0;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        indptr[t] = wrap_i32(off);
        off += lens[t];
    }
    indptr[a->num_tokens] = wrap_i32(off);
    return dsv4_parallel_for(a->num_tokens, TOKEN_GRAIN, 0, ragged_fill_range, &j, st);
}
