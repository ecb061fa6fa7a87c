/* attention.c - sparse attention with sink and its epilogues; see
 * attention.h.  Every rule cites docs/semantics/attention.md. */
#include "attention.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_inline.h"
#include "mx_avx2.h"
#include "numerics.h"
#include "parallel.h"

#define D DSV4_HEAD_DIM

/* Running max initial value of the Triton kernels (docs/semantics/attention.md A8.3 [S9]). */
#define KERNEL_NEG_INIT (-3.4028234663852886e38f)

/* The entries of token t in segment s. */
static const int32_t *seg_entries(const dsv4_attn_segment *s, int64_t t, int64_t *n)
{
    if (s->indptr) {
        *n = (int64_t)s->indptr[t + 1] - s->indptr[t];
        return s->indices + s->indptr[t];
    }
    /* Dense rows: len = clamp(lens[t], 0, width), only those columns read
     * (build_ragged_indices_from_dense, docs/semantics/indices.md A5.8; attention.md A8.2 [S9]). */
    int64_t len = s->lens[t];
    *n = len < 0 ? 0 : (len > s->width ? s->width : len);
    return s->indices + t * s->width;
}

static int entry_valid(const dsv4_attn_segment *s, int32_t v)
{
    return v >= 0 && v < s->num_rows; /* -1 and out-of-range skipped [S9] */
}

int64_t dsv4_attn_count_valid(const dsv4_attn_args *a, int64_t t)
{
    int64_t total = 0;
    for (int k = 0; k < a->nseg; k++) {
        int64_t n;
        const int32_t *e = seg_entries(&a->seg[k], t, &n);
        for (int64_t j = 0; j < n; j++)
            total += entry_valid(&a->seg[k], e[j]);
    }
    return total;
}

/* Row v of segment s as floats, NaN lanes scrubbed where the segment does. */
DSV4_HOT_INLINE int fetch_row(const dsv4_attn_segment *s, int64_t v, float *row, dsv4_status *st)
{
    if (s->bf16_rows) {
        const uint16_t *src = s->bf16_rows + v * D;
        for (int d = 0; d < D; d++)
            row[d] = dsv4_bf16_to_f32_inline(src[d]);
    } else {
        int rc = s->fetch(s->fetch_ctx, v, row, st);
        if (rc)
            return rc;
    }
    if (s->scrub_nan) /* "NaNs in K become 0" (docs/semantics/attention.md A8.4 [S9]) */
        for (int d = 0; d < D; d++) {
            const uint32_t b = dsv4_bits_f32(row[d]);
            row[d] = (b & 0x7FFFFFFFu) > 0x7F800000u ? 0.0f : row[d];
        }
    return DSV4_OK;
}

/* 1 if every lane of the row is finite (exponent bits not all ones). */
DSV4_HOT_INLINE int row_finite(const float *row)
{
    uint32_t bad = 0;
    for (int d = 0; d < D; d++)
        bad |= (dsv4_bits_f32(row[d]) & 0x7F800000u) == 0x7F800000u;
    return !bad;
}

static int check_segment(const dsv4_attn_args *a, const dsv4_attn_segment *s, dsv4_status *st)
{
    if (s->num_rows < 0 || (!s->bf16_rows && !s->fetch) || (!s->indptr && (!s->lens || s->width < 0)))
        return dsv4_fail(st, DSV4_EINPUT, "%s: incomplete key segment", s->name);
    if (s->indptr) {
        if (s->indptr[0] < 0)
            return dsv4_fail(st, DSV4_EINPUT, "%s indptr[0] = %d: must be >= 0", s->name, s->indptr[0]);
        for (int64_t t = 0; t < a->T; t++)
            if (s->indptr[t + 1] < s->indptr[t] || s->indptr[t + 1] > s->num_indices)
                return dsv4_fail(st, DSV4_EINPUT,
                                 "%s indptr[%" PRId64 "] = %d: must be in [indptr[%" PRId64
                                 "] = %d, %" PRId64 "] (non-decreasing, within the indices)",
                                 s->name, t + 1, s->indptr[t + 1], t, s->indptr[t], s->num_indices);
    }
    float row[D];
    for (int64_t t = 0; t < a->T; t++) {
        int64_t n;
        const int32_t *e = seg_entries(s, t, &n);
        for (int64_t j = 0; j < n; j++) {
            if (!entry_valid(s, e[j]))
                continue;
            int rc = fetch_row(s, e[j], row, st);
            if (rc)
                return rc;
            for (int d = 0; d < D; d++)
                if (!isfinite(row[d]))
                    return dsv4_fail(st, DSV4_EINPUT,
                                     "%s row %d lane %d is %g (token %" PRId64 ", entry %" PRId64
                                     "): a referenced key must be finite%s",
                                     s->name, e[j], d, (double)row[d], t, j,
                                     s->scrub_nan ? " (NaN is scrubbed to 0, Inf is not)"
                                                  : " (prefill does not scrub NaN, docs/semantics/attention.md A8.3)");
        }
    }
    return DSV4_OK;
}

