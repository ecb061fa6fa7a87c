/* compare.c - exact and float comparison, census, first/worst mismatches,
 * verdicts and bug-pattern hints (README.md, "Tolerances"). */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/numerics.h"
#include "perm_hint.h"

const char *dsv4_verdict_name(dsv4_verdict v)
{
    return v == DSV4_PASS ? "pass" : v == DSV4_WARN ? "warn" : "FAIL";
}

static const char *const kind_names[] = {"exact", "float", "index_set", "mx"};

const char *dsv4_cmp_kind_name(dsv4_cmp_kind k)
{
    return (unsigned)k < 4 ? kind_names[k] : "?";
}

dsv4_mismatch dsv4_mismatch_at(const dsv4_tensor *t, int64_t flat, double e, double a, double abs_err)
{
    dsv4_mismatch m;
    memset(&m, 0, sizeof m);
    m.flat = flat;
    dsv4_index_str(t, flat, m.index, sizeof m.index);
    m.expected = e;
    m.actual = a;
    m.abs_err = abs_err;
    m.rel_err = e != 0 ? abs_err / fabs(e) : (abs_err == 0 ? 0 : INFINITY);
    return m;
}

static void record(dsv4_cmp_result *res, const dsv4_tensor *exp, int64_t i, double e, double a,
                   double abs_err, double tol, double ulp, dsv4_locate_fn locate, const void *ctx)
{
    dsv4_mismatch m = dsv4_mismatch_at(exp, i, e, a, abs_err);
    m.ulp_err = ulp > 0 ? abs_err / ulp : 0;
    m.tol = tol;
    if (locate)
        locate(ctx, i, m.where, sizeof m.where);
    if (res->n_first < DSV4_CMP_FIRST_N)
        res->first[res->n_first++] = m;
    double ratio = tol > 0 ? abs_err / tol : (abs_err > 0 || isnan(abs_err) ? INFINITY : 0);
    double worst_ratio = !res->has_worst ? -1
                         : res->worst.tol > 0 ? res->worst.abs_err / res->worst.tol
                                              : INFINITY;
    if (!res->has_worst || ratio > worst_ratio || (isnan(abs_err) && !isnan(res->worst.abs_err))) {
        res->worst = m;
        res->has_worst = 1;
    }
}

static void census(dsv4_cmp_result *res, double e, double a)
{
    res->nan_expected += isnan(e) != 0;
    res->nan_actual += isnan(a) != 0;
    res->inf_expected += isinf(e) != 0;
    res->inf_actual += isinf(a) != 0;
    res->zero_expected += e == 0;
    res->zero_actual += a == 0;
}

/* Bit-exact comparison of elements of the same storage type. */
static void compare_exact(const dsv4_tensor *exp, const dsv4_tensor *act, const uint8_t *mask,
                          dsv4_locate_fn locate, const void *ctx, dsv4_cmp_result *res)
{
    const size_t es = dsv4_dtype_size(exp->dtype);
    const uint8_t *pe = exp->data, *pa = act->data;
    const int64_t n = dsv4_tensor_numel(exp);
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        res->compared++;
        const int forgivable = !mask || mask[i] == DSV4_MASK_BUDGET;
        res->budget_compared += forgivable;
        double e = dsv4_tensor_get(exp, i), a = dsv4_tensor_get(act, i);
        census(res, e, a);
        if (memcmp(pe + (size_t)i * es, pa + (size_t)i * es, es) == 0)
            continue;
        res->bad++;
        res->budget_bad += forgivable;
        double d = fabs(a - e);
        record(res, exp, i, e, a, isnan(d) ? INFINITY : d, 0, 1.0, locate, ctx);
        if (d > res->max_abs || isnan(d))
            res->max_abs = isnan(d) ? INFINITY : d;
    }
}

static double element_bound(const dsv4_policy *pol, double e)
{
    double b = pol->atol + pol->rtol * fabs(e);
    if (pol->ulp > 0 && pol->output_dtype != DSV4_DT_NONE)
        b += pol->ulp * dsv4_ulp(pol->output_dtype, e);
    return b;
}

