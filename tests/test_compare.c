/* test_compare.c - the comparator core: exact and float policies, NaN
 * policy, census, first/worst mismatches, verdicts and hints. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "../compare/compare.h"
#include "../ref/numerics.h"
#include "testutil.h"

static dsv4_tensor make(dsv4_dtype dt, int64_t rows, int64_t cols)
{
    dsv4_tensor t;
    int64_t shape[2] = {rows, cols};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_tensor_alloc(&t, "out", dt, 2, shape, &st), 0);
    return t;
}

/* The exact policy with every other field zero. */
static dsv4_policy exact_policy(void)
{
    dsv4_policy p;
    memset(&p, 0, sizeof p);
    p.kind = DSV4_CMP_EXACT;
    return p;
}

static dsv4_policy float_policy(double atol, double rtol)
{
    dsv4_policy p = exact_policy();
    p.kind = DSV4_CMP_FLOAT;
    p.atol = atol;
    p.rtol = rtol;
    p.output_dtype = DSV4_BF16;
    strcpy(p.rule, "test");
    return p;
}

/* The whole tensors compared (no mask, locator or lanes): a verdict, never
 * an error, is what every case here expects. */
static void compare_whole(const dsv4_tensor *e, const dsv4_tensor *a, const dsv4_policy *p, dsv4_cmp_result *r)
{
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_compare(e, a, p, NULL, NULL, NULL, NULL, r, &st), 0);
}

static void free_pair(dsv4_tensor *e, dsv4_tensor *a)
{
    dsv4_tensor_free(e);
    dsv4_tensor_free(a);
}

START_TEST(exact_names_the_element)
{
    dsv4_tensor e = make(DSV4_I32, 3, 4), a = make(DSV4_I32, 3, 4);
    int32_t *pe = e.data, *pa = a.data;
    for (int i = 0; i < 12; i++)
        pe[i] = pa[i] = i;
    pa[6] = 99; /* [1, 2] */
    dsv4_policy p = exact_policy();
    dsv4_cmp_result r;
    dsv4_status st = {0};
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_FAIL);
    ck_assert_int_eq(r.bad, 1);
    ck_assert_str_eq(r.first[0].index, "[1, 2]");
    ck_assert(r.first[0].expected == 6 && r.first[0].actual == 99);
    /* a mask that excludes the element makes it pass */
    uint8_t mask[12];
    memset(mask, 1, sizeof mask);
    mask[6] = 0;
    ck_assert_int_eq(dsv4_compare(&e, &a, &p, mask, NULL, NULL, NULL, &r, &st), 0);
    ck_assert_int_eq(r.verdict, DSV4_PASS);
    free_pair(&e, &a);
}
END_TEST

START_TEST(exact_poison_hint)
{
    dsv4_tensor e = make(DSV4_I32, 2, 2), a = make(DSV4_I32, 2, 2);
    memset(a.data, 0x7B, a.nbytes);
    dsv4_policy p = exact_policy();
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 4);
    ck_assert_ptr_nonnull(strstr(r.hint, "never written"));
    free_pair(&e, &a);
}
END_TEST

START_TEST(float_tolerance_and_worst)
{
    dsv4_tensor e = make(DSV4_F64, 1, 4), a = make(DSV4_F32, 1, 4);
    double ev[4] = {1.0, 2.0, -3.0, 0.0};
    float av[4] = {1.001f, 2.5f, -3.0f, 0.0f};
    memcpy(e.data, ev, sizeof ev);
    memcpy(a.data, av, sizeof av);
    dsv4_policy p = float_policy(0.0, 0.01);
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 1);
    ck_assert_str_eq(r.worst.index, "[0, 1]");
    ck_assert(fabs(r.worst.abs_err - 0.5) < 1e-12);
    ck_assert(fabs(r.worst.rel_err - 0.25) < 1e-12);
    ck_assert(fabs(r.worst.ulp_err - 0.5 / 0.015625) < 1e-9); /* bf16 ulp at 2 is 2^-6 */
    ck_assert_int_eq(r.verdict, DSV4_FAIL);
    p.budget = 0.5; /* 1 of 4 within a 50% budget: warn */
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_WARN);
    free_pair(&e, &a);
}
END_TEST

START_TEST(float_nan_policy)
{
    dsv4_tensor e = make(DSV4_F64, 1, 2), a = make(DSV4_F64, 1, 2);
    double ev[2] = {NAN, 1.0}, av[2] = {0.0, NAN};
    memcpy(e.data, ev, sizeof ev);
    memcpy(a.data, av, sizeof av);
    dsv4_policy p = float_policy(1e9, 0);
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 2); /* NaN expected but finite, and vice versa */
    ck_assert_int_eq(r.nan_expected, 1);
    ck_assert_int_eq(r.nan_actual, 1);
    p.nan = DSV4_NAN_IGNORE;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 1); /* only the unexpected NaN */
    free_pair(&e, &a);
}
END_TEST

/* A NaN where a number is expected, in an otherwise exact output: counted,
 * located, and the metrics do not read "max rel 0, nmse 0, cosine 1" as if
 * nothing were wrong (the maxima are infinite; nmse and cosine, over the
 * finite lanes, say so beside the NaN count in the printed report). */
