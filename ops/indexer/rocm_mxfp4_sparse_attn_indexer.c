/* rocm_mxfp4_sparse_attn_indexer.c - the source indexer layer: paged MXFP4
 * logits, the top-k positions, and the candidate pool it publishes
 * (docs/semantics/indexer.md Q6.2-Q6.4).  Reference: ref/indexer.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexer.h"

/* The rule is the logits mode the layer scores with. */
static const dsv4_variant sa_variants[] = {
    {"default",
     "RocmSparseAttnIndexer.forward_hip (" DSV4_INDEXER_SEED2 "): dense logits, top-k over [0, row end) into "
     "topk_indices_buffer (-1 padding); with candidate_block_size > 0 the pool: block scores (per-C max, newest "
     "block +inf), candidate_blocks = top-k blocks (docs/semantics/indexer.md Q6.2 step 4, Q6.4)",
     &(const dsv4_idx_mode){DSV4_IDX_IDEAL}},
    {NULL, NULL, NULL},
};

static const char sa_params[] =
    DSV4_INDEXER_LAYER_PARAMS
    "    candidate_block_size  int = 0  C of the candidate pool (8 in V4.1); 0: no pool written\n"
    "    candidate_topk_blocks int = 0  candidate blocks per row (a power of two)\n";

static const char sa_inputs[] = DSV4_INDEXER_LG_INPUTS;

static const char sa_outputs[] =
    "logits           float32 golden=float64  [rows, max_model_len] the scores the top-k ranks\n"
    DSV4_INDEXER_TOPK_INDICES_OUTPUT
    "block_scores     float32 golden=float64  [rows, ceil(width / C)] (only with candidate_block_size > 0)\n"
    "candidate_blocks int32                   [rows, candidate_topk_blocks] block ids, -1 padding\n";

static int sa_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_indexer_lg_generate(c, in, dsv4_params_int(c->params, "topk"), st);
}

/* C = candidate_block_size (0: no pool) and nb = candidate_topk_blocks. */
static int sa_check_pool(const dsv4_params *ps, int64_t *C, int64_t *nb, dsv4_status *st)
{
    *C = dsv4_params_int(ps, "candidate_block_size");
    *nb = dsv4_params_int(ps, "candidate_topk_blocks");
    if (dsv4_params_int(ps, "topk") < 1)
        return dsv4_fail(st, DSV4_EINPUT, "topk must be >= 1");
    if (*C < 0 || (*C > 0 && (*nb < 1 || (*nb & (*nb - 1)) || dsv4_params_int(ps, "page_entries") % *C)))
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size %" PRId64 " must divide page_entries and "
                         "candidate_topk_blocks %" PRId64 " be a power of two "
                                                          "(docs/semantics/indexer.md Q5.2)", *C, *nb);
    return DSV4_OK;
}

static int sa_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_indexer_lg g;
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    return rc ? rc : dsv4_indexer_lg_validate(c, in, &g, st);
}

static int sa_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_indexer_lg g;
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    if (rc || (rc = dsv4_indexer_lg_args(c, in, &g, st)) || (rc = dsv4_indexer_add_logits(&g, out, st)) ||
        (rc = dsv4_indexer_add_topk(&g, dsv4_params_int(c->params, "topk"), out, st)) || C == 0)
        return rc;
    int64_t sb[2] = {g.a.rows, (g.a.width + C - 1) / C}, sc[2] = {g.a.rows, nb};
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "block_scores", DSV4_F32, 2, sb, &o, st)))
        return rc;
    for (int64_t i = 0; i < sb[0] * sb[1]; i++)
        ((float *)o->data)[i] = -INFINITY; /* the caller's pre-fill (docs/semantics/indexer.md Q6.2 step 4) */
    if ((rc = dsv4_tensors_add(out, "candidate_blocks", DSV4_I32, 2, sc, &o, st)))
        return rc;
    memset(o->data, 0xFF, o->nbytes);
    return DSV4_OK;
}

