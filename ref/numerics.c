/* numerics.c - dtype codecs.  See numerics.h for the contract and sources. */
#include "numerics.h"

#include "codec_avx2.h"
#include "codec_inline.h"
#include "simd.h"

#include <math.h>
#include <string.h>

uint32_t dsv4_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

float dsv4_f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* ---- bfloat16: the top 16 bits of fp32, RNE (docs/semantics/numerics.md A1:
 * "bf16 rounding is RNE from fp32"). */
uint16_t dsv4_bf16_from_f32(float x) { return dsv4_bf16_from_f32_inline(x); }

float dsv4_bf16_to_f32(uint16_t h) { return dsv4_f32_from_bits((uint32_t)h << 16); }

float dsv4_round_bf16(float x) { return dsv4_bf16_to_f32(dsv4_bf16_from_f32(x)); }

/* ---- Generic small-float encoder.  Rounds |x| (finite, >= 0) to the
 * nearest value of a format with `mbits` mantissa bits, minimum normal
 * exponent `emin`, ties to even; returns the magnitude code
 * (exponent field << mbits | mantissa), which may exceed the format's range
 * (the caller saturates).  bias = 1 - emin.  Exact: works on the fp64 value
 * of an fp32 input, so no double rounding. */
static uint32_t encode_magnitude(double a, int mbits, int emin)
{
    if (a == 0.0)
        return 0;
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) -> a in [2^(e-1), 2^e) */
    int exp_unbiased = e - 1;
    if (exp_unbiased < emin)
        exp_unbiased = emin; /* subnormal range: fixed quantum */
    double quantum = ldexp(1.0, exp_unbiased - mbits);
    double q = a / quantum; /* exact: power-of-two scaling */
    double fl = floor(q);
    double frac = q - fl;
    uint64_t m = (uint64_t)fl;
    if (frac > 0.5 || (frac == 0.5 && (m & 1u)))
        m++;
    /* m counts quanta of 2^(exp_unbiased - mbits); turn into a code. */
    if (exp_unbiased == emin && m < (1u << mbits))
        return (uint32_t)m; /* subnormal */
    /* normal: m in [2^mbits, 2^(mbits+1)] (the top end carries) */
    uint32_t field = (uint32_t)(exp_unbiased - emin + 1);
    if (m >= (2u << mbits)) {
        m >>= 1;
        field++;
    }
    return (field << mbits) | ((uint32_t)m & ((1u << mbits) - 1u));
}

/* ---- IEEE binary16. */
uint16_t dsv4_f16_from_f32(float x)
{
    uint32_t b = dsv4_f32_bits(x);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    if (isnan(x))
        return (uint16_t)(sign | 0x7E00u | ((b >> 13) & 0x3FFu));
    double a = fabs((double)x);
    if (isinf(x) || a >= 65520.0) /* 65520 rounds up past 65504 */
        return (uint16_t)(sign | 0x7C00u);
    return (uint16_t)(sign | encode_magnitude(a, 10, -14));
}

float dsv4_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t field = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    double v;
    if (field == 0x1F)
        return dsv4_f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (field == 0)
        v = ldexp((double)mant, -24);
    else
        v = ldexp((double)(mant | 0x400u), (int)field - 25);
    float f = (float)v;
    return sign ? -f : f;
}

/* ---- float8 e4m3 (docs/semantics/numerics.md A1: OCP fn bias 7 max 448, NaN
 * 0x7F/0xFF; FNUZ bias 8 max 240, NaN only 0x80, no -0). */
float dsv4_fp8_max(dsv4_fp8_kind k) { return k == DSV4_FP8_E4M3FN ? 448.0f : 240.0f; }

/* RNE from fp32 (the magnitude code: dsv4_e4m3_magnitude of codec_inline.h,
 * which tests/test_numerics.c checks exhaustively against a second
 * formulation). */
uint8_t dsv4_fp8_from_f32(float x, dsv4_fp8_kind k, int saturate)
{
    const int fnuz = (k == DSV4_FP8_E4M3FNUZ);
    if (saturate)
        return dsv4_fp8_sat_inline(x, fnuz);
    const uint8_t nan_code = fnuz ? 0x80 : 0x7F;
    const uint32_t max_code = fnuz ? 0x7F : 0x7E; /* 240 = 1.875*2^7, 448 = 1.75*2^8 */
    uint8_t sign = (dsv4_f32_bits(x) >> 31) ? 0x80 : 0x00;
    if (isnan(x))
        return fnuz ? 0x80 : (uint8_t)(sign | 0x7F);
    uint32_t code = isinf(x) ? max_code + 1 : dsv4_e4m3_magnitude(dsv4_f32_bits(x) & 0x7FFFFFFFu, fnuz ? -7 : -6);
    if (code > max_code)
        return fnuz ? nan_code : (uint8_t)(sign | nan_code);
    if (fnuz && code == 0)
        return 0x00; /* no negative zero in fnuz */
    return (uint8_t)(sign | code);
}

