/* test_indexer.c - the paged MXFP4 indexer: layout offsets derived by hand,
 * hand-built caches with known bytes, the K store -> decode round trip
 * against a double formulation written here, logits on integer-valued
 * inputs with the exact answer computed here, top-k / block scores /
 * candidates on hand rows, the index_set comparator, and end-to-end golden
 * checks through build/dsv4check (tie swaps pass, a low-score swap fails),
 * the logits error bound against a sum written out here, and the ci
 * indexer report byte-identical across BLAS thread counts. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../compare/compare.h"
#include "../harness/golden.h"
#include "../harness/op.h"
#include "../ref/indexer.h"
#include "../ref/numerics.h"
#include "testutil.h"

/* ---- layout ---------------------------------------------------------------- */

START_TEST(layout_params)
{
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(64, 128, 64, 1, &L, &st), DSV4_OK);
    ck_assert_int_eq(L.n_per_tile, 32);
    ck_assert_int_eq(L.scale_lanes, 2);
    ck_assert_int_eq(L.s_hi, 2);
    ck_assert_int_eq(dsv4_idx_layout_make(16, 128, 16, 1, &L, &st), DSV4_OK);
    ck_assert_int_eq(L.n_per_tile, 16); /* heads < 32 and D > 64 (docs/semantics/indexer.md Q5.1) */
    ck_assert_int_eq(L.scale_lanes, 4);
    ck_assert_int_eq(L.s_hi, 1);
    ck_assert_int_eq(dsv4_idx_layout_make(16, 64, 32, 1, &L, &st), DSV4_OK);
    ck_assert_int_eq(L.n_per_tile, 32); /* head_dim <= 64 */
    ck_assert_int_eq(dsv4_idx_layout_make(32, 128, 16, 1, &L, &st), DSV4_EINPUT); /* 16 % 32 */
    ck_assert_int_eq(dsv4_idx_page_bytes(&(dsv4_idx_layout){128, 128, 1, 32, 16, 2, 2}), 128 * 68);
}
END_TEST

/* Offsets worked out by hand from docs/semantics/indexer.md Q4.1 step 5. */
START_TEST(layout_offsets_by_hand)
{
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(64, 128, 64, 1, &L, &st), DSV4_OK);
    /* entry 33 = grp 1, lane 1; byte 17 = chunk 1, 1: 1*32*64 + 1*32*16 + 1*16 + 1 */
    ck_assert_int_eq(dsv4_idx_value_offset(&L, 33, 17), 2048 + 512 + 16 + 1);
    /* scale 3 of entry 33: 64*64 + 1*32*4 + (3%2)*32*2 + 1*2 + 3/2 */
    ck_assert_int_eq(dsv4_idx_scale_offset(&L, 33, 3), 4096 + 128 + 64 + 2 + 1);
    ck_assert_int_eq(dsv4_idx_value_offset(&L, 0, 0), 0);
    ck_assert_int_eq(dsv4_idx_value_offset(&L, 0, 16), 32 * 16); /* next 16-byte chunk after 32 lanes */
    ck_assert_int_eq(dsv4_idx_scale_offset(&L, 0, 1), 4096 + 32 * 2);
    ck_assert_int_eq(dsv4_idx_layout_make(16, 128, 32, 1, &L, &st), DSV4_OK);
    /* N = 16, L = 4, S_HI = 1: entry 17 = grp 1 lane 1; scale 2 at 32*64 + 16*4 + 2*16 + 1 */
    ck_assert_int_eq(dsv4_idx_scale_offset(&L, 17, 2), 2048 + 64 + 32 + 1);
    ck_assert_int_eq(dsv4_idx_value_offset(&L, 17, 63), 16 * 64 + 3 * 16 * 16 + 16 + 15);
    ck_assert_int_eq(dsv4_idx_layout_make(16, 128, 32, 0, &L, &st), DSV4_OK);
    ck_assert_int_eq(dsv4_idx_value_offset(&L, 17, 63), 17 * 64 + 63);
    ck_assert_int_eq(dsv4_idx_scale_offset(&L, 17, 2), 32 * 64 + 17 * 4 + 2);
}
END_TEST

/* Every byte of a page has exactly one (entry, field), and locate inverts it. */
START_TEST(layout_bijection)
{
    const int heads[3] = {64, 16, 64}, shuf[3] = {1, 1, 0};
    for (int c = 0; c < 3; c++) {
        dsv4_idx_layout L;
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_idx_layout_make(heads[c], 128, 64, shuf[c], &L, &st), DSV4_OK);
        const int64_t pb = dsv4_idx_page_bytes(&L);
        int *hit = calloc((size_t)pb, sizeof *hit);
        for (int64_t p = 0; p < 64; p++)
            for (int f = 0; f < 68; f++) {
                int64_t off = f < 64 ? dsv4_idx_value_offset(&L, p, f) : dsv4_idx_scale_offset(&L, p, f - 64);
                ck_assert(off >= 0 && off < pb);
                hit[off]++;
                int64_t e;
                int is_scale, idx;
                dsv4_idx_locate_byte(&L, off, &e, &is_scale, &idx);
                ck_assert_int_eq(e, p);
                ck_assert_int_eq(is_scale, f >= 64);
                ck_assert_int_eq(idx, f < 64 ? f : f - 64);
            }
        for (int64_t i = 0; i < pb; i++)
            ck_assert_int_eq(hit[i], 1);
        free(hit);
    }
}
END_TEST

