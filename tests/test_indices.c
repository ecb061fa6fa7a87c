/* test_indices.c - combine_topk_swa_indices against rows derived by hand
 * from the seeds' Torch function (combine_topk_swa_indices of vllm
 * deepseek_v41/amd/rocm.py [SEED1]; docs/semantics/indices.md A6.2), not against the
 * reference itself. */
#include <string.h>

#include "../ops/ops.h"
#include "../ref/indices.h"
#include "testutil.h"

/* Two requests, query_start_loc base 10 (a narrowed batch):
 *   r0: L = 3, S = 5, G = 5 (g0 = 0);  r1: L = 1, S = 1, G = 1.
 * W = 4, c = 2, K = 4, M = 20, N = 3, so P = roundup128(8) = 128.
 * t0 pos 2: tk = min(3//2, 4) = 1 -> [2]; sw = 3 -> 3 + (2-3+1+i) = 3,4,5
 * t1 pos 3: tk = 2 -> [1, 5>=N -> -1]; sw = 4 -> 3,4,5,6
 * t2 pos 4: tk = 2 -> [-1 -> -1, 2]; sw = 4 -> 4,5,6,7
 * t3 pos 0 (r1): tk = 0; sw = 1 -> 20 + 3 + 0 = 23 */
static const int32_t topk[4 * 4] = {2, 0, -1, -1, 1, 5, 0, -1, -1, 2, 7, 7, 0, -1, -1, -1};
static const int32_t qsl[3] = {10, 13, 14}, seq[2] = {5, 1}, gat[2] = {5, 1};

static dsv4_combine_args args(void)
{
    dsv4_combine_args a = {topk, 4, 4, qsl, seq, gat, 2, 4, 2, 4, 20, 3};
    return a;
}

static void expect_row(const int32_t *row, const int32_t *want, int n)
{
    for (int j = 0; j < n; j++)
        ck_assert_msg(row[j] == want[j], "column %d: %d, expected %d", j, row[j], want[j]);
    for (int j = n; j < 128; j++)
        ck_assert_msg(row[j] == -1, "column %d: %d, expected -1 padding", j, row[j]);
}

START_TEST(torch_semantics_by_hand)
{
    dsv4_combine_args a = args();
    int32_t out[4 * 128], lens[4];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_combine_width(4, 4), 128);
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, out, lens, &st), 0);
    expect_row(out + 0 * 128, (const int32_t[]){2, 3, 4, 5}, 4);
    expect_row(out + 1 * 128, (const int32_t[]){1, -1, 3, 4, 5, 6}, 6);
    expect_row(out + 2 * 128, (const int32_t[]){-1, 2, 4, 5, 6, 7}, 6);
    expect_row(out + 3 * 128, (const int32_t[]){23}, 1);
    ck_assert_int_eq(lens[0], 4);
    ck_assert_int_eq(lens[1], 6);
    ck_assert_int_eq(lens[2], 6);
    ck_assert_int_eq(lens[3], 1);
}
END_TEST

START_TEST(no_validation_variant)
{
    /* validate_topk=none [S1]: r*M + v for every v: t1 col1 -> 5, t2 col0 -> -1
     * (0*20 - 1), so only t1 differs from the Torch rows. */
    dsv4_combine_args a = args();
    int32_t out[4 * 128], lens[4];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_NO_VALIDATE, out, lens, &st), 0);
    expect_row(out + 1 * 128, (const int32_t[]){1, 5, 3, 4, 5, 6}, 6);
}
END_TEST

START_TEST(width_col0_variant)
{
    /* Stored rows only 1 wide, topk 4: Torch caps tk at min(K, Wk) = 1;
     * width_guard=col0 [S2] keeps tk = 2 and reads column 0 again. */
    static const int32_t narrow[4] = {2, 1, 0, 0};
    dsv4_combine_args a = args();
    a.topk_indices = narrow;
    a.topk_width = 1;
    int32_t out[4 * 128], lens[4];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, out, lens, &st), 0);
    expect_row(out + 1 * 128, (const int32_t[]){1, 3, 4, 5, 6}, 5); /* t1: tk = 1 */
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_WIDTH_COL0, out, lens, &st), 0);
    expect_row(out + 1 * 128, (const int32_t[]){1, 1, 3, 4, 5, 6}, 6); /* t1: col 1 reads col 0 */
}
END_TEST

