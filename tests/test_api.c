/* test_api.c - the public C API (include/dsv4check.h), through that header
 * only: suites and cases, inputs from the generator and from goldens,
 * declared outputs, the reference, judging given buffers (verdicts,
 * metrics, and report text identical to the CLI's with the example
 * plug-in's planted bug), bad outputs, variants, selection against the
 * CLI's shards, golden files, actuals files and every error path.
 * Runs from the repository root; the CLI is build/dsv4check or $DSV4CHECK. */
#define _POSIX_C_SOURCE 200809L
#include <libgen.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../include/dsv4check.h"
#include "testutil.h"

#define SUITE "cases/ci.yaml"
#define OUT_MAX (1 << 20)

DSV4_TEST_API_FIXTURE(SUITE, ci, OUT_MAX)

static dsv4check_tensor get(const dsv4check_tensors *ts, const char *name)
{
    dsv4check_tensor t;
    int k = dsv4check_tensors_find(ts, name);
    ck_assert_msg(k >= 0, "no tensor %s", name);
    ck_assert_int_eq(dsv4check_tensors_get(ts, k, &t), DSV4CHECK_OK);
    return t;
}

/* The report text minus the seconds of its first line ("... 0.012 s"). */
static void strip_seconds(char *s)
{
    char *nl = strchr(s, '\n'), *end = nl ? nl : s + strlen(s);
    char *p = end;
    while (p > s && p[-1] != ']')
        p--;
    memmove(p, end, strlen(end) + 1);
}

/* The example plug-in with its planted bug, built beside the tests. */
static const char *wrong_plugin(void)
{
    static char buf[600];
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dsv4_test_exe());
    snprintf(buf, sizeof buf, "%s/tests/libexample_wrong.so", dirname(dir));
    return buf;
}

static dsv4check_verdict *judge(const dsv4check_case *c, const dsv4check_tensors *outs,
                                const dsv4check_judge_opts *o)
{
    dsv4check_tensor t[24];
    int n = dsv4check_tensors_count(outs);
    for (int k = 0; k < n; k++)
        ck_assert_int_eq(dsv4check_tensors_get(outs, k, &t[k]), DSV4CHECK_OK);
    dsv4check_verdict *v = NULL;
    ck_assert_int_eq(dsv4check_judge(c, t, n, o, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_ptr_nonnull(v);
    return v;
}

START_TEST(test_version_and_ops)
{
    ck_assert_int_eq(dsv4check_api_version(), DSV4CHECK_API_VERSION);
    ck_assert_int_gt((int)strlen(dsv4check_version()), 0);
    ck_assert_int_ge(dsv4check_op_count(), 29);
    ck_assert_ptr_null(dsv4check_op_name(dsv4check_op_count()));
    ck_assert_int_eq(dsv4check_op_variant_count("mxfp8_quant"), 3);
    ck_assert_str_eq(dsv4check_op_variant_name("mxfp8_quant", 0), "default");
    ck_assert_str_eq(dsv4check_op_variant_name("mxfp8_quant", 1), "log2=exact");
    ck_assert_ptr_null(dsv4check_op_variant_name("mxfp8_quant", 3));
    ck_assert_int_eq(dsv4check_op_variant_count("no_such_op"), -1);
    ck_assert_int_eq(dsv4check_op_output_count("mxfp8_quant"), 2);
    ck_assert_str_eq(dsv4check_op_output_name("mxfp8_quant", 0), "data");
    ck_assert_int_eq(dsv4check_op_output_dtype("mxfp8_quant", 0), DSV4CHECK_FLOAT8_E4M3FN);
    ck_assert_int_eq(dsv4check_op_output_dtype("mxfp8_quant", 1), DSV4CHECK_UINT8);
    ck_assert_int_eq(dsv4check_dtype_parse("bfloat16"), DSV4CHECK_BFLOAT16);
    ck_assert_str_eq(dsv4check_dtype_name(DSV4CHECK_FLOAT8_E4M3FNUZ), "float8_e4m3fnuz");
    ck_assert_int_eq(dsv4check_dtype_parse("bfloat17"), -1);
    ck_assert_ptr_null(dsv4check_dtype_name(DSV4CHECK_DTYPE_COUNT));
    ck_assert_uint_eq(dsv4check_dtype_size(DSV4CHECK_BFLOAT16), 2);
    ck_assert_uint_eq(dsv4check_dtype_size(99), 0);
}
END_TEST

START_TEST(test_suite_and_case_fields)
{
    char line[128];
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "list %s", SUITE), 0);
    int n = 0;
    ck_assert_int_eq(sscanf(out, "%127s (suite ci): %d cases", line, &n), 2);
    ck_assert_int_eq(dsv4check_suite_count(ci), n);
    ck_assert_str_eq(dsv4check_suite_name(ci), "ci");
    ck_assert_ptr_null(dsv4check_suite_case(ci, n));
    const dsv4check_case *c = find_case("combine_mixed_prefill_c4");
    ck_assert_str_eq(dsv4check_case_op(c), "combine_topk_swa_indices");
    ck_assert_str_eq(dsv4check_case_variant(c), "default");
    ck_assert_str_eq(dsv4check_case_golden(c), "cases/ci/../../data/ci/combine_mixed_prefill_c4.h5");
    ck_assert_str_eq(dsv4check_case_origin(c), "cases/ci/indices.yaml:16:5");
    int tags = 0;
    for (int k = 0; k < dsv4check_case_tag_count(c); k++)
        tags += strcmp(dsv4check_case_tag(c, k), "prefill") == 0;
    ck_assert_int_eq(tags, 1);
    dsv4check_param p;
    int seen = 0;
    for (int k = 0; k < dsv4check_case_param_count(c); k++) {
        ck_assert_int_eq(dsv4check_case_param(c, k, &p), DSV4CHECK_OK);
        if (strcmp(p.name, "compress_ratio") == 0) {
            ck_assert_int_eq(p.kind, DSV4CHECK_PARAM_INT);
            ck_assert_int_eq(p.i, 4);
            seen++;
        } else if (strcmp(p.name, "query_lens") == 0) {
            ck_assert_int_eq(p.kind, DSV4CHECK_PARAM_INTLIST);
            ck_assert_int_eq(p.n, 4);
            ck_assert_int_eq(p.list[3], 300);
            seen++;
        } else if (strcmp(p.name, "invalid_frac") == 0) { /* a default, filled in */
            ck_assert_int_eq(p.kind, DSV4CHECK_PARAM_FLOAT);
            ck_assert(p.f == 0.0);
            seen++;
        }
    }
    ck_assert_int_eq(seen, 3);
    ck_assert_int_eq(dsv4check_case_param(c, dsv4check_case_param_count(c), &p), DSV4CHECK_EINPUT);
}
END_TEST

