/* mx.h - MXFP4 / MXFP8 block quantization: e8m0 scale rules, block and row
 * quantizers, dequantizers, and aiter's shuffled scale layout.
 *
 * Public API for every family that quantizes rows to MX formats (the
 * indexer's K store and Q quant use the MXFP4 rules; the attention epilogue
 * and wo_a use MXFP8 of rows).  Semantics: docs/semantics/quant.md Q1
 * (MXFP4) and Q2 (MXFP8), docs/semantics/attention.md A9.2.  Sources are
 * cited beside each declaration.
 *
 * Conventions: a block is 32 consecutive elements of a row.  A scale byte b
 * is e8m0: the block's scale is 2^(b-127); 0xFF is NaN.  Codes of MXFP4 are
 * e2m1 nibbles (bit 3 = sign), packed two per byte with the even element in
 * the low nibble; MXFP8 codes are float8_e4m3fn bytes.  Row layouts: data
 * [T, W] (fp8) or [T, W/2] (fp4x2), scales [T, W/32] uint8, row-major;
 * scale (t, j) covers elements [32j, 32j+32) of row t (docs/semantics/quant.md Q2 "Layouts").
 *
 * amax of a block is max |x_i| over its non-NaN elements (Triton's tl.max
 * does not propagate NaN, docs/semantics/quant.md Q1.1 "inferred"); an
 * all-NaN block has amax NaN.  Every rule but mode 0 maps amax NaN to byte
 * 0xFF (the e8m0 NaN); mode 0's bit arithmetic gives 254 (DSV4_MX_FP4_EVEN).
 * Every element of an all-NaN block then encodes as the element encoder
 * encodes NaN: a convention of ours, since docs/semantics/README.md
 * Q9.5 leaves NaN behaviour open. */
#ifndef DSV4_MX_H
#define DSV4_MX_H

#include <stdint.h>

#include "status.h"

#define DSV4_MX_BLOCK 32

/* ---- scale rules ------------------------------------------------------ */

typedef enum dsv4_mx_rule {
    /* MXFP4, the seeds' indexer K store / Q quant (aiter
     * pa_mqa_logits_mxfp4_cache.py, docs/semantics/indexer.md Q4.1 step 4 "Variant A"):
     * a = max(amax, 6*2^-126); lr = clamp(ceil(log2_f32(fl(a*fl(1/6)))), -127, 127);
     * byte = lr + 127. */
    DSV4_MX_FP4_CEIL_F32LOG2 = 0,
    /* MXFP4 aiter _mxfp4_quant_op SCALING_MODE 1 (docs/semantics/quant.md Q1.1): byte =
     * (bits(fl(max(amax, fl(6*2^-126)) * fl(1/6))) + 0x7FFFFF) >> 23, which
     * equals ceil(log2(max(amax, 6*2^-126)/6)) + 127 for finite amax; an
     * all-zero block gives 1; amax = +Inf gives 255. */
    DSV4_MX_FP4_CEIL,
    /* MXFP4 aiter SCALING_MODE 0 "even" (docs/semantics/quant.md Q1.1, with its correction):
     * r = f32((bits(amax) + 0x200000) & 0xFF800000); u = clamp(floor(log2 r) - 2,
     * -127, 127); byte = u + 127.  All-zero block: byte 0; amax >= 1.75*2^127: 254;
     * an all-NaN block (amax the canonical NaN 0x7FC00000: r = +Inf): 254, never
     * 0xFF (docs/semantics/quant.md Q1.1, Q1.4 item 3). */
    DSV4_MX_FP4_EVEN,
    /* MXFP4 OCP MX v1.0 / microxcaling (docs/semantics/quant.md Q1.4 items 1-3): u = floor(log2 amax)
     * - 2 with amax = 0 replaced by FLT_MIN; u < -127 -> -127; u > 127
     * (Inf) -> byte 0xFF (NaN scale). */
    DSV4_MX_FP4_OCP,
    /* MXFP8 vLLM ROCm _mxfp8_scale_bits (docs/semantics/quant.md Q2 step 1-2), exact:
     * byte = clamp(ceil(log2(max(amax, FLT_MIN)/448)) + 127, 0, 254). */
    DSV4_MX_FP8_CEIL,
    /* The same with the kernel's fp32 arithmetic: fl(a/448) then a correctly
     * rounded fp32 log2 (computed in double and rounded: exact except where
     * the double result lies within 1 double ulp of an fp32 rounding
     * boundary, which log2 of an fp32 input near a power of two never does).
     * The GPU's v_log_f32 may differ from correct rounding (docs/semantics/README.md Q9.2);
     * FTZ is not emulated (docs/semantics/quant.md Q2 "Edge cases": only amax < 448*2^-126 differ). */
    DSV4_MX_FP8_CEIL_F32LOG2,
    /* MXFP8 vLLM mxfp8_utils@00134422 (docs/semantics/attention.md A9.2 [S30]):
     * byte = clamp(floor(log2(max(amax, FLT_MIN))) + 127, 0, 254); values are
     * divided by 2^(byte-127), so they land in [1, 2). */
    DSV4_MX_FP8_FLOOR,
    DSV4_MX_RULE_COUNT
} dsv4_mx_rule;

/* Per-block scale byte of one rule from the block's amax (NaN -> 0xFF, except
 * mode 0: 254). */