int dsv4_attn_check(const dsv4_attn_args *a, dsv4_status *st)
{
    if (a->T < 0 || a->H < 1 || !a->q || a->nseg < 1 || a->nseg > DSV4_ATTN_MAX_SEGMENTS)
        return dsv4_fail(st, DSV4_EINPUT, "attention: need T >= 0, H >= 1, q and 1..2 key segments");
    if (!(a->scale > 0) || !isfinite(a->scale))
        return dsv4_fail(st, DSV4_EINPUT, "scale = %g: must be finite and > 0", a->scale);
    for (int64_t h = 0; a->attn_sink && h < a->H; h++)
        if (isnan(a->attn_sink[h]) || a->attn_sink[h] == INFINITY)
            return dsv4_fail(st, DSV4_EINPUT, "attn_sink[%" PRId64 "] = %g: must not be NaN or +Inf",
                             h, (double)a->attn_sink[h]);
    for (int64_t i = 0; i < a->T * a->H * D; i++)
        if (!isfinite(dsv4_bf16_to_f32(a->q[i])))
            return dsv4_fail(st, DSV4_EINPUT, "q[%" PRId64 ", %" PRId64 ", %" PRId64 "] is not finite",
                             i / (a->H * D), i / D % a->H, i % D);
    for (int k = 0; k < a->nseg; k++) {
        int rc = check_segment(a, &a->seg[k], st);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

/* Scratch for one token: the gathered rows and the score block. */
typedef struct attn_work {
    int64_t cap;      /* rows */
    double *kd, *kabs, *sd, *qd, *od;
    float *kf, *sf, *qf, *of, *ml; /* ml: per-head (m, l) of the faithful softmax */
    float row[D];
} attn_work;

static void work_free(attn_work *w)
{
    free(w->kd), free(w->kabs), free(w->sd), free(w->qd), free(w->od);
    free(w->kf), free(w->sf), free(w->qf), free(w->of), free(w->ml);
    memset(w, 0, sizeof *w);
}

static int work_alloc(attn_work *w, int64_t cap, int64_t H, dsv4_attn_mode mode, int want_abs,
                      dsv4_status *st)
{
    memset(w, 0, sizeof *w);
    w->cap = cap < 1 ? 1 : cap;
    size_t rows = (size_t)w->cap * D, scores = (size_t)w->cap * (size_t)H, qs = (size_t)H * D;
    if (mode == DSV4_ATTN_IDEAL) {
        w->kd = malloc(rows * sizeof(double));
        w->sd = malloc(scores * sizeof(double));
        w->qd = malloc(qs * sizeof(double));
        w->od = malloc(qs * sizeof(double));
        if (want_abs)
            w->kabs = malloc(rows * sizeof(double));
        if (!w->kd || !w->sd || !w->qd || !w->od || (want_abs && !w->kabs))
            goto oom;
    } else {
        w->kf = malloc(rows * sizeof(float));
        w->sf = malloc(scores * sizeof(float));
        w->qf = malloc(qs * sizeof(float));
        w->of = malloc(qs * sizeof(float));
        w->ml = malloc((size_t)(2 * H) * sizeof(float));
        if (!w->kf || !w->sf || !w->qf || !w->of || !w->ml)
            goto oom;
    }
    return DSV4_OK;
oom:
    work_free(w);
    return dsv4_fail(st, DSV4_ERUNTIME, "attention: out of memory for %" PRId64 " key rows", cap);
}

/* Gathers token t's valid rows (every segment, in order; duplicates twice)
 * into the mode's buffer.  Returns the row count in *n; *max_norm (the
 * largest row norm) only when want_norm. */
DSV4_HOT_INLINE int gather(const dsv4_attn_args *a, int64_t t, attn_work *w, dsv4_attn_mode mode, int want_norm,
                  double *max_norm, int64_t *n, dsv4_status *st)
{
    int64_t k = 0;
    *max_norm = 0;
    for (int s = 0; s < a->nseg; s++) {
        const dsv4_attn_segment *seg = &a->seg[s];
        int64_t ne;
        const int32_t *e = seg_entries(seg, t, &ne);
        for (int64_t j = 0; j < ne; j++) {
            if (!entry_valid(seg, e[j]))
                continue;
            if (mode == DSV4_ATTN_IDEAL && seg->bf16_rows && !seg->scrub_nan && !want_norm && !w->kabs) {
                /* the common ideal case in one pass: bf16 -> double, finite */
                const uint16_t *src = seg->bf16_rows + (int64_t)e[j] * D;
#if defined(__GNUC__)
                if (j + 1 < ne && entry_valid(seg, e[j + 1])) /* the next random row's lines, ahead */
                    for (int c = 0; c < D * 2; c += 64)
                        __builtin_prefetch((const char *)(seg->bf16_rows + (int64_t)e[j + 1] * D) + c);
#endif
                double *dst = w->kd + k * D;
                uint32_t bad = 0;
                for (int d = 0; d < D; d++) {
                    bad |= (src[d] & 0x7F80u) == 0x7F80u;
                    dst[d] = dsv4_bf16_to_f32_inline(src[d]);
                }
                if (bad)
                    for (int d = 0; d < D; d++)
                        if ((src[d] & 0x7F80u) == 0x7F80u)
                            return dsv4_fail(st, DSV4_EINPUT, "%s row %d lane %d is not finite (token %" PRId64 ")",
                                             seg->name, e[j], d, t);
                k++;
                continue;
            }
            if (seg->prefetch && j + 1 < ne && entry_valid(seg, e[j + 1])) /* the next random row, ahead */
                seg->prefetch(seg->fetch_ctx, e[j + 1]);
            int rc = fetch_row(seg, e[j], w->row, st);
            if (rc)
                return rc;
            if (!row_finite(w->row))
                for (int d = 0; d < D; d++)
                    if (!isfinite(w->row[d]))
                        return dsv4_fail(st, DSV4_EINPUT, "%s row %d lane %d is not finite (token %" PRId64 ")",
                                         seg->name, e[j], d, t);
            if (want_norm) {
                double nrm = 0;
                for (int d = 0; d < D; d++)
                    nrm += (double)w->row[d] * w->row[d];
                if (sqrt(nrm) > *max_norm)
                    *max_norm = sqrt(nrm);
            }
            if (mode == DSV4_ATTN_IDEAL) {
                for (int d = 0; d < D; d++)
                    w->kd[k * D + d] = w->row[d];
                if (w->kabs)
                    for (int d = 0; d < D; d++)
                        w->kabs[k * D + d] = fabs((double)w->row[d]);
            } else {
                memcpy(w->kf + k * D, w->row, sizeof w->row);
            }
            k++;
        }
    }
    *n = k;
    return DSV4_OK;
}

static double sink_of(const dsv4_attn_args *a, int64_t h)
{
    return a->attn_sink ? (double)a->attn_sink[h] : -INFINITY;
}

/* Ideal: S = scale * Q K^T, softmax with the sink in the denominator only,
 * O = W K (docs/semantics/attention.md A8.1). */
DSV4_HOT_INLINE void token_ideal(const dsv4_attn_args *a, int64_t t, int64_t n, double max_norm,
                        attn_work *w, double *out, dsv4_attn_diag *dg)
{
    const int64_t H = a->H;
    const uint16_t *q = a->q + t * H * D;
    for (int64_t i = 0; i < H * D; i++)
        w->qd[i] = dsv4_bf16_to_f32(q[i]);
    if (dg && dg->score_mag)
        for (int64_t h = 0; h < H; h++) {
            double qn = 0;
            for (int d = 0; d < D; d++)
                qn += w->qd[h * D + d] * w->qd[h * D + d];
            dg->score_mag[t * H + h] = n ? a->scale * sqrt(qn) * max_norm : 0;
        }
    if (n == 0) { /* no valid key: exactly 0 [S9, S11, S23] */
        memset(out + t * H * D, 0, (size_t)(H * D) * sizeof(double));
        for (int64_t h = 0; dg && h < H; h++) {
            if (dg->sink_w)
                dg->sink_w[t * H + h] = sink_of(a, h) > -INFINITY ? 1.0 : 0.0;
            if (dg->abs_out)
                memset(dg->abs_out + (t * H + h) * D, 0, D * sizeof(double));
            if (dg->abs_top)
                memset(dg->abs_top + (t * H + h) * D, 0, D * sizeof(double));
        }
        return;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)H, (int)n, D, a->scale, w->qd, D,
                w->kd, D, 0.0, w->sd, (int)n);
    for (int64_t h = 0; h < H; h++) {
        double *s = w->sd + h * n, sink = sink_of(a, h), m = sink;
        int64_t top = 0; /* the highest-scoring key (the first of equals) */
        for (int64_t i = 0; i < n; i++) {
            m = s[i] > m ? s[i] : m;
            top = s[i] > s[top] ? i : top;
        }
        double l = 0;
        for (int64_t i = 0; i < n; i++)
            l += (s[i] = exp(s[i] - m));
        double es = exp(sink - m); /* the sink: denominator only [S23] */
        l += es;
        for (int64_t i = 0; i < n; i++)
            s[i] /= l;
        if (dg && dg->sink_w)
            dg->sink_w[t * H + h] = es / l;
        if (dg && dg->abs_top)
            for (int d = 0; d < D; d++)
                dg->abs_top[(t * H + h) * D + d] = s[top] * fabs((double)w->kd[top * D + d]);
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)H, D, (int)n, 1.0, w->sd, (int)n, w->kd,
                D, 0.0, out + t * H * D, D);
    if (dg && dg->abs_out)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)H, D, (int)n, 1.0, w->sd, (int)n,
                    w->kabs, D, 0.0, dg->abs_out + t * H * D, D);
}

