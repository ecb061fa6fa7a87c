/* errmap.c - where the errors of a failing output lie: a rows x column-block
 * grid and a histogram, for the HTML report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/numerics.h"
#include "errmap.h"

/* The per-element bound of compare.c's float policy (|a - e| <= atol +
 * rtol*|e| + ulp*ULP_out(e)), so that a cell's colour is in the same
 * units as the verdict. */
static double bound_of(const dsv4_policy *pol, double e)
{
    double b = pol->atol + pol->rtol * fabs(e);
    if (pol->ulp > 0 && pol->output_dtype != DSV4_DT_NONE)
        b += pol->ulp * dsv4_ulp(pol->output_dtype, e);
    return b;
}

/* Exact kinds: |a - e| in powers of two; bin 0 = equal bytes. */
static int exact_bin(double d)
{
    if (!(d == d) || isinf(d))
        return DSV4_HIST_BINS - 1;
    int k = 1;
    for (double edge = 2; d >= edge && k < DSV4_HIST_BINS - 1; edge *= 2)
        k++;
    return k;
}

/* Float: err/bound in powers of two from 2^-7; bin 0 = error 0. */
static int float_bin(double ratio)
{
    if (ratio == 0)
        return 0;
    if (!(ratio == ratio) || isinf(ratio))
        return DSV4_HIST_BINS - 1;
    int k = 1;
    for (double edge = ldexp(1, -7); ratio >= edge && k < DSV4_HIST_BINS - 1; edge *= 2)
        k++;
    return k;
}

/* err/bound of one float element, with compare.c's non-finite rules. */
static double float_ratio(const dsv4_policy *pol, double e, double a)
{
    if (isnan(e) || isnan(a) || isinf(e) || isinf(a)) {
        int same = (isnan(e) && isnan(a)) || (!isnan(e) && !isnan(a) && e == a);
        return same ? 0 : INFINITY;
    }
    double d = fabs(a - e), b = bound_of(pol, e);
    return b > 0 ? d / b : (d > 0 ? INFINITY : 0);
}

dsv4_errmap *dsv4_errmap_make(const dsv4_tensor *expected, const dsv4_tensor *actual,
                              const dsv4_policy *pol, const uint8_t *mask)
{
    dsv4_errmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    const int64_t n = dsv4_tensor_numel(expected);
    m->exact = pol->kind != DSV4_CMP_FLOAT;
    m->ncols = expected->ndim > 0 ? expected->shape[expected->ndim - 1] : 1;
    m->nrows = m->ncols > 0 ? n / m->ncols : 0;
    m->row_step = m->nrows > DSV4_MAP_ROWS ? (m->nrows + DSV4_MAP_ROWS - 1) / DSV4_MAP_ROWS : 1;
    m->col_step = m->ncols > DSV4_MAP_COLS ? (m->ncols + DSV4_MAP_COLS - 1) / DSV4_MAP_COLS : 1;
    m->rows = (int)((m->nrows + m->row_step - 1) / m->row_step);
    m->cols = (int)((m->ncols + m->col_step - 1) / m->col_step);
    int64_t *cnt = calloc(DSV4_MAP_ROWS * DSV4_MAP_COLS, sizeof *cnt);
    if (!cnt) {
        free(m);
        return NULL;
    }
    for (int k = 0; k < DSV4_MAP_ROWS * DSV4_MAP_COLS; k++)
        m->cell[k] = 0;
    const size_t es = dsv4_dtype_size(expected->dtype);
    const uint8_t *pe = expected->data, *pa = actual->data;
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        double e = dsv4_tensor_get(expected, i), a = dsv4_tensor_get(actual, i);
        if (!m->exact && isnan(e) && pol->nan == DSV4_NAN_IGNORE)
            continue;
        int cell = (int)((i / m->ncols) / m->row_step) * DSV4_MAP_COLS + (int)((i % m->ncols) / m->col_step);
        cnt[cell]++;
        if (m->exact) {
            int differ = expected->dtype == actual->dtype
                             ? memcmp(pe + (size_t)i * es, pa + (size_t)i * es, es) != 0
                             : !(a == e);
            double d = fabs(a - e);
            m->hist[differ ? exact_bin(d) : 0]++;
            m->cell[cell] += (float)differ; /* a count until the division below */
        } else {
            double ratio = float_ratio(pol, e, a);
            m->hist[float_bin(ratio)]++;
            float fr = isinf(ratio) ? 1e30f : (float)fmin(ratio, 1e30);
            if (fr > m->cell[cell])
                m->cell[cell] = fr;
        }
    }
    for (int k = 0; k < DSV4_MAP_ROWS * DSV4_MAP_COLS; k++) {
        if (cnt[k] == 0)
            m->cell[k] = -1;
        else if (m->exact)
            m->cell[k] /= (float)cnt[k];
    }
    free(cnt);
    return m;
}
