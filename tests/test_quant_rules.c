/* test_quant_rules.c - hip/quant_rules.h (the device codecs and scale rules
 * of the hip quantization kernels, written in integer arithmetic) compiled
 * on the host and checked against the reference (ref/mx.c, ref/numerics.c,
 * ref/kvcache.c): every exponent with the first and last 300 mantissas and
 * random ones, every bf16 value, NaN payloads and signs; plus hand-derived
 * values of the log2 emulation. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hip/quant_rules.h"
#include "../ref/fp8quant.h"
#include "../ref/kvcache.h"
#include "../ref/mx.h"
#include "../ref/numerics.h"
#include "testutil.h"

/* Positive fp32 bit patterns of the sweep: every exponent field 0..254 with
 * mantissas 0..299, 2^23-300..2^23-1 and 200 random ones; then +Inf. */
static int sweep(uint32_t *out, int max)
{
    int n = 0;
    uint32_t seed = 12345u;
    for (uint32_t e = 0; e < 255; e++) {
        for (uint32_t m = 0; m < 300 && n < max; m++)
            out[n++] = (e << 23) | m;
        for (uint32_t m = 0x800000u - 300u; m < 0x800000u && n < max; m++)
            out[n++] = (e << 23) | m;
        for (int k = 0; k < 200 && n < max; k++) {
            seed = seed * 1664525u + 1013904223u;
            out[n++] = (e << 23) | (seed >> 9);
        }
    }
    if (n < max)
        out[n++] = 0x7F800000u;
    return n;
}

#define NSWEEP (255 * 800 + 1)

START_TEST(scale_rules_match_reference)
{
    static uint32_t v[NSWEEP];
    int n = sweep(v, NSWEEP);
    for (int i = 0; i < n; i++) {
        const float a = dsv4_f32_from_bits(v[i]);
        ck_assert_msg(dsv4q_fp4_scale_ceil_f32log2(a) == dsv4_mx_fp4_scale_ceil_f32log2(a), "fp4 f32log2 %08x",
                      v[i]);
        ck_assert_msg(dsv4q_fp4_scale_ceil(a) == dsv4_mx_fp4_scale_ceil(a), "fp4 ceil %08x", v[i]);
        uint8_t b;
        float m;
        dsv4q_fp4_block(a, DSV4Q_FP4_EVEN, &b, &m);
        ck_assert_msg(b == dsv4_mx_fp4_scale_even(a), "fp4 even %08x", v[i]);
        dsv4q_fp4_block(a, DSV4Q_FP4_OCP, &b, &m);
        ck_assert_msg(b == dsv4_mx_fp4_scale_ocp(a), "fp4 ocp %08x", v[i]);
        ck_assert_msg(dsv4q_fp8_scale_ceil(a) == dsv4_mx_fp8_scale_ceil(a), "fp8 ceil %08x", v[i]);
        ck_assert_msg(dsv4q_fp8_scale_ceil_f32log2(a) == dsv4_mx_fp8_scale_ceil_f32log2(a), "fp8 f32log2 %08x",
                      v[i]);
        ck_assert_msg(dsv4q_fp8_scale_floor(a) == dsv4_mx_fp8_scale_floor(a), "fp8 floor %08x", v[i]);
        if (isfinite(a)) {
            for (int fz = 0; fz < 2; fz++) {
                dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(fz);
                ck_assert_msg(dsv4q_kv_scale_byte(a, fz ? 7 : 8, 255) == dsv4_kv_scale_byte(a, &o), "kv %08x",
                              v[i]);
            }
        }
    }
    const float nan = NAN;
    ck_assert_uint_eq(dsv4q_fp4_scale_ceil_f32log2(nan), 0xFF);
    ck_assert_uint_eq(dsv4q_fp8_scale_ceil_f32log2(nan), 0xFF);
    /* mode 0 on an all-NaN block: 254 by the bit arithmetic, as the reference */
    uint8_t b;
    float m;
    ck_assert_int_eq(dsv4q_fp4_block(nan, DSV4Q_FP4_EVEN, &b, &m), 1);
    ck_assert_uint_eq(b, 254);
    ck_assert_uint_eq(b, dsv4_mx_fp4_scale_even(nan));
}
END_TEST

