/* attention.h - DeepSeek V4 sparse MLA attention with an attention sink
 * (docs/semantics/attention.md A8) and its output epilogues (docs/semantics/attention.md A9.1, A9.3).
 *
 * out[t,h,:] = sum_i e^{s_i - m} V_i / (sum_i e^{s_i - m} + e^{sink[h] - m}),
 * s_i = scale * q[t,h,:] . K_i, m = max(max_i s_i, sink[h]), K_i = V_i = the
 * whole 512-lane key row (448 NoPE + 64 RoPE) [S9, S24, S23].  The key set of
 * token t is the multiset of its valid entries over one or two segments (the
 * decode / aiter "main" and "extra" lists); an entry is valid iff
 * 0 <= v < num_rows of its segment [S9]; a token with no valid entry gives
 * exactly 0 [S9, S11, S23].
 *
 * Two modes:
 *  - ideal: double precision throughout (dgemm), the golden value;
 *  - faithful: the ROCm Triton kernels' rounding points: fp32 scores
 *    (sgemm of the exact bf16 inputs, then x scale), fp32 softmax from the
 *    keys' max, p rounded to bf16 before P.V while l sums the fp32 p, fp32
 *    P.V, and the sink merge m_f = max(m, sink), alpha = e^{m - m_f},
 *    l_f = l*alpha + e^{sink - m_f}, out = acc*alpha / max(l_f, 1e-30)
 *    (0 if l_f <= 0) (docs/semantics/attention.md A8.3 [S9]).  The result is fp32 (the kernel's
 *    value before the bf16 store).
 *
 * Work per token: the valid rows are gathered once (shared by all heads:
 * MQA) and the scores and P.V are two GEMMs through OpenBLAS.  Memory is
 * O(T*H*512) for q/out plus the gathered rows of one token; no [T, H, N]
 * score matrix exists. */
#ifndef DSV4_ATTENTION_H
#define DSV4_ATTENTION_H

#include <stdint.h>

#include "mx.h"
#include "rope.h"
#include "status.h"

typedef enum dsv4_attn_mode { DSV4_ATTN_IDEAL = 0, DSV4_ATTN_FAITHFUL = 1 } dsv4_attn_mode;

/* Row r of a segment's key buffer as 512 floats (bf16 and dequantized fp8
 * values are exact in fp32).  Returns DSV4_OK or an error. */
typedef int (*dsv4_kv_fetch_fn)(const void *ctx, int64_t row, float *out, dsv4_status *st);

typedef struct dsv4_attn_segment {
    const char *name;          /* for messages, e.g. "kv" or "swa_k_cache" */
    int64_t num_rows;          /* an entry v is valid iff 0 <= v < num_rows [S9] */
    const uint16_t *bf16_rows; /* [num_rows, 512] bf16 rows, or NULL: use fetch */
    dsv4_kv_fetch_fn fetch;
    const void *fetch_ctx;
    /* NaN lanes of a key row read as 0 (decode kernels [S9]); otherwise a
     * non-finite lane in a referenced row is bad input (prefill does not
     * scrub, docs/semantics/attention.md A8.3, so its output would be undefined). */
    int scrub_nan;
    /* The entries of token t: ragged when indptr != NULL (indices[indptr[t]
     * .. indptr[t+1])), else dense: the first clamp(lens[t], 0, width)
     * columns of indices [T, width] (docs/semantics/attention.md A8.2; docs/semantics/indices.md A5.8 [S9]). */
    const int32_t *indices;
    const int32_t *indptr;
    const int32_t *lens;
    int64_t width;
    int64_t num_indices;       /* ragged: length of indices (bounds indptr) */
    /* Optional, with fetch: start loading row r's bytes (a hint only). */
    void (*prefetch)(const void *ctx, int64_t row);
} dsv4_attn_segment;

#define DSV4_ATTN_MAX_SEGMENTS 2

typedef struct dsv4_attn_args {
    const uint16_t *q;       /* bf16 [T, H, 512] */
    int64_t T, H;
    const float *attn_sink;  /* [H]; NULL = no sink (same as -inf) [S24] */
    double scale;            /* 512^-0.5 in the model [S14] */
    int nseg;
    dsv4_attn_segment seg[DSV4_ATTN_MAX_SEGMENTS];
} dsv4_attn_args;

