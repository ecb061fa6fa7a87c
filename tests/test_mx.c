/* test_mx.c - MXFP4 / MXFP8 / FP8 group quant: scale bytes derived by hand,
 * exhaustive bf16 sweeps of the element encoders and scale rules against
 * second formulations written here, the mx comparator, and an end-to-end
 * check that a golden with one scale byte off fails naming the block. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../compare/compare.h"
#include "../harness/golden.h"
#include "../ref/fp8quant.h"
#include "../ref/mx.h"
#include "../ref/numerics.h"
#include "testutil.h"

/* ---- hand-derived scale bytes ------------------------------------------ */

/* One amax and the byte each fp4 scale rule gives it, derived by hand; -1
 * where the row does not pin a rule. */
typedef struct {
    float amax;
    int ceil, ceil_f32log2, even, ocp;
} fp4_scale_row;

static const fp4_scale_row fp4_scale_rows[] = {
    /* amax 6: ceil(log2(1)) = 0 -> 127 (ceil rules); even: 6 = 1.5*4, s < 1.75
     * -> u = 2-2 = 0 -> 127; ocp: floor(log2 6) - 2 = 0 -> 127. */
    {6.0f, 127, 127, 127, 127},
    /* amax 7 = 1.75*4: ceil(log2(7/6)) = 1 -> 128; even rounds up at 1.75: 8 -> u = 1 -> 128;
     * ocp: floor(log2 7) - 2 = 0 -> 127 (7 clips to 6). */
    {7.0f, 128, -1, 128, 127},
    /* amax 6.5 = 1.625*4: ceil -> 128 (s > 1.5), even -> 127 (s < 1.75). */
    {6.5f, 128, -1, 127, -1},
    /* Zero block: ceil rules byte 1 (6*2^-126 floor), even 0, ocp 0 (docs/semantics/quant.md Q1.4 item 2). */
    {0.0f, 1, 1, 0, 0},
    /* Inf: mode 1 255, variant A 254 (clamp), even 254, ocp NaN scale 0xFF. */
    {INFINITY, 255, 254, 254, 255},
    /* even: every amax >= 1.75*2^127 gives 254 (docs/semantics/quant.md Q1.1 correction). */
    {0x1.cp127f, -1, -1, 254, -1},
    {FLT_MAX, -1, -1, 254, -1},
    /* All-NaN block, even: the bit arithmetic on the canonical NaN 0x7FC00000:
     * + 0x200000 = 0x7FE00000, & 0xFF800000 = 0x7F800000 = +Inf, log2 -> Inf,
     * u clamped to 127 -> 254; mode 0 never emits 0xFF (docs/semantics/quant.md
     * Q1.4 item 3).  The other rules keep 0xFF (the e8m0 NaN). */
    {NAN, 255, -1, 254, 255},
    {-NAN, -1, -1, 254, -1},
};

static void check_fp4_scale(int want, uint8_t got, const char *rule, float amax)
{
    if (want >= 0)
        ck_assert_msg(got == want, "%s(%a) = %u, expected %d", rule, (double)amax, got, want);
}

START_TEST(fp4_scale_bytes_by_hand)
{
    for (size_t i = 0; i < sizeof fp4_scale_rows / sizeof fp4_scale_rows[0]; i++) {
        const fp4_scale_row *r = &fp4_scale_rows[i];
        check_fp4_scale(r->ceil, dsv4_mx_fp4_scale_ceil(r->amax), "ceil", r->amax);
        check_fp4_scale(r->ceil_f32log2, dsv4_mx_fp4_scale_ceil_f32log2(r->amax), "ceil_f32log2", r->amax);
        check_fp4_scale(r->even, dsv4_mx_fp4_scale_even(r->amax), "even", r->amax);
        check_fp4_scale(r->ocp, dsv4_mx_fp4_scale_ocp(r->amax), "ocp", r->amax);
    }
    for (uint32_t v = 0; v < 0x7F800000u; v += 0x1F3u) /* never 0xFF over the non-negative floats */
        ck_assert_uint_ne(dsv4_mx_fp4_scale_even(dsv4_f32_from_bits(v)), 0xFF);
    /* The whole block: scale 254, every code the RNE encoding of NaN. */
    float nanblk[32];
    uint8_t codes[32];
    for (int i = 0; i < 32; i++)
        nanblk[i] = NAN;
    ck_assert_uint_eq(dsv4_mx_quant_block_fp4(nanblk, 32, DSV4_MX_FP4_EVEN, DSV4_MX_ELEM_RNE, codes), 254);
    for (int i = 0; i < 32; i++)
        ck_assert_uint_eq(codes[i], dsv4_e2m1_from_f32(NAN));
}
END_TEST

