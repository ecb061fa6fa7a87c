/* get_prefill_chunk_plan.c - greedy prefill chunking under the
 * gather-workspace area budget.  Semantics: ref/indices.c
 * (docs/semantics/indices.md A7).
 * Output shape: the worst case [num_prefills, 4] plus num_chunks [1]
 * (rows >= num_chunks masked), not the exact count: a backend that plans a
 * different number of chunks then fails on num_chunks, with the count in
 * the report, instead of being forced into our shape. */
#include <stdlib.h>
#include <string.h>

#include "indices.h"

/* One reading only: no rule. */
static const dsv4_variant plan_variants[] = {
    {"default",
     "greedy area-bounded chunking "
     "(vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
     NULL},
    {NULL, NULL, NULL},
};

static const char plan_params[] =
    "    compress_ratio         int   = 4       c (<= 1: no compressed rows)\n"
    "    prefill_chunk_size     int   = 4       PREFILL_CHUNK_SIZE: workspace slabs\n"
    "    window_size            int   = 128     W (>= 1)\n"
    "    max_model_len          int   = -1      -1: the longest request\n"
    "    max_num_batched_tokens int   = -1      -1: the batch's prefill tokens\n"
    "    has_compressed         int   = 1       0: SWA-only layer, compressed widths 0 (inferred from the seed call)\n"
    "gen query_lens             int[] required  generator: query tokens of each prefill\n"
    "gen prefix_lens            int[] = []      generator: cached prefix of each prefill\n";

static const char plan_inputs[] =
    "prefill_seq_lens   int32  [num_prefills] (CPU)\n"
    "prefill_query_lens int32  [num_prefills] (CPU)\n";

static const char plan_outputs[] =
    "chunk_plan int64  [num_prefills, 4] (start, end, max_compressed, chunk_M); rows >= num_chunks unspecified\n"
    "num_chunks int64  [1] len(plan)\n";

static int plan_resolve(dsv4_params *ps, dsv4_status *st)
{
    dsv4_req_shape rs;
    int rc;
    if ((rc = dsv4_indices_shape_of(ps, &rs, st)) ||
        (rc = dsv4_indices_default_to(ps, "max_model_len", dsv4_indices_longest(&rs), st)))
        return rc;
    return dsv4_indices_default_to(ps, "max_num_batched_tokens", rs.T, st);
}

static int plan_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_req_shape rs;
    int rc = dsv4_indices_shape_of(c->params, &rs, st);
    dsv4_tensor *s, *q;
    if (rc || (rc = dsv4_tensors_add(in, "prefill_seq_lens", DSV4_I32, 1, &rs.R, &s, st)) ||
        (rc = dsv4_tensors_add(in, "prefill_query_lens", DSV4_I32, 1, &rs.R, &q, st)))
        return rc;
    for (int64_t r = 0; r < rs.R; r++) {
        ((int32_t *)s->data)[r] = (int32_t)(rs.prefix[r] + rs.qlen[r]);
        ((int32_t *)q->data)[r] = (int32_t)rs.qlen[r];
    }
    return DSV4_OK;
}

static int plan_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_chunkplan_args *a, dsv4_status *st)
{
    const dsv4_tensor *s, *q;
    int rc;
    if ((rc = dsv4_indices_input_1d(in, "prefill_seq_lens", DSV4_I32, -1, &s, st)) ||
        (rc = dsv4_indices_input_1d(in, "prefill_query_lens", DSV4_I32, s->shape[0], &q, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->seq_lens = s->data;
    a->query_lens = q->data;
    a->num_prefills = s->shape[0];
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->chunk_size = dsv4_params_int(c->params, "prefill_chunk_size");
    a->window_size = dsv4_params_int(c->params, "window_size");
    a->max_model_len = dsv4_params_int(c->params, "max_model_len");
    a->max_num_batched_tokens = dsv4_params_int(c->params, "max_num_batched_tokens");
    a->has_compressed = dsv4_params_int(c->params, "has_compressed") != 0;
    return DSV4_OK;
}

DSV4_VALIDATE_VIA_ARGS(plan_validate, dsv4_chunkplan_args, plan_args, dsv4_chunkplan_check)

static int plan_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_prefills, 4}, one = 1;
    if ((rc = dsv4_indices_add_output(out, "chunk_plan", DSV4_I64, 2, shape, st)))
        return rc;
    return dsv4_indices_add_output(out, "num_chunks", DSV4_I64, 1, &one, st);
}

static int plan_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_get_prefill_chunk_plan(&a, dsv4_tensors_find(out, "chunk_plan")->data,
                                                dsv4_tensors_find(out, "num_chunks")->data, st);
}

/* Rows past num_chunks are unspecified; the count comes from a private run
 * of the reference on the inputs, not from the backend's num_chunks. */
static int plan_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                     dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t *plan = malloc((size_t)(a.num_prefills * 4 + 1) * sizeof *plan), nc = 0;
    if (!plan)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    rc = dsv4_ref_get_prefill_chunk_plan(&a, plan, &nc, st);
    free(plan);
    if (!rc)
        dsv4_indices_ragged_mask(mask, n, strcmp(output, "chunk_plan") == 0 ? nc * 4 : n);
    return rc;
}

const dsv4_op dsv4_op_get_prefill_chunk_plan = {
    .name = "get_prefill_chunk_plan",
    .summary = "greedy prefill chunking under the gather-workspace area budget",
    .source = "vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(docs/semantics/indices.md A7)",
    DSV4_OP_TABLES(plan),
    .resolve = plan_resolve,
    .generate = plan_generate,
    .validate = plan_validate,
    .alloc_outputs = plan_alloc,
    .reference = plan_reference,
    .policy = dsv4_indices_exact_policy,
    .mask = plan_mask,
    .locate = NULL,
};