/* Optional by-products of an ideal run, for tolerance bounds and hints.
 * Any member may be NULL. */
typedef struct dsv4_attn_diag {
    double *abs_out;   /* [T, H, 512]: sum_i w_i |V_i,d|, w the sink-normalized weights */
    double *sink_w;    /* [T, H]: e^{sink - m} / denominator, the sink's weight */
    int64_t *nvalid;   /* [T]: valid keys of the token */
    double *score_mag; /* [T, H]: scale * ||q_th||_2 * max_i ||K_i||_2 (0 if no key) */
    double *abs_top;   /* [T, H, 512]: w_top |V_top,d|, the share of abs_out of the
                        * row's highest-scoring key (0 if no key) */
} dsv4_attn_diag;

/* Shapes, indptr monotonicity and bounds, sink values (no NaN, no +Inf), and
 * the finiteness of every referenced row (after NaN scrubbing where the
 * segment scrubs): DSV4_EINPUT naming the tensor and element. */
int dsv4_attn_check(const dsv4_attn_args *a, dsv4_status *st);

/* Valid entries of token t over all segments. */
int64_t dsv4_attn_count_valid(const dsv4_attn_args *a, int64_t t);

/* out: [T, H, 512] doubles (faithful: fp32 values).  diag may be NULL
 * (faithful mode ignores it). */
int dsv4_ref_sparse_attn(const dsv4_attn_args *a, dsv4_attn_mode mode, double *out,
                         dsv4_attn_diag *diag, dsv4_status *st);

/* rocm_inverse_rope_rows_ (docs/semantics/attention.md A9.1 [S9]): in place on bf16 o [T, H, 512];
 * rows t >= rotated get the inverse GPT-J rotation of lanes 448..511 in fp32
 * at positions[t], each lane rounded to bf16; NoPE lanes and rows < rotated
 * are untouched.  positions [T] index cos_sin_cache [num_pos, rope_dim]. */
int dsv4_ref_inverse_rope_rows(uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                               const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                               int64_t rotated, dsv4_status *st);

/* The ideal of the same epilogue: the rotation in double of the bf16 inputs
 * (NoPE lanes copied), [T, H, 512] doubles. */
int dsv4_ref_inverse_rope_rows_f64(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                   const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                                   int64_t rotated, double *out, dsv4_status *st);

/* The fp32 rows rocm_inverse_rope_mxfp8_rows quantizes (docs/semantics/attention.md A9.3 steps 1-2
 * [S9]): x = fp32(o[t,h,:]) of bf16 o [T, H, 512], lanes 448..511 rotated
 * inversely in fp32 at positions[t] (dsv4_rope_gptj_f32: products rounded,
 * then the sum), NoPE lanes copied bit for bit (docs/semantics/attention.md A9.1: "NoPE lanes are
 * unchanged (bit-exact)"; a literal cos = 1, sin = 0 pass would map a -0
 * lane with a positive partner to +0, we keep -0).  out [T, H, 512] fp32. */
int dsv4_ref_inverse_rope_rows_f32(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                   const float *cos_sin_cache, int64_t num_pos, int rope_dim, float *out,
                                   dsv4_status *st);

/* rocm_inverse_rope_mxfp8_rows(o, positions, cos_sin_cache, rope_dim,
 * out_data, out_scale) (docs/semantics/attention.md A9.3 [S9]; docs/semantics/quant.md Q2):
 * the rows of dsv4_ref_inverse_rope_rows_f32, then MXFP8 of every 512-lane
 * head row by `rule` (an MXFP8 rule of mx.h; the ROCm kernels' is
 * DSV4_MX_FP8_CEIL) through dsv4_mx_quant_rows_fp8.  data [T, H*512]
 * e4m3fn (head h at columns h*512), scales [T, H*16] uint8 (scale (t, h*16+g)
 * covers lanes 32g..32g+31 of head h).  Non-finite o is DSV4_EINPUT (the
 * kernels' NaN behaviour is open, docs/semantics/README.md Q9.5). */
int dsv4_ref_inverse_rope_mxfp8_rows(const uint16_t *o, int64_t T, int64_t H, const int64_t *positions,
                                     const float *cos_sin_cache, int64_t num_pos, int rope_dim,
                                     dsv4_mx_rule rule, uint8_t *data, uint8_t *scales, dsv4_status *st);

#endif