START_TEST(fp8_scale_bytes_by_hand)
{
    /* 448 -> ceil(log2 1) = 0 -> 127; 450 -> 128; 224 -> -1 -> 126; zero -> 0. */
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(448.0f), 127);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(450.0f), 128);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(224.0f), 126);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(0.0f), 0);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(INFINITY), 254);
    /* floor rule: floor(log2 450) = 8 -> 135; 1 -> 127; 0 -> FLT_MIN -> 1. */
    ck_assert_uint_eq(dsv4_mx_fp8_scale_floor(450.0f), 135);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_floor(1.0f), 127);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_floor(0.0f), 1);
    /* fp32 log2 one binade low: amax/448 one fp32 ulp above 2^4, where the
     * correctly rounded fp32 log2 is exactly 4 (docs/semantics/indexer.md Q4.3). */
    float amax = nextafterf(448.0f * 16.0f, INFINITY);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil(amax), 127 + 5);
    ck_assert_uint_eq(dsv4_mx_fp8_scale_ceil_f32log2(amax), 127 + 4);
}
END_TEST

/* ---- exhaustive sweeps against second formulations ---------------------- */

/* e2m1 by search: the nearest grid value, ties to the even code, |x| > 6 -> 6. */
static uint8_t e2m1_by_search(float x)
{
    static const double g[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    double a = fabs((double)x);
    int best = 0;
    if (a > 6)
        return (uint8_t)(7 | (signbit(x) ? 8 : 0));
    for (int c = 1; c < 8; c++) {
        double d = fabs(a - g[c]), db = fabs(a - g[best]);
        if (d < db || (d == db && (c & 1) == 0))
            best = c;
    }
    return (uint8_t)(best | (signbit(x) ? 8 : 0));
}

/* e4m3fn by search over all 127 non-negative finite codes, ties to the even
 * code, saturating at 448. */
static uint8_t e4m3_by_search(float x)
{
    double a = fabs((double)x);
    int best = 0;
    if (a > 448)
        return (uint8_t)(0x7E | (signbit(x) ? 0x80 : 0));
    for (int c = 1; c <= 0x7E; c++) {
        double v = ldexp((c & 7) + ((c >> 3) ? 8 : 0), ((c >> 3) ? (c >> 3) : 1) - 10);
        double vb = ldexp((best & 7) + ((best >> 3) ? 8 : 0), ((best >> 3) ? (best >> 3) : 1) - 10);
        double d = fabs(a - v), db = fabs(a - vb);
        if (d < db || (d == db && (c & 1) == 0))
            best = c;
    }
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

START_TEST(all_bf16_through_encoders)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float x = dsv4_bf16_to_f32((uint16_t)h);
        if (isnan(x))
            continue;
        ck_assert_msg(dsv4_mx_e2m1_encode(x, DSV4_MX_ELEM_RNE) == e2m1_by_search(x), "e2m1 %a", x);
        uint8_t th = dsv4_mx_e2m1_encode(x, DSV4_MX_ELEM_THRESHOLD);
        ck_assert_msg(th == (x == 0 && signbit(x) ? 0 : e2m1_by_search(x)), "threshold %a", x);
        ck_assert_msg(dsv4_fp8_from_f32(x, DSV4_FP8_E4M3FN, 1) == e4m3_by_search(x), "e4m3 %a", x);
    }
    /* Half away from zero differs from RNE exactly at the ties that RNE sends down. */
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(0.25f, DSV4_MX_ELEM_HALF_AWAY), 1);
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(0.25f, DSV4_MX_ELEM_RNE), 0);
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(-5.0f, DSV4_MX_ELEM_HALF_AWAY), 0xF);
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(-5.0f, DSV4_MX_ELEM_RNE), 0xE);
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(2.5f, DSV4_MX_ELEM_HALF_AWAY), 5);
    ck_assert_uint_eq(dsv4_mx_e2m1_encode(0.75f, DSV4_MX_ELEM_HALF_AWAY), 2);
}
END_TEST