/* The Torch rows of a refused as bad input, the message naming want. */
static void expect_rejected(const dsv4_combine_args *a, const char *want)
{
    int32_t out[4 * 128], lens[4];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(a, DSV4_COMBINE_TORCH, out, lens, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, want) != NULL, "no '%s' in: %s", want, st.msg);
}

START_TEST(bad_inputs_are_rejected)
{
    dsv4_combine_args a = args();
    a.compress_ratio = 0;
    expect_rejected(&a, "compress_ratio");
    static const int32_t short_qsl[3] = {10, 13, 13};
    a = args();
    a.query_start_loc = short_qsl;
    expect_rejected(&a, "covers 3 tokens");
    static const int32_t back_qsl[3] = {10, 15, 14};
    a = args();
    a.query_start_loc = back_qsl;
    expect_rejected(&a, "query_start_loc[2]");
}
END_TEST

/* ---- compute_global_topk_indices_and_lens: the [S26] test's pinned cases
 * (vllm tests/kernels/attention/test_compute_global_topk_bounds.py@4bc98fd4),
 * B = 64, re-derived by hand for bounds=checked. */

typedef struct gt_case {
    int32_t topk[3 * 4];
    int32_t t2r[3];
    int32_t bt[2 * 4];
    int64_t T, rows, cols;
} gt_case;

static void gt_run(const gt_case *c, dsv4_gtopk_variant v, int32_t *out, int32_t *lens, int want_rc)
{
    static const uint8_t valid[3] = {1, 1, 1};
    dsv4_gtopk_args a = {c->topk, c->T, 4, c->t2r, valid, c->bt, c->rows, c->cols, 64};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_compute_global_topk_indices_and_lens(&a, v, out, lens, &st), want_rc);
}

static void expect_ints(const int32_t *got, const int32_t *want, int n, const char *what)
{
    for (int j = 0; j < n; j++)
        ck_assert_msg(got[j] == want[j], "%s[%d]: %d, expected %d", what, j, got[j], want[j]);
}