/* Faithful: the Triton kernels' fp32 steps (docs/semantics/attention.md A8.3 [S9]). */
DSV4_HOT_INLINE void token_faithful(const dsv4_attn_args *a, int64_t t, int64_t n, attn_work *w, double *out)
{
    const int64_t H = a->H;
    const uint16_t *q = a->q + t * H * D;
    for (int64_t i = 0; i < H * D; i++)
        w->qf[i] = dsv4_bf16_to_f32(q[i]);
    if (n > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)H, (int)n, D, 1.0f, w->qf, D, w->kf,
                    D, 0.0f, w->sf, (int)n);
    float *ml = w->ml;
    for (int64_t h = 0; h < H; h++) {
        float *s = w->sf + h * n, m = KERNEL_NEG_INIT, l = 0.0f;
        const float scale = (float)a->scale;
        for (int64_t i = 0; i < n; i++) {
            s[i] = s[i] * scale; /* tl.dot(q, K^T) in fp32, then x scale */
            m = s[i] > m ? s[i] : m;
        }
        for (int64_t i = 0; i < n; i++) {
            float p = expf(s[i] - m);
            l += p;                    /* l sums the unrounded p */
            s[i] = dsv4_round_bf16(p); /* p cast to bf16 before P.V */
        }
        ml[2 * h] = m;
        ml[2 * h + 1] = l;
    }
    if (n > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)H, D, (int)n, 1.0f, w->sf, (int)n,
                    w->kf, D, 0.0f, w->of, D);
    else
        memset(w->of, 0, (size_t)(H * D) * sizeof(float));
    for (int64_t h = 0; h < H; h++) {
        const float m = ml[2 * h], l = ml[2 * h + 1], sink = (float)sink_of(a, h);
        const float mf = m > sink ? m : sink;
        const float alpha = expf(m - mf);
        const float lf = l * alpha + expf(sink - mf);
        for (int d = 0; d < D; d++) {
            float acc = w->of[h * D + d] * alpha;
            out[(t * H + h) * D + d] = lf > 0.0f ? (double)(acc / (lf > 1e-30f ? lf : 1e-30f)) : 0.0;
        }
    }
}

