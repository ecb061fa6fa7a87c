/* test_kvcache41.c - the V4.1 FlashMLA cache formats v41_fp8 (528 B) and
 * v41_fp4 (288 B) (docs/semantics/kvcache.md A2.4 [S22]): tiles whose bytes
 * are derived by hand, exhaustive checks of both scale rules over every
 * bf16 amax against second formulations (exact integer / double
 * arithmetic), element codes against a nearest-value search, exactness of
 * the bf16 gather, slot and layout handling (negative slots, pages, untouched
 * bytes), the op's validate, and the CLI's naming of changed bytes.  Runs
 * from the repository root. */
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

#define FP8P2 (2 * DSV4_KV41_FP8_TOKEN_BYTES) /* a page of B = 2 tokens */
#define FP4P2 (2 * DSV4_KV41_FP4_TOKEN_BYTES)

static void set(uint16_t *k, int d, float v) { k[d] = dsv4_bf16_from_f32(v); }

static void expect_byte(const uint8_t *p, long off, uint8_t want, const char *what)
{
    ck_assert_msg(p[off] == want, "%s (byte %ld): 0x%02X, expected 0x%02X", what, off, p[off], want);
}

/* A byte of a hand row: at offset at of the row's data, its value. */
typedef struct hand_byte {
    int at;
    uint8_t c;
} hand_byte;

/* Row 1 of a B = 2 page (data at D, scales at S; row 0's scales from
 * scales0 to S): the hand bytes of its data (what names them), and row 0's
 * data and scales still the 0xEE the page was set to. */
static void expect_row1_bytes(const uint8_t *page, long D, long scales0, long S, const hand_byte *v, size_t n,
                              const char *what)
{
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s %d", what, v[i].at);
        expect_byte(page, D + v[i].at, v[i].c, name);
    }
    for (long b = 0; b < D; b++)
        expect_byte(page, b, 0xEE, "row 0 data");
    for (long b = scales0; b < S; b++)
        expect_byte(page, b, 0xEE, "row 0 scales");
}

/* ---- v41_fp8 hand tile (row 1 of a B = 2 page: data at 512, scales at
 * 2*512 + 16 = 1040).  e4m3fn: bias 7, 3 mantissa bits; byte = e + 127.
 * tile 0: amax 1 -> s = fl(1/448) in (2^-9, 2^-8) -> e = -8, byte 119; x*2^8:
 *   1 -> 256 -> 0x78; 0.75 -> 192 -> 0x74; -0.5 -> -128 -> 0xF0;
 *   17/256 -> 17: tie 16 | 18 -> 16 -> 0x58; 19/256 -> 19: tie -> 20 -> 0x5A; -0 -> 0x80.
 * tile 1: amax 448 -> fl(448 * fl(1/448)) = 1 -> e = 0, byte 127; 448 -> 0x7E, -448 -> 0xFE, 1 -> 0x38.
 * tile 2: zeros -> s = 1e-4 -> e = ceil(-13.3) = -13, byte 114; codes 0.
 * tile 3: 450 (bf16 after 448) -> e = 1, byte 128; 450 -> 225 -> 224 (step 16) -> 0x76;
 *   225 -> 112.5 -> 112 = 1.75*2^6 (step 8) -> 0x6E.
 * tile 4: amax 3*2^-20 (under the floor) -> byte 114; * 2^13: 3*2^-7 -> 0x0C;
 *   2^-22 -> 2^-9 (min subnormal) -> 0x01; 2^-23 -> 2^-10: tie 0 | 2^-9 -> 0x00.
 * tile 5: amax 448*2^-14: s = 2^-14 < 1e-4 -> floor -> e = -13 (the V4 rule,
 *   floor on amax, would give -14), byte 114; 448*2^-14 * 2^13 = 224 -> 0x76.
 * tile 6: amax 2^100 -> e = ceil(100 - log2 448) = 92, byte 219; 2^100 -> 256 -> 0x78.
 * tile 15 (RoPE dims 480..511, quantized too): amax 3 -> e = -7, byte 120;
 *   1.5 -> 192 -> 0x74; -3 -> -384 = -1.5*2^8 -> 0xFC. */
