/* fp8quant.h - FP8 per-1x128 group quantization (aiter HIP and vLLM Triton
 * rules) and fused_qk_rmsnorm_group_quant.  Semantics:
 * docs/semantics/quant.md Q3 (Q3.1 aiter HIP per_group_quant_hip, Q3.2
 * vLLM per_token_group_quant_fp8, Q3.3 the fused RMSNorm + quant).  Plain
 * arrays, row-major. */
#ifndef DSV4_FP8QUANT_H
#define DSV4_FP8QUANT_H

#include <stdint.h>

#include "numerics.h"
#include "status.h"

typedef enum dsv4_fp8q_impl {
    /* aiter HIP (docs/semantics/quant.md Q3.1): amax = max(1e-10, max|x|); scale = fl(amax * fl(1/MAX));
     * inv = fl(1 / scale); q = cvt(clamp(fl(x * inv), -MAX, MAX)), RNE. */
    DSV4_FP8Q_AITER_HIP = 0,
    /* vLLM Triton (docs/semantics/quant.md Q3.2): absmax = max(max|y|, 1e-10); scale = fl(absmax / MAX);
     * q = cvt(clamp(fl(y / scale), -MAX, MAX)). */
    DSV4_FP8Q_VLLM_TRITON
} dsv4_fp8q_impl;

typedef struct dsv4_fp8q_cfg {
    dsv4_fp8q_impl impl;
    dsv4_fp8_kind kind; /* e4m3fn or e4m3fnuz codes */
    float fp8_max;      /* 448 (fn); 240 (aiter fnuz, gfx942); 224 (vLLM fnuz) */
    int group;          /* elements per scale (128) */
    int transpose_scale; /* 0: scale [M, K/g] row-major; 1: element (m, j) at j*M + m */
} dsv4_fp8q_cfg;

/* The default fp8 max of an impl and kind (docs/semantics/quant.md Q3.1 step 2, Q3.2 step 2). */
float dsv4_fp8q_default_max(dsv4_fp8q_impl impl, dsv4_fp8_kind kind);

/* One group of n fp32 values: returns the fp32 scale, writes n fp8 codes. */
float dsv4_fp8q_group(const float *x, int n, const dsv4_fp8q_cfg *cfg, uint8_t *codes);

/* x [M, K] fp32 (the kernel's fp32 view of its bf16/fp16 input), K % group == 0;
 * y [M, K] fp8 codes; scale [M*K/group] fp32 in cfg's layout. */
int dsv4_fp8q_rows(const float *x, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                   float *scale, dsv4_status *st);

/* The same from bf16 rows (exact in fp32; group <= 1024). */
int dsv4_fp8q_rows_bf16(const uint16_t *x, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                        float *scale, dsv4_status *st);

/* RMSNorm of fused_qk_rmsnorm_group_quant (docs/semantics/quant.md Q3.3 steps 1-4, 8), one row of n:
 * ideal: y = x * (1/sqrt(sum(x^2)/n + eps)) * w in double;
 * faithful: the kernel's fp32 order: ss by sequential fp32 FMA, rcp =
 * fl(1/fl(sqrt(fl(fl(ss/n) + eps)))) (v_rsq is approximate, not emulated),
 * y = fl(fl(x * rcp) * w). */
void dsv4_rmsnorm_row_ideal(const float *x, const float *w, int64_t n, double eps, double *y);
/* The ideal of `rows` consecutive rows of n (x and y [rows, n]). */
void dsv4_rmsnorm_rows_ideal(const float *x, const float *w, int64_t rows, int64_t n, double eps, double *y);
/* The same rounded to fp32 ((float) of each double y). */
void dsv4_rmsnorm_rows_ideal_f32(const float *x, const float *w, int64_t rows, int64_t n, double eps, float *y);
/* The ideal of bf16 rows, in two steps: rcp[k] = 1/sqrt(ss_k/n + eps) for
 * `rows` rows of n (ss_k the serial double sum of squares, as
 * dsv4_rmsnorm_rows_ideal; scratch: 16 n floats), then one row's
 * y = x * rcp * w in double (w: the weight widened to double), or (float)
 * of it.  The same bits as dsv4_rmsnorm_rows_ideal(_f32) on the rows as
 * fp32. */
void dsv4_rmsnorm_bf16_rcp(const uint16_t *x, int64_t rows, int64_t n, double eps, double *rcp, float *scratch);
void dsv4_rmsnorm_bf16_row(const uint16_t *x, const double *w, double rcp, int64_t n, double *y);
void dsv4_rmsnorm_bf16_row_f32(const uint16_t *x, const double *w, double rcp, int64_t n, float *y);
void dsv4_rmsnorm_row_f32(const float *x, const float *w, int64_t n, float eps, float *y);

#endif