/* A hand-built page: bytes placed at hand-computed offsets read back. */
START_TEST(hand_built_cache)
{
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(32, 128, 32, 1, &L, &st), DSV4_OK);
    uint8_t page[32 * 68];
    memset(page, 0, sizeof page);
    /* entry 5: value byte b = 0x10 + b at (b/16)*512 + 5*16 + b%16; scales
     * s at 2048 + (s%2)*64 + 5*2 + s/2 hold 120 + s */
    for (int b = 0; b < 64; b++)
        page[(b / 16) * 512 + 5 * 16 + b % 16] = (uint8_t)(0x10 + b);
    for (int s = 0; s < 4; s++)
        page[2048 + (s % 2) * 64 + 10 + s / 2] = (uint8_t)(120 + s);
    uint8_t v[64], sc[4], nat_v[32 * 64], nat_s[32 * 4];
    dsv4_idx_read_entry(&L, page, 5, v, sc);
    for (int b = 0; b < 64; b++)
        ck_assert_int_eq(v[b], 0x10 + b);
    for (int s = 0; s < 4; s++)
        ck_assert_int_eq(sc[s], 120 + s);
    dsv4_idx_unshuffle_page(&L, page, nat_v, nat_s);
    ck_assert_int_eq(nat_v[5 * 64 + 40], 0x10 + 40);
    ck_assert_int_eq(nat_s[5 * 4 + 3], 123);
    ck_assert_int_eq(nat_v[4 * 64 + 40], 0);
}
END_TEST

/* ---- K store round trip ------------------------------------------------------- */

static double e2m1_val(uint8_t c)
{
    static const double m[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (c & 8) ? -m[c & 7] : m[c & 7];
}

START_TEST(kstore_round_trip)
{
    enum { T = 24, D = 128, R = 64, P = 32, PAGES = 3, NPOS = 64 };
    uint16_t k[T * D], w[D];
    int64_t pos[T], slots[T];
    float cs[NPOS * R];
    for (int i = 0; i < T * D; i++)
        k[i] = dsv4_bf16_from_f32((float)sin(0.37 * i + 1.0) * (1 + i % 5));
    for (int d = 0; d < D; d++)
        w[d] = dsv4_bf16_from_f32(0.75f + 0.01f * (float)(d % 9));
    for (int p = 0; p < NPOS; p++)
        for (int i = 0; i < R / 2; i++) {
            cs[p * R + i] = (float)cos(0.1 * p * (i + 1));
            cs[p * R + R / 2 + i] = (float)sin(0.1 * p * (i + 1));
        }
    for (int t = 0; t < T; t++) {
        pos[t] = t + 5;
        slots[t] = (t % 7 == 3) ? -2 : 40 + (t + 5) / 4; /* pages 1, 2 */
    }
    for (int sh = 0; sh < 2; sh++) {
        dsv4_idx_layout L;
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_idx_layout_make(64, D, P, sh, &L, &st), DSV4_OK);
        static uint8_t cache[PAGES * P * 68];
        memset(cache, 0x5A, sizeof cache);
        dsv4_idx_kstore_args a = {k, pos, slots, T, cs, NPOS, R, w, 1e-6f, 4, PAGES, &L, DSV4_IDX_QUANT_B};
        ck_assert_int_eq(dsv4_ref_indexer_k_store(&a, cache, &st), DSV4_OK);
        int written[PAGES * P] = {0};
        for (int t = 0; t < T; t++) {
            if (slots[t] < 0 || (pos[t] + 1) % 4)
                continue;
            written[slots[t]] = 1;
            /* the ideal in double: RMSNorm, RoPE at the group start */
            double x[D], ss = 0;
            for (int d = 0; d < D; d++)
                ss += (double)dsv4_bf16_to_f32(k[t * D + d]) * dsv4_bf16_to_f32(k[t * D + d]);
            for (int d = 0; d < D; d++)
                x[d] = dsv4_bf16_to_f32(k[t * D + d]) / sqrt(ss / D + 1e-6) * dsv4_bf16_to_f32(w[d]);
            const int g = (int)(pos[t] / 4) * 4;
            for (int i = 0; i < R / 2; i++) {
                double e = x[D - R + 2 * i], o = x[D - R + 2 * i + 1];
                double c = cs[g * R + i], s = cs[g * R + R / 2 + i];
                x[D - R + 2 * i] = e * c - o * s;
                x[D - R + 2 * i + 1] = o * c + e * s;
            }
            uint8_t v[64], sc[4];
            dsv4_idx_read_entry(&L, cache + (slots[t] / P) * P * 68, slots[t] % P, v, sc);
            for (int d = 0; d < D; d++) {
                const double scale = ldexp(1.0, sc[d / 32] - 127);
                const double deq = e2m1_val((d & 1) ? (uint8_t)(v[d / 2] >> 4) : (uint8_t)(v[d / 2] & 15)) * scale;
                /* half an e2m1 step (<= 1 x scale) + bf16 roundings of norm and rope */
                ck_assert_msg(fabs(deq - x[d]) <= scale + 0x1p-6 * fabs(x[d]), "t %d d %d deq %g ideal %g", t, d, deq, x[d]);
            }
            for (int b = 0; b < 4; b++) { /* the scale rule: ceil(log2(amax/6)) of the ideal, +-1 */
                double amax = 0;
                for (int d = 32 * b; d < 32 * b + 32; d++)
                    amax = fmax(amax, fabs(x[d]));
                ck_assert_int_le(abs(sc[b] - 127 - (int)ceil(log2(amax / 6))), 1);
            }
        }
        for (int s = 0; s < PAGES * P; s++) /* untouched entries keep the poison */
            if (!written[s]) {
                uint8_t v[64], sc[4];
                dsv4_idx_read_entry(&L, cache + (s / P) * P * 68, s % P, v, sc);
                for (int b = 0; b < 64; b++)
                    ck_assert_int_eq(v[b], 0x5A);
                ck_assert_int_eq(sc[0], 0x5A);
            }
    }
}
END_TEST

