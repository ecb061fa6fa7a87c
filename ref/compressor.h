/* compressor.h - the SWA insert with q preparation
 * (_fused_qnorm_rope_kv_insert) and the KV compressor chain (save partial
 * states, compress, insert into the compressed cache).  Semantics:
 * docs/semantics/kvcache.md A2.5 (state cache), docs/semantics/gemm.md A3
 * (fused insert), A11 (compressor), docs/semantics/indices.md A5.4
 * (compressed slot mapping) [S15, S16, S17-S20].
 * Codecs: kvcache.h (the 584-byte format), RoPE: rope.h.  Plain arrays. */
#ifndef DSV4_COMPRESSOR_H
#define DSV4_COMPRESSOR_H

#include <stdint.h>

#include "kvcache.h"
#include "status.h"

/* ---- _fused_qnorm_rope_kv_insert (docs/semantics/gemm.md A3) ----------- */

typedef struct dsv4_qnorm_insert_args {
    const uint16_t *q;     /* [T, H, 512] bf16 */
    int64_t T, H;
    const uint16_t *kv;    /* [>= Ts, 512] bf16 (already kv-normed) */
    const int64_t *slot_mapping; /* [Ts]; -1 = skip */
    int64_t Ts;            /* len(slot_mapping) <= rows of kv (DP padding) */
    const int64_t *positions; /* [max(T, Ts)] */
    const float *cos_sin_cache; /* [num_pos, 64] */
    int64_t num_pos;
    double eps;
} dsv4_qnorm_insert_args;

/* Q branch, ideal: per (t, h) x = q[t,h,:], y = x / sqrt(mean(x^2) + eps)
 * (no weight), forward GPT-J RoPE of lanes 448..511 at positions[t], all
 * in double.  q_out [T, H, 512]; mag (may be NULL) [T, H, 512] the
 * magnitude the fp32 error scales with: |y_d| (NoPE), |e c| + |o s| or
 * |e s| + |o c| (RoPE lanes, of the normed pair). */
int dsv4_ref_qnorm_rope(const dsv4_qnorm_insert_args *a, double *q_out, double *mag, dsv4_status *st);

/* The same rows stored as bf16 (RNE of fp32(y), as a bf16 tensor stores a
 * double), q_out [T, H, 512], without a [T, H, 512] double copy. */
int dsv4_ref_qnorm_rope_bf16(const dsv4_qnorm_insert_args *a, uint16_t *q_out, dsv4_status *st);

/* KV branch, bit-exact as the kernel: y = fp32(kv[t]); forward GPT-J RoPE
 * of lanes 448..511 in fp32 (rope.h, unfused products); bf16 of all 512;
 * encoded per docs/semantics/kvcache.md A2.2 into slot_mapping[t] (kvcache.h).  Slots -1 are
 * skipped; out-of-range or duplicate slots are DSV4_EINPUT before any
 * write. */
int dsv4_ref_kv_rope_insert(const dsv4_qnorm_insert_args *a, uint8_t *cache, const dsv4_kv_layout *L,
                            const dsv4_kv_encode_opts *o, dsv4_status *st);

/* ---- compressor (docs/semantics/gemm.md A11) ------------------------------ */

#define DSV4_COMP_DIM 512 /* head_dim of the MLA compressor (docs/semantics/gemm.md A11) */

typedef struct dsv4_compressor_args {
    int64_t ratio;               /* c: 4 (C4, overlapping window) or 128 (C128) */
    int64_t T, R;                /* tokens of this step, requests */
    const float *kv_score;       /* [T, 2*coff*512]: kv | score (fp32 GEMM output) */
    const int64_t *positions;    /* [T] */
    const int32_t *query_start_loc; /* [R+1] token ranges per request */
    const float *ape;            /* [c, coff*512] */
    float *state;                /* [num_state_blocks, Bs, 2*coff*512], in/out */
    int64_t num_state_blocks;
    const int64_t *state_slots;  /* [T] state slot of each token (-1: none) */
    const int32_t *state_block_table; /* [R, max_state_blocks] */
    int64_t max_state_blocks;
    const float *norm_weight;    /* [512] */
    double eps;
    const float *cos_sin_cache;  /* [num_pos, 64] */
    int64_t num_pos;
    uint8_t *kv_cache;           /* [num_blocks, B = 256/c, 584], in/out */
    int64_t num_blocks;
    const int32_t *block_table;  /* [R, max_blocks] compressed-cache pages */
    int64_t max_blocks;
} dsv4_compressor_args;

/* coff (2 for C4, 1 for C128) and the state page size Bs (4, 8) (docs/semantics/kvcache.md A2.5). */
int dsv4_compressor_coff(int64_t ratio);
int64_t dsv4_compressor_state_block(int64_t ratio);

/* Checks shapes and every index the step will use (state slots, block
 * tables, positions, cos_sin rows) and that kv_score, ape, weights are
 * finite, before anything is written. */
int dsv4_compressor_check(const dsv4_compressor_args *a, dsv4_status *st);

/* One step: save_partial_states for every token (state[slot] = [kv |
 * score + ape[pos % c]], fp32 add), then, for each token with (pos+1) % c
 * == 0, the softmax-weighted window (per dim, over the coff*c state rows of
 * positions pos-coff*c+1..pos, rows with position < 0 masked), RMSNorm
 * with weight, NoPE bf16 + fp8 quant, RoPE at (pos // c) * c, inserted at
 * the compressed slot of docs/semantics/indices.md A5.4 (OCP, FP8MAX 448).  The float steps are
 * the ideal (double); latent (may be NULL) [T, 512] gets each emitting
 * token's normalized row (NaN for tokens that emit none). */
int dsv4_ref_compressor_step(const dsv4_compressor_args *a, double *latent, dsv4_status *st);

/* The compressed-cache row that token t of the step writes: 1 with *page,
 * *row when it emits one (a state slot and (pos + 1) % c == 0), else 0
 * (also when its request or block table is out of range: a passes
 * dsv4_compressor_check first).  For the tolerance of kv_cache: only those
 * rows may differ by a rounding flip. */
int dsv4_compressor_emit_row(const dsv4_compressor_args *a, int64_t t, int64_t *page, int64_t *row);

#endif
