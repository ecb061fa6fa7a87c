/* rocm_mxfp4_sparse_mqa_indexer.c - a candidate-consuming indexer layer:
 * logits of the candidate pool only, then the top-k positions
 * (docs/semantics/indexer.md Q6.3).  Reference: ref/indexer.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "indexer.h"

/* The rule is the logits mode the layer scores with. */
static const dsv4_variant mq_variants[] = {
    {"default",
     "RocmSparseMQAIndexer.forward (" DSV4_INDEXER_SEED2 "): score only the candidate pool (ids 0 <= id < ceil(end/C), "
     "columns id*C + i below the row end), top-k over them, compact slots remapped to positions "
     "(docs/semantics/indexer.md Q6.3)",
     &(const dsv4_idx_mode){DSV4_IDX_IDEAL}},
    {NULL, NULL, NULL},
};

static const char mq_params[] =
    DSV4_INDEXER_LAYER_PARAMS
    "    candidate_block_size  int = 8   C of the candidate pool\n"
    "gen candidate_topk_blocks int = 64  generator: candidate blocks per row\n";

static const char mq_inputs[] =
    DSV4_INDEXER_LG_INPUTS
    "candidate_blocks int32  [rows, n] block ids the source layer published, -1 padding\n";

static const char mq_outputs[] =
    "logits       float32 golden=float64  [rows, max_model_len]; only candidate columns below the row end specified\n"
    DSV4_INDEXER_TOPK_INDICES_OUTPUT;

/* Per row: a column mask of the candidate columns below the end. */
static int mq_columns(const dsv4_opctx *c, const dsv4_indexer_lg *g, const dsv4_tensor *cb, uint8_t *colmask,
                      dsv4_status *st)
{
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size"), n = cb->shape[1];
    if (C < 1)
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size must be >= 1");
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    memset(colmask, 0, (size_t)(g->a.rows * g->a.width));
    for (int64_t r = 0; r < g->a.rows && !rc; r++) {
        const int64_t e = dsv4_idx_row_end(&g->a, r);
        int64_t nids, ncols;
        if ((rc = dsv4_idx_candidate_ids((const int32_t *)cb->data + r * n, n, e, C, ids, &nids, &ncols, st))) {
            dsv4_status_prefix(st, "candidate_blocks row");
            break;
        }
        for (int64_t i = 0; i < nids; i++)
            for (int64_t j = (int64_t)ids[i] * C; j < ((int64_t)ids[i] + 1) * C && j < e; j++)
                colmask[r * g->a.width + j] = 1;
    }
    free(ids);
    return rc;
}

/* The logits inputs, candidate_blocks (one row per query row) and the
 * malloc'd column mask (*colmask, the caller frees it). */
static int mq_setup(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_indexer_lg *g, uint8_t **colmask,
                    dsv4_status *st)
{
    const dsv4_tensor *cb;
    int rc = dsv4_indexer_lg_args(c, in, g, st);
    if (rc || (rc = dsv4_input(in, "candidate_blocks", DSV4_I32, 2, &cb, st)))
        return rc;
    if (cb->shape[0] != g->a.rows)
        return dsv4_fail(st, DSV4_EINPUT, "candidate_blocks must have one row per query row");
    const int64_t n = g->a.rows * g->a.width;
    *colmask = malloc((size_t)(n > 0 ? n : 1));
    if (!*colmask)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    return mq_columns(c, g, cb, *colmask, st);
}

static int mq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_indexer_lg g;
    uint8_t *cm = NULL;
    int rc = dsv4_params_int(c->params, "topk") < 1 ? dsv4_fail(st, DSV4_EINPUT, "topk must be >= 1")
                                                    : dsv4_indexer_lg_validate(c, in, &g, st);
    if (!rc)
        rc = mq_setup(c, in, &g, &cm, st);
    free(cm);
    return rc;
}