/* Shuffled and natural caches hold the same entries (aiter's test, docs/semantics/indexer.md Q4.3). */
START_TEST(kstore_shuffled_equals_natural)
{
    enum { T = 40, D = 128, P = 64 };
    uint16_t k[T * D], w[D];
    int64_t pos[T], slots[T];
    float cs[64 * 64];
    for (int i = 0; i < T * D; i++)
        k[i] = dsv4_bf16_from_f32((float)cos(0.11 * i) * 3);
    for (int d = 0; d < D; d++)
        w[d] = dsv4_bf16_from_f32(1.0f);
    for (int i = 0; i < 64 * 64; i++)
        cs[i] = (float)cos(0.01 * i);
    for (int t = 0; t < T; t++) {
        pos[t] = t;
        slots[t] = t;
    }
    static uint8_t c0[P * 68], c1[P * 68];
    uint8_t v0[P * 64], s0[P * 4], v1[P * 64], s1[P * 4];
    dsv4_idx_layout L0, L1;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(32, D, P, 0, &L0, &st), DSV4_OK);
    ck_assert_int_eq(dsv4_idx_layout_make(32, D, P, 1, &L1, &st), DSV4_OK);
    memset(c0, 0, sizeof c0);
    memset(c1, 0, sizeof c1);
    dsv4_idx_kstore_args a = {k, pos, slots, T, cs, 64, 64, w, 1e-6f, 1, 1, &L0, DSV4_IDX_QUANT_A};
    ck_assert_int_eq(dsv4_ref_indexer_k_store(&a, c0, &st), DSV4_OK);
    a.L = &L1;
    ck_assert_int_eq(dsv4_ref_indexer_k_store(&a, c1, &st), DSV4_OK);
    dsv4_idx_unshuffle_page(&L0, c0, v0, s0);
    dsv4_idx_unshuffle_page(&L1, c1, v1, s1);
    ck_assert_mem_eq(v0, v1, sizeof v0);
    ck_assert_mem_eq(s0, s1, sizeof s0);
    ck_assert(memcmp(c0, c1, sizeof c0) != 0); /* the byte orders do differ */
}
END_TEST

/* ---- logits on integer inputs --------------------------------------------------- */

/* e2m1 nibble of a small integer value: 1 -> code 2, 2 -> 4, 3 -> 5,
 * 4 -> 6, 6 -> 7 (codes 0..7 = 0, .5, 1, 1.5, 2, 3, 4, 6), sign in bit 3. */
static uint8_t nib(int v)
{
    static const int code[7] = {0, 2, 4, 5, 6, 0, 7};
    return (uint8_t)(code[abs(v)] | (v < 0 ? 8 : 0));
}

/* logits = sum_h relu(q_h . k_j) w_h with integer q, k (scale 1 or 2^20 for
 * block 0 of some keys: the exact fallback) and integer w: exact answers. */