typedef struct attn_job {
    const dsv4_attn_args *a;
    dsv4_attn_mode mode;
    double *out;
    dsv4_attn_diag *diag;
    attn_work *work; /* one per worker */
} attn_job;

/* Tokens [t0, t1): each token's rows, scores, softmax and P.V with this
 * worker's scratch (the same calls, in the same order, as one thread). */
DSV4_VECTOR_CLONES static int attn_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    const attn_job *j = ctx;
    attn_work *w = &j->work[worker];
    const int want_norm = j->mode == DSV4_ATTN_IDEAL && j->diag && j->diag->score_mag;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = 0;
        double max_norm = 0;
        int rc = gather(j->a, t, w, j->mode, want_norm, &max_norm, &n, st);
        if (rc)
            return rc;
        if (j->mode == DSV4_ATTN_IDEAL)
            token_ideal(j->a, t, n, max_norm, w, j->out, j->diag);
        else
            token_faithful(j->a, t, n, w, j->out);
    }
    return DSV4_OK;
}

int dsv4_ref_sparse_attn(const dsv4_attn_args *a, dsv4_attn_mode mode, double *out,
                         dsv4_attn_diag *diag, dsv4_status *st)
{
    if (a->T < 0 || a->H < 1 || a->nseg < 1 || a->nseg > DSV4_ATTN_MAX_SEGMENTS)
        return dsv4_fail(st, DSV4_EINPUT, "attention: need T >= 0, H >= 1 and 1..2 key segments");
    if (a->H > INT32_MAX / D)
        return dsv4_fail(st, DSV4_EINPUT, "attention: H = %" PRId64 " too large", a->H);
    int64_t cap = 0;
    for (int64_t t = 0; t < a->T; t++) {
        int64_t n = dsv4_attn_count_valid(a, t);
        if (diag && diag->nvalid)
            diag->nvalid[t] = n;
        cap = n > cap ? n : cap;
    }
    if (cap > INT32_MAX / D)
        return dsv4_fail(st, DSV4_EINPUT, "attention: %" PRId64 " keys for one token: too many", cap);
    const int nw = dsv4_parallel_workers(a->T, 1);
    attn_work *work = calloc((size_t)nw, sizeof *work);
    int rc = work ? DSV4_OK : dsv4_fail(st, DSV4_ERUNTIME, "attention: out of memory"), made = 0;
    for (; work && made < nw && !rc; made++)
        rc = work_alloc(&work[made], cap, a->H, mode, mode == DSV4_ATTN_IDEAL && diag && diag->abs_out, st);
    if (rc && made > 0)
        made--; /* work_alloc frees its own on failure */
    attn_job j = {a, mode, out, diag, work};
    if (!rc)
        rc = dsv4_parallel_for(a->T, 1, DSV4_PAR_BLAS, attn_range, &j, st);
    for (int k = 0; k < made; k++)
        work_free(&work[k]);
    free(work);
    return rc;
}

