/* test_kvcache.c - the fp8_ds_mla cache against bytes derived by hand from
 * docs/semantics/kvcache.md A2.1-A2.2, A4, a second (frexp) formulation of
 * the scale rule, round-trip error bounds, and the CLI end to end (a golden
 * with changed bytes fails with exit 1 and the report names page, token and
 * field).  Runs from the repository root (golden paths, build/dsv4check). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness/golden.h"
#include "../ops/ops.h"
#include "../ref/kvcache.h"
#include "testutil.h"

#define PAGE2 (2 * DSV4_KV_TOKEN_BYTES) /* a page of B = 2 tokens */

/* The hand token.  Expected bytes (e4m3fn: bias 7, 3 mantissa bits):
 * block 0: amax 1.0 -> e = ceil(log2(1/448)) = -8, byte 119; values * 2^8:
 *   1.0 -> 256 = 2^8: field 15 -> 0x78; 0.75 -> 192 = 1.5*2^7 -> 0x74;
 *   -0.5 -> -128 -> 0xF0; 2^-12 -> 2^-4: field 3 -> 0x18;
 *   17/256 -> 17: tie of 16 and 18 -> 16 (even) -> 0x58;
 *   19/256 -> 19: tie of 18 and 20 -> 20 (even) -> 0x5A; -0.0 -> 0x80.
 * block 1: amax exactly 448 -> e = 0, byte 127; 448 -> 0x7E, -448 -> 0xFE, 1 -> 0x38.
 * block 2: all zero -> a = 1e-4 -> e = ceil(-22.1) = -22, byte 105, codes 0.
 * block 3: 450 (the bf16 above 448) -> e = 1, byte 128; 225 -> 224 = 1.75*2^7 -> 0x76.
 * block 4: 2^-130 (bf16 denormal) -> byte 105; 2^-108 -> 0x00.
 * block 5: 3*2^-20 < 1e-4 -> byte 105; * 2^22 = 12 = 1.5*2^3 -> 0x54.
 * block 6: amax 56 = 448*2^-3 -> byte 124; 56 -> 0x7E, 28 -> 224 -> 0x76.
 * RoPE: 1.5 -> bf16 0x3FC0 (C0 3F), -0.0 -> 0x8000 (00 80), 2^-130 -> 0x0008. */
static void hand_token(float *x)
{
    memset(x, 0, DSV4_KV_HEAD_DIM * sizeof *x);
    x[0] = 1.0f, x[1] = 0.75f, x[2] = -0.5f, x[3] = ldexpf(1, -12), x[4] = 17.0f / 256, x[5] = 19.0f / 256;
    x[6] = -0.0f;
    x[64] = 448, x[65] = -448, x[66] = 1;
    x[192] = 450;
    x[256] = ldexpf(1, -130);
    x[320] = 3 * ldexpf(1, -20);
    x[384] = 56, x[385] = 28;
    x[448] = 1.5f, x[449] = -0.0f, x[450] = ldexpf(1, -130);
}

static void expect_byte(const uint8_t *p, long off, uint8_t want, const char *what)
{
    ck_assert_msg(p[off] == want, "%s (byte %ld): 0x%02X, expected 0x%02X", what, off, p[off], want);
}

