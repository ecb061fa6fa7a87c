/* mx.c - MXFP4 / MXFP8 scale rules and quantizers; see mx.h.  Semantics:
 * docs/semantics/quant.md Q1, Q2 (and the pages named beside a rule). */
#include "mx.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>

#include "numerics.h"

#define INV6_BITS 0x3E2AAAABu       /* fl(1/6) (docs/semantics/quant.md Q1.1 mode 1 step 2) */
#define SIX_MIN_NORMAL 0x01C00000u  /* 6 * 2^-126 = 1.5 * 2^-124, exact (docs/semantics/quant.md Q1.1 mode 1 step 1) */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

float dsv4_log2_f32(float x)
{
    /* Correctly rounded except within one double ulp of an fp32 tie: log2 of
     * an fp32 value is never that close to a tie near a power of two, where
     * the ceil/floor rules are sensitive (mx.h). */
    return (float)log2((double)x);
}

float dsv4_mx_amax(const float *x, int n)
{
    float m = 0.0f;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) /* tl.max ignores NaN unless all are NaN (docs/semantics/quant.md Q1.1, inferred) */
            continue;
        seen = 1;
        if (a > m)
            m = a;
    }
    return seen || n == 0 ? m : NAN;
}

/* floor(log2 a) for finite a > 0, exact (frexp: a = m * 2^e, m in [0.5, 1)). */
static int floor_log2(double a)
{
    int e;
    (void)frexp(a, &e);
    return e - 1;
}

/* ceil(log2 a) for finite a > 0, exact. */
static int ceil_log2(double a)
{
    int e;
    double m = frexp(a, &e);
    return m == 0.5 ? e - 1 : e;
}

uint8_t dsv4_mx_fp4_scale_ceil_f32log2(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* a = max(amax, 6*2^-126); lr = clamp(ceil(log2_f32(fl(a*fl(1/6)))), -127, 127)
     * (docs/semantics/indexer.md Q4.1 step 4, variant A; pa_mqa_logits_mxfp4_cache.py@034adb58). */
    float a = fmaxf(amax, dsv4_f32_from_bits(SIX_MIN_NORMAL));
    float ratio = a * dsv4_f32_from_bits(INV6_BITS);
    float l = ceilf(dsv4_log2_f32(ratio));
    int lr = isinf(l) ? 127 : clampi((int)l, -127, 127);
    return (uint8_t)(lr + 127);
}