/* ---- epilogues (docs/semantics/attention.md A9) ---- */

static int rope_check(int64_t T, int64_t H, const int64_t *positions, int64_t num_pos, int rope_dim,
                      int64_t rotated, dsv4_status *st)
{
    if (T < 0 || H < 0)
        return dsv4_fail(st, DSV4_EINPUT, "inverse rope: negative shape");
    if (rope_dim <= 0 || rope_dim > D || rope_dim % 2)
        return dsv4_fail(st, DSV4_EINPUT, "rope_dim = %d: must be even and in (0, 512]", rope_dim);
    if (rotated < 0 || rotated > T)
        return dsv4_fail(st, DSV4_EINPUT, "rotated = %" PRId64 ": must be in [0, T = %" PRId64 "]",
                         rotated, T);
    for (int64_t t = rotated; t < T; t++)
        if (positions[t] < 0 || positions[t] >= num_pos)
            return dsv4_fail(st, DSV4_EINPUT,
                             "positions[%" PRId64 "] = %" PRId64 ": outside the cos_sin_cache rows [0, %" PRId64 ")",
                             t, positions[t], num_pos);
    return DSV4_OK;
}

typedef struct rope_bf16_job {
    uint16_t *o;
    int64_t H;
    const int64_t *positions;
    const float *cs;
    int rope_dim;
} rope_bf16_job;

