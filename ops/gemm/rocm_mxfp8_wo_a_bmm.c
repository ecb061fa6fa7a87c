/* rocm_mxfp8_wo_a_bmm.c - wo_a on the MXFP8 path: a grouped MXFP8 x MXFP8
 * GEMM with fp32 accumulation, bf16 out (docs/semantics/gemm.md A10.3).
 * Semantics: ref/gemm.c.
 *
 * Tolerance: deq(a) deq(w) = fp8 x fp8 x 2^(sa+sw-254) is exact in fp32
 * (for the scale range the generators and the epilogue produce), so the
 * fp32 dot over K lanes (tl.dot_scaled) is within gamma_n G of the ideal,
 * n = K + 2 K/32 (block scale products counted generously), G = sum_k |deq
 * a||deq w|; the bf16 store adds 1 ulp_bf16(|e| + delta) (gemm.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/gemm.h"
#include "../../ref/mx.h"
#include "gemm.h"

/* One reading: nothing varies, so the variant carries no rule. */
static const dsv4_variant bmm_variants[] = {
    {"default",
     "a [T, G*K] e4m3fn with e8m0 scales per 1x32 (the MXFP8 epilogue), wo_a [G*R, K] e4m3fn with e8m0 scales "
     "[G*R, K/32] (the test's 1x32 weight granularity, docs/semantics/gemm.md A10.3, "
     "docs/semantics/README.md Q9.7); fp32 accumulation, bf16 "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     NULL},
    {NULL, NULL, NULL},
};

static const char bmm_params[] =
    "    n_local_groups int   = 1    G: o_groups / TP\n"
    "    o_lora_rank    int   = 128  R: output rows per group (1024 in V4/V4.1)\n"
    DSV4_WO_A_NUM_TOKENS_PARAM
    "gen K              int   = 512  generator: Dg = H*512/G, lanes per group\n"
    "gen zero_rows      int[] = []   generator: tokens whose activations are all zero\n";

static const char bmm_inputs[] =
    "a          float8_e4m3fn  [T, G*K] MXFP8 activation codes\n"
    "a_scale    uint8          [T, G*K/32] e8m0 scale bytes\n"
    "wo_a       float8_e4m3fn  [G*R, K] MXFP8 weight codes\n"
    "wo_a_scale uint8          [G*R, K/32] e8m0 scale bytes\n";

static const char bmm_outputs[] =
    DSV4_WO_A_OUTPUTS;

/* fp32 rows of std `std` (row factor 2^[-2, 2]) quantized by the MXFP8 rule
 * of vLLM's ROCm epilogue (ceil(log2(amax/448)), docs/semantics/attention.md
 * A9.2) into codes and scales; zp: the params naming zero_rows, or NULL. */
static int gen_mxfp8_rows(dsv4_rng *rng, int64_t rows, int64_t W, double std, const dsv4_params *zp, uint8_t *codes,
                          uint8_t *scales, dsv4_status *st)
{
    float *x = malloc((size_t)(W + 1) * sizeof *x);
    if (!x)
        return dsv4_gemmops_oom(st);
    int rc = DSV4_OK;
    for (int64_t r = 0; r < rows && !rc; r++) {
        double f = std * ldexp(1.0, (int)dsv4_rng_range(rng, -2, 3));
        for (int64_t k = 0; k < W; k++)
            x[k] = (zp && dsv4_params_list_has(zp, "zero_rows", r)) ? 0.0f : (float)(dsv4_rng_normal(rng) * f);
        rc = dsv4_mx_quant_rows_fp8(x, 1, W, DSV4_MX_FP8_CEIL, codes + r * W, scales + r * (W / 32), st);
    }
    free(x);
    return rc;
}