/* Hand-derived: fl32(log2(1 + 2^-23)) = 1.7e-7 > 0 -> ceil 1; at e = 2
 * (half spacing 2^-23), r = 4(1 + j 2^-23): log2 = 2 + 1.44 j 2^-23 never
 * rounds back to 2 (j = 1 -> 3); at e = 4 (half spacing 2^-22) it does while
 * 1.44 j < 2: j = 1 -> 4, j = 2 -> 5; at e = 100 (half spacing 2^-18):
 * j <= floor(ln2 2^5) = 22 -> 100, j = 23 -> 101. */
START_TEST(ceil_log2_by_hand)
{
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x3F800000u), 0);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x3F800001u), 1);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x40800001u), 3);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x41800001u), 4);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x41800002u), 5);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(((100u + 127u) << 23) | 22u), 100);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(((100u + 127u) << 23) | 23u), 101);
    ck_assert_int_eq(dsv4q_ceil_log2_f32(0x00000001u), -149); /* 2^-149 exactly */
}
END_TEST

/* Every bf16 value (and NaN payloads), times scales: codecs equal the reference. */
START_TEST(codecs_match_reference)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float x = dsv4_bf16_to_f32((uint16_t)h);
        for (int s = -12; s <= 12; s += 3) {
            const float q = dsv4q_mul(x, dsv4q_pow2(s));
            const float r = x * ldexpf(1.0f, s);
            ck_assert_msg(dsv4_f32_bits(q) == dsv4_f32_bits(r) || (isnan(q) && isnan(r) &&
                          dsv4_f32_bits(q) == dsv4_f32_bits(r)), "mul %04x %d", h, s);
            ck_assert_msg(dsv4q_fp8(q, 0) == dsv4_fp8_from_f32(r, DSV4_FP8_E4M3FN, 1), "fn %08x",
                          dsv4_f32_bits(r));
            ck_assert_msg(dsv4q_fp8(q, 1) == dsv4_fp8_from_f32(r, DSV4_FP8_E4M3FNUZ, 1), "fnuz %08x",
                          dsv4_f32_bits(r));
            ck_assert_msg(dsv4q_e2m1_rne(q) == dsv4_e2m1_from_f32(r), "rne %08x", dsv4_f32_bits(r));
            ck_assert_msg(dsv4q_e2m1_threshold(q) == dsv4_e2m1_from_f32_threshold(r), "thr %08x",
                          dsv4_f32_bits(r));
            ck_assert_msg(dsv4q_e2m1_half_away(q) == dsv4_mx_e2m1_encode(r, DSV4_MX_ELEM_HALF_AWAY), "away %08x",
                          dsv4_f32_bits(r));
            ck_assert_msg(dsv4q_bf16(q) == dsv4_bf16_from_f32(r), "bf16 %08x", dsv4_f32_bits(r));
        }
    }
    /* fp32 subnormals and near-ties in the fp8 subnormal range */
    for (uint32_t b = 0; b < 0x01000000u; b += 97) {
        const float x = dsv4_f32_from_bits(b | 0x3A000000u) * 0.5f;
        ck_assert_uint_eq(dsv4q_fp8(x, 0), dsv4_fp8_from_f32(x, DSV4_FP8_E4M3FN, 1));
        ck_assert_uint_eq(dsv4q_fp8(-x, 1), dsv4_fp8_from_f32(-x, DSV4_FP8_E4M3FNUZ, 1));
        const float y = dsv4_f32_from_bits(b);
        ck_assert_uint_eq(dsv4q_fp8(y, 0), dsv4_fp8_from_f32(y, DSV4_FP8_E4M3FN, 1));
    }
    for (int b = 0; b < 256; b++)
        for (int fz = 0; fz < 2; fz++) {
            float d = dsv4q_fp8_decode((uint8_t)b, fz), r = dsv4_fp8_to_f32((uint8_t)b, fz ? DSV4_FP8_E4M3FNUZ
                                                                                             : DSV4_FP8_E4M3FN);
            ck_assert_uint_eq(dsv4_f32_bits(d), dsv4_f32_bits(r));
        }
}
END_TEST