START_TEST(hand_token_bytes_ocp)
{
    uint8_t page[PAGE2];
    float x[DSV4_KV_HEAD_DIM];
    dsv4_status st = {0};
    hand_token(x);
    memset(page, 0xEE, sizeof page);
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    ck_assert_int_eq(dsv4_kv_encode_token(page, 2, 1, x, &o, &st), 0);
    const uint8_t *v = page + 576; /* row 1 values at 1*576 */
    const uint8_t *s = page + 2 * 576 + 8; /* row 1 scales at B*576 + 1*8 */
    expect_byte(v, 0, 0x78, "1.0");
    expect_byte(v, 1, 0x74, "0.75");
    expect_byte(v, 2, 0xF0, "-0.5");
    expect_byte(v, 3, 0x18, "2^-12");
    expect_byte(v, 4, 0x58, "17 -> 16");
    expect_byte(v, 5, 0x5A, "19 -> 20");
    expect_byte(v, 6, 0x80, "-0");
    expect_byte(v, 7, 0x00, "+0");
    expect_byte(v, 64, 0x7E, "448");
    expect_byte(v, 65, 0xFE, "-448");
    expect_byte(v, 66, 0x38, "1.0 at e=0");
    expect_byte(v, 130, 0x00, "zero block");
    expect_byte(v, 192, 0x76, "450 -> 224*2");
    expect_byte(v, 256, 0x00, "denormal");
    expect_byte(v, 320, 0x54, "12");
    expect_byte(v, 384, 0x7E, "56");
    expect_byte(v, 385, 0x76, "28");
    const uint8_t want_s[8] = {119, 127, 105, 128, 105, 105, 124, 0};
    for (int k = 0; k < 8; k++)
        expect_byte(s, k, want_s[k], k < 7 ? "scale byte" : "pad byte");
    expect_byte(v, 448, 0xC0, "rope 1.5 low");
    expect_byte(v, 449, 0x3F, "rope 1.5 high");
    expect_byte(v, 450, 0x00, "rope -0 low");
    expect_byte(v, 451, 0x80, "rope -0 high");
    expect_byte(v, 452, 0x08, "rope denormal low");
    expect_byte(v, 453, 0x00, "rope denormal high");
    /* Row 0's bytes and row 0's scales are untouched. */
    for (int i = 0; i < 576; i++)
        expect_byte(page, i, 0xEE, "row 0 value");
    for (int i = 0; i < 8; i++)
        expect_byte(page, 2 * 576 + i, 0xEE, "row 0 scale");
}
END_TEST

/* FNUZ (use_fnuz, FP8MAX 224, bias 8): block 0 amax 1 -> e = ceil(log2(1/224))
 * = -7, byte 120; 1*2^7 = 128 = 2^7: field 15 -> 0x78; -0 -> 0x00 (no -0);
 * block 1: 448 -> e = 1 (448 = 2*224), byte 128; 224 = 1.75*2^7 -> 0x7E. */
START_TEST(hand_token_bytes_fnuz)
{
    uint8_t page[PAGE2];
    float x[DSV4_KV_HEAD_DIM];
    dsv4_status st = {0};
    hand_token(x);
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(1);
    ck_assert(o.fp8_max == 224.0f && o.kind == DSV4_FP8_E4M3FNUZ);
    ck_assert_int_eq(dsv4_kv_encode_token(page, 2, 0, x, &o, &st), 0);
    expect_byte(page, 0, 0x78, "fnuz 1.0");
    expect_byte(page, 6, 0x00, "fnuz -0");
    expect_byte(page, 64, 0x7E, "fnuz 448");
    expect_byte(page, 1152 + 0, 120, "fnuz scale 0");
    expect_byte(page, 1152 + 1, 128, "fnuz scale 1");
    /* Decoding with the FNUZ table gives the values back. */
    float d[DSV4_KV_HEAD_DIM];
    dsv4_kv_decode_token_f32(page, 2, 0, DSV4_FP8_E4M3FNUZ, d);
    ck_assert(d[0] == 1.0f && d[64] == 448.0f && d[65] == -448.0f);
}
END_TEST

START_TEST(hand_token_decodes)
{
    uint8_t page[PAGE2];
    float x[DSV4_KV_HEAD_DIM], d[DSV4_KV_HEAD_DIM];
    uint16_t h[DSV4_KV_HEAD_DIM];
    dsv4_status st = {0};
    hand_token(x);
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    ck_assert_int_eq(dsv4_kv_encode_token(page, 2, 1, x, &o, &st), 0);
    dsv4_kv_decode_token_f32(page, 2, 1, DSV4_FP8_E4M3FN, d);
    dsv4_kv_decode_token_bf16(page, 2, 1, DSV4_FP8_E4M3FN, h);
    const float want[][2] = {{0, 1.0f}, {1, 0.75f}, {2, -0.5f}, {4, 16.0f / 256}, {5, 20.0f / 256},
                             {64, 448}, {65, -448}, {192, 448}, {256, 0}, {320, 3 * ldexpf(1, -20)},
                             {384, 56}, {385, 28}, {448, 1.5f}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int dim = (int)want[k][0];
        ck_assert_msg(d[dim] == want[k][1], "dim %d: %g, expected %g", dim, (double)d[dim], (double)want[k][1]);
        ck_assert_msg(dsv4_bf16_to_f32(h[dim]) == want[k][1], "bf16 dim %d", dim);
    }
    ck_assert_int_eq(h[449], 0x8000); /* RoPE bits copied */
    ck_assert_int_eq(h[450], 0x0008);
    ck_assert(signbit(d[6]) && d[6] == 0); /* -0 stays -0 */
}
END_TEST

