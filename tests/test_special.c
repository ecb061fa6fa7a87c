/* test_special.c - mismatches in lanes touched by NaN/Inf inputs, reported
 * apart (docs/semantics/numerics.md A16): kernels that differ from the
 * reference only in a NaN/Inf-input block of the ci special cases (an e8m0
 * scale 0x7F where the reference writes the NaN scale 0xFF; a finite fp8
 * code where it writes NaN) fail under --special=strict with the split
 * counts shown and pass under --special=separate with the special lanes
 * listed; one that also differs in a finite lane fails under both.  Through
 * the public API (dsv4check_judge_special) and the CLI (--actual FILE
 * --special MODE, console and JSON); the lane filter of each comparison
 * kind directly.  Runs from the repository root. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>

#include "../compare/compare.h"
#include "../compare/policy.h"
#include "../include/dsv4check.h"
#include "testutil.h"

#define SUITE "cases/ci/quant.yaml"
#define OUT_MAX (1 << 20)

DSV4_TEST_API_FIXTURE(SUITE, suite, OUT_MAX)

/* A kernel's outputs: the reference in the kernel dtypes (what --impl ref
 * produces), copied so that a test can change bytes. */
typedef struct outputs {
    dsv4check_tensors *ref;
    int n;
    dsv4check_tensor t[8];
    uint8_t *data[8];
} outputs;

static void outputs_of_reference(const dsv4check_case *c, outputs *o)
{
    memset(o, 0, sizeof *o);
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &o->ref, err, sizeof err), DSV4CHECK_OK);
    o->n = dsv4check_tensors_count(o->ref);
    ck_assert_int_le(o->n, 8);
    for (int k = 0; k < o->n; k++) {
        ck_assert_int_eq(dsv4check_tensors_get(o->ref, k, &o->t[k]), DSV4CHECK_OK);
        o->data[k] = malloc(o->t[k].nbytes ? o->t[k].nbytes : 1);
        ck_assert_ptr_nonnull(o->data[k]);
        memcpy(o->data[k], o->t[k].data, o->t[k].nbytes);
        o->t[k].data = o->data[k];
    }
}

static void outputs_free(outputs *o)
{
    for (int k = 0; k < o->n; k++)
        free(o->data[k]);
    dsv4check_tensors_free(o->ref);
}

static dsv4check_tensor *output(outputs *o, const char *name)
{
    for (int k = 0; k < o->n; k++)
        if (strcmp(o->t[k].name, name) == 0)
            return &o->t[k];
    ck_abort_msg("no output %s", name);
    return NULL;
}

/* The first byte of t equal to one of the codes (-1: none). */
static int64_t first_byte(const dsv4check_tensor *t, const int *codes, int n)
{
    const uint8_t *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        for (int k = 0; k < n; k++)
            if (p[i] == codes[k])
                return (int64_t)i;
    return -1;
}

/* The split of the output named name in v. */
static dsv4check_special_split split_of(const dsv4check_verdict *v, const char *name)
{
    for (int k = 0; k < dsv4check_verdict_output_count(v); k++) {
        dsv4check_metrics m;
        ck_assert_int_eq(dsv4check_verdict_output(v, k, &m), DSV4CHECK_OK);
        if (strcmp(m.name, name) == 0) {
            dsv4check_special_split s;
            ck_assert_int_eq(dsv4check_verdict_output_special(v, k, &s), DSV4CHECK_OK);
            return s;
        }
    }
    ck_abort_msg("no output %s in the verdict", name);
    dsv4check_special_split none = {0};
    return none;
}

static dsv4check_verdict *judge(const dsv4check_case *c, outputs *o, int mode)
{
    dsv4check_verdict *v = NULL;
    ck_assert_int_eq(dsv4check_judge_special(c, o->t, o->n, NULL, mode, &v, err, sizeof err), DSV4CHECK_OK);
    return v;
}

/* The kernel o (special lanes differ only, in output name) fails strict with
 * the counts split and passes separate with them listed. */