static int rope_bf16_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const rope_bf16_job *j = ctx;
    for (int64_t t = t0; t < t1; t++)
        dsv4_rope_rows_bf16(j->o + t * j->H * D, j->H, D, j->cs + j->positions[t] * j->rope_dim, j->rope_dim,
                            DSV4_ROPE_INVERSE);
    return DSV4_OK;
}

int dsv4_ref_inverse_rope_rows(uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                               const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                               int64_t rotated, dsv4_status *st)
{
    int rc = rope_check(T, H, positions, num_pos, rope_dim, rotated, st);
    if (rc)
        return rc;
    /* Only rows past `rotated`: the decode reduce already rotated the
     * leading ones (seed forward_mqa: output[rotated:], positions[rotated:]). */
    rope_bf16_job j = {o + rotated * H * D, H, positions + rotated, cos_sin_cache, rope_dim};
    return dsv4_parallel_for(T - rotated, 16, 0, rope_bf16_range, &j, st);
}

typedef struct rope_f64_job {
    const uint16_t *o;
    int64_t H, rotated;
    const int64_t *positions;
    const float *cs;
    int rope_dim;
    double *out;
} rope_f64_job;

static int rope_f64_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const rope_f64_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t i = t * j->H * D; i < (t + 1) * j->H * D; i++)
            j->out[i] = dsv4_bf16_to_f32_inline(j->o[i]);
        if (t >= j->rotated)
            for (int64_t h = 0; h < j->H; h++)
                dsv4_rope_gptj_f64(j->out + (t * j->H + h) * D + (D - j->rope_dim),
                                   j->cs + j->positions[t] * j->rope_dim, j->rope_dim, DSV4_ROPE_INVERSE);
    }
    return DSV4_OK;
}

int dsv4_ref_inverse_rope_rows_f64(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                   const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                                   int64_t rotated, double *out, dsv4_status *st)
{
    int rc = rope_check(T, H, positions, num_pos, rope_dim, rotated, st);
    if (rc)
        return rc;
    rope_f64_job j = {o, H, rotated, positions, cos_sin_cache, rope_dim, out};
    return dsv4_parallel_for(T, 16, 0, rope_f64_range, &j, st);
}

typedef struct rope_f32_job {
    const uint16_t *o;
    int64_t H;
    const int64_t *positions;
    const float *cs;
    int rope_dim;
    float *out;        /* [T, H, 512], or NULL: per-worker rows in buf */
    float *buf;        /* [workers, H, 512] */
    dsv4_mx_rule rule; /* with data: MXFP8 of each token's rows */
    uint8_t *data, *scales;
} rope_f32_job;