uint8_t dsv4_mx_fp4_scale_ceil(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* Mode 1 bit rule (docs/semantics/quant.md Q1.1 SCALING_MODE 1 steps 1-3). */
    float a = fmaxf(amax, dsv4_f32_from_bits(SIX_MIN_NORMAL));
    float ratio = a * dsv4_f32_from_bits(INV6_BITS);
    return (uint8_t)((dsv4_f32_bits(ratio) + 0x7FFFFFu) >> 23);
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
static int even_u(float amax)
{
    const uint32_t bits = isnan(amax) ? CANONICAL_NAN_BITS : dsv4_f32_bits(amax);
    const uint32_t r = (bits + 0x200000u) & 0xFF800000u; /* step 1 */
    if ((r & 0x7FFFFFFFu) == 0)
        return -127; /* log2(+-0) = -inf, clamped (step 2) */
    const int E = (int)((r >> 23) & 0xFFu);
    if (E == 255)
        return 127; /* log2(Inf) = Inf, clamped */
    return clampi(E - 127 - 2, -127, 127);
}

uint8_t dsv4_mx_fp4_scale_even(float amax)
{
    /* step 3 (signed add, docs/semantics/quant.md Q10): 0..254, never 0xFF; an all-NaN
     * block gives 254 (u = 127) like an Inf one. */
    return (uint8_t)(even_u(amax) + 127);
}

/* OCP's u, or 128 for a NaN scale (docs/semantics/quant.md Q1.4 items 1-3). */
static int ocp_u(float amax)
{
    if (isinf(amax))
        return 128;
    float a = amax == 0.0f ? FLT_MIN : amax; /* microxcaling: 0 -> FLT_MIN */
    int u = floor_log2(a) - 2;
    return u < -127 ? -127 : u;
}

uint8_t dsv4_mx_fp4_scale_ocp(float amax)
{
    if (isnan(amax))
        return 0xFF;
    int u = ocp_u(amax);
    return u > 127 ? 0xFF : (uint8_t)(u + 127);
}

uint8_t dsv4_mx_fp8_scale_ceil(float amax)
{
    if (isnan(amax))
        return 0xFF;
    if (isinf(amax))
        return 254;
    /* clamp(ceil(log2(max(amax, FLT_MIN)/448)) + 127, 0, 254) (docs/semantics/quant.md Q2 steps 1-2);
     * a/448 in double cannot round onto a power of two (a has 24 bits). */
    double a = fmax((double)amax, (double)FLT_MIN);
    return (uint8_t)clampi(ceil_log2(a / 448.0) + 127, 0, 254);
}

uint8_t dsv4_mx_fp8_scale_ceil_f32log2(float amax)
{
    if (isnan(amax))
        return 0xFF;
    /* The kernel's fp32 Triton: fl(a / 448), tl.log2, tl.ceil (docs/semantics/quant.md Q2 step 2). */
    float r = fmaxf(amax, FLT_MIN) / 448.0f;
    float l = ceilf(dsv4_log2_f32(r));
    if (isinf(l))
        return l > 0 ? 254 : 0;
    return (uint8_t)clampi((int)l + 127, 0, 254);
}

uint8_t dsv4_mx_fp8_scale_floor(float amax)
{
    if (isnan(amax))
        return 0xFF;
    if (isinf(amax))
        return 254;
    /* clamp(floor(log2(max(amax, tiny))) + 127, 0, 254) (mxfp8_utils@00134422). */
    return (uint8_t)clampi(floor_log2(fmax((double)amax, (double)FLT_MIN)) + 127, 0, 254);
}

uint8_t dsv4_mx_scale_byte(dsv4_mx_rule rule, float amax)
{
    switch (rule) {
    case DSV4_MX_FP4_CEIL_F32LOG2: return dsv4_mx_fp4_scale_ceil_f32log2(amax);
    case DSV4_MX_FP4_CEIL: return dsv4_mx_fp4_scale_ceil(amax);
    case DSV4_MX_FP4_EVEN: return dsv4_mx_fp4_scale_even(amax);
    case DSV4_MX_FP4_OCP: return dsv4_mx_fp4_scale_ocp(amax);
    case DSV4_MX_FP8_CEIL: return dsv4_mx_fp8_scale_ceil(amax);
    case DSV4_MX_FP8_CEIL_F32LOG2: return dsv4_mx_fp8_scale_ceil_f32log2(amax);
    case DSV4_MX_FP8_FLOOR: return dsv4_mx_fp8_scale_floor(amax);
    default: return 0xFF;
    }
}

int dsv4_mx_rule_is_fp4(dsv4_mx_rule rule) { return rule <= DSV4_MX_FP4_OCP; }

uint8_t dsv4_mx_e2m1_encode(float q, dsv4_mx_elem elem)
{
    if (elem == DSV4_MX_ELEM_THRESHOLD)
        return dsv4_e2m1_from_f32_threshold(q);
    if (elem == DSV4_MX_ELEM_RNE || isnan(q))
        return dsv4_e2m1_from_f32(q);
    /* Half away from zero on {0, .5, 1, 1.5, 2, 3, 4, 6}: the midpoints
     * themselves go up (microxcaling round="nearest", docs/semantics/quant.md Q1.4 item 4). */
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    float a = fabsf(q);
    uint8_t c = 0;
    for (int i = 0; i < 7; i++)
        c += a >= mid[i];
    return (uint8_t)(c | (signbit(q) ? 8u : 0u));
}

/* The fp32 multiplier q = fl(x * m) of an MXFP4 block with scale byte b. */
static float fp4_multiplier(dsv4_mx_rule rule, uint8_t b, float amax)
{
    switch (rule) {
    case DSV4_MX_FP4_CEIL:
        /* f32((254 - byte) << 23), wrapping for byte 255 (docs/semantics/quant.md Q1.1 mode 1 step 4). */
        return dsv4_f32_from_bits((uint32_t)(254u - b) << 23);
    case DSV4_MX_FP4_EVEN: return ldexpf(1.0f, -even_u(amax));
    case DSV4_MX_FP4_OCP: return ldexpf(1.0f, -ocp_u(amax));
    default: return ldexpf(1.0f, 127 - (int)b); /* variant A: exp2(-lr) */
    }
}

uint8_t dsv4_mx_quant_block_fp4(const float *x, int n, dsv4_mx_rule rule, dsv4_mx_elem elem,
                                uint8_t *codes)
{
    float amax = dsv4_mx_amax(x, n);
    uint8_t b = dsv4_mx_scale_byte(rule, amax);
    if (isnan(amax) || (rule == DSV4_MX_FP4_OCP && b == 0xFF)) {
        /* NaN scale: every element encodes as NaN does (mx.h convention;
         * microxcaling NaN-fills the block, docs/semantics/quant.md Q1.4 item 3). */
        for (int i = 0; i < n; i++)
            codes[i] = dsv4_mx_e2m1_encode(NAN, elem);
        return b;
    }
    float m = fp4_multiplier(rule, b, amax);
    for (int i = 0; i < n; i++)
        codes[i] = dsv4_mx_e2m1_encode(x[i] * m, elem);
    return b;
}

uint8_t dsv4_mx_quant_block_fp8(const float *x, int n, dsv4_mx_rule rule, uint8_t *codes)
{
    float amax = dsv4_mx_amax(x, n);
    uint8_t b = dsv4_mx_scale_byte(rule, amax);
    if (isnan(amax)) {
        for (int i = 0; i < n; i++)
            codes[i] = dsv4_fp8_from_f32(NAN, DSV4_FP8_E4M3FN, 1);
        return b;
    }
    if (rule == DSV4_MX_FP8_FLOOR) {
        float d = ldexpf(1.0f, (int)b - 127); /* x / 2^(byte-127) (@00134422) */
        for (int i = 0; i < n; i++)
            codes[i] = dsv4_fp8_from_f32(x[i] / d, DSV4_FP8_E4M3FN, 1);
        return b;
    }
    /* exp2(127 - code), reciprocal multiply (docs/semantics/quant.md Q2 step 3) */
    float m = ldexpf(1.0f, 127 - (int)b);
    for (int i = 0; i < n; i++)
        codes[i] = dsv4_fp8_from_f32(x[i] * m, DSV4_FP8_E4M3FN, 1);
    return b;
}

static int check_rows(int64_t T, int64_t W, dsv4_mx_rule rule, int want_fp4, dsv4_status *st)
{
    if (T < 0 || W < 0 || W % DSV4_MX_BLOCK != 0)
        return dsv4_fail(st, DSV4_EINPUT,
                         "MX rows [%" PRId64 ", %" PRId64 "]: width must be a multiple of %d", T, W,
                         DSV4_MX_BLOCK);
    if ((unsigned)rule >= DSV4_MX_RULE_COUNT || dsv4_mx_rule_is_fp4(rule) != want_fp4)
        return dsv4_fail(st, DSV4_EINPUT, "scale rule %d is not an %s rule", (int)rule,
                         want_fp4 ? "MXFP4" : "MXFP8");
    return DSV4_OK;
}

int dsv4_mx_quant_rows_fp4(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           dsv4_mx_elem elem, uint8_t *packed, uint8_t *scales, dsv4_status *st)
{
    int rc = check_rows(T, W, rule, 1, st);
    if (rc)
        return rc;
    const int64_t nb = W / DSV4_MX_BLOCK;
    uint8_t codes[DSV4_MX_BLOCK];
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < nb; j++) {
            const float *xb = x + t * W + j * DSV4_MX_BLOCK;
            scales[t * nb + j] = dsv4_mx_quant_block_fp4(xb, DSV4_MX_BLOCK, rule, elem, codes);
            uint8_t *pb = packed + t * (W / 2) + j * (DSV4_MX_BLOCK / 2);
            for (int i = 0; i < DSV4_MX_BLOCK / 2; i++) /* even element low (docs/semantics/quant.md Q1.2) */
                pb[i] = dsv4_e2m1_pack(codes[2 * i], codes[2 * i + 1]);
        }
    return DSV4_OK;
}

