/* test_determinism.c - the reference output is bit-identical across
 * OPENBLAS_NUM_THREADS=1 and 2 and across runs (a golden must not depend on
 * the machine that wrote it).  The ci suite is
 * generated three times through the CLI (threads 1, 2, 1) into temporary
 * folders; every golden must agree byte for byte in every tensor and
 * parameter with the other runs and with the committed golden (provenance
 * attributes aside). */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden_eq.h"
#include "testutil.h"

static char tmpdir[256];

static void setup(void) { dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4det"); }
static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

static void gen_into(const char *sub, int threads)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=%d %s gen cases/ci.yaml -o %s/%s >/dev/null 2>&1",
             threads, dsv4_test_exe(), tmpdir, sub);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s: status %d", cmd, rc);
}

static void assert_same_file(const char *a, const char *b)
{
    dsv4_golden ga, gb;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read(a, &ga, &st) == 0, "%s", st.msg);
    ck_assert_msg(dsv4_golden_read(b, &gb, &st) == 0, "%s", st.msg);
    char why[256] = "";
    ck_assert_msg(dsv4_golden_same(&ga, &gb, why, sizeof why), "%s vs %s: %s", a, b, why);
    dsv4_golden_free(&ga);
    dsv4_golden_free(&gb);
}

START_TEST(reference_bit_identical_across_threads_and_runs)
{
    gen_into("t1", 1);
    gen_into("t2", 2);
    gen_into("t1again", 1);
    glob_t g;
    ck_assert_int_eq(glob("data/ci/*.h5", 0, NULL, &g), 0);
    ck_assert_int_ge(g.gl_pathc, 12);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        char p1[600], p2[600], p3[600];
        snprintf(p1, sizeof p1, "%s/t1/%s", tmpdir, base);
        snprintf(p2, sizeof p2, "%s/t2/%s", tmpdir, base);
        snprintf(p3, sizeof p3, "%s/t1again/%s", tmpdir, base);
        assert_same_file(p1, p2);
        assert_same_file(p1, p3);
        assert_same_file(g.gl_pathv[i], p1);
    }
    globfree(&g);
}
END_TEST

/* The comparison itself must see a one-bit change (not a test that cannot fail). */
START_TEST(comparison_detects_one_bit)
{
    dsv4_golden a, b;
    dsv4_status st = {0, ""};
    const char *p = "data/ci/combine_decode_only_c4.h5";
    ck_assert_int_eq(dsv4_golden_read(p, &a, &st), 0);
    ck_assert_int_eq(dsv4_golden_read(p, &b, &st), 0);
    char why[256];
    ck_assert(dsv4_golden_same(&a, &b, why, sizeof why));
    ((unsigned char *)b.outputs.t[0].data)[b.outputs.t[0].nbytes - 1] ^= 1;
    ck_assert(!dsv4_golden_same(&a, &b, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, b.outputs.t[0].name));
    ((unsigned char *)b.outputs.t[0].data)[b.outputs.t[0].nbytes - 1] ^= 1;
    b.params.p[0].i ^= 1;
    ck_assert(!dsv4_golden_same(&a, &b, why, sizeof why));
    dsv4_golden_free(&a);
    dsv4_golden_free(&b);
}
END_TEST

DSV4_TEST_MAIN("determinism", "reference", 120, setup, teardown, reference_bit_identical_across_threads_and_runs,
               comparison_detects_one_bit)
