/* quant.h - what the quantization ops (ops/quant/<op>.c) share: the input
 * generator with its special blocks, the bf16/fp32 input readers, the MX
 * row ops' parameters and input, and their pairs of poisoned outputs
 * (ops/quant/quant_common.c).  Semantics: ref/mx.c, ref/fp8quant.c;
 * docs/semantics/quant.md Q1-Q3. */
#ifndef DSV4_OPS_QUANT_H
#define DSV4_OPS_QUANT_H

#include "../ops.h"

/* The generator parameters of every op whose input is one x tensor. */
#define DSV4_QUANT_GEN_PARAMS                                                                                           \
    "gen dtype   str   = bfloat16  generator: input dtype, bfloat16 or float32\n"                                       \
    "gen scale   float = 1         generator: standard deviation of the normal inputs\n"                                \
    "gen special str   = none      generator: none, or all (special blocks first: zero, +-0, NaN, Inf, denormal, amax " \
        "at 2^k/1.5/1.75, codes, ties), or log2_edge (float32: amax/448 a few ulps above 2^k)\n"

/* mxfp4_quant and mxfp8_quant: T rows of W columns, then the generator's. */
#define DSV4_QUANT_MX_PARAMS                                                                 \
    "    T int = 4    rows (tokens)\n"                                                       \
    "    W int = 512  columns, a multiple of 32 (head_dim 512 = 448 + 64, index head 128)\n" \
    DSV4_QUANT_GEN_PARAMS
/* The one input x, [rows, cols] bfloat16 or float32. */
#define DSV4_QUANT_X_INPUTS                         \
    "x bfloat16  [T, W] bfloat16 or float32 rows\n"

/* Adds input x [rows, cols] in the dtype parameter's type, filled from the
 * generator parameters: normal values times scale, and with special = all
 * the special blocks (one per blk elements) first; fp8_sweep adds the eight
 * e4m3fn code-sweep blocks after them. */
int dsv4_quant_gen_x(const dsv4_opctx *c, dsv4_tensors *in, int64_t rows, int64_t cols, int blk,
                     int fp8_sweep, dsv4_status *st);
/* A 2-D bf16 or fp32 input with cols % mult == 0. */
int dsv4_quant_input_2d(const dsv4_tensors *in, const char *name, int64_t mult, const dsv4_tensor **t,
                        dsv4_status *st);
/* The kernel's fp32 view of a bf16/fp32 tensor (malloc'd; NULL and st set
 * when out of memory). */
float *dsv4_quant_as_f32(const dsv4_tensor *x, dsv4_status *st);
/* input_2d of x, then its fp32 view into *f (the caller frees it). */
int dsv4_quant_x_f32(const dsv4_tensors *in, int64_t mult, const dsv4_tensor **x, float **f, dsv4_status *st);

/* fn(ctx, rows, r0, n, st) over chunks of rows [r0, r0 + n) of the 2-D
 * bf16/fp32 x in their fp32 view (rows is [n, cols]; a per-worker buffer
 * for bf16), about grain_elems elements per chunk, the chunks in parallel
 * (ref/parallel.h): no fp32 copy of the whole input. */
typedef int (*dsv4_quant_rows_fn)(void *ctx, const float *rows, int64_t r0, int64_t n, dsv4_status *st);
int dsv4_quant_rows_f32(const dsv4_tensor *x, int64_t grain_elems, dsv4_quant_rows_fn fn, void *ctx,
                        dsv4_status *st);

/* The MX row ops' generator (T, W; W a multiple of 32) and validator. */
int dsv4_quant_mx_generate(const dsv4_opctx *c, dsv4_tensors *in, int fp8_sweep, dsv4_status *st);
int dsv4_quant_mx_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st);

/* Adds two 2-D outputs, codes and their scales, both poisoned (the kernel
 * writes every element). */
int dsv4_quant_add_pair(dsv4_tensors *out, const char *codes, dsv4_dtype codes_dt, const int64_t *codes_shape,
                        const char *scales, dsv4_dtype scales_dt, const int64_t *scales_shape, dsv4_status *st);

#endif
