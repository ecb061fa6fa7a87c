/* test_identify.c - `dsv4check identify` and plug-in ABI 2.
 *
 * identify: the example plug-in is combine_topk_swa_indices [default] bit
 * for bit; its planted bug matches no variant and names where the nearest
 * one first differs; plug-ins built from the reference of a non-default
 * variant (the mutants mxfp8_log2_exact and qquant_variant_a_for_b, which
 * claim the default) are identified as log2=exact and quant=cache_a; an
 * actuals file of goldens' outputs is identified per variant of its cases.
 * ABI 2: the example plug-in is told each case's name, seed and golden;
 * its ABI 1 build still loads and runs.  Runs build/dsv4check (or
 * $DSV4CHECK) from the repository root. */
#define _POSIX_C_SOURCE 200809L
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "actualutil.h"

static char tmpdir[256];
static char *out;
#define OUT_MAX (1 << 20)

/* Runs a shell command line, stdout + stderr into out; the exit code. */
#define sh(...) dsv4_test_sh(out, OUT_MAX, __VA_ARGS__)

/* A library beside the tests (tests/NAME) or the mutants (mutants/NAME). */
#define lib dsv4_test_build_path

static void setup(void)
{
    dsv4_test_scratch_open(tmpdir, sizeof tmpdir, "dsv4ident", &out, OUT_MAX);
    dsv4_h5_quiet();
}

static void teardown(void) { dsv4_test_scratch_close(tmpdir, &out); }

START_TEST(example_plugin_is_the_default)
{
    dsv4_test_expect(sh("%s identify --impl %s", dsv4_test_exe(), lib("tests", "libexample.so")), 0, out,
                     DSV4_WANTS("identify: example-cpu (default device) on ",
                                "combine_topk_swa_indices, called as default: 17 cases\n",
                                "  default                      bit for bit   17 of 17 cases\n",
                                "  validate_topk=none           differs       ",
                                "  width_guard=col0             differs       2 of 17 cases fail\n",
                                "  nearest failing: width_guard=col0, first differs at "
                                "combine_topk_wider_than_indices: combined_indices [0, 300]: expected 619, actual 755",
                                "  => default (bit for bit)\n",
                                "identify: 1 op group judged, 0 matching no variant\n"));
    /* only the ops of the sources given */
    dsv4_test_expect(sh("%s identify --impl %s cases/ci/quant.yaml", dsv4_test_exe(), lib("tests", "libexample.so")),
                     77, out, DSV4_WANTS("provides none of the sources' ops"));
}
END_TEST

START_TEST(planted_bug_matches_no_variant)
{
    dsv4_test_expect(sh("%s identify --impl %s data/ci/combine_mixed_prefill_c4.h5 data/ci/combine_c128.h5",
                        dsv4_test_exe(), lib("tests", "libexample_wrong.so")),
                     1, out,
                     DSV4_WANTS("combine_topk_swa_indices, called as default: 2 cases\n",
                                "  default                      differs       2 of 2 cases fail\n",
                                "  nearest failing: default, first differs at ", "combined_indices [1, ", "window part",
                                "  => no variant of combine_topk_swa_indices\n",
                                "identify: 1 op group judged, 1 matching no variant\n"));
}
END_TEST

START_TEST(reference_of_another_variant_is_named)
{
    dsv4_test_expect(sh("%s identify --impl %s", dsv4_test_exe(), lib("mutants", "libmut_mxfp8_log2_exact.so")), 0, out,
                     DSV4_WANTS("mxfp8_quant, called as default: ", "  log2=exact                   bit for bit   ",
                                "  default                      differs       ",
                                "  nearest failing: default, first differs at mxfp8_log2_edge_f32: data [0, 0]: "
                                "expected 16, actual 32",
                                "  => log2=exact (bit for bit)\n"));
    dsv4_test_expect(sh("%s identify --impl %s --filter '^rocm_mxfp4_indexer_q_quant/'", dsv4_test_exe(),
                        lib("mutants", "libmut_qquant_variant_a_for_b.so")),
                     0, out,
                     DSV4_WANTS("rocm_mxfp4_indexer_q_quant, called as default: 2 cases\n",
                                "  quant=cache_a                bit for bit   2 of 2 cases\n",
                                "  => quant=cache_a (bit for bit)\n"));
}
END_TEST

