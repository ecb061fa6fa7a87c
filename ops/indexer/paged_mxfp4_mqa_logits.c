/* paged_mxfp4_mqa_logits.c - logits[r, j] = sum_h relu(q_h . k_j) w_h over
 * the paged MXFP4 cache, below each row's end (docs/semantics/indexer.md
 * Q6.1, Q6.2).  Reference: ref/indexer.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>

#include "indexer.h"

/* A variant's rule is the logits mode (dsv4_idx_mode). */
static const dsv4_variant lg_variants[] = {
    {"default", "the ideal: exact per-head dots of the dequantized MXFP4 values, relu * w summed in double "
                "(docs/semantics/indexer.md Q6.2)",
     &(const dsv4_idx_mode){DSV4_IDX_IDEAL}},
    {"mode=faithful",
     "the kernel's fp32 model: two K=64 MFMAs each rounded once, the fixed head fold with FMA, fl(A0 + A1) "
     "(docs/semantics/indexer.md Q6.2 steps 1-3; 32 or 64 heads)",
     &(const dsv4_idx_mode){DSV4_IDX_FAITHFUL}},
    {NULL, NULL, NULL},
};

static const char lg_params[] =
    DSV4_INDEXER_LG_PARAMS
    "gen tie_k int = 16  generator: the k whose k-th key gets the ties\n";

static const char lg_inputs[] = DSV4_INDEXER_LG_INPUTS;

static const char lg_outputs[] =
    "logits float32 golden=float64  [rows, max_model_len] fp32; columns past the row end unspecified\n";

static int faithful(const dsv4_opctx *c)
{
    const dsv4_idx_mode *mode = c->rule;
    return *mode == DSV4_IDX_FAITHFUL;
}

static int lg_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_indexer_lg_generate(c, in, dsv4_params_int(c->params, "tie_k"), st);
}

static int lg_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_indexer_lg g;
    return dsv4_indexer_lg_validate(c, in, &g, st);
}

static int lg_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    return rc ? rc : dsv4_indexer_add_logits(&g, out, st);
}

static int lg_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    return rc ? rc : dsv4_ref_mqa_logits(&g.a, *mode, dsv4_tensors_find(out, "logits")->data, NULL, st);
}

static int lg_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)output;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (!rc)
        dsv4_indexer_policy_logits(g.a.H, faithful(c), pol);
    return rc;
}

static int lg_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    (void)output;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (!rc)
        dsv4_indexer_mask_rows(&g, mask, n);
    return rc;
}

static int lg_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    (void)output;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    return rc ? rc : dsv4_indexer_logits_bound(&g, faithful(c), bound, n, st);
}

double dsv4_indexer_logits_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    const dsv4_tensor *re = dsv4_tensors_get(in, "row_ends");
    double keys = 0;
    for (int64_t r = 0; re && r < re->shape[0]; r++)
        keys += ((const int32_t *)re->data)[r];
    return 2.0 * (double)dsv4_params_int(ps, "heads") * DSV4_IDX_HEAD_DIM * keys;
}

const dsv4_op dsv4_op_paged_mxfp4_mqa_logits = {
    .name = "paged_mxfp4_mqa_logits",
    .summary = "logits[r, j] = sum_h relu(q_h . k_j) w_h over the paged MXFP4 cache, below each row's end",
    .source = "aiter _gluon_kernels/gfx950/attention/pa_mqa_logits_mxfp4.py (ids 69149300224, 69254406641; "
              "docs/semantics/indexer.md Q6.1-Q6.2)",
    DSV4_OP_TABLES(lg),
    .resolve = dsv4_indexer_lg_resolve,
    .generate = lg_generate,
    .validate = lg_validate,
    .alloc_outputs = lg_alloc,
    .reference = lg_reference,
    .policy = lg_policy,
    .mask = lg_mask,
    .locate = dsv4_indexer_locate_logits,
    .bound = lg_bound,
};