static void fp8_hand_row(uint16_t *k)
{
    memset(k, 0, DSV4_KV_HEAD_DIM * sizeof *k);
    set(k, 0, 1.0f), set(k, 1, 0.75f), set(k, 2, -0.5f), set(k, 3, 17.0f / 256), set(k, 4, 19.0f / 256);
    set(k, 5, -0.0f);
    set(k, 32, 448), set(k, 33, -448), set(k, 34, 1);
    set(k, 96, 450), set(k, 97, 225);
    set(k, 128, 3 * ldexpf(1, -20)), set(k, 129, ldexpf(1, -22)), set(k, 130, ldexpf(1, -23));
    set(k, 160, ldexpf(448, -14));
    set(k, 192, ldexpf(1, 100));
    set(k, 480, 1.5f), set(k, 481, -3.0f);
}

/* Row 1 of a B = 2 page of 0xEE bytes encoded from the hand row fill makes. */
static void encode_hand_row(uint8_t *page, size_t len, void (*fill)(uint16_t *k), dsv4_kv_format fmt)
{
    uint16_t k[DSV4_KV_HEAD_DIM];
    fill(k);
    memset(page, 0xEE, len);
    dsv4_kv41_encode_token(page, 2, 1, k, fmt);
}

START_TEST(fp8_hand_tile_bytes)
{
    uint8_t page[FP8P2];
    encode_hand_row(page, sizeof page, fp8_hand_row, DSV4_KV_FMT_V41_FP8);
    const long D = 512, S = 1040;
    const uint8_t want_s[16] = {119, 127, 114, 128, 114, 114, 219, 114, 114, 114, 114, 114, 114, 114, 114, 120};
    for (int t = 0; t < 16; t++)
        expect_byte(page, S + t, want_s[t], "scale");
    const hand_byte v[] = {
        {0, 0x78}, {1, 0x74}, {2, 0xF0}, {3, 0x58}, {4, 0x5A}, {5, 0x80}, {6, 0x00}, {32, 0x7E}, {33, 0xFE},
        {34, 0x38}, {64, 0x00}, {96, 0x76}, {97, 0x6E}, {128, 0x0C}, {129, 0x01}, {130, 0x00},
        {160, 0x76}, {192, 0x78}, {480, 0x74}, {481, 0xFC}, {511, 0x00},
    };
    /* Row 0 of the page and the padding tail are untouched. */
    expect_row1_bytes(page, D, 1024, S, v, sizeof v / sizeof v[0], "value dim");
}
END_TEST

/* ---- v41_fp4 hand tile (row 1 of a B = 2 page: data at 256, scales at
 * 2*256 + 32 = 544).  e2m1 codes: 0,.5,1,1.5,2,3,4,6 = 0..7, bit 3 sign.
 * tile 0: amax 6 -> scale 1.0 = 0x38; 6 -> 7, -0.25 (tie 0 | .5) -> -0 = 0x8:
 *   byte 0 = 0x87; 0.75 (tie .5 | 1) -> 1 = 2, 1.25 (tie 1 | 1.5) -> 2: 0x22;
 *   2.5 (tie 2 | 3) -> 4, -3.5 (tie 3 | 4) -> -4 = 0xE: 0xE4;
 *   5 (tie 4 | 6) -> 4 = 6, 1.75 (tie 1.5 | 2) -> 2 = 4: 0x46; -0 -> 0x8, .5 -> 1: 0x18.
 * tile 1: amax 6.375 -> 6.375/6 = 1.0625, the e4m3 tie 1 | 1.125 -> 1.0 = 0x38;
 *   6.375 -> saturates to 6 = 7: byte 8 = 0x07.
 * tile 2: amax 6.75 -> 1.125 exactly = 0x39; 6.75/1.125 = 6 -> 7, -2.25/1.125 = -2 -> 0xC: 0xC7.
 * tile 3: zeros -> clamp 2^-9 = 0x01, codes 0.
 * tile 4: amax 6144 -> 1024 -> clamp 448 = 0x7E; 6144/448 = 13.7 -> 7, 448 -> 1 = 2: 0x27.
 * tile 5: amax 3*2^-10 -> 2^-11 -> clamp 2^-9 = 0x01; 2^-12 -> .125 -> 0, -2^-10 -> -.5 = 0x9:
 *   byte 40 = 0x90; 3*2^-10 -> 1.5 = 3: byte 41 = 0x03.
 * tile 31: amax 3 -> 0.5 = 0x30; 3 -> 6 = 7, 1 -> 2 = 4: byte 248 = 0x47. */