uint8_t dsv4_mx_fp4_scale_ceil_f32log2(float amax);
uint8_t dsv4_mx_fp4_scale_ceil(float amax);
uint8_t dsv4_mx_fp4_scale_even(float amax);
uint8_t dsv4_mx_fp4_scale_ocp(float amax);
uint8_t dsv4_mx_fp8_scale_ceil(float amax);
uint8_t dsv4_mx_fp8_scale_ceil_f32log2(float amax);
uint8_t dsv4_mx_fp8_scale_floor(float amax);
/* Dispatch on rule. */
uint8_t dsv4_mx_scale_byte(dsv4_mx_rule rule, float amax);
/* 1 for the MXFP4 rules, 0 for MXFP8. */
int dsv4_mx_rule_is_fp4(dsv4_mx_rule rule);

/* fp32 log2 correctly rounded (via double), for the f32log2 rules. */
float dsv4_log2_f32(float x);
/* max |x_i| over non-NaN elements; NaN if all n are NaN; 0 for n = 0. */
float dsv4_mx_amax(const float *x, int n);

/* ---- element encoders --------------------------------------------------- */

typedef enum dsv4_mx_elem {
    /* aiter bit method / v_cvt_scalef32_pk_fp4 (docs/semantics/quant.md Q1.2): RNE, saturate to 6,
     * -0 -> 0x8 (dsv4_e2m1_from_f32).  For MXFP8: RNE e4m3fn, saturating. */
    DSV4_MX_ELEM_RNE = 0,
    /* Variant A's threshold method (docs/semantics/quant.md Q1.2): as RNE but -0.0 -> 0x0, NaN -> 0x0. */
    DSV4_MX_ELEM_THRESHOLD,
    /* microxcaling round="nearest" (docs/semantics/quant.md Q1.4 item 4): ties away from zero,
     * saturate to 6; sign of x kept (-0 -> 0x8). */
    DSV4_MX_ELEM_HALF_AWAY
} dsv4_mx_elem;

/* e2m1 code of a scaled value under one element rounding. */
uint8_t dsv4_mx_e2m1_encode(float q, dsv4_mx_elem elem);

/* ---- block quantizers ----------------------------------------------------- */

/* Quantize n (<= 32) values of one MXFP4 block: returns the scale byte and
 * writes n unpacked e2m1 codes.  The scaled value is q_i = fl(x_i * m) with
 * m the rule's multiplier: 2^(127-byte) as fp32 bits (254-byte)<<23 for
 * CEIL (so byte 255 gives -Inf, docs/semantics/quant.md Q1.1 mode 1 step 4: garbage codes, as
 * the kernel makes them), exp2(-u) for the others (exact powers of two;
 * 2^-127 is an fp32 subnormal, kept). */
uint8_t dsv4_mx_quant_block_fp4(const float *x, int n, dsv4_mx_rule rule, dsv4_mx_elem elem,
                                uint8_t *codes);
/* Quantize n (<= 32) values of one MXFP8 block: returns the scale byte and
 * writes n float8_e4m3fn bytes.  CEIL rules: q = fl(x * 2^(127-byte))
 * (reciprocal multiply, docs/semantics/quant.md Q2 step 3); FLOOR: q = x / 2^(byte-127)
 * (mxfp8_utils@00134422).  e4m3fn RNE; |q| never exceeds 448*(1+2^-22) for
 * finite x, which rounds to 448; an Inf element saturates to +-448 (our
 * choice: the Triton cast of Inf is not specified). */
uint8_t dsv4_mx_quant_block_fp8(const float *x, int n, dsv4_mx_rule rule, uint8_t *codes);

/* ---- row quantizers (data + scales [T, W/32] uint8 row-major) ------------- */

/* x [T, W] fp32, W % 32 == 0 (and W even); packed [T, W/2]; scales [T, W/32]. */
int dsv4_mx_quant_rows_fp4(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           dsv4_mx_elem elem, uint8_t *packed, uint8_t *scales,
                           dsv4_status *st);
/* x [T, W] fp32, W % 32 == 0; data [T, W] e4m3fn; scales [T, W/32]. */
int dsv4_mx_quant_rows_fp8(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           uint8_t *data, uint8_t *scales, dsv4_status *st);

/* The same two from bf16 rows (exact in fp32), decoded block by block. */
int dsv4_mx_quant_rows_fp4_bf16(const uint16_t *x, int64_t T, int64_t W, dsv4_mx_rule rule, dsv4_mx_elem elem,
                                uint8_t *packed, uint8_t *scales, dsv4_status *st);
int dsv4_mx_quant_rows_fp8_bf16(const uint16_t *x, int64_t T, int64_t W, dsv4_mx_rule rule, uint8_t *data,
                                uint8_t *scales, dsv4_status *st);

/* ---- dequantizers ------------------------------------------------------------ */

/* value = e2m1(code) * 2^(byte-127) (aiter fp4_utils.mxfp4_to_f32 and
 * e8m0_to_f32, docs/semantics/quant.md Q1.3); byte 0xFF -> NaN.  out [T, W] double (exact). */
void dsv4_mx_dequant_rows_fp4(const uint8_t *packed, const uint8_t *scales, int64_t T,
                              int64_t W, double *out);

/* ---- aiter shuffled scale layout (docs/semantics/quant.md Q1.3, dynamic_mxfp4_quant shuffle) --- */

/* Padded scale shape of an [M, N] input: rows ceil(M/256)*256, cols
 * ceil(ceil(N/32)/8)*8. */
void dsv4_mx_shuffled_scale_shape(int64_t M, int64_t N, int64_t *rows, int64_t *cols);
/* Flat index of scale (row x, column y) in the shuffled buffer, scaleN_pad =
 * the padded column count: (x/32)*32*scaleN_pad + (y/8)*256 + (y%4)*64 +
 * (x%16)*4 + ((y%8)/4)*2 + (x%32)/16 (also HIP mx_scale_shuffle_idx). */
int64_t dsv4_mx_scale_shuffle_idx(int64_t x, int64_t y, int64_t scaleN_pad);

#endif
