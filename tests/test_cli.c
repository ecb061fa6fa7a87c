/* test_cli.c - end-to-end tests of the dsv4check command line: the ci
 * suite passes, reports are written, and failures and bad inputs give the
 * documented exit codes with messages that name the element or the place.
 * Runs build/dsv4check (or $DSV4CHECK) from the repository root. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <stdarg.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness/golden.h"
#include "testutil.h"

static char tmpdir[256];
static char out[1 << 16];

static void setup(void) { dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4cli"); }
static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

static const char *golden_path = "data/ci/combine_mixed_prefill_c4.h5";

START_TEST(ci_suite_passes_with_reports)
{
    char junit[300], json[300];
    snprintf(junit, sizeof junit, "%s/out.xml", tmpdir);
    snprintf(json, sizeof json, "%s/out.json", tmpdir);
    int rc = dsv4_test_cli(out, sizeof out, "run cases/ci.yaml --impl ref --junit %s --json %s", junit, json);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, " 0 failed, 0 skipped"));
    char *x = dsv4_test_slurp(junit);
    ck_assert_ptr_nonnull(strstr(x, "<?xml version=\"1.0\""));
    ck_assert_int_eq(dsv4_test_count(x, "<testsuites>"), 1);
    ck_assert_int_eq(dsv4_test_count(x, "</testsuites>"), 1);
    ck_assert_int_eq(dsv4_test_count(x, "<testcase "), dsv4_test_count(x, "</testcase>"));
    ck_assert_int_gt(dsv4_test_count(x, "<testcase "), 12);
    ck_assert_int_eq(dsv4_test_count(x, "<failure"), 0);
    ck_assert_ptr_nonnull(strstr(x, "<property name=\"policy\""));
    free(x);
    char *j = dsv4_test_slurp(json);
    ck_assert_ptr_nonnull(strstr(j, "\"exit_code\": 0"));
    free(j);
}
END_TEST

START_TEST(committed_goldens_check)
{
    glob_t g;
    ck_assert_int_eq(glob("data/ci/*.h5", 0, NULL, &g), 0);
    ck_assert_int_ge(g.gl_pathc, 12);
    globfree(&g);
    int rc = dsv4_test_cli(out, sizeof out, "check data/ci/*.h5 --impl ref");
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
}
END_TEST

/* Copy a golden with element [1, 0] of combined_indices changed by +1. */
static void write_changed_golden(const char *dst)
{
    dsv4_golden g;
    dsv4_status st = {0};
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(dsv4_golden_read(golden_path, &g, &st), 0);
    dsv4_tensor *t = dsv4_tensors_find(&g.outputs, "combined_indices");
    ck_assert_ptr_nonnull(t);
    int32_t *v = t->data;
    v[t->shape[1]] += 1; /* row 1, column 0 */
    ck_assert_msg(dsv4_golden_write(dst, &g, 0, &st) == 0, "%s", st.msg);
    dsv4_golden_free(&g);
}

START_TEST(changed_element_fails_and_is_named)
{
    char path[300];
    snprintf(path, sizeof path, "%s/changed.h5", tmpdir);
    write_changed_golden(path);
    int rc = dsv4_test_cli(out, sizeof out, "check %s --impl ref", path);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "1 of "));
    ck_assert_msg(strstr(out, "[1, 0]") != NULL, "element not named:\n%s", out);
    ck_assert_ptr_nonnull(strstr(out, "combined_indices"));
    ck_assert_ptr_nonnull(strstr(out, "request 1, position 7, top-k part"));
    ck_assert_ptr_nonnull(strstr(out, "reproduce:"));
}
END_TEST

START_TEST(malformed_yaml_names_line_and_column)
{
    char path[300];
    snprintf(path, sizeof path, "%s/bad.yaml", tmpdir);
    dsv4_test_write_file(path, "suite: x\ncases:\n  - name: a\n    op: [unclosed\n");
    int rc = dsv4_test_cli(out, sizeof out, "run %s", path);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "bad.yaml:") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "bad.yaml:5:1") != NULL || strstr(out, "bad.yaml:4:") != NULL, "%s", out);
    /* an unknown key: the exact place */
    dsv4_test_write_file(path, "suite: x\ncases:\n  - name: a\n    op: combine_topk_swa_indices\n    colour: red\n");
    rc = dsv4_test_cli(out, sizeof out, "run %s", path);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "bad.yaml:5:5: unknown key 'colour'") != NULL, "%s", out);
}
END_TEST