START_TEST(logits_integer_exact)
{
    enum { H = 32, D = 128, P = 32, NK = 70, ROWS = 3, W = 80 };
    static const int vals[6] = {0, 1, 2, 3, 4, 6};
    static int qi[ROWS][H][D], ki[NK][D];
    static uint8_t q[ROWS * H * 64], qs[ROWS * H * 4], cache[4 * P * 68];
    float w[ROWS * H];
    int kexp0[NK];
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(H, D, P, 1, &L, &st), DSV4_OK);
    unsigned s = 12345;
    for (int r = 0; r < ROWS; r++)
        for (int h = 0; h < H; h++) {
            for (int d = 0; d < D; d++) {
                s = s * 1103515245u + 12345u;
                qi[r][h][d] = vals[(s >> 16) % 6] * (((s >> 8) & 1) ? -1 : 1);
            }
            for (int d = 0; d < D; d += 2)
                q[(r * H + h) * 64 + d / 2] = (uint8_t)(nib(qi[r][h][d]) | nib(qi[r][h][d + 1]) << 4);
            memset(qs + (r * H + h) * 4, 127, 4);
            w[r * H + h] = (float)((int)(h % 5) - 2);
        }
    memset(cache, 0xFF, sizeof cache);
    const int32_t bt[3] = {2, 0, 3}, ctx[1] = {NK}, qsl[2] = {0, ROWS}, ends[ROWS] = {NK, 33, 1};
    for (int j = 0; j < NK; j++) {
        uint8_t v[64], sc[4] = {127, 127, 127, 127};
        kexp0[j] = (j % 9 == 4) ? 20 : 0; /* spread 20 > 9: the fallback path */
        sc[0] = (uint8_t)(127 + kexp0[j]);
        for (int d = 0; d < D; d++) {
            s = s * 1103515245u + 12345u;
            ki[j][d] = vals[(s >> 16) % 6] * (((s >> 8) & 1) ? -1 : 1);
        }
        for (int d = 0; d < D; d += 2)
            v[d / 2] = (uint8_t)(nib(ki[j][d]) | nib(ki[j][d + 1]) << 4);
        dsv4_idx_write_entry(&L, cache + bt[j / P] * P * 68, j % P, v, sc);
    }
    dsv4_idx_logits_args a = {q, qs, w, ROWS, H, D, cache, 4, &L, bt, 3, ctx, qsl, 1, ends, W};
    static double ideal[ROWS * W], faithful[ROWS * W], bound[ROWS * W];
    ck_assert_int_eq(dsv4_ref_mqa_logits(&a, DSV4_IDX_IDEAL, ideal, bound, &st), DSV4_OK);
    ck_assert_int_eq(dsv4_ref_mqa_logits(&a, DSV4_IDX_FAITHFUL, faithful, NULL, &st), DSV4_OK);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < W; j++) {
            if (j >= ends[r]) {
                ck_assert(isinf(ideal[r * W + j]) && ideal[r * W + j] < 0);
                continue;
            }
            long long want = 0, abssum = 0;
            for (int h = 0; h < H; h++) {
                long long dot = 0, ad = 0;
                for (int d = 0; d < D; d++) {
                    long long p = (long long)qi[r][h][d] * ki[j][d] * (d < 32 ? (1LL << kexp0[j]) : 1);
                    dot += p;
                    ad += llabs(p);
                }
                want += (dot > 0 ? dot : 0) * (long long)w[r * H + h];
                abssum += ad * llabs((long long)w[r * H + h]);
            }
            ck_assert_msg(ideal[r * W + j] == (double)want, "row %d key %d: %.17g != %lld", r, j, ideal[r * W + j], want);
            /* integers below 2^24 everywhere: the fp32 model is exact too */
            if (llabs(want) < (1 << 24) && kexp0[j] == 0)
                ck_assert(faithful[r * W + j] == (double)want);
            ck_assert(fabs(bound[r * W + j] - (double)abssum) <= 1e-4 * (double)abssum);
        }
}
END_TEST

/* NaN scales propagate; a zero q row scores 0. */
START_TEST(logits_nan_and_zero)
{
    enum { H = 32, D = 128, P = 32 };
    static uint8_t q[2 * H * 64], qs[2 * H * 4], cache[P * 68];
    float w[2 * H];
    dsv4_idx_layout L;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_idx_layout_make(H, D, P, 1, &L, &st), DSV4_OK);
    memset(q, 0x22, sizeof q);      /* codes 1.0 */
    memset(q, 0x00, H * 64);        /* row 0: zeros */
    memset(qs, 127, sizeof qs);
    for (int i = 0; i < 2 * H; i++)
        w[i] = 1.0f;
    uint8_t v[64], sc[4] = {127, 127, 127, 127};
    memset(v, 0x22, sizeof v);
    memset(cache, 0, sizeof cache);
    dsv4_idx_write_entry(&L, cache, 0, v, sc);
    sc[2] = 0xFF;
    dsv4_idx_write_entry(&L, cache, 1, v, sc);
    const int32_t bt[1] = {0}, ctx[1] = {2}, qsl[2] = {0, 2}, ends[2] = {2, 2};
    dsv4_idx_logits_args a = {q, qs, w, 2, H, D, cache, 1, &L, bt, 1, ctx, qsl, 1, ends, 2};
    double lg[4];
    ck_assert_int_eq(dsv4_ref_mqa_logits(&a, DSV4_IDX_IDEAL, lg, NULL, &st), DSV4_OK);
    ck_assert(lg[0] == 0.0);
    ck_assert(isnan(lg[1])); /* 0 x NaN is NaN (docs/semantics/indexer.md Q6.2 step 1) */
    ck_assert(lg[2] == 128.0 * H);
    ck_assert(isnan(lg[3]));
}
END_TEST