/* The scale rule, second formulation: a = m*2^ex and FP8MAX = fm*2^fe with
 * m, fm in [0.5, 1) (frexp); since m/fm is in (1/2, 2), the smallest e
 * with 2^e*FP8MAX >= a is ex - fe when m <= fm, else ex - fe + 1. */
static int frexp_rule(float amax, float fp8max)
{
    double a = amax > 1e-4f ? amax : 1e-4f, m, fm;
    int ex, fe;
    m = frexp(a, &ex);
    fm = frexp(fp8max, &fe);
    return m <= fm ? ex - fe : ex - fe + 1;
}

START_TEST(scale_rule_exhaustive)
{
    const float maxes[3] = {448.0f, 224.0f, 240.0f};
    long n = 0;
    for (int mi = 0; mi < 3; mi++) {
        /* every positive finite bf16 value */
        for (uint32_t h = 0; h < 0x7F80; h++, n++) {
            float a = dsv4_bf16_to_f32((uint16_t)h);
            ck_assert_msg(dsv4_kv_scale_exponent(a, maxes[mi]) == frexp_rule(a, maxes[mi]),
                          "amax %a, max %g", (double)a, (double)maxes[mi]);
        }
        /* exact multiples FP8MAX*2^k and their fp32 neighbours */
        for (int k = -140; k <= 120; k++) {
            float p = ldexpf(maxes[mi], k);
            if (p == 0 || isinf(p))
                continue;
            const float c[3] = {p, nextafterf(p, 0), nextafterf(p, INFINITY)};
            for (int j = 0; j < 3; j++, n++)
                ck_assert_msg(dsv4_kv_scale_exponent(c[j], maxes[mi]) == frexp_rule(c[j], maxes[mi]),
                              "amax %a, max %g", (double)c[j], (double)maxes[mi]);
            if (p > 1e-4f) /* 2^k * FP8MAX itself needs exactly e = k */
                ck_assert_int_eq(dsv4_kv_scale_exponent(p, maxes[mi]), k);
        }
    }
    ck_assert_int_gt(n, 90000);
    /* The floor: every amax <= 1e-4 gives byte 105 (docs/semantics/kvcache.md A2.2). */
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    ck_assert_int_eq(dsv4_kv_scale_byte(0.0f, &o), 105);
    ck_assert_int_eq(dsv4_kv_scale_byte(1e-4f, &o), 105);
    ck_assert_int_eq(dsv4_kv_scale_byte(1.0f, &o), 119);
    ck_assert_int_eq(dsv4_kv_scale_byte(448.0f, &o), 127);
    ck_assert_int_eq(dsv4_kv_scale_byte(3.0e38f, &o), 247); /* 3e38 <= 448*2^120 */
    o.scale_max = 200; /* the clamp applies (254 is the gfx950 compressor's) */
    ck_assert_int_eq(dsv4_kv_scale_byte(3.0e38f, &o), 200);
}
END_TEST

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* Random tokens: |decoded - x| <= half an fp8 step of the scaled value,
 * times the scale; RoPE exact; the scale byte = the frexp rule. */
