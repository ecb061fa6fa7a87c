/* test_chain.c - the V4.1 attention layer as a chain (harness/chain.c,
 * ops/chain/): the reference through a plug-in passes every
 * configuration; a plug-in with one planted bug is named as the first
 * diverging stage in both modes; a plug-in providing a subset runs with the
 * reference filling the rest; step goldens are checked for staleness; bad
 * configurations are refused at load. */
#define _POSIX_C_SOURCE 200809L
#include <libgen.h>

#include "testutil.h"

#define OUT_LEN (1 << 20)
static char out[OUT_LEN];

/* build/tests/<name>: the example plug-ins sit beside the test programs. */
static const char *plugin(const char *name) { return dsv4_test_build_path("tests", name); }

/* Small live-reference chains (no goldens): one per layer kind and batch. */
static const char *live_cases =
    "  - name: c4_mixed\n"
    "    op: v41_attention_layer\n"
    "    params: {compress_ratio: 4, query_lens: [1, 1, 6, 3], prefix_lens: [70, 2, 0, 30]}\n"
    "  - name: c128_mixed_mx\n"
    "    op: v41_attention_layer\n"
    "    params: {compress_ratio: 128, output: mxfp8, query_lens: [1, 5], prefix_lens: [127, 124]}\n"
    "  - name: swa_prefill\n"
    "    op: v41_attention_layer\n"
    "    params: {compress_ratio: 0, query_lens: [5, 3], prefix_lens: [140, 0]}\n";

static char dir[256], suite_iso[300], suite_prop[300];

/* A suite of live_cases under one set of defaults: the suite's name, its
 * golden folder (NULL: none) and the chain's mode (NULL: the default). */
static void format_suite(char *text, size_t len, const char *suite, const char *golden_dir, const char *mode)
{
    char dir_line[64] = "", mode_key[48] = "";
    if (golden_dir)
        snprintf(dir_line, sizeof dir_line, "golden_dir: %s\n", golden_dir);
    if (mode)
        snprintf(mode_key, sizeof mode_key, "mode: %s, ", mode);
    snprintf(text, len,
             "suite: %s\n"
             "%s"
             "defaults:\n"
             "  seed: 3\n"
             "  params: {%shidden_size: 128, num_heads: 2, q_lora_rank: 128, o_groups: 1,\n"
             "           o_lora_rank: 128, index_heads: 32, index_topk: 16}\n"
             "cases:\n%s",
             suite, dir_line, mode_key, live_cases);
}

static void write_suite(const char *path, const char *mode)
{
    char text[4096];
    format_suite(text, sizeof text, "chain-test", NULL, mode);
    dsv4_test_write_file(path, text);
}

static void setup(void)
{
    dsv4_test_mkdtemp(dir, sizeof dir, "dsv4chain");
    snprintf(suite_iso, sizeof suite_iso, "%s/iso.yaml", dir);
    snprintf(suite_prop, sizeof suite_prop, "%s/prop.yaml", dir);
    write_suite(suite_iso, "isolated");
    write_suite(suite_prop, "propagated");
}

static void teardown(void) { dsv4_test_rm_rf(dir); }

