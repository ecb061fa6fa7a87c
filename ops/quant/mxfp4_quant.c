/* mxfp4_quant.c - MXFP4 rows: an e8m0 scale per 32 elements, e2m1 codes
 * packed two per byte (docs/semantics/quant.md Q1; docs/semantics/indexer.md
 * Q4.1).  Reference: ref/mx.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "../../ref/mx.h"
#include "quant.h"

/* What a variant changes: the scale rule, the e2m1 rounding, and whether
 * the scales are stored in aiter's padded, shuffled layout. */
typedef struct mxfp4_rule {
    dsv4_mx_rule scale;
    dsv4_mx_elem elem;
    int shuffled;
} mxfp4_rule;

static const dsv4_variant mxfp4_variants[] = {
    {"default",
     "the seeds' indexer K store / Q quant: the seed imports aiter fusions/k_norm_rope_mxfp4_cache@689b79d5 "
     "and rope/q_rope_mxfp4_quant@5677775a (its _aiter_indexer_cache_ops; docs/semantics/indexer.md Q4 variant B), "
     "i.e. _mxfp4_quant_op SCALING_MODE 1 of quant.py id 69103446897 (docs/semantics/quant.md Q1.1): exact ceil "
     "bit rule, zero block -> byte 1, RNE e2m1 bit method",
     &(const mxfp4_rule){DSV4_MX_FP4_CEIL, DSV4_MX_ELEM_RNE, 0}},
    {"scale_rule=ceil_log2_f32,e2m1=threshold",
     "docs/semantics/indexer.md Q4.1 variant A (aiter pa_mqa_logits_mxfp4_cache.py@034adb58): "
     "ceil(log2_f32(max(amax, 6*2^-126)/6)) scale, threshold e2m1 (-0 -> 0x0)",
     &(const mxfp4_rule){DSV4_MX_FP4_CEIL_F32LOG2, DSV4_MX_ELEM_THRESHOLD, 0}},
    {"scale_rule=even",
     "aiter SCALING_MODE 0 (quant.py@b8faf138) / fp4_utils.dynamic_mxfp4_quant (docs/semantics/quant.md Q1.1): "
     "round amax up at 1.75, floor(log2) - 2, clamp (an all-NaN block: 254); RNE e2m1",
     &(const mxfp4_rule){DSV4_MX_FP4_EVEN, DSV4_MX_ELEM_RNE, 0}},
    {"scale_rule=ocp",
     "OCP MX v1.0 (microxcaling, docs/semantics/quant.md Q1.4): floor(log2 amax) - 2, zero -> byte 0, "
     "Inf -> NaN scale; RNE e2m1",
     &(const mxfp4_rule){DSV4_MX_FP4_OCP, DSV4_MX_ELEM_RNE, 0}},
    {"scale_rule=ocp,round=half_away",
     "microxcaling default round=nearest (docs/semantics/quant.md Q1.4 item 4): OCP scale, e2m1 ties away "
     "from zero",
     &(const mxfp4_rule){DSV4_MX_FP4_OCP, DSV4_MX_ELEM_HALF_AWAY, 0}},
    {"scale_rule=even,scale_layout=shuffled",
     "aiter dynamic_mxfp4_quant(shuffle=True) (docs/semantics/quant.md Q1.3): mode-0 math, scales padded to "
     "[ceil(M/256)*256, ceil(N/256)*8] in the mx_scale_shuffle_idx order, padding 0",
     &(const mxfp4_rule){DSV4_MX_FP4_EVEN, DSV4_MX_ELEM_RNE, 1}},
    {NULL, NULL, NULL},
};

static const char mxfp4_outputs[] =
    "x_fp4  float4_e2m1fn_x2  [T, W/2] e2m1 codes, even element in the low nibble\n"
    "scales float8_e8m0fnu    [T, W/32] e8m0 (shuffled variant: padded, shuffled)\n";
