/* codec_inline.h - the hot codecs of numerics.c as static inline functions,
 * so that the quantizers' inner loops need no call per element.  These are
 * the codecs: numerics.c's dsv4_bf16_from_f32, dsv4_fp8_from_f32 (with
 * saturation) and dsv4_e2m1_from_f32* call them.  Contracts: numerics.h.
 * Private to ref/ and ops/ (not installed as API). */
#ifndef DSV4_CODEC_INLINE_H
#define DSV4_CODEC_INLINE_H

#include <stdint.h>
#include <string.h>

/* Hot loops are also built for AVX2 and the loader picks the build
 * (function multiversioning): the same results, since each element goes
 * through the same integer and IEEE fp32 operations (no FMA target, and
 * -std=c11 keeps GCC from contracting). */
#if defined(__x86_64__) && !defined(DSV4_NO_VECTOR_CLONES) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 8))
#define DSV4_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DSV4_VECTOR_CLONES
#endif

/* Inlined into the callers (and so into their AVX2 clones). */
#if defined(__GNUC__)
#define DSV4_HOT_INLINE static inline __attribute__((always_inline))
#else
#define DSV4_HOT_INLINE static inline
#endif

/* Kept out of line, so that their restrict parameters hold and the
 * compiler vectorizes them without a run-time alias check (which -O2's
 * cost model refuses). */
#if defined(__GNUC__) && !defined(__clang__)
#define DSV4_NOINLINE __attribute__((noinline))
#else
/* clang refuses noinline beside target_clones, and never inlines a
 * multiversioned function anyway (calls go through its resolver). */
#define DSV4_NOINLINE
#endif