static int sa_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    dsv4_indexer_lg g;
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    if (rc || (rc = dsv4_indexer_lg_args(c, in, &g, st)))
        return rc;
    double *lg = dsv4_tensors_find(out, "logits")->data;
    if ((rc = dsv4_ref_mqa_logits(&g.a, *mode, lg, NULL, st)))
        return rc;
    const int64_t k = dsv4_params_int(c->params, "topk");
    int32_t *ti = dsv4_tensors_find(out, "topk_indices")->data;
    for (int64_t r = 0; r < g.a.rows; r++) /* over [0, end) of the row's logits (double, the golden dtype) */
        dsv4_idx_topk_row(lg + r * g.a.width, dsv4_idx_row_end(&g.a, r), k, 0, ti + r * k);
    if (C == 0)
        return DSV4_OK;
    double *bs = dsv4_tensors_find(out, "block_scores")->data;
    int32_t *cb = dsv4_tensors_find(out, "candidate_blocks")->data;
    const int64_t nblocks = (g.a.width + C - 1) / C;
    for (int64_t r = 0; r < g.a.rows; r++)
        dsv4_indexer_pool_row(lg + r * g.a.width, dsv4_idx_row_end(&g.a, r), C, nblocks, nb, bs + r * nblocks,
                              cb + r * nb);
    return DSV4_OK;
}

static int sa_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0)
        dsv4_indexer_policy_logits(g.a.H, *mode == DSV4_IDX_FAITHFUL, pol);
    else if (strcmp(output, "block_scores") == 0)
        dsv4_policy_float(pol, DSV4_F32, "float: the block's largest logits bound (a max of logits); "
                          "+-inf exact (the pinned newest block, the pre-filled tail)");
    else if (strcmp(output, "topk_indices") == 0)
        return dsv4_indexer_topk_policy(c, in, "logits", "top-k positions of each row", pol, st);
    else
        return dsv4_indexer_topk_policy(c, in, "block_scores", "top-k candidate blocks of each row", pol, st);
    return DSV4_OK;
}

static int sa_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0)
        dsv4_indexer_mask_rows(&g, mask, n);
    else
        memset(mask, 1, (size_t)n);
    return DSV4_OK;
}

/* logits: the logits bound; block_scores: the largest bound of the block's
 * logits (a max moves by at most its elements' largest error). */
static int sa_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    const dsv4_idx_mode *mode = c->rule;
    const int faithful = *mode == DSV4_IDX_FAITHFUL;
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0)
        return dsv4_indexer_logits_bound(&g, faithful, bound, n, st);
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size"), nblocks = n / (g.a.rows ? g.a.rows : 1);
    const size_t m = (size_t)(g.a.rows * g.a.width);
    double *eb = malloc((m ? m : 1) * sizeof *eb);
    if (!eb)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if ((rc = dsv4_indexer_logits_bound(&g, faithful, eb, (int64_t)m, st)) == DSV4_OK)
        for (int64_t r = 0; r < g.a.rows; r++)
            for (int64_t i = 0; i < nblocks; i++) {
                double b = 0;
                for (int64_t j = i * C; j < (i + 1) * C && j < g.a.width; j++)
                    b = eb[r * g.a.width + j] > b ? eb[r * g.a.width + j] : b;
                bound[r * nblocks + i] = b;
            }
    free(eb);
    return rc;
}

const dsv4_op dsv4_op_rocm_mxfp4_sparse_attn_indexer = {
    .name = "rocm_mxfp4_sparse_attn_indexer",
    .summary = "the source indexer layer: paged MXFP4 logits, top-k positions, and the candidate pool it publishes",
    .source = DSV4_INDEXER_SEED2 " RocmSparseAttnIndexer; vLLM candidate_blocks.py id 68922604649 "
                                 "(docs/semantics/indexer.md Q6.2-Q6.4)",
    DSV4_OP_TABLES(sa),
    .resolve = dsv4_indexer_lg_resolve,
    .generate = sa_generate,
    .validate = sa_validate,
    .alloc_outputs = sa_alloc,
    .reference = sa_reference,
    .policy = sa_policy,
    .mask = sa_mask,
    .locate = dsv4_indexer_locate_logits,
    .bound = sa_bound,
};