/* The e2m1 encoder's add-and-shift form against the reference's comparison
 * chain on every sign, exponent and top 15 mantissa bits, the low 8 bits all
 * clear (ties, exact codes) or all set (just above or below a tie), NaN
 * payloads included. */
START_TEST(e2m1_every_exponent_and_mantissa_prefix)
{
    /* count, assert once: an assertion per value costs a pipe write */
    uint64_t bad = 0;
    uint32_t first = 0;
    for (uint32_t hi = 0; hi < (1u << 24); hi++)
        for (uint32_t lo = 0; lo < 0x100u; lo += 0xFFu) {
            const float x = dsv4_f32_from_bits(hi << 8 | lo);
            if (dsv4q_e2m1_rne(x) != dsv4_e2m1_from_f32(x) && !bad++)
                first = hi << 8 | lo;
        }
    ck_assert_msg(bad == 0, "%llu mismatches, the first at %08x", (unsigned long long)bad, first);
}
END_TEST

/* The x86-64 NaN results the kernels reproduce, computed here by the host. */
START_TEST(x86_nan_results)
{
    volatile float inf = INFINITY, zero = 0.0f, negnan = -NAN;
    const float cases[][2] = {{0.0f, INFINITY}, {-0.0f, INFINITY}, {NAN, 2.0f}, {-NAN, 0.5f}, {1.0f, NAN}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        volatile float x = cases[i][0], m = cases[i][1];
        ck_assert_uint_eq(dsv4_f32_bits(dsv4q_mul(x, m)), dsv4_f32_bits(x * m));
    }
    volatile float nq = dsv4_f32_from_bits(0xFF812345u); /* signalling, negative, payload */
    ck_assert_uint_eq(dsv4_f32_bits(dsv4q_mul(nq, 3.0f)), dsv4_f32_bits(nq * 3.0f));
    ck_assert_uint_eq(dsv4_f32_bits(dsv4q_div(nq, 3.0f)), dsv4_f32_bits(nq / 3.0f));
    ck_assert_uint_eq(dsv4_f32_bits(dsv4q_div(zero, zero)), dsv4_f32_bits(zero / zero));
    ck_assert_uint_eq(dsv4_f32_bits(dsv4q_div(inf, inf)), dsv4_f32_bits(inf / inf));
    ck_assert_uint_eq(dsv4_f32_bits(dsv4q_div(negnan, 2.0f)), dsv4_f32_bits(negnan / 2.0f));
}
END_TEST