float dsv4_fp8_to_f32(uint8_t b, dsv4_fp8_kind k)
{
    const int fnuz = (k == DSV4_FP8_E4M3FNUZ);
    if (fnuz ? b == 0x80 : (b & 0x7F) == 0x7F)
        return NAN;
    int field = (b >> 3) & 0xF, mant = b & 7;
    int emin = fnuz ? -7 : -6;
    double v = field == 0 ? ldexp((double)mant, emin - 3)
                          : ldexp((double)(8 + mant), field + emin - 1 - 3);
    float f = (float)v;
    return (b & 0x80) ? -f : f;
}

/* ---- e8m0 (docs/semantics/quant.md Q1.3: byte 0 -> 2^-127, 0xFF -> NaN). */
float dsv4_e8m0_to_f32(uint8_t b) { return (float)dsv4_e8m0_to_f64(b); }

double dsv4_e8m0_to_f64(uint8_t b)
{
    if (b == 0xFF)
        return NAN;
    return ldexp(1.0, (int)b - 127);
}

uint8_t dsv4_e8m0_from_f32_torch(float x)
{
    /* torch rounds the significand half up; 0 -> 0x00 (docs/semantics/quant.md Q10). */
    if (isnan(x) || isinf(x))
        return 0xFF;
    double a = fabs((double)x);
    if (a <= ldexp(1.0, -127))
        return 0x00;
    /* fp32 subnormals above 2^-127: torch rounds the exponent *field* (0 for
     * a subnormal) up whenever the dropped bits exceed half, so all of
     * (2^-127, 2^-126) gives 0x01, not only [1.5*2^-127, 2^-126).  Observed
     * with torch 2.11 (CPU and CUDA): 0x00400001 and 0x00500000 -> 0x01. */
    if (a < ldexp(1.0, -126))
        return 0x01;
    int e;
    double f = frexp(a, &e); /* a = f*2^e, f in [0.5,1): significand s = 2f */
    int exp2 = e - 1;
    if (2.0 * f >= 1.5)
        exp2++;
    if (exp2 > 127)
        return 0xFF;
    return (uint8_t)(exp2 + 127);
}

/* ---- e2m1.  The bit method of docs/semantics/quant.md Q1.2, written as its proven
 * equivalent: nearest of {0,.5,1,1.5,2,3,4,6}, ties to the even code,
 * saturate at 6 (the midpoint comparisons of codec_inline.h); for NaN the
 * bit method's arithmetic is followed. */
static const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

uint8_t dsv4_e2m1_from_f32(float x) { return dsv4_e2m1_rne_inline(x); }

uint8_t dsv4_e2m1_from_f32_threshold(float x) { return dsv4_e2m1_threshold_inline(x); }

float dsv4_e2m1_to_f32(uint8_t code)
{
    float v = e2m1_values[code & 7u];
    return (code & 8u) ? -v : v;
}

/* ---- ULP of a dtype at magnitude |x|: the spacing of representable values
 * in the binade of x (the subnormal spacing below the smallest normal). */
static double binade_ulp(double x, int mbits, int emin)
{
    double a = fabs(x);
    int e = emin;
    if (a >= ldexp(1.0, emin)) {
        frexp(a, &e);
        e -= 1;
    }
    return ldexp(1.0, e - mbits);
}

double dsv4_ulp(dsv4_dtype dt, double x)
{
    switch (dt) {
    case DSV4_F64: return binade_ulp(x, 52, -1022);
    case DSV4_F32: return binade_ulp(x, 23, -126);
    case DSV4_BF16: return binade_ulp(x, 7, -126);
    case DSV4_F16: return binade_ulp(x, 10, -14);
    case DSV4_F8E4M3FN: return binade_ulp(x, 3, -6);
    case DSV4_F8E4M3FNUZ: return binade_ulp(x, 3, -7);
    case DSV4_F4E2M1X2: return binade_ulp(x, 1, 0);
    case DSV4_F8E8M0: return fabs(x) > 0 ? fabs(x) : ldexp(1.0, -127);
    case DSV4_I64:
    case DSV4_I32:
    case DSV4_U8: return 1.0;
    default: return 0.0;
    }
}

#if DSV4_HAVE_AVX2_PATHS
DSV4_AVX2 static int64_t bf16_row_avx2(const uint16_t *h, int64_t n, float *f)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, dsv4_avx2_load_bf16(h + i));
    return i;
}
#endif

void dsv4_bf16_row_to_f32(const uint16_t *restrict h, int64_t n, float *restrict f)
{
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2())
        i = bf16_row_avx2(h, n, f);
#endif
    for (; i < n; i++)
        f[i] = dsv4_bf16_to_f32_inline(h[i]);
}