START_TEST(gtopk_s26_pinned_cases)
{
    int32_t out[12], lens[3];
    /* exact_valid_metadata_unchanged: [0, 64] -> 10*64, 11*64; lens 2. */
    gt_case c1 = {{0, 64, -1, -1}, {0}, {10, 11, 12, 13}, 1, 1, 4};
    gt_run(&c1, DSV4_GTOPK_CHECKED, out, lens, 0);
    expect_ints(out, (const int32_t[]){640, 704, -1, -1}, 4, "valid");
    ck_assert_int_eq(lens[0], 2);
    /* req_idx == rows, > rows, < 0: whole row -1, lens 0. */
    const int32_t bad_req[3] = {1, 5, -1};
    for (int k = 0; k < 3; k++) {
        gt_case c = {{0, -1, -1, -1}, {bad_req[k]}, {10, 11, 12, 13}, 1, 1, 4};
        gt_run(&c, DSV4_GTOPK_CHECKED, out, lens, 0);
        expect_ints(out, (const int32_t[]){-1, -1, -1, -1}, 4, "bad request");
        ck_assert_int_eq(lens[0], 0);
    }
    /* block_idx == cols (128 -> page 2 of 2), > cols (256), negative local (-5). */
    const int32_t bad_v[3] = {128, 256, -5};
    for (int k = 0; k < 3; k++) {
        gt_case c = {{bad_v[k], -1, -1, -1}, {0}, {10, 11}, 1, 1, 2};
        gt_run(&c, DSV4_GTOPK_CHECKED, out, lens, 0);
        ck_assert_int_eq(out[0], -1);
        ck_assert_int_eq(lens[0], 0);
    }
    /* mixed: token 1's request 1 is not a row of the 1-row table: no alias onto row 0. */
    gt_case c4 = {{0, -1, -1, -1, 0, -1, -1, -1}, {0, 1}, {10, 11, 12, 13}, 2, 1, 4};
    gt_run(&c4, DSV4_GTOPK_CHECKED, out, lens, 0);
    expect_ints(out, (const int32_t[]){640, -1, -1, -1, -1, -1, -1, -1}, 8, "mixed");
    ck_assert_int_eq(lens[0], 1);
    ck_assert_int_eq(lens[1], 0);
    /* column OOB beside a valid sibling: [0, 128] with 2 columns -> [640, -1], lens 1. */
    gt_case c5 = {{0, 128, -1, -1}, {0}, {10, 11}, 1, 1, 2};
    gt_run(&c5, DSV4_GTOPK_CHECKED, out, lens, 0);
    expect_ints(out, (const int32_t[]){640, -1, -1, -1}, 4, "column oob");
    ck_assert_int_eq(lens[0], 1);
    /* invalid before valid compacts left: [128, 64] -> [11*64, -1]. */
    gt_case c6 = {{128, 64, -1, -1}, {0}, {10, 11}, 1, 1, 2};
    gt_run(&c6, DSV4_GTOPK_CHECKED, out, lens, 0);
    expect_ints(out, (const int32_t[]){704, -1, -1, -1}, 4, "compaction");
    ck_assert_int_eq(lens[0], 1);
    /* padded block-table rows / normal multi-request prefill. */
    gt_case c7 = {{0, -1, -1, -1, 0, -1, -1, -1, 64, -1, -1, -1}, {0, 1, 1}, {10, 11, 20, 21}, 3, 2, 2};
    gt_run(&c7, DSV4_GTOPK_CHECKED, out, lens, 0);
    ck_assert_int_eq(out[0], 640);
    ck_assert_int_eq(out[4], 1280);
    ck_assert_int_eq(out[8], 1344);
    expect_ints(lens, (const int32_t[]){1, 1, 1}, 3, "lens");
    /* Base semantics give the same answer on in-range inputs ... */
    gt_run(&c7, DSV4_GTOPK_BASE, out, lens, 0);
    ck_assert_int_eq(out[8], 1344);
    /* ... and reject the out-of-range read the checked kernel tolerates. */
    gt_run(&c6, DSV4_GTOPK_BASE, out, lens, DSV4_EINPUT);
}
END_TEST

START_TEST(gtopk_base_keeps_columns)
{
    /* Base [S1]: column j stays column j; -1 holes stay; invalid token -> lens 0
     * but its row is still written.  B = 4, table rows [7, 3], [5, 9].
     * t0 (r1): [6, -1, 1] -> [9*4+2, -1, 5*4+1] = [38, -1, 21], lens 2.
     * t1 (r0, invalid): [4, 0, -1] -> [12, 28, -1], lens 0. */
    static const int32_t topk[6] = {6, -1, 1, 4, 0, -1}, t2r[2] = {1, 0}, bt[4] = {7, 3, 5, 9};
    static const uint8_t valid[2] = {1, 0};
    dsv4_gtopk_args a = {topk, 2, 3, t2r, valid, bt, 2, 2, 4};
    int32_t out[6], lens[2];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_compute_global_topk_indices_and_lens(&a, DSV4_GTOPK_BASE, out, lens, &st), 0);
    expect_ints(out, (const int32_t[]){38, -1, 21, 12, 28, -1}, 6, "global");
    expect_ints(lens, (const int32_t[]){2, 0}, 2, "lens");
    /* The ragged form (5.7): lens counts every v >= 0 but packs the FIRST
     * lens columns: t0 -> [38, -1] (21 dropped), t1 -> nothing. */
    int32_t flat[6] = {99, 99, 99, 99, 99, 99}, ip[3], rl[2];
    ck_assert_int_eq(dsv4_ref_compute_global_topk_ragged_indices_and_indptr(&a, flat, ip, rl, &st), 0);
    expect_ints(ip, (const int32_t[]){0, 2, 2}, 3, "indptr");
    expect_ints(rl, (const int32_t[]){2, 0}, 2, "ragged lens");
    expect_ints(flat, (const int32_t[]){38, -1, 99, 99, 99, 99}, 6, "flat (tail untouched)");
}
END_TEST

/* The ragged op's mask leaves entries past indptr[T] out of the comparison:
 * garbage there passes, a wrong entry before it does not. */
