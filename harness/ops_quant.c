/* ops_quant.c - registry entries of the quantization ops: mxfp4_quant,
 * mxfp8_quant, fp8_group_quant, fused_qk_rmsnorm_group_quant.
 * Semantics: ref/mx.c, ref/fp8quant.c; spec quant_and_indexer.md 1-3. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/fp8quant.h"
#include "../ref/mx.h"
#include "../ref/numerics.h"
#include "../ops/ops.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Input generation shared by the four ops                             */

/* Special blocks, written one per block (of blk elements) from the start of
 * the tensor when special = "all" (issue: zero, NaN, Inf, denormal and +-0
 * blocks; amax at powers of two and at significands 1.5 and 1.75; every
 * code and every rounding tie).  All values are exact in bf16. */
enum { SP_ZERO, SP_SIGNED_ZERO, SP_ONE_NAN, SP_ALL_NAN, SP_POS_INF, SP_NEG_INF, SP_DENORMAL,
       SP_POW2, SP_SIG_1_5, SP_SIG_1_75, SP_ABOVE_6, SP_AT_448, SP_ABOVE_448, SP_BELOW_POW2,
       SP_E2M1_CODES, SP_E2M1_NEG, SP_FIXED_COUNT };

/* The e2m1 grid and its ties (spec 1.2), scaled by 4: every code and tie. */
static const float e2m1_and_ties[15] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f,
                                        2, 2.5f, 3, 3.5f, 4, 5, 6};

/* Value i of special block k (filler u in (-1, 1) for "ordinary" elements). */
static float special_value(int k, int i, int blk, float u)
{
    switch (k) {
    case SP_ZERO: return 0.0f;
    case SP_SIGNED_ZERO: return (i & 1) ? -0.0f : 0.0f;
    case SP_ONE_NAN: return i == 3 ? NAN : u;
    case SP_ALL_NAN: return NAN;
    case SP_POS_INF: return i == 5 ? INFINITY : u;
    case SP_NEG_INF: return i == 5 ? -INFINITY : u;
    case SP_DENORMAL: /* bf16 subnormals m * 2^-133 */
        return ldexpf((float)(1 + i % 127), -133) * ((i & 1) ? -1.0f : 1.0f);
    case SP_POW2: return i == 7 ? -8.0f : u;               /* amax = 2^3, negative */
    case SP_SIG_1_5: return i == 7 ? 12.0f : u;            /* 1.5 * 2^3 */
    case SP_SIG_1_75: return i == 7 ? 14.0f : u;           /* 1.75 * 2^3 */
    case SP_ABOVE_6: return i == 7 ? 24.125f : u;          /* 6*4 + one bf16 ulp */
    case SP_AT_448: return i == 7 ? 448.0f : u * 100.0f;   /* MXFP8 / fp8 boundary */
    case SP_ABOVE_448: return i == 7 ? 450.0f : u * 100.0f; /* 448 + one bf16 ulp */
    case SP_BELOW_POW2: return i == 7 ? 15.9375f : u;      /* 2^4 - one bf16 ulp */
    case SP_E2M1_CODES:
    case SP_E2M1_NEG: { /* codes and ties times 4 (scale 2^2 under every rule) */
        float v = i < 15 ? e2m1_and_ties[i] : i < 30 ? -e2m1_and_ties[i - 15] : (i == 30 ? -0.0f : 6.0f);
        (void)blk;
        return 4.0f * (k == SP_E2M1_NEG ? -v : v);
    }
    default: return u;
    }
}

/* e4m3fn code sweeps: block b of 8 holds positive codes 32*(b%4) .. +31 (as
 * values, ties when b >= 4: midpoints to the next code), each block with
 * 448 planted at element 31 so that the MXFP8 scale is 2^0. */
static float e4m3_sweep_value(int b, int i)
{
    int c = 32 * (b % 4) + i;
    if (i == 31 || c >= 0x7E)
        return 448.0f;
    float v = dsv4_fp8_to_f32((uint8_t)c, DSV4_FP8_E4M3FN);
    if (b >= 4)
        v = 0.5f * (v + dsv4_fp8_to_f32((uint8_t)(c + 1), DSV4_FP8_E4M3FN));
    return (i & 1) ? -v : v;
}

#define GEN_PARAMS_COMMON                                                                        \
    {"dtype", DSV4_P_STR, "bfloat16", "generator: input dtype, bfloat16 or float32", 1},         \
    {"scale", DSV4_P_FLOAT, "1", "generator: standard deviation of the normal inputs", 1},      \
    {"special", DSV4_P_STR, "none", "generator: none, or all (special blocks first: zero, "     \
                                    "+-0, NaN, Inf, denormal, amax at 2^k/1.5/1.75, codes, ties)", 1}

