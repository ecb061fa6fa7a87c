/* test_verdicts.c - verdicts that real kernels exposed as wrong: a cache
 * budget that hid a write into another request's slot, pad bytes that a
 * budget forgave, and the FNUZ NaN poison of the paged attention generator;
 * and the contract: tags that mark cases beyond a production kernel's
 * contract.
 * Each test changes one byte of a committed golden's expected output (or
 * builds a case) and checks the CLI's exit code and its words. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness/golden.h"
#include "../ops/ops.h"
#include "../ref/indexer.h"
#include "../ref/kvcache.h"
#include "testutil.h"

static char tmpdir[64];
static char outbuf[1 << 16];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dsv4verdict.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Reads golden `name`, lets edit change its expected output `output`
 * (given the input of the same name, for in/out caches), writes the result
 * into tmpdir and runs `check` on it: the exit code, output in outbuf. */
typedef void (*edit_fn)(const dsv4_tensor *before, dsv4_tensor *after, void *ctx);

static int check_edited(const char *name, const char *output, edit_fn edit, void *ctx)
{
    char src[256], dst[256];
    snprintf(src, sizeof src, "data/ci/%s.h5", name);
    snprintf(dst, sizeof dst, "%s/%s.h5", tmpdir, name);
    dsv4_golden g;
    dsv4_test_golden_read(src, &g);
    dsv4_tensor *after = dsv4_tensors_find(&g.outputs, output);
    const dsv4_tensor *before = dsv4_tensors_get(&g.inputs, output);
    ck_assert_ptr_nonnull(after);
    edit(before, after, ctx);
    return dsv4_test_check_changed(&g, dst, outbuf, sizeof outbuf);
}

/* ---- rocm_mxfp4_indexer_k_store: the budget covers written entries only ---- */

typedef struct byte_edit {
    int64_t offset; /* -1: the first byte the op writes (differs from the input) */
    uint8_t xor_mask;
    int64_t chosen;
} byte_edit;

static int64_t first_written(const dsv4_tensor *before, const dsv4_tensor *after)
{
    for (size_t i = 0; i < after->nbytes; i++)
        if (((const uint8_t *)after->data)[i] != ((const uint8_t *)before->data)[i])
            return (int64_t)i;
    ck_abort_msg("%s: no byte written", after->name);
    return -1;
}

static void flip_byte(const dsv4_tensor *before, dsv4_tensor *after, void *ctx)
{
    byte_edit *e = ctx;
    e->chosen = e->offset >= 0 ? e->offset : first_written(before, after);
    ((uint8_t *)after->data)[e->chosen] ^= e->xor_mask;
}

/* Page 2, entry 0 of idx_kstore_c128_h32 is a slot no token writes (the
 * golden keeps its 0x5A poison there): one changed byte must fail, as a
 * kernel writing there would corrupt another request's cache. */
START_TEST(kstore_untouched_slot_byte_fails)
{
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(32, 128, 32, 1, &L, &st), 0); /* the case's layout */
    const int64_t off = 2 * dsv4_idx_page_bytes(&L) + dsv4_idx_value_offset(&L, 0, 0);
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(dsv4_golden_read("data/ci/idx_kstore_c128_h32.h5", &g, &st), 0);
    const uint8_t *in = dsv4_tensors_get(&g.inputs, "k_cache")->data, *out = dsv4_tensors_get(&g.outputs, "k_cache")->data;
    ck_assert_msg(in[off] == 0x5A && out[off] == 0x5A, "page 2 entry 0 is written in this golden");
    dsv4_golden_free(&g);
    byte_edit e = {off, 0x01, -1};
    int rc = check_edited("idx_kstore_c128_h32", "k_cache", flip_byte, &e);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "FAIL k_cache") && strstr(outbuf, "page 2, entry 0"), "%s", outbuf);
    ck_assert_msg(strstr(outbuf, "1 of the") && strstr(outbuf, "that must be exact"), "%s", outbuf);
}
END_TEST