START_TEST(ragged_mask_excludes_tail)
{
    dsv4_params ps;
    const dsv4_op *op = dsv4_test_op_with("compute_global_topk_ragged_indices_and_indptr", &ps,
                                          (const char *const[]){"block_size", "4", "query_lens", "[2]", NULL});
    dsv4_status st = {0};
    dsv4_opctx c = dsv4_opctx_make(op, &ps, 0, 1);
    dsv4_tensors in = {0};
    dsv4_tensor *t;
    int64_t s2[2] = {2, 3}, s1 = 2;
    ck_assert_int_eq(dsv4_tensors_add(&in, "topk_indices", DSV4_I32, 2, s2, &t, &st), 0);
    memcpy(t->data, (const int32_t[]){6, -1, 1, 4, 0, -1}, 24);
    ck_assert_int_eq(dsv4_tensors_add(&in, "token_to_req_indices", DSV4_I32, 1, &s1, &t, &st), 0);
    memcpy(t->data, (const int32_t[]){1, 0}, 8);
    ck_assert_int_eq(dsv4_tensors_add(&in, "is_valid_token", DSV4_U8, 1, &s1, &t, &st), 0);
    memcpy(t->data, (const uint8_t[]){1, 0}, 2);
    int64_t sb[2] = {2, 2};
    ck_assert_int_eq(dsv4_tensors_add(&in, "block_table", DSV4_I32, 2, sb, &t, &st), 0);
    memcpy(t->data, (const int32_t[]){7, 3, 5, 9}, 16);
    uint8_t mask[6];
    ck_assert_int_eq(op->mask(&c, &in, "topk_ragged_indices", mask, 6, &st), 0);
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(mask[k], k < 2);
    dsv4_tensors exp = {0}, act = {0};
    ck_assert_int_eq(op->alloc_outputs(&c, &in, &exp, &st), 0);
    ck_assert_int_eq(op->reference(&c, &in, &exp, &st), 0);
    ck_assert_int_eq(op->alloc_outputs(&c, &in, &act, &st), 0);
    ck_assert_int_eq(op->reference(&c, &in, &act, &st), 0);
    dsv4_tensor *e = dsv4_tensors_find(&exp, "topk_ragged_indices"), *a = dsv4_tensors_find(&act, "topk_ragged_indices");
    ((int32_t *)a->data)[4] = 12345; /* past indptr[T] = 2: unspecified */
    dsv4_policy pol;
    dsv4_policy_exact(&pol, "test");
    dsv4_cmp_result res;
    dsv4_cmp_aux aux = {NULL, NULL, NULL, NULL};
    ck_assert_int_eq(dsv4_compare(e, a, &pol, mask, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_PASS);
    ((int32_t *)a->data)[1] = 0; /* inside: must fail */
    ck_assert_int_eq(dsv4_compare(e, a, &pol, mask, NULL, NULL, &aux, &res, &st), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    dsv4_tensors_free(&exp);
    dsv4_tensors_free(&act);
    dsv4_tensors_free(&in);
}
END_TEST

START_TEST(prefill_ragged_by_hand)
{
    /* Batch: r0 decode (1 token, S = 9), r1 prefill of 3 tokens, S = 10
     * (positions 7, 8, 9). c = 2, Bc = 2, N = 5, Wk = 4, token_offset 1.
     * caps: (8//2, 9//2, 10//2) capped at 4 = 4, 4, 4.  r1 table [4, 6, 8].
     * row 0 (pos 7): [0, 3, -1, 7] -> [8, 13, -1, -1(7 >= N)]
     * row 1 (pos 8, invalid token): nothing
     * row 2 (pos 9): [4, 2, 1, 0] -> [16, 12, 9, 8]              */
    static const int32_t topk[12] = {0, 3, -1, 7, 1, 1, 1, 1, 4, 2, 1, 0};
    static const int32_t t2r[4] = {0, 1, 1, 1}, qsl[3] = {0, 1, 4}, seq[2] = {9, 10};
    static const int32_t bt[6] = {0, 0, 0, 4, 6, 8};
    static const uint8_t valid[4] = {1, 1, 0, 1};
    dsv4_pftopk_args a = {topk, 3, 4, t2r, valid, 4, qsl, seq, 2, bt, 2, 3, 2, 2, 5, 1, -1};
    int32_t flat[12], ip[4];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_build_prefill_topk_ragged_indices(&a, DSV4_PFTOPK_KEEP, flat, ip, &st), 0);
    expect_ints(ip, (const int32_t[]){0, 4, 4, 8}, 4, "indptr keep");
    expect_ints(flat, (const int32_t[]){8, 13, -1, -1, 16, 12, 9, 8}, 8, "keep");
    ck_assert_int_eq(dsv4_ref_build_prefill_topk_ragged_indices(&a, DSV4_PFTOPK_DROP, flat, ip, &st), 0);
    expect_ints(ip, (const int32_t[]){0, 2, 2, 6}, 4, "indptr drop");
    expect_ints(flat, (const int32_t[]){8, 13, 16, 12, 9, 8}, 6, "drop");
    /* num_rows = 12: slots 13, 16 and 12 leave [0, 12) -> -1. */
    a.num_rows = 12;
    ck_assert_int_eq(dsv4_ref_build_prefill_topk_ragged_indices(&a, DSV4_PFTOPK_KEEP, flat, ip, &st), 0);
    expect_ints(flat, (const int32_t[]){8, -1, -1, -1, -1, -1, 9, 8}, 8, "num_rows");
    /* A cap of 1 (pos 2 with c = 2 -> 3//2 = 1) never reads column 1. */
    static const int32_t seq_short[2] = {9, 5}; /* positions 2, 3, 4 */
    a.seq_lens = seq_short;
    a.num_rows = -1;
    ck_assert_int_eq(dsv4_ref_build_prefill_topk_ragged_indices(&a, DSV4_PFTOPK_KEEP, flat, ip, &st), 0);
    expect_ints(ip, (const int32_t[]){0, 1, 1, 3}, 4, "caps 1, -, 2");
    expect_ints(flat, (const int32_t[]){8, 16, 12}, 3, "capped");
}
END_TEST

START_TEST(decode_swa_by_hand)
{
    /* W = 4, B = 2.  r0: S = 3 (pos 2), table [5, 1]; r1: S = 7 (pos 6),
     * table [0, 3, 2, 9]; r2: invalid token.
     * t0: start 0, len 3 -> [10, 11, 2, -1]; t1: start 3 -> slots of 3,4,5,6
     * = [3*2+1, 2*2+0, 2*2+1, 9*2+0] = [7, 4, 5, 18]; t2: untouched, lens 0. */
    static const int32_t qsl[4] = {0, 1, 2, 3}, seq[3] = {3, 7, 1}, t2r[3] = {0, 1, 2};
    static const int32_t bt[12] = {5, 1, 0, 0, 0, 3, 2, 9, 4, 4, 4, 4};
    static const uint8_t valid[3] = {1, 1, 0};
    dsv4_swa_args a = {qsl, seq, 3, t2r, valid, 3, bt, 3, 4, 4, 2, 0, 3};
    int32_t idx[12], lens[3];
    for (int k = 0; k < 12; k++)
        idx[k] = 1000 + k; /* the stale buffer */
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_decode_swa_indices_and_lens(&a, idx, lens, &st), 0);
    expect_ints(idx, (const int32_t[]){10, 11, 2, -1, 7, 4, 5, 18, 1008, 1009, 1010, 1011}, 12, "indices");
    expect_ints(lens, (const int32_t[]){3, 4, 0}, 3, "lens");
    /* 5.8 with num_rows 10: [10 -> -1, 11 -> -1, 2 | 7, 4, 5, 18 -> -1]. */
    int32_t flat[12], ip[4];
    dsv4_ref_build_ragged_indices_from_dense(idx, 3, 4, lens, 10, flat, ip);
    expect_ints(ip, (const int32_t[]){0, 3, 7, 7}, 4, "indptr");
    expect_ints(flat, (const int32_t[]){-1, -1, 2, 7, 4, 5, -1}, 7, "ragged");
    /* Lengths clamp to [0, W]. */
    static const int32_t odd_lens[3] = {-3, 9, 1};
    dsv4_ref_build_ragged_indices_from_dense(idx, 3, 4, odd_lens, -1, flat, ip);
    expect_ints(ip, (const int32_t[]){0, 0, 4, 5}, 4, "clamped indptr");
}
END_TEST