static void special_only(const dsv4check_case *c, outputs *o, const char *name)
{
    dsv4check_verdict *v = judge(c, o, DSV4CHECK_SPECIAL_STRICT);
    const char *rep = dsv4check_verdict_report(v);
    ck_assert_msg(dsv4check_verdict_status(v) == DSV4CHECK_EFAIL, "strict: %s", rep);
    dsv4check_special_split s = split_of(v, name);
    ck_assert_int_eq(s.has, 1);
    ck_assert_int_gt(s.lanes, 0);
    ck_assert_int_eq(s.finite_mismatches, 0);
    ck_assert_int_ge(s.special_mismatches, 1);
    ck_assert_int_eq(s.strict_verdict, 2);
    ck_assert_int_eq(s.finite_verdict, 0);
    ck_assert_str_ne(s.first_special_index, "");
    ck_assert_msg(strstr(rep, " 0 in finite lanes, ") && strstr(rep, " in lanes touched by NaN/Inf inputs"), "%s", rep);
    ck_assert_int_eq(dsv4check_verdict_special_relied(v), 0);
    dsv4check_verdict_free(v);

    v = judge(c, o, DSV4CHECK_SPECIAL_SEPARATE);
    rep = dsv4check_verdict_report(v);
    ck_assert_msg(dsv4check_verdict_status(v) == DSV4CHECK_OK, "separate: %s", rep);
    s = split_of(v, name);
    ck_assert_int_eq(s.finite_mismatches, 0);
    ck_assert_int_ge(s.special_mismatches, 1);
    ck_assert_int_eq(s.strict_verdict, 2);
    ck_assert_int_eq(dsv4check_verdict_special_relied(v), 1);
    ck_assert_msg(strstr(rep, "in lanes touched by NaN/Inf inputs, not counted (strict verdict FAIL)"), "%s", rep);
    ck_assert_msg(strstr(rep, "      special ["), "the special mismatches are listed with their location: %s", rep);
    dsv4check_verdict_free(v);
}

/* The kernel o (a finite lane of name differs too) fails under both. */
static void finite_too(const dsv4check_case *c, outputs *o, const char *name)
{
    for (int mode = DSV4CHECK_SPECIAL_STRICT; mode <= DSV4CHECK_SPECIAL_SEPARATE; mode++) {
        dsv4check_verdict *v = judge(c, o, mode);
        const char *rep = dsv4check_verdict_report(v);
        ck_assert_msg(dsv4check_verdict_status(v) == DSV4CHECK_EFAIL, "mode %d: %s", mode, rep);
        dsv4check_special_split s = split_of(v, name);
        ck_assert_int_ge(s.finite_mismatches, 1);
        ck_assert_str_ne(s.first_finite_index, "");
        ck_assert_int_eq(s.finite_verdict, 2);
        ck_assert_int_eq(dsv4check_verdict_special_relied(v), 0);
        dsv4check_verdict_free(v);
    }
}

static const int nan_e8m0[] = {0xFF};

START_TEST(mx_nan_scale_written_as_one)
{
    static const char *const cases[] = {"mxfp8_special_bf16_default", "mxfp4_special_bf16_default"};
    static const char *const codes_of[] = {"data", "x_fp4"};
    static const char *const scales_of[] = {"scale", "scales"};
    for (int i = 0; i < 2; i++) {
        const dsv4check_case *c = find_case(cases[i]);
        outputs o;
        outputs_of_reference(c, &o);
        dsv4check_tensor *sc = output(&o, scales_of[i]);
        int64_t at = first_byte(sc, nan_e8m0, 1);
        ck_assert_msg(at >= 0, "%s: the reference writes no NaN scale", cases[i]);
        ((uint8_t *)sc->data)[at] = 0x7F; /* scale 1 where the reference's is NaN */
        special_only(c, &o, scales_of[i]);
        /* and a code of the last block (finite inputs) changed too */
        dsv4check_tensor *codes = output(&o, codes_of[i]);
        ((uint8_t *)codes->data)[codes->nbytes - 1] ^= 0x01;
        finite_too(c, &o, codes_of[i]);
        outputs_free(&o);
    }
}
END_TEST

START_TEST(fp8_nan_code_written_finite)
{
    static const char *const cases[] = {"fp8_group_special_default", "fp8_group_special_fp8_fnuz"};
    static const int nan_fn[] = {0x7F, 0xFF}, nan_fnuz[] = {0x80};
    for (int i = 0; i < 2; i++) {
        const dsv4check_case *c = find_case(cases[i]);
        outputs o;
        outputs_of_reference(c, &o);
        dsv4check_tensor *y = output(&o, "y");
        int64_t at = i == 0 ? first_byte(y, nan_fn, 2) : first_byte(y, nan_fnuz, 1);
        ck_assert_msg(at >= 0, "%s: the reference writes no NaN code", cases[i]);
        ((uint8_t *)y->data)[at] = 0x7E; /* a saturating conversion: 448 (fn) / 240 (fnuz), not NaN */
        special_only(c, &o, "y");
        ((uint8_t *)y->data)[y->nbytes - 1] ^= 0x01;
        finite_too(c, &o, "y");
        outputs_free(&o);
    }
}
END_TEST