START_TEST(round_trip_error_bound)
{
    uint8_t page[4 * DSV4_KV_TOKEN_BYTES];
    float x[DSV4_KV_HEAD_DIM], d[DSV4_KV_HEAD_DIM];
    uint64_t seed = 12345;
    dsv4_status st = {0};
    for (int fnuz = 0; fnuz < 2; fnuz++) {
        dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(fnuz);
        const int emin = fnuz ? -7 : -6; /* smallest normal exponent of e4m3 / e4m3fnuz */
        for (int tok = 0; tok < 3000; tok++) {
            for (int k = 0; k < 8; k++) {
                int amp = (int)(lcg(&seed) % 60) - 40;
                for (int i = 0; i < 64; i++) {
                    double u = (double)(lcg(&seed) % 2000001) / 1e6 - 1.0;
                    x[k * 64 + i] = dsv4_round_bf16((float)ldexp(u, amp));
                }
            }
            int row = tok % 4;
            ck_assert_int_eq(dsv4_kv_encode_token(page, 4, row, x, &o, &st), 0);
            dsv4_kv_decode_token_f32(page, 4, row, o.kind, d);
            const uint8_t *sc = page + dsv4_kv_scale_offset(4, row);
            for (int k = 0; k < 7; k++) {
                float amax = 0;
                for (int i = 0; i < 64; i++)
                    amax = fmaxf(amax, fabsf(x[k * 64 + i]));
                int e = frexp_rule(amax, o.fp8_max);
                ck_assert_int_eq(sc[k], e + 127);
                for (int i = 0; i < 64; i++) {
                    double m = fabs(ldexp(x[k * 64 + i], -e)); /* scaled magnitude <= FP8MAX */
                    int ex;
                    frexp(m, &ex);
                    int b = m == 0 ? emin : (ex - 1 < emin ? emin : ex - 1);
                    double half = ldexp(1.0, b - 3) / 2 * ldexp(1.0, e);
                    ck_assert_msg(fabs((double)d[k * 64 + i] - x[k * 64 + i]) <= half,
                                  "fnuz %d token %d dim %d: %a -> %a", fnuz, tok, k * 64 + i,
                                  (double)x[k * 64 + i], (double)d[k * 64 + i]);
                }
            }
            for (int j = 448; j < 512; j++)
                ck_assert(d[j] == x[j]);
            ck_assert_int_eq(sc[7], 0);
        }
    }
}
END_TEST

START_TEST(insert_slots_and_untouched_bytes)
{
    enum { NB = 3, B = 2 };
    uint8_t cache[NB * B * DSV4_KV_TOKEN_BYTES], before[sizeof cache];
    uint16_t k[3 * 512];
    float x[512];
    dsv4_status st = {0};
    hand_token(x);
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 512; d++)
            k[t * 512 + d] = dsv4_bf16_from_f32(x[d] * (float)(t + 1));
    memset(cache, 0x5A, sizeof cache);
    memcpy(before, cache, sizeof cache);
    const int64_t slots[3] = {5, -1, 0}; /* page 2 row 1; skipped; page 0 row 0 */
    dsv4_kv_layout L = {B, NB, 0};
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache(k, 3, slots, NULL, cache, &L, &o, &st), 0);
    const long P = B * DSV4_KV_TOKEN_BYTES;
    /* token 0 (x) at page 2 row 1: 1.0 -> 0x78 at 2P + 576; scale 119 at 2P + 1152 + 8 */
    expect_byte(cache, 2 * P + 576, 0x78, "token 0 dim 0");
    expect_byte(cache, 2 * P + 1152 + 8, 119, "token 0 scale 0");
    /* token 2 (3x) at page 0 row 0: amax 3 -> e = ceil(log2(3/448)) = -7; 3*2^7 = 384 -> 0x7C */
    expect_byte(cache, 0, 0x7C, "token 2 dim 0");
    expect_byte(cache, 1152, 120, "token 2 scale 0");
    /* Every byte outside the two written tokens is as before. */
    for (long i = 0; i < (long)sizeof cache; i++) {
        long pg = i / P, off = i % P;
        long row = off < 1152 ? off / 576 : (off - 1152) / 8;
        int written = (pg == 2 && row == 1) || (pg == 0 && row == 0);
        if (!written)
            ck_assert_msg(cache[i] == before[i], "byte %ld (page %ld row %ld) changed", i, pg, row);
    }
    /* int32 slots give the same cache. */
    uint8_t c32[sizeof cache];
    memcpy(c32, before, sizeof c32);
    const int32_t s32[3] = {5, -1, 0};
    ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache(k, 3, NULL, s32, c32, &L, &o, &st), 0);
    ck_assert(memcmp(c32, cache, sizeof c32) == 0);
    /* A slot past the cache is bad input, and nothing is written. */
    memcpy(c32, before, sizeof c32);
    const int64_t bad[2] = {0, NB * B};
    ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache(k, 2, bad, NULL, c32, &L, &o, &st), DSV4_EINPUT);
    ck_assert(memcmp(c32, before, sizeof c32) == 0);
    /* A page stride above B*584 moves page 2 to 2*stride. */
    enum { STRIDE = B * DSV4_KV_TOKEN_BYTES + 576 };
    uint8_t padded[NB * STRIDE];
    memset(padded, 0, sizeof padded);
    dsv4_kv_layout Lp = {B, NB, STRIDE};
    ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache(k, 1, slots, NULL, padded, &Lp, &o, &st), 0);
    expect_byte(padded, 2 * STRIDE + 576, 0x78, "strided page 2 row 1 dim 0");
    expect_byte(padded, 2 * STRIDE + 1152 + 8, 119, "strided page 2 row 1 scale 0");
}
END_TEST

