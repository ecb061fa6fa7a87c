/* test_readpast.c - guarded inputs with poison (harness/guard.c,
 * include/dsv4_poison.h) and the read-past attribution (harness/readpast.c):
 * a plug-in that reads one element past the end of an input fails with a
 * hint naming that input, in process and in a child process, and through
 * the CLI's console, JUnit and JSON reports; a correct plug-in passes; a
 * nondeterministic one is called that and no input is blamed.  The
 * plug-ins are tests/plugin_chain.c (-DCHAIN_BUG=4 and 5, and the correct
 * reference). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "testutil.h"

#include "../harness/guard.h"
#include "../harness/runner.h"

#define OUT_LEN (1 << 18)
static char out[OUT_LEN];

static const char *suite_text = "suite: readpast\n"
                                "cases:\n"
                                "  - name: mx8_heads\n"
                                "    op: mxfp8_quant\n"
                                "    params: {T: 3, W: 1024, dtype: float32, scale: 0.01}\n";

static const char *read_past_hint = "reads past the end of input 'x' (its outputs change with the bytes after it)";

static const char *plugin(const char *name) { return dsv4_test_build_path("tests", name); }

/* The suite's one case run against impl, in process or in a child. */
static void run_case(const char *impl, int isolated, dsv4_case_result *r)
{
    dsv4_suite suite;
    dsv4_status st = {0};
    memset(&suite, 0, sizeof suite);
    ck_assert_msg(dsv4_suite_load_buffer("readpast.yaml", suite_text, strlen(suite_text), &suite, &st) == DSV4_OK,
                  "%s", st.msg);
    dsv4_backend b;
    int rc = isolated ? dsv4_backend_open_isolated(impl, -1, 60, &b, &st) : dsv4_backend_open(impl, -1, &b, &st);
    ck_assert_msg(rc == DSV4_OK, "%s: %s", impl, st.msg);
    const dsv4_run_opts o = {.impl = impl, .argv0 = "dsv4check", .rerun = 1, .device_arg = ""};
    dsv4_run_case(&suite.cases[0], &b, &o, r);
    dsv4_backend_close(&b);
    dsv4_suite_free(&suite);
}

static const char *hint_of(const dsv4_case_result *r, const char *output)
{
    for (int k = 0; k < r->n_outputs; k++)
        if (!strcmp(r->outputs[k].cmp.output, output))
            return r->outputs[k].cmp.hint;
    return NULL;
}

static void check_read_past(int isolated)
{
    dsv4_case_result r;
    run_case(plugin("libchain_bug4.so"), isolated, &r);
    ck_assert_msg(r.status == DSV4_EFAIL, "status %d: %s", r.status, r.error);
    const char *hint = hint_of(&r, "data");
    ck_assert_ptr_nonnull(hint);
    ck_assert_msg(strstr(hint, read_past_hint) == hint, "hint of 'data': '%s'", hint);
    dsv4_result_free_maps(&r);
}

START_TEST(read_past_in_process) { check_read_past(0); }
END_TEST

START_TEST(read_past_isolated) { check_read_past(1); }
END_TEST

static void check_correct(int isolated)
{
    dsv4_case_result r;
    run_case(plugin("libchain_ref.so"), isolated, &r);
    ck_assert_msg(r.status == DSV4_OK && r.verdict == DSV4_PASS, "status %d: %s", r.status, r.error);
    for (int k = 0; k < r.n_outputs; k++)
        ck_assert_str_eq(r.outputs[k].cmp.hint, "");
}

START_TEST(correct_plugin_passes) { check_correct(_i); }
END_TEST

/* A kernel whose outputs change from run to run is not blamed on an input. */
static void check_nondeterministic(int isolated)
{
    dsv4_case_result r;
    run_case(plugin("libchain_bug5.so"), isolated, &r);
    ck_assert_int_eq(r.status, DSV4_EFAIL);
    const char *hint = hint_of(&r, "data");
    ck_assert_ptr_nonnull(hint);
    ck_assert_msg(strstr(hint, "nondeterministic: ") == hint, "hint of 'data': '%s'", hint);
    ck_assert_ptr_null(strstr(hint, "reads "));
}

START_TEST(nondeterministic_not_blamed) { check_nondeterministic(_i); }
END_TEST

/* The hint in every report of the CLI: console, JUnit, JSON. */
START_TEST(cli_reports)
{
    char dir[256], suite[300], junit[300], json[300];
    dsv4_test_mkdtemp(dir, sizeof dir, "dsv4readpast");
    snprintf(suite, sizeof suite, "%s/s.yaml", dir);
    snprintf(junit, sizeof junit, "%s/j.xml", dir);
    snprintf(json, sizeof json, "%s/r.json", dir);
    dsv4_test_write_file(suite, suite_text);
    int rc = dsv4_test_cli(out, sizeof out, "run %s --impl %s --junit %s --json %s", suite,
                           plugin("libchain_bug4.so"), junit, json);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, read_past_hint) != NULL, "console:\n%s", out);
    char *x = dsv4_test_slurp(junit), *j = dsv4_test_slurp(json);
    ck_assert_msg(strstr(x, read_past_hint) != NULL, "junit:\n%s", x);
    ck_assert_msg(strstr(j, read_past_hint) != NULL, "json:\n%s", j);
    free(x), free(j);
    rc = dsv4_test_cli(out, sizeof out, "run %s --impl %s", suite, plugin("libchain_ref.so"));
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    dsv4_test_rm_rf(dir);
}
END_TEST