static void fp4_hand_row(uint16_t *k)
{
    memset(k, 0, DSV4_KV_HEAD_DIM * sizeof *k);
    const float t0[10] = {6, -0.25f, 0.75f, 1.25f, 2.5f, -3.5f, 5, 1.75f, -0.0f, 0.5f};
    for (int i = 0; i < 10; i++)
        set(k, i, t0[i]);
    set(k, 16, 6.375f);
    set(k, 32, 6.75f), set(k, 33, -2.25f);
    set(k, 64, 6144), set(k, 65, 448);
    set(k, 80, ldexpf(1, -12)), set(k, 81, -ldexpf(1, -10)), set(k, 82, 3 * ldexpf(1, -10));
    set(k, 496, 3), set(k, 497, 1);
}

START_TEST(fp4_hand_tile_bytes)
{
    uint8_t page[FP4P2];
    encode_hand_row(page, sizeof page, fp4_hand_row, DSV4_KV_FMT_V41_FP4);
    const long D = 256, S = 544;
    for (int t = 0; t < 32; t++) {
        const uint8_t want = t == 0 || t == 1 ? 0x38 : t == 2 ? 0x39 : t == 4 ? 0x7E : t == 31 ? 0x30 : 0x01;
        expect_byte(page, S + t, want, "scale");
    }
    const hand_byte v[] = {
        {0, 0x87}, {1, 0x22}, {2, 0xE4}, {3, 0x46}, {4, 0x18}, {5, 0x00}, {8, 0x07}, {16, 0xC7}, {24, 0x00},
        {32, 0x27}, {40, 0x90}, {41, 0x03}, {248, 0x47}, {255, 0x00},
    };
    expect_row1_bytes(page, D, 512, S, v, sizeof v / sizeof v[0], "value byte");
}
END_TEST

/* The gather's decode of the hand rows, values derived by hand. */
START_TEST(hand_tiles_decode)
{
    uint8_t p8[FP8P2], p4[FP4P2];
    uint16_t k[DSV4_KV_HEAD_DIM], out[DSV4_KV_HEAD_DIM];
    fp8_hand_row(k);
    dsv4_kv41_encode_token(p8, 2, 1, k, DSV4_KV_FMT_V41_FP8);
    dsv4_kv41_decode_token_bf16(p8, 2, 1, DSV4_KV_FMT_V41_FP8, out);
    const struct { int d; float v; } e8[] = {
        {0, 1.0f}, {1, 0.75f}, {2, -0.5f}, {3, 16.0f / 256}, {4, 20.0f / 256}, {32, 448}, {33, -448},
        {96, 448}, {97, 224}, {128, 3 * ldexpf(1, -20)}, {129, ldexpf(1, -22)}, {130, 0},
        {160, ldexpf(448, -14)}, {192, ldexpf(1, 100)}, {480, 1.5f}, {481, -3.0f},
    };
    for (size_t i = 0; i < sizeof e8 / sizeof e8[0]; i++)
        ck_assert_msg(dsv4_bf16_to_f32(out[e8[i].d]) == e8[i].v, "fp8 dim %d: %g, expected %g", e8[i].d,
                      (double)dsv4_bf16_to_f32(out[e8[i].d]), (double)e8[i].v);
    ck_assert_int_eq(out[5], 0x8000); /* -0 stays -0 */
    fp4_hand_row(k);
    dsv4_kv41_encode_token(p4, 2, 1, k, DSV4_KV_FMT_V41_FP4);
    dsv4_kv41_decode_token_bf16(p4, 2, 1, DSV4_KV_FMT_V41_FP4, out);
    const struct { int d; float v; } e4[] = {
        {0, 6}, {2, 1}, {3, 1}, {4, 2}, {5, -4}, {6, 4}, {7, 2}, {9, 0.5f}, {16, 6}, {32, 6.75f},
        {33, -2.25f}, {64, 2688}, {65, 448}, {80, 0}, {81, -ldexpf(1, -10)}, {82, 3 * ldexpf(1, -10)},
        {496, 3}, {497, 1},
    };
    for (size_t i = 0; i < sizeof e4 / sizeof e4[0]; i++)
        ck_assert_msg(dsv4_bf16_to_f32(out[e4[i].d]) == e4[i].v, "fp4 dim %d: %g, expected %g", e4[i].d,
                      (double)dsv4_bf16_to_f32(out[e4[i].d]), (double)e4[i].v);
    ck_assert_int_eq(out[1], 0x8000); /* e2m1 -0 -> bf16 -0 */
    ck_assert_int_eq(out[8], 0x8000);
}
END_TEST

