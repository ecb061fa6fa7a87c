/* compute_global_topk_indices_and_lens.c - local top-k compressed indices
 * -> global cache slots through the block table, and lens.  Parameters,
 * inputs and generator are shared with the ragged form
 * (indices_common.c).  Semantics: ref/indices.c
 * (docs/semantics/indices.md A5.6). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "indices.h"

static const dsv4_gtopk_variant gtopk_base = DSV4_GTOPK_BASE;
static const dsv4_gtopk_variant gtopk_checked = DSV4_GTOPK_CHECKED;

static const dsv4_variant gtopk_variants[] = {
    {"default",
     "base semantics, no bounds checks; an out-of-range block-table read is rejected as bad input "
     "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
     &gtopk_base},
    {"bounds=checked",
     "bad request -> row -1, lens 0; v < 0 or v//Bc >= block_table width -> -1, not counted; survivors "
     "compacted left (vllm-project/vllm:tests/kernels/attention/test_compute_global_topk_bounds.py@"
     "4bc98fd4c928ff979dc709b8b800b83add548dd5)",
     &gtopk_checked},
    {NULL, NULL, NULL},
};

static const char gtopk_outputs[] =
    "global_topk_indices int32  [T, K] cache slots, -1 padded\n"
    DSV4_INDICES_TOPK_LENS_OUTPUT;
static const char gtopk_params[] = DSV4_INDICES_GTOPK_PARAMS;
static const char gtopk_inputs[] = DSV4_INDICES_GTOPK_INPUTS;

static int gtopk_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_indices_gtopk_validate(c, in, 0, st);
}

static int gtopk_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_tokens, a.topk_width};
    if ((rc = dsv4_indices_add_output(out, "global_topk_indices", DSV4_I32, 2, shape, st)))
        return rc;
    return dsv4_indices_add_output(out, "topk_lens", DSV4_I32, 1, shape, st);
}

static int gtopk_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_gtopk_variant *rule = c->rule;
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_compute_global_topk_indices_and_lens(&a, *rule,
                                                              dsv4_tensors_find(out, "global_topk_indices")->data,
                                                              dsv4_tensors_find(out, "topk_lens")->data, st);
}

/* Names token, request and column of an element of a [T, K] output. */
static void gtopk_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                         char *buf, size_t len)
{
    dsv4_gtopk_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (dsv4_indices_gtopk_args(c, in, &a, &st) || a.topk_width == 0)
        return;
    int64_t t = strcmp(output, "global_topk_indices") == 0 ? flat / a.topk_width : flat;
    if (t < a.num_tokens)
        snprintf(buf, len, "token %" PRId64 " (request %d, %s)", t, a.token_to_req[t],
                 a.is_valid_token[t] ? "valid" : "invalid token");
}

const dsv4_op dsv4_op_compute_global_topk_indices_and_lens = {
    .name = "compute_global_topk_indices_and_lens",
    .summary = "local top-k compressed indices -> global cache slots through the block table, and lens",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(docs/semantics/indices.md A5.6)",
    DSV4_OP_TABLES(gtopk),
    .generate = dsv4_indices_gtopk_generate,
    .validate = gtopk_validate,
    .alloc_outputs = gtopk_alloc,
    .reference = gtopk_reference,
    .policy = dsv4_indices_exact_policy,
    .locate = gtopk_locate,
};