static void compare_float(const dsv4_tensor *exp, const dsv4_tensor *act, const dsv4_policy *pol,
                          const uint8_t *mask, dsv4_locate_fn locate, const void *ctx,
                          const double *elem_bound, dsv4_cmp_result *res)
{
    const int64_t n = dsv4_tensor_numel(exp);
    const dsv4_dtype unit = pol->output_dtype != DSV4_DT_NONE ? pol->output_dtype : act->dtype;
    double se = 0, sa = 0, sae = 0, sd = 0;
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        double e = dsv4_tensor_get(exp, i), a = dsv4_tensor_get(act, i);
        census(res, e, a);
        if (isnan(e) && pol->nan == DSV4_NAN_IGNORE)
            continue;
        res->compared++;
        const int forgivable = !mask || mask[i] == DSV4_MASK_BUDGET;
        res->budget_compared += forgivable;
        double bound = element_bound(pol, e) + (elem_bound ? elem_bound[i] : 0), ulp = dsv4_ulp(unit, e);
        if (isnan(e) || isnan(a) || isinf(e) || isinf(a)) {
            /* NaN where a finite value is expected fails, and vice versa;
             * infinities must match exactly. */
            int same = (isnan(e) && isnan(a)) || (!isnan(e) && !isnan(a) && e == a);
            if (!same) {
                res->bad++;
                res->budget_bad += forgivable;
                res->nonfinite_bad++;
                record(res, exp, i, e, a, INFINITY, bound, ulp, locate, ctx);
            }
            continue;
        }
        double d = fabs(a - e);
        se += e * e;
        sa += a * a;
        sae += a * e;
        sd += (a - e) * (a - e);
        if (d > res->max_abs)
            res->max_abs = d;
        if (e != 0 && d / fabs(e) > res->max_rel)
            res->max_rel = d / fabs(e);
        if (ulp > 0 && d / ulp > res->max_ulp)
            res->max_ulp = d / ulp;
        double ratio = bound > 0 ? d / bound : (d > 0 ? INFINITY : 0);
        if (ratio > res->worst_ratio || res->worst_ratio_flat < 0) {
            res->worst_ratio = ratio > res->worst_ratio ? ratio : res->worst_ratio;
            res->worst_ratio_flat = i;
        }
        if (d > bound) {
            res->bad++;
            res->budget_bad += forgivable;
            record(res, exp, i, e, a, d, bound, ulp, locate, ctx);
        }
    }
    res->nmse = se > 0 ? sd / se : (sd > 0 ? INFINITY : 0);
    res->cosine = (se > 0 && sa > 0) ? sae / sqrt(se * sa) : (se == sa ? 1.0 : 0.0);
    if (res->nonfinite_bad) /* an unbounded error: the maxima say so */
        res->max_abs = res->max_rel = res->max_ulp = res->worst_ratio = INFINITY;
}

/* The sign test (docs/semantics/numerics.md A17).  E_d sums the signed
 * errors of last-axis lane d over every other index; under the op's
 * symmetry a correct kernel's E_d are c_d times independent fair signs, so
 * S = sum E_d / sqrt(sum E_d^2) exceeds t with probability at most
 * 2 exp(-t^2 / 2) whatever the c_d (Hoeffding, conditioned on |E_d|).  Only
 * lanes compared and finite on both sides count: NaN lanes are the
 * comparison's, not the test's. */
static int sign_test(const dsv4_tensor *exp, const dsv4_tensor *act, const dsv4_policy *pol, const uint8_t *mask,
                     dsv4_cmp_result *res)
{
    const int64_t n = dsv4_tensor_numel(exp), D = exp->ndim > 0 ? exp->shape[exp->ndim - 1] : 1;
    if (n == 0 || D <= 0)
        return DSV4_OK;
    double *E = calloc((size_t)D, sizeof *E);
    if (!E)
        return DSV4_ERUNTIME;
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        const double e = dsv4_tensor_get(exp, i), a = dsv4_tensor_get(act, i);
        if (isfinite(e) && isfinite(a) && !(isnan(e) && pol->nan == DSV4_NAN_IGNORE))
            E[i % D] += a - e;
    }
    double sum = 0, sq = 0;
    for (int64_t d = 0; d < D; d++) {
        sum += E[d];
        sq += E[d] * E[d];
        res->sign_lanes += E[d] != 0;
    }
    free(E);
    res->sign_stat = sq > 0 ? sum / sqrt(sq) : 0.0;
    return DSV4_OK;
}

/* Recognisable bug patterns among the mismatches: a hint names the likely
 * mistake so that a failure report points at the bug, not only at the data. */
