/* mx_block.h - the MX per-block rules as inline code: the amax, the
 * scale rules, the element encoders and the block quantizers, shared by
 * mx.c (the block entry points) and mx_rows.c (the rows, portable and
 * vector), inlined into both hot loops.  Semantics: docs/semantics/quant.md
 * Q1, Q2.  Every caller runs dsv4_mx_prepare() first (the ceil log2 table). */
#ifndef DSV4_REF_MX_BLOCK_H
#define DSV4_REF_MX_BLOCK_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "codec_inline.h"
#include "mx.h"
#include "numerics.h"

#define INV6_BITS 0x3E2AAAABu       /* fl(1/6) (docs/semantics/quant.md Q1.1 mode 1 step 2) */
#define SIX_MIN_NORMAL 0x01C00000u  /* 6 * 2^-126 = 1.5 * 2^-124, exact (docs/semantics/quant.md Q1.1 mode 1 step 1) */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* fmaxf for a non-NaN a and a positive c. */
static inline float max_f(float a, float c) { return a > c ? a : c; }

/* amax of one whole block as branch-free integer code (|x| as bits orders
 * like the values; NaN bits lie above Inf's), which the compiler
 * vectorizes for the fixed length. */
DSV4_HOT_INLINE float amax_block(const float *x)
{
    int32_t m = 0, seen = 0;
    for (int i = 0; i < DSV4_MX_BLOCK; i++) {
        const int32_t a = (int32_t)(dsv4_bits_f32(x[i]) & 0x7FFFFFFFu);
        const int32_t ok = -(a <= 0x7F800000);
        seen |= ok;
        m = (a & ok) > m ? (a & ok) : m;
    }
    return seen ? dsv4_f32_of_bits((uint32_t)m) : NAN;
}

/* Per fp32 exponent field, the smallest mantissa whose ceil(log2_f32) is
 * k + 1 (mx.c builds it once, from dsv4_log2_f32 itself). */
extern uint32_t dsv4_mx_ceil_log2_thr[256];

/* (int)ceilf(dsv4_log2_f32(r)) for finite r > 0, once the table is built
 * (every entry point runs dsv4_mx_prepare first); in int, as the callers
 * want it (the values are small integers, exact either way). */
DSV4_HOT_INLINE int ceil_log2_f32(float r)
{
    const uint32_t b = dsv4_bits_f32(r), E = b >> 23;
    if (E == 0 || E >= 255)
        return (int)ceilf(dsv4_log2_f32(r));
    return (int)E - 127 + ((b & 0x7FFFFFu) >= dsv4_mx_ceil_log2_thr[E]);
}

/* floor(log2 a) for finite a > 0, exact (frexp: a = m * 2^e, m in [0.5, 1)). */
static inline int floor_log2(double a)
{
    int e;
    (void)frexp(a, &e);
    return e - 1;
}


DSV4_HOT_INLINE uint8_t fp4_scale_ceil_f32log2(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* a = max(amax, 6*2^-126); lr = clamp(ceil(log2_f32(fl(a*fl(1/6)))), -127, 127)
     * (docs/semantics/indexer.md Q4.1 step 4, variant A; pa_mqa_logits_mxfp4_cache.py@034adb58). */
    float a = max_f(amax, dsv4_f32_of_bits(SIX_MIN_NORMAL));
    float ratio = a * dsv4_f32_of_bits(INV6_BITS);
    if (isinf(ratio))
        return 127 + 127;
    int lr = clampi(ceil_log2_f32(ratio), -127, 127);
    return (uint8_t)(lr + 127);
}

DSV4_HOT_INLINE uint8_t fp4_scale_ceil(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* Mode 1 bit rule (docs/semantics/quant.md Q1.1 SCALING_MODE 1 steps 1-3). */
    float a = max_f(amax, dsv4_f32_of_bits(SIX_MIN_NORMAL));
    float ratio = a * dsv4_f32_of_bits(INV6_BITS);
    return (uint8_t)((dsv4_bits_f32(ratio) + 0x7FFFFFu) >> 23);
}

/* The bits mode 0 reads of a NaN amax: the max of an all-NaN block is a
 * NaN, taken as the canonical quiet NaN 0x7FC00000 (docs/semantics/quant.md
 * Q1.1: tl.max keeps NaN only when every element is NaN). */
#define CANONICAL_NAN_BITS 0x7FC00000u

/* Mode 0's unbiased exponent u, clamped to [-127, 127], by the bit
 * arithmetic of docs/semantics/quant.md Q1.1 steps 1-2 on any amax, NaN
 * included: r = (bits + 0x200000) & 0xFF800000 is +-0 (log2 -> -inf ->
 * -127), +Inf or NaN (exponent field 0xFF: log2 -> +inf or NaN, clamped to
 * 127; the carry of the Q1.1 correction and the canonical NaN's
 * 0x7FC00000 + 0x200000 -> 0x7F800000 land here), or a power of two. */
