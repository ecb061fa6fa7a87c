/* ops.h - the registered ops, one extern per op (defined in harness/ops_*.c). */
#ifndef DSV4_OPS_H
#define DSV4_OPS_H

#include "op.h"
#include "rng.h"

extern const dsv4_op dsv4_op_combine_topk_swa_indices;
extern const dsv4_op dsv4_op_compute_global_topk_indices_and_lens;
extern const dsv4_op dsv4_op_compute_global_topk_ragged_indices_and_indptr;
extern const dsv4_op dsv4_op_build_prefill_topk_ragged_indices;
extern const dsv4_op dsv4_op_decode_swa_indices_and_lens;
extern const dsv4_op dsv4_op_copy_ragged_to_graph_buffers;
extern const dsv4_op dsv4_op_get_prefill_chunk_plan;
extern const dsv4_op dsv4_op_rocm_sparse_attn_prefill;
extern const dsv4_op dsv4_op_rocm_inverse_rope_rows;
extern const dsv4_op dsv4_op_rocm_inverse_rope_mxfp8_rows;
extern const dsv4_op dsv4_op_rocm_sparse_attn_decode;
extern const dsv4_op dsv4_op_sparse_mla_fwd;
extern const dsv4_op dsv4_op_quantize_and_insert_k_cache;
extern const dsv4_op dsv4_op_dequantize_and_gather_k_cache;
extern const dsv4_op dsv4_op_mxfp4_quant;
extern const dsv4_op dsv4_op_mxfp8_quant;
extern const dsv4_op dsv4_op_fp8_group_quant;
extern const dsv4_op dsv4_op_fused_qk_rmsnorm_group_quant;
extern const dsv4_op dsv4_op_quantize_and_insert_k_cache;
extern const dsv4_op dsv4_op_dequantize_and_gather_k_cache;
extern const dsv4_op dsv4_op_gemm_a8w8_blockscale;
extern const dsv4_op dsv4_op_shuffle_weight;
extern const dsv4_op dsv4_op_rocm_inv_rope_einsum;
extern const dsv4_op dsv4_op_rocm_mxfp8_wo_a_bmm;
extern const dsv4_op dsv4_op_fused_qnorm_rope_kv_insert;
extern const dsv4_op dsv4_op_compressor;
extern const dsv4_op dsv4_op_rocm_mxfp4_indexer_k_store;
extern const dsv4_op dsv4_op_rocm_mxfp4_indexer_q_quant;
extern const dsv4_op dsv4_op_paged_mxfp4_mqa_logits;
extern const dsv4_op dsv4_op_rocm_mxfp4_sparse_attn_indexer;
extern const dsv4_op dsv4_op_rocm_mxfp4_sparse_mqa_indexer;

/* Floating-point operations of paged_mxfp4_mqa_logits: 2 * H * 128 per
 * (row, key below the row end) (harness/ops_indexer.c; bench). */
double dsv4_indexer_logits_flops(const dsv4_params *ps, const dsv4_tensors *in);

/* Shared helpers of the op files (harness/ops_common.c). */

/* A policy for bit-exact outputs. */
void dsv4_policy_exact(dsv4_policy *pol, const char *why);
/* Fill every byte of an output with a poison pattern, so that an element a
 * backend forgets to write is caught (and named) by the comparator. */
void dsv4_poison(dsv4_tensor *t);
/* Per-request lengths of a generated batch, from the generator parameters
 * query_lens and prefix_lens (absent: every prefix 0). */
typedef struct dsv4_req_shape {
    int64_t R, T;
    const int64_t *qlen;
    int64_t prefix[DSV4_PARAM_LIST_MAX];
} dsv4_req_shape;

/* Reads query_lens / prefix_lens; each length must lie in [0, max_query] /
 * [0, max_prefix].  broadcast: a one-entry prefix_lens applies to every
 * request (otherwise it must have one entry per request). */
int dsv4_req_shape_of(const dsv4_params *ps, int64_t max_query, int64_t max_prefix, int broadcast,
                      dsv4_req_shape *rs, dsv4_status *st);
/* One token's top-k row as the indexer writes it: min(n, Wk) distinct
 * compressed indices from [0, n) in random order (partial Fisher-Yates over
 * scratch[0..n)), then -1 (spec sparse_attention.md 6.1: topk_indices_buffer
 * holds local compressed indices).  row may be scratch itself. */
void dsv4_fill_topk_row(dsv4_rng *rng, int32_t *row, int64_t Wk, int64_t n, int32_t *scratch);

/* A plain RoPE table as the generators make it: row p = cos | sin of
 * p * theta^(-2k/rd), k < rd/2, rounded to fp32 (spec sparse_attention.md 1,
 * 11 [S21]: SWA-only layers use rope_theta with factor 1).  The references
 * never recompute it: it is an input, stored in the golden. */
void dsv4_gen_cos_sin(float *cache, int64_t P, int rd, double theta);
/* Fetch an input of the given dtype and rank, or fail naming it. */
int dsv4_input(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int ndim,
               const dsv4_tensor **out, dsv4_status *st);

#endif