static void hint_exact(const dsv4_tensor *exp, const dsv4_tensor *act, const uint8_t *mask,
                       dsv4_cmp_result *res)
{
    const int64_t n = dsv4_tensor_numel(exp);
    const size_t es = dsv4_dtype_size(exp->dtype);
    int64_t poison = 0, shifted = 0;
    const uint8_t *pa = act->data, *pe = exp->data;
    for (int64_t i = 0; i < n; i++) {
        if ((mask && !mask[i]) || memcmp(pa + i * es, pe + i * es, es) == 0)
            continue;
        int all7b = 1;
        for (size_t b = 0; b < es; b++)
            all7b &= pa[i * es + b] == 0x7B;
        poison += all7b;
        if ((i > 0 && memcmp(pa + i * es, pe + (i - 1) * es, es) == 0) ||
            (i + 1 < n && memcmp(pa + i * es, pe + (i + 1) * es, es) == 0))
            shifted++;
    }
    if (poison == res->bad)
        snprintf(res->hint, sizeof res->hint,
                 "every differing element still holds the poison pattern 0x7B: output never written there");
    else if (poison > 0)
        snprintf(res->hint, sizeof res->hint,
                 "%" PRId64 " differing elements still hold the poison pattern 0x7B (unwritten)", poison);
    else if (res->bad >= 4 && shifted * 10 >= res->bad * 9)
        snprintf(res->hint, sizeof res->hint,
                 "differing elements equal their expected neighbour: an off-by-one shift");
}

static void hint_float(const dsv4_tensor *exp, const dsv4_tensor *act, const uint8_t *mask,
                       dsv4_cmp_result *res)
{
    const int64_t n = dsv4_tensor_numel(exp);
    int64_t zero = 0, nonzero_bad = 0, neg = 0;
    double ratio0 = 0;
    int same_ratio = 1;
    for (int64_t i = 0; i < n && res->bad; i++) {
        if (mask && !mask[i])
            continue;
        double e = dsv4_tensor_get(exp, i), a = dsv4_tensor_get(act, i);
        if (e == a || isnan(e) || isnan(a) || e == 0)
            continue;
        if (a == 0) {
            zero++;
            continue;
        }
        nonzero_bad++;
        double r = a / e;
        neg += fabs(r + 1.0) < 1e-3;
        if (nonzero_bad == 1)
            ratio0 = r;
        else if (fabs(r - ratio0) > 1e-3 * fabs(ratio0))
            same_ratio = 0;
    }
    if (res->nonfinite_bad == res->bad) {
        snprintf(res->hint, sizeof res->hint,
                 "every mismatch is non-finite on one side only (actual NaN %" PRId64 ", Inf %" PRId64
                 "; expected NaN %" PRId64 ", Inf %" PRId64 "): a NaN or Inf produced or lost, not a rounding",
                 res->nan_actual, res->inf_actual, res->nan_expected, res->inf_expected);
        return;
    }
    if (zero > 0 && nonzero_bad == 0)
        snprintf(res->hint, sizeof res->hint,
                 "actual is 0 wherever it differs: output not written, or rows masked out that should not be");
    else if (nonzero_bad >= 2 && same_ratio && fabs(ratio0 - 0.5) < 1e-3)
        snprintf(res->hint, sizeof res->hint,
                 "actual = 0.5 x expected: FNUZ bytes decoded as OCP e4m3fn (or a scale one binade low)");
    else if (nonzero_bad >= 2 && same_ratio && fabs(ratio0 - 2.0) < 2e-3)
        snprintf(res->hint, sizeof res->hint,
                 "actual = 2 x expected: OCP bytes decoded as FNUZ (or a scale one binade high)");
    else if (nonzero_bad >= 2 && neg == nonzero_bad)
        snprintf(res->hint, sizeof res->hint, "actual = -expected: a sign flip");
    else if (nonzero_bad >= 2 && same_ratio)
        snprintf(res->hint, sizeof res->hint, "actual = %.6g x expected on every differing element",
                 ratio0);
}

/* The mask restricted to aux's lanes (exact and float kinds): a lane left
 * out is DSV4_MASK_SKIP; without a mask every lane kept is under the
 * budget, as an unmasked comparison has it.  NULL when out of memory. */
static uint8_t *mask_with_lanes(const uint8_t *mask, const uint8_t *lanes, int64_t n)
{
    uint8_t *m = malloc(n > 0 ? (size_t)n : 1);
    for (int64_t i = 0; m && i < n; i++)
        m[i] = !lanes[i] ? DSV4_MASK_SKIP : mask ? mask[i] : DSV4_MASK_BUDGET;
    return m;
}

static int compare_kind(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                        const uint8_t *mask, dsv4_locate_fn locate, const void *locate_ctx,
                        const dsv4_cmp_aux *aux, dsv4_cmp_result *res, dsv4_status *st);

