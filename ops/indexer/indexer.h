/* indexer.h - what the paged MXFP4 indexer ops (ops/indexer/<op>.c) share
 * (ops/indexer/indexer_common.c): the quantization variants of the K store
 * and the Q quant, and for the three logits ops (paged_mxfp4_mqa_logits,
 * rocm_mxfp4_sparse_attn_indexer, rocm_mxfp4_sparse_mqa_indexer) their
 * parameters, inputs, generator, validator, error bound, policies, mask and
 * locator.  Semantics: ref/indexer.c; docs/semantics/indexer.md Q4-Q6. */
#ifndef DSV4_OPS_INDEXER_H
#define DSV4_OPS_INDEXER_H

#include "../../ref/indexer.h"
#include "../ops.h"

#define DSV4_INDEXER_SEED0 "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py [SEED1]"
#define DSV4_INDEXER_SEED2 "vllm-project/vllm:vllm/model_executor/layers/rocm_paged_mxfp4_indexer.py [SEED2]"

/* rocm_mxfp4_indexer_k_store and rocm_mxfp4_indexer_q_quant: variant B (the
 * seeds') and A; each rule points at a dsv4_idx_quant. */
extern const dsv4_variant dsv4_indexer_quant_variants[];

/* A bit-reproducible cos|sin table [P, R]. */
void dsv4_indexer_gen_cos_sin(dsv4_rng *rng, float *cs, int64_t P, int R);

/* ---- the logits ops ------------------------------------------------------- */

#define DSV4_INDEXER_LG_PARAMS                                                                                         \
    "    heads          int   = 64      index heads H (picks the layout's tiles too)\n"                                \
    "    page_entries   int   = 32      keys per cache page\n"                                                         \
    "    shuffle        int   = 1       1: the preshuffled cache of rocm_paged_mxfp4_cache_layout; 0: natural\n"       \
    "    max_model_len  int   = 0       logits width in compressed positions (0: the longest context)\n"               \
    "gen seq_lens       int[] required  generator: tokens of each request (uncompressed)\n"                            \
    "gen query_lens     int[] required  generator: query rows of each request (1 = decode)\n"                          \
    "gen compress_ratio int   = 4       generator: row end (pos+1)//c, context seq//c (docs/semantics/indexer.md "     \
        "Q5.2)\n"                                                                                                      \
    "gen spare_pages    int   = 2       generator: NaN-poisoned pages nobody maps\n"                                   \
    "gen wild           int   = 0       generator: 1 far-apart block scales (the exact fallback), 2 also NaN scales\n" \
    "gen ties           int   = 0       generator: exact (even requests) and near (odd) ties at the k-th key\n"

/* The parameters both indexer layers (rocm_mxfp4_sparse_attn_indexer,
 * rocm_mxfp4_sparse_mqa_indexer) start with: the logits op's, then the
 * top-k width. */
#define DSV4_INDEXER_LAYER_PARAMS       \
    DSV4_INDEXER_LG_PARAMS              \
    "    topk int = 512  topk_tokens\n"
#define DSV4_INDEXER_LG_INPUTS                                                         \
    "q               uint8    [rows, H, 64] e2m1 pairs\n"                              \
    "q_scale         int32    [rows, H] 4 e8m0 bytes per head (little-endian int32)\n" \
    "weights         float32  [rows, H] head weights\n"                                \
    "kv_cache        uint8    [pages, page_entries, 68] the paged MXFP4 cache\n"       \
    "context_lens    int32    [B] compressed\n"                                        \
    "block_table     int32    [B, max_blocks]\n"                                       \
    "query_start_loc int32    [B + 1] rows of each request\n"                          \
    "row_ends        int32    [rows] compressed end of each row\n"

/* The logits inputs, checked against the params, as the reference's args. */
typedef struct dsv4_indexer_lg {
    const dsv4_tensor *q, *qs, *w, *kc, *ctx, *bt, *qsl, *re;
    dsv4_idx_layout L;
    dsv4_idx_logits_args a;
} dsv4_indexer_lg;

int dsv4_indexer_lg_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_indexer_lg *g, dsv4_status *st);
/* lg_args, the reference's array checks and finite weights. */
int dsv4_indexer_lg_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_indexer_lg *g, dsv4_status *st);
/* max_model_len 0: the longest compressed context. */
int dsv4_indexer_lg_resolve(dsv4_params *ps, dsv4_status *st);
/* The logits inputs from the params; with ties, the k-th key of each
 * request's last row gets an exact or near tie (tie_k = that k). */
int dsv4_indexer_lg_generate(const dsv4_opctx *c, dsv4_tensors *in, int64_t tie_k, dsv4_status *st);

/* The logits of mode into a malloc'd [rows, width] (the caller frees it). */
int dsv4_indexer_run_logits(const dsv4_indexer_lg *g, dsv4_idx_mode mode, double **out, dsv4_status *st);
/* The per-element error bound of the fp32 logits against the ideal, n of
 * them (docs/semantics/indexer.md Q6.2): the faithful model's or the
 * ideal's factor times sum_h |w_h| sum_d |q_hd k_d|, 0 past the row end. */
int dsv4_indexer_logits_bound(const dsv4_indexer_lg *g, int faithful, double *bound, int64_t n, dsv4_status *st);
/* The largest, over the rows, of the row's largest logits bound over its
 * largest |score|: the tie tolerance of the top-k sets. */
int dsv4_indexer_tie_rtol(const dsv4_indexer_lg *g, double *rtol, dsv4_status *st);
/* The float policy of logits of H heads (faithful: the model's bound). */
void dsv4_indexer_policy_logits(int H, int faithful, dsv4_policy *pol);
/* The index-set policy of a top-k output ranked by scores (what: the
 * output in the rule's words), with the tie tolerance of tie_rtol. */
int dsv4_indexer_topk_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *scores, const char *what,
                             dsv4_policy *pol, dsv4_status *st);
/* mask[r, j] = j < the row end of r. */
void dsv4_indexer_mask_rows(const dsv4_indexer_lg *g, uint8_t *mask, int64_t n);
/* Names an element of the output "logits" (other outputs: nothing). */
void dsv4_indexer_locate_logits(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                                char *buf, size_t len);

/* Outputs: logits [rows, width] pre-filled with -inf; topk_indices
 * [rows, k] pre-filled with -1. */
int dsv4_indexer_add_logits(const dsv4_indexer_lg *g, dsv4_tensors *out, dsv4_status *st);
int dsv4_indexer_add_topk(const dsv4_indexer_lg *g, int64_t k, dsv4_tensors *out, dsv4_status *st);
/* The candidate pool of one row of logits ending at end: block scores
 * bs[nblocks] (nblocks = ceil(width / C)) and the top nb blocks into
 * blocks[nb], -1 for -inf (docs/semantics/indexer.md Q6.2 step 4, Q6.4). */
void dsv4_indexer_pool_row(const double *logits, int64_t end, int64_t C, int64_t nblocks, int64_t nb, double *bs,
                           int32_t *blocks);

/* Rows several indexer ops declare alike (schema syntax: harness/op.h). */
#define DSV4_INDEXER_TOPK_INDICES_OUTPUT \
    "topk_indices         int32    [rows, topk] compressed positions, -1 padding, any order\n"

#endif