/* Fill x [rows, cols] (dtype bf16 or f32) from the generator params. */
static int fill_input(const dsv4_opctx *c, const char *stream, dsv4_tensor *x, int blk,
                      int fp8_sweep, dsv4_status *st)
{
    const char *sp = dsv4_params_str(c->params, "special");
    const double sd = dsv4_params_float(c->params, "scale");
    const int special = strcmp(sp, "all") == 0;
    if (!special && strcmp(sp, "none") != 0)
        return dsv4_fail(st, DSV4_EINPUT, "special = '%s': expected none or all", sp);
    const int64_t n = dsv4_tensor_numel(x);
    const int nsp = SP_FIXED_COUNT + (fp8_sweep ? 8 : 0);
    if (special && n < (int64_t)nsp * blk)
        return dsv4_fail(st, DSV4_EINPUT, "special = all needs %d blocks of %d, the input has %" PRId64
                         " elements", nsp, blk, n);
    dsv4_rng rng, frng;
    dsv4_rng_init(&rng, c->seed, stream);
    char fs[64];
    snprintf(fs, sizeof fs, "%s.special", stream);
    dsv4_rng_init(&frng, c->seed, fs);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(dsv4_rng_normal(&rng) * sd);
        int64_t b = i / blk;
        if (special && b < nsp) {
            float u = (float)(2.0 * dsv4_rng_uniform(&frng) - 1.0);
            u = dsv4_round_bf16(u);
            v = b < SP_FIXED_COUNT ? special_value((int)b, (int)(i % blk), blk, u)
                                   : e4m3_sweep_value((int)(b - SP_FIXED_COUNT), (int)(i % blk % 32));
        }
        if (x->dtype == DSV4_BF16)
            ((uint16_t *)x->data)[i] = dsv4_bf16_from_f32(v);
        else
            ((float *)x->data)[i] = v;
    }
    return DSV4_OK;
}

static int input_dtype(const dsv4_opctx *c, dsv4_dtype *dt, dsv4_status *st)
{
    const char *s = dsv4_params_str(c->params, "dtype");
    if (strcmp(s, "bfloat16") == 0)
        *dt = DSV4_BF16;
    else if (strcmp(s, "float32") == 0)
        *dt = DSV4_F32;
    else
        return dsv4_fail(st, DSV4_EINPUT, "dtype = '%s': expected bfloat16 or float32", s);
    return DSV4_OK;
}

/* A 2-D bf16 or fp32 input with cols % mult == 0. */
static int input_2d(const dsv4_tensors *in, const char *name, int64_t mult, const dsv4_tensor **t,
                    dsv4_status *st)
{
    const dsv4_tensor *x = dsv4_tensors_get(in, name);
    if (!x)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is missing", name);
    if (x->dtype != DSV4_BF16 && x->dtype != DSV4_F32)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is %s, expected bfloat16 or float32", name,
                         dsv4_dtype_name(x->dtype));
    if (x->ndim != 2 || x->shape[1] % mult != 0)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' must be 2-D with columns a multiple of %" PRId64,
                         name, mult);
    *t = x;
    return DSV4_OK;
}