int dsv4_mx_quant_rows_fp8(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           uint8_t *data, uint8_t *scales, dsv4_status *st)
{
    int rc = check_rows(T, W, rule, 0, st);
    if (rc)
        return rc;
    const int64_t nb = W / DSV4_MX_BLOCK;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < nb; j++)
            scales[t * nb + j] = dsv4_mx_quant_block_fp8(x + t * W + j * DSV4_MX_BLOCK,
                                                         DSV4_MX_BLOCK, rule,
                                                         data + t * W + j * DSV4_MX_BLOCK);
    return DSV4_OK;
}

void dsv4_mx_dequant_rows_fp4(const uint8_t *packed, const uint8_t *scales, int64_t T,
                              int64_t W, double *out)
{
    const int64_t nb = W / DSV4_MX_BLOCK;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < W; i++) {
            uint8_t byte = packed[t * (W / 2) + i / 2];
            uint8_t code = (i & 1) ? dsv4_e2m1_hi(byte) : dsv4_e2m1_lo(byte);
            out[t * W + i] = (double)dsv4_e2m1_to_f32(code) *
                             dsv4_e8m0_to_f64(scales[t * nb + i / DSV4_MX_BLOCK]);
        }
}

void dsv4_mx_shuffled_scale_shape(int64_t M, int64_t N, int64_t *rows, int64_t *cols)
{
    int64_t sn = (N + DSV4_MX_BLOCK - 1) / DSV4_MX_BLOCK;
    *rows = (M + 255) / 256 * 256;
    *cols = (sn + 7) / 8 * 8;
}

int64_t dsv4_mx_scale_shuffle_idx(int64_t x, int64_t y, int64_t scaleN_pad)
{
    /* aiter fp4_utils.dynamic_mxfp4_quant(shuffle=True) (docs/semantics/quant.md Q1.3). */
    return (x / 32) * 32 * scaleN_pad + (y / 8) * 256 + (y % 4) * 64 + (x % 16) * 4 +
           ((y % 8) / 4) * 2 + (x % 32) / 16;
}
