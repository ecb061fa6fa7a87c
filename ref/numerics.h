/* numerics.h - bit-exact dtype codecs: bfloat16, float16, float8 e4m3fn and
 * e4m3fnuz, float8 e8m0fnu, float4 e2m1 (and its two-per-byte packing).
 *
 * Semantics and sources: docs/semantics/numerics.md A1 and
 * docs/semantics/quant.md Q1.2, Q1.3 and Q1.4.  All
 * encoders round to nearest, ties to even (RNE) unless the name says
 * otherwise.  Pure functions, no state, no allocation. */
#ifndef DSV4_NUMERICS_H
#define DSV4_NUMERICS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* Bit casts (memcpy based, no aliasing UB). */
uint32_t dsv4_f32_bits(float x);
float dsv4_f32_from_bits(uint32_t b);

/* bfloat16: RNE from fp32; NaN stays NaN (quiet, sign kept); overflow -> Inf. */
uint16_t dsv4_bf16_from_f32(float x);
float dsv4_bf16_to_f32(uint16_t h);
/* n bf16 widened to fp32 (exact: the bits shifted up), eight at a time where
 * AVX2 runs (ref/simd.h). */
void dsv4_bf16_row_to_f32(const uint16_t *h, int64_t n, float *f);
/* fp32 -> bf16 -> fp32 in one call: the "round to bf16" step of the kernels. */
float dsv4_round_bf16(float x);

/* IEEE binary16: RNE from fp32, overflow -> Inf, subnormals kept. */
uint16_t dsv4_f16_from_f32(float x);
float dsv4_f16_to_f32(uint16_t h);

/* float8 e4m3 (OCP "fn": bias 7, max 448, NaN 0x7F/0xFF, no Inf, has -0)
 * and e4m3fnuz (bias 8, max 240, NaN only 0x80, no -0, no Inf). */
typedef enum dsv4_fp8_kind { DSV4_FP8_E4M3FN = 0, DSV4_FP8_E4M3FNUZ = 1 } dsv4_fp8_kind;

/* Largest finite magnitude: 448 (fn) or 240 (fnuz). */
float dsv4_fp8_max(dsv4_fp8_kind k);
/* RNE from fp32.  saturate != 0: |x| beyond max (and +-Inf) clamps to +-max.
 * saturate == 0: values that round beyond max and +-Inf give NaN (fn: 0x7F
 * with the sign bit of x; fnuz: 0x80), as torch's cast does.  NaN -> NaN.
 * fnuz has no -0: -0 and negative values that round to zero give 0x00. */
uint8_t dsv4_fp8_from_f32(float x, dsv4_fp8_kind k, int saturate);
float dsv4_fp8_to_f32(uint8_t b, dsv4_fp8_kind k);

/* float8 e8m0fnu: 2^(b-127); 0x00 = 2^-127 (an fp32 subnormal); 0xFF = NaN. */
float dsv4_e8m0_to_f32(uint8_t b);
double dsv4_e8m0_to_f64(uint8_t b);
/* torch's fp32 -> float8_e8m0fnu cast (docs/semantics/quant.md Q10): nearest power
 * of two with the significand rounded half up (1.5 -> 2, 0.75 -> 1, 3 -> 4);
 * the sign is ignored; 0 and values up to 2^-127 -> 0x00; fp32 subnormals
 * above 2^-127 -> 0x01 (torch rounds the exponent field); NaN, Inf and
 * >= 1.5*2^127 -> 0xFF. */
uint8_t dsv4_e8m0_from_f32_torch(float x);

/* float4 e2m1: codes 0..15, bit 3 = sign, magnitudes
 * {0, 0.5, 1, 1.5, 2, 3, 4, 6}.  dsv4_e2m1_from_f32 is the aiter bit method
 * (docs/semantics/quant.md Q1.2): nearest, ties to the even code, |x| > 6 -> 6,
 * +-Inf -> +-6, sign bit = sign of x (so -0.0 -> 0x8).  For NaN it returns
 * the bit method's payload-dependent result (0x7FC00000 -> 0x3). */
uint8_t dsv4_e2m1_from_f32(float x);
/* Variant A's threshold method (docs/semantics/quant.md Q1.2): equal to the above except
 * -0.0 -> 0x0 and NaN -> 0x0. */
uint8_t dsv4_e2m1_from_f32_threshold(float x);
float dsv4_e2m1_to_f32(uint8_t code);

/* Packing: byte j = code(x[2j]) | code(x[2j+1]) << 4 (docs/semantics/quant.md Q1.2). */
static inline uint8_t dsv4_e2m1_pack(uint8_t even, uint8_t odd)
{
    return (uint8_t)((even & 0xFu) | (uint8_t)((odd & 0xFu) << 4));
}
static inline uint8_t dsv4_e2m1_lo(uint8_t byte) { return (uint8_t)(byte & 0xFu); }
static inline uint8_t dsv4_e2m1_hi(uint8_t byte) { return (uint8_t)(byte >> 4); }

/* Units in the last place of dtype dt at magnitude |x| (the spacing of
 * representable values of that dtype around x), for the comparator.
 * Integer dtypes give 1.  Returns 0 for DSV4_BYTES. */
double dsv4_ulp(dsv4_dtype dt, double x);

#endif