/* The kernel's fp32 view of a bf16/fp32 tensor (malloc'd). */
static float *as_f32(const dsv4_tensor *x, dsv4_status *st)
{
    int64_t n = dsv4_tensor_numel(x);
    float *f = malloc(n ? (size_t)n * sizeof *f : 1);
    if (!f) {
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        f[i] = x->dtype == DSV4_BF16 ? dsv4_bf16_to_f32(((const uint16_t *)x->data)[i])
                                     : ((const float *)x->data)[i];
    return f;
}

static void policy_mx(dsv4_policy *pol, const char *companion, int block, const char *why)
{
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_MX;
    pol->output_dtype = DSV4_DT_NONE;
    pol->block = block;
    snprintf(pol->companion, sizeof pol->companion, "%s", companion);
    snprintf(pol->rule, sizeof pol->rule, "mx: %s", why);
}

/* ------------------------------------------------------------------ */
/* mxfp4_quant                                                          */

static const char *const mxfp4_variants[] = {
    "default", "scale_rule=ceil_log2_f32,e2m1=threshold", "scale_rule=even", "scale_rule=ocp",
    "scale_rule=ocp,round=half_away", "scale_rule=even,scale_layout=shuffled", NULL};
static const char *const mxfp4_variant_docs[] = {
    "the seeds' indexer K store / Q quant: the seed imports aiter fusions/k_norm_rope_mxfp4_cache "
    "and rope/q_rope_mxfp4_quant (shared/seeds/000 _aiter_indexer_cache_ops; spec 4 variant B), "
    "i.e. _mxfp4_quant_op SCALING_MODE 1 (spec 1.1): exact ceil bit rule, zero block -> byte 1, "
    "RNE e2m1 bit method",
    "spec 4.1 variant A (aiter pa_mqa_logits_mxfp4_cache.py@034adb58): "
    "ceil(log2_f32(max(amax, 6*2^-126)/6)) scale, threshold e2m1 (-0 -> 0x0)",
    "aiter SCALING_MODE 0 / fp4_utils.dynamic_mxfp4_quant (spec 1.1): round amax up at 1.75, "
    "floor(log2) - 2, clamp; RNE e2m1",
    "OCP MX v1.0 (microxcaling, spec 1.4): floor(log2 amax) - 2, zero -> byte 0, Inf -> NaN scale; RNE e2m1",
    "microxcaling default round=nearest (spec 1.4 item 4): OCP scale, e2m1 ties away from zero",
    "aiter dynamic_mxfp4_quant(shuffle=True) (spec 1.3): mode-0 math, scales padded to "
    "[ceil(M/256)*256, ceil(N/256)*8] in the mx_scale_shuffle_idx order, padding 0",
};

static const dsv4_mx_rule mxfp4_rule[] = {DSV4_MX_FP4_CEIL, DSV4_MX_FP4_CEIL_F32LOG2,
                                          DSV4_MX_FP4_EVEN, DSV4_MX_FP4_OCP, DSV4_MX_FP4_OCP,
                                          DSV4_MX_FP4_EVEN};
static const dsv4_mx_elem mxfp4_elem[] = {DSV4_MX_ELEM_RNE, DSV4_MX_ELEM_THRESHOLD,
                                          DSV4_MX_ELEM_RNE, DSV4_MX_ELEM_RNE,
                                          DSV4_MX_ELEM_HALF_AWAY, DSV4_MX_ELEM_RNE};
#define MXFP4_SHUFFLED 5

static const dsv4_param_spec mx_params[] = {
    {"T", DSV4_P_INT, "4", "rows (tokens)", 0},
    {"W", DSV4_P_INT, "512", "columns, a multiple of 32 (head_dim 512 = 448 + 64, index head 128)", 0},
    GEN_PARAMS_COMMON,
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec mx_inputs[] = {
    {"x", DSV4_BF16, DSV4_DT_NONE, "[T, W] bfloat16 or float32 rows"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec mxfp4_outputs[] = {
    {"x_fp4", DSV4_F4E2M1X2, DSV4_DT_NONE, "[T, W/2] e2m1 codes, even element in the low nibble"},
    {"scales", DSV4_F8E8M0, DSV4_DT_NONE, "[T, W/32] e8m0 (shuffled variant: padded, shuffled)"},
    {NULL, 0, 0, NULL},
};

static int mx_generate(const dsv4_opctx *c, dsv4_tensors *in, int fp8, dsv4_status *st)
{
    dsv4_dtype dt;
    int rc = input_dtype(c, &dt, st);
    if (rc)
        return rc;
    int64_t shape[2] = {dsv4_params_int(c->params, "T"), dsv4_params_int(c->params, "W")};
    if (shape[0] < 0 || shape[1] < 0 || shape[1] % 32 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "T = %" PRId64 ", W = %" PRId64 ": W must be a multiple of 32",
                         shape[0], shape[1]);
    dsv4_tensor *x;
    if ((rc = dsv4_tensors_add(in, "x", dt, 2, shape, &x, st)))
        return rc;
    return fill_input(c, "x", x, 32, fp8, st);
}

static int mxfp4_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return mx_generate(c, in, 0, st);
}

static int mx_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    if (x->shape[0] != dsv4_params_int(c->params, "T") || x->shape[1] != dsv4_params_int(c->params, "W"))
        return dsv4_fail(st, DSV4_EINPUT, "input 'x' is [%" PRId64 ", %" PRId64 "], params say T, W = %"
                         PRId64 ", %" PRId64, x->shape[0], x->shape[1], dsv4_params_int(c->params, "T"),
                         dsv4_params_int(c->params, "W"));
    return DSV4_OK;
}

static int mxfp4_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                       dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    int64_t ds[2] = {x->shape[0], x->shape[1] / 2}, ss[2] = {x->shape[0], x->shape[1] / 32};
    if (c->variant == MXFP4_SHUFFLED)
        dsv4_mx_shuffled_scale_shape(x->shape[0], x->shape[1], &ss[0], &ss[1]);
    dsv4_tensor *d, *s;
    if ((rc = dsv4_tensors_add(out, "x_fp4", DSV4_F4E2M1X2, 2, ds, &d, st)) ||
        (rc = dsv4_tensors_add(out, "scales", DSV4_F8E8M0, 2, ss, &s, st)))
        return rc;
    dsv4_poison(d);
    dsv4_poison(s);
    return DSV4_OK;
}

static int mxfp4_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                           dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    float *f = as_f32(x, st);
    if (!f)
        return st->code;
    const int64_t T = x->shape[0], W = x->shape[1], nb = W / 32;
    dsv4_tensor *s = dsv4_tensors_find(out, "scales");
    uint8_t *rows = s->data;
    if (c->variant == MXFP4_SHUFFLED && !(rows = malloc((T * nb) > 0 ? (size_t)(T * nb) : 1))) {
        free(f);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    rc = dsv4_mx_quant_rows_fp4(f, T, W, mxfp4_rule[c->variant], mxfp4_elem[c->variant],
                                dsv4_tensors_find(out, "x_fp4")->data, rows, st);
    if (c->variant == MXFP4_SHUFFLED) {
        memset(s->data, 0, s->nbytes); /* padding entries are 0 (spec 1.3) */
        for (int64_t t = 0; !rc && t < T; t++)
            for (int64_t j = 0; j < nb; j++)
                ((uint8_t *)s->data)[dsv4_mx_scale_shuffle_idx(t, j, s->shape[1])] = rows[t * nb + j];
        free(rows);
    }
    free(f);
    return rc;
}

static int mxfp4_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                        dsv4_policy *pol, dsv4_status *st)
{
    (void)in, (void)st;
    if (c->variant == MXFP4_SHUFFLED) {
        dsv4_policy_exact(pol, "quantization bytes in aiter's shuffled scale layout");
        return DSV4_OK;
    }
    int codes = strcmp(output, "x_fp4") == 0;
    policy_mx(pol, codes ? "scales" : "x_fp4", 32,
              "bit-exact quantization: scales exact (0 binades), codes 0 steps, no flips");
    return DSV4_OK;
}