/* ---- top-k, block scores, candidates -------------------------------------------- */

START_TEST(topk_rows_by_hand)
{
    const double s[6] = {1.0, 5.0, 3.0, 5.0, NAN, -INFINITY};
    int32_t out[8];
    dsv4_idx_topk_row(s, 6, 3, 0, out);
    ck_assert_int_eq(out[0], 4); /* NaN first (torch.topk) */
    ck_assert_int_eq(out[1], 1); /* tie: lower index first */
    ck_assert_int_eq(out[2], 3);
    dsv4_idx_topk_row(s, 3, 5, 0, out); /* short row: -1 padding */
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(out[2], 0);
    ck_assert_int_eq(out[3], -1);
    ck_assert_int_eq(out[4], -1);
    dsv4_idx_topk_row(s, 6, 6, 1, out); /* a selected -inf becomes -1 */
    ck_assert_int_eq(out[5], -1);
}
END_TEST

START_TEST(block_scores_by_hand)
{
    const double lg[12] = {1, 7, 2, 0, -3, 9, 4, 4, 8, NAN, 1, 1};
    double bs[6];
    dsv4_idx_block_scores_row(lg, 8, 2, 6, bs); /* end 8, C 2 */
    ck_assert(bs[0] == 7 && bs[1] == 2 && bs[2] == 9);
    ck_assert(isinf(bs[3]) && bs[3] > 0); /* holds column 7 = end - 1: pinned */
    ck_assert(isinf(bs[4]) && bs[4] < 0 && isinf(bs[5]) && bs[5] < 0);
    dsv4_idx_block_scores_row(lg, 11, 5, 3, bs); /* NaN propagates; block 2 holds col 10 */
    ck_assert(bs[0] == 7 && isnan(bs[1]) && isinf(bs[2]) && bs[2] > 0);
}
END_TEST

START_TEST(candidates_by_hand)
{
    const int32_t cand[6] = {5, -1, 0, 9, 2, 12};
    int32_t ids[6];
    int64_t n, cols;
    dsv4_status st = {0};
    /* end 43, C 8: valid ids < 6 -> {0, 2, 5}; cu = 2*8 + min(8, 43 - 40) = 19 */
    ck_assert_int_eq(dsv4_idx_candidate_ids(cand, 6, 43, 8, ids, &n, &cols, &st), DSV4_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 2);
    ck_assert_int_eq(ids[2], 5);
    ck_assert_int_eq(cols, 19);
    const int32_t dup[3] = {1, 3, 1};
    ck_assert_int_eq(dsv4_idx_candidate_ids(dup, 3, 43, 8, ids, &n, &cols, &st), DSV4_EINPUT);
}
END_TEST

/* ---- index_set comparator ----------------------------------------------------------- */

static void mk_i32(dsv4_tensor *t, const char *name, int64_t r, int64_t k, const int32_t *v)
{
    int64_t s[2] = {r, k};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_tensor_alloc(t, name, DSV4_I32, 2, s, &st), DSV4_OK);
    memcpy(t->data, v, (size_t)(r * k) * 4);
}

START_TEST(index_set_kinds)
{
    /* scores of 2 rows x 8 columns; k = 3 */
    const double sc[16] = {9, 1, 5, 5.00001, 7, 0, 2, 3, /* row 1: */ 4, 3, 2, 1, 0, -1, -2, -3};
    const int32_t exp[6] = {0, 4, 2, 0, 1, -1};
    dsv4_tensor ts, te, ta;
    int64_t s[2] = {2, 8};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_tensor_alloc(&ts, "logits", DSV4_F64, 2, s, &st), DSV4_OK);
    memcpy(ts.data, sc, sizeof sc);
    mk_i32(&te, "topk_indices", 2, 3, exp);
    dsv4_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.kind = DSV4_CMP_INDEX_SET;
    pol.atol = 1e-3;
    snprintf(pol.companion, sizeof pol.companion, "logits");
    dsv4_cmp_aux aux = {&ts, NULL, NULL, NULL};
    dsv4_cmp_result res;
    struct {
        int32_t act[6];
        dsv4_verdict v;
        const char *where;
    } cases[] = {
        {{4, 2, 0, 1, 0, -1}, DSV4_PASS, NULL},           /* order-free */
        {{0, 4, 3, 0, 1, -1}, DSV4_PASS, NULL},           /* 2 -> 3: within 1e-3 of the k-th (5) */
        {{0, 4, 5, 0, 1, -1}, DSV4_FAIL, "missing 2 (5); extra 5 (0)"},
        {{0, 4, 2, 0, 1, 2}, DSV4_FAIL, "3 vs 2 valid"},  /* padding differs */
        {{0, 4, 2, 0, 0, -1}, DSV4_FAIL, "repeated index 0"},
        {{0, 4, 2, 9, 1, -1}, DSV4_FAIL, "invalid or repeated index 9"},
        {{0, 4, 2, 1, 2, -1}, DSV4_FAIL, "missing 0 (4); extra 2 (2)"}, /* short row: nothing forgiven */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_i32(&ta, "topk_indices", 2, 3, cases[i].act);
        ck_assert_int_eq(dsv4_compare(&te, &ta, &pol, NULL, NULL, NULL, &aux, &res, &st), DSV4_OK);
        ck_assert_msg(res.verdict == cases[i].v, "case %zu: %s", i, res.message);
        if (cases[i].where) {
            ck_assert_int_ge(res.n_first, 1);
            ck_assert_msg(strstr(res.first[0].where, cases[i].where), "case %zu: %s", i, res.first[0].where);
        }
        dsv4_tensor_free(&ta);
    }
    /* without scores every difference fails */
    const int32_t near[6] = {0, 4, 3, 0, 1, -1};
    mk_i32(&ta, "topk_indices", 2, 3, near);
    dsv4_cmp_aux none = {NULL, NULL, NULL, NULL};
    ck_assert_int_eq(dsv4_compare(&te, &ta, &pol, NULL, NULL, NULL, &none, &res, &st), DSV4_OK);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    dsv4_tensor_free(&ta);
    dsv4_tensor_free(&te);
    dsv4_tensor_free(&ts);
}
END_TEST