/* fp8 scale rule, second formulation: the smallest integer e >= -13 (2^-13
 * is the first power of two >= 1e-4) with 2^e * 448 >= amax, by exact
 * double products.  Every finite bf16 amax agrees with the kernel's fp32
 * formula, including exact 448*2^k (fl(1/448) rounds up by 0.375 ulp, so
 * fl(448*2^k * fl(1/448)) = 2^k). */
static int fp8_rule2(double amax)
{
    int e = -13;
    while (ldexp(448.0, e) < amax)
        e++;
    return e + 127;
}

START_TEST(fp8_scale_rule_exhaustive)
{
    for (uint32_t h = 0; h < 0x7F80; h++) {
        const float a = dsv4_bf16_to_f32((uint16_t)h);
        ck_assert_msg(dsv4_kv41_fp8_scale_byte(a) == fp8_rule2(a), "amax %a: %d vs %d", (double)a,
                      dsv4_kv41_fp8_scale_byte(a), fp8_rule2(a));
    }
    ck_assert_int_eq(dsv4_kv41_fp8_scale_byte(0.0f), 114);
    ck_assert_int_eq(dsv4_kv41_fp8_scale_byte(448.0f), 127);
    ck_assert_int_eq(dsv4_kv41_fp8_scale_byte(dsv4_bf16_to_f32(0x7F7F)), 247); /* bf16 max ~ 2^128: e = 120 */
}
END_TEST

/* fp4 scale rule, second formulation: the e4m3fn code nearest to amax / 6
 * found by comparing amax with 6 * (each code's value and each midpoint),
 * all exact in double, ties to the even code, clamped to [2^-9, 448]. */
static uint8_t fp4_rule2(double amax, long *ties)
{
    if (amax <= 6.0 * ldexp(1, -9))
        return 0x01;
    if (amax >= 6.0 * 448)
        return 0x7E;
    uint8_t c = 0x01;
    while (c < 0x7E && 6.0 * dsv4_fp8_to_f32((uint8_t)(c + 1), DSV4_FP8_E4M3FN) <= amax)
        c++;
    if (c == 0x7E)
        return c;
    const double lo = dsv4_fp8_to_f32(c, DSV4_FP8_E4M3FN), hi = dsv4_fp8_to_f32((uint8_t)(c + 1), DSV4_FP8_E4M3FN);
    const double mid6 = 3.0 * (lo + hi); /* 6 * midpoint */
    if (amax == mid6)
        ++*ties;
    return amax < mid6 ? c : amax > mid6 ? (uint8_t)(c + 1) : ((c & 1) ? (uint8_t)(c + 1) : c);
}