START_TEST(finite_inputs_have_no_split)
{
    const dsv4check_case *c = find_case("mxfp8_heads_f32");
    outputs o;
    outputs_of_reference(c, &o);
    dsv4check_verdict *v = judge(c, &o, DSV4CHECK_SPECIAL_SEPARATE);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_OK);
    ck_assert_int_eq(split_of(v, "data").has, 0);
    ck_assert_ptr_null(strstr(dsv4check_verdict_report(v), "special lanes"));
    dsv4check_verdict_free(v);
    /* a difference in a case without NaN/Inf inputs fails under separate too */
    dsv4check_tensor *d = output(&o, "data");
    ((uint8_t *)d->data)[0] ^= 0x01;
    v = judge(c, &o, DSV4CHECK_SPECIAL_SEPARATE);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_EFAIL);
    dsv4check_verdict_free(v);
    ck_assert_int_eq(dsv4check_judge_special(c, o.t, o.n, NULL, 2, &v, err, sizeof err), DSV4CHECK_EINPUT);
    outputs_free(&o);
}
END_TEST

START_TEST(cli_special_modes)
{
    char dir[64], path[128], json[128];
    dsv4_test_mkdtemp(dir, sizeof dir, "dsv4special");
    snprintf(path, sizeof path, "%s/actual.h5", dir);
    snprintf(json, sizeof json, "%s/r.json", dir);
    const dsv4check_case *c = find_case("mxfp8_special_bf16_default");
    outputs o;
    outputs_of_reference(c, &o);
    dsv4check_tensor *sc = output(&o, "scale");
    int64_t at = first_byte(sc, nan_e8m0, 1);
    ck_assert_int_ge(at, 0);
    ((uint8_t *)sc->data)[at] = 0x7F;
    dsv4check_actuals *w;
    ck_assert_int_eq(dsv4check_actuals_open(path, &w, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_actuals_add(w, dsv4check_case_name(c), dsv4check_case_op(c), dsv4check_case_variant(c),
                                           o.t, o.n, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_actuals_commit(w, err, sizeof err), DSV4CHECK_OK);
    outputs_free(&o);

    const char *sel = SUITE " --filter '^mxfp8_special_bf16_default$'";
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "run %s --actual %s --json %s", sel, path, json), 1);
    ck_assert_msg(strstr(out, "mismatches: 0 in finite lanes, 1 in lanes touched by NaN/Inf inputs"), "%s", out);
    char *j = dsv4_test_slurp(json);
    ck_assert_msg(strstr(j, "\"special_mode\": \"strict\", \"special_lanes\": true, \"special_relied\": false"), "%s",
                  j);
    ck_assert_msg(strstr(j, "\"finite_mismatches\": 0, \"special_mismatches\": 1"), "%s", j);
    free(j);

    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "run %s --actual %s --special separate --json %s", sel, path, json),
                     0);
    ck_assert_msg(strstr(out, "PASS      mxfp8_special_bf16_default"), "%s", out);
    ck_assert_msg(strstr(out, "(1 of the passed cases pass under --special=separate only"), "%s", out);
    ck_assert_msg(strstr(out, "note: 1 mismatch in lanes touched by NaN/Inf inputs, not counted"), "%s", out);
    j = dsv4_test_slurp(json);
    ck_assert_msg(strstr(j, "\"special_mode\": \"separate\", \"special_lanes\": true, \"special_relied\": true"), "%s",
                  j);
    ck_assert_msg(strstr(j, "\"strict_verdict\": \"FAIL\", \"finite_verdict\": \"pass\""), "%s", j);
    free(j);

    /* -j 2: the split crosses the worker processes */
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "run %s --actual %s --special=separate -j 2", sel, path), 0);
    ck_assert_msg(strstr(out, "pass under --special=separate only"), "%s", out);
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "run %s --actual %s --special lenient", sel, path), 2);
    ck_assert_msg(strstr(out, "--special lenient: strict or separate"), "%s", out);
    dsv4_test_rm_rf(dir);
}
END_TEST

/* ---- the lane filter of every comparison kind (dsv4_cmp_aux.lanes) ---- */

/* e against a under pol, counting only the lanes aux->lanes = lanes marks:
 * the verdict must be want, with compared lanes counted (-1: any). */
