/* mut_quant.c - mutants of the quantization ops (MX and fp8 group codes
 * with their scales, bit-exact; the fused RMSNorm's codes within a derived
 * flip budget).  Semantics: ref/mx.h, ref/fp8quant.h
 * (docs/semantics/quant.md Q1-Q3). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/quant/quant.h"
#include "../../ref/fp8quant.h"
#include "../../ref/mx.h"
#include "mutant.h"

/* x as the kernel's fp32 view (malloc'd), with subnormals flushed to zero
 * when ftz is set. */
static float *input_f32(mut_call *m, const char *name, int ftz, dsv4_tensor **x)
{
    if (mut_need(m, &m->in, name, x))
        return NULL;
    float *f = dsv4_quant_as_f32(*x, m->st);
    for (int64_t i = 0; f && ftz && i < mut_numel(*x); i++)
        if (fpclassify(f[i]) == FP_SUBNORMAL)
            f[i] = copysignf(0.0f, f[i]);
    return f;
}

/* A row quantizer's tensors: its input x, x as the kernel's fp32 view f
 * (malloc'd) and its two outputs, the codes and their scales. */
typedef struct rows_io {
    dsv4_tensor *x, *codes, *scales;
    float *f;
} rows_io;

/* The outputs named codes and scales and the input "x" (input_f32, ftz as
 * there) of a row quantizer into io; an error when one is missing. */
static int rows_io_get(mut_call *m, const char *codes, const char *scales, int ftz, rows_io *io)
{
    int rc;
    if ((rc = mut_need(m, &m->out, codes, &io->codes)) || (rc = mut_need(m, &m->out, scales, &io->scales)))
        return rc;
    io->f = input_f32(m, "x", ftz, &io->x);
    return io->f ? DSV4_OK : m->st->code ? m->st->code : DSV4_ERUNTIME;
}

/* ---- mxfp4_quant ---- */

typedef enum fp4_bug { FP4_NONE, FP4_TRANSPOSED_SCALES, FP4_NIBBLES_SWAPPED, FP4_SHUFFLE_SKIPPED } fp4_bug;

/* MXFP4 of x with a scale rule and element rounding: codes into x_fp4,
 * the scales (row-major [T, W/32]) placed into scales as bug says. */
static int mxfp4(mut_call *m, dsv4_mx_rule rule, dsv4_mx_elem elem, int ftz, fp4_bug bug)
{
    rows_io io;
    int rc = rows_io_get(m, "x_fp4", "scales", ftz, &io);
    if (rc)
        return rc;
    const int64_t T = io.x->shape[0], W = io.x->shape[1], nb = W / 32;
    uint8_t *rows = malloc((size_t)(T * nb + 1));
    if (!rows) {
        free(io.f);
        return dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
    }
    rc = dsv4_mx_quant_rows_fp4(io.f, T, W, rule, elem, io.codes->data, rows, m->st);
    uint8_t *s = io.scales->data, *c = io.codes->data;
    if (bug == FP4_SHUFFLE_SKIPPED) /* the padded buffer, rows in plain order, padding 0 */
        memset(s, 0, io.scales->nbytes);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < nb; j++)
            s[bug == FP4_TRANSPOSED_SCALES ? j * T + t : t * nb + j] = rows[t * nb + j];
    for (int64_t i = 0; bug == FP4_NIBBLES_SWAPPED && i < mut_numel(io.codes); i++)
        c[i] = (uint8_t)((c[i] >> 4) | (c[i] << 4));
    free(rows);
    free(io.f);
    return rc;
}

/* The default (SCALING_MODE 1, exact ceil bit rule, RNE e2m1) with one bug. */
int mut_mxfp4_half_away(mut_call *m) { return mxfp4(m, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_HALF_AWAY, 0, FP4_NONE); }
int mut_mxfp4_scale_floor(mut_call *m) { return mxfp4(m, DSV4_MX_FP4_OCP, DSV4_MX_ELEM_RNE, 0, FP4_NONE); }
int mut_mxfp4_ftz(mut_call *m) { return mxfp4(m, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, 1, FP4_NONE); }
int mut_mxfp4_transposed_scales(mut_call *m)
{
    return mxfp4(m, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, 0, FP4_TRANSPOSED_SCALES);
}
int mut_mxfp4_nibbles_swapped(mut_call *m)
{
    return mxfp4(m, DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, 0, FP4_NIBBLES_SWAPPED);
}
/* scale_layout=shuffled: the mode-0 math right, the shuffle skipped. */
int mut_mxfp4_shuffle_skipped(mut_call *m)
{
    return mxfp4(m, DSV4_MX_FP4_EVEN, DSV4_MX_ELEM_RNE, 0, FP4_SHUFFLE_SKIPPED);
}

/* ---- mxfp8_quant ---- */

static int mxfp8(mut_call *m, dsv4_mx_rule rule, int ftz)
{
    rows_io io;
    int rc = rows_io_get(m, "data", "scale", ftz, &io);
    if (rc)
        return rc;
    rc = dsv4_mx_quant_rows_fp8(io.f, io.x->shape[0], io.x->shape[1], rule, io.codes->data, io.scales->data, m->st);
    free(io.f);
    return rc;
}