const dsv4_op dsv4_op_mxfp4_quant = {
    .name = "mxfp4_quant",
    .summary = "MXFP4 rows: e8m0 scale per 32, e2m1 codes packed two per byte",
    .source = "ROCm/aiter:aiter/ops/triton/_triton_kernels/quant/quant.py@b8faf138, "
              "aiter/ops/triton/attention/pa_mqa_logits_mxfp4_cache.py@034adb58 (spec quant 1, 4.1)",
    .variants = mxfp4_variants,
    .variant_docs = mxfp4_variant_docs,
    .params = mx_params,
    .inputs = mx_inputs,
    .outputs = mxfp4_outputs,
    .resolve = NULL,
    .generate = mxfp4_generate,
    .validate = mx_validate,
    .alloc_outputs = mxfp4_alloc,
    .reference = mxfp4_reference,
    .policy = mxfp4_policy,
    .mask = NULL,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* mxfp8_quant                                                          */

static const char *const mxfp8_variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
static const char *const mxfp8_variant_docs[] = {
    "vLLM ROCm _mxfp8_scale_bits / _mxfp8_quantize_rows (vllm rocm_aiter_mla_sparse.py@002ef941, "
    "spec quant 2): clamp(ceil(log2_f32(fl(max(amax, FLT_MIN)/448))) + 127, 0, 254) with the kernel's "
    "fp32 division and a correctly rounded fp32 log2 (the default for bit-exactness with the kernels, "
    "spec quant 10), q = x * 2^(127-code), RNE e4m3fn; v_log_f32 itself may differ (spec 9 q. 2)",
    "the exact rule ceil(log2(max(amax, FLT_MIN)/448)) (spec quant 2, 10: one binade higher where "
    "amax/448 is a few ulps above 2^k)",
    "vLLM mxfp8_utils@00134422 (sparse_attention.md 9.2 [S30]): clamp(floor(log2 amax) + 127, 0, 254), "
    "x / 2^(code-127)",
};
static const dsv4_mx_rule mxfp8_rule[] = {DSV4_MX_FP8_CEIL_F32LOG2, DSV4_MX_FP8_CEIL,
                                          DSV4_MX_FP8_FLOOR};

static const dsv4_io_spec mxfp8_outputs[] = {
    {"data", DSV4_F8E4M3FN, DSV4_DT_NONE, "[T, W] e4m3fn codes"},
    {"scale", DSV4_U8, DSV4_DT_NONE, "[T, W/32] uint8 e8m0 bytes, row-major"},
    {NULL, 0, 0, NULL},
};

static int mxfp8_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return mx_generate(c, in, 1, st);
}

static int mxfp8_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                       dsv4_status *st)
{
    (void)c;
    const dsv4_tensor *x;
    int rc = input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    int64_t ss[2] = {x->shape[0], x->shape[1] / 32};
    dsv4_tensor *d, *s;
    if ((rc = dsv4_tensors_add(out, "data", DSV4_F8E4M3FN, 2, x->shape, &d, st)) ||
        (rc = dsv4_tensors_add(out, "scale", DSV4_U8, 2, ss, &s, st)))
        return rc;
    dsv4_poison(d);
    dsv4_poison(s);
    return DSV4_OK;
}

static int mxfp8_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                           dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    float *f = as_f32(x, st);
    if (!f)
        return st->code;
    rc = dsv4_mx_quant_rows_fp8(f, x->shape[0], x->shape[1], mxfp8_rule[c->variant],
                                dsv4_tensors_find(out, "data")->data,
                                dsv4_tensors_find(out, "scale")->data, st);
    free(f);
    return rc;
}

static int mxfp8_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                        dsv4_policy *pol, dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    int codes = strcmp(output, "data") == 0;
    policy_mx(pol, codes ? "scale" : "data", 32,
              "bit-exact quantization (vLLM's ROCm tests demand bit equality, spec 2): scales exact, "
              "codes 0 steps, no flips");
    return DSV4_OK;
}

