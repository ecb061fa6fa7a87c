/* fp8_group_quant.c - FP8 per-1x128 group quant: an fp32 scale per group,
 * e4m3 codes (docs/semantics/quant.md Q3.1, Q3.2).  Reference:
 * ref/fp8quant.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/fp8quant.h"
#include "quant.h"

/* What a variant changes: the implementation's arithmetic and the fp8
 * format (its max follows from both, dsv4_fp8q_default_max). */
typedef struct gq_rule {
    dsv4_fp8q_impl impl;
    dsv4_fp8_kind kind;
} gq_rule;

static const dsv4_variant gq_variants[] = {
    {"default",
     "aiter HIP per_group_quant_hip on gfx950 "
     "(docs/semantics/quant.md Q3.1, aiter csrc/kernels/quant_kernels.cu@e4048607): scale = fl(amax * fl(1/448)), "
     "reciprocal multiply, clamp +-448, RNE e4m3fn",
     &(const gq_rule){DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN}},
    {"fp8=fnuz", "the same on gfx942: e4m3fnuz, max 240 (docs/semantics/quant.md Q3.1 step 2)",
     &(const gq_rule){DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FNUZ}},
    {"impl=triton",
     "vLLM Triton per_token_group_quant_fp8 (docs/semantics/quant.md Q3.2, fp8_utils.py@007d5005): scale = amax / 448, "
     "q = clamp(x / scale), e4m3fn",
     &(const gq_rule){DSV4_FP8Q_VLLM_TRITON, DSV4_FP8_E4M3FN}},
    {"impl=triton,fp8=fnuz", "vLLM Triton on fnuz platforms: max 224 (get_fp8_min_max), e4m3fnuz "
                             "(docs/semantics/quant.md Q3.2 step 2)",
     &(const gq_rule){DSV4_FP8Q_VLLM_TRITON, DSV4_FP8_E4M3FNUZ}},
    {NULL, NULL, NULL},
};

static const char gq_params[] =
    "    M               int = 4    rows\n"
    "    K               int = 512  columns, a multiple of group_size\n"
    "    group_size      int = 128  elements per scale (per_1x128)\n"
    "    transpose_scale int = 0    1: scale stored [K/128, M] (element (m, g) at g*M + m)\n"
    DSV4_QUANT_GEN_PARAMS;

static const char gq_outputs[] =
    "y     float8_e4m3fn  [M, K] fp8 codes (e4m3fnuz in the fnuz variants)\n"
    "scale float32        [M, K/128] fp32, or [K/128, M] with transpose_scale\n";
static const char gq_inputs[] = DSV4_QUANT_X_INPUTS;

static void gq_cfg(const dsv4_opctx *c, dsv4_fp8q_cfg *cfg)
{
    const gq_rule *r = c->rule;
    cfg->impl = r->impl;
    cfg->kind = r->kind;
    cfg->fp8_max = dsv4_fp8q_default_max(cfg->impl, cfg->kind);
    cfg->group = (int)dsv4_params_int(c->params, "group_size");
    cfg->transpose_scale = dsv4_params_int(c->params, "transpose_scale") != 0;
}

/* The variant's configuration and the input x it applies to. */
static int gq_input(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_fp8q_cfg *cfg, const dsv4_tensor **x,
                    dsv4_status *st)
{
    gq_cfg(c, cfg);
    return dsv4_quant_input_2d(in, "x", cfg->group, x, st);
}

static int gq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const int64_t g = dsv4_params_int(c->params, "group_size");
    const int64_t M = dsv4_params_int(c->params, "M"), K = dsv4_params_int(c->params, "K");
    if (g <= 0 || g > 4096 || M < 0 || K < 0 || K % g != 0)
        return dsv4_fail(st, DSV4_EINPUT, "M, K = %" PRId64 ", %" PRId64 ", group_size %" PRId64
                         ": K must be a multiple of group_size", M, K, g);
    return dsv4_quant_gen_x(c, in, M, K, (int)g, 1, st);
}

static int gq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *x;
    int64_t g = dsv4_params_int(c->params, "group_size");
    if (g <= 0 || g > 4096)
        return dsv4_fail(st, DSV4_EINPUT, "group_size %" PRId64 " out of range", g);
    int rc = dsv4_quant_input_2d(in, "x", g, &x, st);
    if (rc)
        return rc;
    if (x->shape[0] != dsv4_params_int(c->params, "M") || x->shape[1] != dsv4_params_int(c->params, "K"))
        return dsv4_fail(st, DSV4_EINPUT, "input 'x' shape does not match M, K");
    return DSV4_OK;
}

static int gq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_tensor *x;
    dsv4_fp8q_cfg cfg;
    int rc = gq_input(c, in, &cfg, &x, st);
    if (rc)
        return rc;
    int64_t G = x->shape[1] / cfg.group;
    int64_t ss[2] = {cfg.transpose_scale ? G : x->shape[0], cfg.transpose_scale ? x->shape[0] : G};
    return dsv4_quant_add_pair(out, "y", cfg.kind == DSV4_FP8_E4M3FN ? DSV4_F8E4M3FN : DSV4_F8E4M3FNUZ,
                               x->shape, "scale", DSV4_F32, ss, st);
}

static int gq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_tensor *x;
    dsv4_fp8q_cfg cfg;
    int rc = gq_input(c, in, &cfg, &x, st);
    if (rc)
        return rc;
    uint8_t *y = dsv4_tensors_find(out, "y")->data;
    float *scale = dsv4_tensors_find(out, "scale")->data;
    if (x->dtype == DSV4_BF16 && cfg.group <= 1024) /* bf16 is exact in fp32: the same rows */
        return dsv4_fp8q_rows_bf16(x->data, x->shape[0], x->shape[1], &cfg, y, scale, st);
    float *f = dsv4_quant_as_f32(x, st);
    if (!f)
        return st->code;
    rc = dsv4_fp8q_rows(f, x->shape[0], x->shape[1], &cfg, y, scale, st);
    free(f);
    return rc;
}

static int gq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)in, (void)st;
    int codes = strcmp(output, "y") == 0;
    dsv4_policy_mx(pol, codes ? "scale" : "y", (int)dsv4_params_int(c->params, "group_size"),
                   "bit-exact (docs/semantics/numerics.md Q8: reproducible if division is IEEE): fp32 scales exact, "
                   "codes 0 steps");
    pol->scale_transposed = dsv4_params_int(c->params, "transpose_scale") != 0;
    return DSV4_OK;
}

const dsv4_op dsv4_op_fp8_group_quant = {
    .name = "fp8_group_quant",
    .summary = "FP8 per-1x128 group quant: fp32 scale per 128, e4m3 codes",
    .source = "ROCm/aiter:csrc/kernels/quant_kernels.cu@e4048607; "
              "vllm-project/vllm:vllm/model_executor/layers/quantization/utils/fp8_utils.py@007d5005 "
              "(docs/semantics/quant.md Q3.1, Q3.2)",
    DSV4_OP_TABLES(gq),
    .generate = gq_generate,
    .validate = gq_validate,
    .alloc_outputs = gq_alloc,
    .reference = gq_reference,
    .policy = gq_policy,
};