/* The FAIL/PASS line of case name and the lines up to the next case. */
static const char *case_block(const char *text, const char *name, char *buf, size_t len)
{
    char key[128];
    snprintf(key, sizeof key, "  %s  [v41_attention_layer", name);
    const char *p = strstr(text, key);
    ck_assert_msg(p != NULL, "no result line for %s in:\n%s", name, text);
    while (p > text && p[-1] != '\n')
        p--;
    const char *e = strstr(p + 1, "\nPASS ");
    const char *f = strstr(p + 1, "\nFAIL ");
    if (!e || (f && f < e))
        e = f;
    size_t n = e ? (size_t)(e - p) : strlen(p);
    n = n < len - 1 ? n : len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

START_TEST(test_list_shows_the_chain)
{
    dsv4_test_expect(dsv4_test_cli(out, sizeof out, "list"), 0, out,
                     DSV4_WANTS("v41_attention_layer  (a chain of the ops above",
                                "  stages (a tap after each):\n    hidden_quant", "    qnorm_rope_kv_insert ",
                                "    wo_b "));
}
END_TEST

/* The reference as a plug-in: every op by the implementation, every case
 * passes, against the goldens (isolated, propagated) and live. */
START_TEST(test_reference_plugin_passes)
{
    const char *ref = plugin("libchain_ref.so");
    dsv4_test_expect(dsv4_test_cli(out, sizeof out, "run cases/ci/chain.yaml --impl %s", ref), 0, out,
                     DSV4_WANTS("summary: 9 passed, 0 failed, 0 skipped",
                                "isolated: 27 steps, 27 run by the implementation, 0 by the reference",
                                "propagated: 27 steps, 27 run by the implementation, 0 by the reference; "
                                "layer output identical to the reference chain's"));
    for (int m = 0; m < 2; m++)
        dsv4_test_expect(dsv4_test_cli(out, sizeof out, "run %s --impl %s", m ? suite_prop : suite_iso, ref), 0, out,
                         DSV4_WANTS("summary: 3 passed, 0 failed, 0 skipped"));
}
END_TEST

typedef struct planted {
    const char *lib, *stage, *step;
    unsigned cases; /* bit k: live case k runs the bug's op */
} planted;

static const planted bugs[] = {
    {"libchain_bug1.so", "qnorm_rope_kv_insert", "qnorm_rope_kv_insert", 7},
    {"libchain_bug2.so", "wo_a", "wo_a", 5}, /* the bf16 wo_a: not in the MXFP8 case */
    {"libchain_bug3.so", "prefill_combine", "combine.c0", 7},
};

/* A planted bug is the first diverging stage, in both modes, in every case
 * that runs its op; isolated runs name it as the only failing stage. */
START_TEST(test_planted_bug_named_in_both_modes)
{
    const planted *b = &bugs[_i];
    char block[16384], want[160], only[160];
    snprintf(want, sizeof want, "first diverging stage: %s (step %s,", b->stage, b->step);
    snprintf(only, sizeof only, "failing stages: %s\n", b->stage);
    for (int m = 0; m < 2; m++) {
        int rc = dsv4_test_cli(out, sizeof out, "run %s --impl %s", m ? suite_prop : suite_iso, plugin(b->lib));
        ck_assert_msg(rc == 1, "%s %s: exit %d\n%s", b->lib, m ? "propagated" : "isolated", rc, out);
        const char *names[] = {"c4_mixed", "c128_mixed_mx", "swa_prefill"};
        for (int k = 0; k < 3; k++) {
            case_block(out, names[k], block, sizeof block);
            if (!(b->cases >> k & 1)) {
                ck_assert_msg(!strncmp(block, "PASS ", 5), "%s: %s failed:\n%s", b->lib, names[k], block);
                continue;
            }
            ck_assert_msg(!strncmp(block, "FAIL ", 5), "%s: %s passed:\n%s", b->lib, names[k], block);
            ck_assert_msg(strstr(block, want) != NULL, "%s %s: want '%s' in:\n%s", b->lib, names[k], want, block);
            if (!m)
                ck_assert_msg(strstr(block, only) != NULL, "%s %s: want '%s' in:\n%s", b->lib, names[k], only, block);
            /* the usual locator: the failing output's first mismatch, decoded */
            ck_assert_ptr_nonnull(strstr(block, "): first ["));
        }
    }
    /* and against the committed step goldens */
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run cases/ci/chain.yaml --impl %s", plugin(b->lib)), 1);
    ck_assert_ptr_nonnull(strstr(out, want));
}
END_TEST

/* Propagated: downstream steps see the buggy tensors and, checked on their
 * own inputs, pass; the layer output's drift is reported.  Isolated: no
 * drift line (nothing propagates). */
START_TEST(test_propagated_feeds_the_implementation)
{
    char block[16384];
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s --json %s/p.json", suite_prop,
                                   plugin("libchain_bug1.so"), dir), 1);
    case_block(out, "c4_mixed", block, sizeof block);
    ck_assert_ptr_nonnull(strstr(block, "failing stages: qnorm_rope_kv_insert; layer output drift from the reference "
                                        "chain: max_abs "));
    ck_assert_ptr_null(strstr(block, "layer output drift from the reference chain: max_abs 0,"));
    char path[300];
    snprintf(path, sizeof path, "%s/p.json", dir);
    char *json = dsv4_test_slurp(path);
    /* the decode attention, fed the buggy q and cache, passes on its own inputs */
    const char *d = strstr(json, "\"name\": \"decode_attn/output\", \"verdict\": \"pass\"");
    ck_assert_ptr_nonnull(d);
    free(json);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s", suite_iso, plugin("libchain_bug1.so")), 1);
    ck_assert_ptr_null(strstr(out, "layer output drift"));
}
END_TEST

/* A subset of the ops by the implementation, the rest by the reference;
 * none at all is a skip. */
START_TEST(test_partial_implementation)
{
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s -v", suite_prop, plugin("libchain_partial.so")), 0);
    ck_assert_ptr_nonnull(strstr(out, "propagated: 26 steps, 3 run by the implementation, 23 by the reference"));
    ck_assert_ptr_nonnull(strstr(out, "pass prefill_attn.c0/output"));
    ck_assert_ptr_null(strstr(out, "pass qkv_proj/"));
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run cases/ci/chain.yaml --filter '^chain_swa_decode_bf16$' --impl %s",
                                   plugin("libexample.so")), 77);
    ck_assert_ptr_nonnull(strstr(out, "implements none of the ops of chain v41_attention_layer"));
}
END_TEST

/* Goldens: one per step, each an ordinary golden; gen skips propagated
 * cases; a changed seed (different primary tensors) is a stale golden; a
 * missing step golden is bad input. */
