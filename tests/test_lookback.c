/* test_lookback.c - hip/lookback_rules.h (the status word of the hip
 * backend's single-pass look-back scan, idx_common.h lookback_prefix, and
 * the SWA row lengths) compiled on the host: the word packing, the
 * look-back protocol run over random interleavings of the blocks' atomic
 * steps against the exclusive cumsum, and the SWA length / start against
 * ref/indices.c's rule (docs/semantics/indices.md A5.2). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hip/lookback_rules.h"
#include "testutil.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

START_TEST(word_round_trip)
{
    const int32_t values[] = {0, 1, 2, 0x3FFFFFFF, 0x40000000, 0x7FFFFFFE, 0x7FFFFFFF};
    const uint32_t epochs[] = {1, 2, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu};
    for (size_t e = 0; e < sizeof epochs / sizeof *epochs; e++)
        for (size_t v = 0; v < sizeof values / sizeof *values; v++)
            for (int inc = 0; inc < 2; inc++) {
                const uint64_t w = dsv4l_word(epochs[e], inc, values[v]);
                ck_assert(dsv4l_current(w, epochs[e]));
                ck_assert(!dsv4l_current(w, epochs[e] + 1u));
                ck_assert(!dsv4l_current(w, epochs[e] - 1u));
                ck_assert_int_eq(dsv4l_inclusive(w), inc);
                ck_assert_int_eq(dsv4l_value(w), values[v]);
            }
    /* zeroed memory is no launch's word (epochs start at 1) */
    ck_assert(!dsv4l_current(0, 1));
    for (int i = 0; i < 100000; i++) {
        const uint32_t e = (uint32_t)rnd() | 1u;
        const int32_t v = (int32_t)(rnd() & 0x7FFFFFFFu);
        const int inc = (int)(rnd() & 1);
        const uint64_t w = dsv4l_word(e, inc, v);
        ck_assert(dsv4l_current(w, e) && dsv4l_inclusive(w) == inc && dsv4l_value(w) == v);
    }
}
END_TEST

/* One block of the simulated launch: the steps of idx_common.h
 * lookback_prefix, each an atomic action on the shared status words. */
enum { MAX_N = 256 };
typedef struct sim_block {
    int stage; /* 0 not started, 1 aggregate published (look-back running), 2 done */
    long long base;
    int excl;
    int have[MAX_N];
    uint64_t got[MAX_N];
} sim_block;

/* Runs G blocks with window n over status words holding stale garbage of
 * other epochs; blocks start in ticket order at random moments and every
 * step is a random started block's next action (publish, one thread's
 * read, or the window's reduction).  Checks each block's exclusive prefix
 * and that no schedule stalls. */
static void run_launch(int G, int n, const int32_t *agg, uint32_t epoch, uint64_t *status)
{
    sim_block *b = calloc((size_t)G, sizeof *b);
    ck_assert_ptr_nonnull(b);
    int started = 0, done = 0;
    long long steps = 0;
    while (done < G) {
        ck_assert_msg(++steps < 100000000LL, "look-back stalled (G %d, n %d)", G, n);
        /* start the next ticket now and then; always when nothing runs */
        if (started < G && (started == done || rnd() % 4 == 0)) {
            const int k = started++;
            if (k == 0) {
                status[0] = dsv4l_word(epoch, 1, agg[0]);
                b[0].excl = 0;
                b[0].stage = 2;
                done++;
            } else {
                status[k] = dsv4l_word(epoch, 0, agg[k]);
                b[k].stage = 1;
                b[k].base = k - 1;
            }
            continue;
        }
        const int k = (int)(rnd() % (uint64_t)started); /* a random candidate */
        int pick = -1;
        for (int s = 0; s < started && pick < 0; s++) { /* the first running block from k on, cyclically */
            const int c = (k + s) % started;
            if (b[c].stage == 1)
                pick = c;
        }
        if (pick < 0)
            continue;
        sim_block *x = &b[pick];
        int missing = 0;
        for (int tt = 0; tt < n; tt++)
            missing += !x->have[tt] && x->base - tt >= 0;
        if (missing) { /* one random thread of the window reads its word */
            int tt;
            do
                tt = (int)(rnd() % (uint64_t)n);
            while (x->have[tt] || x->base - tt < 0);
            const uint64_t w = status[x->base - tt];
            if (dsv4l_current(w, epoch)) {
                x->have[tt] = 1;
                x->got[tt] = w;
            }
            continue;
        }
        /* the window's reduction, as the kernel's atomicMin and block sum */
        int first = n, sum = 0;
        for (int tt = 0; tt < n; tt++)
            if (dsv4l_window_is_inclusive(x->base - tt, x->got[tt]) && tt < first)
                first = tt;
        for (int tt = 0; tt < n; tt++)
            sum += dsv4l_window_part(x->base - tt, x->got[tt], tt, first);
        x->excl += sum;
        memset(x->have, 0, sizeof x->have);
        if (first < n) {
            status[pick] = dsv4l_word(epoch, 1, x->excl + agg[pick]);
            x->stage = 2;
            done++;
        } else
            x->base -= n;
    }
    int want = 0;
    for (int k = 0; k < G; k++) {
        ck_assert_msg(b[k].excl == want, "G %d n %d block %d: %d, want %d", G, n, k, b[k].excl, want);
        ck_assert(dsv4l_current(status[k], epoch) && dsv4l_inclusive(status[k]));
        want += agg[k];
        ck_assert_int_eq(dsv4l_value(status[k]), want);
    }
    free(b);
}