static int mq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    int rc = dsv4_indexer_lg_generate(c, in, dsv4_params_int(c->params, "topk"), st);
    if (rc)
        return rc;
    dsv4_indexer_lg g;
    if ((rc = dsv4_indexer_lg_args(c, in, &g, st)))
        return rc;
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size");
    const int64_t nb = dsv4_params_int(c->params, "candidate_topk_blocks");
    if (C < 1 || nb < 1)
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size and candidate_topk_blocks must be >= 1");
    int64_t s[2] = {g.a.rows, nb};
    dsv4_tensor *cb;
    if ((rc = dsv4_tensors_add(in, "candidate_blocks", DSV4_I32, 2, s, &cb, st)))
        return rc;
    /* The pool the source layer would publish from these logits
     * (docs/semantics/indexer.md Q6.2 step 4), then perturbed: an
     * out-of-range id (filtered) and -1 slots. */
    double *lg = NULL, *bs = NULL;
    const int64_t nblocks = (g.a.width + C - 1) / C;
    rc = dsv4_indexer_run_logits(&g, *mode, &lg, st);
    if (!rc && !(bs = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *bs)))
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int32_t *cd = cb->data;
    for (int64_t r = 0; !rc && r < g.a.rows; r++) {
        const int64_t e = dsv4_idx_row_end(&g.a, r), be = (e + C - 1) / C;
        dsv4_indexer_pool_row(lg + r * g.a.width, e, C, nblocks, nb, bs, cd + r * nb);
        if (r % 3 == 1 && cd[r * nb + nb - 1] >= 0)
            cd[r * nb + nb - 1] = (int32_t)(be + 2); /* >= ceil(end/C): dropped (docs/semantics/indexer.md Q6.3) */
    }
    free(lg);
    free(bs);
    return rc;
}

static int mq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc || (rc = dsv4_indexer_add_logits(&g, out, st)))
        return rc;
    return dsv4_indexer_add_topk(&g, dsv4_params_int(c->params, "topk"), out, st);
}

static int mq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    dsv4_indexer_lg g;
    uint8_t *cm = NULL;
    int rc = mq_setup(c, in, &g, &cm, st);
    double *lg = rc ? NULL : dsv4_tensors_find(out, "logits")->data;
    if (!rc)
        rc = dsv4_ref_mqa_logits(&g.a, *mode, lg, NULL, st);
    if (!rc) {
        /* the gathered kernel scores the candidate slots only; the others
         * are -inf (apply_candidate_mask, docs/semantics/indexer.md Q6.3)
         * and never selected */
        for (int64_t i = 0; i < g.a.rows * g.a.width; i++)
            if (!cm[i])
                lg[i] = -INFINITY;
        const int64_t k = dsv4_params_int(c->params, "topk");
        int32_t *ti = dsv4_tensors_find(out, "topk_indices")->data;
        for (int64_t r = 0; r < g.a.rows; r++) {
            int64_t n = 0;
            for (int64_t j = 0; j < g.a.width; j++)
                n += cm[r * g.a.width + j];
            /* top-k over the compact columns, remapped: the valid count is
             * min(k, cu); -inf columns past the pool are dropped */
            dsv4_idx_topk_row(lg + r * g.a.width, g.a.width, k < n ? k : n, 0, ti + r * k);
            for (int64_t i = n; i < k; i++)
                ti[r * k + i] = -1;
        }
    }
    free(cm);
    return rc;
}

static int mq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") != 0)
        return dsv4_indexer_topk_policy(c, in, "logits", "top-k positions among the candidates", pol, st);
    dsv4_indexer_policy_logits(g.a.H, *mode == DSV4_IDX_FAITHFUL, pol);
    return DSV4_OK;
}

static int mq_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    dsv4_indexer_lg g;
    uint8_t *cm = NULL;
    int rc = mq_setup(c, in, &g, &cm, st);
    if (!rc) {
        if (strcmp(output, "logits") == 0)
            memcpy(mask, cm, (size_t)n);
        else
            memset(mask, 1, (size_t)n);
    }
    free(cm);
    return rc;
}

static int mq_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    (void)output;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    return rc ? rc : dsv4_indexer_logits_bound(&g, *mode == DSV4_IDX_FAITHFUL, bound, n, st);
}

const dsv4_op dsv4_op_rocm_mxfp4_sparse_mqa_indexer = {
    .name = "rocm_mxfp4_sparse_mqa_indexer",
    .summary = "a candidate-consuming indexer layer: logits of the candidate pool only, top-k positions",
    .source = DSV4_INDEXER_SEED2 " RocmSparseMQAIndexer; docs/semantics/indexer.md Q6.3 (build_candidate_gather, "
                                 "_remap_compact_topk)",
    DSV4_OP_TABLES(mq),
    .resolve = dsv4_indexer_lg_resolve,
    .generate = mq_generate,
    .validate = mq_validate,
    .alloc_outputs = mq_alloc,
    .reference = mq_reference,
    .policy = mq_policy,
    .mask = mq_mask,
    .locate = dsv4_indexer_locate_logits,
    .bound = mq_bound,
};