static const char mxfp4_params[] = DSV4_QUANT_MX_PARAMS;
static const char mxfp4_inputs[] = DSV4_QUANT_X_INPUTS;

static int mxfp4_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_quant_mx_generate(c, in, 0, st);
}

static int mxfp4_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const mxfp4_rule *r = c->rule;
    const dsv4_tensor *x;
    int rc = dsv4_quant_input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    int64_t ds[2] = {x->shape[0], x->shape[1] / 2}, ss[2] = {x->shape[0], x->shape[1] / 32};
    if (r->shuffled)
        dsv4_mx_shuffled_scale_shape(x->shape[0], x->shape[1], &ss[0], &ss[1]);
    return dsv4_quant_add_pair(out, "x_fp4", DSV4_F4E2M1X2, ds, "scales", DSV4_F8E8M0, ss, st);
}

static int mxfp4_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const mxfp4_rule *r = c->rule;
    const dsv4_tensor *x;
    int rc = dsv4_quant_input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    const int64_t T = x->shape[0], W = x->shape[1], nb = W / 32;
    dsv4_tensor *s = dsv4_tensors_find(out, "scales");
    uint8_t *rows = s->data; /* shuffled: the row-major scales first, then placed */
    if (r->shuffled && !(rows = malloc((T * nb) > 0 ? (size_t)(T * nb) : 1)))
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    uint8_t *codes = dsv4_tensors_find(out, "x_fp4")->data;
    if (x->dtype == DSV4_BF16) /* bf16 is exact in fp32: the same rows, decoded block by block */
        rc = dsv4_mx_quant_rows_fp4_bf16(x->data, T, W, r->scale, r->elem, codes, rows, st);
    else
        rc = dsv4_mx_quant_rows_fp4(x->data, T, W, r->scale, r->elem, codes, rows, st);
    if (r->shuffled) {
        memset(s->data, 0, s->nbytes); /* padding entries are 0 (docs/semantics/quant.md Q1.3) */
        for (int64_t t = 0; !rc && t < T; t++)
            for (int64_t k = 0; k < nb; k++)
                ((uint8_t *)s->data)[dsv4_mx_scale_shuffle_idx(t, k, s->shape[1])] = rows[t * nb + k];
        free(rows);
    }
    return rc;
}

static int mxfp4_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                        dsv4_status *st)
{
    const mxfp4_rule *r = c->rule;
    (void)in, (void)st;
    if (r->shuffled) {
        dsv4_policy_exact(pol, "quantization bytes in aiter's shuffled scale layout");
        return DSV4_OK;
    }
    int codes = strcmp(output, "x_fp4") == 0;
    dsv4_policy_mx(pol, codes ? "scales" : "x_fp4", 32,
                   "bit-exact quantization: scales exact (0 binades), codes 0 steps, no flips");
    return DSV4_OK;
}

const dsv4_op dsv4_op_mxfp4_quant = {
    .name = "mxfp4_quant",
    .summary = "MXFP4 rows: e8m0 scale per 32, e2m1 codes packed two per byte",
    .source = "ROCm/aiter:aiter/ops/triton/_triton_kernels/quant/quant.py, the PR version with SCALING_MODE "
              "(id 69103446897; main@b8faf138 has mode 0 only, scale_rule=even), as called by "
              "aiter/ops/triton/fusions/k_norm_rope_mxfp4_cache.py@689b79d5 and rope/q_rope_mxfp4_quant.py@5677775a; "
              "aiter/ops/triton/attention/pa_mqa_logits_mxfp4_cache.py@034adb58 (docs/semantics/README.md Q0, "
              "docs/semantics/quant.md Q1, docs/semantics/indexer.md Q4.1)",
    DSV4_OP_TABLES(mxfp4),
    .generate = mxfp4_generate,
    .validate = dsv4_quant_mx_validate,
    .alloc_outputs = mxfp4_alloc,
    .reference = mxfp4_reference,
    .policy = mxfp4_policy,
};
