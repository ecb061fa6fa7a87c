/* compute_global_topk_ragged_indices_and_indptr.c - ROCm C4A decode: the
 * global top-k slots as CSR (lens, indptr, flat).  Parameters, inputs and
 * generator are shared with compute_global_topk_indices_and_lens
 * (indices_common.c).  Semantics: ref/indices.c
 * (docs/semantics/indices.md A5.7). */
#include <string.h>

#include "indices.h"

/* The ragged form reads the block table as the base semantics do. */
static const dsv4_gtopk_variant gtopk_ragged_base = DSV4_GTOPK_BASE;

static const dsv4_variant gtopk_ragged_variants[] = {
    {"default",
     "ROCm C4A decode: first lens[t] columns packed, -1 kept "
     "(vllm-project/vllm:vllm/models/deepseek_v4/amd/rocm.py@0c2f37a7a45e95cc9c4dba4a974f78357cf8ecc1)",
     &gtopk_ragged_base},
    {NULL, NULL, NULL},
};

static const char gtopk_ragged_outputs[] =
    "topk_ragged_indices int32  [T*K] flat; entries past indptr[T] unspecified\n"
    "topk_ragged_indptr  int32  [T+1] exclusive prefix sum of topk_lens\n"
    DSV4_INDICES_TOPK_LENS_OUTPUT;
static const char gtopk_ragged_params[] = DSV4_INDICES_GTOPK_PARAMS;
static const char gtopk_ragged_inputs[] = DSV4_INDICES_GTOPK_INPUTS;

static int gtopk_ragged_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_indices_gtopk_validate(c, in, 1, st);
}

static int gtopk_ragged_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                              dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    /* Flat size T*K (docs/semantics/indices.md A5.7): the caller's buffer, not the nnz. */
    int64_t nflat = a.num_tokens * a.topk_width, n1 = a.num_tokens + 1;
    if ((rc = dsv4_indices_add_output(out, "topk_ragged_indices", DSV4_I32, 1, &nflat, st)) ||
        (rc = dsv4_indices_add_output(out, "topk_ragged_indptr", DSV4_I32, 1, &n1, st)))
        return rc;
    return dsv4_indices_add_output(out, "topk_lens", DSV4_I32, 1, &a.num_tokens, st);
}

static int gtopk_ragged_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                                  dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_compute_global_topk_ragged_indices_and_indptr(
                    &a, dsv4_tensors_find(out, "topk_ragged_indices")->data,
                    dsv4_tensors_find(out, "topk_ragged_indptr")->data, dsv4_tensors_find(out, "topk_lens")->data,
                    st);
}

/* nnz = sum of lens, recomputed from the inputs (not from either output). */
static int gtopk_ragged_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask,
                             int64_t n, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t nnz = 0;
    for (int64_t t = 0; t < a.num_tokens; t++)
        for (int64_t j = 0; a.is_valid_token[t] && j < a.topk_width; j++)
            nnz += a.topk_indices[t * a.topk_width + j] >= 0;
    dsv4_indices_ragged_mask(mask, n, strcmp(output, "topk_ragged_indices") == 0 ? nnz : n);
    return DSV4_OK;
}

const dsv4_op dsv4_op_compute_global_topk_ragged_indices_and_indptr = {
    .name = "compute_global_topk_ragged_indices_and_indptr",
    .summary = "ROCm C4A decode: global top-k slots as CSR (lens, indptr, flat)",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/amd/rocm.py@0c2f37a7a45e95cc9c4dba4a974f78357cf8ecc1 "
              "(docs/semantics/indices.md A5.7)",
    DSV4_OP_TABLES(gtopk_ragged),
    .generate = dsv4_indices_gtopk_generate,
    .validate = gtopk_ragged_validate,
    .alloc_outputs = gtopk_ragged_alloc,
    .reference = gtopk_ragged_reference,
    .policy = dsv4_indices_exact_policy,
    .mask = gtopk_ragged_mask,
    .locate = NULL,
};