int dsv4_compare(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                 const uint8_t *mask, dsv4_locate_fn locate, const void *locate_ctx,
                 const dsv4_cmp_aux *aux, dsv4_cmp_result *res, dsv4_status *st)
{
    const int lanes = aux && aux->lanes && (pol->kind == DSV4_CMP_EXACT || pol->kind == DSV4_CMP_FLOAT) &&
                      dsv4_tensor_same_shape(expected, actual);
    if (!lanes)
        return compare_kind(expected, actual, pol, mask, locate, locate_ctx, aux, res, st);
    uint8_t *m = mask_with_lanes(mask, aux->lanes, dsv4_tensor_numel(expected));
    if (!m)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = compare_kind(expected, actual, pol, m, locate, locate_ctx, aux, res, st);
    free(m);
    return rc;
}

static int compare_kind(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                        const uint8_t *mask, dsv4_locate_fn locate, const void *locate_ctx,
                        const dsv4_cmp_aux *aux, dsv4_cmp_result *res, dsv4_status *st)
{
    memset(res, 0, sizeof *res);
    snprintf(res->output, sizeof res->output, "%s", expected->name);
    res->count = dsv4_tensor_numel(expected);
    res->cosine = 1.0;
    res->worst_ratio_flat = -1;
    if (!dsv4_tensor_same_shape(expected, actual)) {
        char se[96], sa[96];
        res->verdict = DSV4_FAIL;
        snprintf(res->message, sizeof res->message, "shape %s, expected %s",
                 dsv4_shape_str(actual, sa, sizeof sa), dsv4_shape_str(expected, se, sizeof se));
        return DSV4_OK;
    }
    switch (pol->kind) {
    case DSV4_CMP_EXACT:
        if (dsv4_dtype_size(expected->dtype) != dsv4_dtype_size(actual->dtype) ||
            (expected->dtype != actual->dtype && expected->dtype != DSV4_BYTES &&
             actual->dtype != DSV4_BYTES && expected->dtype != DSV4_U8 && actual->dtype != DSV4_U8)) {
            res->verdict = DSV4_FAIL;
            snprintf(res->message, sizeof res->message, "dtype %s, expected %s (exact comparison)",
                     dsv4_dtype_name(actual->dtype), dsv4_dtype_name(expected->dtype));
            return DSV4_OK;
        }
        compare_exact(expected, actual, mask, locate, locate_ctx, res);
        if (res->bad)
            hint_exact(expected, actual, mask, res);
        break;
    case DSV4_CMP_FLOAT:
        compare_float(expected, actual, pol, mask, locate, locate_ctx, aux ? aux->elem_bound : NULL, res);
        if (res->bad)
            hint_float(expected, actual, mask, res);
        if (res->bad)
            dsv4_perm_hint(expected, actual, mask, pol, res);
        if (pol->sign_test && sign_test(expected, actual, pol, mask, res))
            return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        break;
    case DSV4_CMP_INDEX_SET: /* sets its own verdict and message */
        return dsv4_compare_index_set(expected, actual, pol, mask, aux, res, st);
    case DSV4_CMP_MX: /* sets its own verdict and message */
        return dsv4_compare_mx(expected, actual, pol, mask, aux, res, st);
    default:
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': comparison kind %s is handled elsewhere",
                         expected->name, dsv4_cmp_kind_name(pol->kind));
    }
    const int sign_fail = pol->kind == DSV4_CMP_FLOAT && pol->sign_test && fabs(res->sign_stat) > DSV4_SIGN_TEST_T;
    int metric_fail = (pol->max_nmse > 0 && res->nmse > pol->max_nmse) ||
                      (pol->min_cosine > 0 && res->cosine < pol->min_cosine) || sign_fail;
    /* Only mismatches where the budget applies may be forgiven, and only
     * while they stay within budget x the elements it applies to. */
    const int within_budget = pol->budget > 0 && res->bad == res->budget_bad &&
                              (double)res->budget_bad <= pol->budget * (double)res->budget_compared;
    const char *verb = pol->kind == DSV4_CMP_EXACT ? "differ" : "exceed the tolerance";
    if (res->bad == 0 && !metric_fail)
        res->verdict = DSV4_PASS;
    else if (!metric_fail && within_budget)
        res->verdict = DSV4_WARN;
    else
        res->verdict = DSV4_FAIL;
    if (res->bad && pol->budget > 0 && res->budget_compared < res->compared)
        snprintf(res->message, sizeof res->message,
                 "%" PRId64 " of %" PRId64 " elements %s: %" PRId64 " of the %" PRId64 " the budget covers (budget %.3g), %"
                 PRId64 " of the %" PRId64 " that must be exact",
                 res->bad, res->compared, verb, res->budget_bad, res->budget_compared,
                 pol->budget * (double)res->budget_compared, res->bad - res->budget_bad,
                 res->compared - res->budget_compared);
    else if (res->bad && pol->budget > 0)
        snprintf(res->message, sizeof res->message, "%" PRId64 " of %" PRId64 " elements %s (budget %.3g)", res->bad,
                 res->compared, verb, pol->budget * (double)res->compared);
    else if (res->bad)
        snprintf(res->message, sizeof res->message, "%" PRId64 " of %" PRId64 " elements %s", res->bad, res->compared,
                 verb);
    else if (sign_fail)
        snprintf(res->message, sizeof res->message,
                 "every element within its bound, but the errors lean one way: sign test S = %.1f over %" PRId64
                 " lanes of the last axis (a correct kernel exceeds %.1f with probability below 1.4e-9)",
                 res->sign_stat, res->sign_lanes, DSV4_SIGN_TEST_T);
    else if (metric_fail)
        snprintf(res->message, sizeof res->message, "nmse %.3g (max %.3g), cosine %.9f (min %.9f)",
                 res->nmse, pol->max_nmse, res->cosine, pol->min_cosine);
    if (sign_fail && !res->hint[0])
        snprintf(res->hint, sizeof res->hint,
                 "a one-sided error (%s): rounding toward +/-inf, a constant offset or a biased accumulator, not the "
                 "two-sided rounding of a correct kernel",
                 res->sign_stat > 0 ? "actual above the ideal" : "actual below the ideal");
    return DSV4_OK;
}

