/* quant_rules.h - the quantization codecs and scale rules of the hip
 * quantization and KV-cache kernels, written once for the device and the
 * host: integer / bit arithmetic only (no device log2, no fast-math), so that
 * every kernel is bit-exact with ref/mx.c, ref/fp8quant.c and ref/kvcache.c.
 * The file is also plain C11: tests/test_quant_rules.c compiles it on the
 * host and checks every function against the reference (sweeps over all
 * exponents, ties, NaN payloads and subnormals).
 *
 * x86-64 NaN results.  The reference runs on x86-64, where a product or
 * quotient with one NaN operand returns that NaN quieted (sign and payload
 * kept) and 0 * Inf gives the "default NaN" 0xFFC00000; GPUs return a
 * canonical NaN instead.  The sign and payload of a NaN reach the output
 * (the e2m1 bit method reads the payload, e4m3fn keeps the sign), so
 * dsv4q_mul / dsv4q_div reproduce the x86 results. */
#ifndef DSV4_HIP_QUANT_RULES_H
#define DSV4_HIP_QUANT_RULES_H

#include <math.h> /* fmaf */
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__) || defined(__HIP__)
#define DSV4Q_FN static inline __host__ __device__
#else
#define DSV4Q_FN static inline
#endif

/* ---- bits ------------------------------------------------------------- */

DSV4Q_FN uint32_t dsv4q_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

