/* indices.h - index and metadata builders of the sparse-MLA prefill and
 * decode paths (docs/semantics/indices.md A5, A6).  Integer work,
 * bit-exact.  Plain arrays in, plain arrays out; no allocation. */
#ifndef DSV4_INDICES_H
#define DSV4_INDICES_H

#include <stdint.h>

#include "status.h"

/* _SPARSE_PREFILL_TOPK_ALIGNMENT (docs/semantics/indices.md A6.2, FlashMLA
 * needs a multiple of 64 or 128). */
#define DSV4_SPARSE_PREFILL_TOPK_ALIGNMENT 128

typedef enum dsv4_combine_variant {
    /* The seeds' Torch function (vllm deepseek_v41/amd/rocm.py [SEED1], [S4]):
     * top-k values outside [0, N) -> -1, width K_eff = min(topk, Wk). */
    DSV4_COMBINE_TORCH = 0,
    /* validate_topk=none: common Triton JIT [S1 @03dc5649]: r*M + v for every
     * v, even -1; requires topk <= Wk (it reads past the row otherwise). */
    DSV4_COMBINE_NO_VALIDATE,
    /* width_guard=col0: common Triton [S2 @4fec5ad6]: 0 <= v < N checked,
     * width K (not min(K, Wk)); columns j >= Wk load column 0. */
    DSV4_COMBINE_WIDTH_COL0,
    DSV4_COMBINE_VARIANT_COUNT
} dsv4_combine_variant;

typedef struct dsv4_combine_args {
    const int32_t *topk_indices;     /* [num_tokens, topk_width] */
    int64_t num_tokens, topk_width;
    const int32_t *query_start_loc;  /* [num_reqs + 1], may start at a non-zero base */
    const int32_t *seq_lens;         /* [num_reqs] */
    const int32_t *gather_lens;      /* [num_reqs] */
    int64_t num_reqs;
    int64_t window_size, compress_ratio, topk, M, N;
} dsv4_combine_args;

/* P = ceil((topk + window) / 128) * 128, the combined row width. */
int64_t dsv4_combine_width(int64_t topk, int64_t window_size);

/* Checks what the Torch function needs to be defined: query_start_loc
 * non-decreasing and covering exactly num_tokens rows, compress_ratio >= 1,
 * window_size, topk, M, N >= 0 (and topk <= topk_width for
 * validate_topk=none).  DSV4_EINPUT with the offending element named. */
int dsv4_combine_check(const dsv4_combine_args *a, dsv4_combine_variant v, dsv4_status *st);

/* combined [num_tokens, P] int32 and combined_lens [num_tokens] int32, every
 * element written (rows start as -1).  Calls dsv4_combine_check first. */
int dsv4_ref_combine_topk_swa_indices(const dsv4_combine_args *a, dsv4_combine_variant v,
                                      int32_t *combined, int32_t *combined_lens,
                                      dsv4_status *st);

/* ---- compute_global_topk_indices_and_lens (docs/semantics/indices.md A5.6) and its ragged form
 * compute_global_topk_ragged_indices_and_indptr (docs/semantics/indices.md A5.7). */

typedef enum dsv4_gtopk_variant {
    /* Base semantics [S1, S2, S3, S7]: no bounds checks; a block-table read
     * out of range is undefined, so the reference rejects it as bad input. */
    DSV4_GTOPK_BASE = 0,
    /* bounds=checked: the newer contract pinned by the test [S26]: bad
     * request -> row -1 / lens 0; v < 0 or v//Bc >= block-table width -> -1,
     * not counted; survivors compacted left. */
    DSV4_GTOPK_CHECKED,
    DSV4_GTOPK_VARIANT_COUNT
} dsv4_gtopk_variant;

typedef struct dsv4_gtopk_args {
    const int32_t *topk_indices;   /* [num_tokens, topk_width] local compressed indices */
    int64_t num_tokens, topk_width;
    const int32_t *token_to_req;   /* [num_tokens] */
    const uint8_t *is_valid_token; /* [num_tokens], 0 or 1 */
    const int32_t *block_table;    /* [bt_rows, bt_cols] compressed pages */
    int64_t bt_rows, bt_cols;
    int64_t block_size;            /* Bc: compressed rows per page */
} dsv4_gtopk_args;