static void print_mismatch(FILE *f, const char *label, const dsv4_mismatch *m, int exact)
{
    if (exact)
        fprintf(f, "      %s %s: expected %.17g, actual %.17g", label, m->index, m->expected,
                m->actual);
    else
        fprintf(f, "      %s %s: expected %.9g, actual %.9g, abs %.3g, rel %.3g, %.3g ulp, bound %.3g",
                label, m->index, m->expected, m->actual, m->abs_err, m->rel_err, m->ulp_err, m->tol);
    if (m->where[0])
        fprintf(f, " (%s)", m->where);
    fputc('\n', f);
}

void dsv4_cmp_print(FILE *f, const dsv4_cmp_result *res, const dsv4_policy *pol)
{
    const int exact = pol->kind == DSV4_CMP_EXACT || pol->kind == DSV4_CMP_INDEX_SET;
    fprintf(f, "    %s %s: %s\n", dsv4_verdict_name(res->verdict), res->output,
            res->message[0] ? res->message : "ok");
    fprintf(f, "      policy: %s\n", pol->rule);
    if (pol->kind == DSV4_CMP_MX) /* codes: steps of the expected code; scales: binades or fp32 ulps */
        fprintf(f, "      max error %.3g (code steps / scale units), max abs %.3g (dequantized), %" PRId64
                " NaN where a number was expected or the reverse\n",
                res->max_ulp, res->max_abs, res->nonfinite_bad);
    else if (!exact && res->nonfinite_bad)
        fprintf(f, "      %" PRId64 " NaN/Inf mismatches (max abs, rel, ulp and worst/bound infinite); over the "
                "lanes where both sides are finite: nmse %.3g, cosine %.9f\n",
                res->nonfinite_bad, res->nmse, res->cosine);
    else if (!exact)
        fprintf(f, "      max abs %.3g, max rel %.3g, max %.3g ulp, worst/bound %.3g, nmse %.3g, cosine %.9f\n",
                res->max_abs, res->max_rel, res->max_ulp, res->worst_ratio, res->nmse, res->cosine);
    if (pol->kind == DSV4_CMP_FLOAT && pol->sign_test)
        fprintf(f, "      sign test S = %.2f over %" PRId64 " lanes of the last axis (|S| <= %.1f)\n", res->sign_stat,
                res->sign_lanes, DSV4_SIGN_TEST_T);
    for (int k = 0; k < res->n_first; k++)
        print_mismatch(f, k == 0 ? "first" : "     ", &res->first[k], exact);
    if (res->has_worst && res->bad > 1)
        print_mismatch(f, "worst", &res->worst, exact);
    if (res->bad || res->nan_actual != res->nan_expected)
        fprintf(f,
                "      census: expected NaN %" PRId64 ", Inf %" PRId64 ", zero %" PRId64
                " | actual NaN %" PRId64 ", Inf %" PRId64 ", zero %" PRId64 "\n",
                res->nan_expected, res->inf_expected, res->zero_expected, res->nan_actual,
                res->inf_actual, res->zero_actual);
    if (res->hint[0])
        fprintf(f, "      hint: %s\n", res->hint);
}