/* Token t's rows (docs/semantics/attention.md A9.3 steps 1-2 [S9]) into x [H, 512]. */
static int rope_token_f32(const rope_f32_job *j, int64_t t, float *x, dsv4_status *st)
{
    const int64_t H = j->H, n = H * D;
    const uint16_t *o = j->o + t * n;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bad |= (o[i] & 0x7F80u) == 0x7F80u; /* bf16 exponent all ones: Inf or NaN */
        x[i] = dsv4_bf16_to_f32_inline(o[i]); /* step 1: x = fp32(o) (docs/semantics/attention.md A9.3 [S9]) */
    }
    for (int64_t i = 0; bad && i < n; i++)
        if ((o[i] & 0x7F80u) == 0x7F80u)
            return dsv4_fail(st, DSV4_EINPUT, "o[%" PRId64 ", %" PRId64 ", %" PRId64 "] is not finite", t, i / D,
                             i % D);
    /* Step 2: the pairs of lanes 448.. rotate; NoPE pairs (cos 1, sin 0) keep their bits. */
    for (int64_t h = 0; h < H; h++)
        dsv4_rope_gptj_f32(x + h * D + (D - j->rope_dim), j->cs + j->positions[t] * j->rope_dim, j->rope_dim,
                           DSV4_ROPE_INVERSE);
    return DSV4_OK;
}

static int rope_f32_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    const rope_f32_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        float *x = j->out ? j->out + t * j->H * D : j->buf + (size_t)worker * (size_t)(j->H * D);
        int rc = rope_token_f32(j, t, x, st);
        /* Step 3: MXFP8 per 512-lane head row; [T*H, 512] rows are exactly the
         * [T, H*512] / [T, H*16] layouts (docs/semantics/attention.md A9.3 [S9]; docs/semantics/quant.md Q2, layouts). */
        if (!rc && j->data)
            rc = dsv4_mx_quant_rows_fp8(x, j->H, D, j->rule, j->data + t * j->H * D,
                                        j->scales + t * j->H * (D / DSV4_MX_BLOCK), st);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

#if DSV4_HAVE_AVX2_PATHS
/* dsv4_rope_gptj_f32 inverse on 8 lanes (pairs k..k+3): even lanes ec + os,
 * odd lanes oc - es, the operands in its order. */
DSV4_AVX2_INLINE __m256 inverse_rope_avx2(__m256 v, const float *cs_row, int half, int k)
{
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cs_row + k)), dup);
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cs_row + half + k)), dup);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1); /* v is finite: no NaN operand order in the products */
    const __m256 ec_oc = _mm256_mul_ps(v, c), os_es = _mm256_mul_ps(swapped, s);
    return _mm256_blend_ps(dsv4_avx2_first_nan(_mm256_add_ps(ec_oc, os_es), ec_oc), _mm256_sub_ps(ec_oc, os_es), 0xAA);
}

static int cs_has_nan(const float *cs_row, int n)
{
    for (int i = 0; i < n; i++)
        if (isnan(cs_row[i]))
            return 1;
    return 0;
}

/* rope_f32_range's MXFP8 rows with each block loaded, rotated and encoded
 * in registers (no fp32 copy of the token; where AVX-512F runs, a head row
 * of 2 KB at a time, in L1, its 16 blocks at once); a token with a non-finite
 * lane takes rope_f32_range for its message, and one whose cos/sin row has
 * a NaN takes it for its NaN payloads (dsv4_avx2_any_nan). */