/* Gather: two requests over a B = 2 cache with a shuffled block table. */
START_TEST(gather_rows_offsets_and_variants)
{
    enum { NB = 4, B = 2, W = 6 };
    uint8_t cache[NB * B * DSV4_KV_TOKEN_BYTES];
    float x[512];
    dsv4_status st = {0};
    memset(cache, 0x7F, sizeof cache); /* NaN everywhere a wrong read lands */
    hand_token(x);
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    /* r0: S = 3, G = 2 -> positions 1, 2: (table[0][0] = 3, row 1), (table[0][1] = 1, row 0).
     * r1: S = 1, G = 1 -> position 0: (table[1][0] = 0, row 0). */
    const int32_t bt[2 * 2] = {3, 1, 0, 2};
    const int32_t seq[2] = {3, 1}, gat[2] = {2, 1};
    const float mult[3] = {1, 2, 4};
    const long pg[3] = {3, 1, 0}, rw[3] = {1, 0, 0};
    for (int j = 0; j < 3; j++) {
        float y[512];
        for (int d = 0; d < 512; d++)
            y[d] = x[d] * mult[j];
        ck_assert_int_eq(dsv4_kv_encode_token(cache + pg[j] * B * 584, B, rw[j], y, &o, &st), 0);
    }
    uint16_t out[2 * W * 512];
    for (int variant = 0; variant < 3; variant++) {
        for (int i = 0; i < 2 * W * 512; i++)
            out[i] = 0x7B7B;
        dsv4_gather_args a = {out, 2, W, cache, {B, NB, 0}, seq, gat, bt, 2, 3, 0};
        ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, (dsv4_gather_invalid)variant, &st), 0);
        /* r0 rows 3, 4 = tokens 1x, 2x; r1 row 3 = 4x; all else stale. */
        for (int r = 0; r < 2; r++)
            for (int w = 0; w < W; w++) {
                const uint16_t *row = out + (r * W + w) * 512;
                int j = r == 0 ? (w == 3 ? 0 : w == 4 ? 1 : -1) : (w == 3 ? 2 : -1);
                if (j < 0) {
                    for (int d = 0; d < 512; d++)
                        ck_assert_msg(row[d] == 0x7B7B, "r %d row %d dim %d touched", r, w, d);
                    continue;
                }
                ck_assert(dsv4_bf16_to_f32(row[0]) == mult[j]);      /* 1.0 * m */
                ck_assert(dsv4_bf16_to_f32(row[64]) == 448 * mult[j]);
                ck_assert(dsv4_bf16_to_f32(row[192]) == 448 * mult[j]); /* 450 -> 448 */
                ck_assert(dsv4_bf16_to_f32(row[448]) == 1.5f * mult[j]);
            }
    }
    /* gather_lens absent: G = S.  r0 reads positions 0..2, rows 0..2 with offset 0. */
    for (int i = 0; i < 2 * W * 512; i++)
        out[i] = 0x7B7B;
    dsv4_gather_args a = {out, 2, W, cache, {B, NB, 0}, seq, NULL, bt, 2, 0, 0};
    ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ERROR, &st), 0);
    ck_assert(isnan(dsv4_bf16_to_f32(out[0])));            /* position 0 of r0 was never written: NaN */
    ck_assert(dsv4_bf16_to_f32(out[1 * 512]) == 1.0f);     /* position 1 */
    ck_assert(dsv4_bf16_to_f32(out[(W + 0) * 512]) == 4.0f); /* r1 position 0 */
    ck_assert(out[3 * 512] == 0x7B7B);
    /* An invalid page: Triton -> bad input; MUSA -> untouched; third-party -> zeros. */
    const int32_t bt_bad[2 * 2] = {3, -1, 0, 2};
    a.block_table = bt_bad;
    a.gather_lens = gat;
    a.offset = 3;
    ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ERROR, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "block_table[0, 1] = -1"));
    for (int i = 0; i < 2 * W * 512; i++)
        out[i] = 0x7B7B;
    ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_SKIP, &st), 0);
    ck_assert(out[4 * 512] == 0x7B7B && out[4 * 512 + 511] == 0x7B7B);
    ck_assert(dsv4_bf16_to_f32(out[3 * 512]) == 1.0f);
    ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ZERO, &st), 0);
    for (int d = 0; d < 512; d++)
        ck_assert(out[4 * 512 + d] == 0);
    /* offset + G beyond Wout is bad input. */
    a.block_table = bt;
    a.offset = W - 1;
    ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ERROR, &st), DSV4_EINPUT);
}
END_TEST