/* A rounding flip in a byte the op writes stays a warning within the
 * budget (the aiter test's 99.5%). */
START_TEST(kstore_written_byte_flip_warns)
{
    byte_edit e = {-1, 0x01, -1};
    int rc = check_edited("idx_kstore_c128_h32", "k_cache", flip_byte, &e);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "WARN") && strstr(outbuf, "the budget covers"), "%s", outbuf);
}
END_TEST

/* ---- compressor: the pad byte of a written row, and other rows, exact ---- */

/* The pad byte (byte 7 of the scale record) of the row holding the first
 * written byte, in a [pages, B, 584] cache. */
static void flip_pad_of_first_row(const dsv4_tensor *before, dsv4_tensor *after, void *ctx)
{
    byte_edit *e = ctx;
    const int64_t B = after->shape[1], page_bytes = B * DSV4_KV_TOKEN_BYTES, off = first_written(before, after);
    const int64_t page = off / page_bytes, in_page = off % page_bytes;
    ck_assert_msg(in_page < B * DSV4_KV_DATA_BYTES, "first written byte is not a value byte");
    const int64_t row = in_page / DSV4_KV_DATA_BYTES;
    e->chosen = page * page_bytes + dsv4_kv_scale_offset(B, row) + DSV4_KV_SCALE_BYTES - 1;
    ck_assert_uint_eq(((uint8_t *)after->data)[e->chosen], 0); /* the encoder writes 0 */
    ((uint8_t *)after->data)[e->chosen] ^= e->xor_mask;
}

static void flip_last_unchanged(const dsv4_tensor *before, dsv4_tensor *after, void *ctx)
{
    byte_edit *e = ctx;
    e->chosen = (int64_t)after->nbytes - 1;
    ck_assert_uint_eq(((const uint8_t *)before->data)[e->chosen], ((uint8_t *)after->data)[e->chosen]);
    ((uint8_t *)after->data)[e->chosen] ^= e->xor_mask;
}