START_TEST(graph_copy_by_hand)
{
    /* num_rows 2, 3 entries per row: indptr view [0, 3), indices view
     * [0, max(6, 1)) = 6; source of 4 entries copied to [0, 4); [4, 8) stale. */
    static const int32_t src[4] = {5, 6, -1, 8}, sip[3] = {0, 1, 3};
    dsv4_graphcopy_args a = {src, 4, sip, 3, 8, 5, 2, 3, 0};
    int32_t buf[8], ibuf[5];
    int64_t views[2];
    for (int k = 0; k < 8; k++)
        buf[k] = -100 - k;
    for (int k = 0; k < 5; k++)
        ibuf[k] = -200 - k;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_copy_ragged_to_graph_buffers(&a, buf, ibuf, views, &st), 0);
    expect_ints(buf, (const int32_t[]){5, 6, -1, 8, -104, -105, -106, -107}, 8, "indices buffer");
    expect_ints(ibuf, (const int32_t[]){0, 1, 3, -203, -204}, 5, "indptr buffer");
    ck_assert_int_eq(views[0], 6);
    ck_assert_int_eq(views[1], 3);
    a.gfx950 = 1; /* trimmed to max(source, 1) = 4 */
    ck_assert_int_eq(dsv4_ref_copy_ragged_to_graph_buffers(&a, buf, ibuf, views, &st), 0);
    ck_assert_int_eq(views[0], 4);
    a.num_entries = 0; /* empty source: nothing copied, view of 1 */
    ck_assert_int_eq(dsv4_ref_copy_ragged_to_graph_buffers(&a, buf, ibuf, views, &st), 0);
    ck_assert_int_eq(views[0], 1);
    a.num_entries = 7; /* 7 entries into a view of 6: torch's copy_ raises */
    ck_assert_int_eq(dsv4_ref_copy_ragged_to_graph_buffers(&a, buf, ibuf, views, &st), DSV4_EINPUT);
}
END_TEST

