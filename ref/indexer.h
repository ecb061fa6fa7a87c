/* indexer.h - the paged MXFP4 sparse-attention indexer of vLLM's DeepSeek
 * V4.1 ROCm path: the K store into the paged MXFP4 cache, the Q quant, the
 * paged MQA logits, the top-k and the two-level candidate pool.
 *
 * Semantics: docs/semantics/indexer.md Q4-Q6; the seeds' vLLM modules:
 * deepseek_v41/amd/rocm.py [SEED1] (rocm_mxfp4_indexer_k_store /
 * rocm_mxfp4_indexer_q_quant call aiter's fusions/k_norm_rope_mxfp4_cache
 * and rope/q_rope_mxfp4_quant, i.e. variant B) and
 * model_executor/layers/rocm_paged_mxfp4_indexer.py [SEED2]
 * (RocmSparseAttnIndexer, RocmSparseMQAIndexer).
 *
 * Cache layout (docs/semantics/indexer.md Q4.1 step 5, Q5.1): a page holds page_entries keys; its
 * values region [page_entries x D/2] comes first, then its scales region
 * [page_entries x D/32]; with the preshuffle (the layout
 * rocm_paged_mxfp4_cache_layout gives) both regions are tiled by
 * n_per_tile entries.  Row index in compressed positions: key j of a request
 * lives at page block_table[b, j / page_entries], entry j % page_entries. */
#ifndef DSV4_INDEXER_H
#define DSV4_INDEXER_H

#include <stdint.h>

#include "mx.h"
#include "status.h"

/* DeepSeek V4.1 index head: D = 128 with the RoPE on the last 64 (docs/semantics/README.md A12). */
#define DSV4_IDX_HEAD_DIM 128
#define DSV4_IDX_ROPE_DIM 64

/* ---- page layout ---------------------------------------------------------- */

typedef struct dsv4_idx_layout {
    int64_t page_entries; /* keys per page (block_size / compress_ratio) */
    int head_dim;         /* D */
    int shuffled;         /* 1: the preshuffle of docs/semantics/indexer.md Q4.1 step 5 */
    int n_per_tile, d_per_tile, scale_lanes, s_hi;
} dsv4_idx_layout;

/* rocm_paged_mxfp4_cache_layout(num_heads, head_dim, page_entries)
 * (docs/semantics/indexer.md Q5.1): n_per_tile = 32 if head_dim <= 64 or num_heads >= 32 else 16;
 * d_per_tile 16; scale_lanes 64 / n_per_tile; checks that the tiles divide.
 * shuffled = 0 gives the natural order (shuffle=None) with the same checks
 * skipped.  DSV4_EINPUT on a layout the wrapper rejects. */
int dsv4_idx_layout_make(int num_heads, int head_dim, int64_t page_entries, int shuffled,
                         dsv4_idx_layout *L, dsv4_status *st);
/* Bytes per entry (D/2 + D/32) and per page. */
int64_t dsv4_idx_entry_bytes(const dsv4_idx_layout *L);
int64_t dsv4_idx_page_bytes(const dsv4_idx_layout *L);
/* Offset inside a page of value byte b (0..D/2) / scale s (0..D/32) of entry p. */
int64_t dsv4_idx_value_offset(const dsv4_idx_layout *L, int64_t p, int b);
int64_t dsv4_idx_scale_offset(const dsv4_idx_layout *L, int64_t p, int s);
/* One entry's D/2 packed value bytes and D/32 scale bytes, read / written. */
void dsv4_idx_read_entry(const dsv4_idx_layout *L, const uint8_t *page, int64_t p, uint8_t *values,
                         uint8_t *scales);
void dsv4_idx_write_entry(const dsv4_idx_layout *L, uint8_t *page, int64_t p, const uint8_t *values,
                          const uint8_t *scales);
/* The decoder for reports and tests: a page in natural order, values
 * [page_entries, D/2] and scales [page_entries, D/32]. */