const dsv4_op dsv4_op_mxfp8_quant = {
    .name = "mxfp8_quant",
    .summary = "MXFP8 rows: e8m0 scale per 32 (uint8 [T, W/32]), e4m3fn codes",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941 (spec quant 2)",
    .variants = mxfp8_variants,
    .variant_docs = mxfp8_variant_docs,
    .params = mx_params,
    .inputs = mx_inputs,
    .outputs = mxfp8_outputs,
    .resolve = NULL,
    .generate = mxfp8_generate,
    .validate = mx_validate,
    .alloc_outputs = mxfp8_alloc,
    .reference = mxfp8_reference,
    .policy = mxfp8_policy,
    .mask = NULL,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* fp8_group_quant                                                      */

static const char *const gq_variants[] = {"default", "fp8=fnuz", "impl=triton",
                                          "impl=triton,fp8=fnuz", NULL};
static const char *const gq_variant_docs[] = {
    "aiter HIP per_group_quant_hip on gfx950 (spec 3.1, aiter csrc/kernels/quant_kernels.cu@e4048607): "
    "scale = fl(amax * fl(1/448)), reciprocal multiply, clamp +-448, RNE e4m3fn",
    "the same on gfx942: e4m3fnuz, max 240 (spec 3.1 step 2)",
    "vLLM Triton per_token_group_quant_fp8 (spec 3.2, fp8_utils.py@007d5005): scale = amax / 448, "
    "q = clamp(x / scale), e4m3fn",
    "vLLM Triton on fnuz platforms: max 224 (get_fp8_min_max), e4m3fnuz (spec 3.2 step 2)",
};

static const dsv4_param_spec gq_params[] = {
    {"M", DSV4_P_INT, "4", "rows", 0},
    {"K", DSV4_P_INT, "512", "columns, a multiple of group_size", 0},
    {"group_size", DSV4_P_INT, "128", "elements per scale (per_1x128)", 0},
    {"transpose_scale", DSV4_P_INT, "0", "1: scale stored [K/128, M] (element (m, g) at g*M + m)", 0},
    GEN_PARAMS_COMMON,
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec gq_outputs[] = {
    {"y", DSV4_F8E4M3FN, DSV4_DT_NONE, "[M, K] fp8 codes (e4m3fnuz in the fnuz variants)"},
    {"scale", DSV4_F32, DSV4_DT_NONE, "[M, K/128] fp32, or [K/128, M] with transpose_scale"},
    {NULL, 0, 0, NULL},
};

static void gq_cfg(const dsv4_opctx *c, dsv4_fp8q_cfg *cfg)
{
    cfg->impl = c->variant >= 2 ? DSV4_FP8Q_VLLM_TRITON : DSV4_FP8Q_AITER_HIP;
    cfg->kind = (c->variant & 1) ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
    cfg->fp8_max = dsv4_fp8q_default_max(cfg->impl, cfg->kind);
    cfg->group = (int)dsv4_params_int(c->params, "group_size");
    cfg->transpose_scale = dsv4_params_int(c->params, "transpose_scale") != 0;
}

static int gq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_dtype dt;
    int rc = input_dtype(c, &dt, st);
    if (rc)
        return rc;
    int64_t g = dsv4_params_int(c->params, "group_size");
    int64_t shape[2] = {dsv4_params_int(c->params, "M"), dsv4_params_int(c->params, "K")};
    if (g <= 0 || g > 4096 || shape[0] < 0 || shape[1] < 0 || shape[1] % g != 0)
        return dsv4_fail(st, DSV4_EINPUT, "M, K = %" PRId64 ", %" PRId64 ", group_size %" PRId64
                         ": K must be a multiple of group_size", shape[0], shape[1], g);
    dsv4_tensor *x;
    if ((rc = dsv4_tensors_add(in, "x", dt, 2, shape, &x, st)))
        return rc;
    return fill_input(c, "x", x, (int)g, 1, st);
}

static int gq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *x;
    int64_t g = dsv4_params_int(c->params, "group_size");
    if (g <= 0 || g > 4096)
        return dsv4_fail(st, DSV4_EINPUT, "group_size %" PRId64 " out of range", g);
    int rc = input_2d(in, "x", g, &x, st);
    if (rc)
        return rc;
    if (x->shape[0] != dsv4_params_int(c->params, "M") || x->shape[1] != dsv4_params_int(c->params, "K"))
        return dsv4_fail(st, DSV4_EINPUT, "input 'x' shape does not match M, K");
    return DSV4_OK;
}

static int gq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                    dsv4_status *st)
{
    const dsv4_tensor *x;
    dsv4_fp8q_cfg cfg;
    gq_cfg(c, &cfg);
    int rc = input_2d(in, "x", cfg.group, &x, st);
    if (rc)
        return rc;
    int64_t G = x->shape[1] / cfg.group;
    int64_t ss[2] = {cfg.transpose_scale ? G : x->shape[0], cfg.transpose_scale ? x->shape[0] : G};
    dsv4_tensor *y, *s;
    if ((rc = dsv4_tensors_add(out, "y", cfg.kind == DSV4_FP8_E4M3FN ? DSV4_F8E4M3FN : DSV4_F8E4M3FNUZ,
                               2, x->shape, &y, st)) ||
        (rc = dsv4_tensors_add(out, "scale", DSV4_F32, 2, ss, &s, st)))
        return rc;
    dsv4_poison(y);
    dsv4_poison(s);
    return DSV4_OK;
}