START_TEST(test_step_goldens)
{
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "gen %s -o %s/g", suite_iso, dir), 0);
    ck_assert_ptr_nonnull(strstr(out, "gen: 59 golden file(s) written")); /* 26 + 20 + 13 steps */
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "gen %s -o %s/g", suite_prop, dir), 0);
    ck_assert_ptr_nonnull(strstr(out, "gen: 0 golden file(s) written")); /* propagated: none of their own */
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "check %s/g/c4_mixed.qkv_proj.h5 %s/g/swa_prefill.combine.c0.h5",
                                   dir, dir), 0);
    ck_assert_ptr_nonnull(strstr(out, "PASS      c4_mixed/qkv_proj  [gemm_a8w8_blockscale bpreshuffle]"));

    char path[300], text[4096];
    snprintf(path, sizeof path, "%s/golden.yaml", dir);
    format_suite(text, sizeof text, "chain-goldens", "g", NULL);
    dsv4_test_write_file(path, text);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s", path, plugin("libchain_bug2.so")), 1);
    ck_assert_ptr_nonnull(strstr(out, "first diverging stage: wo_a"));
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s", path), 0);
    /* propagated cases of the same names read those goldens where their
     * inputs are the reference chain's, the live reference downstream of
     * the divergence */
    char prop[300], ptext[4096];
    snprintf(prop, sizeof prop, "%s/prop-golden.yaml", dir);
    format_suite(ptext, sizeof ptext, "chain-goldens-propagated", "g", "propagated");
    dsv4_test_write_file(prop, ptext);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s", prop, plugin("libchain_bug1.so")), 1);
    ck_assert_int_eq(dsv4_test_count(out, "first diverging stage: qnorm_rope_kv_insert"), 3);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --impl %s", prop, plugin("libchain_ref.so")), 0);
    /* another seed: the generator now builds other inputs than the goldens hold */
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --filter c4_mixed --seed 4", path), 0);
    char *p = strstr(text, "seed: 3");
    p[6] = '4';
    dsv4_test_write_file(path, text);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --filter c4_mixed", path), 2);
    ck_assert_ptr_nonnull(strstr(out, "c4_mixed.hidden_quant.h5: golden input 'x' differs from what the chain now "
                                      "builds for this step"));
    snprintf(path, sizeof path, "%s/g/c4_mixed.wo_b.h5", dir);
    ck_assert_int_eq(remove(path), 0);
    p[6] = '3';
    snprintf(path, sizeof path, "%s/golden.yaml", dir);
    dsv4_test_write_file(path, text);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s --filter c4_mixed", path), 2);
    ck_assert_ptr_nonnull(strstr(out, "c4_mixed.wo_b.h5: golden file missing"));
}
END_TEST

/* The rotated split: with the decode epilogue rotating its rows, the
 * standalone inverse RoPE starts after the decode tokens (2 here). */
START_TEST(test_rotated_split)
{
    dsv4_test_expect(dsv4_test_cli(out, sizeof out, "show data/ci/chain_c4_mixed_bf16.inverse_rope.h5"), 0, out,
                     DSV4_WANTS("rotated = 2"));
    dsv4_test_expect(dsv4_test_cli(out, sizeof out, "show data/ci/chain_c128_mixed_bf16.inverse_rope.h5"), 0, out,
                     DSV4_WANTS("rotated = 0"));
}
END_TEST

/* Configurations the layer cannot have are refused at load (exit 2,
 * file:line). */
START_TEST(test_bad_configurations)
{
    static const char *bad[][2] = {
        {"{compress_ratio: 4, query_lens: [3, 1]}", "is a decode (query_len 1) after a prefill"},
        {"{compress_ratio: 5, query_lens: [1]}", "compress_ratio = 5: 0 (SWA-only), 4 (C4) or 128 (C128)"},
        {"{output: mxfp8, fused_inv_rope: 1, query_lens: [1]}", "fused_inv_rope applies to the bf16 output"},
        {"{mode: both, query_lens: [1]}", "mode = 'both': isolated or propagated"},
        {"{max_model_len: 10, query_lens: [1], prefix_lens: [40]}", "max_model_len >= the longest request"},
    };
    char path[300], text[512];
    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(text, sizeof text, "suite: bad\ncases:\n  - name: x\n    op: v41_attention_layer\n    params: %s\n",
                 bad[k][0]);
        dsv4_test_write_file(path, text);
        ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "run %s", path), 2);
        ck_assert_msg(strstr(out, bad[k][1]) && strstr(out, "bad.yaml:3:"), "want '%s' in:\n%s", bad[k][1], out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chain");
    TCase *tc = dsv4_test_tcase(s, "chain", 300, setup, teardown,
        DSV4_TESTS(test_list_shows_the_chain, test_reference_plugin_passes));
    tcase_add_loop_test(tc, test_planted_bug_named_in_both_modes, 0, (int)(sizeof bugs / sizeof bugs[0]));
    dsv4_test_add(tc, DSV4_TESTS(test_propagated_feeds_the_implementation, test_partial_implementation,
                                 test_step_goldens, test_rotated_split, test_bad_configurations));
    return dsv4_test_run(s);
}