DSV4_AVX2 static int rope_mxfp8_range_avx2(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    const rope_f32_job *j = ctx;
    const int64_t H = j->H, n = H * D;
    const int nope = D - j->rope_dim, half = j->rope_dim / 2;
    const int wide = dsv4_simd_level() >= DSV4_SIMD_AVX512; /* 16 blocks at a time, 16 lanes at a time */
    float buf[D];
    dsv4_mx_prepare();
    for (int64_t t = t0; t < t1; t++) {
        const uint16_t *o = j->o + t * n;
        __m256i bad = _mm256_setzero_si256();
        const __m256i expo = _mm256_set1_epi16(0x7F80);
        for (int64_t i = 0; i < n; i += 16)
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(o + i)), expo), expo));
        const float *cs_row = j->cs + j->positions[t] * j->rope_dim;
        if (!_mm256_testz_si256(bad, bad) || (j->rope_dim % 8 == 0 && dsv4_avx2_any_nan(cs_row, j->rope_dim)) ||
            (j->rope_dim % 8 && cs_has_nan(cs_row, j->rope_dim))) {
            const int rc = rope_f32_range(ctx, t, t + 1, worker, st);
            if (rc)
                return rc;
            continue;
        }
        if (wide) { /* each head row rotated into buf, then its 16 blocks at once */
            for (int64_t h = 0; h < H; h++) {
                const int64_t row = t * H + h;
                if (t + 1 < t1)
                    for (int i = 0; i < D; i += 32)
                        _mm_prefetch((const char *)(o + n + h * D + i), _MM_HINT_T0);
                for (int i = 0; i < D; i += 8) {
                    __m256 v = dsv4_avx2_load_bf16(o + h * D + i);
                    if (i >= nope)
                        v = inverse_rope_avx2(v, cs_row, half, (i - nope) / 2);
                    _mm256_storeu_ps(buf + i, v);
                }
                dsv4_mx_fp8_blocks_512(buf, D / DSV4_MX_BLOCK, j->rule, j->data + row * D,
                                       j->scales + row * (D / DSV4_MX_BLOCK));
            }
            continue;
        }
        for (int64_t h = 0; h < H; h++)
            for (int b = 0; b < D / DSV4_MX_BLOCK; b++) {
                const int i0 = b * DSV4_MX_BLOCK;
                const int64_t row = t * H + h;
                __m256 v[4];
                if (t + 1 < t1) /* the next token's line at this place: its read overlaps this work */
                    _mm_prefetch((const char *)(o + n + h * D + i0), _MM_HINT_T0);
                for (int r = 0; r < 4; r++) {
                    v[r] = dsv4_avx2_load_bf16(o + h * D + i0 + 8 * r);
                    if (i0 + 8 * r >= nope)
                        v[r] = inverse_rope_avx2(v[r], cs_row, half, (i0 + 8 * r - nope) / 2);
                }
                j->scales[row * (D / DSV4_MX_BLOCK) + b] = dsv4_mx_fp8_block_avx2(v, j->rule, j->data + row * D + i0);
            }
    }
    return DSV4_OK;
}
#endif

int dsv4_ref_inverse_rope_rows_f32(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                   const float *cos_sin_cache, int64_t num_pos, int rope_dim, float *out,
                                   dsv4_status *st)
{
    int rc = rope_check(T, H, positions, num_pos, rope_dim, 0, st);
    if (rc)
        return rc;
    rope_f32_job j = {o, H, positions, cos_sin_cache, rope_dim, out, NULL, DSV4_MX_FP8_CEIL, NULL, NULL};
    return dsv4_parallel_for(T, 16, 0, rope_f32_range, &j, st);
}

int dsv4_ref_inverse_rope_mxfp8_rows(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                     const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                                     dsv4_mx_rule rule, uint8_t *data, uint8_t *scales, dsv4_status *st)
{
    if (T < 0 || H < 0)
        return dsv4_fail(st, DSV4_EINPUT, "inverse rope mxfp8: negative shape");
    int rc = rope_check(T, H, positions, num_pos, rope_dim, 0, st);
    if (rc)
        return rc;
    if (dsv4_mx_rule_is_fp4(rule) || (unsigned)rule >= DSV4_MX_RULE_COUNT)
        return dsv4_mx_quant_rows_fp8(NULL, 0, D, rule, NULL, NULL, st); /* its message for a bad rule */
    const int grain = 16, nw = dsv4_parallel_workers(T, grain);
    float *buf = malloc((size_t)nw * (size_t)(H * D + 1) * sizeof *buf);
    if (!buf)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    /* Token by token: the rows of dsv4_ref_inverse_rope_rows_f32, then their
     * MXFP8; no [T, H, 512] fp32 copy. */
    rope_f32_job j = {o, H, positions, cos_sin_cache, rope_dim, NULL, buf, rule, data, scales};
    dsv4_par_fn fn = rope_f32_range;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2() && (D - rope_dim) % 8 == 0) /* the RoPE part starts on a vector */
        fn = rope_mxfp8_range_avx2;
#endif
    rc = dsv4_parallel_for(T, grain, 0, fn, &j, st);
    free(buf);
    return rc;
}
