/* index_set.c - the `index_set` comparison kind (README.md, "Tolerances"): per-row
 * sets of indices (top-k outputs, [rows, k] int32/int64), order-free.
 *
 * Per row: the valid entries (>= 0) of each side form a set; -1 is padding
 * and counted apart (a row whose count of valid entries differs fails as a
 * "padding" mismatch); an actual entry < -1, out of the scores' columns, or
 * repeated fails the row.  missing = expected \ actual, extra = actual \
 * expected.  Tie-aware when the companion scores [rows, W] are present (the
 * golden's, pol->companion) and the expected row is full (k valid entries):
 * with kth = the k-th best score of the row's scored columns (-inf marks
 * columns outside the row; fewer than k: nothing forgiven) and tol = pol->atol +
 * pol->rtol * max|finite score of the row|, a missing or extra index is
 * forgiven when |its score - kth| <= tol (vLLM's test accepts selections
 * with score >= kth - tol, docs/semantics/indexer.md Q6.4; measured both ways
 * so that a wrong golden cannot forgive itself).  A short expected row
 * (fewer than k valid) selects every valid column: nothing is forgiven.
 * Reports: one mismatch per failing row, "[row]", expected = the first
 * missing index, actual = the first extra one, and where = all the missing
 * and extra indices of the row with their scores. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

static int64_t idx_at(const dsv4_tensor *t, int64_t i)
{
    return t->dtype == DSV4_I64 ? ((const int64_t *)t->data)[i] : (int64_t)((const int32_t *)t->data)[i];
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
    return (x > y) - (x < y);
}

typedef struct row_sets {
    int64_t *e, *a, ne, na; /* sorted valid entries */
    int64_t bad_entry;      /* an invalid actual entry (< -1, >= W, repeated), or INT64_MIN */
} row_sets;

static void load_row(const dsv4_tensor *exp, const dsv4_tensor *act, int64_t r, int64_t k, int64_t W,
                     row_sets *s)
{
    s->ne = s->na = 0;
    s->bad_entry = INT64_MIN;
    for (int64_t i = 0; i < k; i++) {
        int64_t x = idx_at(exp, r * k + i), y = idx_at(act, r * k + i);
        if (x >= 0)
            s->e[s->ne++] = x;
        if (y >= 0 && (W < 0 || y < W))
            s->a[s->na++] = y;
        else if (y != -1 && s->bad_entry == INT64_MIN)
            s->bad_entry = y;
    }
    qsort(s->e, (size_t)s->ne, sizeof *s->e, cmp_i64);
    qsort(s->a, (size_t)s->na, sizeof *s->a, cmp_i64);
    for (int64_t i = 1; i < s->na; i++)
        if (s->a[i] == s->a[i - 1] && s->bad_entry == INT64_MIN)
            s->bad_entry = s->a[i];
}

static int cmp_desc(const void *pa, const void *pb)
{
    double x = *(const double *)pa, y = *(const double *)pb;
    return (x < y) - (x > y);
}

/* The k-th best score of row r over its scored columns (-inf = not a
 * column of the row, NaN skipped), and the row's largest finite |score|.
 * 0 when the row has fewer than k scored columns. */
static int kth_score(const dsv4_tensor *sc, int64_t r, int64_t W, int64_t k, double *buf, double *kth,
                     double *rowmax)
{
    int64_t n = 0;
    for (int64_t j = 0; j < W; j++) {
        double v = dsv4_tensor_get(sc, r * W + j);
        if (isnan(v) || v == -INFINITY)
            continue;
        buf[n++] = v;
        if (isfinite(v) && fabs(v) > *rowmax)
            *rowmax = fabs(v);
    }
    if (n < k)
        return 0;
    qsort(buf, (size_t)n, sizeof *buf, cmp_desc);
    *kth = buf[k - 1];
    return 1;
}

/* Differences of a failing row are not counted as forgiven. */

static double score_of(const dsv4_tensor *sc, int64_t r, int64_t W, int64_t j)
{
    return sc ? dsv4_tensor_get(sc, r * W + j) : NAN;
}

/* Appends " j (score)" to buf. */
static void add_item(char *buf, size_t len, int64_t j, double s, int have_scores)
{
    size_t n = strlen(buf);
    if (n + 1 >= len)
        return;
    if (have_scores)
        snprintf(buf + n, len - n, " %" PRId64 " (%.6g)", j, s);
    else
        snprintf(buf + n, len - n, " %" PRId64, j);
}

/* One row's judging: an entry in only one of the two sets is forgiven when
 * its score ties the k-th within tol (tie_aware), else it counts as bad. */
typedef struct row_judge {
    const dsv4_tensor *sc;
    int64_t r, W;
    int tie_aware;
    double kth, tol;
    int64_t forgiven, nbad;
} row_judge;

/* The entries of one side only (missing or extra): the first, and a list. */
typedef struct one_side {
    char list[160];
    int64_t first;
} one_side;

static void judge_one_sided(row_judge *rj, int64_t id, one_side *side)
{
    const double v = score_of(rj->sc, rj->r, rj->W, id);
    const int ok = rj->tie_aware && fabs(v - rj->kth) <= rj->tol;
    rj->forgiven += ok;
    rj->nbad += !ok;
    side->first = side->first < 0 ? id : side->first;
    add_item(side->list, sizeof side->list, id, v, rj->sc != NULL);
}

/* Whether row r has a lane in lanes (dsv4_cmp_aux.lanes). */
static int row_in_lanes(const uint8_t *lanes, int64_t r, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        if (lanes[r * k + i])
            return 1;
    return 0;
}