/* Scale rules on every non-negative finite bf16 amax against formulas in
 * long double (exact for these: ceil/floor of log2 of a ratio). */
static int ceil_log2_ref(long double r)
{
    int k = -200;
    while (ldexpl(1.0L, k) < r)
        k++;
    return k;
}

START_TEST(all_bf16_amax_through_scale_rules)
{
    for (uint32_t h = 0; h < 0x7F80; h++) {
        float a = dsv4_bf16_to_f32((uint16_t)h);
        long double a6 = fmaxl((long double)a, ldexpl(6.0L, -126));
        int c1 = ceil_log2_ref(a6 / 6.0L) + 127;
        ck_assert_msg(dsv4_mx_fp4_scale_ceil(a) == c1, "ceil %a", a);
        /* bf16 amax: a/6 is never a few fp32 ulps above 2^k, so variant A agrees. */
        ck_assert_msg(dsv4_mx_fp4_scale_ceil_f32log2(a) == c1, "A %a", a);
        long double a8 = fmaxl((long double)a, (long double)FLT_MIN);
        int c8 = ceil_log2_ref(a8 / 448.0L) + 127;
        c8 = c8 < 0 ? 0 : c8 > 254 ? 254 : c8;
        ck_assert_msg(dsv4_mx_fp8_scale_ceil(a) == c8, "fp8 %a", a);
        /* even: closed form u = e-2 (s < 1.75) or e-1 for normal amax below 2^127. */
        if (h >= 0x80 && a < ldexpf(1.0f, 126)) {
            int e;
            float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): s = 2m, exponent e-1 */
            int u = (2 * m >= 1.75f) ? e - 1 - 1 : e - 1 - 2;
            u = u < -127 ? -127 : u;
            ck_assert_msg(dsv4_mx_fp4_scale_even(a) == u + 127, "even %a", a);
        }
    }
}
END_TEST

START_TEST(block_codes_by_hand)
{
    /* Codes and ties times 4 under the ceil rule: amax 24 -> scale byte 129
     * (2^2), the scaled block is the grid itself. */
    float x[32];
    static const float v[16] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2, 2.5f, 3, 3.5f, 4, 5, 6, 6};
    static const uint8_t rne[16] = {0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7, 7};
    for (int i = 0; i < 16; i++) {
        x[i] = 4 * v[i];
        x[16 + i] = -4 * v[i];
    }
    uint8_t codes[32], packed[16], scale;
    ck_assert_uint_eq(dsv4_mx_quant_block_fp4(x, 32, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, codes), 129);
    for (int i = 0; i < 16; i++) {
        ck_assert_uint_eq(codes[i], rne[i]);
        ck_assert_uint_eq(codes[16 + i], rne[i] | 8);
    }
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_mx_quant_rows_fp4(x, 1, 32, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, packed, &scale, &st), 0);
    ck_assert_uint_eq(packed[1], 0x21);  /* x[2] = 2 -> 0.5 code 1 (low); x[3] = 3 -> 0.75 tie -> code 2 */
    ck_assert_uint_eq(packed[0], 0x00);  /* 0 and 1 (0.25*4 -> tie -> 0) */
    ck_assert_uint_eq(packed[8], 0x88);  /* -0, -1 */
    ck_assert_uint_eq(scale, 129);
    /* MXFP8: 448 and 1 -> scale 127, codes 0x7E and 0x38; -0 keeps its sign. */
    float y[32] = {448.0f, 1.0f, -0.0f};
    uint8_t d[32];
    ck_assert_uint_eq(dsv4_mx_quant_block_fp8(y, 32, DSV4_MX_FP8_CEIL, d), 127);
    ck_assert_uint_eq(d[0], 0x7E);
    ck_assert_uint_eq(d[1], 0x38);
    ck_assert_uint_eq(d[2], 0x80);
    /* FP8 group, aiter HIP: amax 448 -> scale fl(448 * fl(1/448)); codes of 448 and 1. */
    float g[128] = {448.0f, 1.0f};
    uint8_t q[128];
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 448.0f, 128, 0};
    float s = dsv4_fp8q_group(g, 128, &cfg, q);
    ck_assert_uint_eq(dsv4_f32_bits(s), dsv4_f32_bits(448.0f * dsv4_f32_from_bits(0x3B124925u)));
    ck_assert_uint_eq(q[0], 0x7E);
}
END_TEST