/* Generated inputs equal the golden's bit for bit (what run checks). */
START_TEST(test_inputs_generated_equal_golden)
{
    const dsv4check_case *c = find_case("mxfp8_special_bf16_default");
    dsv4check_tensors *gen = NULL, *gold = NULL;
    ck_assert_int_eq(dsv4check_case_inputs(c, DSV4CHECK_INPUTS_GENERATE, &gen, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_case_inputs(c, DSV4CHECK_INPUTS_GOLDEN, &gold, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_tensors_count(gen), dsv4check_tensors_count(gold));
    dsv4check_tensor a = get(gen, "x"), b = get(gold, "x");
    ck_assert_int_eq(a.dtype, DSV4CHECK_BFLOAT16);
    ck_assert_int_eq(a.ndim, 2);
    ck_assert_int_eq(b.ndim, 2);
    ck_assert(a.shape[0] == b.shape[0] && a.shape[1] == b.shape[1]);
    ck_assert_uint_eq(a.nbytes, (size_t)(a.shape[0] * a.shape[1] * 2));
    ck_assert_int_eq(memcmp(a.data, b.data, a.nbytes), 0);
    ck_assert_int_eq(dsv4check_tensors_get(gen, 99, &a), DSV4CHECK_EINPUT);
    ck_assert_int_eq(dsv4check_tensors_find(gen, "nope"), -1);
    dsv4check_tensors_free(gen);
    dsv4check_tensors_free(gold);
}
END_TEST

/* Declared outputs, the reference in the kernel dtypes judged as an
 * implementation: PASS, with the CLI's first line. */
START_TEST(test_reference_passes)
{
    const char *names[] = {"combine_mixed_prefill_c4", "mxfp8_special_bf16_default", "attn_prefill_c4",
                           "gemm_bpre_m16_k512"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const dsv4check_case *c = find_case(names[i]);
        dsv4check_tensors *in = NULL, *decl = NULL, *ref = NULL;
        ck_assert_int_eq(dsv4check_case_inputs(c, DSV4CHECK_INPUTS_AUTO, &in, err, sizeof err), DSV4CHECK_OK);
        ck_assert_int_eq(dsv4check_case_outputs(c, in, &decl, err, sizeof err), DSV4CHECK_OK);
        ck_assert_int_eq(dsv4check_case_reference(c, in, 0, &ref, err, sizeof err), DSV4CHECK_OK);
        ck_assert_int_eq(dsv4check_tensors_count(decl), dsv4check_op_output_count(dsv4check_case_op(c)));
        for (int k = 0; k < dsv4check_tensors_count(decl); k++) {
            dsv4check_tensor d, r;
            dsv4check_tensors_get(decl, k, &d);
            r = get(ref, d.name);
            ck_assert_int_eq(d.dtype, dsv4check_op_output_dtype(dsv4check_case_op(c), k));
            ck_assert_int_eq(r.dtype, d.dtype);
            ck_assert_uint_eq(r.nbytes, d.nbytes);
        }
        dsv4check_verdict *v = judge(c, ref, NULL);
        ck_assert_msg(dsv4check_verdict_status(v) == DSV4CHECK_OK, "%s", dsv4check_verdict_report(v));
        ck_assert_str_eq(dsv4check_verdict_word(v), "PASS");
        ck_assert_str_eq(dsv4check_verdict_case(v), names[i]);
        char head[300];
        snprintf(head, sizeof head, "PASS      %s  [%s %s] ", names[i], dsv4check_case_op(c),
                 dsv4check_case_variant(c));
        ck_assert_msg(strncmp(dsv4check_verdict_report(v), head, strlen(head)) == 0, "%s",
                      dsv4check_verdict_report(v));
        ck_assert_int_eq(dsv4check_verdict_output_count(v), dsv4check_tensors_count(decl));
        dsv4check_metrics m;
        ck_assert_int_eq(dsv4check_verdict_output(v, 0, &m), DSV4CHECK_OK);
        ck_assert_int_eq(m.verdict, 0);
        ck_assert_int_eq(m.mismatches, 0);
        ck_assert_int_eq(m.has_first, 0);
        ck_assert_int_gt((int)strlen(m.rule), 0);
        ck_assert_int_eq(dsv4check_verdict_output(v, 99, &m), DSV4CHECK_EINPUT);
        dsv4check_verdict_free(v);
        dsv4check_tensors_free(in);
        dsv4check_tensors_free(decl);
        dsv4check_tensors_free(ref);
    }
}
END_TEST

/* The ideal reference of a float output is the golden dtype with the
 * kernel dtype as output_dtype; the expected set is the golden's. */
START_TEST(test_reference_ideal_and_expected)
{
    const dsv4check_case *c = find_case("attn_prefill_c4");
    dsv4check_tensors *ideal = NULL, *kern = NULL, *exp = NULL;
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 1, &ideal, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &kern, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_case_expected(c, &exp, err, sizeof err), DSV4CHECK_OK);
    dsv4check_tensor k0, i0, e0;
    dsv4check_tensors_get(kern, 0, &k0);
    i0 = get(ideal, k0.name);
    e0 = get(exp, k0.name);
    ck_assert_int_eq(k0.dtype, DSV4CHECK_BFLOAT16);
    ck_assert_int_eq(i0.output_dtype, DSV4CHECK_BFLOAT16);
    ck_assert_int_eq(e0.output_dtype, DSV4CHECK_BFLOAT16);
    ck_assert_int_eq(i0.dtype, e0.dtype);
    ck_assert_uint_eq(i0.nbytes, e0.nbytes);
    ck_assert_int_eq(memcmp(i0.data, e0.data, i0.nbytes), 0); /* the golden is the reference */
    dsv4check_tensors_free(ideal);
    dsv4check_tensors_free(kern);
    dsv4check_tensors_free(exp);
}
END_TEST

/* The example plug-in's planted bug (row 1's first window entry + 1),
 * judged from buffers, gives the CLI's report for that plug-in byte for
 * byte, timing aside. */
START_TEST(test_planted_bug_report_equals_cli)
{
    const char *name = "combine_mixed_prefill_c4";
    const dsv4check_case *c = find_case(name);
    dsv4check_tensors *ref = NULL;
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &ref, err, sizeof err), DSV4CHECK_OK);
    dsv4check_tensor ci_ = get(ref, "combined_indices"), lens = get(ref, "combined_lens");
    const int64_t P = ci_.shape[1];
    int32_t *rows = ci_.data;
    /* Row 1 is request 1's one token, at position 7 (prefix 7): its top-k
     * part is (7 + 1) / 4 = 2 long, so the window starts at column 2. */
    const int64_t tk = 2;
    ck_assert_int_eq(((int32_t *)lens.data)[1], tk + 8);
    rows[1 * P + tk] += 1;
    const dsv4check_judge_opts o = {.impl = wrong_plugin(), .argv0 = dsv4_test_exe()};
    dsv4check_verdict *v = judge(c, ref, &o);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_EFAIL);
    dsv4check_metrics m;
    ck_assert_int_eq(dsv4check_verdict_output(v, 0, &m), DSV4CHECK_OK);
    ck_assert_str_eq(m.name, "combined_indices");
    ck_assert_int_eq(m.verdict, 2);
    ck_assert_str_eq(m.kind, "exact");
    ck_assert_int_eq(m.mismatches, 1);
    ck_assert_int_eq(m.has_first, 1);
    ck_assert_str_eq(m.first_index, "[1, 2]");
    ck_assert_msg(strstr(m.first_where, "window part") != NULL, "%s", m.first_where);
    ck_assert(m.first_actual == m.first_expected + 1);
    int rc = dsv4_test_cli(out, OUT_MAX, "run %s --filter '^%s$' --impl %s", SUITE, name, wrong_plugin());
    ck_assert_int_eq(rc, 1);
    char *summary = strstr(out, "\ncase ");
    ck_assert_ptr_nonnull(summary);
    summary[0] = '\0';
    char *mine = strdup(dsv4check_verdict_report(v));
    strip_seconds(mine);
    strip_seconds(out);
    ck_assert_str_eq(mine, out);
    free(mine);
    dsv4check_verdict_free(v);
    dsv4check_tensors_free(ref);
}
END_TEST