int dsv4_compare_index_set(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                           const uint8_t *mask, const dsv4_cmp_aux *aux, dsv4_cmp_result *res,
                           dsv4_status *st)
{
    (void)mask; /* every row is specified; the padding says how much */
    if ((expected->dtype != DSV4_I32 && expected->dtype != DSV4_I64) ||
        (actual->dtype != DSV4_I32 && actual->dtype != DSV4_I64) || expected->ndim < 1) {
        res->verdict = DSV4_FAIL;
        snprintf(res->message, sizeof res->message, "index_set needs int32/int64 [rows, k]; got %s and %s",
                 dsv4_dtype_name(expected->dtype), dsv4_dtype_name(actual->dtype));
        return DSV4_OK;
    }
    const int64_t k = expected->shape[expected->ndim - 1], rows = k ? dsv4_tensor_numel(expected) / k : 0;
    const dsv4_tensor *sc = aux ? aux->expected : NULL;
    int64_t W = -1;
    if (sc) {
        if (sc->ndim < 1 || sc->shape[0] != rows || !dsv4_dtype_is_float(sc->dtype))
            return dsv4_fail(st, DSV4_EINPUT, "output '%s': companion scores '%s' must be float [%" PRId64 ", W]",
                             expected->name, sc->name, rows);
        W = rows ? dsv4_tensor_numel(sc) / rows : 0;
    }
    double *buf = malloc((size_t)(W > 0 ? W : 1) * sizeof *buf);
    row_sets s;
    s.e = malloc((size_t)(k ? k : 1) * sizeof *s.e);
    s.a = malloc((size_t)(k ? k : 1) * sizeof *s.a);
    if (!s.e || !s.a || !buf) {
        free(buf);
        free(s.e);
        free(s.a);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    int64_t forgiven = 0, pad_rows = 0, invalid_rows = 0, unforgiven = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (aux && aux->lanes && !row_in_lanes(aux->lanes, r, k))
            continue;
        load_row(expected, actual, r, k, W, &s);
        res->compared++;
        double kth = NAN, rowmax = 0;
        const int tie_aware = sc && s.ne == k && k > 0 && kth_score(sc, r, W, k, buf, &kth, &rowmax);
        const double tol = pol->atol + pol->rtol * rowmax;
        row_judge rj = {sc, r, W, tie_aware, kth, tol, 0, 0};
        one_side miss = {"", -1}, extra = {"", -1};
        int64_t i = 0, j = 0;
        while (i < s.ne || j < s.na) { /* merge of the two sorted sets */
            if (j >= s.na || (i < s.ne && s.e[i] < s.a[j])) {
                judge_one_sided(&rj, s.e[i], &miss);
                i++;
            } else if (i >= s.ne || s.a[j] < s.e[i]) {
                judge_one_sided(&rj, s.a[j], &extra);
                j++;
            } else {
                i++;
                j++;
            }
        }
        const int64_t nbad = rj.nbad;
        const int pad = s.ne != s.na, invalid = s.bad_entry != INT64_MIN;
        if (!nbad && !pad && !invalid) {
            forgiven += rj.forgiven; /* a failing row's ties are not reported as forgiven */
            continue;
        }
        res->bad++;
        unforgiven += nbad;
        pad_rows += pad;
        invalid_rows += invalid;
        dsv4_mismatch m;
        memset(&m, 0, sizeof m);
        m.flat = r * k;
        snprintf(m.index, sizeof m.index, "[%" PRId64 "]", r);
        m.expected = (double)miss.first;
        m.actual = (double)extra.first;
        m.abs_err = (double)nbad;
        if (invalid)
            snprintf(m.where, sizeof m.where, "row %" PRId64 ": invalid or repeated index %" PRId64 " (columns 0..%"
                     PRId64 ")", r, s.bad_entry, W - 1);
        else
            snprintf(m.where, sizeof m.where, "row %" PRId64 ": missing%s; extra%s%s; %" PRId64 " vs %" PRId64
                     " valid; k-th %.6g, tol %.3g", r, miss.list[0] ? miss.list : " none", extra.list[0] ? extra.list : " none",
                     "", s.na, s.ne, tie_aware ? kth : NAN, tol);
        if (res->n_first < DSV4_CMP_FIRST_N)
            res->first[res->n_first++] = m;
        if (!res->has_worst || m.abs_err > res->worst.abs_err) {
            res->worst = m;
            res->has_worst = 1;
        }
    }
    free(buf);
    free(s.e);
    free(s.a);
    res->max_abs = (double)unforgiven;
    if (res->bad == 0) {
        res->verdict = DSV4_PASS;
        if (forgiven)
            snprintf(res->message, sizeof res->message, "%" PRId64 " rows equal as sets; %" PRId64
                     " entries differ within the tie tolerance", res->compared, forgiven);
        return DSV4_OK;
    }
    res->verdict = DSV4_FAIL;
    snprintf(res->message, sizeof res->message, "%" PRId64 " of %" PRId64 " rows differ as sets: %" PRId64
             " indices beyond the tie tolerance, %" PRId64 " rows with a different -1 padding, %" PRId64
             " with invalid entries (%" PRId64 " differences forgiven as ties)",
             res->bad, res->compared, unforgiven, pad_rows, invalid_rows, forgiven);
    if (pad_rows == res->bad && unforgiven == 0)
        snprintf(res->hint, sizeof res->hint, "only the count of -1 padding differs: a row length "
                 "(context, row end or candidate count) off by some");
    return DSV4_OK;
}