static int gq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                        dsv4_status *st)
{
    const dsv4_tensor *x;
    dsv4_fp8q_cfg cfg;
    gq_cfg(c, &cfg);
    int rc = input_2d(in, "x", cfg.group, &x, st);
    if (rc)
        return rc;
    float *f = as_f32(x, st);
    if (!f)
        return st->code;
    rc = dsv4_fp8q_rows(f, x->shape[0], x->shape[1], &cfg, dsv4_tensors_find(out, "y")->data,
                        dsv4_tensors_find(out, "scale")->data, st);
    free(f);
    return rc;
}

static int gq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                     dsv4_policy *pol, dsv4_status *st)
{
    (void)in, (void)st;
    int codes = strcmp(output, "y") == 0;
    policy_mx(pol, codes ? "scale" : "y", (int)dsv4_params_int(c->params, "group_size"),
              "bit-exact (spec 8: reproducible if division is IEEE): fp32 scales exact, codes 0 steps");
    pol->scale_transposed = dsv4_params_int(c->params, "transpose_scale") != 0;
    return DSV4_OK;
}

const dsv4_op dsv4_op_fp8_group_quant = {
    .name = "fp8_group_quant",
    .summary = "FP8 per-1x128 group quant: fp32 scale per 128, e4m3 codes",
    .source = "ROCm/aiter:csrc/kernels/quant_kernels.cu@e4048607; "
              "vllm-project/vllm:vllm/model_executor/layers/quantization/utils/fp8_utils.py@007d5005 (spec quant 3.1, 3.2)",
    .variants = gq_variants,
    .variant_docs = gq_variant_docs,
    .params = gq_params,
    .inputs = mx_inputs,
    .outputs = gq_outputs,
    .resolve = NULL,
    .generate = gq_generate,
    .validate = gq_validate,
    .alloc_outputs = gq_alloc,
    .reference = gq_reference,
    .policy = gq_policy,
    .mask = NULL,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* fused_qk_rmsnorm_group_quant                                         */

static const char *const fq_variants[] = {"default", "mode=faithful", NULL};
static const char *const fq_variant_docs[] = {
    "ideal: RMSNorm of q and kv in double; q's y rounded once to fp32, then the aiter HIP 1x128 "
    "group quant (spec 3.3 step 6: fl(amax*fl(1/448)), reciprocal, clamp, RNE); kv_out = the double ideal",
    "faithful: the kernel's fp32 order (sequential FMA sum of squares, 1/sqrtf, fl(fl(x*rcp)*w)); "
    "kv_out = bf16(y); v_rsq / v_rcp approximations and the reduction tree are not emulated (spec 3.3)",
};

static const dsv4_param_spec fq_params[] = {
    {"m", DSV4_P_INT, "4", "rows (tokens)", 0},
    {"n1", DSV4_P_INT, "1536", "q width (q_lora_rank), a multiple of 128", 0},
    {"n2", DSV4_P_INT, "512", "kv width (head_dim 512)", 0},
    {"q_epsilon", DSV4_P_FLOAT, "1e-6", "q RMSNorm epsilon", 0},
    {"kv_epsilon", DSV4_P_FLOAT, "1e-6", "kv RMSNorm epsilon", 0},
    {"group_size", DSV4_P_INT, "128", "q quant group (the seeds pass 128)", 0},
    {"transpose_scale", DSV4_P_INT, "0", "1: q_scale stored [n1/128, m] (the seeds pass 0)", 0},
    {"scale", DSV4_P_FLOAT, "1", "generator: standard deviation of q and kv", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec fq_inputs[] = {
    {"q", DSV4_BF16, DSV4_DT_NONE, "[m, n1] bfloat16 (qr)"},
    {"q_weight", DSV4_BF16, DSV4_DT_NONE, "[n1] bfloat16 q_norm weight"},
    {"kv", DSV4_BF16, DSV4_DT_NONE, "[m, n2] bfloat16"},
    {"kv_weight", DSV4_BF16, DSV4_DT_NONE, "[n2] bfloat16 kv_norm weight"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec fq_outputs[] = {
    {"q_out", DSV4_F8E4M3FN, DSV4_DT_NONE, "[m, n1] e4m3fn codes of the normed q"},
    {"q_scale", DSV4_F32, DSV4_DT_NONE, "[m, n1/128] fp32 group scales"},
    {"kv_out", DSV4_BF16, DSV4_F64, "[m, n2] normed kv (golden: the double ideal)"},
    {NULL, 0, 0, NULL},
};

static int fq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    int64_t m = dsv4_params_int(ps, "m"), n1 = dsv4_params_int(ps, "n1"), n2 = dsv4_params_int(ps, "n2");
    if (m < 0 || n1 <= 0 || n2 <= 0 || n1 % 128 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "m, n1, n2 = %" PRId64 ", %" PRId64 ", %" PRId64
                         ": n1 must be a positive multiple of 128", m, n1, n2);
    const double sd = dsv4_params_float(ps, "scale");
    int64_t s_q[2] = {m, n1}, s_kv[2] = {m, n2};
    const char *names[4] = {"q", "q_weight", "kv", "kv_weight"};
    const int64_t *shapes[4] = {s_q, &n1, s_kv, &n2};
    for (int k = 0; k < 4; k++) {
        dsv4_tensor *t;
        int rc = dsv4_tensors_add(in, names[k], DSV4_BF16, (k & 1) ? 1 : 2, shapes[k], &t, st);
        if (rc)
            return rc;
        dsv4_rng rng;
        dsv4_rng_init(&rng, c->seed, names[k]);
        int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) { /* weights near 1 (trained norm weights), data normal */
            double v = (k & 1) ? 1.0 + 0.25 * dsv4_rng_normal(&rng) : sd * dsv4_rng_normal(&rng);
            ((uint16_t *)t->data)[i] = dsv4_bf16_from_f32((float)v);
        }
    }
    return DSV4_OK;
}

static int fq_inputs_get(const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensor **t,
                         dsv4_status *st)
{
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_BF16, 2, &t[0], st)) ||
        (rc = dsv4_input(in, "q_weight", DSV4_BF16, 1, &t[1], st)) ||
        (rc = dsv4_input(in, "kv", DSV4_BF16, 2, &t[2], st)) ||
        (rc = dsv4_input(in, "kv_weight", DSV4_BF16, 1, &t[3], st)))
        return rc;
    const dsv4_params *ps = c->params;
    if (t[0]->shape[0] != dsv4_params_int(ps, "m") || t[0]->shape[1] != dsv4_params_int(ps, "n1") ||
        t[2]->shape[0] != t[0]->shape[0] || t[2]->shape[1] != dsv4_params_int(ps, "n2") ||
        t[1]->shape[0] != t[0]->shape[1] || t[3]->shape[0] != t[2]->shape[1])
        return dsv4_fail(st, DSV4_EINPUT, "inputs q [m, n1], q_weight [n1], kv [m, n2], kv_weight [n2] "
                         "do not match the params");
    if (dsv4_params_int(ps, "group_size") != 128 || t[0]->shape[1] % 128 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "group_size must be 128 and n1 a multiple of it (fp8 path)");
    if (!(dsv4_params_float(ps, "q_epsilon") > 0) || !(dsv4_params_float(ps, "kv_epsilon") > 0))
        return dsv4_fail(st, DSV4_EINPUT, "q_epsilon and kv_epsilon must be > 0");
    return DSV4_OK;
}