static void copy_prefix(const char *src, const char *dst, double frac)
{
    char *all;
    FILE *f = fopen(src, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    all = malloc((size_t)n);
    ck_assert_int_eq(fread(all, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    f = fopen(dst, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(all, 1, (size_t)((double)n * frac), f);
    fclose(f);
    free(all);
}

START_TEST(truncated_hdf5_is_bad_input)
{
    char path[300];
    snprintf(path, sizeof path, "%s/trunc.h5", tmpdir);
    copy_prefix(golden_path, path, 0.5);
    int rc = dsv4_test_cli(out, sizeof out, "check %s", path);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, path) != NULL, "file not named:\n%s", out);
}
END_TEST

START_TEST(wrong_schema_version_is_bad_input)
{
    char path[300];
    snprintf(path, sizeof path, "%s/schema.h5", tmpdir);
    copy_prefix(golden_path, path, 1.0);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t a = H5Aopen(f, "dsv4check_schema", H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    long long two = 2;
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_LLONG, &two), 0);
    H5Aclose(a);
    H5Fclose(f);
    int rc = dsv4_test_cli(out, sizeof out, "check %s", path);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "schema version 2") != NULL, "%s", out);
}
END_TEST

START_TEST(gen_refuses_to_overwrite)
{
    int rc = dsv4_test_cli(out, sizeof out, "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o %s", tmpdir);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    char path[300];
    snprintf(path, sizeof path, "%s/combine_decode_only_c4.h5", tmpdir);
    struct stat before, after;
    ck_assert_int_eq(stat(path, &before), 0);
    rc = dsv4_test_cli(out, sizeof out, "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o %s", tmpdir);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "--force"));
    ck_assert_int_eq(stat(path, &after), 0);
    ck_assert_int_eq(before.st_ino, after.st_ino); /* not replaced */
    rc = dsv4_test_cli(out, sizeof out, "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o %s --force", tmpdir);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    rc = dsv4_test_cli(out, sizeof out, "check %s", path);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
}
END_TEST

/* data/README.md's h5py recipe, as a PyTorch/numpy user would follow it. */
START_TEST(h5py_written_golden_checks)
{
    if (system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "h5py_written_golden_checks: python3-h5py missing (scripts/setup.sh installs it)\n");
        ck_abort_msg("python3-h5py is not installed");
    }
    char path[300], cmd[600];
    snprintf(path, sizeof path, "%s/py.h5", tmpdir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/h5py_write_golden.py %s", path);
    ck_assert_int_eq(system(cmd), 0);
    int rc = dsv4_test_cli(out, sizeof out, "check %s --impl ref", path);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/h5py_write_golden.py %s --corrupt", path);
    ck_assert_int_eq(system(cmd), 0);
    rc = dsv4_test_cli(out, sizeof out, "check %s --impl ref", path);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "[1, 0]") != NULL, "%s", out);
}
END_TEST

/* Usage errors exit 2, help exits 0; want (when given): a string the
 * output must hold. */
START_TEST(usage_errors)
{
    static const struct {
        const char *args;
        int rc;
        const char *want;
    } usage[] = {
        {"frobnicate", 2, NULL},
        {"run", 2, NULL},
        {"run cases/ci.yaml --no-such-option", 2, NULL},
        {"run cases/ci.yaml --filter '('", 2, NULL},
        {"--help", 0, "exit codes"},
        {"run --help", 0, "--junit"},
        {"check /nonexistent.h5", 2, "/nonexistent.h5"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        const int rc = dsv4_test_cli(out, sizeof out, "%s", usage[i].args);
        ck_assert_msg(rc == usage[i].rc, "dsv4check %s: exit %d, want %d:\n%s", usage[i].args, rc, usage[i].rc, out);
        if (usage[i].want)
            dsv4_test_holds(out, DSV4_WANTS(usage[i].want));
    }
}
END_TEST

/* README.md's op table is `dsv4check list --markdown`, line for line. */
START_TEST(readme_lists_every_op)
{
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "list --markdown"), 0);
    char *readme = dsv4_test_slurp("README.md");
    int rows = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "| `", 3) != 0)
            continue;
        rows++;
        ck_assert_msg(strstr(readme, line) != NULL,
                      "README.md lacks (or has an outdated) op row; paste `dsv4check list --markdown`:\n%s", line);
    }
    ck_assert_int_gt(rows, 10);
    free(readme);
}
END_TEST

DSV4_TEST_MAIN("cli", "e2e", 120, setup, teardown, ci_suite_passes_with_reports, committed_goldens_check,
               changed_element_fails_and_is_named, malformed_yaml_names_line_and_column,
               truncated_hdf5_is_bad_input, wrong_schema_version_is_bad_input, gen_refuses_to_overwrite,
               h5py_written_golden_checks, usage_errors, readme_lists_every_op)