/* ragged = 0: the reads of the dense op (every v >= 0, any token);
 * ragged = 1: those of the ragged op (j < lens[t] only).  Under
 * DSV4_GTOPK_BASE a read out of the block table is DSV4_EINPUT. */
int dsv4_gtopk_check(const dsv4_gtopk_args *a, dsv4_gtopk_variant v, int ragged, dsv4_status *st);

/* global [num_tokens, topk_width] and lens [num_tokens] int32; every element written. */
int dsv4_ref_compute_global_topk_indices_and_lens(const dsv4_gtopk_args *a, dsv4_gtopk_variant v,
                                                  int32_t *global, int32_t *lens,
                                                  dsv4_status *st);

/* docs/semantics/indices.md A5.7: lens [T], indptr [T+1] (exclusive prefix sum), flat [T*K] of
 * which only [0, indptr[T]) is written (the rest is unspecified). */
int dsv4_ref_compute_global_topk_ragged_indices_and_indptr(const dsv4_gtopk_args *a, int32_t *flat,
                                                           int32_t *indptr, int32_t *lens,
                                                           dsv4_status *st);

/* ---- build_prefill_topk_ragged_indices (docs/semantics/indices.md A5.9; inferred from S29). */

typedef enum dsv4_pftopk_variant {
    /* invalid=-1 (default): a row holds its first cap columns; entries not in
     * [0, N) (or whose slot is not in [0, num_rows)) are -1 (inferred: the
     * S29 test filters x >= 0, and 5.7/5.8 keep -1 entries). */
    DSV4_PFTOPK_KEEP = 0,
    /* invalid=drop: those entries are dropped and the row compacted (inferred). */
    DSV4_PFTOPK_DROP,
    DSV4_PFTOPK_VARIANT_COUNT
} dsv4_pftopk_variant;

typedef struct dsv4_pftopk_args {
    const int32_t *topk_indices;    /* [num_prefill_tokens, topk_width] */
    int64_t num_prefill_tokens, topk_width;
    const int32_t *token_to_req;    /* [num_tokens] whole batch */
    const uint8_t *is_valid_token;  /* [num_tokens] */
    int64_t num_tokens;
    const int32_t *query_start_loc; /* [num_reqs + 1] whole batch, base 0 */
    const int32_t *seq_lens;        /* [num_reqs] */
    int64_t num_reqs;
    const int32_t *block_table;     /* [bt_rows, bt_cols] compressed pages */
    int64_t bt_rows, bt_cols;
    int64_t block_size, compress_ratio, num_compressed, token_offset;
    int64_t num_rows;               /* < 0: no slot range check */
} dsv4_pftopk_args;

int dsv4_pftopk_check(const dsv4_pftopk_args *a, dsv4_status *st);
/* flat [num_prefill_tokens * topk_width] (only [0, indptr[end]) written),
 * indptr [num_prefill_tokens + 1]. */
int dsv4_ref_build_prefill_topk_ragged_indices(const dsv4_pftopk_args *a, dsv4_pftopk_variant v,
                                               int32_t *flat, int32_t *indptr, dsv4_status *st);

/* ---- decode_swa_indices_and_lens (_compute_swa_indices_and_lens_kernel, docs/semantics/indices.md A5.2). */

typedef struct dsv4_swa_args {
    const int32_t *query_start_loc; /* [num_reqs + 1] */
    const int32_t *seq_lens;        /* [num_reqs] */
    int64_t num_reqs;
    const int32_t *token_to_req;    /* [num_tokens] */
    const uint8_t *is_valid_token;  /* [num_tokens] */
    int64_t num_tokens;
    const int32_t *block_table;     /* [bt_rows, bt_cols] SWA pages */
    int64_t bt_rows, bt_cols;
    int64_t window_size, block_size, token_offset;
    int64_t out_rows;               /* rows written: tokens token_offset .. + out_rows */
} dsv4_swa_args;

int dsv4_swa_check(const dsv4_swa_args *a, dsv4_status *st);
/* indices [out_rows, W] is in/out: rows of invalid tokens are not rewritten
 * (docs/semantics/indices.md A5.2); lens [out_rows] fully written. */