DSV4Q_FN float dsv4q_float(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

DSV4Q_FN int dsv4q_isnan(float x) { return (dsv4q_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
DSV4Q_FN int dsv4q_isinf(float x) { return (dsv4q_bits(x) & 0x7FFFFFFFu) == 0x7F800000u; }

/* 2^k as fp32 for k in [-149, 127] (2^-127 .. 2^-149 are subnormals, as
 * ldexpf gives them in the reference). */
DSV4Q_FN float dsv4q_pow2(int k)
{
    return k >= -126 ? dsv4q_float((uint32_t)(k + 127) << 23) : dsv4q_float(1u << (k + 149));
}

/* floor(log2 v) of an integer v > 0. */
DSV4Q_FN int dsv4q_ilog2(uint32_t v)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return 31 - __clz((int)v); /* one instruction, not a loop of up to 31 steps */
#else
    return 31 - __builtin_clz(v);
#endif
}

/* x * m and x / d as x86-64 computes them (header comment). */
DSV4Q_FN float dsv4q_x86_nan(float x, float y)
{
    if (dsv4q_isnan(x))
        return dsv4q_float(dsv4q_bits(x) | 0x00400000u);
    if (dsv4q_isnan(y))
        return dsv4q_float(dsv4q_bits(y) | 0x00400000u);
    return dsv4q_float(0xFFC00000u); /* invalid operation: 0*Inf, 0/0, Inf/Inf */
}

/* The IEEE result is NaN exactly when an operand is NaN or the operation is
 * invalid (0 * Inf), which are the cases x86 answers differently: one test
 * on the result, no branch in the common path. */
DSV4Q_FN float dsv4q_mul(float x, float m)
{
    const float p = x * m;
    return dsv4q_isnan(p) ? dsv4q_x86_nan(x, m) : p;
}

DSV4Q_FN float dsv4q_div(float x, float d)
{
    const float q = x / d; /* IEEE division: nvcc -prec-div default, HIP correctly rounded default */
    return dsv4q_isnan(q) ? dsv4q_x86_nan(x, d) : q; /* NaN operand, 0/0, Inf/Inf */
}

/* ---- codecs (mirrors of ref/numerics.c) --------------------------------- */

/* bf16 RNE; NaN keeps its sign and becomes quiet (numerics.c dsv4_bf16_from_f32). */
DSV4Q_FN uint16_t dsv4q_bf16(float x)
{
    uint32_t b = dsv4q_bits(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* RNE of m / 2^s (m < 2^24, s >= 1), in integers. */
DSV4Q_FN uint32_t dsv4q_rne_shift(uint32_t m, int s)
{
    s = s < 31 ? s : 31; /* from 25 on m / 2^s < 1/2 rounds to 0 anyway: no branch */
    const uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

/* e4m3 magnitude code of finite x (numerics.c fp8_magnitude_code): the same
 * bit rounding in the normal range; in the subnormal range the RNE of
 * |x| * 2^(3-emin) computed in integers (exact; the reference's 2^23 trick
 * gives the same RNE integer). */
DSV4Q_FN uint32_t dsv4q_fp8_mag(float x, int emin)
{
    const uint32_t a = dsv4q_bits(x) & 0x7FFFFFFFu;
    const int field = (int)(a >> 23);
    const int e = field ? field - 127 : -126;
    /* both forms computed and one selected: a per-element branch diverges in a warp */
    const uint32_t normal = ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - ((uint32_t)(127 + emin - 1) << 3);
    const uint32_t m = field ? (a & 0x7FFFFFu) | 0x800000u : (a & 0x7FFFFFu);
    /* |x| = m * 2^(e-23); times 2^(3-emin): m * 2^(e-20-emin), shift 20+emin-e >= 21 */
    const uint32_t sub = dsv4q_rne_shift(m, 20 + emin - (e < emin ? e : emin - 1));
    return e >= emin ? normal : sub;
}

/* Saturating RNE e4m3fn (fnuz = 0) or e4m3fnuz (numerics.c dsv4_fp8_from_f32, saturate 1),
 * in integers: the rule itself, on every target. */
DSV4Q_FN uint8_t dsv4q_fp8_int(float x, int fnuz)
{
    const uint8_t sign = (dsv4q_bits(x) >> 31) ? 0x80 : 0x00;
    const uint32_t max_code = fnuz ? 0x7F : 0x7E;
    /* Inf: the normal form gives a code above max_code, so the clamp saturates it */
    uint32_t code = dsv4q_fp8_mag(x, fnuz ? -7 : -6);
    code = code > max_code ? max_code : code;
    const uint8_t r = (fnuz && code == 0) ? 0x00 : (uint8_t)(sign | code); /* no negative zero in fnuz */
    return dsv4q_isnan(x) ? (fnuz ? 0x80 : (uint8_t)(sign | 0x7F)) : r;
}

/* NVIDIA sm_89 and later convert fp32 to e4m3fn in one instruction, RNE and
 * saturating to 448 (Inf too), which is the integer rule for every non-NaN
 * input; a NaN keeps its sign here, as the rule wants.  The bench's device
 * codec check (DSV4_PLUGIN_CODEC_CHECK_OP) compares the two on all 2^32 fp32
 * inputs on the machine itself. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* Two floats to bf16 (lo in the low half) by one cvt.rn.bf16x2.f32: IEEE
 * round to nearest even, subnormals kept (no .ftz), overflow to +-Inf, as
 * dsv4q_bf16 for every non-NaN input; a NaN gives 0x7FFF (dsv4q_bf16 keeps
 * the sign and quiets the payload), so callers test for NaN halves. */
#define DSV4Q_HW_BF16 1
DSV4Q_FN uint32_t dsv4q_bf16x2_hw(float lo, float hi)
{
    uint32_t two;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(two) : "f"(hi), "f"(lo));
    return two;
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define DSV4Q_HW_E4M3 1
DSV4Q_FN uint8_t dsv4q_fp8_hw(float x)
{
    unsigned short two;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(0.0f), "f"(x));
    const uint8_t sign = (dsv4q_bits(x) >> 31) ? 0x80 : 0x00;
    return dsv4q_isnan(x) ? (uint8_t)(sign | 0x7F) : (uint8_t)(two & 0xFFu);
}
#endif

DSV4Q_FN uint8_t dsv4q_fp8(float x, int fnuz)
{
#ifdef DSV4Q_HW_E4M3
    if (!fnuz)
        return dsv4q_fp8_hw(x);
#endif
    return dsv4q_fp8_int(x, fnuz);
}

/* Whether a word of four e4m3fn codes holds a NaN code (low seven bits all
 * ones): one add carries into bit 7 of exactly those bytes. */
DSV4Q_FN int dsv4q_fp8x4_has_nan(uint32_t w) { return (((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0; }

/* dsv4q_fp8 of four values as one word, element 0 in the low byte.  With
 * the hardware conversion: two instructions for the four codes, and the NaN
 * sign fix-up only in the (rare) word that holds a NaN.  That word is found
 * by one test on the codes, not one a value: satfinite gives a code with low
 * bits 0x7F exactly for a NaN input (finite values and Inf saturate to
 * +-448, 0x7E), which the bench's device codec check confirms on every fp32
 * input in every byte position of the word. */
DSV4Q_FN uint32_t dsv4q_fp8x4(float q0, float q1, float q2, float q3, int fnuz)
{
#ifdef DSV4Q_HW_E4M3
    if (!fnuz) {
        unsigned short lo, hi;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(q1), "f"(q0));
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(q3), "f"(q2));
        uint32_t w = (uint32_t)lo | (uint32_t)hi << 16;
        if (dsv4q_fp8x4_has_nan(w)) {
            const float q[4] = {q0, q1, q2, q3};
            for (int i = 0; i < 4; i++)
                if (dsv4q_isnan(q[i]))
                    w = (w & ~(0xFFu << (8 * i))) | (uint32_t)dsv4q_fp8_hw(q[i]) << (8 * i);
        }
        return w;
    }
#endif
    return (uint32_t)dsv4q_fp8_int(q0, fnuz) | (uint32_t)dsv4q_fp8_int(q1, fnuz) << 8 |
           (uint32_t)dsv4q_fp8_int(q2, fnuz) << 16 | (uint32_t)dsv4q_fp8_int(q3, fnuz) << 24;
}

/* dsv4q_fp8(dsv4q_mul(v[i], f)) (div: dsv4q_div(v[i], f)) of four values as
 * one e4m3fn word, f finite and nonzero (an MX power of two, an FP8 group
 * scale).  Then v * f and v / f are NaN exactly when v is, and the code of
 * that NaN is v's sign with 0x7F (x86 quiets v, keeping its sign), so with
 * the hardware conversion the results need no NaN test each: satfinite
 * never gives low bits 0x7F for a non-NaN, and one test on the word (a
 * byte's low seven bits all ones) finds the rare word that holds a NaN. */
DSV4Q_FN uint32_t dsv4q_fp8x4_scaled(const float v[4], float f, int div)
{
#ifdef DSV4Q_HW_E4M3
    float q[4];
    for (int i = 0; i < 4; i++)
        q[i] = div ? v[i] / f : v[i] * f;
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(q[1]), "f"(q[0]));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(q[3]), "f"(q[2]));
    uint32_t w = (uint32_t)lo | (uint32_t)hi << 16;
    if (dsv4q_fp8x4_has_nan(w))
        for (int i = 0; i < 4; i++)
            if (dsv4q_isnan(v[i]))
                w = (w & ~(0xFFu << (8 * i))) | (((dsv4q_bits(v[i]) >> 24) & 0x80u) | 0x7Fu) << (8 * i);
    return w;
#else
    float q[4];
    for (int i = 0; i < 4; i++)
        q[i] = div ? dsv4q_div(v[i], f) : dsv4q_mul(v[i], f);
    return dsv4q_fp8x4(q[0], q[1], q[2], q[3], 0);
#endif
}

/* e4m3 decode: NaN as the reference's NAN (0x7FC00000). */
DSV4Q_FN float dsv4q_fp8_decode(uint8_t b, int fnuz)
{
    if (fnuz ? b == 0x80 : (b & 0x7F) == 0x7F)
        return dsv4q_float(0x7FC00000u);
    const int field = (b >> 3) & 0xF, mant = b & 7, emin = fnuz ? -7 : -6;
    const float v = field == 0 ? (float)mant * dsv4q_pow2(emin - 3)
                               : (float)(8 + mant) * dsv4q_pow2(field + emin - 4);
    return (b & 0x80) ? -v : v;
}

#ifdef DSV4Q_HW_E4M3
/* The two e4m3fn codes of a 16-bit pair (low byte first) as an f16 pair
 * (low half first) by the hardware conversion, and as fp32, for codes that
 * are not NaN: every e4m3fn value is an f16, and f16 to fp32 is exact; the
 * fp32 pair equals dsv4q_fp8_decode, which the bench's device codec check
 * compares on all 65536 pairs. */
DSV4Q_FN uint32_t dsv4q_fp8x2_f16x2_hw(uint16_t two)
{
    uint32_t h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(two));
    return h2;
}

DSV4Q_FN void dsv4q_fp8x2_decode_hw(uint16_t two, float *lo, float *hi)
{
    const uint32_t h2 = dsv4q_fp8x2_f16x2_hw(two);
    asm("cvt.f32.f16 %0, %1;" : "=f"(*lo) : "h"((unsigned short)(h2 & 0xFFFFu)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(*hi) : "h"((unsigned short)(h2 >> 16)));
}
#endif

/* e2m1 RNE, the aiter bit method (numerics.c dsv4_e2m1_from_f32), NaN payload included.
 * One add-and-shift gives the RNE code of every |x| >= 1 (exponent and top
 * mantissa bit, ties to the even code; the same sum is the NaN code), a min
 * saturates it at 6 (code 7, Inf included); below 1 two comparisons give
 * 0, 0.5 or 1.  tests/test_quant_rules.c checks it against the reference's
 * comparison chain on every sign, exponent and mantissa prefix (and it was
 * checked once on all 2^32 fp32 patterns). */
DSV4Q_FN uint8_t dsv4q_e2m1_rne(float x)
{
    const uint32_t b = dsv4q_bits(x), abits = b & 0x7FFFFFFFu;
    const uint8_t sign = (uint8_t)((b >> 31) << 3);
    const uint32_t bitcode = (abits + ((uint32_t)(1 - 127) << 23) + 0x1FFFFFu + ((abits >> 22) & 1u)) >> 22;
    const uint32_t big = bitcode < 7u ? bitcode : 7u;
    const uint32_t small = (uint32_t)(abits > 0x3E800000u) + (uint32_t)(abits >= 0x3F400000u); /* 0.25 < |x|, 0.75 <= |x| */
    const uint8_t c = (uint8_t)(abits >= 0x3F800000u ? big : small);
    return abits > 0x7F800000u ? (uint8_t)(((bitcode & 0xFFu) | sign) & 0xFu) : (uint8_t)(sign | c);
}

/* Variant A's threshold method (numerics.c dsv4_e2m1_from_f32_threshold). */
DSV4Q_FN uint8_t dsv4q_e2m1_threshold(float x)
{
    if (dsv4q_isnan(x))
        return 0;
    const float a = dsv4q_float(dsv4q_bits(x) & 0x7FFFFFFFu);
    const uint8_t c = (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                                (a >= 3.5f) + (a > 5.0f));
    return (uint8_t)(c | (x < 0.0f ? 8u : 0u));
}

/* Ties away from zero (mx.c dsv4_mx_e2m1_encode, DSV4_MX_ELEM_HALF_AWAY). */
DSV4Q_FN uint8_t dsv4q_e2m1_half_away(float x)
{
    if (dsv4q_isnan(x))
        return dsv4q_e2m1_rne(x);
    const float a = dsv4q_float(dsv4q_bits(x) & 0x7FFFFFFFu);
    const uint8_t c = (uint8_t)((a >= 0.25f) + (a >= 0.75f) + (a >= 1.25f) + (a >= 1.75f) + (a >= 2.5f) +
                                (a >= 3.5f) + (a >= 5.0f));
    return (uint8_t)(c | ((dsv4q_bits(x) >> 31) ? 8u : 0u));
}

/* ---- scale rules (mirrors of ref/mx.c, ref/kvcache.c) -------------------- */

/* ceil(fl32(log2 r)) for finite r > 0, where fl32 is the correctly rounded
 * fp32 log2 of mx.c dsv4_log2_f32, without a log2: r = (1 + f) 2^e with f =
 * frac / 2^nbits.  f = 0: log2 r = e.  Else L = e + d, d = log2(1 + f) in
 * (0, 1), and ceil(fl32(L)) = e exactly when fl32(L) rounds down onto e,
 * i.e. d < 2^-p with 2^-p half the fp32 spacing next to e towards L (never
 * a tie: d is irrational).  d < 2^-p <=> frac < (2^(2^-p) - 1) 2^nbits,
 * whose value ln2 2^k (k = nbits - p <= 5 here; the next terms add < 2^-12)
 * is never within 0.09 of an integer: so frac <= floor(ln2 2^k). */
DSV4Q_FN int dsv4q_ceil_log2_f32(uint32_t rbits)
{
    const uint32_t field = (rbits >> 23) & 0xFFu;
    uint32_t frac = rbits & 0x7FFFFFu;
    int e, nbits;
    if (field) {
        e = (int)field - 127;
        nbits = 23;
    } else { /* subnormal: frac = 2^n + rest */
        const int n = dsv4q_ilog2(frac);
        e = n - 149;
        nbits = n;
        frac -= 1u << n;
    }
    if (frac == 0)
        return e;
    if (e == 0)
        return 1; /* fl32(d) > 0 */
    int p;
    if (e > 0) {
        p = 24 - dsv4q_ilog2((uint32_t)e); /* half ulp of e in fp32 */
    } else {
        const uint32_t n = (uint32_t)(-e);
        const int l = dsv4q_ilog2(n);
        p = (n & (n - 1u)) ? 24 - l : 25 - l; /* below a power of two the spacing halves */
    }
    const int k = nbits - p;
    /* floor(ln2 2^k) for k = 1..6 (ln2 = 0.693147...); 0 for k <= 0 */
    const uint32_t J = k <= 0 ? 0u : k == 1 ? 1u : k == 2 ? 2u : k == 3 ? 5u : k == 4 ? 11u : k == 5 ? 22u : 44u;
    return frac <= J ? e : e + 1;
}

DSV4Q_FN int dsv4q_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* MXFP4 variant A (mx.c dsv4_mx_fp4_scale_ceil_f32log2). */
DSV4Q_FN uint8_t dsv4q_fp4_scale_ceil_f32log2(float amax)
{
    if (dsv4q_isnan(amax))
        return 0xFF;
    const float lo = dsv4q_float(0x01C00000u); /* 6 * 2^-126 */
    const float a = amax > lo ? amax : lo;
    const float ratio = a * dsv4q_float(0x3E2AAAABu); /* fl(1/6) */
    if (dsv4q_isinf(ratio))
        return 254;
    return (uint8_t)(dsv4q_clampi(dsv4q_ceil_log2_f32(dsv4q_bits(ratio)), -127, 127) + 127);
}

/* MXFP4 SCALING_MODE 1 bit rule (mx.c dsv4_mx_fp4_scale_ceil). */
DSV4Q_FN uint8_t dsv4q_fp4_scale_ceil(float amax)
{
    if (dsv4q_isnan(amax))
        return 0xFF;
    const float lo = dsv4q_float(0x01C00000u);
    const float a = amax > lo ? amax : lo;
    return (uint8_t)((dsv4q_bits(a * dsv4q_float(0x3E2AAAABu)) + 0x7FFFFFu) >> 23);
}

/* Mode 0's u (mx.c even_u): the bit arithmetic on any amax, a NaN read as
 * the canonical 0x7FC00000 (r = +Inf, u = 127). */
DSV4Q_FN int dsv4q_even_u(float amax)
{
    const uint32_t bits = dsv4q_isnan(amax) ? 0x7FC00000u : dsv4q_bits(amax);
    const uint32_t r = (bits + 0x200000u) & 0xFF800000u;
    if ((r & 0x7FFFFFFFu) == 0)
        return -127;
    const int E = (int)((r >> 23) & 0xFFu);
    if (E == 255)
        return 127;
    return dsv4q_clampi(E - 127 - 2, -127, 127);
}

/* OCP's u, 128 for a NaN scale (mx.c ocp_u): floor(log2 amax) - 2 with 0 ->
 * FLT_MIN; a subnormal amax has floor(log2) <= -127, so u < -127 -> -127. */
DSV4Q_FN int dsv4q_ocp_u(float amax)
{
    if (dsv4q_isinf(amax))
        return 128;
    const int field = (int)((dsv4q_bits(amax) >> 23) & 0xFFu);
    if (field == 0) /* 0 -> FLT_MIN: -128; subnormals: <= -129; clamped */
        return -127;
    const int u = field - 127 - 2;
    return u < -127 ? -127 : u;
}

/* MXFP8 exact ceil rule (mx.c dsv4_mx_fp8_scale_ceil): a = (1+f) 2^E, a/448 =
 * ((1+f)/1.75) 2^(E-8): ceil(log2) = E - 8 for 1+f <= 1.75, else E - 7.
 * a = max(amax, FLT_MIN) is normal. */
DSV4Q_FN uint8_t dsv4q_fp8_scale_ceil(float amax)
{
    if (dsv4q_isnan(amax))
        return 0xFF;
    if (dsv4q_isinf(amax))
        return 254;
    const uint32_t b = dsv4q_bits(amax >= dsv4q_float(0x00800000u) ? amax : dsv4q_float(0x00800000u));
    const int E = (int)(b >> 23) - 127;
    const int c = (b & 0x7FFFFFu) <= 0x600000u ? E - 8 : E - 7;
    return (uint8_t)dsv4q_clampi(c + 127, 0, 254);
}

/* MXFP8 with the kernel's fp32 division and a correctly rounded fp32 log2
 * (mx.c dsv4_mx_fp8_scale_ceil_f32log2). */
DSV4Q_FN uint8_t dsv4q_fp8_scale_ceil_f32log2(float amax)
{
    if (dsv4q_isnan(amax))
        return 0xFF;
    const float a = amax >= dsv4q_float(0x00800000u) ? amax : dsv4q_float(0x00800000u);
    const float r = a / 448.0f;
    if (dsv4q_isinf(r))
        return 254;
    return (uint8_t)dsv4q_clampi(dsv4q_ceil_log2_f32(dsv4q_bits(r)) + 127, 0, 254);
}

/* MXFP8 floor rule (mx.c dsv4_mx_fp8_scale_floor): the exponent field of
 * max(amax, FLT_MIN). */
DSV4Q_FN uint8_t dsv4q_fp8_scale_floor(float amax)
{
    if (dsv4q_isnan(amax))
        return 0xFF;
    if (dsv4q_isinf(amax))
        return 254;
    const int field = (int)((dsv4q_bits(amax) >> 23) & 0xFFu);
    return (uint8_t)(field < 1 ? 1 : field);
}

/* fp8_ds_mla scale byte (kvcache.c dsv4_kv_scale_byte): the smallest e with
 * 2^e * fp8_max >= a, a = max(amax, 1e-4) normal; fp8_max = 1.75 * 2^F
 * (448: F = 8, 224: F = 7), so e = E - F for 1+f <= 1.75, else E - F + 1;
 * byte clamp(e + 127, 0, scale_max). */
DSV4Q_FN uint8_t dsv4q_kv_scale_byte(float amax, int F, int scale_max)
{
    const float lo = 1e-4f;
    const uint32_t b = dsv4q_bits(amax > lo ? amax : lo);
    const int E = (int)(b >> 23) - 127;
    const int e = (b & 0x7FFFFFu) <= 0x600000u ? E - F : E - F + 1;
    return (uint8_t)dsv4q_clampi(e + 127, 0, scale_max);
}

/* MXFP4 rules and element encoders by the kernel's variant numbering. */
enum { DSV4Q_FP4_CEIL_F32LOG2 = 0, DSV4Q_FP4_CEIL, DSV4Q_FP4_EVEN, DSV4Q_FP4_OCP };
enum { DSV4Q_ELEM_RNE = 0, DSV4Q_ELEM_THRESHOLD, DSV4Q_ELEM_HALF_AWAY };

DSV4Q_FN uint8_t dsv4q_e2m1(float q, int elem)
{
    return elem == DSV4Q_ELEM_THRESHOLD ? dsv4q_e2m1_threshold(q)
           : elem == DSV4Q_ELEM_HALF_AWAY ? dsv4q_e2m1_half_away(q)
                                          : dsv4q_e2m1_rne(q);
}

/* Scale byte and fp32 multiplier of an MXFP4 block (mx.c
 * dsv4_mx_quant_block_fp4 / fp4_multiplier).  Returns 1 when the block is
 * NaN-filled (amax NaN, or OCP's NaN scale). */
DSV4Q_FN int dsv4q_fp4_block(float amax, int rule, uint8_t *byte, float *mult)
{
    uint8_t b;
    switch (rule) {
    case DSV4Q_FP4_CEIL: b = dsv4q_fp4_scale_ceil(amax); break;
    case DSV4Q_FP4_EVEN: b = (uint8_t)(dsv4q_even_u(amax) + 127); break; /* NaN: 254 (mx.c even_u) */
    case DSV4Q_FP4_OCP: {
        const int u = dsv4q_isnan(amax) ? 128 : dsv4q_ocp_u(amax);
        b = u > 127 ? 0xFF : (uint8_t)(u + 127);
        break;
    }
    default: b = dsv4q_fp4_scale_ceil_f32log2(amax); break;
    }
    *byte = b;
    if (dsv4q_isnan(amax) || (rule == DSV4Q_FP4_OCP && b == 0xFF)) {
        *mult = 0.0f;
        return 1;
    }
    switch (rule) {
    case DSV4Q_FP4_CEIL: *mult = dsv4q_float((uint32_t)(254u - b) << 23); break; /* wraps for 255 */
    case DSV4Q_FP4_EVEN: *mult = dsv4q_pow2(-dsv4q_even_u(amax)); break;
    case DSV4Q_FP4_OCP: *mult = dsv4q_pow2(-dsv4q_ocp_u(amax)); break;
    default: *mult = dsv4q_pow2(127 - (int)b); break;
    }
    return 0;
}

/* ---- the MXFP4 fast element path ----------------------------------------
 *
 * For the blocks that are all finite (the common case) the kernels encode an
 * element without the fp32 product q = fl(x * 2^s) (s = 127 - byte: the
 * multiplier of dsv4q_fp4_block is 2^(127 - byte) under every rule) and
 * without the comparison chain: one FMA rounds a scaled copy of |x| onto
 * the e2m1 grid.  Let e_c = max(floor(log2 |q|), 0) (0, 1 or 2: |q| < 8) and
 * p = |x| 2^(s + 1 - e_c).  The e2m1 grid is spaced 2^(e_c - 1) on
 * [0, 2) (e_c = 0: 0, 0.5, ... 2), [2, 4) and [4, 8), so the RNE code of q is
 * 2 e_c + RNE(p): for e_c = 0, RNE(2q) in {0, 1, 2} (0.25 -> 0, 0.75 -> 2,
 * the even codes); for e_c > 0, p in [2, 4) and RNE(p) in {2, 3, 4} with
 * code parity = RNE(p) parity (the even mantissa).  fmaf(|x|, 2^(s+1-e_c),
 * 2^23 + 2 e_c) computes |x| p exactly and rounds the sum once at the
 * spacing 1 of [2^23, 2^24): its bits are 0x4B000000 + code (the magic
 * 2^23 + 2 e_c is even, so its RNE ties land on the even code).
 *
 * Both constants come from t = max(|x| bits, byte << 23) with the mantissa
 * cleared: its exponent field is max(E, byte) (E = |x|'s field), e_c =
 * max(E - byte, 0), 2^(s+1-e_c) has the field 255 - max(E, byte) (in 1..251:
 * a normal float), and 2^23 + 2 e_c has the bits 0x4B000000 - 2 byte +
 * (t >> 22).  Where the fast path is exact (dsv4q_fp4_fast_ok):
 *   - x finite and |x| <= amax with amax 2^s < 8 (every rule; < 7 for the
 *     ceil rules, whose codes then never pass 7: tests/test_quant_rules.c
 *     checks both on the amax sweep), so e_c <= 2;
 *   - s <= 123 (byte >= 4): a zero or subnormal x has p < 2^-126 2^124 and
 *     code 0, as q = fl(x 2^s) < 2^-3 has; a normal x with q below 2^-126
 *     (where fl rounds) has code 0 either way; elsewhere q is exact.  The
 *     FMA's product is exact, so flushing a subnormal |x| would not change
 *     the result either;
 *   - sat: the even / OCP rules reach q in [7, 8), 2 e_c + RNE(p) = 8 there,
 *     clamped to 7 (e2m1 saturates above 5);
 *   - threshold (numerics.c dsv4_e2m1_from_f32_threshold): the same codes as
 *     RNE for a finite q (its thresholds > 0.25, >= 0.75, > 1.25, >= 1.75,
 *     > 2.5, >= 3.5, > 5 are RNE's ties), but the sign from q < 0: none for
 *     x = -0 and for a q that underflows to -0.  No q underflows when s >= 0
 *     (2^-149 2^s is representable) or, for bf16 values (lowest 2^-133),
 *     when s >= -16; the sign is then that of a nonzero x;
 *   - half away (mx.c DSV4_MX_ELEM_HALF_AWAY, thresholds >=): RNE of p (1 +
 *     2^-10), for values with at most 8 significant bits (bf16) only: p is
 *     then a multiple of 2^-7 p_top (p_top the power of two below p), so a p
 *     off a tie is at least that far from it while p 2^-10 is less; a tie
 *     moves up, nothing else crosses a tie.  The factor 2^k (1 + 2^-10) is
 *     the power's bits + 0x2000.
 * The sign bits are gathered per 8 elements and added to the word. */

/* Whether an all-finite block with scale byte b takes the fast path; bf16:
 * the values are bf16 numbers (at most 8 significant bits, none below 2^-133
 * but zero). */
DSV4Q_FN int dsv4q_fp4_fast_ok(uint32_t byte, int elem, int bf16)
{
    if (byte < 4u || byte > 254u)
        return 0; /* s > 123, or the NaN scale */
    if (elem == DSV4Q_ELEM_THRESHOLD)
        return byte <= (bf16 ? 143u : 127u); /* s >= -16 (bf16), s >= 0 */
    if (elem == DSV4Q_ELEM_HALF_AWAY)
        return bf16;
    return 1;
}

/* The per-block constants: the exponent floor, the factor and magic bases. */
typedef struct {
    uint32_t floor_bits, factor_base, magic_base, sat;
    int elem;
} dsv4q_fp4_fast;

DSV4Q_FN dsv4q_fp4_fast dsv4q_fp4_fast_make(uint32_t byte, int elem, int sat)
{
    dsv4q_fp4_fast f;
    f.floor_bits = byte << 23;
    f.factor_base = 0x7F800000u + (elem == DSV4Q_ELEM_HALF_AWAY ? 0x2000u : 0u);
    f.magic_base = 0x4B000000u - 2u * byte;
    f.sat = (uint32_t)sat;
    f.elem = elem;
    return f;
}

/* 0x4B000000 + the magnitude code of an element whose |x| bits are a (header
 * comment above): bits 3..22 are zero, so a shift by 8 or more leaves only
 * the code. */
DSV4Q_FN uint32_t dsv4q_e2m1_fast_mag(uint32_t a, const dsv4q_fp4_fast *f)
{
    const uint32_t t = (a > f->floor_bits ? a : f->floor_bits) & 0x7F800000u;
    const float factor = dsv4q_float(f->factor_base - t), magic = dsv4q_float(f->magic_base + (t >> 22));
    const uint32_t r = dsv4q_bits(fmaf(dsv4q_float(a), factor, magic));
    return f->sat && r > 0x4B000007u ? 0x4B000007u : r;
}

/* prmt.b32 (PTX ISA, default mode): byte i of the result is byte n & 7 of
 * the pair y:x (x bytes 0..3) where n is nibble i of s, or, when n & 8, that
 * byte's top bit replicated.  The host form is the same rule, for the tests. */
DSV4Q_FN uint32_t dsv4q_prmt(uint32_t x, uint32_t y, uint32_t s)
{
#if defined(__CUDA_ARCH__)
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
    return r;
#else
    const uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t n = (s >> (4 * i)) & 0xFu, b = (uint32_t)(v >> (8 * (n & 7u))) & 0xFFu;
        r |= (n & 8u ? ((b & 0x80u) ? 0xFFu : 0u) : b) << (8 * i);
    }
    return r;
#endif
}

/* Sign bits of 8 elements (bit 4i + 3 for element i) from the bytes whose
 * top bit is each element's sign: pair word j holds elements 2j, 2j + 1 in
 * bytes 1 and 3 (bf16 pairs, prmt selector 0x7531), or, for fp32, word j's
 * byte 3 is element j's.  PRMT: the prmt form (NVIDIA); else shifts. */
DSV4Q_FN uint32_t dsv4q_fp4_signs_bf16(const uint32_t w[4], int prmt)
{
    if (prmt) {
        const uint32_t lo = dsv4q_prmt(w[0], w[1], 0x7531u), hi = dsv4q_prmt(w[2], w[3], 0x7531u);
        /* byte k: all ones where element 2k (even) / 2k + 1 (odd) is negative */
        const uint32_t even = dsv4q_prmt(lo, hi, 0xECA8u), odd = dsv4q_prmt(lo, hi, 0xFDB9u);
        return (even & 0x08080808u) | (odd & 0x80808080u);
    }
    uint32_t s = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t u = w[j] & 0x80008000u; /* bit 15: element 2j, bit 31: 2j + 1 */
        s |= (((u >> 12) | (u >> 24)) & 0x88u) << (8 * j);
    }
    return s;
}

DSV4Q_FN uint32_t dsv4q_fp4_signs_f32(const uint32_t b[8], int prmt)
{
    if (prmt) {
        /* bytes 0, 1: the replicated signs of elements (0, 2), (4, 6), (1, 3), (5, 7) */
        const uint32_t e0 = dsv4q_prmt(b[0], b[2], 0xFBu), e1 = dsv4q_prmt(b[4], b[6], 0xFBu);
        const uint32_t o0 = dsv4q_prmt(b[1], b[3], 0xFBu), o1 = dsv4q_prmt(b[5], b[7], 0xFBu);
        const uint32_t even = dsv4q_prmt(e0, e1, 0x5410u), odd = dsv4q_prmt(o0, o1, 0x5410u);
        return (even & 0x08080808u) | (odd & 0x80808080u);
    }
    uint32_t s = 0;
    for (int i = 0; i < 8; i++)
        s |= ((b[i] >> 28) & 8u) << (4 * i);
    return s;
}

#if defined(__CUDA_ARCH__)
#define DSV4Q_PRMT 1
#else
#define DSV4Q_PRMT 0
#endif

/* The 8 magnitudes (dsv4q_e2m1_fast_mag, element 0 first) as one word: the
 * codes are at most 7 and the junk of each r sits in bits 23..30, which the
 * shifts by 8, 16, 24 push out (byte 0 keeps its low byte). */
DSV4Q_FN uint32_t dsv4q_fp4_pack8(const uint32_t r[8])
{
    const uint32_t p0 = r[0] + (r[1] << 4), p1 = r[2] + (r[3] << 4), p2 = r[4] + (r[5] << 4), p3 = r[6] + (r[7] << 4);
    return (p0 & 0xFFu) + (p1 << 8) + (p2 << 16) + (p3 << 24);
}

/* The 8 codes of four bf16 pair words (element 2j in the low half of w[j]). */
DSV4Q_FN uint32_t dsv4q_fp4_fast_bf16x8(const uint32_t w[4], const dsv4q_fp4_fast *f)
{
    uint32_t r[8], sw[4];
    for (int j = 0; j < 4; j++) {
        r[2 * j] = dsv4q_e2m1_fast_mag((w[j] << 16) & 0x7FFFFFFFu, f);
        r[2 * j + 1] = dsv4q_e2m1_fast_mag(w[j] & 0x7FFF0000u, f);
        /* threshold: no sign on a zero (bit 15 / 31 of the sum: that half is nonzero; no carry between them) */
        sw[j] = f->elem == DSV4Q_ELEM_THRESHOLD ? w[j] & ((w[j] & 0x7FFF7FFFu) + 0x7FFF7FFFu) : w[j];
    }
    return dsv4q_fp4_pack8(r) + dsv4q_fp4_signs_bf16(sw, DSV4Q_PRMT);
}

/* The same for 8 fp32 bit patterns. */
DSV4Q_FN uint32_t dsv4q_fp4_fast_f32x8(const uint32_t b[8], const dsv4q_fp4_fast *f)
{
    uint32_t r[8], sb[8];
    for (int i = 0; i < 8; i++) {
        const uint32_t a = b[i] & 0x7FFFFFFFu;
        r[i] = dsv4q_e2m1_fast_mag(a, f);
        sb[i] = f->elem == DSV4Q_ELEM_THRESHOLD ? b[i] & (a + 0x7FFFFFFFu) : b[i]; /* bit 31 kept for a != 0 */
    }
    return dsv4q_fp4_pack8(r) + dsv4q_fp4_signs_f32(sb, DSV4Q_PRMT);
}

/* amax step over non-NaN elements (mx.c dsv4_mx_amax): m starts NaN ("none
 * seen"), so a block of NaNs keeps NaN; also combines two partial amaxes. */
DSV4Q_FN float dsv4q_amax_step(float m, float a)
{
    a = dsv4q_float(dsv4q_bits(a) & 0x7FFFFFFFu);
    if (!dsv4q_isnan(a) && (dsv4q_isnan(m) || a > m))
        m = a;
    return m;
}

/* The same fold on int32 keys, for the hot loops (three integer operations
 * an element, an integer max across lanes): key |x| bits, -1 for a NaN.
 * Non-negative floats order as their bits, so the max key is the amax; a
 * fold from key -1 ("none seen") that meets only NaNs gives back the
 * 0x7FC00000 that dsv4q_amax_step keeps from its NaN start. */
DSV4Q_FN int32_t dsv4q_amax_key(float x)
{
    const uint32_t a = dsv4q_bits(x) & 0x7FFFFFFFu;
    return a > 0x7F800000u ? -1 : (int32_t)a;
}

DSV4Q_FN float dsv4q_amax_of_key(int32_t k) { return k < 0 ? dsv4q_float(0x7FC00000u) : dsv4q_float((uint32_t)k); }

/* aiter mx_scale_shuffle_idx (mx.c dsv4_mx_scale_shuffle_idx). */
DSV4Q_FN int64_t dsv4q_shuffle_idx(int64_t x, int64_t y, int64_t scaleN_pad)
{
    return (x / 32) * 32 * scaleN_pad + (y / 8) * 256 + (y % 4) * 64 + (x % 16) * 4 + ((y % 8) / 4) * 2 +
           (x % 32) / 16;
}

#endif