/* ---- end to end: edited goldens through dsv4check check ------------------------------ */

static char out[1 << 16];

/* In row r of a golden, replace the selected entry with the lowest score by
 * an unselected valid column: the closest-scored one (tie) or the
 * lowest-scored one.  Returns the replaced and the new index. */
static void swap_in(dsv4_golden *g, int64_t r, int lowest, int32_t *gone, int32_t *came)
{
    dsv4_tensor *ti = dsv4_tensors_find(&g->outputs, "topk_indices");
    const dsv4_tensor *lg = dsv4_tensors_get(&g->outputs, "logits");
    const int64_t k = ti->shape[1], W = lg->shape[1];
    int32_t *row = (int32_t *)ti->data + r * k;
    const double *s = (const double *)lg->data + r * W;
    int64_t kth = 0;
    for (int64_t i = 1; i < k; i++)
        if (s[row[i]] < s[row[kth]])
            kth = i;
    int64_t best = -1;
    for (int64_t j = 0; j < W; j++) {
        int sel = 0;
        for (int64_t i = 0; i < k; i++)
            sel |= row[i] == j;
        if (sel || !isfinite(s[j]))
            continue;
        if (best < 0 || (lowest ? s[j] < s[best] : fabs(s[j] - s[row[kth]]) < fabs(s[best] - s[row[kth]])))
            best = j;
    }
    ck_assert_int_ge(best, 0);
    *gone = row[kth];
    *came = (int32_t)best;
    row[kth] = (int32_t)best;
}

static void edit_and_check(const char *golden, int64_t row, int lowest, int want_rc)
{
    dsv4_golden g;
    dsv4_status st = {0};
    char path[256], needle[128];
    ck_assert_msg(dsv4_golden_read(golden, &g, &st) == DSV4_OK, "%s", st.msg);
    int32_t gone, came;
    swap_in(&g, row, lowest, &gone, &came);
    snprintf(path, sizeof path, "/tmp/dsv4idx.%d.h5", (int)getpid());
    ck_assert_msg(dsv4_golden_write(path, &g, 1, &st) == DSV4_OK, "%s", st.msg);
    dsv4_golden_free(&g);
    int rc = dsv4_test_cli(out, sizeof out, "check %s --impl ref -v", path);
    if (getenv("DSV4_KEEP"))
        fprintf(stderr, "%s: row %lld gone %d came %d\n", path, (long long)row, gone, came);
    else
        unlink(path);
    ck_assert_msg(rc == want_rc, "rc %d, want %d:\n%s", rc, want_rc, out);
    if (want_rc == 0) {
        ck_assert_msg(strstr(out, "within the tie tolerance"), "%s", out);
        return;
    }
    /* the golden now holds `came`, the implementation selects `gone` */
    snprintf(needle, sizeof needle, "row %lld: missing %d (", (long long)row, came);
    ck_assert_msg(strstr(out, needle), "no '%s' in:\n%s", needle, out);
    snprintf(needle, sizeof needle, "extra %d (", gone);
    ck_assert_msg(strstr(out, needle), "no '%s' in:\n%s", needle, out);
}

/* idx_sa_prefill_ties_h32: request 0 (rows 0-3) has an exact tie at the
 * k-th key of row 3, request 1 (rows 4-6) a near tie at row 6. */
START_TEST(golden_exact_tie_swap_passes) { edit_and_check("data/ci/idx_sa_prefill_ties_h32.h5", 3, 0, 0); }
END_TEST

START_TEST(golden_near_tie_swap_passes) { edit_and_check("data/ci/idx_sa_prefill_ties_h32.h5", 6, 0, 0); }
END_TEST

START_TEST(golden_low_score_swap_fails) { edit_and_check("data/ci/idx_sa_prefill_ties_h32.h5", 5, 1, 1); }
END_TEST