START_TEST(lookback_random_interleavings)
{
    const int Gs[] = {1, 2, 3, 5, 33, 64, 65, 257, 300};
    const int ns[] = {1, 2, 4, 32, 64, 256};
    for (size_t gi = 0; gi < sizeof Gs / sizeof *Gs; gi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (int trial = 0; trial < 4; trial++) {
                const int G = Gs[gi], n = ns[ni];
                int32_t *agg = malloc((size_t)G * sizeof *agg);
                uint64_t *status = malloc((size_t)G * sizeof *status);
                ck_assert(agg && status);
                const uint32_t epoch = trial == 3 ? 0xFFFFFFFFu : (uint32_t)(rnd() % 1000u) + 2u;
                for (int k = 0; k < G; k++) {
                    /* zero lengths too, and one large block: the 31-bit values */
                    agg[k] = (trial == 1 && k == G / 2) ? 0x7FFFFFFF - 8 * G : (int32_t)(rnd() % 5u);
                    /* stale words: zeroed memory, earlier and later epochs, both flags */
                    const uint32_t stale = k % 4 == 0 ? 0u : k % 4 == 1 ? epoch - 1u : k % 4 == 2 ? epoch + 1u
                                                                                                   : (uint32_t)rnd();
                    status[k] = ((uint64_t)(stale == epoch ? epoch ^ 1u : stale) << 32) | (rnd() & 0xFFFFFFFFu);
                }
                run_launch(G, n, agg, epoch, status);
                free(agg);
                free(status);
            }
}
END_TEST

/* ref/indices.c swa_range: start = max(pos - W + 1, 0), len = pos + 1 - start. */
START_TEST(swa_len_matches_reference)
{
    const long long Ws[] = {0, 1, 2, 63, 64, 128, 129, 4096};
    for (size_t wi = 0; wi < sizeof Ws / sizeof *Ws; wi++)
        for (int i = 0; i < 20000; i++) {
            const long long W = Ws[wi];
            const int32_t qs0 = (int32_t)(rnd() % 100000u), ql = (int32_t)(rnd() % 3000u) + 1;
            const int32_t qs1 = qs0 + ql;
            const long long t = qs0 + (long long)(rnd() % (uint64_t)ql);
            const int32_t seq = i % 3 == 0 ? (int32_t)(0x7FFFFFFF - (rnd() % 5u)) : ql + (int32_t)(rnd() % 9000u);
            const long long pos = ((long long)seq - ql) + (t - qs0);
            ck_assert_int_eq(dsv4l_swa_pos(seq, qs0, qs1, t), pos);
            const long long start = pos - W + 1 > 0 ? pos - W + 1 : 0, len = pos + 1 - start;
            const int32_t got = dsv4l_swa_len(pos, W);
            ck_assert_int_eq(got, len);
            ck_assert_int_eq(pos + 1 - got, start);
            ck_assert(start + len - 1 <= 0x7FFFFFFF); /* every slot column fits int32 */
        }
}
END_TEST

DSV4_TEST_MAIN("lookback", "core", 120, NULL, NULL, word_round_trip, lookback_random_interleavings,
               swa_len_matches_reference)