START_TEST(fp4_scale_rule_exhaustive)
{
    long ties = 0;
    for (uint32_t h = 0; h < 0x7F80; h++) {
        const float a = dsv4_bf16_to_f32((uint16_t)h);
        const uint8_t want = fp4_rule2(a, &ties);
        ck_assert_msg(dsv4_kv41_fp4_scale_byte(a) == want, "amax %a: 0x%02X vs 0x%02X", (double)a,
                      dsv4_kv41_fp4_scale_byte(a), want);
    }
    ck_assert_int_gt(ties, 50); /* the sweep meets exact e4m3 ties (amax = 6 * midpoint) */
    ck_assert_int_eq(dsv4_kv41_fp4_scale_byte(0.0f), 0x01);
    ck_assert_int_eq(dsv4_kv41_fp4_scale_byte(6.0f), 0x38);
    ck_assert_int_eq(dsv4_kv41_fp4_scale_byte(6.375f), 0x38); /* tie -> even */
    ck_assert_int_eq(dsv4_kv41_fp4_scale_byte(6.0f * 1.1875f), 0x3A); /* tie 1.125 | 1.25 -> 1.25 */
    ck_assert_int_eq(dsv4_kv41_fp4_scale_byte(1e30f), 0x7E);
}
END_TEST

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* A random bf16 row with tiles of varied magnitude. */
static void random_row(uint64_t *seed, uint16_t *k)
{
    for (int t = 0; t < 32; t++) {
        const int sc = (int)(lcg(seed) % 60) - 30;
        for (int i = 0; i < 16; i++) {
            const double u = (double)(lcg(seed) % 2000001) / 1e6 - 1.0;
            k[t * 16 + i] = dsv4_bf16_from_f32((float)ldexp(u * 3.0, sc));
        }
    }
}

/* Element codes against a nearest-value search (second formulation): each
 * fp8 code is the e4m3 value nearest to x * 2^-e (ties even, clamp 448);
 * each fp4 code the e2m1 magnitude nearest to |x| / s (ties to the even
 * code, beyond 6 -> 6), sign kept; all distances exact in double.  The
 * bf16 gather then reproduces value * scale exactly. */
START_TEST(codes_are_nearest_and_gather_is_exact)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    uint64_t seed = 41;
    uint8_t p8[FP8P2], p4[FP4P2];
    uint16_t k[DSV4_KV_HEAD_DIM], out[DSV4_KV_HEAD_DIM];
    long bad = 0, first = -1; /* counted, asserted once: ck_assert per element is slow */
    for (int rep = 0; rep < 300; rep++) {
        random_row(&seed, k);
        dsv4_kv41_encode_token(p8, 2, rep & 1, k, DSV4_KV_FMT_V41_FP8);
        dsv4_kv41_encode_token(p4, 2, rep & 1, k, DSV4_KV_FMT_V41_FP4);
        const uint8_t *d8 = p8 + (rep & 1) * 512, *s8 = p8 + 1024 + (rep & 1) * 16;
        const uint8_t *d4 = p4 + (rep & 1) * 256, *s4 = p4 + 512 + (rep & 1) * 32;
        dsv4_kv41_decode_token_bf16(p8, 2, rep & 1, DSV4_KV_FMT_V41_FP8, out);
        for (int d = 0; d < 512; d++) {
            const double x = dsv4_bf16_to_f32(k[d]), q = ldexp(x, 127 - s8[d / 32]);
            const double got = dsv4_fp8_to_f32(d8[d], DSV4_FP8_E4M3FN);
            const double qc = q > 448 ? 448 : q < -448 ? -448 : q;
            int ok = dsv4_bf16_to_f32(out[d]) == ldexp(got, s8[d / 32] - 127); /* exact */
            for (int c = 0; c < 0x7F; c++) { /* no e4m3 value is nearer */
                double v = dsv4_fp8_to_f32((uint8_t)c, DSV4_FP8_E4M3FN) * (qc < 0 ? -1 : 1);
                ok &= fabs(qc - got) <= fabs(qc - v);
            }
            if (!ok && bad++ == 0)
                first = rep * 1024 + d;
        }
        dsv4_kv41_decode_token_bf16(p4, 2, rep & 1, DSV4_KV_FMT_V41_FP4, out);
        for (int d = 0; d < 512; d++) {
            const double x = dsv4_bf16_to_f32(k[d]), s = dsv4_fp8_to_f32(s4[d / 16], DSV4_FP8_E4M3FN);
            const uint8_t code = (d & 1) ? (uint8_t)(d4[d / 2] >> 4) : (uint8_t)(d4[d / 2] & 15);
            int best = 0;
            for (int c = 1; c < 8; c++) { /* |x| vs c * s exactly: |x - m s| compared in double (exact) */
                double dc = fabs(fabs(x) - mag[c] * s), db = fabs(fabs(x) - mag[best] * s);
                if (dc < db || (dc == db && !(c & 1)))
                    best = c;
            }
            const double want = (code & 8 ? -1 : 1) * mag[code & 7] * s;
            const int ok = (code & 7) == best && (code >> 3) == (signbit(x) ? 1 : 0) &&
                           dsv4_bf16_to_f32(out[d]) == want; /* exact */
            if (!ok && bad++ == 0)
                first = rep * 1024 + 512 + d;
        }
    }
    ck_assert_msg(bad == 0, "%ld mismatches; first: row %ld, %s dim %ld", bad, first / 1024,
                  first % 1024 < 512 ? "fp8" : "fp4", first % 512);
}
END_TEST