START_TEST(chunk_plan_by_hand)
{
    /* c = 4, chunk 4, W = 128, max_model_len 8192, max_batched 2048:
     * area = 4 * (2048 + 128 + 2048) = 16896.  Widths (comp + gather):
     * r0..r3 = 2012+2175, 512+2048, 2048+2175, 2025+227 -> maxima 2048 + 2175
     * = 4223, 4 * 4223 = 16892 <= 16896; r4 joins -> 5 * 4223 > area. */
    static const int32_t S[5] = {8048, 2048, 8192, 8100, 15}, Q[5] = {2048, 2048, 2048, 100, 5};
    dsv4_chunkplan_args a = {S, Q, 5, 4, 4, 128, 8192, 2048, 1};
    int64_t plan[20], n = -1;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_get_prefill_chunk_plan(&a, plan, &n, &st), 0);
    ck_assert_int_eq(n, 2);
    const int64_t want[8] = {0, 4, 2048, 4223, 4, 5, 3, 3 + 15};
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(plan[k], want[k]);
    a.has_compressed = 0; /* area 4 * 2176 = 8704: 2175*4 = 8700 fits r0..r3 */
    ck_assert_int_eq(dsv4_ref_get_prefill_chunk_plan(&a, plan, &n, &st), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(plan[1], 4);
    ck_assert_int_eq(plan[3], 2175);
    a.num_prefills = 0;
    ck_assert_int_eq(dsv4_ref_get_prefill_chunk_plan(&a, plan, &n, &st), 0);
    ck_assert_int_eq(n, 0);
}
END_TEST

/* The variants' rules reach the callbacks through the variant table, by
 * name: the gfx950 copy trims the indices view to the source's entries,
 * and validate_topk=none refuses a top-k wider than its input rows. */