/* The poison of each dtype is what dsv4_poison.h promises. */
START_TEST(poison_per_dtype)
{
    unsigned char e[8];
    float f;
    double d;
    ck_assert_int_eq(dsv4_poison_element(DSV4_F32, e), 4);
    memcpy(&f, e, 4);
    ck_assert(isnan(f));
    ck_assert_int_eq(dsv4_poison_element(DSV4_F64, e), 8);
    memcpy(&d, e, 8);
    ck_assert(isnan(d));
    ck_assert_int_eq(dsv4_poison_element(DSV4_BF16, e), 2);
    ck_assert(e[0] == 0xC0 && e[1] == 0x7F);
    ck_assert_int_eq(dsv4_poison_element(DSV4_F16, e), 2);
    ck_assert(e[0] == 0x00 && e[1] == 0x7E);
    int32_t i32;
    int64_t i64;
    ck_assert_int_eq(dsv4_poison_element(DSV4_I32, e), 4);
    memcpy(&i32, e, 4);
    ck_assert(i32 == INT32_MIN);
    ck_assert_int_eq(dsv4_poison_element(DSV4_I64, e), 8);
    memcpy(&i64, e, 8);
    ck_assert(i64 == INT64_MIN);
    ck_assert(dsv4_poison_element(DSV4_F8E4M3FN, e) == 1 && e[0] == 0x7F);
    ck_assert(dsv4_poison_element(DSV4_F8E4M3FNUZ, e) == 1 && e[0] == 0x80);
    ck_assert(dsv4_poison_element(DSV4_F8E8M0, e) == 1 && e[0] == 0xFF);
    ck_assert(dsv4_poison_element(DSV4_F4E2M1X2, e) == 1 && e[0] == 0xFF);
    ck_assert(dsv4_poison_element(DSV4_U8, e) == 1 && e[0] == 0xFF);
    ck_assert(dsv4_poison_element(DSV4_BYTES, e) == 1 && e[0] == 0xFF);
}
END_TEST

/* Guarded buffers: poison (or zeros on the sides asked) around a copy of
 * the data, and a changed guard byte is named with its side. */
START_TEST(guarded_buffer)
{
    const size_t g = dsv4_guard_len(), n = 3 * sizeof(float);
    const float data[3] = {1, 2, 3};
    const dsv4_guard_fill fill = {1, DSV4_GUARD_AFTER};
    const dsv4_guard_kind poisoned = dsv4_input_guard_kind(DSV4_F32, 0, &fill);
    const dsv4_guard_kind zeroed = dsv4_input_guard_kind(DSV4_F32, 1, &fill);
    ck_assert_int_eq(poisoned.zeroed_sides, 0);
    ck_assert_int_eq(zeroed.zeroed_sides, DSV4_GUARD_AFTER);
    uint8_t *p = dsv4_guarded_alloc(n, g, data, &poisoned), *z = dsv4_guarded_alloc(n, g, data, &zeroed);
    ck_assert(p && z);
    float past, before;
    memcpy(&past, p + g + n, 4);
    memcpy(&before, p + g - 4, 4);
    ck_assert(isnan(past) && isnan(before));
    ck_assert(memcmp(p + g, data, n) == 0);
    memcpy(&past, z + g + n, 4);
    memcpy(&before, z + g - 4, 4);
    ck_assert(past == 0 && isnan(before));
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_guards_check(p, n, g, &poisoned, "input 'x'", &st), DSV4_OK);
    ck_assert_int_eq(dsv4_guards_check(z, n, g, &zeroed, "input 'x'", &st), DSV4_OK);
    p[g + n + 5] ^= 1;
    ck_assert_int_eq(dsv4_guards_check(p, n, g, &poisoned, "input 'x'", &st), DSV4_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "input 'x': guard bytes after the buffer overwritten (byte 5") != NULL, "%s",
                  st.msg);
    z[3] = 0;
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_guards_check(z, n, g, &zeroed, "input 'x'", &st), DSV4_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "before the buffer") != NULL, "%s", st.msg);
    free(p), free(z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("readpast");
    TCase *tc = dsv4_test_tcase(s, "readpast", 120, NULL, NULL,
        DSV4_TESTS(poison_per_dtype, guarded_buffer, read_past_in_process, read_past_isolated));
    tcase_add_loop_test(tc, correct_plugin_passes, 0, 2);
    tcase_add_loop_test(tc, nondeterministic_not_blamed, 0, 2);
    dsv4_test_add(tc, DSV4_TESTS(cli_reports));
    return dsv4_test_run(s);
}
