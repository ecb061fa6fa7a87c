/* test_bisect.c - `scripts/bisect.sh --repo`: a kernel's history bisected
 * with this harness held fixed (tests/bisect_repo_e2e.sh builds the
 * scratch repository: a planted in-tolerance drift at c3, a broken build at
 * c4, a planted regression at c6), for the regression and, with --drift and
 * --baseline, for the drift; and the script's refusals.  Runs from the
 * repository root after `make` (build/dsv4check, or $DSV4CHECK). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *out;
#define OUT_MAX (1 << 20)

/* Runs a shell command line, stdout + stderr into out; the exit code. */
#define sh(...) dsv4_test_sh(out, OUT_MAX, __VA_ARGS__)

static void setup(void)
{
    out = malloc(OUT_MAX);
    ck_assert_ptr_nonnull(out);
}

static void teardown(void) { free(out); }

/* The text of out between marker and the next "== " line (or the end). */
static char *section(const char *marker)
{
    const char *p = strstr(out, marker);
    ck_assert_msg(p != NULL, "no '%s' in:\n%.4000s", marker, out);
    p += strlen(marker);
    const char *end = strstr(p, "\n== ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

START_TEST(kernel_regression_and_drift_are_found)
{
    if (sh("git --version") != 0)
        ck_abort_msg("the bisect test needs git");
    char env[600];
    snprintf(env, sizeof env, "DSV4CHECK=%s", dsv4_test_exe());
    int rc = sh("%s tests/bisect_repo_e2e.sh", env);
    ck_assert_msg(rc == 0, "rc %d:\n%.6000s", rc, out);
    char c3[64], c6[64];
    const char *p = strstr(out, "C3=");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "C3=%63s C6=%63s", c3, c6), 2);
    char reg_first[200], drift_first[200];
    snprintf(reg_first, sizeof reg_first, "first bad commit: %s c6: planted regression", c6);
    snprintf(drift_first, sizeof drift_first, "first bad commit: %s c3: planted drift", c3);
    char *reg = section("== regression\n"), *drift = section("== drift\n");
    dsv4_test_holds(reg, DSV4_WANTS(reg_first, "its failing report (",
                                    "FAIL      prefill_mixed  [combine_topk_swa_indices default]", "window part",
                                    "c4: broken build does not build: skip (125)"));
    dsv4_test_holds(drift, DSV4_WANTS(drift_first, "bad (drift beyond the factor)",
                                      "DRIFT     prefill_mixed  combined_indices: mismatches 0 -> 1", "--baseline "));
    ck_assert_ptr_null(strstr(drift, "c6: planted regression"));
    free(reg);
    free(drift);
}
END_TEST

START_TEST(bisect_refuses_bad_usage)
{
    const char *bad[][2] = {
        {"scripts/bisect.sh HEAD~1 HEAD -- run cases/ci.yaml", "--repo DIR (your kernel) or --self"},
        {"scripts/bisect.sh --repo . HEAD~1 HEAD -- run cases/ci.yaml", "--repo needs --build"},
        {"scripts/bisect.sh --repo . --build true --drift 2 HEAD~1 HEAD -- run x", "go together"},
        {"scripts/bisect.sh --repo . --build true --drift x --baseline y HEAD~1 HEAD -- run x", "a factor"},
        {"scripts/bisect.sh --repo /nonexistent --build true A B -- run x", "not a folder"},
        {"scripts/bisect.sh --self --build make A B -- run x", "go with --repo"},
        {"scripts/bisect.sh --repo . --build true A B -- nosuchprogram-dsv4 run", "no such program"},
        {"scripts/bisect.sh --repo . --build true A B -- run cases/ci.yaml", "unknown commit A"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = sh("%s", bad[k][0]);
        ck_assert_msg(rc == 2, "`%s`: rc %d:\n%s", bad[k][0], rc, out);
        ck_assert_msg(strstr(out, bad[k][1]) != NULL, "`%s`: no '%s' in:\n%s", bad[k][0], bad[k][1], out);
    }
}
END_TEST

DSV4_TEST_MAIN("bisect", "bisect", 600, setup, teardown, kernel_regression_and_drift_are_found,
               bisect_refuses_bad_usage)