START_TEST(actuals_file_is_identified_per_variant)
{
    char f[400];
    snprintf(f, sizeof f, "%s/mx.h5", tmpdir);
    const char *const goldens[] = {"data/ci/mxfp8_special_bf16_default.h5", "data/ci/mxfp8_special_bf16_log2_exact.h5",
                                   "data/ci/mxfp8_log2_edge_f32_exact.h5", "data/ci/mxfp8_special_bf16_scale_rule_floor.h5",
                                   NULL};
    write_actuals(f, goldens, NULL);
    dsv4_test_expect(sh("%s identify --actual %s data/ci/mxfp8_*.h5", dsv4_test_exe(), f), 0, out,
                     DSV4_WANTS("mxfp8_quant, the file's cases of variant default: 1 case\n",
                                "mxfp8_quant, the file's cases of variant log2=exact: 2 cases\n",
                                "  => log2=exact (bit for bit)\n",
                                "mxfp8_quant, the file's cases of variant scale_rule=floor: 1 case\n",
                                "  => scale_rule=floor (bit for bit)\n",
                                "mxfp8_quant: 2 cases not provided\n")); /* the default cases the file lacks */
    /* usage */
    dsv4_test_expect(sh("%s identify cases/ci.yaml", dsv4_test_exe()), 2, out,
                     DSV4_WANTS("name the implementation: --impl IMPL or --actual FILE"));
    dsv4_test_expect(sh("%s identify --actual %s --filter '^nothing$'", dsv4_test_exe(), f), 2, out,
                     DSV4_WANTS("no case selected"));
}
END_TEST

/* ---- ABI 2 ---- */

START_TEST(abi2_plugin_is_told_the_case)
{
    char log[400], suite[400];
    snprintf(log, sizeof log, "%s/cases.log", tmpdir);
    int rc = sh("DSV4_EXAMPLE_CASE_LOG=%s %s run cases/ci.yaml --filter '^combine_' -j 2 --impl %s", log,
                dsv4_test_exe(), lib("tests", "libexample.so"));
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    char *text = dsv4_test_slurp(log);
    ck_assert_int_eq(dsv4_test_count(text, "\n"), 15); /* the two other variants' cases are not run */
    ck_assert_ptr_nonnull(strstr(text, "combine_mixed_prefill_c4 1 cases/ci/../../data/ci/combine_mixed_prefill_c4.h5\n"));
    ck_assert_ptr_nonnull(strstr(text, "combine_sweep[topk=2048,compress_ratio=128] 1 "));
    free(text);
    /* check: the golden's case name and path; a case without a golden: no path */
    remove(log);
    rc = sh("DSV4_EXAMPLE_CASE_LOG=%s %s check data/ci/combine_c128.h5 --impl %s", log, dsv4_test_exe(),
            lib("tests", "libexample.so"));
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    snprintf(suite, sizeof suite, "%s/live.yaml", tmpdir);
    dsv4_test_write_file(suite, "suite: live\ncases:\n  - name: live_case\n    op: combine_topk_swa_indices\n"
                                "    seed: 77\n    params: {compress_ratio: 4, topk: 512, window_size: 128,\n"
                                "             query_lens: [1, 3], prefix_lens: [20, 7]}\n");
    rc = sh("DSV4_EXAMPLE_CASE_LOG=%s %s run %s --impl %s", log, dsv4_test_exe(), suite, lib("tests", "libexample.so"));
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    text = dsv4_test_slurp(log);
    ck_assert_str_eq(text, "combine_c128 1 data/ci/combine_c128.h5\nlive_case 77 -\n");
    free(text);
    dsv4_test_expect(sh("%s list --impl %s", dsv4_test_exe(), lib("tests", "libexample.so")), 0, out,
                     DSV4_WANTS("plug-in ABI 2, device -1 (default)\n"));
}
END_TEST

START_TEST(abi1_plugin_still_loads_and_runs)
{
    const char *so = lib("tests", "libexample_abi1.so");
    dsv4_test_expect(sh("%s list --impl %s", dsv4_test_exe(), so), 0, out,
                     DSV4_WANTS("plug-in ABI 1, device -1 (default)\n"));
    dsv4_test_expect(sh("%s run cases/ci.yaml --filter '^combine_' --impl %s -j 2", dsv4_test_exe(), so), 0, out,
                     DSV4_WANTS("summary: 15 passed, 0 failed, 2 skipped"));
    /* one case agrees with every variant: said so */
    dsv4_test_expect(sh("%s identify --impl %s data/ci/combine_c128.h5", dsv4_test_exe(), so), 0, out,
                     DSV4_WANTS("  => default (bit for bit); these inputs do not tell it from validate_topk=none, "
                                "width_guard=col0\n"));
}
END_TEST

DSV4_TEST_MAIN("identify", "identify", 600, setup, teardown, example_plugin_is_the_default,
               planted_bug_matches_no_variant, reference_of_another_variant_is_named,
               actuals_file_is_identified_per_variant, abi2_plugin_is_told_the_case,
               abi1_plugin_still_loads_and_runs)