/* Whole MXFP4 blocks of the kernel's formulation equal dsv4_mx_quant_block_fp4. */
START_TEST(fp4_blocks_match_reference)
{
    const dsv4_mx_rule rr[4] = {DSV4_MX_FP4_CEIL_F32LOG2, DSV4_MX_FP4_CEIL, DSV4_MX_FP4_EVEN, DSV4_MX_FP4_OCP};
    const dsv4_mx_elem re[3] = {DSV4_MX_ELEM_RNE, DSV4_MX_ELEM_THRESHOLD, DSV4_MX_ELEM_HALF_AWAY};
    uint32_t seed = 99u;
    int fast_blocks = 0;
    for (int trial = 0; trial < 3000; trial++) {
        float x[32];
        const int sc = trial % 60 - 30;
        for (int i = 0; i < 32; i++) {
            seed = seed * 1664525u + 1013904223u;
            x[i] = dsv4_round_bf16(ldexpf((float)((int)(seed >> 16) - 32768) / 4096.0f, sc));
        }
        if (trial % 7 == 1)
            x[trial % 32] = NAN;
        if (trial % 11 == 2)
            x[3] = -INFINITY;
        if (trial % 13 == 3)
            for (int i = 0; i < 32; i++)
                x[i] = (i & 1) ? -0.0f : 0.0f;
        if (trial % 17 == 4)
            for (int i = 0; i < 32; i++)
                x[i] = NAN;
        for (int r = 0; r < 4; r++)
            for (int e = 0; e < 3; e++) {
                uint8_t want[32], b, got;
                float m, amax = dsv4q_float(0x7FC00000u);
                got = dsv4_mx_quant_block_fp4(x, 32, rr[r], re[e], want);
                int32_t key = -1; /* the kernels' integer fold must give the same bits */
                for (int i = 0; i < 32; i++) {
                    amax = dsv4q_amax_step(amax, x[i]);
                    const int32_t k = dsv4q_amax_key(x[i]);
                    key = k > key ? k : key;
                }
                ck_assert_uint_eq(dsv4q_bits(dsv4q_amax_of_key(key)), dsv4q_bits(amax));
                const int nanfill = dsv4q_fp4_block(amax, r, &b, &m);
                ck_assert_uint_eq(b, got);
                const int elem = e == 0 ? DSV4Q_ELEM_RNE : e == 1 ? DSV4Q_ELEM_THRESHOLD : DSV4Q_ELEM_HALF_AWAY;
                for (int i = 0; i < 32; i++) {
                    const float q = nanfill ? dsv4q_float(0x7FC00000u) : dsv4q_mul(x[i], m);
                    ck_assert_msg(dsv4q_e2m1(q, elem) == want[i], "trial %d rule %d elem %d i %d", trial, r, e, i);
                }
                /* the kernels' fast path where they take it: the integer max of the
                 * |x| bits below +Inf (all finite), its scale byte (the same),
                 * dsv4q_fp4_fast_ok (bf16 values) */
                uint32_t bits[32], imax = 0;
                for (int i = 0; i < 32; i++) {
                    bits[i] = dsv4q_bits(x[i]);
                    imax = (bits[i] & 0x7FFFFFFFu) > imax ? bits[i] & 0x7FFFFFFFu : imax;
                }
                if (imax < 0x7F800000u) {
                    uint8_t fb;
                    ck_assert_int_eq(dsv4q_fp4_block(dsv4q_float(imax), r, &fb, &m), 0);
                    ck_assert_uint_eq(fb, got);
                    if (dsv4q_fp4_fast_ok(fb, elem, 1)) {
                        const dsv4q_fp4_fast f =
                            dsv4q_fp4_fast_make(fb, elem, r == DSV4Q_FP4_EVEN || r == DSV4Q_FP4_OCP);
                        fast_blocks++;
                        for (int k = 0; k < 4; k++) {
                            const uint32_t wd = dsv4q_fp4_fast_f32x8(bits + 8 * k, &f);
                            for (int i = 0; i < 8; i++)
                                ck_assert_msg(((wd >> (4 * i)) & 0xFu) == want[8 * k + i],
                                              "fast: trial %d rule %d elem %d i %d", trial, r, e, 8 * k + i);
                        }
                    }
                }
            }
    }
    ck_assert_int_gt(fast_blocks, 20000); /* most blocks */
}
END_TEST

/* ---- the fast MXFP4 element path (quant_rules.h dsv4q_e2m1_fast_mag) ---- */

/* The exact element path of the kernels for a block of scale byte b that is
 * not NaN-filled: dsv4q_e2m1(dsv4q_mul(x, 2^(127-b)), elem). */
static uint8_t exact_code(float x, uint32_t byte, int elem)
{
    return dsv4q_e2m1(dsv4q_mul(x, dsv4q_pow2(127 - (int)byte)), elem);
}

static const int fast_elems[3] = {DSV4Q_ELEM_RNE, DSV4Q_ELEM_THRESHOLD, DSV4Q_ELEM_HALF_AWAY};

/* The fast path's block preconditions on every finite amax of the sweep and
 * every rule: the multiplier is 2^(127 - byte), amax 2^s < 8, and < 7 for the
 * ceil rules (which run without the clamp at 7). */
START_TEST(fp4_fast_block_bounds)
{
    static uint32_t v[NSWEEP];
    const int n = sweep(v, NSWEEP);
    int bad = 0, first = -1; /* counted, asserted once */
    for (int i = 0; i < n; i++) {
        const float amax = dsv4_f32_from_bits(v[i]);
        if (!isfinite(amax))
            continue;
        for (int rule = 0; rule < 4; rule++) {
            uint8_t b;
            float m;
            const int nanfill = dsv4q_fp4_block(amax, rule, &b, &m);
            const double q = ldexp((double)amax, 127 - (int)b);
            const int ceil = rule == DSV4Q_FP4_CEIL || rule == DSV4Q_FP4_CEIL_F32LOG2;
            if ((nanfill || dsv4q_bits(m) != dsv4q_bits(dsv4q_pow2(127 - (int)b)) || !(q < (ceil ? 7.0 : 8.0))) &&
                !bad++)
                first = i * 4 + rule;
        }
    }
    ck_assert_msg(bad == 0, "%d failures, the first amax %08x rule %d", bad, first < 0 ? 0 : v[first / 4], first % 4);
}
END_TEST