/* The op's validate: slot -2 (the Triton insert skips only -1) and a
 * repeated slot are bad input. */
START_TEST(insert_op_validates_slots)
{
    dsv4_params ps;
    const dsv4_op *op =
        dsv4_test_op_with("quantize_and_insert_k_cache", &ps, (const char *const[]){"query_lens", "[2]", NULL});
    dsv4_status st = {0};
    dsv4_params_set_int(&ps, "block_size", 2, &st);
    dsv4_tensors in = {0};
    dsv4_tensor *k, *s, *c;
    int64_t ks[2] = {2, 512}, n = 2, cs[3] = {2, 2, 584};
    ck_assert_int_eq(dsv4_tensors_add(&in, "k", DSV4_BF16, 2, ks, &k, &st), 0);
    ck_assert_int_eq(dsv4_tensors_add(&in, "slot_mapping", DSV4_I64, 1, &n, &s, &st), 0);
    ck_assert_int_eq(dsv4_tensors_add(&in, "k_cache", DSV4_U8, 3, cs, &c, &st), 0);
    dsv4_opctx ctx = dsv4_opctx_make(op, &ps, 0, 1);
    int64_t *sl = s->data;
    sl[0] = 3, sl[1] = -1;
    ck_assert_int_eq(op->validate(&ctx, &in, &st), 0);
    sl[1] = -2;
    ck_assert_int_eq(op->validate(&ctx, &in, &st), DSV4_EINPUT);
    dsv4_status_clear(&st);
    sl[1] = 3;
    ck_assert_int_eq(op->validate(&ctx, &in, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "repeats"));
    dsv4_status_clear(&st);
    sl[1] = 4;
    ck_assert_int_eq(op->validate(&ctx, &in, &st), DSV4_EINPUT);
    dsv4_tensors_free(&in);
}
END_TEST

/* ---- end to end through the CLI ---- */

static char out_buf[1 << 16];

