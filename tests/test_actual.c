/* test_actual.c - outputs computed anywhere: `check --actual` and
 * `run --actual` on actuals files (data/README.md "Actuals files") written
 * here from the goldens' expected outputs (as a kernel would produce them)
 * and by tests/h5py_write_actual.py (the README's h5py recipe), with one
 * changed element, a missing case, and every kind of bad file; the reports
 * (JUnit, JSON, -j, --shard, repro files); the reader itself and
 * `list --goldens`.  Runs build/dsv4check (or $DSV4CHECK) from the
 * repository root. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <hdf5.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/actual.h"
#include "../harness/golden.h"
#include "testutil.h"
#include "actualutil.h"

static char tmpdir[256];
static char *out;
#define OUT_MAX (1 << 20)

/* Runs a shell command line, stdout + stderr into out; the exit code. */
#define sh(...) dsv4_test_sh(out, OUT_MAX, __VA_ARGS__)

/* tmpdir/name; the 32 most recent stay valid. */
static const char *tmp(const char *name)
{
    static char buf[32][512];
    static int k;
    snprintf(buf[k & 31], sizeof buf[0], "%s/%s", tmpdir, name);
    return buf[k++ & 31];
}

/* build/tests/<name>: the example plug-ins sit beside the test programs. */
static const char *plugin(const char *name) { return dsv4_test_build_path("tests", name); }

static void setup(void)
{
    dsv4_test_scratch_open(tmpdir, sizeof tmpdir, "dsv4actual", &out, OUT_MAX);
    dsv4_h5_quiet();
}

static void teardown(void) { dsv4_test_scratch_close(tmpdir, &out); }

/* ---- actuals from goldens ---- */

/* Every golden of data/ci, as a NULL-terminated list (and the count). */
static char **all_goldens(int *count)
{
    DIR *d = opendir("data/ci");
    ck_assert_ptr_nonnull(d);
    char **v = calloc(1024, sizeof *v);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 1023;) {
        size_t len = strlen(e->d_name);
        if (len > 3 && strcmp(e->d_name + len - 3, ".h5") == 0) {
            v[n] = malloc(len + 16);
            snprintf(v[n++], len + 16, "data/ci/%s", e->d_name);
        }
    }
    closedir(d);
    *count = n;
    return v;
}