START_TEST(float_nan_metrics_not_clean)
{
    dsv4_tensor e = make(DSV4_F64, 2, 4), a = make(DSV4_F64, 2, 4);
    for (int i = 0; i < 8; i++)
        ((double *)e.data)[i] = ((double *)a.data)[i] = 1.0 + i;
    ((double *)a.data)[6] = NAN; /* [1, 2] */
    dsv4_policy p = float_policy(0, 1e-3);
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_FAIL);
    ck_assert_int_eq(r.bad, 1);
    ck_assert_int_eq(r.nonfinite_bad, 1);
    ck_assert_str_eq(r.first[0].index, "[1, 2]");
    ck_assert(isinf(r.max_abs) && isinf(r.max_rel) && isinf(r.max_ulp) && isinf(r.worst_ratio));
    ck_assert_ptr_nonnull(strstr(r.hint, "non-finite on one side"));
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    ck_assert_ptr_nonnull(f);
    dsv4_cmp_print(f, &r, &p);
    fclose(f);
    ck_assert_msg(strstr(buf, "1 NaN/Inf mismatches") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "over the lanes where both sides are finite") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "max rel 0,") == NULL, "%s", buf);
    /* Inf against a number, and a finite mismatch beside: both counted,
     * only the Inf one as non-finite; the hint is then not the NaN one. */
    ((double *)a.data)[6] = 7.0;
    ((double *)a.data)[1] = INFINITY;
    ((double *)a.data)[3] = 5.0;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 2);
    ck_assert_int_eq(r.nonfinite_bad, 1);
    ck_assert_ptr_null(strstr(r.hint, "non-finite on one side"));
    free_pair(&e, &a);
}
END_TEST

START_TEST(float_half_hint)
{
    dsv4_tensor e = make(DSV4_F64, 1, 8), a = make(DSV4_F64, 1, 8);
    for (int i = 0; i < 8; i++) {
        ((double *)e.data)[i] = i + 1.0;
        ((double *)a.data)[i] = 0.5 * (i + 1.0);
    }
    dsv4_policy p = float_policy(0, 1e-3);
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_ptr_nonnull(strstr(r.hint, "0.5 x expected"));
    free_pair(&e, &a);
}
END_TEST

START_TEST(shape_mismatch_fails)
{
    dsv4_tensor e = make(DSV4_I32, 2, 3), a = make(DSV4_I32, 3, 2);
    dsv4_policy p = exact_policy();
    dsv4_cmp_result r;
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_FAIL);
    ck_assert_ptr_nonnull(strstr(r.message, "shape [3, 2], expected [2, 3]"));
    free_pair(&e, &a);
}
END_TEST

/* The sign test: a two-sided rounding passes, one ulp up on every element
 * (inside a bound of 3 ulps) fails and names the direction; exact values
 * give S = 0; NaN lanes are left to the comparison. */
START_TEST(sign_test_one_sided_fails)
{
    const int64_t R = 16, D = 512;
    dsv4_tensor e = make(DSV4_F64, R, D), a = make(DSV4_BF16, R, D);
    uint64_t x = 88172645463325252u;
    for (int64_t i = 0; i < R * D; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        dsv4_tensor_set(&e, i, ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 8.0);
    }
    dsv4_tensor_set(&e, 5, NAN);
    dsv4_policy p = float_policy(0, 0);
    p.ulp = 3.0; /* a binade crossing: 1.5 ulps at e can be 3 */
    p.sign_test = 1;
    dsv4_cmp_result r;
    for (int64_t i = 0; i < R * D; i++) /* round to nearest: two-sided */
        dsv4_tensor_set(&a, i, dsv4_tensor_get(&e, i));
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_PASS);
    ck_assert(fabs(r.sign_stat) < DSV4_SIGN_TEST_T && r.sign_lanes == D);
    uint16_t *b = a.data;
    for (int64_t i = 0; i < R * D; i++) /* one ulp toward +inf */
        if ((b[i] & 0x7F80u) != 0x7F80u)
            b[i] = (b[i] & 0x8000u) ? (uint16_t)(b[i] - 1u) : (uint16_t)(b[i] + 1u);
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.bad, 0);
    ck_assert_int_eq(r.verdict, DSV4_FAIL);
    ck_assert(r.sign_stat > 20.0);
    ck_assert_ptr_nonnull(strstr(r.message, "lean one way"));
    ck_assert_ptr_nonnull(strstr(r.hint, "actual above the ideal"));
    p.sign_test = 0; /* the element bound alone admits it */
    compare_whole(&e, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_PASS);
    p.sign_test = 1; /* exact values: no error, S = 0 */
    dsv4_tensor ex = make(DSV4_F64, R, D);
    for (int64_t i = 0; i < R * D; i++)
        dsv4_tensor_set(&ex, i, dsv4_tensor_get(&a, i));
    compare_whole(&ex, &a, &p, &r);
    ck_assert_int_eq(r.verdict, DSV4_PASS);
    ck_assert(r.sign_stat == 0.0 && r.sign_lanes == 0);
    dsv4_tensor_free(&e), dsv4_tensor_free(&a), dsv4_tensor_free(&ex);
}
END_TEST

DSV4_TEST_MAIN("compare", "core", 0, NULL, NULL, exact_names_the_element, exact_poison_hint,
               float_tolerance_and_worst, float_nan_policy, float_nan_metrics_not_clean, float_half_hint,
               shape_mismatch_fails, sign_test_one_sided_fails)