START_TEST(changed_cache_byte_is_named)
{
    char want[3][200];
    dsv4_golden g;
    dsv4_test_golden_read("data/ci/kv_insert_prefill_swa_wrap.h5", &g);
    const dsv4_tensor *sm = dsv4_tensors_get(&g.inputs, "slot_mapping");
    dsv4_tensor *kc = dsv4_tensors_find(&g.outputs, "k_cache");
    ck_assert(sm && kc && sm->dtype == DSV4_I32 && kc->shape[1] == 64);
    const long slot = dsv4_test_first_slot(sm);
    const long B = 64, page = slot / B, tok = slot % B, base = page * B * 584;
    uint8_t *b = kc->data;
    b[base + tok * 576 + 130] ^= 0x01;       /* value byte 130 */
    b[base + B * 576 + tok * 8 + 2] ^= 0x01;  /* scale byte 2 */
    b[base + tok * 576 + 448 + 10] ^= 0x01;  /* rope lane 5, low byte */
    snprintf(want[0], sizeof want[0], "page %ld, token %ld (slot %ld), value byte 130 (dim 130, block 2)", page,
             tok, slot);
    snprintf(want[1], sizeof want[1], "page %ld, token %ld (slot %ld), scale byte 2 (dims 128..191)", page, tok,
             slot);
    snprintf(want[2], sizeof want[2], "page %ld, token %ld (slot %ld), rope lane 5 (dim 453), low byte", page,
             tok, slot);
    int rc = dsv4_test_check_changed_tmp(&g, out_buf, sizeof out_buf);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out_buf);
    ck_assert_msg(strstr(out_buf, "3 of ") != NULL, "count:\n%s", out_buf);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strstr(out_buf, want[i]) != NULL, "'%s' not in:\n%s", want[i], out_buf);
    /* A changed gather element names request, position, page and dim. */
    dsv4_test_golden_read("data/ci/kv_gather_swa_offset_stale.h5", &g);
    dsv4_tensor *o = dsv4_tensors_find(&g.outputs, "out");
    ck_assert_ptr_nonnull(o);
    ((uint16_t *)o->data)[(0 * o->shape[1] + 5) * 512 + 7] ^= 1;   /* r0 row 5 = i 0 */
    ((uint16_t *)o->data)[(1 * o->shape[1] + 0) * 512 + 7] ^= 1;   /* r1 row 0: stale */
    rc = dsv4_test_check_changed_tmp(&g, out_buf, sizeof out_buf);
    ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out_buf);
    ck_assert_msg(strstr(out_buf, "request 0, position 70 (page ") != NULL, "%s", out_buf);
    ck_assert_msg(strstr(out_buf, "dim 7: value byte 7 x scale byte 0") != NULL, "%s", out_buf);
    ck_assert_msg(strstr(out_buf, "request 1, row 0 is outside [offset 5, offset+G 75): must be untouched") != NULL,
                  "%s", out_buf);
}
END_TEST

/* The ci goldens reach the paths of docs/semantics/kvcache.md A2.2: the 1e-4 floor (byte 105),
 * the fp8 max code, fp8 subnormal codes, -0, and padding slots (-1). */
START_TEST(ci_goldens_cover_the_encoder_paths)
{
    const char *files[2] = {"data/ci/kv_insert_prefill_swa_wrap.h5", "data/ci/kv_insert_decode_swa.h5"};
    long floor = 0, maxc = 0, sub = 0, negz = 0, skipped = 0;
    for (int f = 0; f < 2; f++) {
        dsv4_golden g;
        dsv4_status st = {0};
        memset(&g, 0, sizeof g);
        ck_assert_msg(dsv4_golden_read(files[f], &g, &st) == 0, "%s", st.msg);
        const dsv4_tensor *sm = dsv4_tensors_get(&g.inputs, "slot_mapping"), *kc = dsv4_tensors_get(&g.outputs, "k_cache");
        const long B = kc->shape[1];
        for (int64_t t = 0; t < sm->shape[0]; t++) {
            long s = sm->dtype == DSV4_I32 ? ((const int32_t *)sm->data)[t] : (long)((const int64_t *)sm->data)[t];
            if (s < 0) {
                skipped++;
                continue;
            }
            const uint8_t *page = (const uint8_t *)kc->data + (s / B) * B * 584;
            for (int k = 0; k < 7; k++)
                floor += page[B * 576 + (s % B) * 8 + k] == 105;
            for (int d = 0; d < 448; d++) {
                uint8_t c = page[(s % B) * 576 + d];
                maxc += (c & 0x7F) == 0x7E;
                sub += (c & 0x7F) >= 1 && (c & 0x7F) <= 7;
                negz += c == 0x80;
            }
        }
        dsv4_golden_free(&g);
    }
    ck_assert_msg(floor > 0 && maxc > 0 && sub > 0 && negz > 0 && skipped > 0,
                  "floor %ld, max code %ld, subnormal %ld, -0 %ld, skipped %ld", floor, maxc, sub, negz, skipped);
}
END_TEST

DSV4_TEST_MAIN("kvcache", "core", 60, NULL, NULL, hand_token_bytes_ocp, hand_token_bytes_fnuz, hand_token_decodes,
               scale_rule_exhaustive, round_trip_error_bound, insert_slots_and_untouched_bytes,
               gather_rows_offsets_and_variants, insert_op_validates_slots, changed_cache_byte_is_named,
               ci_goldens_cover_the_encoder_paths)