/* Insert: negative slots of any value are skipped, pages wrap, only the
 * slot's data and scale rows change; gather reads them back by block table. */
START_TEST(insert_gather_layout)
{
    enum { B = 3, NB = 3, T = 6 };
    for (int fi = 0; fi < 2; fi++) {
        const dsv4_kv_format f = fi ? DSV4_KV_FMT_V41_FP4 : DSV4_KV_FMT_V41_FP8;
        const long tb = fi ? 288 : 528, D = fi ? 256 : 512, S = fi ? 32 : 16;
        uint8_t cache[NB * B * 528], page[B * 528];
        uint16_t k[T * 512];
        uint64_t seed = 7;
        for (int t = 0; t < T; t++)
            random_row(&seed, k + t * 512);
        const int64_t slots[T] = {4, -1, 2, -2, 8, -(INT64_C(1) << 40)}; /* pages 1, 0, 2 */
        memset(cache, 0xA5, sizeof cache);
        dsv4_kv_layout L = {B, NB, 0};
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache_fmt(k, T, slots, NULL, cache, &L, f, NULL, &st), 0);
        long changed = 0;
        for (long b = 0; b < NB * B * tb; b++) {
            const long pg = b / (B * tb), off = b % (B * tb);
            const long row = off < B * D ? off / D : (off - B * D) / S;
            const long slot = pg * B + row;
            const int written = slot == 4 || slot == 2 || slot == 8;
            if (!written)
                ck_assert_msg(cache[b] == 0xA5, "byte %ld (slot %ld) changed", b, slot);
            changed += cache[b] != 0xA5;
        }
        ck_assert_int_gt(changed, 3 * 200);
        /* slot 4 = page 1, row 1: the same bytes as encoding the row there */
        memset(page, 0xA5, sizeof page);
        dsv4_kv41_encode_token(page, B, 1, k, f);
        ck_assert(memcmp(page, cache + 1 * B * tb, (size_t)(B * tb)) == 0);
        /* gather S = 3, G = 2 (positions 1, 2), block table {2, 1}, offset 1:
         * out row 1 <- page 2 row 1 (slot 7, never written), row 2 <- slot 8 (token 4) */
        int32_t seq[1] = {3}, gat[1] = {2}, bt[2] = {2, 1};
        uint16_t out[4 * 512], want[512];
        memset(out, 0x7B, sizeof out);
        dsv4_gather_args a = {out, 1, 4, cache, {B, NB, 0}, seq, gat, bt, 2, 1, 0};
        ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache_fmt(&a, DSV4_GATHER_INVALID_ERROR, f, &st), 0);
        dsv4_kv41_decode_token_bf16(cache + 2 * B * tb, B, 2, f, want);
        ck_assert(memcmp(out + 2 * 512, want, sizeof want) == 0);
        ck_assert_int_eq(out[0], 0x7B7B); /* row 0 before offset: untouched */
        ck_assert_int_eq(out[3 * 512], 0x7B7B);
        /* the v41 gather has no skip / zero modes and no FNUZ */
        ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache_fmt(&a, DSV4_GATHER_INVALID_SKIP, f, &st),
                         DSV4_EINPUT);
        dsv4_status_clear(&st);
        bt[0] = 3; /* outside the cache: the Triton gather does not check */
        ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache_fmt(&a, DSV4_GATHER_INVALID_ERROR, f, &st),
                         DSV4_EINPUT);
        dsv4_status_clear(&st);
        /* a slot past the cache is bad input and nothing is written */
        const int64_t bad[2] = {0, NB * B};
        uint8_t before = cache[0];
        ck_assert_int_eq(dsv4_ref_quantize_and_insert_k_cache_fmt(k, 2, bad, NULL, cache, &L, f, NULL, &st),
                         DSV4_EINPUT);
        ck_assert_int_eq(cache[0], before);
        dsv4_status_clear(&st);
    }
}
END_TEST