DSV4_HOT_INLINE int even_u(float amax)
{
    const uint32_t bits = isnan(amax) ? CANONICAL_NAN_BITS : dsv4_bits_f32(amax);
    const uint32_t r = (bits + 0x200000u) & 0xFF800000u; /* step 1 */
    if ((r & 0x7FFFFFFFu) == 0)
        return -127; /* log2(+-0) = -inf, clamped (step 2) */
    const int E = (int)((r >> 23) & 0xFFu);
    if (E == 255)
        return 127; /* log2(Inf) = Inf, clamped */
    return clampi(E - 127 - 2, -127, 127);
}

DSV4_HOT_INLINE uint8_t fp4_scale_even(float amax)
{
    /* step 3 (signed add, docs/semantics/quant.md Q10): 0..254, never 0xFF; an all-NaN
     * block gives 254 (u = 127) like an Inf one. */
    return (uint8_t)(even_u(amax) + 127);
}

/* OCP's u, or 128 for a NaN scale (docs/semantics/quant.md Q1.4 items 1-3). */
static inline int ocp_u(float amax)
{
    if (isinf(amax))
        return 128;
    float a = amax == 0.0f ? FLT_MIN : amax; /* microxcaling: 0 -> FLT_MIN */
    int u = floor_log2(a) - 2;
    return u < -127 ? -127 : u;
}

DSV4_HOT_INLINE uint8_t fp4_scale_ocp(float amax)
{
    if (isnan(amax))
        return 0xFF;
    int u = ocp_u(amax);
    return u > 127 ? 0xFF : (uint8_t)(u + 127);
}

DSV4_HOT_INLINE uint8_t fp8_scale_ceil(float amax)
{
    if (isnan(amax))
        return 0xFF;
    if (isinf(amax))
        return 254;
    /* clamp(ceil(log2(max(amax, FLT_MIN)/448)) + 127, 0, 254) (docs/semantics/quant.md Q2 steps 1-2);
     * a/448 in double cannot round onto a power of two (a has 24 bits).
     * From the fields: a = m 2^e (m in [1, 2)), 448 = 1.75 2^8, so the
     * ceil is e - 8 + (m > 1.75), m > 1.75 iff the mantissa > 0x600000. */
    const uint32_t b = dsv4_bits_f32(amax > FLT_MIN ? amax : FLT_MIN);
    const int e = (int)(b >> 23) - 127 - 8 + ((b & 0x7FFFFFu) > 0x600000u);
    return (uint8_t)clampi(e + 127, 0, 254);
}

DSV4_HOT_INLINE uint8_t fp8_scale_ceil_f32log2(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* The kernel's fp32 Triton: fl(a / 448), tl.log2, tl.ceil (docs/semantics/quant.md Q2 step 2). */
    float r = max_f(amax, FLT_MIN) / 448.0f;
    if (isinf(r))
        return 254;
    return (uint8_t)clampi(ceil_log2_f32(r) + 127, 0, 254);
}

DSV4_HOT_INLINE uint8_t fp8_scale_floor(float amax)
{
    if (isnan(amax))
        return 0xFF;
    if (isinf(amax))
        return 254;
    /* clamp(floor(log2(max(amax, tiny))) + 127, 0, 254) (mxfp8_utils@00134422). */
    return (uint8_t)clampi(floor_log2(fmax((double)amax, (double)FLT_MIN)) + 127, 0, 254);
}

DSV4_HOT_INLINE uint8_t scale_byte(dsv4_mx_rule rule, float amax)
{
    switch (rule) {
    case DSV4_MX_FP4_CEIL_F32LOG2: return fp4_scale_ceil_f32log2(amax);
    case DSV4_MX_FP4_CEIL: return fp4_scale_ceil(amax);
    case DSV4_MX_FP4_EVEN: return fp4_scale_even(amax);
    case DSV4_MX_FP4_OCP: return fp4_scale_ocp(amax);
    case DSV4_MX_FP8_CEIL: return fp8_scale_ceil(amax);
    case DSV4_MX_FP8_CEIL_F32LOG2: return fp8_scale_ceil_f32log2(amax);
    case DSV4_MX_FP8_FLOOR: return fp8_scale_floor(amax);
    default: return 0xFF;
    }
}

/* e2m1 magnitude under half away from zero on {0, .5, 1, 1.5, 2, 3, 4, 6}:
 * the midpoints themselves go up (microxcaling round="nearest",
 * docs/semantics/quant.md Q1.4 item 4). */
static inline uint8_t e2m1_half_away_magnitude(float a)
{
    return (uint8_t)((a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) + (a >= 3.5f) +
                     (a >= 5.0f));
}

static inline uint8_t e2m1_encode(float q, dsv4_mx_elem elem)
{
    if (elem == DSV4_MX_ELEM_THRESHOLD)
        return dsv4_e2m1_threshold_inline(q);
    if (elem == DSV4_MX_ELEM_RNE || isnan(q))
        return dsv4_e2m1_rne_inline(q);
    return (uint8_t)(e2m1_half_away_magnitude(fabsf(q)) | (signbit(q) ? 8u : 0u));
}