static inline uint32_t dsv4_bits_f32(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float dsv4_f32_of_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static inline float dsv4_bf16_to_f32_inline(uint16_t h) { return dsv4_f32_of_bits((uint32_t)h << 16); }

/* RNE to bf16; NaN keeps its sign and becomes quiet; overflow carries into Inf. */
static inline uint16_t dsv4_bf16_from_f32_inline(float x)
{
    uint32_t b = dsv4_bits_f32(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((b >> 16) | 0x0040u);
    return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

/* RNE magnitude code of |x| (finite, bits a = bits & 0x7FFFFFFF) for an
 * e4m3 format of minimum normal exponent emin; may exceed the format's
 * range (the caller saturates).  Normal range: keep 3 mantissa bits ties to
 * even (a carry moves into the exponent by itself), rebias 127 -> 1 - emin.
 * Below 2^emin: the integer m * 2^(E - 150) / 2^(emin - 3) rounded to
 * nearest even, m the significand and E the biased exponent (1 for fp32
 * subnormals). */
static inline uint32_t dsv4_e4m3_magnitude(uint32_t a, int emin)
{
    const int32_t E = (int32_t)(a >> 23);
    if (E - 127 >= emin)
        return ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - ((uint32_t)(127 + emin - 1) << 3);
    const uint32_t m = E ? (a & 0x7FFFFFu) | 0x800000u : a;
    const int32_t sh = 147 + emin - (E ? E : 1); /* > 20 here */
    if (sh >= 32)
        return 0; /* below 2^(emin - 4): rounds to 0 */
    const uint32_t q = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

/* dsv4_fp8_from_f32(x, e4m3fn or e4m3fnuz, saturate = 1). */
static inline uint8_t dsv4_fp8_sat_inline(float x, int fnuz)
{
    const uint32_t b = dsv4_bits_f32(x), a = b & 0x7FFFFFFFu;
    const uint8_t sign = (uint8_t)((b >> 24) & 0x80u);
    if (a > 0x7F800000u) /* NaN */
        return fnuz ? 0x80 : (uint8_t)(sign | 0x7F);
    const uint32_t max_code = fnuz ? 0x7Fu : 0x7Eu; /* 240 = 1.875*2^7, 448 = 1.75*2^8 */
    uint32_t code = a == 0x7F800000u ? max_code : dsv4_e4m3_magnitude(a, fnuz ? -7 : -6);
    code = code > max_code ? max_code : code;
    if (fnuz && code == 0)
        return 0x00; /* no negative zero in fnuz */
    return (uint8_t)(sign | code);
}

/* e2m1 magnitude of a non-NaN |x| with round-to-nearest, ties to the even
 * code, saturating at 6: the midpoints 0.25 (tie to 0), 0.75 (to 1.0),
 * 1.25 (to 1.0), 1.75 (to 2), 2.5 (to 2), 3.5 (to 4), 5 (to 4). */
static inline uint8_t dsv4_e2m1_rne_magnitude(float a)
{
    return (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
                     (a > 5.0f));
}

/* dsv4_e2m1_from_f32: the aiter bit method (sign of x kept, -0 -> 0x8);
 * NaN replays the bit method's arithmetic (numerics.c). */
static inline uint8_t dsv4_e2m1_rne_inline(float x)
{
    const uint32_t b = dsv4_bits_f32(x), abits = b & 0x7FFFFFFFu;
    const uint8_t sign = (uint8_t)((b >> 31) << 3);
    if (abits > 0x7F800000u) {
        const uint32_t code = (abits + ((uint32_t)(1 - 127) << 23) + 0x1FFFFFu + ((abits >> 22) & 1u)) >> 22;
        return (uint8_t)(((code & 0xFFu) | sign) & 0xFu);
    }
    return (uint8_t)(sign | dsv4_e2m1_rne_magnitude(dsv4_f32_of_bits(abits)));
}

/* dsv4_e2m1_from_f32_threshold: as above but -0 -> 0x0 and NaN -> 0x0. */
static inline uint8_t dsv4_e2m1_threshold_inline(float x)
{
    const uint32_t b = dsv4_bits_f32(x), abits = b & 0x7FFFFFFFu;
    if (abits > 0x7F800000u)
        return 0;
    return (uint8_t)(dsv4_e2m1_rne_magnitude(dsv4_f32_of_bits(abits)) | (x < 0.0f ? 8u : 0u));
}

/* ---- 32-element blocks, branch-free (the compiler vectorizes them) ---- */

#define DSV4_CODEC_BLOCK 32

static inline int32_t dsv4_sel_i32(int32_t mask, int32_t a, int32_t b) { return (a & mask) | (b & ~mask); }

/* dsv4_fp8_sat_inline of a finite-or-not fp32 with bits b, lane form: the
 * normal-range rounding of dsv4_e4m3_magnitude, and below 2^emin the RNE
 * integer of |q| * 2^(3 - emin) < 8 (exact) through the fp32 add of 2^23,
 * whose low bits are then that integer. */
static inline uint8_t dsv4_e4m3_sat_lane(float q, int fnuz)
{
    const int32_t b = (int32_t)dsv4_bits_f32(q), a = b & 0x7FFFFFFF;
    const int32_t emin = fnuz ? -7 : -6, max_code = fnuz ? 0x7F : 0x7E;
    const uint32_t ua = (uint32_t)a; /* unsigned: NaN bits must not overflow */
    const int32_t nrm = (int32_t)((ua + 0x7FFFFu + ((ua >> 20) & 1u)) >> 20) - ((127 + emin - 1) << 3);
    const float up = fnuz ? 1024.0f : 512.0f; /* 2^(3 - emin) */
    const int32_t sub = (int32_t)dsv4_bits_f32(dsv4_f32_of_bits((uint32_t)a) * up + 8388608.0f) - 0x4B000000;
    int32_t code = dsv4_sel_i32(-(a < ((127 + emin) << 23)), sub, nrm);
    code = dsv4_sel_i32(-(code > max_code), max_code, code);
    const int32_t sign = fnuz ? dsv4_sel_i32(-(code == 0), 0, (b >> 24) & 0x80) : (b >> 24) & 0x80;
    code |= sign;
    return (uint8_t)dsv4_sel_i32(-(a > 0x7F800000), fnuz ? 0x80 : ((b >> 24) & 0x80) | 0x7F, code);
}

/* out[i] = dsv4_fp8_sat_inline(x[i] * m, fnuz) for a whole block. */
static inline void dsv4_e4m3_sat_mul_block(const float *restrict x, float m, int fnuz, uint8_t *restrict out)
{
    for (int i = 0; i < DSV4_CODEC_BLOCK; i++)
        out[i] = dsv4_e4m3_sat_lane(x[i] * m, fnuz);
}

/* out[i] = dsv4_fp8_sat_inline(x[i] / d, fnuz) for a whole block. */
static inline void dsv4_e4m3_sat_div_block(const float *restrict x, float d, int fnuz, uint8_t *restrict out)
{
    for (int i = 0; i < DSV4_CODEC_BLOCK; i++)
        out[i] = dsv4_e4m3_sat_lane(x[i] / d, fnuz);
}

/* dsv4_e2m1_rne_inline, lane form (the NaN code computed for every lane
 * and selected). */
static inline uint8_t dsv4_e2m1_rne_lane(float q)
{
    const uint32_t b = dsv4_bits_f32(q), abits = b & 0x7FFFFFFFu, sign = (b >> 31) << 3;
    const uint32_t mag = dsv4_e2m1_rne_magnitude(dsv4_f32_of_bits(abits));
    const uint32_t nan = (((abits + ((uint32_t)(1 - 127) << 23) + 0x1FFFFFu + ((abits >> 22) & 1u)) >> 22) & 0xFFu);
    return (uint8_t)(dsv4_sel_i32(-(int32_t)(abits > 0x7F800000u), (int32_t)((nan | sign) & 0xFu),
                                  (int32_t)(sign | mag)));
}

/* dsv4_e2m1_threshold_inline, lane form. */
static inline uint8_t dsv4_e2m1_threshold_lane(float q)
{
    const uint32_t abits = dsv4_bits_f32(q) & 0x7FFFFFFFu;
    const int32_t c = (int32_t)(dsv4_e2m1_rne_magnitude(dsv4_f32_of_bits(abits)) | (q < 0.0f ? 8u : 0u));
    return (uint8_t)dsv4_sel_i32(-(int32_t)(abits > 0x7F800000u), 0, c);
}

#endif
