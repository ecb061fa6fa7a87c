/* test_soundness.c - a slice of `make soundness` (tests/soundness.h): for
 * every op with a derived float bound, a model of a correct kernel on a
 * few seeded cases of random shapes stays within SND_MARGIN of its bound
 * (no false alarm), and the reference moved by one bf16 ulp fails in at
 * least one of them (the bound is not vacuous).  The held-out attention
 * class (1-3 valid keys, small softmax scales) gets more cases. */
#include "soundness_models.h"
#include "testutil.h"

static void check_entry(int k, int cases)
{
    const snd_entry *en = &snd_entries[k];
    snd_result r = snd_run(en, cases);
    ck_assert_msg(r.errors == 0, "%s: %s", en->label, r.error);
    ck_assert_msg(r.failed == 0, "%s: %d of %d cases fail a correct kernel's model; worst %s", en->label, r.failed,
                  r.cases, r.worst_at);
    ck_assert_msg(r.worst <= SND_MARGIN, "%s: worst err/bound %.3f > %.2f at %s", en->label, r.worst, SND_MARGIN,
                  r.worst_at);
    ck_assert_msg(r.bias_killed > 0, "%s: one bf16 ulp of bias passes all %d cases", en->label, r.cases);
    ck_assert(snd_ok(&r));
}

START_TEST(every_bound_holds_with_margin_and_catches_a_one_ulp_bias)
{
    for (int k = 0; k < SND_ENTRIES; k++) {
        const int n = snd_entries[k].cases / 100;
        check_entry(k, n < 4 ? 4 : n);
    }
}
END_TEST

/* The class a 2^-9 charge for the bf16 rounding of p failed on. */
START_TEST(attention_few_keys_small_scales)
{
    for (int k = 0; k < SND_ENTRIES; k++)
        if (strstr(snd_entries[k].label, "1-3 keys"))
            check_entry(k, 400);
}
END_TEST

DSV4_TEST_MAIN("soundness", "soundness", 300, NULL, NULL, every_bound_holds_with_margin_and_catches_a_one_ulp_bias,
               attention_few_keys_small_scales)