void dsv4_idx_unshuffle_page(const dsv4_idx_layout *L, const uint8_t *page, uint8_t *values,
                             uint8_t *scales);
/* Names a byte offset inside a page: its entry, and whether it is value
 * byte `index` or scale `index` of that entry. */
void dsv4_idx_locate_byte(const dsv4_idx_layout *L, int64_t off, int64_t *entry, int *is_scale,
                          int *index);

/* ---- K store and Q quant --------------------------------------------------- */

typedef enum dsv4_idx_quant {
    /* The seeds' ops (docs/semantics/indexer.md Q4 variant B): aiter _mxfp4_quant_op SCALING_MODE 1
     * (the exact bit rule) and v_cvt e2m1 (RNE, -0 -> 0x8); Q weights
     * fl(w * fl32(softmax_scale * head_scale)) (the seeds pass the product, [SEED1]). */
    DSV4_IDX_QUANT_B = 0,
    /* aiter pa_mqa_logits_mxfp4_cache.py (docs/semantics/indexer.md Q4 variant A): ceil(log2_f32)
     * scale and the threshold e2m1 (-0 -> 0x0); Q weights
     * fl(fl(w * fl32(softmax_scale)) * fl32(head_scale)). */
    DSV4_IDX_QUANT_A
} dsv4_idx_quant;

typedef struct dsv4_idx_kstore_args {
    const uint16_t *k;          /* [T, D] bf16 */
    const int64_t *positions;   /* [T] */
    const int64_t *slots;       /* [T], < 0 = skip */
    int64_t T;
    const float *cos_sin_cache; /* [num_pos, rope_dim] fp32, cos | sin */
    int64_t num_pos;
    int rope_dim;
    const uint16_t *norm_weight; /* [D] bf16 */
    float eps;
    int64_t compress_ratio;
    int64_t num_pages;
    const dsv4_idx_layout *L;
    dsv4_idx_quant quant;
} dsv4_idx_kstore_args;

/* k_norm_rope_mxfp4_cache as rocm_mxfp4_indexer_k_store calls it (docs/semantics/indexer.md Q4.1):
 * skip slot < 0 and (pos + 1) % c != 0; RMSNorm (fp32, bf16 out); GPT-J RoPE
 * of the last rope_dim dims at the group's first position (pos // c) * c,
 * bf16 out; MXFP4 per 32 dims; write the entry at slot.  cache is
 * [num_pages, page bytes].  Untouched entries keep their bytes. */
int dsv4_ref_indexer_k_store(const dsv4_idx_kstore_args *a, uint8_t *cache, dsv4_status *st);

typedef struct dsv4_idx_qquant_args {
    const uint16_t *q;        /* [T, H, D] bf16 */
    const int64_t *positions; /* [T] */
    int64_t T;
    int H, D;
    const float *cos_sin_cache;
    int64_t num_pos;
    int rope_dim;
    const float *weights;     /* [T, H] fp32 */
    double softmax_scale, head_scale;
    dsv4_idx_quant quant;
} dsv4_idx_qquant_args;

/* q_rope_mxfp4_quant as rocm_mxfp4_indexer_q_quant calls it (docs/semantics/indexer.md Q4.2):
 * RoPE at the token's own position (bf16 out) on the last rope_dim dims, the
 * NoPE blocks quantized from the raw values; packed [T, H, D/2], scales
 * [T, H, D/32] (for D = 128: one little-endian int32 per head), weights_out
 * [T, H] fp32. */
int dsv4_ref_indexer_q_quant(const dsv4_idx_qquant_args *a, uint8_t *q_packed, uint8_t *q_scale,
                             float *weights_out, dsv4_status *st);

/* ---- paged MXFP4 MQA logits ---------------------------------------------- */