/* Compares n values (|x| 2^s below the block bound) through the 8-element
 * fast encoders, bf16 pairs and fp32 words, against exact_code; returns the
 * mismatch count and records the first. */
static uint64_t fast_check8(const uint32_t *bits, int n, uint32_t byte, int elem, int sat, int bf16, uint32_t *first)
{
    uint64_t bad = 0;
    const dsv4q_fp4_fast f = dsv4q_fp4_fast_make(byte, elem, sat);
    for (int i0 = 0; i0 < n; i0 += 8) {
        uint32_t b[8], w[4];
        for (int i = 0; i < 8; i++)
            b[i] = bits[i0 + i < n ? i0 + i : i0];
        uint32_t got;
        if (bf16) {
            for (int j = 0; j < 4; j++)
                w[j] = b[2 * j] >> 16 | (b[2 * j + 1] & 0xFFFF0000u);
            got = dsv4q_fp4_fast_bf16x8(w, &f);
            /* a bf16 value as fp32 bits: the same word (counted, not asserted: an assertion costs a pipe write) */
            if (got != dsv4q_fp4_fast_f32x8(b, &f) && !bad++)
                *first = b[0];
        } else {
            got = dsv4q_fp4_fast_f32x8(b, &f);
        }
        for (int i = 0; i < 8; i++)
            if (((got >> (4 * i)) & 0xFu) != exact_code(dsv4q_float(b[i]), byte, elem) && !bad++)
                *first = b[i];
    }
    return bad;
}

/* fast_check8 at every scale byte the fast path takes for each of the first
 * nelems encoders (dsv4q_fp4_fast_ok; bf16: the bf16 form), with and without
 * the clamp, over the candidates cand[0..ncand) below that byte's block bound
 * (vals: room for ncand).  Returns the mismatches, adds the values checked,
 * and records the first mismatch and its byte. */
static uint64_t fast_sweep(const uint32_t *cand, int ncand, int nelems, int bf16, uint32_t *vals, uint64_t *checked,
                           uint32_t *first, uint32_t *fbyte)
{
    uint64_t bad = 0;
    for (uint32_t byte = 0; byte < 256; byte++)
        for (int e = 0; e < nelems; e++) {
            if (!dsv4q_fp4_fast_ok(byte, fast_elems[e], bf16))
                continue;
            for (int sat = 0; sat < 2; sat++) {
                int n = 0;
                for (int i = 0; i < ncand; i++)
                    if (ldexp(fabs((double)dsv4_f32_from_bits(cand[i])), 127 - (int)byte) < (sat ? 8.0 : 7.0))
                        vals[n++] = cand[i];
                const uint64_t b = fast_check8(vals, n, byte, fast_elems[e], sat, bf16, first);
                if (b && !bad)
                    *fbyte = byte;
                bad += b;
                *checked += (uint64_t)n;
            }
        }
    return bad;
}

/* Every finite bf16 value x every scale byte of the fast path, each encoder,
 * with and without the clamp at 7 (the block bound |x| 2^s < 8, < 7 without
 * it): the fast codes equal the exact path's. */
START_TEST(fp4_fast_every_bf16_every_scale)
{
    static uint32_t finite[0x10000], vals[0x10000];
    int nfinite = 0;
    for (uint32_t h = 0; h < 0x10000u; h++)
        if (isfinite(dsv4_f32_from_bits(h << 16)))
            finite[nfinite++] = h << 16;
    uint64_t checked = 0;
    uint32_t first = 0, fbyte = 0;
    const uint64_t bad = fast_sweep(finite, nfinite, 3, 1, vals, &checked, &first, &fbyte);
    ck_assert_msg(bad == 0, "%llu of %llu mismatch, the first %08x at byte %u", (unsigned long long)bad,
                  (unsigned long long)checked, first, fbyte);
    ck_assert(checked > 10000000u);
}
END_TEST