static int fq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    for (int k = 0; !rc && k < 4; k++) {
        int64_t n = dsv4_tensor_numel(t[k]);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(dsv4_tensor_get(t[k], i)))
                return dsv4_fail(st, DSV4_EINPUT, "input '%s' element %" PRId64 " is not finite",
                                 t[k]->name, i);
    }
    return rc;
}

static int fq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                    dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    int64_t m = t[0]->shape[0], G = t[0]->shape[1] / 128;
    int tr = dsv4_params_int(c->params, "transpose_scale") != 0;
    int64_t ss[2] = {tr ? G : m, tr ? m : G};
    dsv4_tensor *a, *b, *k;
    if ((rc = dsv4_tensors_add(out, "q_out", DSV4_F8E4M3FN, 2, t[0]->shape, &a, st)) ||
        (rc = dsv4_tensors_add(out, "q_scale", DSV4_F32, 2, ss, &b, st)) ||
        (rc = dsv4_tensors_add(out, "kv_out", DSV4_BF16, 2, t[2]->shape, &k, st)))
        return rc;
    dsv4_poison(a);
    dsv4_poison(b);
    dsv4_poison(k);
    return DSV4_OK;
}

static int fq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                        dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    const int64_t m = t[0]->shape[0], n1 = t[0]->shape[1], n2 = t[2]->shape[1];
    const int faithful = c->variant == 1;
    float *f[4] = {NULL, NULL, NULL, NULL};
    float *y = malloc((size_t)(n1 > n2 ? n1 : n2) * sizeof *y);
    double *yd = malloc((size_t)(n1 > n2 ? n1 : n2) * sizeof *yd);
    float *yq = malloc((size_t)((m * n1) > 0 ? m * n1 : 1) * sizeof *yq);
    for (int k = 0; k < 4; k++)
        f[k] = as_f32(t[k], st);
    if (!y || !yd || !yq || !f[0] || !f[1] || !f[2] || !f[3]) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        goto out;
    }
    const double qe = dsv4_params_float(c->params, "q_epsilon"), ke = dsv4_params_float(c->params, "kv_epsilon");
    double *kv = dsv4_tensors_find(out, "kv_out")->data; /* golden dtype float64 */
    for (int64_t r = 0; r < m; r++) {
        if (faithful) {
            dsv4_rmsnorm_row_f32(f[0] + r * n1, f[1], n1, (float)qe, yq + r * n1);
            dsv4_rmsnorm_row_f32(f[2] + r * n2, f[3], n2, (float)ke, y);
            for (int64_t i = 0; i < n2; i++) /* k_out = bf16(y_k) (spec 3.3 step 8) */
                kv[r * n2 + i] = dsv4_round_bf16(y[i]);
        } else {
            dsv4_rmsnorm_row_ideal(f[0] + r * n1, f[1], n1, qe, yd);
            for (int64_t i = 0; i < n1; i++) /* the quant reads y in fp32 (spec 3.3 step 6) */
                yq[r * n1 + i] = (float)yd[i];
            dsv4_rmsnorm_row_ideal(f[2] + r * n2, f[3], n2, ke, kv + r * n2);
        }
    }
    dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 448.0f, 128,
                         dsv4_params_int(c->params, "transpose_scale") != 0};
    rc = dsv4_fp8q_rows(yq, m, n1, &cfg, dsv4_tensors_find(out, "q_out")->data,
                        dsv4_tensors_find(out, "q_scale")->data, st);