typedef struct dsv4_idx_logits_args {
    const uint8_t *q;        /* [rows, H, D/2] packed e2m1 */
    const uint8_t *q_scale;  /* [rows, H, D/32] e8m0 bytes */
    const float *weights;    /* [rows, H] */
    int64_t rows;
    int H, D;
    const uint8_t *cache;    /* [num_pages, page bytes] */
    int64_t num_pages;
    const dsv4_idx_layout *L;
    const int32_t *block_table; /* [B, max_blocks] */
    int64_t max_blocks;
    const int32_t *context_lens;    /* [B], compressed */
    const int32_t *query_start_loc; /* [B + 1]: rows of request b */
    int64_t B;
    const int32_t *row_ends; /* [rows], compressed */
    int64_t width;           /* logits columns (max_model_len // ratio) */
} dsv4_idx_logits_args;

/* The end of row r: min(row_ends[r], context_lens[b]), 0 when context_len
 * <= 0 (docs/semantics/indexer.md Q6.2 "Masking"); -1 if r belongs to no request. */
int64_t dsv4_idx_row_end(const dsv4_idx_logits_args *a, int64_t r);
/* Checks shapes that the arrays imply: row_ends <= width, every block of a
 * key below a row end mapped to a page in [0, num_pages). */
int dsv4_idx_logits_check(const dsv4_idx_logits_args *a, dsv4_status *st);

typedef enum dsv4_idx_mode {
    /* The ideal: per head s_h = q_h . k exactly (the sum of the four exact
     * 32-blocks, in double), then sum_h relu(s_h) * w_h in double, h = 0..H-1. */
    DSV4_IDX_IDEAL = 0,
    /* The kernel's fp32 model (docs/semantics/indexer.md Q6.2 steps 1-3): s_h = two K=64 scaled
     * MFMAs chained through the fp32 accumulator, each summed exactly and
     * rounded once; then the fixed head fold with FMA; logits = fl(A0 + A1).
     * 32 or 64 heads only. */
    DSV4_IDX_FAITHFUL
} dsv4_idx_mode;

/* logits [rows, width]: columns >= the row end are -inf (unspecified in the
 * kernel with clean_logits=False; masked from comparison).  If bound is not
 * NULL it receives, per element, sum_h |w_h| * sum_d |q_hd * k_d| (0 past the
 * row end): the scale of the fp32 rounding error (see ops_indexer.c). */
int dsv4_ref_mqa_logits(const dsv4_idx_logits_args *a, dsv4_idx_mode mode, double *logits,
                        double *bound, dsv4_status *st);

/* ---- top-k and the candidate pool ------------------------------------------ */

/* Top-k of scores[0, n) into out[k]: highest first, ties to the lower index,
 * NaN ranked above everything (torch.topk's order); -1 fills out[n..k).
 * With drop_neg_inf, a selected -inf is written as -1 (the generic
 * reference's rule for block top-k, docs/semantics/indexer.md Q6.4). */
void dsv4_idx_topk_row(const double *scores, int64_t n, int64_t k, int drop_neg_inf, int32_t *out);

/* Block scores of one row (calc_block_scores, docs/semantics/indexer.md Q6.2 step 4): block i =
 * max of logits[iC, iC + C) below end, NaN propagating; the block holding
 * column end - 1 is +inf; blocks at or past ceil(end / C) are -inf (the
 * caller's pre-fill).  nblocks = ceil(width / C). */
void dsv4_idx_block_scores_row(const double *logits, int64_t end, int64_t C, int64_t nblocks,
                               double *out);

/* The consumer's candidate columns (build_candidate_gather, docs/semantics/indexer.md Q6.3): ids
 * with 0 <= id < ceil(end / C), sorted; the columns are id*C + i < end.
 * Writes the sorted ids to ids_out (returns their count) and the column
 * count to *ncols.  A duplicate valid id is bad input (DSV4_EINPUT). */
int dsv4_idx_candidate_ids(const int32_t *cand, int64_t ncand, int64_t end, int64_t C,
                           int32_t *ids_out, int64_t *nids, int64_t *ncols, dsv4_status *st);

#endif
