/* mxfp8_quant.c - MXFP8 rows: an e8m0 scale per 32 elements (uint8
 * [T, W/32]), e4m3fn codes (docs/semantics/quant.md Q2, Q10).  Reference:
 * ref/mx.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "../../ref/mx.h"
#include "quant.h"

/* A variant's rule is the e8m0 scale rule (dsv4_mx_rule). */
static const dsv4_variant mxfp8_variants[] = {
    {"default",
     "vLLM ROCm _mxfp8_scale_bits / _mxfp8_quantize_rows (vllm rocm_aiter_mla_sparse.py@002ef941, "
     "docs/semantics/quant.md Q2): clamp(ceil(log2_f32(fl(max(amax, FLT_MIN)/448))) + 127, 0, 254) with the kernel's "
     "fp32 division and a correctly rounded fp32 log2 (the default for bit-exactness with the kernels, "
     "docs/semantics/quant.md Q10), q = x * 2^(127-code), RNE e4m3fn; v_log_f32 itself may differ "
     "(docs/semantics/README.md Q9.2)",
     &(const dsv4_mx_rule){DSV4_MX_FP8_CEIL_F32LOG2}},
    {"log2=exact",
     "the exact rule ceil(log2(max(amax, FLT_MIN)/448)) (docs/semantics/quant.md Q2, Q10: one binade higher where "
     "amax/448 is a few ulps above 2^k)",
     &(const dsv4_mx_rule){DSV4_MX_FP8_CEIL}},
    {"scale_rule=floor",
     "vLLM mxfp8_utils@00134422 (docs/semantics/attention.md A9.2 [S30]): clamp(floor(log2 amax) + 127, 0, 254), "
     "x / 2^(code-127)",
     &(const dsv4_mx_rule){DSV4_MX_FP8_FLOOR}},
    {NULL, NULL, NULL},
};

static const char mxfp8_outputs[] =
    "data  float8_e4m3fn  [T, W] e4m3fn codes\n"
    "scale uint8          [T, W/32] uint8 e8m0 bytes, row-major\n";
static const char mxfp8_params[] = DSV4_QUANT_MX_PARAMS;
static const char mxfp8_inputs[] = DSV4_QUANT_X_INPUTS;

static int mxfp8_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_quant_mx_generate(c, in, 1, st);
}

static int mxfp8_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    (void)c;
    const dsv4_tensor *x;
    int rc = dsv4_quant_input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    int64_t ss[2] = {x->shape[0], x->shape[1] / 32};
    return dsv4_quant_add_pair(out, "data", DSV4_F8E4M3FN, x->shape, "scale", DSV4_U8, ss, st);
}

static int mxfp8_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_mx_rule rule = *(const dsv4_mx_rule *)c->rule;
    const dsv4_tensor *x;
    int rc = dsv4_quant_input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    uint8_t *data = dsv4_tensors_find(out, "data")->data, *scale = dsv4_tensors_find(out, "scale")->data;
    if (x->dtype == DSV4_BF16) /* bf16 is exact in fp32: the same rows, decoded block by block */
        return dsv4_mx_quant_rows_fp8_bf16(x->data, x->shape[0], x->shape[1], rule, data, scale, st);
    return dsv4_mx_quant_rows_fp8(x->data, x->shape[0], x->shape[1], rule, data, scale, st);
}

static int mxfp8_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                        dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    int codes = strcmp(output, "data") == 0;
    dsv4_policy_mx(pol, codes ? "scale" : "data", 32,
                   "bit-exact quantization (vLLM's ROCm tests demand bit equality, "
                   "docs/semantics/quant.md Q2): scales exact, codes 0 steps, no flips");
    return DSV4_OK;
}

const dsv4_op dsv4_op_mxfp8_quant = {
    .name = "mxfp8_quant",
    .summary = "MXFP8 rows: e8m0 scale per 32 (uint8 [T, W/32]), e4m3fn codes",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941 (docs/semantics/quant.md Q2)",
    DSV4_OP_TABLES(mxfp8),
    .generate = mxfp8_generate,
    .validate = dsv4_quant_mx_validate,
    .alloc_outputs = mxfp8_alloc,
    .reference = mxfp8_reference,
    .policy = mxfp8_policy,
};