START_TEST(compressor_pad_byte_fails_value_flip_warns)
{
    byte_edit e = {-1, 0x01, -1};
    int rc = check_edited("comp_c4_prefill_two_requests", "kv_cache", flip_pad_of_first_row, &e);
    ck_assert_msg(rc == 1, "pad byte: exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "FAIL kv_cache") && strstr(outbuf, "that must be exact"), "%s", outbuf);
    byte_edit v = {-1, 0x01, -1};
    rc = check_edited("comp_c4_prefill_two_requests", "kv_cache", flip_byte, &v);
    ck_assert_msg(rc == 0, "value byte: exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "WARN"), "%s", outbuf);
    /* a byte of a row the step does not write (the last byte: the last
     * row's pad byte, or a spare page), unchanged in the golden: fail */
    byte_edit u = {-2, 0x01, -1};
    rc = check_edited("comp_c4_prefill_two_requests", "kv_cache", flip_last_unchanged, &u);
    ck_assert_msg(rc == 1, "unwritten byte: exit %d:\n%s", rc, outbuf);
}
END_TEST

/* ---- the paged attention generator's NaN poison under FNUZ ---- */

/* nan_rows with fp8=fnuz poisons with 0x80 (the one FNUZ NaN; 0x7F reads
 * as 240, which the op's own validator refused as a non-finite key). */
START_TEST(fnuz_nan_rows_poison_is_the_fnuz_nan)
{
    char path[256];
    snprintf(path, sizeof path, "%s/fnuz.yaml", tmpdir);
    dsv4_test_write_file(path,
                         "suite: fnuz-poison\n"
                         "cases:\n"
                         "  - name: fnuz_nan_rows\n"
                         "    op: rocm_sparse_attn_decode\n"
                         "    variant: fp8=fnuz\n"
                         "    params: {num_heads: 4, swa_only: 1, window_size: 8, sink: \"0\", nan_rows: [0],\n"
                         "             query_lens: [1, 1], prefix_lens: [20, 3]}\n"
                         "  - name: ocp_nan_rows\n"
                         "    op: rocm_sparse_attn_decode\n"
                         "    params: {num_heads: 4, swa_only: 1, window_size: 8, sink: \"0\", nan_rows: [0],\n"
                         "             query_lens: [1, 1], prefix_lens: [20, 3]}\n");
    int rc = dsv4_test_cli(outbuf, sizeof outbuf, "run %s --impl ref", path);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, outbuf);
    ck_assert_msg(strstr(outbuf, "PASS      fnuz_nan_rows") && strstr(outbuf, "PASS      ocp_nan_rows"), "%s", outbuf);
    /* The poisoned slots' value bytes, by format. */
    for (int fnuz = 0; fnuz < 2; fnuz++) {
        dsv4_params ps;
        dsv4_status st = {0};
        const dsv4_op *op = dsv4_test_op_with("rocm_sparse_attn_decode", &ps,
                                              (const char *const[]){"query_lens", "[1]", "swa_only", "1",
                                                                    "window_size", "8", NULL});
        const dsv4_opctx c = dsv4_opctx_make(op, &ps, dsv4_op_variant(op, fnuz ? "fp8=fnuz" : "default"), 1);
        dsv4_tensors in = {0};
        ck_assert_msg(op->generate(&c, &in, &st) == 0, "%s", st.msg);
        const dsv4_tensor *cache = dsv4_tensors_get(&in, "swa_k_cache");
        /* page 0: the request's spare page (its pages run in reverse), never written */
        const uint8_t *spare = cache->data;
        ck_assert_uint_eq(spare[0], fnuz ? 0x80 : 0x7F);
        ck_assert(isnan(dsv4_fp8_to_f32(spare[0], fnuz ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN)));
        dsv4_tensors_free(&in);
    }
}
END_TEST

/* ---- contracts: cases beyond a production kernel's contract are tagged ---- */

START_TEST(contract_tags_listed_and_selected)
{
    int rc = dsv4_test_cli(outbuf, sizeof outbuf, "list cases/ci.yaml --filter contract:");
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, outbuf);
    ck_assert_int_eq(dsv4_test_count(outbuf, "beyond contract: "), 8);
    ck_assert_msg(strstr(outbuf, "combine_swa_only_layer") && strstr(outbuf, "empty_topk") &&
                      strstr(outbuf, "topk_wider_than_indices") && strstr(outbuf, "invalid_pages"),
                  "%s", outbuf);
    /* --exclude-tag: a list, and a prefix */
    rc = dsv4_test_cli(outbuf, sizeof outbuf,
                       "list cases/ci.yaml --filter contract: --exclude-tag contract:empty_topk,contract:invalid_pages");
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, outbuf);
    ck_assert_int_eq(dsv4_test_count(outbuf, "beyond contract: "), 5);
    ck_assert_ptr_null(strstr(outbuf, "combine_swa_only_layer"));
    rc = dsv4_test_cli(outbuf, sizeof outbuf, "list cases/ci.yaml --exclude-tag 'contract:*'");
    ck_assert_msg(rc == 0 && strstr(outbuf, "combine_decode_only_c4"), "exit %d:\n%s", rc, outbuf);
    ck_assert_ptr_null(strstr(outbuf, "beyond contract"));
    rc = dsv4_test_cli(outbuf, sizeof outbuf,
                       "run cases/ci/kvcache.yaml --filter invalid_block --exclude-tag 'contract:*'");
    ck_assert_msg(rc == 2 && strstr(outbuf, "no case selected"), "exit %d:\n%s", rc, outbuf);
}
END_TEST

DSV4_TEST_MAIN("verdicts", "verdicts", 120, setup, teardown, kstore_untouched_slot_byte_fails,
               kstore_written_byte_flip_warns, compressor_pad_byte_fails_value_flip_warns,
               fnuz_nan_rows_poison_is_the_fnuz_nan, contract_tags_listed_and_selected)
