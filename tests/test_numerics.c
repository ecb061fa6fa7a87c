/* test_numerics.c - unit tests for the dtype codecs in ref/numerics.c.
 *
 * The expected values come from the format definitions
 * (docs/semantics/numerics.md A1, docs/semantics/quant.md Q1.2-Q1.4, Q10),
 * never from the code under test: hand-derived tables for every boundary,
 * plus exhaustive and pseudo-random cross-checks against second formulations
 * written here (nearest value in a sorted table of all representable values;
 * rint() in double for bf16/fp16; the bit method of Q1.2 for e2m1; torch's
 * exponent rounding for e8m0).  Set DSV4_QUICK to shrink the random part. */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/numerics.h"
#include "testutil.h"

/* The e2m1 bit method reference relies on plain fp32 adds. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "test_numerics.c needs FLT_EVAL_METHOD == 0"
#endif

/* ---- local bit casts (own copies: the library's are under test too) ---- */
static float fb(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static uint32_t bf(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* Same value and same sign of zero (or both NaN). */
static int same_value(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* ---- format definitions ---------------------------------------------- */

/* Magnitude of code c (sign bit removed) of a binary format with `mbits`
 * mantissa bits, exponent bias `bias` and subnormals: field 0 is
 * m * 2^(1-bias-mbits), else (2^mbits + m) * 2^(field-bias-mbits). */
static double def_value(unsigned c, int mbits, int bias)
{
    unsigned field = c >> mbits, m = c & ((1u << mbits) - 1u);
    if (field == 0)
        return ldexp((double)m, 1 - bias - mbits);
    return ldexp((double)((1u << mbits) | m), (int)field - bias - mbits);
}

/* Sorted magnitude tables, index = magnitude code.  Entry n (one past the
 * largest finite code) is the value the format would have next if its
 * exponent range went on (IEEE overflow rule): e4m3fn 480 (mantissa 7, odd),
 * e4m3fnuz 256 (next binade, mantissa 0, even).  For e2m1 the entry past
 * code 7 is 6 itself, so everything >= 6 saturates to code 7. */
enum { FN_N = 0x7F, FNUZ_N = 0x80, E2M1_N = 7 };
static double tab_fn[FN_N + 1], tab_fnuz[FNUZ_N + 1], tab_e2m1[E2M1_N + 1];

static void build_tables(void)
{
    for (unsigned c = 0; c <= FN_N; c++)
        tab_fn[c] = def_value(c, 3, 7); /* c = 0x7F gives 1.875*2^8 = 480 */
    for (unsigned c = 0; c <= FNUZ_N; c++)
        tab_fnuz[c] = def_value(c, 3, 8); /* c = 0x80 gives 2^8 = 256 */
    /* e2m1 magnitudes from docs/semantics/quant.md Q1.2, written out by hand. */
    static const double e2m1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    memcpy(tab_e2m1, e2m1, sizeof e2m1);
}

/* Nearest entry of v[0..n] to a >= 0, ties to the even index (= even
 * mantissa).  Returns n when a rounds to (or beyond) v[n]. */
static unsigned nearest_code(const double *v, unsigned n, double a)
{
    if (a >= v[n])
        return n;
    unsigned lo = 0, hi = n; /* v[lo] <= a < v[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (v[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    double mid = 0.5 * (v[lo] + v[hi]); /* exact: few significant bits */
    if (a < mid)
        return lo;
    if (a > mid)
        return hi;
    return (lo & 1u) ? hi : lo;
}

/* ---- reference encoders (second formulations) ------------------------- */

static uint8_t ref_fp8(float x, int fnuz, int sat)
{
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    const unsigned n = fnuz ? FNUZ_N : FN_N;
    if (isnan(x))
        return fnuz ? 0x80 : (uint8_t)(sign | 0x7F); /* numerics.h: NaN -> NaN code */
    unsigned c = isinf(x) ? n : nearest_code(fnuz ? tab_fnuz : tab_fn, n, fabs((double)x));
    if (c == n) { /* overflow */
        if (!sat)
            return fnuz ? 0x80 : (uint8_t)(sign | 0x7F);
        c = n - 1;
    }
    if (fnuz && c == 0)
        return 0x00; /* fnuz has no -0 */
    return (uint8_t)(sign | c);
}

/* e2m1 by nearest value, sign bit = sign of x (NaN excluded by callers). */
static uint8_t ref_e2m1_nearest(float x)
{
    unsigned c = nearest_code(tab_e2m1, E2M1_N, fabs((double)x));
    return (uint8_t)((signbit(x) ? 8u : 0u) | c);
}

/* The bit method, step by step (docs/semantics/quant.md Q1.2), NaN included. */
static uint8_t ref_e2m1_bits(float x)
{
    uint32_t s = bf(x) >> 31;
    float a = fb(bf(x) & 0x7FFFFFFFu);
    uint32_t code;
    if (a >= 6.0f)
        code = 7;
    else if (a < 1.0f)
        code = bf(a + 0x1p22f) - bf(0x1p22f); /* fp32 adder rounds at 0.5 */
    else {
        uint32_t ab = bf(a);
        code = ((ab + (0u - (126u << 23)) + 0x1FFFFFu + ((ab >> 22) & 1u)) >> 22) & 0xFFu;
    }
    return (uint8_t)((code | (s << 3)) & 0xFu);
}

/* Threshold method: RNE-saturate except -0.0 -> 0x0 and NaN -> 0x0
 * (docs/semantics/quant.md Q1.2: "x < 0" decides the sign). */
static uint8_t ref_e2m1_threshold(float x)
{
    if (isnan(x))
        return 0;
    unsigned c = nearest_code(tab_e2m1, E2M1_N, fabs((double)x));
    return (uint8_t)(c | (x < 0.0f ? 8u : 0u));
}

/* A 16-bit binary format by definition: RNE to mbits + 1 significant bits,
 * exponent >= 1 - bias, a rounded value of 2^(bias + 1) or more is Inf; the
 * code is built from the rounded value. */
static uint16_t ref_binary16(float x, int mbits, int bias)
{
    const int emin = 1 - bias;
    const unsigned inf = (unsigned)(2 * bias + 1) << mbits;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isinf(x))
        return (uint16_t)(sign | inf);
    if (a == 0.0)
        return sign;
    int e = ilogb(a);
    double q = ldexp(1.0, (e < emin ? emin : e) - mbits);
    double r = rint(a / q) * q; /* default mode: ties to even */
    if (r >= ldexp(1.0, bias + 1))
        return (uint16_t)(sign | inf);
    if (r < ldexp(1.0, emin)) /* subnormal: m * 2^(emin - mbits) */
        return (uint16_t)(sign | (unsigned)(r * ldexp(1.0, mbits - emin)));
    int er = ilogb(r);
    unsigned m = (unsigned)(r * ldexp(1.0, mbits - er)) - (1u << mbits);
    return (uint16_t)(sign | (unsigned)(er + bias) << mbits | m);
}

/* bf16: 8 significant bits with the fp32 exponent range. */
static uint16_t ref_bf16(float x) { return ref_binary16(x, 7, 127); }

/* binary16: 11 significant bits, exponent >= -14. */
static uint16_t ref_f16(float x) { return ref_binary16(x, 10, 15); }

/* torch's e8m0 cast (docs/semantics/quant.md Q10, checked against torch
 * 2.11): sign ignored; NaN/Inf -> 0xFF; <= 2^-127 -> 0x00; fp32
 * subnormals strictly above 2^-127 -> 0x01 (torch rounds the exponent field
 * up whenever the dropped bits exceed half, and a subnormal has exponent
 * field 0); normals: 2^e, one up when the significand is >= 1.5. */
static uint8_t ref_e8m0(float x)
{
    if (isnan(x) || isinf(x))
        return 0xFF;
    double a = fabs((double)x);
    if (a <= 0x1p-127)
        return 0x00;
    if (a < 0x1p-126)
        return 0x01;
    int e = -126;
    while (e < 127 && ldexp(1.0, e + 1) <= a) /* largest 2^e <= a */
        e++;
    int code = e + 127 + (a >= 1.5 * ldexp(1.0, e));
    return code >= 255 ? 0xFF : (uint8_t)code;
}

/* ---- pseudo-random fp32 patterns ------------------------------------- */

static uint64_t rng_state;

static uint64_t xorshift64(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Three kinds in turn: raw bits (NaN/Inf/subnormals included); exponent
 * within 2^-20..2^20, where the small formats live; and the latter with the
 * low mantissa bits cleared so that exact ties are frequent. */
static uint32_t random_pattern(uint64_t i)
{
    uint64_t r = xorshift64();
    uint32_t b = (uint32_t)r;
    if (i % 3 == 0)
        return b;
    uint32_t ex = 107u + (uint32_t)((r >> 32) % 41u); /* 2^-20 .. 2^20 */
    b = (b & 0x807FFFFFu) | (ex << 23);
    if (i % 3 == 2) {
        unsigned keep = (unsigned)((r >> 40) % 13u); /* keep 0..12 top mantissa bits */
        b &= ~((1u << (23 - keep)) - 1u);
    }
    return b;
}

static uint64_t random_count(void)
{
    return getenv("DSV4_QUICK") ? 300000u : 4000000u;
}

/* ---- round trips ------------------------------------------------------ */

START_TEST(test_fp8_all_codes)
{
    for (int fnuz = 0; fnuz <= 1; fnuz++) {
        dsv4_fp8_kind k = fnuz ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
        for (unsigned b = 0; b < 256; b++) {
            float v = dsv4_fp8_to_f32((uint8_t)b, k);
            int is_nan_code = fnuz ? b == 0x80 : (b & 0x7F) == 0x7F;
            if (is_nan_code) {
                ck_assert_msg(isnan(v), "kind %d code 0x%02X should decode to NaN", fnuz, b);
                continue;
            }
            /* Value from the definition: bias 7 (fn) or 8 (fnuz), 3 mantissa bits. */
            double want = def_value(b & 0x7F, 3, fnuz ? 8 : 7);
            if (b & 0x80)
                want = -want;
            ck_assert_msg(same_value(v, want), "kind %d code 0x%02X decodes to %a, want %a", fnuz,
                          b, (double)v, want);
            for (int sat = 0; sat <= 1; sat++)
                ck_assert_msg(dsv4_fp8_from_f32(v, k, sat) == b,
                              "kind %d sat %d code 0x%02X does not re-encode to itself", fnuz, sat,
                              b);
        }
        /* NaN in: fn 0x7F with the sign of x, fnuz 0x80 (numerics.h). */
        for (int sat = 0; sat <= 1; sat++) {
            ck_assert_uint_eq(dsv4_fp8_from_f32(fb(0x7FC00000u), k, sat), fnuz ? 0x80 : 0x7F);
            ck_assert_uint_eq(dsv4_fp8_from_f32(fb(0xFFC00000u), k, sat), fnuz ? 0x80 : 0xFF);
            ck_assert_uint_eq(dsv4_fp8_from_f32(fb(0x7F800001u), k, sat), fnuz ? 0x80 : 0x7F);
        }
    }
    /* docs/semantics/numerics.md A1: the same bit pattern means exactly half in fnuz. */
    for (unsigned b = 0; b < 256; b++)
        if ((b & 0x7F) != 0x7F && b != 0x80)
            ck_assert(dsv4_fp8_to_f32((uint8_t)b, DSV4_FP8_E4M3FNUZ) ==
                      0.5f * dsv4_fp8_to_f32((uint8_t)b, DSV4_FP8_E4M3FN));
    ck_assert(dsv4_fp8_max(DSV4_FP8_E4M3FN) == 448.0f);
    ck_assert(dsv4_fp8_max(DSV4_FP8_E4M3FNUZ) == 240.0f);
}
END_TEST

START_TEST(test_e8m0_all_codes)
{
    for (unsigned b = 0; b < 255; b++) {
        double want = ldexp(1.0, (int)b - 127); /* 2^(b-127); b = 0 is 2^-127 */
        ck_assert_msg(dsv4_e8m0_to_f64((uint8_t)b) == want, "e8m0 0x%02X f64", b);
        ck_assert_msg((double)dsv4_e8m0_to_f32((uint8_t)b) == want, "e8m0 0x%02X f32", b);
        ck_assert_msg(dsv4_e8m0_from_f32_torch(dsv4_e8m0_to_f32((uint8_t)b)) == b,
                      "e8m0 0x%02X does not re-encode to itself", b);
    }
    ck_assert_uint_eq(bf(dsv4_e8m0_to_f32(0x00)), 0x00400000u); /* docs/semantics/quant.md Q1.3 */
    ck_assert(isnan(dsv4_e8m0_to_f32(0xFF)));
    ck_assert(isnan(dsv4_e8m0_to_f64(0xFF)));
    ck_assert_uint_eq(dsv4_e8m0_from_f32_torch(dsv4_e8m0_to_f32(0xFF)), 0xFF);
}
END_TEST

START_TEST(test_e2m1_all_codes)
{
    /* docs/semantics/quant.md Q1.2: bit 3 = sign, magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}. */
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (unsigned c = 0; c < 16; c++) {
        float want = (c & 8u) ? -mag[c & 7u] : mag[c & 7u];
        float v = dsv4_e2m1_to_f32((uint8_t)c);
        ck_assert_msg(same_value(v, want), "e2m1 code %u decodes to %a", c, (double)v);
        ck_assert_msg(dsv4_e2m1_from_f32(v) == c, "e2m1 code %u bit method round trip", c);
        /* threshold method: -0 (code 8) comes back as +0 (code 0) */
        ck_assert_msg(dsv4_e2m1_from_f32_threshold(v) == (c == 8 ? 0u : c),
                      "e2m1 code %u threshold round trip", c);
    }
}
END_TEST

START_TEST(test_bf16_f16_all_patterns)
{
    for (uint32_t h = 0; h < 65536; h++) {
        /* bf16: the top half of an fp32, by definition. */
        float v = dsv4_bf16_to_f32((uint16_t)h);
        ck_assert_msg(bf(v) == h << 16, "bf16 0x%04X decode", h);
        uint16_t back = dsv4_bf16_from_f32(v);
        if ((h & 0x7FFFu) > 0x7F80u) { /* NaN: stays NaN, quiet, sign kept */
            ck_assert_msg((back & 0x7FFFu) > 0x7F80u && (back & 0x0040u) && (back & 0x8000u) == (h & 0x8000u),
                          "bf16 NaN 0x%04X -> 0x%04X", h, back);
        } else {
            ck_assert_msg(back == h, "bf16 0x%04X -> 0x%04X", h, back);
            if ((h & 0x7FFFu) < 0x7F80u) {
                double want = def_value(h & 0x7FFFu, 7, 127); /* bias 127, 7 bits */
                ck_assert(same_value(v, (h & 0x8000u) ? -want : want));
            }
        }
        ck_assert(same_value(dsv4_round_bf16(v), v));

        /* binary16: bias 15, 10 mantissa bits, field 31 = Inf/NaN. */
        float g = dsv4_f16_to_f32((uint16_t)h);
        unsigned mag = h & 0x7FFFu;
        if (mag > 0x7C00u) {
            ck_assert_msg(isnan(g), "f16 0x%04X should be NaN", h);
            ck_assert_msg((dsv4_f16_from_f32(g) & 0x7FFFu) > 0x7C00u, "f16 NaN 0x%04X", h);
            continue;
        }
        double want = mag == 0x7C00u ? INFINITY : def_value(mag, 10, 15);
        ck_assert_msg(same_value(g, (h & 0x8000u) ? -want : want), "f16 0x%04X decodes to %a", h,
                      (double)g);
        ck_assert_msg(dsv4_f16_from_f32(g) == h, "f16 0x%04X round trip", h);
    }
}
END_TEST

/* ---- hand-derived tables ---------------------------------------------- */

typedef struct {
    uint32_t in;   /* fp32 bits */
    uint8_t nosat; /* saturate == 0 */
    uint8_t sat;   /* saturate != 0 */
} fp8_case;

/* Each row encoded non-saturating and saturating in one fp8 kind. */
static void check_fp8_table(const fp8_case *t, size_t n, dsv4_fp8_kind kind, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t a = dsv4_fp8_from_f32(fb(t[i].in), kind, 0);
        uint8_t b = dsv4_fp8_from_f32(fb(t[i].in), kind, 1);
        ck_assert_msg(a == t[i].nosat, "%s nosat 0x%08" PRIX32 " -> 0x%02X, want 0x%02X", name, t[i].in, a,
                      t[i].nosat);
        ck_assert_msg(b == t[i].sat, "%s sat 0x%08" PRIX32 " -> 0x%02X, want 0x%02X", name, t[i].in, b, t[i].sat);
    }
}

START_TEST(test_fp8_table_e4m3fn)
{
    /* e4m3fn: bias 7, subnormal quantum 2^-9, normals 1.m * 2^(f-7), max
     * 0x7E = 1.75*2^8 = 448, 0x7F = NaN.  Non-saturating overflow -> NaN
     * with the sign (torch: 500 -> 0x7F); saturating -> +-448. */
    static const fp8_case t[] = {
        {0x00000000u, 0x00, 0x00}, /* +0 */
        {0x80000000u, 0x80, 0x80}, /* -0 exists in fn */
        {0x00000001u, 0x00, 0x00}, /* fp32 denormal: far below 2^-10 */
        {0x80000001u, 0x80, 0x80}, /* ... negative: -0 */
        {0x3B000000u, 0x01, 0x01}, /* 2^-9: smallest subnormal m=1 */
        {0x3A800000u, 0x00, 0x00}, /* 2^-10: half of it, tie 0 (even) vs 1 -> 0 */
        {0x3A800001u, 0x01, 0x01}, /* just above the half -> 1 */
        {0x3A7FFFFFu, 0x00, 0x00}, /* just below the half -> 0 */
        {0xBA800001u, 0x81, 0x81}, /* negative, just above the half */
        {0x3B400000u, 0x02, 0x02}, /* 1.5*2^-9: tie 1 vs 2 -> 2 (even) */
        {0x3BA00000u, 0x02, 0x02}, /* 2.5*2^-9: tie 2 vs 3 -> 2 */
        {0x3C600000u, 0x07, 0x07}, /* 7*2^-9 = 0.875*2^-6: largest subnormal */
        {0x3C700000u, 0x08, 0x08}, /* 7.5*2^-9: tie 7 vs 8 (=2^-6) -> 8, crosses into normals */
        {0x3C800000u, 0x08, 0x08}, /* 2^-6: smallest normal, field 1 */
        {0x3C880000u, 0x08, 0x08}, /* 1.0625*2^-6: tie 1.0 vs 1.125 -> 1.0 */
        {0x3C900000u, 0x09, 0x09}, /* 1.125*2^-6 */
        {0x3F800000u, 0x38, 0x38}, /* 1.0: field 7 */
        {0x3F880000u, 0x38, 0x38}, /* 1.0625: tie 0x38 vs 0x39 -> 0x38 */
        {0x3F980000u, 0x3A, 0x3A}, /* 1.1875: tie 0x39 vs 0x3A -> 0x3A */
        {0x3F880001u, 0x39, 0x39}, /* just above 1.0625 */
        {0xBF800000u, 0xB8, 0xB8}, /* -1.0 */
        {0x43700000u, 0x77, 0x77}, /* 240 = 1.875*2^7: field 14, m 7 */
        {0x43E00000u, 0x7E, 0x7E}, /* 448 = 1.75*2^8: max */
        {0xC3E00000u, 0xFE, 0xFE}, /* -448 */
        {0x43E08000u, 0x7E, 0x7E}, /* 449 -> 448 (docs/semantics/quant.md Q10) */
        {0x43E80000u, 0x7E, 0x7E}, /* 464: tie 448 (m 6, even) vs 480 (m 7) -> 448 */
        {0xC3E80000u, 0xFE, 0xFE}, /* -464 */
        {0x43E80001u, 0x7F, 0x7E}, /* just above 464: rounds to 480, out of range */
        {0x43E88000u, 0x7F, 0x7E}, /* 465 */
        {0x43F00000u, 0x7F, 0x7E}, /* 480 */
        {0x43FA0000u, 0x7F, 0x7E}, /* 500 -> NaN 0x7F (docs/semantics/quant.md Q10) */
        {0xC3FA0000u, 0xFF, 0xFE}, /* -500 -> NaN with sign / -448 */
        {0x7F7FFFFFu, 0x7F, 0x7E}, /* FLT_MAX */
        {0x7F800000u, 0x7F, 0x7E}, /* +Inf: no Inf in fn */
        {0xFF800000u, 0xFF, 0xFE}, /* -Inf */
        {0x7FC00000u, 0x7F, 0x7F}, /* NaN -> 0x7F */
        {0xFFC00000u, 0xFF, 0xFF}, /* -NaN -> 0xFF */
        {0x7F800001u, 0x7F, 0x7F}, /* signalling NaN */
    };
    check_fp8_table(t, sizeof t / sizeof t[0], DSV4_FP8_E4M3FN, "fn");
}
END_TEST

START_TEST(test_fp8_table_e4m3fnuz)
{
    /* e4m3fnuz: bias 8, subnormal quantum 2^-10, max 0x7F = 1.875*2^7 = 240,
     * only NaN 0x80, no -0.  Non-saturating overflow -> 0x80 regardless of
     * sign; saturating -> +-240 (0x7F / 0xFF). */
    static const fp8_case t[] = {
        {0x00000000u, 0x00, 0x00}, /* +0 */
        {0x80000000u, 0x00, 0x00}, /* -0 -> +0: no -0 in fnuz */
        {0x80000001u, 0x00, 0x00}, /* tiny negative rounds to 0 -> +0 */
        {0x3A800000u, 0x01, 0x01}, /* 2^-10: smallest subnormal */
        {0xBA800000u, 0x81, 0x81}, /* -2^-10 */
        {0x3A000000u, 0x00, 0x00}, /* 2^-11: tie 0 vs 1 -> 0 */
        {0xBA000000u, 0x00, 0x00}, /* -2^-11: tie -> 0, and +0 not 0x80 (NaN!) */
        {0x3A000001u, 0x01, 0x01}, /* just above the half */
        {0xBA000001u, 0x81, 0x81},
        {0x3AC00000u, 0x02, 0x02}, /* 1.5*2^-10: tie 1 vs 2 -> 2 */
        {0x3BE00000u, 0x07, 0x07}, /* 7*2^-10: largest subnormal */
        {0x3BF00000u, 0x08, 0x08}, /* 7.5*2^-10: tie 7 vs 8 (=2^-7) -> 8 */
        {0x3C000000u, 0x08, 0x08}, /* 2^-7: smallest normal */
        {0x3F800000u, 0x40, 0x40}, /* 1.0: field 8 */
        {0x3F880000u, 0x40, 0x40}, /* 1.0625: tie -> 0x40 */
        {0x43700000u, 0x7F, 0x7F}, /* 240: max */
        {0xC3700000u, 0xFF, 0xFF}, /* -240 */
        {0x4377FFFFu, 0x7F, 0x7F}, /* just below 248 */
        {0x43780000u, 0x80, 0x7F}, /* 248: tie 240 (m 7, odd) vs 256 (even) -> 256: overflow */
        {0xC3780000u, 0x80, 0xFF}, /* -248 */
        {0x43790000u, 0x80, 0x7F}, /* 249 */
        {0x43800000u, 0x80, 0x7F}, /* 256 */
        {0x43E00000u, 0x80, 0x7F}, /* 448 */
        {0x7F800000u, 0x80, 0x7F}, /* +Inf */
        {0xFF800000u, 0x80, 0xFF}, /* -Inf */
        {0x7FC00000u, 0x80, 0x80}, /* NaN */
        {0xFFC00000u, 0x80, 0x80}, /* -NaN: still 0x80 */
    };
    check_fp8_table(t, sizeof t / sizeof t[0], DSV4_FP8_E4M3FNUZ, "fnuz");
}
END_TEST

typedef struct {
    uint32_t in;
    uint16_t out;
} b16_case;

START_TEST(test_bf16_table)
{
    /* bf16 = fp32's top 16 bits, RNE on the low 16 (docs/semantics/numerics.md A1). */
    static const b16_case t[] = {
        {0x3F800000u, 0x3F80}, /* 1.0 */
        {0x3F807FFFu, 0x3F80}, /* below half */
        {0x3F808000u, 0x3F80}, /* tie, 0x3F80 even -> stays */
        {0x3F808001u, 0x3F81}, /* above half */
        {0x3F818000u, 0x3F82}, /* tie, 0x3F81 odd -> up */
        {0xBF818000u, 0xBF82}, /* negative tie */
        {0x3FFF8000u, 0x4000}, /* tie with carry into the exponent: 2.0 */
        {0x7F7F0000u, 0x7F7F}, /* bf16 max */
        {0x7F7F7FFFu, 0x7F7F}, /* below half of the last step */
        {0x7F7F8000u, 0x7F80}, /* tie, 0x7F7F odd -> up -> Inf */
        {0x7F7FFFFFu, 0x7F80}, /* FLT_MAX -> Inf */
        {0xFF7FFFFFu, 0xFF80}, /* -FLT_MAX -> -Inf */
        {0x7F800000u, 0x7F80}, /* +Inf */
        {0xFF800000u, 0xFF80}, /* -Inf */
        {0x00000000u, 0x0000},
        {0x80000000u, 0x8000}, /* -0 kept */
        {0x00008000u, 0x0000}, /* fp32 denormal tie -> even 0 */
        {0x00018000u, 0x0002}, /* tie 1 vs 2 -> 2 */
        {0x00008001u, 0x0001},
        {0x007F8000u, 0x0080}, /* tie largest bf16 subnormal vs smallest normal -> normal */
        {0x7FC00000u, 0x7FC0}, /* quiet NaN */
        {0xFFC00000u, 0xFFC0}, /* -NaN, sign kept */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint16_t r = dsv4_bf16_from_f32(fb(t[i].in));
        ck_assert_msg(r == t[i].out, "bf16 0x%08" PRIX32 " -> 0x%04X, want 0x%04X", t[i].in, r,
                      t[i].out);
        ck_assert_uint_eq(bf(dsv4_round_bf16(fb(t[i].in))), (uint32_t)t[i].out << 16);
    }
    /* Signalling NaNs whose payload sits in the low 16 bits: plain
     * truncation would give Inf (0x7F80); must be a quiet NaN, sign kept. */
    static const uint32_t snan[] = {0x7F800001u, 0xFF800001u, 0x7F80FFFFu, 0x7FBFFFFFu};
    for (size_t i = 0; i < sizeof snan / sizeof snan[0]; i++) {
        uint16_t r = dsv4_bf16_from_f32(fb(snan[i]));
        ck_assert_msg((r & 0x7FC0u) == 0x7FC0u && (r >> 15) == (snan[i] >> 31),
                      "bf16 NaN 0x%08" PRIX32 " -> 0x%04X", snan[i], r);
    }
}
END_TEST

START_TEST(test_f16_table)
{
    /* binary16: bias 15, subnormal quantum 2^-24, max 65504 = 0x7BFF. */
    static const b16_case t[] = {
        {0x3F800000u, 0x3C00}, /* 1.0 */
        {0x3F801000u, 0x3C00}, /* 1 + 2^-11: tie -> even 0x3C00 */
        {0x3F803000u, 0x3C02}, /* 1 + 3*2^-11: tie 0x3C01 vs 0x3C02 -> 0x3C02 */
        {0x3F801001u, 0x3C01}, /* just above the half */
        {0x477FE000u, 0x7BFF}, /* 65504: max */
        {0x477FEFFDu, 0x7BFF}, /* 65519.99f (= 65519.98828125) */
        {0x477FEFFFu, 0x7BFF}, /* largest fp32 below 65520 */
        {0x477FF000u, 0x7C00}, /* 65520: tie 65504 (odd) vs 65536 -> Inf */
        {0xC77FF000u, 0xFC00}, /* -65520 -> -Inf */
        {0x49742400u, 0x7C00}, /* 1e6 -> Inf */
        {0x7F800000u, 0x7C00}, /* +Inf */
        {0xFF800000u, 0xFC00}, /* -Inf */
        {0x33800000u, 0x0001}, /* 2^-24: smallest subnormal */
        {0x33000000u, 0x0000}, /* 2^-25: tie 0 vs 1 -> 0 */
        {0x33000001u, 0x0001}, /* just above the half */
        {0xB3000001u, 0x8001},
        {0x33C00000u, 0x0002}, /* 1.5*2^-24: tie 1 vs 2 -> 2 */
        {0x387FC000u, 0x03FF}, /* 1023*2^-24: largest subnormal */
        {0x387FE000u, 0x0400}, /* 1023.5*2^-24: tie 0x3FF vs 0x400 -> 0x400 */
        {0x38800000u, 0x0400}, /* 2^-14: smallest normal */
        {0x32800000u, 0x0000}, /* 2^-26 -> 0 */
        {0xB2800000u, 0x8000}, /* -2^-26 -> -0 */
        {0x80000000u, 0x8000}, /* -0 */
        {0x00000001u, 0x0000}, /* fp32 denormal */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint16_t r = dsv4_f16_from_f32(fb(t[i].in));
        ck_assert_msg(r == t[i].out, "f16 0x%08" PRIX32 " -> 0x%04X, want 0x%04X", t[i].in, r,
                      t[i].out);
    }
    static const uint32_t nan_in[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u};
    for (size_t i = 0; i < sizeof nan_in / sizeof nan_in[0]; i++)
        ck_assert_msg((dsv4_f16_from_f32(fb(nan_in[i])) & 0x7FFFu) > 0x7C00u, "f16 NaN 0x%08" PRIX32,
                      nan_in[i]);
}
END_TEST

START_TEST(test_e2m1_table)
{
    /* docs/semantics/quant.md Q1.2, Q1.4 item 4: RNE, ties to the even code. */
    static const struct {
        uint32_t in;
        uint8_t bits, thr; /* bit method, threshold method */
    } t[] = {
        {0x00000000u, 0x0, 0x0}, /* +0 */
        {0x80000000u, 0x8, 0x0}, /* -0: bit method keeps the sign, threshold does not */
        {0x3E800000u, 0x0, 0x0}, /* 0.25: tie 0 (code 0) vs 0.5 (code 1) -> 0 */
        {0x3E800001u, 0x1, 0x1}, /* just above -> 0.5 */
        {0xBE800000u, 0x8, 0x8}, /* -0.25 -> -0: x < 0 so both give 0x8 */
        {0x3F400000u, 0x2, 0x2}, /* 0.75: tie 0.5 (1) vs 1.0 (2) -> 1.0 */
        {0x3F3FFFFFu, 0x1, 0x1}, /* just below 0.75 */
        {0x3FA00000u, 0x2, 0x2}, /* 1.25: tie 1.0 (2) vs 1.5 (3) -> 1.0 */
        {0x3FA00001u, 0x3, 0x3},
        {0x3FE00000u, 0x4, 0x4}, /* 1.75: tie 1.5 (3) vs 2.0 (4) -> 2.0 */
        {0xBFE00000u, 0xC, 0xC}, /* -1.75 */
        {0x40200000u, 0x4, 0x4}, /* 2.5: tie 2 (4) vs 3 (5) -> 2 */
        {0x40600000u, 0x6, 0x6}, /* 3.5: tie 3 (5) vs 4 (6) -> 4 */
        {0x409FFFFFu, 0x6, 0x6}, /* just below 5 -> 4 */
        {0x40A00000u, 0x6, 0x6}, /* 5: tie 4 (6) vs 6 (7) -> 4 */
        {0x40A00001u, 0x7, 0x7}, /* just above 5 -> 6 */
        {0xC0A00000u, 0xE, 0xE}, /* -5 -> -4 */
        {0x40C00000u, 0x7, 0x7}, /* 6 */
        {0x40E00000u, 0x7, 0x7}, /* 7 > 6 -> 6 */
        {0x7F7FFFFFu, 0x7, 0x7}, /* FLT_MAX -> 6 */
        {0x7F800000u, 0x7, 0x7}, /* +Inf -> 6 */
        {0xFF800000u, 0xF, 0xF}, /* -Inf -> -6 */
        {0x80000001u, 0x8, 0x8}, /* tiny negative -> -0 */
        {0x7FC00000u, 0x3, 0x0}, /* NaN: bit method payload result (Q1.2) / 0 */
        {0xFFC00000u, 0xB, 0x0}, /* -NaN */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t a = dsv4_e2m1_from_f32(fb(t[i].in));
        uint8_t b = dsv4_e2m1_from_f32_threshold(fb(t[i].in));
        ck_assert_msg(a == t[i].bits, "e2m1 0x%08" PRIX32 " -> 0x%X, want 0x%X", t[i].in, a,
                      t[i].bits);
        ck_assert_msg(b == t[i].thr, "e2m1 thr 0x%08" PRIX32 " -> 0x%X, want 0x%X", t[i].in, b,
                      t[i].thr);
    }
}
END_TEST

START_TEST(test_e2m1_packing)
{
    /* docs/semantics/quant.md Q1.2: byte = code(x[2j]) | code(x[2j+1]) << 4. */
    ck_assert_uint_eq(dsv4_e2m1_pack(0x3, 0xB), 0xB3);
    ck_assert_uint_eq(dsv4_e2m1_pack(0xF, 0x0), 0x0F);
    ck_assert_uint_eq(dsv4_e2m1_pack(0x0, 0xF), 0xF0);
    ck_assert_uint_eq(dsv4_e2m1_pack(0x13, 0x24), 0x43); /* only the nibbles count */
    ck_assert_uint_eq(dsv4_e2m1_lo(0xB3), 0x3);
    ck_assert_uint_eq(dsv4_e2m1_hi(0xB3), 0xB);
    /* x = {0.5, -6}: codes 1 and 0xF, even element low -> 0xF1. */
    uint8_t byte = dsv4_e2m1_pack(dsv4_e2m1_from_f32(0.5f), dsv4_e2m1_from_f32(-6.0f));
    ck_assert_uint_eq(byte, 0xF1);
    ck_assert(dsv4_e2m1_to_f32(dsv4_e2m1_lo(byte)) == 0.5f);
    ck_assert(dsv4_e2m1_to_f32(dsv4_e2m1_hi(byte)) == -6.0f);
    for (unsigned b = 0; b < 256; b++)
        ck_assert_uint_eq(dsv4_e2m1_pack(dsv4_e2m1_lo((uint8_t)b), dsv4_e2m1_hi((uint8_t)b)), b);
}
END_TEST

START_TEST(test_e8m0_table)
{
    /* torch fp32 -> float8_e8m0fnu (docs/semantics/quant.md Q10; every row below was
     * also checked against torch 2.11 on CPU and CUDA). */
    static const struct {
        uint32_t in;
        uint8_t out;
    } t[] = {
        {0x3F800000u, 0x7F}, /* 1.0 = 2^0 */
        {0x3FBFFFFFu, 0x7F}, /* just below 1.5 -> 1 */
        {0x3FC00000u, 0x80}, /* 1.5: half up -> 2 */
        {0x3F400000u, 0x7F}, /* 0.75 = 1.5*2^-1 -> 1 */
        {0xBF400000u, 0x7F}, /* -0.75: sign ignored */
        {0x40000000u, 0x80}, /* 2.0 */
        {0x40400000u, 0x81}, /* 3 = 1.5*2^1 -> 4 (half up, not to even) */
        {0xC0400000u, 0x81}, /* -3 */
        {0x00000000u, 0x00}, /* 0 */
        {0x80000000u, 0x00}, /* -0 */
        {0x00000001u, 0x00}, /* 2^-149 */
        {0x00200000u, 0x00}, /* 2^-128 */
        {0x003FFFFFu, 0x00}, /* just below 2^-127 */
        {0x00400000u, 0x00}, /* 2^-127 exactly: code 0 */
        {0x00400001u, 0x01}, /* just above 2^-127: torch gives 2^-126 */
        {0x00500000u, 0x01}, /* 1.25*2^-127: torch gives 2^-126 */
        {0x00600000u, 0x01}, /* 1.5*2^-127 -> 2^-126 */
        {0x00800000u, 0x01}, /* 2^-126 */
        {0x00C00000u, 0x02}, /* 1.5*2^-126 -> 2^-125 */
        {0x7F000000u, 0xFE}, /* 2^127: largest code */
        {0x7F3FFFFFu, 0xFE}, /* just below 1.5*2^127 */
        {0x7F400000u, 0xFF}, /* 1.5*2^127 rounds to 2^128: NaN */
        {0x7F7FFFFFu, 0xFF}, /* FLT_MAX */
        {0x7F800000u, 0xFF}, /* +Inf */
        {0xFF800000u, 0xFF}, /* -Inf */
        {0x7FC00000u, 0xFF}, /* NaN */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t r = dsv4_e8m0_from_f32_torch(fb(t[i].in));
        ck_assert_msg(r == t[i].out, "e8m0 0x%08" PRIX32 " -> 0x%02X, want 0x%02X", t[i].in, r,
                      t[i].out);
    }
}
END_TEST

/* ---- exhaustive and random cross-checks ----------------------------------- */

/* Differences printed so far (only the first few are shown). */
static unsigned long reported;

/* Runs every encoder on x, compares with the references; returns the number
 * of differences. */
static unsigned long check_all(uint32_t xb, int with_bf16)
{
    float x = fb(xb);
    unsigned long bad = 0;
#define CMP(name, got, want)                                                                       \
    do {                                                                                           \
        unsigned g_ = (got), w_ = (want);                                                          \
        if (g_ != w_ && (bad++, reported++ < 8))                                                   \
            fprintf(stderr, "%s(0x%08" PRIX32 ") = 0x%X, reference 0x%X\n", name, xb, g_, w_);     \
    } while (0)
    for (int sat = 0; sat <= 1; sat++) {
        CMP("fn", dsv4_fp8_from_f32(x, DSV4_FP8_E4M3FN, sat), ref_fp8(x, 0, sat));
        CMP("fnuz", dsv4_fp8_from_f32(x, DSV4_FP8_E4M3FNUZ, sat), ref_fp8(x, 1, sat));
    }
    CMP("e2m1", dsv4_e2m1_from_f32(x), ref_e2m1_bits(x));
    if (!isnan(x))
        CMP("e2m1 nearest", dsv4_e2m1_from_f32(x), ref_e2m1_nearest(x));
    CMP("e2m1 threshold", dsv4_e2m1_from_f32_threshold(x), ref_e2m1_threshold(x));
    CMP("e8m0", dsv4_e8m0_from_f32_torch(x), ref_e8m0(x));
    uint16_t h = dsv4_f16_from_f32(x);
    if (isnan(x))
        CMP("f16 NaN", (h & 0x7FFFu) > 0x7C00u, 1u);
    else
        CMP("f16", h, ref_f16(x));
    if (with_bf16) {
        uint16_t b = dsv4_bf16_from_f32(x);
        if (isnan(x))
            CMP("bf16 NaN", (b & 0x7FC0u) == 0x7FC0u && (b >> 15) == (xb >> 31), 1u);
        else
            CMP("bf16", b, ref_bf16(x));
    }
#undef CMP
    return bad;
}

START_TEST(test_cross_bf16_patterns)
{
    build_tables();
    unsigned long bad = 0;
    for (uint32_t h = 0; h < 65536; h++)
        bad += check_all(h << 16, 0);
    printf("numerics: all 65536 bf16 patterns x 8 encoders cross-checked, %lu differences\n", bad);
    fflush(stdout);
    ck_assert_msg(bad == 0, "%lu differences over the bf16 patterns", bad);
}
END_TEST

START_TEST(test_cross_random)
{
    build_tables();
    rng_state = 0x9E3779B97F4A7C15u;
    uint64_t n = random_count();
    unsigned long bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += check_all(random_pattern(i), 1);
    printf("numerics: %" PRIu64 " pseudo-random fp32 patterns x 9 encoders cross-checked, %lu differences\n",
           n, bad);
    fflush(stdout);
    ck_assert_msg(bad == 0, "%lu differences over random fp32 patterns", bad);
}
END_TEST

/* Sanity of the references themselves on a few hand values, so that a
 * wrong reference cannot hide behind "zero differences". */
START_TEST(test_references_sane)
{
    build_tables();
    ck_assert(tab_fn[0x7E] == 448.0 && tab_fn[FN_N] == 480.0 && tab_fn[1] == 0x1p-9);
    ck_assert(tab_fnuz[0x7F] == 240.0 && tab_fnuz[FNUZ_N] == 256.0 && tab_fnuz[1] == 0x1p-10);
    ck_assert_uint_eq(ref_fp8(464.0f, 0, 0), 0x7E);
    ck_assert_uint_eq(ref_fp8(248.0f, 1, 0), 0x80);
    ck_assert_uint_eq(ref_e2m1_bits(5.0f), 0x6);
    ck_assert_uint_eq(ref_e2m1_bits(fb(0x7FC00000u)), 0x3);
    ck_assert_uint_eq(ref_e2m1_bits(0.75f), 0x2);
    ck_assert_uint_eq(ref_bf16(fb(0x3F818000u)), 0x3F82);
    ck_assert_uint_eq(ref_f16(65520.0f), 0x7C00);
    ck_assert_uint_eq(ref_f16(fb(0x387FE000u)), 0x0400);
    ck_assert_uint_eq(ref_e8m0(3.0f), 0x81);
}
END_TEST

/* ---- dsv4_ulp ------------------------------------------------------------ */

START_TEST(test_ulp)
{
    static const struct {
        dsv4_dtype dt;
        double x, ulp;
    } t[] = {
        {DSV4_F64, 1.0, 0x1p-52},
        {DSV4_F32, 1.0, 0x1p-23},
        {DSV4_F32, -1.5, 0x1p-23},  /* same binade, sign ignored */
        {DSV4_F32, 0x1p-130, 0x1p-149}, /* fp32 subnormal spacing */
        {DSV4_BF16, 1.0, 0x1p-7},   /* 8 significant bits */
        {DSV4_BF16, 3.0, 0x1p-6},   /* binade [2, 4) */
        {DSV4_BF16, 0x1p-130, 0x1p-133}, /* subnormal: 2^(-126-7) */
        {DSV4_BF16, 0.0, 0x1p-133},
        {DSV4_F16, 1.0, 0x1p-10},
        {DSV4_F16, 65504.0, 32.0},  /* binade [2^15, 2^16): 2^(15-10) */
        {DSV4_F16, 0x1p-20, 0x1p-24}, /* subnormal spacing */
        {DSV4_F8E4M3FN, 448.0, 32.0}, /* binade [256, 512): 2^(8-3) */
        {DSV4_F8E4M3FN, 1.0, 0x1p-3},
        {DSV4_F8E4M3FN, 0x1p-7, 0x1p-9}, /* below 2^-6: subnormal quantum */
        {DSV4_F8E4M3FN, 0x1p-6, 0x1p-9}, /* smallest normal: same quantum */
        {DSV4_F8E4M3FNUZ, 240.0, 16.0}, /* binade [128, 256): 2^(7-3) */
        {DSV4_F8E4M3FNUZ, 0x1p-8, 0x1p-10},
        {DSV4_F4E2M1X2, 0.25, 0.5}, /* {0, .5} */
        {DSV4_F4E2M1X2, 1.0, 0.5},  /* {1, 1.5} */
        {DSV4_F4E2M1X2, 3.0, 1.0},  /* {2, 3} */
        {DSV4_F4E2M1X2, 6.0, 2.0},  /* {4, 6} */
        {DSV4_F8E8M0, 4.0, 4.0},    /* next power up: 8 */
        {DSV4_I32, 12345.0, 1.0},
        {DSV4_I64, 0.0, 1.0},
        {DSV4_U8, 7.0, 1.0},
        {DSV4_BYTES, 1.0, 0.0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        double u = dsv4_ulp(t[i].dt, t[i].x);
        ck_assert_msg(u == t[i].ulp, "ulp(dtype %d, %a) = %a, want %a", (int)t[i].dt, t[i].x, u,
                      t[i].ulp);
    }
}
END_TEST

DSV4_TEST_GROUPS_MAIN("numerics",
                      DSV4_TEST_GROUP("codes", 0, NULL, NULL, test_fp8_all_codes, test_e8m0_all_codes,
                                      test_e2m1_all_codes, test_bf16_f16_all_patterns),
                      DSV4_TEST_GROUP("tables", 0, NULL, NULL, test_fp8_table_e4m3fn, test_fp8_table_e4m3fnuz,
                                      test_bf16_table, test_f16_table, test_e2m1_table, test_e2m1_packing,
                                      test_e8m0_table, test_ulp),
                      /* 120 s: the ASan build is several times slower */
                      DSV4_TEST_GROUP("cross", 120, NULL, NULL, test_references_sane, test_cross_bf16_patterns,
                                      test_cross_random))