/* 2^k as fp32 for k in [-127, 127] (2^-127 is the subnormal 0x00400000). */
static inline float pow2f(int k) { return dsv4_f32_of_bits(k >= -126 ? (uint32_t)(k + 127) << 23 : 0x00400000u); }

/* The fp32 multiplier q = fl(x * m) of an MXFP4 block with scale byte b. */
DSV4_HOT_INLINE float fp4_multiplier(dsv4_mx_rule rule, uint8_t b, float amax)
{
    switch (rule) {
    case DSV4_MX_FP4_CEIL:
        /* f32((254 - byte) << 23), wrapping for byte 255 (docs/semantics/quant.md Q1.1 mode 1 step 4). */
        return dsv4_f32_of_bits((uint32_t)(254u - b) << 23);
    case DSV4_MX_FP4_EVEN: return pow2f(-even_u(amax));
    case DSV4_MX_FP4_OCP: return pow2f(-ocp_u(amax));
    default: return pow2f(127 - (int)b); /* variant A: exp2(-lr) */
    }
}

/* The e2m1 codes of q_i = fl(x_i * m); whole blocks through the
 * vectorizable lane forms. */
DSV4_HOT_INLINE void fp4_codes(const float *x, int n, float m, dsv4_mx_elem elem, uint8_t *codes)
{
    if (n == DSV4_MX_BLOCK && elem != DSV4_MX_ELEM_HALF_AWAY) {
        float q[DSV4_MX_BLOCK];
        uint8_t c[DSV4_MX_BLOCK];
        int32_t nan = 0;
        for (int i = 0; i < DSV4_MX_BLOCK; i++) {
            q[i] = x[i] * m;
            nan |= (dsv4_bits_f32(q[i]) & 0x7FFFFFFFu) > 0x7F800000u;
        }
        if (nan) /* the lane forms with their NaN rules */
            for (int i = 0; i < DSV4_MX_BLOCK; i++)
                c[i] = elem == DSV4_MX_ELEM_RNE ? dsv4_e2m1_rne_lane(q[i]) : dsv4_e2m1_threshold_lane(q[i]);
        else if (elem == DSV4_MX_ELEM_RNE) /* no NaN: magnitude and the sign bit */
            for (int i = 0; i < DSV4_MX_BLOCK; i++)
                c[i] = (uint8_t)(dsv4_e2m1_rne_magnitude(fabsf(q[i])) | ((dsv4_bits_f32(q[i]) >> 28) & 8u));
        else /* threshold: -0 -> 0x0 */
            for (int i = 0; i < DSV4_MX_BLOCK; i++)
                c[i] = (uint8_t)(dsv4_e2m1_rne_magnitude(fabsf(q[i])) | (q[i] < 0.0f ? 8u : 0u));
        memcpy(codes, c, sizeof c);
        return;
    }
    for (int i = 0; i < n; i++)
        codes[i] = e2m1_encode(x[i] * m, elem);
}

DSV4_HOT_INLINE uint8_t quant_block_fp4(const float *x, int n, dsv4_mx_rule rule, dsv4_mx_elem elem, uint8_t *codes)
{
    float amax = n == DSV4_MX_BLOCK ? amax_block(x) : dsv4_mx_amax(x, n);
    uint8_t b = scale_byte(rule, amax);
    if (isnan(amax) || (rule == DSV4_MX_FP4_OCP && b == 0xFF)) {
        /* NaN scale: every element encodes as NaN does (mx.h convention;
         * microxcaling NaN-fills the block, docs/semantics/quant.md Q1.4 item 3). */
        const uint8_t c = e2m1_encode(NAN, elem);
        for (int i = 0; i < n; i++)
            codes[i] = c;
        return b;
    }
    fp4_codes(x, n, fp4_multiplier(rule, b, amax), elem, codes);
    return b;
}

DSV4_HOT_INLINE uint8_t quant_block_fp8(const float *x, int n, dsv4_mx_rule rule, uint8_t *codes)
{
    float amax = n == DSV4_MX_BLOCK ? amax_block(x) : dsv4_mx_amax(x, n);
    uint8_t b = scale_byte(rule, amax);
    if (isnan(amax)) {
        const uint8_t c = dsv4_fp8_sat_inline(NAN, 0);
        for (int i = 0; i < n; i++)
            codes[i] = c;
        return b;
    }
    if (rule == DSV4_MX_FP8_FLOOR) {
        const float d = pow2f((int)b - 127); /* x / 2^(byte-127) (@00134422) */
        if (n == DSV4_MX_BLOCK)
            dsv4_e4m3_sat_div_block(x, d, 0, codes);
        else
            for (int i = 0; i < n; i++)
                codes[i] = dsv4_fp8_sat_inline(x[i] / d, 0);
        return b;
    }
    const float m = pow2f(127 - (int)b); /* exp2(127 - code), reciprocal multiply (docs/semantics/quant.md Q2 step 3) */
    if (n == DSV4_MX_BLOCK)
        dsv4_e4m3_sat_mul_block(x, m, 0, codes);
    else
        for (int i = 0; i < n; i++)
            codes[i] = dsv4_fp8_sat_inline(x[i] * m, 0);
    return b;
}

#endif