static int bmm_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "num_tokens"), G = dsv4_params_int(ps, "n_local_groups");
    const int64_t R = dsv4_params_int(ps, "o_lora_rank"), K = dsv4_params_int(ps, "K");
    if (T < 0 || G < 1 || G > 64 || R < 0 || R > 4096 || K < 32 || K % 32 || K > 16384)
        return dsv4_fail(st, DSV4_EINPUT, "bmm generator: T >= 0, G in [1, 64], R in [0, 4096], K a multiple of 32");
    int64_t sa[2] = {T, G * K}, ssa[2] = {T, G * K / 32}, sw[2] = {G * R, K}, ssw[2] = {G * R, K / 32};
    dsv4_tensor *a, *as, *w, *ws;
    int rc;
    if ((rc = dsv4_tensors_add(in, "a", DSV4_F8E4M3FN, 2, sa, &a, st)) ||
        (rc = dsv4_tensors_add(in, "a_scale", DSV4_U8, 2, ssa, &as, st)) ||
        (rc = dsv4_tensors_add(in, "wo_a", DSV4_F8E4M3FN, 2, sw, &w, st)) ||
        (rc = dsv4_tensors_add(in, "wo_a_scale", DSV4_U8, 2, ssw, &ws, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "a");
    if ((rc = gen_mxfp8_rows(&rng, T, G * K, 1.0, ps, a->data, as->data, st)))
        return rc;
    dsv4_rng_init(&rng, c->seed, "wo_a");
    return gen_mxfp8_rows(&rng, G * R, K, 0.02, NULL, w->data, ws->data, st);
}

static int bmm_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_wo_a_bmm_args *b, dsv4_status *st)
{
    const dsv4_tensor *a, *as, *w, *ws;
    int rc;
    if ((rc = dsv4_input(in, "a", DSV4_F8E4M3FN, 2, &a, st)) || (rc = dsv4_input(in, "a_scale", DSV4_U8, 2, &as, st)) ||
        (rc = dsv4_input(in, "wo_a", DSV4_F8E4M3FN, 2, &w, st)) ||
        (rc = dsv4_input(in, "wo_a_scale", DSV4_U8, 2, &ws, st)))
        return rc;
    b->T = a->shape[0];
    b->G = dsv4_params_int(c->params, "n_local_groups");
    b->R = dsv4_params_int(c->params, "o_lora_rank");
    b->K = w->shape[1];
    if (b->G < 1 || b->R < 0 || b->K % 32 || a->shape[1] != b->G * b->K || w->shape[0] != b->G * b->R ||
        as->shape[0] != b->T || as->shape[1] != b->G * b->K / 32 || ws->shape[0] != b->G * b->R ||
        ws->shape[1] != b->K / 32)
        return dsv4_fail(st, DSV4_EINPUT,
                         "bmm shapes: a [T, G*K], a_scale [T, G*K/32], wo_a [G*R, K], wo_a_scale [G*R, K/32] with "
                         "G = %" PRId64 ", R = %" PRId64 ", K = %" PRId64 " (a multiple of 32)", b->G, b->R, b->K);
    b->a = a->data;
    b->a_scale = as->data;
    b->w = w->data;
    b->w_scale = ws->data;
    return DSV4_OK;
}

/* The ideal and G = sum_k |deq a||deq w| with gamma_n, n = K + 2K/32. */
static int bmm_ideal(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id, dsv4_status *st)
{
    dsv4_wo_a_bmm_args b;
    int rc = bmm_args_of(c, in, &b, st);
    if (rc || (rc = dsv4_bf16_ideal_alloc(id, b.T * b.G * b.R, 0, st)))
        return rc;
    const double K = (double)b.K;
    id->gamma = dsv4_gamma32(K + 2 * K / 32);
    return dsv4_ref_mxfp8_wo_a_bmm(&b, id->e, id->gauge, st);
}

/* The ideal alone (the reference output needs no gauge: half the work). */
static int bmm_ideal_values(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id, dsv4_status *st)
{
    dsv4_wo_a_bmm_args b;
    int rc = bmm_args_of(c, in, &b, st);
    if (rc || (rc = dsv4_bf16_ideal_alloc(id, b.T * b.G * b.R, 0, st)))
        return rc;
    return dsv4_ref_mxfp8_wo_a_bmm(&b, id->e, NULL, st);
}

DSV4_WO_A_OP_CALLBACKS(bmm, dsv4_wo_a_bmm_args, bmm_args_of, bmm_ideal, bmm_ideal_values, NULL,
                       "per element: 1 ulp_bf16(|e|+d) + d, d = gamma_n sum_k |deq a||deq w|, n = K + 2K/32, "
                       "u = 2^-24 (fp32 tl.dot_scaled accumulation)",
                       "bmm")

const dsv4_op dsv4_op_rocm_mxfp8_wo_a_bmm = {
    .name = "rocm_mxfp8_wo_a_bmm",
    .summary = "wo_a on the MXFP8 path: grouped MXFP8 x MXFP8 GEMM, fp32 accumulation, bf16 [T, G*R]",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/gemm.md A10.3; seed _o_proj)",
    DSV4_OP_TABLES(bmm),
    DSV4_WO_A_OP_FIELDS(bmm),
};