/* The op's validate: v41 variants accept any negative slot, reject a
 * 584-byte cache and use_fnuz. */
START_TEST(op_validates_v41)
{
    dsv4_params ps;
    const dsv4_op *op =
        dsv4_test_op_with("quantize_and_insert_k_cache", &ps, (const char *const[]){"query_lens", "[2]", NULL});
    const int v8 = dsv4_op_variant(op, "format=v41_fp8"), v4 = dsv4_op_variant(op, "format=v41_fp4");
    ck_assert_int_eq(v8, 1);
    ck_assert_int_eq(v4, 2);
    dsv4_status st = {0};
    dsv4_params_set_int(&ps, "block_size", 2, &st);
    for (int fi = 0; fi < 2; fi++) {
        dsv4_tensors in = {0};
        dsv4_tensor *k, *s, *c;
        int64_t ks[2] = {2, 512}, n = 2, cs[3] = {2, 2, fi ? 288 : 528};
        ck_assert_int_eq(dsv4_tensors_add(&in, "k", DSV4_BF16, 2, ks, &k, &st), 0);
        ck_assert_int_eq(dsv4_tensors_add(&in, "slot_mapping", DSV4_I64, 1, &n, &s, &st), 0);
        ck_assert_int_eq(dsv4_tensors_add(&in, "k_cache", DSV4_U8, 3, cs, &c, &st), 0);
        dsv4_opctx ctx = dsv4_opctx_make(op, &ps, fi ? v4 : v8, 1);
        int64_t *sl = s->data;
        sl[0] = 3, sl[1] = -7;
        ck_assert_msg(op->validate(&ctx, &in, &st) == 0, "%s", st.msg);
        dsv4_params_set_int(&ps, "use_fnuz", 1, &st);
        ck_assert_int_eq(op->validate(&ctx, &in, &st), DSV4_EINPUT);
        dsv4_status_clear(&st);
        dsv4_params_set_int(&ps, "use_fnuz", 0, &st);
        ctx = dsv4_opctx_make(op, &ps, 0, 1); /* the 584-byte format needs a 584-byte cache */
        ck_assert_int_eq(op->validate(&ctx, &in, &st), DSV4_EINPUT);
        ck_assert_ptr_nonnull(strstr(st.msg, "584"));
        dsv4_status_clear(&st);
        dsv4_tensors_free(&in);
    }
}
END_TEST

/* ---- end to end through the CLI ---- */

static char out_buf[1 << 16];

