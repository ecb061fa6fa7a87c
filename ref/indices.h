/* indices.h - index and metadata builders of the sparse-MLA prefill and
 * decode paths (spec sparse_attention.md sections 5 and 6).  Integer work,
 * bit-exact.  Plain arrays in, plain arrays out; no allocation. */
#ifndef DSV4_INDICES_H
#define DSV4_INDICES_H

#include <stdint.h>

#include "status.h"

/* _SPARSE_PREFILL_TOPK_ALIGNMENT (spec sparse_attention.md 6.2, FlashMLA
 * needs a multiple of 64 or 128). */
#define DSV4_SPARSE_PREFILL_TOPK_ALIGNMENT 128

typedef enum dsv4_combine_variant {
    /* The seeds' Torch function (vllm deepseek_v41/amd/rocm.py, spec [S4]):
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

#endif
