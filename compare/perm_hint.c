/* perm_hint.c - permutation hints; see perm_hint.h. */
#define _POSIX_C_SOURCE 200809L
#include "perm_hint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../ref/numerics.h"

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The compared, non-NaN elements of t, sorted; returns the count or -1. */
static int64_t sorted_values(const dsv4_tensor *t, const uint8_t *mask, double **out)
{
    const int64_t n = dsv4_tensor_numel(t);
    double *v = malloc((size_t)(n + 1) * sizeof *v);
    if (!v)
        return -1;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = dsv4_tensor_get(t, i);
        if ((!mask || mask[i]) && !isnan(x))
            v[m++] = x;
    }
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    *out = v;
    return m;
}

void dsv4_perm_hint(const dsv4_tensor *exp, const dsv4_tensor *act, const uint8_t *mask,
                    const dsv4_policy *pol, dsv4_cmp_result *res)
{
    if (res->bad < 2 || res->hint[0])
        return;
    double *e = NULL, *a = NULL;
    int64_t ne = sorted_values(exp, mask, &e), na = sorted_values(act, mask, &a);
    int same = ne >= 0 && ne == na;
    const dsv4_dtype unit = pol->output_dtype != DSV4_DT_NONE ? pol->output_dtype : act->dtype;
    for (int64_t i = 0; same && i < ne; i++) {
        double b = pol->atol + pol->rtol * fabs(e[i]) + fmax(pol->ulp, 1.0) * dsv4_ulp(unit, e[i]);
        same = fabs(a[i] - e[i]) <= b;
    }
    if (same)
        snprintf(res->hint, sizeof res->hint,
                 "actual looks like a permutation of the expected output: the same values (sorted, within "
                 "the bound) in another order: a layout bug (transposed/shuffled rows or columns, scale layout)");
    free(e);
    free(a);
}

int dsv4_operand_perm_hint(const dsv4_tensor *act, const double *alt, const double *bound, const char *why,
                           dsv4_cmp_result *res)
{
    const int64_t n = dsv4_tensor_numel(act);
    if (n == 0)
        return 0;
    for (int64_t i = 0; i < n; i++) {
        double x = dsv4_tensor_get(act, i);
        if (!(fabs(x - alt[i]) <= bound[i]))
            return 0;
    }
    snprintf(res->hint, sizeof res->hint,
             "output looks like a permutation of the expected one, through an operand: %s", why);
    return 1;
}