/* A changed cache byte of each v41 golden is named by page, token and field. */
START_TEST(changed_v41_bytes_are_named)
{
    char want[2][200];
    const char *files[2] = {"data/ci/kv41_fp8_insert_swa_wrap.h5", "data/ci/kv41_fp4_insert_c4_wrap.h5"};
    for (int fi = 0; fi < 2; fi++) {
        dsv4_golden g;
        dsv4_test_golden_read(files[fi], &g);
        const dsv4_tensor *sm = dsv4_tensors_get(&g.inputs, "slot_mapping");
        dsv4_tensor *kc = dsv4_tensors_find(&g.outputs, "k_cache");
        ck_assert(sm && kc && kc->shape[2] == (fi ? 288 : 528));
        const long slot = dsv4_test_first_slot(sm);
        const long B = kc->shape[1], page = slot / B, tok = slot % B, tb = kc->shape[2];
        const long D = fi ? 256 : 512, S = fi ? 32 : 16, base = page * B * tb;
        uint8_t *b = kc->data;
        b[base + tok * D + 130] ^= 0x01;
        b[base + B * D + tok * S + 5] ^= 0x01;
        if (fi) {
            snprintf(want[0], sizeof want[0], "page %ld, token %ld (slot %ld), value byte 130 (dims 260 low nibble, "
                     "261 high, tile 16)", page, tok, slot);
            snprintf(want[1], sizeof want[1], "page %ld, token %ld (slot %ld), e4m3 scale byte 5 (tile 5: dims 80..95)",
                     page, tok, slot);
        } else {
            snprintf(want[0], sizeof want[0], "page %ld, token %ld (slot %ld), value byte 130 (dim 130, tile 4)", page,
                     tok, slot);
            snprintf(want[1], sizeof want[1],
                     "page %ld, token %ld (slot %ld), ue8m0 scale byte 5 (tile 5: dims 160..191)", page, tok, slot);
        }
        int rc = dsv4_test_check_changed_tmp(&g, out_buf, sizeof out_buf);
        ck_assert_msg(rc == 1, "rc %d:\n%s", rc, out_buf);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(strstr(out_buf, want[i]) != NULL, "'%s' not in:\n%s", want[i], out_buf);
    }
}
END_TEST

/* The v41 ci goldens reach the paths of docs/semantics/kvcache.md A2.4: fp8 floor byte 114, the
 * max code, negative skipped slots other than -1; fp4 both scale clamps
 * (0x01, 0x7E), saturated codes 7, -0 codes. */
START_TEST(ci_goldens_cover_v41_paths)
{
    long floor8 = 0, max8 = 0, neg = 0, lo4 = 0, hi4 = 0, sat4 = 0, nz4 = 0;
    const char *files[2] = {"data/ci/kv41_fp8_insert_swa_wrap.h5", "data/ci/kv41_fp4_insert_c4_wrap.h5"};
    for (int fi = 0; fi < 2; fi++) {
        dsv4_golden g;
        dsv4_test_golden_read(files[fi], &g);
        const dsv4_tensor *sm = dsv4_tensors_get(&g.inputs, "slot_mapping"), *kc = dsv4_tensors_get(&g.outputs, "k_cache");
        const long B = kc->shape[1], tb = kc->shape[2], D = fi ? 256 : 512, S = fi ? 32 : 16;
        for (int64_t t = 0; t < sm->shape[0]; t++) {
            long s = sm->dtype == DSV4_I32 ? ((const int32_t *)sm->data)[t] : (long)((const int64_t *)sm->data)[t];
            if (s < 0) {
                neg += s < -1;
                continue;
            }
            const uint8_t *page = (const uint8_t *)kc->data + (s / B) * B * tb;
            for (int j = 0; j < S; j++) {
                const uint8_t sb = page[B * D + (s % B) * S + j];
                floor8 += !fi && sb == 114;
                lo4 += fi && sb == 0x01;
                hi4 += fi && sb == 0x7E;
            }
            for (int j = 0; j < D; j++) {
                const uint8_t c = page[(s % B) * D + j];
                max8 += !fi && (c & 0x7F) == 0x7E;
                sat4 += fi && ((c & 7) == 7 || (c >> 4 & 7) == 7);
                nz4 += fi && ((c & 15) == 8 || (c >> 4) == 8);
            }
        }
        dsv4_golden_free(&g);
    }
    ck_assert_msg(floor8 && max8 && neg && lo4 && hi4 && sat4 && nz4,
                  "floor %ld max %ld neg %ld clamp-lo %ld clamp-hi %ld sat %ld -0 %ld", floor8, max8, neg, lo4, hi4,
                  sat4, nz4);
}
END_TEST

DSV4_TEST_MAIN("kvcache41", "core", 60, NULL, NULL, fp8_hand_tile_bytes, fp4_hand_tile_bytes, hand_tiles_decode,
               fp8_scale_rule_exhaustive, fp4_scale_rule_exhaustive, codes_are_nearest_and_gather_is_exact,
               insert_gather_layout, op_validates_v41, changed_v41_bytes_are_named, ci_goldens_cover_v41_paths)