START_TEST(dequant_and_shuffle)
{
    uint8_t packed[16] = {0x71}, scales[1] = {126}; /* codes 1 (0.5) and 7 (6), scale 0.5 */
    double out[32];
    dsv4_mx_dequant_rows_fp4(packed, scales, 1, 32, out);
    ck_assert(out[0] == 0.25 && out[1] == 3.0 && out[2] == 0.0);
    /* Shuffled index by the formula: (33, 9) with 8 padded columns. */
    ck_assert_int_eq(dsv4_mx_scale_shuffle_idx(33, 9, 16), 1 * 32 * 16 + 1 * 256 + 1 * 64 + 1 * 4 + 0 + 0);
    int64_t r, c;
    dsv4_mx_shuffled_scale_shape(40, 512, &r, &c);
    ck_assert(r == 256 && c == 16);
}
END_TEST

/* ---- the mx comparator ---------------------------------------------------- */

START_TEST(mx_compare_reports_block_and_element)
{
    dsv4_status st = {0};
    dsv4_tensor ce = {0}, ca = {0}, se = {0}, sa = {0};
    int64_t cs[2] = {2, 64}, ss[2] = {2, 2};
    ck_assert_int_eq(dsv4_tensor_alloc(&ce, "data", DSV4_F8E4M3FN, 2, cs, &st), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(&ca, "data", DSV4_F8E4M3FN, 2, cs, &st), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(&se, "scale", DSV4_U8, 2, ss, &st), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(&sa, "scale", DSV4_U8, 2, ss, &st), 0);
    for (int i = 0; i < 128; i++)
        ((uint8_t *)ce.data)[i] = ((uint8_t *)ca.data)[i] = (uint8_t)(0x30 + i % 8);
    memset(se.data, 127, 4);
    memset(sa.data, 127, 4);
    dsv4_policy pol = {0};
    pol.kind = DSV4_CMP_MX;
    pol.block = 32;
    snprintf(pol.companion, sizeof pol.companion, "scale");
    dsv4_cmp_aux aux = {&se, &sa, NULL, NULL};
    dsv4_cmp_result res;
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_PASS);
    ((uint8_t *)sa.data)[3] = 128; /* row 1, block 1: one binade high */
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_ptr_nonnull(strstr(res.first[0].where, "block [1, 1]"));
    /* Within one binade under a budget: warn. */
    pol.scale_tol = 1;
    pol.ulp = 1e9;
    pol.budget = 0.5;
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_WARN);
    /* A code flip of one step: exact fails, 1 step with a budget passes. */
    ((uint8_t *)sa.data)[3] = 127;
    ((uint8_t *)ca.data)[5] ^= 1;
    pol.scale_tol = 0, pol.ulp = 0, pol.budget = 0;
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_ptr_nonnull(strstr(res.first[0].where, "block [0, 0] element 5"));
    pol.ulp = 1, pol.budget = 0.01;
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_PASS);
    /* Counts and labels: two scales off by one binade with no tolerance read
     * "2 of 4 blocks' scales differ", the scales tensor alone too, and the
     * failing outputs never say "ok". */
    ((uint8_t *)ca.data)[5] ^= 1;
    ((uint8_t *)sa.data)[0] = 126, ((uint8_t *)sa.data)[3] = 128;
    pol.ulp = 0, pol.budget = 0;
    ck_assert_int_eq(dsv4_compare(&ce, &ca, &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_int_eq(res.bad, 2);
    ck_assert_msg(strstr(res.message, "2 of 4 blocks' scales differ") == res.message, "%s", res.message);
    ck_assert_msg(strstr(res.message, "beyond") == NULL, "%s", res.message); /* no tolerance to be beyond */
    ck_assert_int_eq(dsv4_compare(&se, &sa, &pol, NULL, NULL, NULL, NULL, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_int_eq(res.bad, 2);
    ck_assert_str_eq(res.message, "2 of 4 blocks' scales differ");
    /* With a tolerance of one binade and no budget: both within it, warn... */
    pol.scale_tol = 1, pol.budget = 0.5;
    ck_assert_int_eq(dsv4_compare(&se, &sa, &pol, NULL, NULL, NULL, NULL, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_WARN);
    ck_assert_str_eq(res.message, "2 of 4 blocks' scales differ (0 beyond 1 binades)");
    /* ...and one of them two binades off: beyond it, failing, counted. */
    ((uint8_t *)sa.data)[3] = 129;
    ck_assert_int_eq(dsv4_compare(&se, &sa, &pol, NULL, NULL, NULL, NULL, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_int_eq(res.bad, 1);
    ck_assert_str_eq(res.message, "2 of 4 blocks' scales differ (1 beyond 1 binades)");
    /* A NaN scale against a number is counted as non-finite. */
    ((uint8_t *)sa.data)[1] = 0xFF;
    ck_assert_int_eq(dsv4_compare(&se, &sa, &pol, NULL, NULL, NULL, NULL, &res, &st), 0);
    ck_assert_int_eq(res.nonfinite_bad, 1);
    ck_assert(isinf(res.max_ulp));
    dsv4_tensor_free(&ce);
    dsv4_tensor_free(&ca);
    dsv4_tensor_free(&se);
    dsv4_tensor_free(&sa);
}
END_TEST

/* ---- end to end: one scale byte off in a golden ----------------------------- */

START_TEST(golden_scale_byte_off_by_one_fails_naming_block)
{
    char outbuf[1 << 15];
    dsv4_golden g;
    dsv4_test_golden_read("data/ci/mxfp8_heads_f32.h5", &g);
    dsv4_tensor *s = dsv4_tensors_find(&g.outputs, "scale");
    ck_assert_ptr_nonnull(s);
    ((uint8_t *)s->data)[s->shape[1] + 5] += 1; /* row 1, block 5 */
    char want[96];
    snprintf(want, sizeof want, "1 of %ld blocks' scales differ", (long)dsv4_tensor_numel(s));
    int rc = dsv4_test_check_changed_tmp(&g, outbuf, sizeof outbuf);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "block [1, 5]") != NULL, "no block named:\n%s", outbuf);
    ck_assert_msg(strstr(outbuf, "mx:") != NULL, "not an mx report:\n%s", outbuf);
    /* the headline counts the changed block, in both outputs of the pair,
     * and no failing output reads "ok" */
    ck_assert_msg(dsv4_test_count(outbuf, want) == 2, "'%s' not on both outputs:\n%s", want, outbuf);
    ck_assert_msg(strstr(outbuf, "FAIL scale: ok") == NULL && strstr(outbuf, "FAIL data: ok") == NULL, "%s", outbuf);
    /* the summary's worst column counts the mismatch (not "data 0") */
    ck_assert_msg(strstr(outbuf, "FAIL       data 1") != NULL || strstr(outbuf, "FAIL       scale 1") != NULL,
                  "worst column:\n%s", outbuf);
}
END_TEST

DSV4_TEST_MAIN("mx", "mx", 60, NULL, NULL, fp4_scale_bytes_by_hand, fp8_scale_bytes_by_hand,
               all_bf16_through_encoders, all_bf16_amax_through_scale_rules, block_codes_by_hand,
               dequant_and_shuffle, mx_compare_reports_block_and_element,
               golden_scale_byte_off_by_one_fails_naming_block)