START_TEST(variant_rules_reach_the_callbacks)
{
    dsv4_params ps;
    const dsv4_op *op = dsv4_test_op_with(
        "copy_ragged_to_graph_buffers", &ps,
        (const char *const[]){"num_rows", "2", "max_entries_per_row", "3", "source_entries", "4", NULL});
    dsv4_status st = {0};
    static const char *const names[2] = {"default", "arch=gfx950"};
    static const int64_t want_view[2] = {6, 4}; /* max(2 * 3, 1), max(4, 1) */
    for (int k = 0; k < 2; k++) {
        int v = dsv4_op_variant(op, names[k]);
        ck_assert_int_ge(v, 0);
        dsv4_opctx c = dsv4_opctx_make(op, &ps, v, 1);
        dsv4_tensors in = {0}, out = {0};
        ck_assert_int_eq(op->generate(&c, &in, &st), 0);
        ck_assert_int_eq(op->validate(&c, &in, &st), 0);
        ck_assert_int_eq(op->alloc_outputs(&c, &in, &out, &st), 0);
        ck_assert_int_eq(op->reference(&c, &in, &out, &st), 0);
        const int64_t *views = dsv4_tensors_find(&out, "view_lens")->data;
        ck_assert_int_eq(views[0], want_view[k]);
        ck_assert_int_eq(views[1], 3);
        dsv4_tensors_free(&in);
        dsv4_tensors_free(&out);
    }

    dsv4_params cps;
    op = dsv4_test_op_with("combine_topk_swa_indices", &cps,
                           (const char *const[]){"query_lens", "[3]", "topk", "8", "topk_width", "4",
                                                 "compress_ratio", "1", NULL});
    ck_assert_int_eq(op->resolve(&cps, &st), 0);
    dsv4_opctx dflt = dsv4_opctx_make(op, &cps, dsv4_op_variant(op, "default"), 1);
    dsv4_opctx strict = dsv4_opctx_make(op, &cps, dsv4_op_variant(op, "validate_topk=none"), 1);
    dsv4_tensors in = {0};
    ck_assert_int_eq(op->generate(&dflt, &in, &st), 0);
    ck_assert_int_eq(op->validate(&dflt, &in, &st), 0);
    ck_assert_int_eq(op->validate(&strict, &in, &st), DSV4_EINPUT);
    dsv4_tensors_free(&in);
}
END_TEST

/* get_compressed_slot_mapping (docs/semantics/indices.md A5.4): request 0
 * holds positions 5..7 (c = 4: only 7 closes entry 1), request 1 positions
 * 2..3 (3 closes entry 0); one padded entry past the batch. */
START_TEST(compressed_slot_mapping_by_hand)
{
    const int32_t qsl[] = {0, 3, 5}, seq[] = {8, 4}, bt[] = {7, 9, 4, 2};
    dsv4_cslot_args a = {qsl, seq, bt, 2, 2, 6, 4, 2, 1, 0, 1};
    int64_t out[6];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_get_compressed_slot_mapping(&a, out, &st), 0);
    const int64_t want[6] = {-1, -1, 7 * 2 + 1, -1, 4 * 2 + 0, -1};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(out[i], want[i]);
    /* Two ranks taking single entries in turn, virtual page 4: entry 1 is
     * rank 1's first entry of page 0 (offset 0); entry 0 is rank 0's. */
    a.cp_world_size = 2, a.cp_rank = 1;
    ck_assert_int_eq(dsv4_ref_get_compressed_slot_mapping(&a, out, &st), 0);
    const int64_t want_cp[6] = {-1, -1, 7 * 2 + 0, -1, -1, -1};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(out[i], want_cp[i]);
    /* A negative position (seq_len < query_len) is outside the contract. */
    const int32_t short_seq[] = {2, 4};
    a.seq_lens = short_seq;
    ck_assert_int_eq(dsv4_ref_get_compressed_slot_mapping(&a, out, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "seq_len 2 < query_len 3"));
}
END_TEST

DSV4_TEST_GROUPS_MAIN("indices",
                      DSV4_TEST_GROUP("combine", 0, NULL, NULL, torch_semantics_by_hand, no_validation_variant,
                                      width_col0_variant, bad_inputs_are_rejected),
                      DSV4_TEST_GROUP("metadata", 0, NULL, NULL, gtopk_s26_pinned_cases, gtopk_base_keeps_columns,
                                      ragged_mask_excludes_tail, prefill_ragged_by_hand, decode_swa_by_hand,
                                      graph_copy_by_hand, chunk_plan_by_hand, compressed_slot_mapping_by_hand,
                                      variant_rules_reach_the_callbacks))