int dsv4_ref_decode_swa_indices_and_lens(const dsv4_swa_args *a, int32_t *indices, int32_t *lens,
                                         dsv4_status *st);

/* docs/semantics/indices.md A5.8: len_r = clamp(lengths[r], 0, width); indptr [n+1]; flat gets
 * only [0, indptr[n]) written; num_rows >= 0 maps values outside
 * [0, num_rows) to -1. */
void dsv4_ref_build_ragged_indices_from_dense(const int32_t *indices, int64_t n, int64_t width,
                                              const int32_t *lengths, int64_t num_rows,
                                              int32_t *flat, int32_t *indptr);

/* ---- _copy_ragged_to_graph_buffers (the seed, vllm deepseek_v41/amd/rocm.py). */

typedef struct dsv4_graphcopy_args {
    const int32_t *ragged_indices; int64_t num_entries;   /* source, any length */
    const int32_t *ragged_indptr; int64_t indptr_len;     /* source */
    int64_t indices_capacity, indptr_capacity;            /* persistent buffers */
    int64_t num_rows, max_entries_per_row;
    int gfx950;                                           /* _ON_GFX950 */
} dsv4_graphcopy_args;

/* The buffers are in/out: only the copied ranges change.  view_lens[0] =
 * numel of the returned indices view, view_lens[1] = of the indptr view. */
int dsv4_ref_copy_ragged_to_graph_buffers(const dsv4_graphcopy_args *a, int32_t *indices_buffer,
                                          int32_t *indptr_buffer, int64_t view_lens[2],
                                          dsv4_status *st);

/* ---- get_prefill_chunk_plan (docs/semantics/indices.md A7 [S12]). */

typedef struct dsv4_chunkplan_args {
    const int32_t *seq_lens, *query_lens; /* [num_prefills] prefill requests */
    int64_t num_prefills;
    int64_t compress_ratio, chunk_size, window_size, max_model_len, max_num_batched_tokens;
    int has_compressed; /* 0: SWA-only layer, compressed widths 0 (inferred) */
} dsv4_chunkplan_args;

int dsv4_chunkplan_check(const dsv4_chunkplan_args *a, dsv4_status *st);
/* plan [num_prefills, 4] rows (start, end, max_compressed, max_compressed +
 * max_gather); rows >= *num_chunks untouched.  num_chunks <= num_prefills. */
int dsv4_ref_get_prefill_chunk_plan(const dsv4_chunkplan_args *a, int64_t *plan, int64_t *num_chunks,
                                    dsv4_status *st);

/* ---- get_compressed_slot_mapping (docs/semantics/indices.md A5.4 [S20]):
 * the compressed-cache slot of every token whose position closes a
 * compressed entry ((pos + 1) % c == 0), with context parallelism: the
 * compressed positions of a request are spread over cp_world_size ranks in
 * runs of cp_interleave entries inside each virtual page of
 * block_size * cp_world_size entries, and a rank writes only its own. */

typedef struct dsv4_cslot_args {
    const int32_t *query_start_loc; /* [num_reqs + 1], non-decreasing, ends <= out_len */
    const int32_t *seq_lens;        /* [num_reqs], seq_lens[r] >= query_len[r] */
    const int32_t *block_table;     /* [num_reqs, bt_cols] compressed-cache pages */
    int64_t num_reqs, bt_cols;
    int64_t out_len;                /* the output buffer, >= the batch's tokens */
    int64_t compress_ratio, block_size;
    int64_t cp_world_size, cp_rank, cp_interleave;
} dsv4_cslot_args;

/* What the kernel needs to be defined: positions >= 0 (the upstream guard
 * fills the buffer with -1 because negative positions would read the block
 * table out of range), every page a written slot needs inside the block
 * table, slots inside int32 (the kernel multiplies in int32).  DSV4_EINPUT
 * naming the request. */
int dsv4_cslot_check(const dsv4_cslot_args *a, dsv4_status *st);
/* slot_mapping [out_len]: -1 everywhere, then each valid token's slot. */
int dsv4_ref_get_compressed_slot_mapping(const dsv4_cslot_args *a, int64_t *slot_mapping, dsv4_status *st);

#endif