/* The default's fp32 log2 replaced by the exact rule. */
int mut_mxfp8_log2_exact(mut_call *m) { return mxfp8(m, DSV4_MX_FP8_CEIL, 0); }
/* Subnormal inputs flushed to zero before the quant. */
int mut_mxfp8_ftz(mut_call *m) { return mxfp8(m, DSV4_MX_FP8_CEIL_F32LOG2, 1); }

/* ---- fp8_group_quant ---- */

static int group_quant(mut_call *m, dsv4_fp8q_cfg cfg)
{
    rows_io io;
    int rc = rows_io_get(m, "y", "scale", 0, &io);
    if (rc)
        return rc;
    rc = dsv4_fp8q_rows(io.f, io.x->shape[0], io.x->shape[1], &cfg, io.codes->data, io.scales->data, m->st);
    free(io.f);
    return rc;
}

/* fp8=fnuz: max 240 right, the codes cast as OCP e4m3fn. */
int mut_fp8_group_fnuz_as_ocp(mut_call *m)
{
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 240.0f, (int)mut_int(m, "group_size"),
                         mut_int(m, "transpose_scale") != 0};
    return group_quant(m, cfg);
}

/* The aiter HIP default computed the Triton way (amax / 448, x / scale). */
int mut_fp8_group_triton_math(mut_call *m)
{
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_VLLM_TRITON, DSV4_FP8_E4M3FN, 448.0f, (int)mut_int(m, "group_size"),
                         mut_int(m, "transpose_scale") != 0};
    return group_quant(m, cfg);
}

/* transpose_scale = 1 stored row-major [M, K/128]. */
int mut_fp8_group_scale_not_transposed(mut_call *m)
{
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 448.0f, (int)mut_int(m, "group_size"), 0};
    return group_quant(m, cfg);
}

/* ---- fused_qk_rmsnorm_group_quant ---- */

typedef struct rms_model {
    int y_bf16;     /* q's y rounded to bf16 before the quant */
    int one_plus_w; /* weight applied as (1 + w) (the Gemma convention) */
} rms_model;

/* The kernel's fp32 RMSNorm (dsv4_rmsnorm_row_f32) of q and kv, then the
 * aiter HIP group quant of q; kv_out = bf16(y). */
static int rms_model_run(mut_call *m, rms_model md)
{
    dsv4_tensor *q, *qw, *kv, *kw, *qo, *qs, *ko;
    int rc;
    if ((rc = mut_need(m, &m->out, "q_out", &qo)) || (rc = mut_need(m, &m->out, "q_scale", &qs)) ||
        (rc = mut_need(m, &m->out, "kv_out", &ko)))
        return rc;
    float *f[4] = {input_f32(m, "q", 0, &q), input_f32(m, "q_weight", 0, &qw), input_f32(m, "kv", 0, &kv),
                   input_f32(m, "kv_weight", 0, &kw)};
    const int64_t rows = f[0] && f[2] ? q->shape[0] : 0, n1 = f[0] ? q->shape[1] : 0, n2 = f[2] ? kv->shape[1] : 0;
    float *yq = malloc((size_t)(rows * n1 + 1) * sizeof *yq), *yk = malloc((size_t)(n2 + 1) * sizeof *yk);
    if (!f[0] || !f[1] || !f[2] || !f[3] || !yq || !yk) {
        rc = m->st->code ? m->st->code : dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
        goto out;
    }
    for (int64_t i = 0; md.one_plus_w && i < n1; i++)
        f[1][i] += 1.0f;
    for (int64_t i = 0; md.one_plus_w && i < n2; i++)
        f[3][i] += 1.0f;
    for (int64_t r = 0; r < rows; r++) {
        dsv4_rmsnorm_row_f32(f[0] + r * n1, f[1], n1, (float)mut_float(m, "q_epsilon"), yq + r * n1);
        for (int64_t i = 0; md.y_bf16 && i < n1; i++)
            yq[r * n1 + i] = dsv4_round_bf16(yq[r * n1 + i]);
        dsv4_rmsnorm_row_f32(f[2] + r * n2, f[3], n2, (float)mut_float(m, "kv_epsilon"), yk);
        for (int64_t i = 0; i < n2; i++)
            ((uint16_t *)ko->data)[r * n2 + i] = dsv4_bf16_from_f32(yk[i]);
    }
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 448.0f, (int)mut_int(m, "group_size"),
                         mut_int(m, "transpose_scale") != 0};
    rc = dsv4_fp8q_rows(yq, rows, n1, &cfg, qo->data, qs->data, m->st);
out:
    for (int k = 0; k < 4; k++)
        free(f[k]);
    free(yq), free(yk);
    return rc;
}

/* A correct kernel: fp32 RMSNorm (sequential FMA sum), must pass both the
 * ideal default and the faithful mode. */
int mut_qk_rmsnorm_fp32_model(mut_call *m) { return rms_model_run(m, (rms_model){0}); }
int mut_qk_rmsnorm_y_bf16(mut_call *m) { return rms_model_run(m, (rms_model){.y_bf16 = 1}); }
int mut_qk_rmsnorm_weight_one_plus(mut_call *m) { return rms_model_run(m, (rms_model){.one_plus_w = 1}); }
int mut_qk_rmsnorm_kv_bias_1ulp(mut_call *m) { return mut_run_reference_biased(m, "kv_out"); }
