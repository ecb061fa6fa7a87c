/* test_indices.c - combine_topk_swa_indices against rows derived by hand
 * from the seed's Torch function (shared/seeds/000_...txt), not against the
 * reference itself. */
#include <string.h>

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

START_TEST(bad_inputs_are_rejected)
{
    int32_t out[4 * 128], lens[4];
    dsv4_status st = {0};
    dsv4_combine_args a = args();
    a.compress_ratio = 0;
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, out, lens, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "compress_ratio"));
    static const int32_t short_qsl[3] = {10, 13, 13};
    a = args();
    a.query_start_loc = short_qsl;
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, out, lens, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "covers 3 tokens"));
    static const int32_t back_qsl[3] = {10, 15, 14};
    a = args();
    a.query_start_loc = back_qsl;
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, out, lens, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "query_start_loc[2]"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("indices");
    TCase *tc = tcase_create("combine");
    tcase_add_test(tc, torch_semantics_by_hand);
    tcase_add_test(tc, no_validation_variant);
    tcase_add_test(tc, width_col0_variant);
    tcase_add_test(tc, bad_inputs_are_rejected);
    suite_add_tcase(s, tc);
    return dsv4_test_run(s);
}