static dsv4_cmp_result compare_lanes(const dsv4_tensor *e, const dsv4_tensor *a, const dsv4_policy *pol,
                                     dsv4_cmp_aux *aux, const uint8_t *lanes, dsv4_verdict want, int64_t compared)
{
    dsv4_status st = {0};
    dsv4_cmp_result res;
    aux->lanes = lanes;
    ck_assert_int_eq(dsv4_compare(e, a, pol, NULL, NULL, NULL, aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, want);
    if (compared >= 0)
        ck_assert_int_eq(res.compared, compared);
    return res;
}

/* Two tensors of one name, dtype and 2-D shape (expected and actual). */
static void alloc_pair(dsv4_tensor *e, dsv4_tensor *a, const char *name, dsv4_dtype dt, int64_t rows, int64_t cols)
{
    dsv4_status st = {0};
    int64_t sh[2] = {rows, cols};
    ck_assert_int_eq(dsv4_tensor_alloc(e, name, dt, 2, sh, &st), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(a, name, dt, 2, sh, &st), 0);
}

START_TEST(lane_filter_per_kind)
{
    dsv4_status st = {0};
    dsv4_cmp_result res;
    /* exact: only the lanes kept are compared and counted */
    dsv4_tensor e = {0}, a = {0};
    alloc_pair(&e, &a, "idx", DSV4_I32, 2, 4);
    int32_t *pe = e.data, *pa = a.data;
    for (int i = 0; i < 8; i++)
        pe[i] = pa[i] = i;
    pa[1] = 7; /* row 0 has {0, 7, 2, 3}: a different set, one differing element */
    uint8_t row1[8] = {0, 0, 0, 0, 1, 1, 1, 1}, row0[8] = {1, 1, 0, 0, 0, 0, 0, 0};
    dsv4_policy pol = {0};
    dsv4_policy_exact(&pol, "test");
    dsv4_cmp_aux aux = {NULL, NULL, NULL, NULL};
    compare_lanes(&e, &a, &pol, &aux, row1, DSV4_PASS, 4);
    res = compare_lanes(&e, &a, &pol, &aux, row0, DSV4_FAIL, 2);
    ck_assert_int_eq(res.bad, 1);
    ck_assert_str_eq(res.first[0].index, "[0, 1]");
    /* index_set: a row counts when any of its lanes does */
    dsv4_policy_index_set(&pol, "", 0, "test");
    pol.companion[0] = '\0';
    uint8_t one_of_row0[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    compare_lanes(&e, &a, &pol, &aux, one_of_row0, DSV4_FAIL, 1);
    compare_lanes(&e, &a, &pol, &aux, row1, DSV4_PASS, 1);
    dsv4_tensor_free(&e);
    dsv4_tensor_free(&a);

    /* mx: a block counts when any of its code lanes does, its scale with it;
     * widening marks the whole block, codes and scale */
    dsv4_tensor ce = {0}, ca = {0}, se = {0}, sa = {0};
    alloc_pair(&ce, &ca, "data", DSV4_F8E4M3FN, 1, 64);
    alloc_pair(&se, &sa, "scale", DSV4_F8E8M0, 1, 2);
    memset(se.data, 0xFF, 1); /* block 0: NaN scale expected, 1 written */
    memset(sa.data, 0x7F, 1);
    ((uint8_t *)se.data)[1] = ((uint8_t *)sa.data)[1] = 0x7F;
    dsv4_policy_mx(&pol, "scale", 32, "test");
    uint8_t code_lanes[64] = {0}, scale_lanes[2] = {0};
    code_lanes[5] = 1;
    ck_assert_int_eq(dsv4_mx_widen_lanes(&ce, &se, &pol, code_lanes, scale_lanes, &st), 0);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(code_lanes[i], i < 32);
    ck_assert_int_eq(scale_lanes[0], 1);
    ck_assert_int_eq(scale_lanes[1], 0);
    uint8_t finite_lanes[64];
    for (int i = 0; i < 64; i++)
        finite_lanes[i] = !code_lanes[i];
    dsv4_cmp_aux mx = {&se, &sa, NULL, NULL};
    compare_lanes(&ce, &ca, &pol, &mx, finite_lanes, DSV4_PASS, 32);
    res = compare_lanes(&ce, &ca, &pol, &mx, code_lanes, DSV4_FAIL, -1);
    ck_assert_ptr_nonnull(strstr(res.first[0].where, "block [0, 0]"));
    /* the scales' own comparison, per scale */
    dsv4_policy_mx(&pol, "data", 32, "test");
    dsv4_cmp_aux sc = {NULL, NULL, NULL, NULL};
    uint8_t other[2] = {0, 1};
    compare_lanes(&se, &sa, &pol, &sc, scale_lanes, DSV4_FAIL, -1);
    compare_lanes(&se, &sa, &pol, &sc, other, DSV4_PASS, 1);
    dsv4_tensor_free(&ce);
    dsv4_tensor_free(&ca);
    dsv4_tensor_free(&se);
    dsv4_tensor_free(&sa);
}
END_TEST

DSV4_TEST_MAIN("special", "special", 120, setup, teardown, mx_nan_scale_written_as_one, fp8_nan_code_written_finite,
               finite_inputs_have_no_split, cli_special_modes, lane_filter_per_kind)