static void free_list(char **v)
{
    for (int i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

static const char *const combine_mixed[] = {"data/ci/combine_mixed_prefill_c4.h5", NULL};

/* A whole-suite run over an actuals file made from the goldens: nothing
 * fails, and the only skips are the propagated chain cases (they have no
 * step goldens, so the file has no stage of theirs), each reported as not
 * provided. */
static void expect_suite_from_goldens(int rc)
{
    int passed, failed, skipped, unprovided = 0;
    const char *s = strstr(out, "summary: ");
    ck_assert_msg(rc == 0 && s, "rc %d:\n%.3000s", rc, out);
    ck_assert_int_eq(sscanf(s, "summary: %d passed, %d failed, %d skipped", &passed, &failed, &skipped), 3);
    for (const char *p = out; (p = strstr(p, "<step> for any stage")) != NULL; p++)
        unprovided++;
    ck_assert_int_eq(failed, 0);
    ck_assert_msg(passed > 100 && skipped == unprovided, "%d skipped, %d chains not provided:\n%.3000s", skipped,
                  unprovided, out);
}

START_TEST(every_golden_passes_through_actual)
{
    int n;
    char **gs = all_goldens(&n);
    const char *f = tmp("all.h5");
    write_actuals(f, (const char *const *)gs, NULL);
    free_list(gs);
    int rc = sh("%s check data/ci/*.h5 --actual %s", dsv4_test_exe(), f);
    char want[128];
    snprintf(want, sizeof want, "summary: %d passed, 0 failed, 0 skipped", n);
    ck_assert_msg(rc == 0 && strstr(out, want), "rc %d:\n%.3000s", rc, out);
    snprintf(want, sizeof want, "actual: %d of %d cases provided by %s\n", n, n, f);
    ck_assert_msg(strstr(out, want) != NULL, "%.3000s", out);
    /* run: the suite's cases look themselves up by name; -j 2 */
    rc = sh("%s run cases/ci.yaml --actual %s -j 2", dsv4_test_exe(), f);
    expect_suite_from_goldens(rc);
    ck_assert_ptr_null(strstr(out, "groups no case"));
}
END_TEST

/* The planted bug of tests/plugin_example.c -DEXAMPLE_WRONG: row 1's first
 * window entry one too high. */
static void window_late(const char *case_name, dsv4_tensors *outs)
{
    (void)case_name;
    dsv4_tensor *t = dsv4_tensors_find(outs, "combined_indices");
    ((int32_t *)t->data)[1 * t->shape[1] + 2] += 1;
}

/* The report of one case without its timing and its reproduce line. */
static void case_report(const char *text, char *buf, size_t len)
{
    const char *p = strstr(text, "FAIL      ");
    ck_assert_ptr_nonnull(p);
    const char *end = strstr(p, "    at ");
    ck_assert_ptr_nonnull(end);
    size_t n = (size_t)(end - p) < len - 1 ? (size_t)(end - p) : len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *s = strstr(buf, "] ");
    ck_assert_ptr_nonnull(s);
    char *nl = strchr(s, '\n');
    memmove(s + 1, nl, strlen(nl) + 1); /* "] 0.012 s\n" -> "]\n" */
}

START_TEST(one_changed_element_fails_naming_it)
{
    const char *f = tmp("wrong.h5");
    write_actuals(f, combine_mixed, window_late);
    char reproduce[700];
    snprintf(reproduce, sizeof reproduce, "reproduce: %s check data/ci/combine_mixed_prefill_c4.h5 --actual %s\n",
             dsv4_test_exe(), f);
    dsv4_test_expect(sh("%s check data/ci/combine_mixed_prefill_c4.h5 --actual %s", dsv4_test_exe(), f), 1, out,
                     DSV4_WANTS("FAIL combined_indices: 1 of 216960 elements differ",
                                "first [1, 2]: expected 1117, actual 1118 (request 1, position 7, window part",
                                reproduce));
    /* the same report as the example plug-in with the same bug */
    char mine[4096], theirs[4096];
    case_report(out, mine, sizeof mine);
    const int rc = sh("%s check data/ci/combine_mixed_prefill_c4.h5 --impl %s", dsv4_test_exe(),
                      plugin("libexample_wrong.so"));
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    case_report(out, theirs, sizeof theirs);
    ck_assert_str_eq(mine, theirs);
}
END_TEST

static void drop_nothing(const char *case_name, dsv4_tensors *outs) { (void)case_name, (void)outs; }

START_TEST(missing_case_is_not_provided)
{
    const char *f = tmp("one.h5");
    write_actuals(f, combine_mixed, drop_nothing);
    char no_group[600], provided[600];
    snprintf(no_group, sizeof no_group, "    not provided: %s has no group /combine_c128\n", f);
    snprintf(provided, sizeof provided, "actual: 1 of 17 cases provided by %s; 16 not provided", f);
    dsv4_test_expect(sh("%s run cases/ci.yaml --filter '^combine_' --actual %s", dsv4_test_exe(), f), 0, out,
                     DSV4_WANTS("PASS      combine_mixed_prefill_c4",
                                "SKIP      combine_c128  [combine_topk_swa_indices default]", no_group,
                                "summary: 1 passed, 0 failed, 16 skipped", provided));
    /* JUnit counts them as skipped, with the reason */
    int rc = sh("%s run cases/ci.yaml --filter '^combine_' --actual %s --junit %s && cat %s", dsv4_test_exe(), f,
            tmp("j.xml"), tmp("j.xml"));
    ck_assert_msg(rc == 0 && strstr(out, "skipped=\"16\""), "rc %d:\n%.3000s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "not provided: "));
    /* nothing provided at all: skipped (77), never passed */
    rc = sh("%s run cases/ci.yaml --filter '^combine_c128$' --actual %s", dsv4_test_exe(), f);
    ck_assert_msg(rc == 77 && strstr(out, "summary: 0 passed, 0 failed, 1 skipped"), "rc %d:\n%s", rc, out);
    /* a group no case of the suite has is named */
    rc = sh("%s run cases/ci/indices.yaml --actual %s", dsv4_test_exe(), f);
    ck_assert_msg(rc == 0 && !strstr(out, "groups no case"), "rc %d:\n%.2000s", rc, out);
    rc = sh("%s run cases/ci/quant.yaml --actual %s", dsv4_test_exe(), f);
    ck_assert_msg(strstr(out, "actual: groups no case of this run has: combine_mixed_prefill_c4 (1 in all)"),
                  "rc %d:\n%.2000s", rc, out);
}
END_TEST

/* ---- bad actuals files: exit 2, naming file, case and tensor ---- */

static void to_int64(const char *c, dsv4_tensors *outs)
{
    (void)c;
    dsv4_tensor *t = dsv4_tensors_find(outs, "combined_lens");
    dsv4_tensor w;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_tensor_alloc(&w, "combined_lens", DSV4_I64, t->ndim, t->shape, &st), 0);
    dsv4_tensor_free(t);
    *t = w;
}

static void short_rows(const char *c, dsv4_tensors *outs)
{
    (void)c;
    dsv4_tensor *t = dsv4_tensors_find(outs, "combined_indices");
    t->shape[0] -= 1;
    t->nbytes = (size_t)dsv4_tensor_numel(t) * 4;
}

static void no_lens(const char *c, dsv4_tensors *outs)
{
    (void)c;
    dsv4_tensor_free(dsv4_tensors_find(outs, "combined_lens"));
    outs->n = 1; /* combined_indices stays (names sort before) */
    ck_assert_str_eq(outs->t[0].name, "combined_indices");
}

static void extra(const char *c, dsv4_tensors *outs)
{
    (void)c;
    dsv4_tensor *t;
    dsv4_status st = {0};
    int64_t shape[1] = {3};
    ck_assert_int_eq(dsv4_tensors_add(outs, "combined_lenz", DSV4_I32, 1, shape, &t, &st), 0);
}

/* A bf16 output as float32 holding bf16 values, element [0, 3] off by one
 * float32 ulp when bad_one is set. */
static int bad_one;
static void as_f32(const char *c, dsv4_tensors *outs)
{
    (void)c;
    for (int k = 0; k < outs->n; k++) {
        dsv4_tensor *t = &outs->t[k];
        if (t->dtype != DSV4_BF16)
            continue;
        dsv4_tensor w;
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_tensor_alloc(&w, t->name, DSV4_F32, t->ndim, t->shape, &st), 0);
        for (int64_t i = 0; i < dsv4_tensor_numel(t); i++)
            ((uint32_t *)w.data)[i] = (uint32_t)((const uint16_t *)t->data)[i] << 16;
        if (bad_one)
            ((uint32_t *)w.data)[3] |= 1;
        dsv4_tensor_free(t);
        *t = w;
    }
}

static const char *const gemm_bf16[] = {"data/ci/gemm_zero_and_big_rows.h5", NULL};

START_TEST(float32_for_bfloat16_when_exact)
{
    const char *f = tmp("f32.h5");
    bad_one = 0;
    write_actuals(f, gemm_bf16, as_f32);
    int rc = sh("%s check %s --actual %s", dsv4_test_exe(), gemm_bf16[0], f);
    ck_assert_msg(rc == 0 && strstr(out, "summary: 1 passed"), "rc %d:\n%s", rc, out);
    bad_one = 1;
    write_actuals(f, gemm_bf16, as_f32);
    rc = sh("%s check %s --actual %s", dsv4_test_exe(), gemm_bf16[0], f);
    char want[600];
    snprintf(want, sizeof want, "%s:/gemm_zero_and_big_rows/Y: float32 data for a bfloat16 output, but element [0, 3]",
             f);
    ck_assert_msg(rc == 2 && strstr(out, want), "rc %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "BAD-INPUT gemm_zero_and_big_rows"));
}
END_TEST

/* Raw HDF5 files the C writer cannot make. */
static void raw_file(const char *path, int what)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(f >= 0);
    hsize_t dim = 4;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    int32_t v[4] = {1, 2, 3, 4};
    if (what == 0) { /* a dataset at the top level */
        hid_t d = H5Dcreate2(f, "combined_lens", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(d);
    } else if (what == 1) { /* a case group that is a soft link */
        hid_t g = H5Gcreate2(f, "real", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g);
        H5Lcreate_soft("/real", f, "combine_mixed_prefill_c4", H5P_DEFAULT, H5P_DEFAULT);
    } else { /* a version this dsv4check does not read */
        int64_t two = 2;
        hid_t s = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, "dsv4check_actuals", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &two);
        H5Aclose(a);
        H5Sclose(s);
    }
    H5Sclose(sp);
    H5Fclose(f);
}

static void expect_bad(const char *args, const char *want)
{
    int rc = sh("%s %s", dsv4_test_exe(), args);
    ck_assert_msg(rc == 2, "`%s`: rc %d:\n%s", args, rc, out);
    ck_assert_msg(strstr(out, want) != NULL, "`%s`: no '%s' in:\n%s", args, want, out);
}

START_TEST(bad_actuals_files_exit_2)
{
    const char *g = combine_mixed[0];
    char args[1200], want[800];
    const char *f = tmp("bad.h5");
    struct {
        mutate_fn fn;
        const char *want;
    } rows[] = {
        {to_int64, "/combine_mixed_prefill_c4/combined_lens: dtype int64, but op combine_topk_swa_indices produces int32"},
        {short_rows, "/combine_mixed_prefill_c4/combined_indices: shape [338, 640], but op combine_topk_swa_indices "
                     "produces [339, 640] for this case's inputs"},
        {no_lens, "/combine_mixed_prefill_c4: no dataset 'combined_lens' (op combine_topk_swa_indices's outputs: "
                  "combined_indices, combined_lens)"},
        {extra, "/combine_mixed_prefill_c4/combined_lenz: op combine_topk_swa_indices has no output 'combined_lenz'"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        write_actuals(f, combine_mixed, rows[k].fn);
        snprintf(args, sizeof args, "check %s --actual %s", g, f);
        snprintf(want, sizeof want, "%s:%s", f, rows[k].want);
        expect_bad(args, want);
        snprintf(args, sizeof args, "run cases/ci.yaml --filter '^combine_mixed' --actual %s", f);
        expect_bad(args, want);
    }
    /* written for another variant */
    dsv4_golden gd;
    dsv4_status st = {0};
    dsv4_tensors outs = {0};
    ck_assert_int_eq(dsv4_golden_read(g, &gd, &st), 0);
    kernel_outputs(&gd, &outs);
    dsv4_actual_case c = {gd.case_name, gd.op, "width_guard=col0", &outs};
    ck_assert_int_eq(dsv4_actual_write(f, &c, 1, &st), 0);
    snprintf(args, sizeof args, "check %s --actual %s", g, f);
    snprintf(want, sizeof want, "%s:/combine_mixed_prefill_c4: written for combine_topk_swa_indices "
             "[width_guard=col0], but the case is combine_topk_swa_indices [default]", f);
    expect_bad(args, want);
    dsv4_tensors_free(&outs);
    dsv4_golden_free(&gd);
    /* files that are no actuals file */
    snprintf(args, sizeof args, "check %s --actual %s", g, g);
    snprintf(want, sizeof want, "%s: a golden file (it has dsv4check_schema), not an actuals file", g);
    expect_bad(args, want);
    const char *what[] = {"a dataset at the top level", "a soft link", "dsv4check_actuals is 2"};
    for (int k = 0; k < 3; k++) {
        raw_file(f, k);
        snprintf(args, sizeof args, "check %s --actual %s", g, f);
        expect_bad(args, what[k]);
    }
    snprintf(args, sizeof args, "check %s --actual %s", g, "cases/ci.yaml");
    expect_bad(args, "cases/ci.yaml: not an HDF5 file");
    snprintf(args, sizeof args, "check %s --actual %s", g, tmp("absent.h5"));
    expect_bad(args, "cannot open");
    /* usage */
    expect_bad("check data/ci/combine_c128.h5 --actual x.h5 --impl ref", "--actual and --impl");
    expect_bad("gen cases/ci.yaml --actual x.h5", "--actual applies to run, check and identify");
}
END_TEST

/* ---- the reports ---- */

static void strip_seconds(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (strncmp(r, "\"seconds\": ", 11) == 0) {
            r += 11;
            while ((*r >= '0' && *r <= '9') || *r == '.' || *r == 'e' || *r == '-')
                r++;
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
}

START_TEST(reports_jobs_shards_and_repro)
{
    const char *f = tmp("wrong.h5");
    write_actuals(f, combine_mixed, window_late);
    const char *sel = "--filter '^combine_'";
    int rc = sh("%s run cases/ci.yaml %s --actual %s --json %s --junit %s --html %s --repro-dir %s", dsv4_test_exe(),
                sel, f, tmp("j1.json"), tmp("j1.xml"), tmp("r.html"), tmpdir);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    rc = sh("%s run cases/ci.yaml %s --actual %s --json %s -j 3 --repro-dir %s", dsv4_test_exe(), sel, f, tmp("j3.json"),
            tmpdir);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    char *a = dsv4_test_slurp(tmp("j1.json")), *b = dsv4_test_slurp(tmp("j3.json"));
    strip_seconds(a), strip_seconds(b);
    ck_assert_msg(strcmp(a, b) == 0, "-j 1 and -j 3 JSON reports differ");
    ck_assert_ptr_nonnull(strstr(a, "\"impl\": \"actual:"));
    ck_assert_ptr_nonnull(strstr(a, "\"expected\": 1117, \"actual\": 1118"));
    free(a), free(b);
    char *x = dsv4_test_slurp(tmp("j1.xml"));
    ck_assert_ptr_nonnull(strstr(x, "failures=\"1\""));
    ck_assert_ptr_nonnull(strstr(x, "expected 1117, actual 1118"));
    free(x);
    x = dsv4_test_slurp(tmp("r.html"));
    ck_assert_ptr_nonnull(strstr(x, "combine_mixed_prefill_c4"));
    free(x);
    /* the repro file replays against the same actuals */
    rc = sh("%s check %s --actual %s", dsv4_test_exe(), tmp("combine_mixed_prefill_c4.h5"), f);
    ck_assert_msg(rc == 1 && strstr(out, "expected 1117, actual 1118"), "rc %d:\n%s", rc, out);
    /* two shards hold every case once */
    int cases = 0;
    for (int k = 1; k <= 2; k++) {
        rc = sh("%s run cases/ci.yaml %s --actual %s --shard %d/2", dsv4_test_exe(), sel, f, k);
        ck_assert_msg(rc == 0 || rc == 1 || rc == 77, "rc %d:\n%s", rc, out);
        int p, fl, sk;
        const char *s = strstr(out, "summary: ");
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(sscanf(s, "summary: %d passed, %d failed, %d skipped", &p, &fl, &sk), 3);
        cases += p + fl + sk;
    }
    ck_assert_int_eq(cases, 17);
    /* a report is never written over the actuals file */
    rc = sh("%s run cases/ci.yaml %s --actual %s --json %s", dsv4_test_exe(), sel, f, f);
    ck_assert_msg(rc == 2 && strstr(out, "is the same file as the input"), "rc %d:\n%s", rc, out);
}
END_TEST

/* ---- the h5py recipe ---- */

START_TEST(h5py_recipe_end_to_end)
{
    const char *py = "/usr/bin/python3 tests/h5py_write_actual.py";
    int rc = sh("%s %s data/ci/*.h5", py, tmp("py.h5"));
    if (rc == 77) {
        fprintf(stderr, "h5py_recipe_end_to_end: skipped (77): python3-h5py or numpy missing (scripts/setup.sh)\n");
        return;
    }
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    rc = sh("%s check data/ci/*.h5 --actual %s", dsv4_test_exe(), tmp("py.h5"));
    ck_assert_msg(rc == 0 && strstr(out, " 0 failed, 0 skipped"), "rc %d:\n%.3000s", rc, out);
    ck_assert_int_eq(sh("%s %s data/ci/*.h5 --f32", py, tmp("f32.h5")), 0);
    rc = sh("%s run cases/ci.yaml --actual %s", dsv4_test_exe(), tmp("f32.h5"));
    expect_suite_from_goldens(rc);
    ck_assert_int_eq(sh("%s %s data/ci/combine_*.h5 --bump combine_c128/combined_indices --drop combine_mixed_prefill_c4",
                        py, tmp("bump.h5")), 0);
    rc = sh("%s run cases/ci.yaml --filter '^combine_' --actual %s", dsv4_test_exe(), tmp("bump.h5"));
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "FAIL      combine_c128"));
    ck_assert_ptr_nonnull(strstr(out, "first [0, 0]: expected 73, actual 74"));
    ck_assert_ptr_nonnull(strstr(out, "SKIP      combine_mixed_prefill_c4"));
    ck_assert_ptr_nonnull(strstr(out, "summary: 15 passed, 1 failed, 1 skipped"));
}
END_TEST

/* ---- the reader ---- */

START_TEST(reader_api)
{
    const char *f = tmp("two.h5");
    const char *const two[] = {"data/ci/combine_mixed_prefill_c4.h5", "data/ci/combine_c128.h5", NULL};
    write_actuals(f, two, NULL);
    dsv4_actual *a;
    dsv4_status st = {0};
    ck_assert_msg(dsv4_actual_open(f, &a, &st) == 0, "%s", st.msg);
    ck_assert_int_eq(dsv4_actual_count(a), 2);
    ck_assert_str_eq(dsv4_actual_case_at(a, 0), "combine_c128"); /* sorted */
    ck_assert_int_eq(dsv4_actual_find(a, "combine_mixed_prefill_c4"), 1);
    ck_assert_int_eq(dsv4_actual_find(a, "combine_mixed"), -1);
    const dsv4_op *op = dsv4_op_find("combine_topk_swa_indices");
    dsv4_tensors o = {0};
    int64_t shape[2] = {201, 640};
    dsv4_tensor *t;
    ck_assert_int_eq(dsv4_tensors_add(&o, "combined_indices", DSV4_I32, 2, shape, &t, &st), 0);
    ck_assert_int_eq(dsv4_tensors_add(&o, "combined_lens", DSV4_I32, 1, shape, &t, &st), 0);
    ck_assert_msg(dsv4_actual_read(a, "combine_c128", op, 0, &o, &st) == 0, "%s", st.msg);
    ck_assert_int_eq(dsv4_actual_read(a, "nope", op, 0, &o, &st), DSV4_ESKIP);
    ck_assert_ptr_nonnull(strstr(st.msg, "not provided"));
    dsv4_tensors_free(&o);
    dsv4_actual_close(a);
    /* the same file from memory (the fuzzer's entry) */
    size_t len;
    char *img = dsv4_test_slurp_len(f, &len);
    dsv4_status_clear(&st);
    ck_assert_msg(dsv4_actual_open_image("img", img, len, &a, &st) == 0, "%s", st.msg);
    ck_assert_int_eq(dsv4_actual_count(a), 2);
    dsv4_actual_close(a);
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_actual_open_image("img", img, len / 2, &a, &st), DSV4_EINPUT);
    ck_assert_ptr_null(a);
    free(img);
    /* a case name that cannot name a group */
    dsv4_status_clear(&st);
    dsv4_actual_case bad = {"a/b/c", NULL, NULL, &o}; /* one "/" at most: "<chain case>/<step>" */
    ck_assert_int_eq(dsv4_actual_write(f, &bad, 1, &st), DSV4_EINPUT);
}
END_TEST

