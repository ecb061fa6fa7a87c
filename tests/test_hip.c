/* test_hip.c - the hip backend and the plug-in loader without a GPU: `--impl
 * hip` is a one-line skip (exit 77) whether the backend is missing, built
 * with nvcc or built with hipcc; plug-ins with a wrong ABI version are
 * refused; a plug-in's own skip is passed on; writes past either end of an
 * output are caught by the guard bytes and named.  Builds nothing but the
 * small fixture plug-in (tests/fixture_plugin.c, with the system cc).  Runs
 * build/dsv4check (or $DSV4CHECK) from the repository root. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/dsv4_plugin.h"
#include "testutil.h"

static char tmpdir[256];
static char out[1 << 16];

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void setup(void) { dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4hip"); }
static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

/* Asserts the one-line skip, or a clean pass where a GPU is present. */
static void assert_skip_or_pass(int rc, const char *what)
{
    if (rc == 0) { /* a GPU and a working backend: the suite passed */
        ck_assert_msg(strstr(out, " 0 failed") != NULL, "%s: rc 0 but:\n%s", what, out);
        return;
    }
    ck_assert_msg(rc == 77, "%s: rc %d:\n%s", what, rc, out);
    ck_assert_msg(lines(out) == 1, "%s: expected one line:\n%s", what, out);
    ck_assert_msg(strncmp(out, "skipped: ", 9) == 0, "%s:\n%s", what, out);
}

START_TEST(hip_missing_library_skips)
{
    int rc =
        dsv4_test_cli_env(out, sizeof out, "DSV4_HIP_LIB=/nonexistent/libdsv4_hip.so", "run cases/ci.yaml --impl hip");
    ck_assert_msg(rc == 77, "rc %d:\n%s", rc, out);
    ck_assert_int_eq(lines(out), 1);
    ck_assert_msg(strstr(out, "skipped: hip backend not built: /nonexistent/libdsv4_hip.so") != NULL, "%s",
                  out);
}
END_TEST

/* The default lookup (libdsv4_hip.so beside dsv4check): built or not. */
START_TEST(hip_default_skips_or_passes)
{
    assert_skip_or_pass(dsv4_test_cli_env(out, sizeof out, "DSV4_HIP_LIB=", "run cases/ci.yaml --impl hip"),
                        "--impl hip");
}
END_TEST

/* Every backend build that exists here (make hip, make hip-compile-check):
 * loaded, initialised, and without a GPU a one-line skip naming the cause. */
START_TEST(hip_built_libraries_skip_without_gpu)
{
    const char *libs[] = {"build/libdsv4_hip.so", "build/hip-check/libdsv4_hip_cuda.so",
                          "build/hip-check/libdsv4_hip_amd.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        if (access(libs[i], R_OK) != 0)
            continue;
        char env[300];
        /* detect_leaks=0: under ASan, the HIP 5.2 runtime's own start-up
         * allocations (never freed by libamdhip64) are reported at exit. */
        snprintf(env, sizeof env, "ASAN_OPTIONS=detect_leaks=0 DSV4_HIP_LIB=%s", libs[i]);
        int rc = dsv4_test_cli_env(out, sizeof out, env, "run cases/ci.yaml --impl hip");
        assert_skip_or_pass(rc, libs[i]);
        if (rc == 77) /* no GPU, or its runtime library is absent */
            ck_assert_msg(strstr(out, "no GPU: hipGetDeviceCount returned") != NULL ||
                              strstr(out, "cannot load here") != NULL,
                          "%s: %s", libs[i], out);
    }
}
END_TEST

/* tests/fixture_plugin.c built with -DMODE=mode into tmpdir; returns its path. */
static const char *fixture(int mode)
{
    static char so[512];
    char cmd[1200];
    snprintf(so, sizeof so, "%s/fixture%d.so", tmpdir, mode);
    snprintf(cmd, sizeof cmd, "${CC:-cc} -std=c11 -Wall -Wextra -Werror -shared -fPIC -DMODE=%d -o %s tests/fixture_plugin.c",
             mode, so);
    ck_assert_msg(system(cmd) == 0, "cannot build the fixture plug-in: %s", cmd);
    return so;
}

static const char *one_case = "--filter '^combine_decode_only_c4$'";

START_TEST(wrong_abi_version_is_refused)
{
    int rc = dsv4_test_cli(out, sizeof out, "run cases/ci.yaml --impl %s %s", fixture(1), one_case);
    ck_assert_msg(rc == 2, "rc %d:\n%s", rc, out);
    char want[80];
    snprintf(want, sizeof want, "plug-in ABI version %d, this dsv4check speaks %d to %d", DSV4_PLUGIN_ABI_VERSION + 1,
             DSV4_PLUGIN_ABI_OLDEST, DSV4_PLUGIN_ABI_VERSION);
    ck_assert_msg(strstr(out, want) != NULL, "%s", out);
}
END_TEST

START_TEST(plugin_skip_is_one_line)
{
    int rc = dsv4_test_cli(out, sizeof out, "run cases/ci.yaml --impl %s", fixture(2));
    ck_assert_msg(rc == 77, "rc %d:\n%s", rc, out);
    ck_assert_int_eq(lines(out), 1);
    ck_assert_msg(strstr(out, "skipped: fixture: fixture: no device here") != NULL, "%s", out);
}
END_TEST

START_TEST(write_past_output_end_is_named)
{
    int rc = dsv4_test_cli(out, sizeof out, "run cases/ci.yaml --impl %s %s", fixture(3), one_case);
    ck_assert_msg(rc == 3, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "output 'combined_lens': guard bytes after the buffer overwritten (byte 0") !=
                      NULL,
                  "%s", out);
}
END_TEST

START_TEST(write_before_output_start_is_named)
{
    int rc = dsv4_test_cli(out, sizeof out, "run cases/ci.yaml --impl %s %s", fixture(4), one_case);
    ck_assert_msg(rc == 3, "rc %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "output 'combined_indices': guard bytes before the buffer overwritten") != NULL,
                  "%s", out);
}
END_TEST

DSV4_TEST_MAIN("hip", "plugin", 60, setup, teardown, hip_missing_library_skips, hip_default_skips_or_passes,
               hip_built_libraries_skip_without_gpu, wrong_abi_version_is_refused, plugin_skip_is_one_line,
               write_past_output_end_is_named, write_before_output_start_is_named)