/* The near tie really is near, not equal. */
START_TEST(golden_near_tie_is_not_exact)
{
    dsv4_golden g;
    dsv4_status st = {0};
    ck_assert(dsv4_golden_read("data/ci/idx_sa_prefill_ties_h32.h5", &g, &st) == DSV4_OK);
    const dsv4_tensor *ti = dsv4_tensors_get(&g.outputs, "topk_indices"), *lg = dsv4_tensors_get(&g.outputs, "logits");
    const int64_t k = ti->shape[1], W = lg->shape[1];
    for (int r = 3; r <= 6; r += 3) {
        const int32_t *row = (const int32_t *)ti->data + r * k;
        const double *s = (const double *)lg->data + r * W;
        double kth = INFINITY, next = -INFINITY;
        for (int64_t i = 0; i < k; i++)
            kth = fmin(kth, s[row[i]]);
        for (int64_t j = 0; j < W; j++) {
            int sel = 0;
            for (int64_t i = 0; i < k; i++)
                sel |= row[i] == j;
            if (!sel && isfinite(s[j]))
                next = fmax(next, s[j]);
        }
        if (r == 3)
            ck_assert(next == kth);
        else
            ck_assert(next != kth && fabs(next - kth) < 1e-4 * fabs(kth));
    }
    dsv4_golden_free(&g);
}
END_TEST

/* ---- the logits error bound ------------------------------------------------------ */

/* The op's bound on a golden: f sum_h |w_h| sum_d |q_hd k_d|, f = (128 + H
 * + 2) 2^-24 (the faithful variant: 2^-23), against that sum written out
 * here in long double from the dequantized values (+inf where a NaN scale
 * enters), and against the reference's own bound pass (an fp32 GEMM sum
 * padded by 2^-16: never below the exact one, at most 2^-15 above it).
 * Counts the finite and infinite elements checked. */
static void check_logits_bound(const char *golden, int64_t *finite, int64_t *infinite)
{
    dsv4_golden g;
    dsv4_status st = {0};
    ck_assert_msg(dsv4_golden_read(golden, &g, &st) == DSV4_OK, "%s", st.msg);
    const dsv4_op *op = dsv4_op_find(g.op);
    ck_assert_ptr_nonnull(op);
    const dsv4_opctx c = dsv4_opctx_make(op, &g.params, dsv4_op_variant(op, g.variant), g.seed);
    const dsv4_tensor *q = dsv4_tensors_get(&g.inputs, "q"), *qs = dsv4_tensors_get(&g.inputs, "q_scale");
    const dsv4_tensor *w = dsv4_tensors_get(&g.inputs, "weights"), *kc = dsv4_tensors_get(&g.inputs, "kv_cache");
    const dsv4_tensor *ctx = dsv4_tensors_get(&g.inputs, "context_lens"), *bt = dsv4_tensors_get(&g.inputs, "block_table");
    const dsv4_tensor *qsl = dsv4_tensors_get(&g.inputs, "query_start_loc"), *re = dsv4_tensors_get(&g.inputs, "row_ends");
    const int64_t rows = q->shape[0], H = q->shape[1], W = dsv4_params_int(&g.params, "max_model_len");
    const int64_t P = kc->shape[1], pb = P * 68;
    dsv4_idx_layout L;
    ck_assert_int_eq(dsv4_idx_layout_make((int)H, 128, P, (int)dsv4_params_int(&g.params, "shuffle"), &L, &st), 0);
    double *mine = calloc((size_t)(rows * W), sizeof *mine), *ref = calloc((size_t)(rows * W), sizeof *ref);
    double *lg = calloc((size_t)(rows * W), sizeof *lg);
    ck_assert(mine && ref && lg);
    ck_assert_msg(op->bound(&c, &g.inputs, "logits", mine, rows * W, &st) == DSV4_OK, "%s", st.msg);
    dsv4_idx_logits_args a = {q->data, qs->data, w->data, rows, (int)H, 128, kc->data, kc->shape[0], &L, bt->data,
                              bt->shape[1], ctx->data, qsl->data, ctx->shape[0], re->data, W};
    ck_assert_int_eq(dsv4_ref_mqa_logits(&a, DSV4_IDX_IDEAL, lg, ref, &st), DSV4_OK);
    const double f = strcmp(g.variant, "mode=faithful") == 0 ? 0x1p-23 : (128.0 + (double)H + 2.0) * 0x1p-24;
    *finite = *infinite = 0;
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t r = a.query_start_loc[b]; r < a.query_start_loc[b + 1]; r++)
            for (int64_t j = 0; j < W; j++) {
                const double got = mine[r * W + j], theirs = ref[r * W + j] * f;
                if (j >= dsv4_idx_row_end(&a, r)) {
                    ck_assert(got == 0);
                    continue;
                }
                uint8_t v[64], s[4];
                dsv4_idx_read_entry(&L, a.cache + a.block_table[b * a.max_blocks + j / P] * pb, j % P, v, s);
                long double want = 0;
                for (int64_t h = 0; h < H; h++) {
                    const uint8_t *qv = a.q + (r * H + h) * 64, *qe = a.q_scale + (r * H + h) * 4;
                    long double dot = 0;
                    for (int d = 0; d < 128; d++) {
                        const int sh = (d & 1) * 4;
                        dot += fabsl((long double)dsv4_e2m1_to_f32((uint8_t)((qv[d / 2] >> sh) & 0xF)) *
                                     dsv4_e8m0_to_f64(qe[d / 32]) *
                                     dsv4_e2m1_to_f32((uint8_t)((v[d / 2] >> sh) & 0xF)) * dsv4_e8m0_to_f64(s[d / 32]));
                    }
                    want += fabsl((long double)a.weights[r * H + h]) * dot;
                }
                if (!isfinite((double)want)) {
                    ck_assert_msg(isinf(got) && got > 0 && isinf(theirs), "%s row %ld key %ld: %g", golden, (long)r,
                                  (long)j, got);
                    ++*infinite;
                    continue;
                }
                const double exact = (double)(want * f);
                ck_assert_msg(fabs(got - exact) <= 1e-12 * exact, "%s row %ld key %ld: %.17g, exact %.17g", golden,
                              (long)r, (long)j, got, exact);
                ck_assert_msg(got <= theirs && theirs <= got * (1 + 0x1p-15),
                              "%s row %ld key %ld: %.17g, the reference's pass %.17g", golden, (long)r, (long)j, got,
                              theirs);
                ++*finite;
            }
    free(mine);
    free(ref);
    free(lg);
    dsv4_golden_free(&g);
}