/* ---- list --goldens ---- */

START_TEST(list_goldens_index)
{
    int n;
    char **gs = all_goldens(&n);
    free_list(gs);
    int rc = sh("%s list --goldens", dsv4_test_exe());
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    ck_assert_int_eq(dsv4_test_count(out, "\n"), n + 1);
    char want[100];
    snprintf(want, sizeof want, "\n%d goldens of ", n);
    ck_assert_ptr_nonnull(strstr(out, want));
    ck_assert_ptr_nonnull(strstr(out, "combine_topk_swa_indices         default                  combine_c128"
                                      "                                 data/ci/combine_c128.h5  in: gather_lens int32[2], "));
    ck_assert_ptr_nonnull(strstr(out, "-> out: Y float64[6, 144] (kernel bfloat16)\n"));
    /* sorted by op, then variant, then case */
    char prev[400] = "";
    for (char *line = out; *line;) {
        char *nl = strchr(line, '\n');
        char key[400];
        snprintf(key, sizeof key, "%.*s", (int)(nl - line) < 160 ? (int)(nl - line) : 160, line);
        if (strchr(key, '/') && !(key[0] >= '0' && key[0] <= '9')) {
            ck_assert_msg(strcmp(prev, key) <= 0, "'%s' after '%s'", key, prev);
            snprintf(prev, sizeof prev, "%s", key);
        }
        line = nl + 1;
    }
    rc = sh("%s list --goldens data/ci --filter '^mxfp8_quant/' --json -", dsv4_test_exe());
    ck_assert_msg(rc == 0 && out[0] == '[', "rc %d:\n%s", rc, out);
    ck_assert_int_eq(dsv4_test_count(out, "\"file\": "), 6);
    ck_assert_ptr_nonnull(strstr(out, "\"op\": \"mxfp8_quant\", \"variant\": \"log2=exact\""));
    if (sh("/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' < /dev/null") != 127) {
        rc = sh("%s list --goldens --json - | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'",
                dsv4_test_exe());
        ck_assert_msg(rc == 0 && atoi(out) == n, "rc %d: %s", rc, out);
    }
    rc = sh("%s list --goldens %s", dsv4_test_exe(), tmp("nonexistent"));
    ck_assert_msg(rc == 2 && strstr(out, "cannot open the folder"), "rc %d:\n%s", rc, out);
    dsv4_test_write_file(tmp("junk.h5"), "not hdf5");
    rc = sh("%s list --goldens %s", dsv4_test_exe(), tmpdir);
    ck_assert_msg(rc == 2 && strstr(out, "junk.h5: not an HDF5 file") && strstr(out, "0 goldens of 0 ops"),
                  "rc %d:\n%s", rc, out);
}
END_TEST

DSV4_TEST_MAIN("actual", "actual", 600, setup, teardown, every_golden_passes_through_actual,
               one_changed_element_fails_naming_it, missing_case_is_not_provided, float32_for_bfloat16_when_exact,
               bad_actuals_files_exit_2, reports_jobs_shards_and_repro, h5py_recipe_end_to_end, reader_api,
               list_goldens_index)