out:
    for (int k = 0; k < 4; k++)
        free(f[k]);
    free(y);
    free(yd);
    free(yq);
    return rc;
}

/* Error analysis (spec 3.3).  The kernel computes y in fp32: a sum of n
 * squares (relative error <= (n/2) 2^-24 after the square root halves it),
 * an rsqrt within 1 ulp (2^-23), two products (2 * 2^-24), and the ideal's
 * own rounding of y to fp32 (2^-24): r_y = (n/2 + 5) 2^-24.
 * - kv_out (bf16) against the double ideal: 0.5 ulp for the final rounding
 *   plus r_y |y| / ulp_bf16(y) <= r_y 2^8 ulps.
 * - q_scale = fl(amax fl(1/448)) inherits amax's r_y plus its own rounding:
 *   |ds| <= r_y 2^24 + 1 fp32 ulps (ulp(s)/s > 2^-24).
 * - q codes: q = y / s has relative error r_q <= 2 r_y + 2^-23 (v_rcp), so
 *   a code can move to its neighbour (1 step) when q lies within r_q |q| of
 *   a rounding boundary; boundaries are >= |q| 2^-4 apart in e4m3, so at
 *   most a fraction 2 r_q 2^4 of the codes flip: the flip budget. */
static double fq_r_y(int64_t n) { return ((double)n / 2.0 + 5.0) * ldexp(1.0, -24); }

static int fq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                     dsv4_policy *pol, dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    const double ry1 = fq_r_y(t[0]->shape[1]), ry2 = fq_r_y(t[2]->shape[1]);
    const int tr = dsv4_params_int(c->params, "transpose_scale") != 0;
    if (strcmp(output, "kv_out") == 0) {
        memset(pol, 0, sizeof *pol);
        pol->kind = DSV4_CMP_FLOAT;
        pol->output_dtype = DSV4_BF16;
        /* faithful: both sides are bf16 roundings of fp32 values within r_y: one flip. */
        pol->ulp = c->variant == 1 ? 1.0 : 0.5 + ry2 * 256.0;
        snprintf(pol->rule, sizeof pol->rule,
                 "float: %.4g bf16 ulp = %s (r_y = (n2/2 + 5) 2^-24 = %.3g)", pol->ulp,
                 c->variant == 1 ? "one rounding flip of bf16(fp32 y)" : "0.5 (rounding) + r_y 2^8", ry2);
        return DSV4_OK;
    }
    int codes = strcmp(output, "q_out") == 0;
    const double rq = 2 * ry1 + ldexp(1.0, -23);
    policy_mx(pol, codes ? "q_scale" : "q_out", 128, "");
    pol->scale_transposed = tr;
    pol->scale_tol = ceil(ry1 * ldexp(1.0, 24)) + 1;
    /* Codes within 1 step, measured with each side's own scale: a scale off
     * by scale_tol ulps (relative <= scale_tol 2^-23) moves a value |q| <
     * 17 ulp(q_expected) of e4m3 by < 17 scale_tol 2^-23 steps more. */
    pol->ulp = 1 + 17.0 * pol->scale_tol * ldexp(1.0, -23);
    pol->budget = 2 * rq * 16;
    snprintf(pol->rule, sizeof pol->rule,
             "mx: fp32 y vs ideal (r_y = (n1/2 + 5) 2^-24 = %.3g): scales within %g fp32 ulp, codes "
             "within 1 step (+ %.2g for the scale), flips <= 32 (2 r_y + 2^-23) = %.3g of codes", ry1,
             pol->scale_tol, pol->ulp - 1, pol->budget);
    return DSV4_OK;
}

const dsv4_op dsv4_op_fused_qk_rmsnorm_group_quant = {
    .name = "fused_qk_rmsnorm_group_quant",
    .summary = "RMSNorm of q and kv, then fp8 1x128 group quant of q; kv stays bf16",
    .source = "ROCm/aiter:csrc/kernels/fused_qk_rmsnorm_group_quant.cu@e4048607; seeds: "
              "vllm/models/deepseek_v41/amd/rocm.py _split_qkv_and_norm (spec quant 3.3)",
    .variants = fq_variants,
    .variant_docs = fq_variant_docs,
    .params = fq_params,
    .inputs = fq_inputs,
    .outputs = fq_outputs,
    .resolve = NULL,
    .generate = fq_generate,
    .validate = fq_validate,
    .alloc_outputs = fq_alloc,
    .reference = fq_reference,
    .policy = fq_policy,
    .mask = NULL,
    .locate = NULL,
};
