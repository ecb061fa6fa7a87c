/* build_prefill_topk_ragged_indices.c - aiter paged prefill: causal-capped
 * local top-k rows -> global slots as CSR.  Inferred from an upstream test;
 * the kernel source was not found.  Semantics: ref/indices.c
 * (docs/semantics/indices.md A5.9). */
#include <stdlib.h>
#include <string.h>

#include "indices.h"

static const dsv4_pftopk_variant pftopk_keep = DSV4_PFTOPK_KEEP;
static const dsv4_pftopk_variant pftopk_drop = DSV4_PFTOPK_DROP;

static const dsv4_variant pftopk_variants[] = {
    {"default",
     "inferred: first cap = min((pos+1)//c, Wk) columns; entries outside [0, N) (or slots outside "
     "[0, num_rows)) kept as -1 (docs/semantics/indices.md A5.9, test id 69177189503; source not found)",
     &pftopk_keep},
    {"invalid=drop", "inferred: those entries dropped and the row compacted (docs/semantics/README.md A15.5)",
     &pftopk_drop},
    {NULL, NULL, NULL},
};

static const char pftopk_params[] =
    DSV4_INDICES_BLOCK_SIZE_PARAM
    DSV4_INDICES_COMPRESS_RATIO_PARAM
    "    num_compressed     int   = -1   N; -1: ceil(max_model_len / c)\n"
    "    token_offset       int   = -1   num_decode_tokens; -1: tokens of the leading query_len-1 requests\n"
    "    num_rows           int   = -1   slots outside [0, num_rows) -> -1; -1: no bound\n"
    DSV4_REQ_SHAPE_PARAMS
    "gen topk_width         int   = 512  generator: Wk, columns of topk_indices\n"
    DSV4_INDICES_MAX_MODEL_LEN_PARAM
    DSV4_INDICES_INVALID_TOKEN_FRAC_PARAM
    "gen fail_frac          float = 0    generator: fraction of rows with -1 and N+3 under the cap (as S29)\n"
    DSV4_INDICES_BT_PAD_PARAM;

static const char pftopk_inputs[] =
    "topk_indices         int32  [T_pf, Wk] local top-k rows of the prefill tokens\n"
    "token_to_req_indices int32  [T] request of each batch token\n"
    DSV4_INDICES_QUERY_START_LOC_INPUT
    DSV4_INDICES_SEQ_LENS_INPUT
    DSV4_INDICES_IS_VALID_TOKEN_INPUT
    DSV4_INDICES_BLOCK_TABLE_INPUT;

static const char pftopk_outputs[] =
    "topk_ragged_indices int32  [T_pf*Wk] flat; entries past indptr[T_pf] unspecified\n"
    "topk_ragged_indptr  int32  [T_pf+1] row offsets\n";

static int pftopk_resolve(dsv4_params *ps, dsv4_status *st)
{
    dsv4_req_shape rs;
    int rc;
    if ((rc = dsv4_indices_shape_of(ps, &rs, st)) ||
        (rc = dsv4_indices_resolve_compressed(ps, &rs, "num_compressed", st)))
        return rc;
    return dsv4_indices_default_to(ps, "token_offset", dsv4_indices_decode_tokens(&rs), st);
}

static int pftopk_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    dsv4_indices_gen_params gp;
    int rc = dsv4_indices_gen_params_of(ps, &gp, st);
    if (rc)
        return rc;
    if (gp.compress_ratio < 1 || gp.block_size < 1 || gp.topk_width < 0 || gp.token_offset < 0 ||
        gp.token_offset > gp.rs.T)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio, block_size >= 1; topk_width >= 0; token_offset in [0, T]");
    int64_t width, shape[2] = {gp.rs.T - gp.token_offset, gp.topk_width};
    dsv4_tensor *topk;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape, &topk, st)) ||
        (rc = dsv4_indices_gen_paged_batch(c, &gp.rs, 1, gp.compress_ratio, gp.block_size, in, &width, st)))
        return rc;
    dsv4_tensor scratch_t; /* counts against the memory limit, like the tensors */
    int64_t n_scratch = gp.num_compressed + 1;
    if ((rc = dsv4_tensor_alloc(&scratch_t, "topk_indices scratch", DSV4_I32, 1, &n_scratch, st)))
        return rc;
    int32_t *scratch = scratch_t.data;
    const double fail = dsv4_params_float(ps, "fail_frac");
    dsv4_rng rng, sp;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    dsv4_rng_init(&sp, c->seed, "topk_indices.special");
    for (int64_t r = 0, t = 0; r < gp.rs.R; r++)
        for (int64_t i = 0; i < gp.rs.qlen[r]; i++, t++) {
            if (t < gp.token_offset)
                continue;
            const int64_t Wk = gp.topk_width, N = gp.num_compressed;
            int32_t *row = (int32_t *)topk->data + (t - gp.token_offset) * Wk;
            int64_t visible = (gp.rs.prefix[r] + i + 1) / gp.compress_ratio, cap = visible < Wk ? visible : Wk;
            dsv4_fill_topk_row(&rng, row, Wk, visible < N ? visible : N, scratch);
            /* As the upstream test does: a failed candidate and one past the
             * pool under the cap; stale values in [0, N) past it, which no
             * reader may use (docs/semantics/indices.md A5.9). */
            if (cap >= 2 && dsv4_rng_uniform(&sp) < fail) {
                row[0] = -1;
                row[1] = (int32_t)(N + 3);
            }
            for (int64_t j = cap; j < Wk && N > 0; j++)
                row[j] = (int32_t)dsv4_rng_range(&sp, 0, N);
        }
    dsv4_tensor_free(&scratch_t);
    return DSV4_OK;
}