START_TEST(logits_bound_exact)
{
    int64_t finite, infinite;
    check_logits_bound("data/ci/idx_logits_decode_h64.h5", &finite, &infinite);
    ck_assert(finite > 300 && infinite == 0);
    check_logits_bound("data/ci/idx_logits_faithful_h64.h5", &finite, &infinite); /* far-apart scales */
    ck_assert(finite > 200 && infinite == 0);
    check_logits_bound("data/ci/idx_logits_wild_scales.h5", &finite, &infinite); /* NaN scales too */
    ck_assert(finite > 50 && infinite > 0);
}
END_TEST

/* The JSON report of the ci indexer cases under OPENBLAS_NUM_THREADS=threads,
 * its per-case "seconds" values (the only timing fields) cut out. */
static char *report_without_timing(int threads)
{
    char path[256], env[64];
    snprintf(path, sizeof path, "/tmp/dsv4idx.%d.threads%d.json", (int)getpid(), threads);
    snprintf(env, sizeof env, "OPENBLAS_NUM_THREADS=%d", threads);
    int rc = dsv4_test_cli_env(out, sizeof out, env, "run cases/ci/indexer.yaml --impl ref --json %s", path);
    ck_assert_msg(rc == 0, "rc %d:\n%s", rc, out);
    char *json = dsv4_test_slurp(path);
    unlink(path);
    static const char key[] = "\"seconds\": ";
    char *dst = json;
    for (const char *src = json; *src;) {
        if (strncmp(src, key, sizeof key - 1) == 0) {
            src += sizeof key - 1;
            while (*src && *src != ',' && *src != '}')
                src++;
            continue;
        }
        *dst++ = *src++;
    }
    *dst = '\0';
    return json;
}

/* Every number of the report (metrics, worst ratios, the index_set tie
 * tolerance) is the same whatever the BLAS thread count: on BLAS kernels
 * whose fp32 sums follow the thread split, the bound terms must not go
 * through them. */
START_TEST(ci_indexer_report_same_across_blas_threads)
{
    char *one = report_without_timing(1), *two = report_without_timing(2);
    const int cases = dsv4_test_count(one, "\"name\": \"idx_");
    ck_assert_int_ge(cases, 20);
    ck_assert_int_eq(dsv4_test_count(one, "\"seconds\""), 0);
    ck_assert_int_ge(dsv4_test_count(one, "\"kind\": \"index_set\""), 10);
    size_t i = 0;
    while (one[i] && one[i] == two[i])
        i++;
    ck_assert_msg(one[i] == two[i], "reports differ at byte %zu:\n1 thread:  %.160s\n2 threads: %.160s", i,
                  one + (i > 80 ? i - 80 : 0), two + (i > 80 ? i - 80 : 0));
    free(one);
    free(two);
}
END_TEST

DSV4_TEST_MAIN("indexer", "core", 60, NULL, NULL, layout_params, layout_offsets_by_hand, layout_bijection,
               hand_built_cache, kstore_round_trip, kstore_shuffled_equals_natural, logits_integer_exact,
               logits_nan_and_zero, topk_rows_by_hand, block_scores_by_hand, candidates_by_hand, index_set_kinds,
               golden_exact_tie_swap_passes, golden_near_tie_swap_passes, golden_low_score_swap_fails,
               golden_near_tie_is_not_exact, logits_bound_exact, ci_indexer_report_same_across_blas_threads)