/* fp32 inputs: every exponent field and sign with the mantissas at and next
 * to every rounding point of the e2m1 grid (the code boundaries and ties at
 * bits 22 and 23 of the mantissa, 0, the top), single set bits (sticky
 * below a tie) and random ones, x every fast scale byte of RNE and threshold
 * (half away takes the fast path for bf16 values only). */
START_TEST(fp4_fast_fp32_structured)
{
    /* per (field, sign): 20 points in range, 69 single bits, 8 random = 97 */
    enum { PER_FIELD_SIGN = 20 + 3 * 23 + 8 };
    static uint32_t pat[255 * 2 * PER_FIELD_SIGN], vals[255 * 2 * PER_FIELD_SIGN];
    int np = 0;
    uint32_t seed = 777u;
    for (uint32_t field = 0; field < 255; field++)
        for (uint32_t sign = 0; sign < 2; sign++) {
            const uint32_t base = sign << 31 | field << 23;
            static const uint32_t points[] = {0, 0x200000u, 0x400000u, 0x600000u, 0x800000u};
            for (int p = 0; p < 5; p++)
                for (int d = -2; d <= 2; d++) {
                    const int64_t m = (int64_t)points[p] + d;
                    if (m >= 0 && m < 0x800000)
                        pat[np++] = base | (uint32_t)m;
                }
            for (int k = 0; k < 23; k++) {
                pat[np++] = base | 1u << k;
                pat[np++] = base | 0x200000u | 1u << k; /* just above the tie at bit 22 */
                pat[np++] = base | 0x400000u | 1u << k;
            }
            for (int k = 0; k < 8; k++) {
                seed = seed * 1664525u + 1013904223u;
                pat[np++] = base | seed >> 9;
            }
            ck_assert_int_eq(np, (int)((field * 2 + sign + 1) * PER_FIELD_SIGN));
        }
    uint64_t checked = 0;
    uint32_t first = 0, fbyte = 0;
    const uint64_t bad = fast_sweep(pat, np, 2, 0, vals, &checked, &first, &fbyte);
    ck_assert_msg(bad == 0, "%llu of %llu mismatch, the first %08x at byte %u", (unsigned long long)bad,
                  (unsigned long long)checked, first, fbyte);
    ck_assert(!dsv4q_fp4_fast_ok(200, DSV4Q_ELEM_HALF_AWAY, 0));
}
END_TEST

/* The prmt forms of the sign gathers (NVIDIA) equal the shift forms, and the
 * host prmt model gives the PTX ISA's documented bytes. */
START_TEST(fp4_fast_sign_gathers)
{
    ck_assert_uint_eq(dsv4q_prmt(0x33221100u, 0x77665544u, 0x7531u), 0x77553311u);
    ck_assert_uint_eq(dsv4q_prmt(0x00008000u, 0x80000000u, 0xF9B8u), 0xFFFF0000u);
    uint32_t seed = 4242u;
    int bad = 0; /* counted, asserted once */
    for (int t = 0; t < 200000; t++) {
        uint32_t w[8];
        for (int i = 0; i < 8; i++) {
            seed = seed * 1664525u + 1013904223u;
            w[i] = seed ^ (seed >> 13) << 17;
        }
        uint32_t want_f = 0, want_b = 0;
        for (int i = 0; i < 8; i++) {
            want_f |= (w[i] >> 31) << (4 * i + 3);
            want_b |= ((w[i / 2] >> (i % 2 ? 31 : 15)) & 1u) << (4 * i + 3);
        }
        bad += dsv4q_fp4_signs_bf16(w, 1) != want_b || dsv4q_fp4_signs_bf16(w, 0) != want_b ||
               dsv4q_fp4_signs_f32(w, 1) != want_f || dsv4q_fp4_signs_f32(w, 0) != want_f;
    }
    ck_assert_int_eq(bad, 0);
}
END_TEST

DSV4_TEST_MAIN("quant_rules", "core", 60, NULL, NULL, scale_rules_match_reference, ceil_log2_by_hand,
               codecs_match_reference, e2m1_every_exponent_and_mantissa_prefix, x86_nan_results,
               fp4_blocks_match_reference, fp4_fast_block_bounds, fp4_fast_every_bf16_every_scale,
               fp4_fast_fp32_structured, fp4_fast_sign_gathers)