/* Outputs that do not fit the op are BAD-INPUT verdicts naming them. */
START_TEST(test_bad_outputs)
{
    const dsv4check_case *c = find_case("mxfp8_special_bf16_default");
    dsv4check_tensors *ref = NULL;
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &ref, err, sizeof err), DSV4CHECK_OK);
    dsv4check_tensor t[3];
    t[0] = get(ref, "data");
    t[1] = get(ref, "scale");
    dsv4check_verdict *v = NULL;
    /* missing */
    ck_assert_int_eq(dsv4check_judge(c, t, 1, NULL, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(dsv4check_verdict_error(v), "output 'scale' was not given"), "%s",
                  dsv4check_verdict_error(v));
    ck_assert_msg(strstr(dsv4check_verdict_report(v), "BAD-INPUT mxfp8_special_bf16_default"), "%s",
                  dsv4check_verdict_report(v));
    dsv4check_verdict_free(v);
    /* extra */
    t[2] = t[1];
    t[2].name = "scales";
    ck_assert_int_eq(dsv4check_judge(c, t, 3, NULL, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_msg(strstr(dsv4check_verdict_error(v), "'scales' is not an output of mxfp8_quant"), "%s",
                  dsv4check_verdict_error(v));
    dsv4check_verdict_free(v);
    /* wrong dtype */
    t[0].dtype = DSV4CHECK_UINT8;
    ck_assert_int_eq(dsv4check_judge(c, t, 2, NULL, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(dsv4check_verdict_error(v), "output 'data' is uint8, the op produces float8_e4m3fn"),
                  "%s", dsv4check_verdict_error(v));
    dsv4check_verdict_free(v);
    t[0].dtype = DSV4CHECK_FLOAT8_E4M3FN;
    /* wrong shape, same byte count */
    int64_t flat[1] = {t[0].shape[0] * t[0].shape[1]};
    const int64_t *shape = t[0].shape;
    t[0].ndim = 1;
    t[0].shape = flat;
    ck_assert_int_eq(dsv4check_judge(c, t, 2, NULL, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_msg(strstr(dsv4check_verdict_error(v), "output 'data' has shape ["), "%s", dsv4check_verdict_error(v));
    dsv4check_verdict_free(v);
    t[0].ndim = 2;
    t[0].shape = shape;
    /* short buffer */
    t[1].nbytes -= 1;
    ck_assert_int_eq(dsv4check_judge(c, t, 2, NULL, &v, err, sizeof err), DSV4CHECK_OK);
    ck_assert_msg(strstr(dsv4check_verdict_error(v), "output 'scale':"), "%s", dsv4check_verdict_error(v));
    dsv4check_verdict_free(v);
    t[1].nbytes += 1;
    /* unusable arguments are errors, not verdicts */
    t[1].name = NULL;
    ck_assert_int_eq(dsv4check_judge(c, t, 2, NULL, &v, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "output 1 has no name"), "%s", err);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(dsv4check_judge(NULL, t, 2, NULL, &v, err, sizeof err), DSV4CHECK_EINPUT);
    dsv4check_tensors_free(ref);
}
END_TEST

/* A case with another variant is judged against that variant's live
 * reference: the default's outputs fail where the variants differ. */
START_TEST(test_with_variant)
{
    const dsv4check_case *c = find_case("combine_invalid_and_out_of_range");
    dsv4check_case *none = NULL;
    ck_assert_int_eq(dsv4check_case_with_variant(c, "validate_topk=none", &none, err, sizeof err), DSV4CHECK_OK);
    ck_assert_str_eq(dsv4check_case_variant(none), "validate_topk=none");
    ck_assert_str_eq(dsv4check_case_golden(none), "");
    ck_assert_str_eq(dsv4check_case_name(none), dsv4check_case_name(c));
    dsv4check_tensors *def = NULL, *alt = NULL;
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &def, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_case_reference(none, NULL, 0, &alt, err, sizeof err), DSV4CHECK_OK);
    dsv4check_verdict *v = judge(none, alt, NULL);
    ck_assert_str_eq(dsv4check_verdict_word(v), "PASS");
    dsv4check_verdict_free(v);
    v = judge(none, def, NULL);
    ck_assert_str_eq(dsv4check_verdict_word(v), "FAIL");
    ck_assert_msg(strstr(dsv4check_verdict_report(v), "[combine_topk_swa_indices validate_topk=none]"), "%s",
                  dsv4check_verdict_report(v));
    dsv4check_verdict_free(v);
    dsv4check_case *bad = NULL;
    ck_assert_int_eq(dsv4check_case_with_variant(c, "nope", &bad, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_str_eq(err, "op combine_topk_swa_indices has no variant 'nope'");
    ck_assert_ptr_null(bad);
    dsv4check_tensors_free(def);
    dsv4check_tensors_free(alt);
    dsv4check_case_free(none);
    dsv4check_case_free(NULL);
}
END_TEST

/* --filter and --shard select what the CLI selects. */
START_TEST(test_selection_matches_cli)
{
    int in_shards = 0;
    for (int k = 1; k <= 3; k++) {
        ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "list %s --shard %d/3 --filter indices", SUITE, k), 0);
        for (int i = 0; i < dsv4check_suite_count(ci); i++) {
            const dsv4check_case *c = dsv4check_suite_case(ci, i);
            int sel = -1;
            ck_assert_int_eq(dsv4check_case_selected(c, "indices", k, 3, &sel, err, sizeof err), DSV4CHECK_OK);
            char line[300];
            snprintf(line, sizeof line, "\n  %s ", dsv4check_case_name(c));
            ck_assert_msg(sel == (strstr(out, line) != NULL), "%s in shard %d: api %d", dsv4check_case_name(c), k, sel);
            in_shards += sel;
        }
    }
    ck_assert_int_gt(in_shards, 10);
    int sel;
    const dsv4check_case *c = dsv4check_suite_case(ci, 0);
    ck_assert_int_eq(dsv4check_case_selected(c, "(", 0, 0, &sel, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "--filter '('"), "%s", err);
    ck_assert_int_eq(dsv4check_case_selected(c, NULL, 4, 3, &sel, err, sizeof err), DSV4CHECK_EINPUT);
}
END_TEST

/* A golden file as a one-case suite, judged as `check FILE`. */
START_TEST(test_golden_file_case)
{
    const char *path = "data/ci/mxfp4_shuffled.h5";
    dsv4check_suite *g = NULL;
    ck_assert_int_eq(dsv4check_golden_load(path, &g, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_suite_count(g), 1);
    const dsv4check_case *c = dsv4check_suite_case(g, 0);
    ck_assert_str_eq(dsv4check_case_name(c), "mxfp4_shuffled");
    ck_assert_str_eq(dsv4check_case_origin(c), path);
    ck_assert_str_eq(dsv4check_case_golden(c), path);
    dsv4check_tensors *ref = NULL;
    ck_assert_int_eq(dsv4check_case_reference(c, NULL, 0, &ref, err, sizeof err), DSV4CHECK_OK);
    const dsv4check_judge_opts o = {.impl = "ref", .argv0 = dsv4_test_exe(), .verbose = 1};
    dsv4check_verdict *v = judge(c, ref, &o);
    ck_assert_int_eq(dsv4check_verdict_status(v), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "check %s --impl ref -v", path), 0);
    *strstr(out, "\n\ncase ") = '\0';
    char *mine = strdup(dsv4check_verdict_report(v));
    strip_seconds(mine);
    strip_seconds(out);
    ck_assert_str_eq(mine, strcat(out, "\n"));
    free(mine);
    dsv4check_verdict_free(v);
    dsv4check_tensors_free(ref);
    dsv4check_suite_free(g);
}
END_TEST

START_TEST(test_load_errors)
{
    dsv4check_suite *s = (dsv4check_suite *)&s;
    ck_assert_int_eq(dsv4check_suite_load("cases/nope.yaml", &s, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "cases/nope.yaml"), "%s", err);
    ck_assert_int_eq(dsv4check_golden_load("cases/ci.yaml", &s, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "cases/ci.yaml"), "%s", err);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(dsv4check_suite_load(NULL, &s, err, sizeof err), DSV4CHECK_EINPUT);
    /* a short message buffer is cut, still terminated */
    char tiny[8];
    ck_assert_int_eq(dsv4check_suite_load("cases/nope.yaml", &s, tiny, sizeof tiny), DSV4CHECK_EINPUT);
    ck_assert_uint_eq(strlen(tiny), 7);
    /* a case without a golden cannot read golden inputs */
    dsv4check_case *live = NULL;
    dsv4check_tensors *ts = NULL;
    ck_assert_int_eq(dsv4check_case_with_variant(find_case("combine_mixed_prefill_c4"), "default", &live, err,
                                                 sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_case_inputs(live, DSV4CHECK_INPUTS_GOLDEN, &ts, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_str_eq(err, "case combine_mixed_prefill_c4 has no golden file");
    ck_assert_ptr_null(ts);
    ck_assert_int_eq(dsv4check_case_inputs(live, 7, &ts, err, sizeof err), DSV4CHECK_EINPUT);
    dsv4check_case_free(live);
    /* a layer chain's case is refused with a message, never run as one op */
    const dsv4check_case *chain = find_case("chain_c4_decode_mxfp8");
    ck_assert_int_eq(dsv4check_case_inputs(chain, DSV4CHECK_INPUTS_AUTO, &ts, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "is a layer chain (v41_attention_layer)"), "%s", err);
    ck_assert_ptr_null(ts);
    dsv4check_tensors *ref = NULL;
    ck_assert_int_eq(dsv4check_case_reference(chain, NULL, 0, &ref, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_int_eq(dsv4check_case_expected(chain, &ref, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_ptr_null(ref);
    dsv4check_suite_free(NULL);
    dsv4check_tensors_free(NULL);
    dsv4check_verdict_free(NULL);
    dsv4check_actuals_free(NULL);
}
END_TEST

/* The actuals writer: one group per case, one dataset per output with the
 * golden storage; duplicates, bad names and sizes refused; atomic. */
START_TEST(test_actuals_file)
{
    char dir[64], path[128];
    dsv4_test_mkdtemp(dir, sizeof dir, "dsv4api");
    snprintf(path, sizeof path, "%s/actual.h5", dir);
    dsv4check_actuals *w = NULL;
    ck_assert_int_eq(dsv4check_actuals_open(path, &w, err, sizeof err), DSV4CHECK_OK);
    const char *names[] = {"mxfp8_special_bf16_default", "combine_sweep[topk=512,compress_ratio=4]"};
    const char *cases[] = {"mxfp8_special_bf16_default", "combine_sweep[topk=512,compress_ratio=4]"};
    for (int i = 0; i < 2; i++) {
        dsv4check_tensors *ref = NULL;
        ck_assert_int_eq(dsv4check_case_reference(find_case(cases[i]), NULL, 0, &ref, err, sizeof err), 0);
        dsv4check_tensor t[2];
        dsv4check_tensors_get(ref, 0, &t[0]);
        dsv4check_tensors_get(ref, 1, &t[1]);
        ck_assert_int_eq(dsv4check_actuals_add(w, names[i], dsv4check_case_op(find_case(cases[i])),
                                               dsv4check_case_variant(find_case(cases[i])), t, 2, err, sizeof err),
                         DSV4CHECK_OK);
        ck_assert_int_eq(dsv4check_actuals_add(w, names[i], NULL, NULL, t, 2, err, sizeof err), DSV4CHECK_EINPUT);
        ck_assert_msg(strstr(err, "added twice"), "%s", err);
        t[1].nbytes--;
        ck_assert_int_eq(dsv4check_actuals_add(w, "other", NULL, NULL, t, 2, err, sizeof err), DSV4CHECK_EINPUT);
        ck_assert_msg(strstr(err, "case other: output '"), "%s", err);
        t[1].nbytes++;
        t[1].name = t[0].name;
        ck_assert_int_eq(dsv4check_actuals_add(w, "other2", NULL, NULL, t, 2, err, sizeof err), DSV4CHECK_EINPUT);
        ck_assert_msg(strstr(err, "given twice"), "%s", err);
        dsv4check_tensors_free(ref);
    }
    ck_assert_int_eq(dsv4check_actuals_add(w, "a/b", NULL, NULL, NULL, 0, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "cannot name a case group"), "%s", err);
    struct stat sb;
    ck_assert_int_ne(stat(path, &sb), 0); /* nothing at path before the commit */
    ck_assert_int_eq(dsv4check_actuals_commit(w, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(stat(path, &sb), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "h5ls -r %s 2>&1; ls -a %s", path, dir);
    ck_assert_int_eq(dsv4_test_popen(out, OUT_MAX, cmd), 0);
    ck_assert_msg(strstr(out, "/mxfp8_special_bf16_default/data Dataset {"), "%s", out);
    ck_assert_msg(strstr(out, "/combine_sweep[topk=512,compress_ratio=4]/combined_lens Dataset {"), "%s", out);
    ck_assert_msg(!strstr(out, "other"), "%s", out);
    ck_assert_msg(!strstr(out, ".tmp."), "temporary left behind: %s", out);
    snprintf(cmd, sizeof cmd, "h5dump -a /mxfp8_special_bf16_default/data/dtype %s", path);
    ck_assert_int_eq(dsv4_test_popen(out, OUT_MAX, cmd), 0);
    ck_assert_msg(strstr(out, "\"float8_e4m3fn\""), "%s", out);
    /* a discarded writer leaves nothing */
    snprintf(path, sizeof path, "%s/discarded.h5", dir);
    ck_assert_int_eq(dsv4check_actuals_open(path, &w, err, sizeof err), DSV4CHECK_OK);
    dsv4check_actuals_free(w);
    snprintf(cmd, sizeof cmd, "ls -a %s", dir);
    dsv4_test_popen(out, OUT_MAX, cmd);
    ck_assert_msg(!strstr(out, "discarded"), "%s", out);
    /* the CLI judges the file: both cases pass, the others are not provided */
    snprintf(path, sizeof path, "%s/actual.h5", dir);
    ck_assert_int_eq(dsv4_test_cli(out, OUT_MAX, "run %s --filter 'mxfp8_special|combine_sweep' --actual %s", SUITE,
                                   path), 0);
    ck_assert_msg(strstr(out, "summary: 2 passed, 0 failed, 5 skipped"), "%s", out);
    /* a path that cannot be written fails at the commit, naming it */
    ck_assert_int_eq(dsv4check_actuals_open("/nonexistent/dir/a.h5", &w, err, sizeof err), DSV4CHECK_OK);
    ck_assert_int_eq(dsv4check_actuals_commit(w, err, sizeof err), DSV4CHECK_EINPUT);
    ck_assert_msg(strstr(err, "/nonexistent/dir/"), "%s", err);
    dsv4_test_rm_rf(dir);
}
END_TEST

DSV4_TEST_MAIN("api", "api", 120, setup, teardown, test_version_and_ops, test_suite_and_case_fields,
               test_inputs_generated_equal_golden, test_reference_passes, test_reference_ideal_and_expected,
               test_planted_bug_report_equals_cli, test_bad_outputs, test_with_variant, test_selection_matches_cli,
               test_golden_file_case, test_load_errors, test_actuals_file)