static int pftopk_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_pftopk_args *a, dsv4_status *st)
{
    const dsv4_tensor *topk;
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = dsv4_input(in, "topk_indices", DSV4_I32, 2, &topk, st)) ||
        (rc = dsv4_indices_token_inputs(in, -1, &a->token_to_req, &a->is_valid_token, &a->num_tokens, st)) ||
        (rc = dsv4_indices_request_inputs(in, &a->query_start_loc, &a->seq_lens, &a->num_reqs, st)) ||
        (rc = dsv4_indices_block_table(in, &a->block_table, &a->bt_rows, &a->bt_cols, st)))
        return rc;
    a->topk_indices = topk->data;
    a->num_prefill_tokens = topk->shape[0];
    a->topk_width = topk->shape[1];
    a->block_size = dsv4_params_int(c->params, "block_size");
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->num_compressed = dsv4_params_int(c->params, "num_compressed");
    a->token_offset = dsv4_params_int(c->params, "token_offset");
    a->num_rows = dsv4_params_int(c->params, "num_rows");
    return DSV4_OK;
}

DSV4_VALIDATE_VIA_ARGS(pftopk_validate, dsv4_pftopk_args, pftopk_args, dsv4_pftopk_check)

static int pftopk_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t nflat = a.num_prefill_tokens * a.topk_width, n1 = a.num_prefill_tokens + 1;
    if ((rc = dsv4_indices_add_output(out, "topk_ragged_indices", DSV4_I32, 1, &nflat, st)))
        return rc;
    return dsv4_indices_add_output(out, "topk_ragged_indptr", DSV4_I32, 1, &n1, st);
}

static int pftopk_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_pftopk_variant *rule = c->rule;
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_build_prefill_topk_ragged_indices(&a, *rule,
                                                          dsv4_tensors_find(out, "topk_ragged_indices")->data,
                                                          dsv4_tensors_find(out, "topk_ragged_indptr")->data, st);
}

/* nnz from a private run of the reference on the inputs: the mask must not
 * trust the backend's indptr. */
static int pftopk_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask,
                       int64_t n, dsv4_status *st)
{
    if (strcmp(output, "topk_ragged_indices") != 0) {
        dsv4_indices_ragged_mask(mask, n, n);
        return DSV4_OK;
    }
    const dsv4_pftopk_variant *rule = c->rule;
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int32_t *flat = malloc((size_t)(a.num_prefill_tokens * a.topk_width + 1) * sizeof *flat);
    int32_t *ip = malloc((size_t)(a.num_prefill_tokens + 1) * sizeof *ip);
    if (!flat || !ip)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_ref_build_prefill_topk_ragged_indices(&a, *rule, flat, ip, st);
    if (!rc)
        dsv4_indices_ragged_mask(mask, n, ip[a.num_prefill_tokens]);
    free(flat);
    free(ip);
    return rc;
}

const dsv4_op dsv4_op_build_prefill_topk_ragged_indices = {
    .name = "build_prefill_topk_ragged_indices",
    .summary = "aiter paged prefill: causal-capped local top-k rows -> global slots as CSR (inferred)",
    .source = "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py ([SEED1] _prefill_topk_ragged); "
              "semantics inferred from test id 69177189503 (docs/semantics/indices.md A5.9)",
    DSV4_OP_TABLES(pftopk),
    .resolve = pftopk_resolve,
    .generate = pftopk_generate,
    .validate = pftopk_validate,
    .alloc_outputs = pftopk_alloc,
    .reference = pftopk_reference,
    .policy = dsv4_indices_exact_policy,
    .mask = pftopk_mask,
    .locate = NULL,
};
