/* gemm.h - the block-scaled FP8 GEMM (gemm_a8w8_blockscale and its
 * _bpreshuffle form), aiter's shuffle_weight(layout=(16,16)), and the wo_a
 * projections of the ROCm output path (rocm_inv_rope_einsum,
 * rocm_mxfp8_wo_a_bmm).  Semantics: docs/semantics/gemm.md Q7 and A10; the
 * seeds' vllm/models/deepseek_v41/amd/rocm.py [SEED1] (_bpre_attn_gemm,
 * apply_pre_quantized_block_scaled_mm, prepare_attn_preshuffle, _o_proj).
 *
 * Determinism of the ideal (what goes into goldens): an e4m3fn value is an
 * integer times 2^-9 with |integer| <= 448 * 2^9 < 2^18 (e4m3fnuz: times
 * 2^-10, 240 * 2^10 < 2^18), so a product of two is an integer below 2^36
 * times a fixed power of two, and any partial sum of one 128-wide K block
 * is an integer below 2^43 times that power: exact in double (53 bits), in
 * any order.  The per-block dot P_kb therefore comes out of OpenBLAS dgemm
 * bit-identical for any blocking or thread count; the scales are then
 * applied and the blocks summed in a
 * fixed order (kb = 0, 1, ...) by plain C.  Plain arrays, row-major. */
#ifndef DSV4_GEMM_H
#define DSV4_GEMM_H

#include <stdint.h>

#include "numerics.h"
#include "status.h"

#define DSV4_GEMM_BLOCK 128 /* 1x128 activation groups, 128x128 weight blocks (docs/semantics/gemm.md Q7) */

/* ---- shuffle_weight(x, layout=(16, 16)) (docs/semantics/gemm.md Q7) ------ */

/* Flat index that element (n, k) of an [N, K] matrix of elem_size-byte
 * elements takes in the shuffled buffer: IN = IK = 16, BK = 32,
 * Kp = 16 / elem_size:
 * ((((n/16)*(K/32) + k/32)*(32/Kp) + (k%32)/Kp)*16 + n%16)*Kp + k%Kp. */
int64_t dsv4_shuffle_index(int64_t n, int64_t k, int64_t K, int elem_size);
/* Checks N % 16 == 0, K % 32 == 0, elem_size in {1, 2}. */
int dsv4_shuffle_check(int64_t N, int64_t K, int elem_size, dsv4_status *st);
/* out = shuffle_weight(in) (inverse = 0) or its inverse (inverse = 1), for
 * `batch` leading matrices (leading dims are preserved, docs/semantics/gemm.md Q7). */
int dsv4_ref_shuffle_weight(const uint8_t *in, uint8_t *out, int64_t batch, int64_t N, int64_t K,
                            int elem_size, int inverse, dsv4_status *st);

/* ---- gemm_a8w8_blockscale (docs/semantics/gemm.md Q7) ------------------ */

typedef struct dsv4_gemm_args {
    const uint8_t *xq;      /* [M, K] fp8 codes */
    const uint8_t *wq;      /* [N, K] fp8 codes, or shuffle_weight of them (w_shuffled) */
    const float *x_scale;   /* [M, K/128] (or memory [K/128][M] when x_scale_transposed) */
    const float *w_scale;   /* [ceil(N/128), K/128] */
    int64_t M, N, K;
    dsv4_fp8_kind kind;     /* e4m3fn (gfx950) or e4m3fnuz (gfx942) */
    int x_scale_transposed; /* bpreshuffle: x_scale stored transposed (docs/semantics/gemm.md Q7) */
    int w_shuffled;         /* bpreshuffle: WQ = shuffle_weight(W, (16,16)) */
} dsv4_gemm_args;

/* K % 128 == 0 (prepare_attn_preshuffle's group-128 condition, seed), and
 * with w_shuffled N % 16 == 0; M, N >= 0; finite scales; no NaN fp8 code in
 * either operand (named by element). */
int dsv4_gemm_check(const dsv4_gemm_args *a, dsv4_status *st);

/* The ideal: y[m, n] = sum_kb P_kb * (xs[m, kb] * ws[n/128, kb]) in double,
 * P_kb the exact dot of block kb (see the header comment), blocks summed in
 * order; y [M, N]. */
int dsv4_ref_gemm_a8w8_blockscale_f64(const dsv4_gemm_args *a, double *y, dsv4_status *st);
/* The Triton kernel's fp32 order (docs/semantics/gemm.md Q7): per K block
 * in order, P = the block's fp32 sum, k in order from +0; acc = acc +
 * fl(P * xs) * ws, unfused.  One defined order: the same bits on every
 * machine, SIMD level and thread count.  A faithful model for large or
 * bench cases, compared with a tolerance, never written into goldens. */
int dsv4_ref_gemm_a8w8_blockscale_f32(const dsv4_gemm_args *a, float *y, dsv4_status *st);
/* The same fp32 values widened (exactly) into double, without a float copy. */
int dsv4_ref_gemm_a8w8_blockscale_f32_wide(const dsv4_gemm_args *a, double *y, dsv4_status *st);
/* The gauge g[m, n] = sum_k |a_mk xs| |b_nk ws| (what the fp32 accumulation
 * error is proportional to), in double via dgemm (a bound, not a golden). */
int dsv4_gemm_abs_gauge(const dsv4_gemm_args *a, double *g, dsv4_status *st);

/* ---- wo_a (docs/semantics/gemm.md A10) ----------------------------------- */

/* rocm_inv_rope_einsum(rotary, o, positions, 64, G, R, wo_a, inverse_rope):
 * o [T, H, 512] bf16; inverse_rope: inverse GPT-J RoPE of the last 64 lanes
 * of each head at positions[t] (docs/semantics/attention.md A9.1), else o as given; view [T, G, Dg]
 * (Dg = H*512/G); w [G, R, Dg] bf16; out[t, g, r] = sum_d o_r[t,g,d]
 * w[g,r,d] in double (ideal: the rotation exact, not rounded to bf16), fixed
 * order.  gauge (may be NULL): sum_d |o_r||w|; rope_err (may be NULL):
 * sum over RoPE lanes of (1 ulp_bf16(|o_r|) + 3*2^-24 (|a c| + |b s|)) |w|,
 * the kernel's bf16-rounded fp32 rotation error carried through. */
typedef struct dsv4_einsum_args {
    const uint16_t *o;
    int64_t T, H, G, R;
    const int64_t *positions;
    const float *cos_sin_cache;
    int64_t num_pos;
    int rope_dim;
    int inverse_rope;
    const uint16_t *w;
} dsv4_einsum_args;
int dsv4_ref_inv_rope_einsum(const dsv4_einsum_args *a, double *out, double *gauge, double *rope_err,
                             dsv4_status *st);

/* rocm_mxfp8_wo_a_bmm(a, a_scale, wo_a, G, R) (docs/semantics/gemm.md A10.3): a [T, G*K] e4m3fn
 * with e8m0 scales [T, G*K/32]; w [G*R, K] e4m3fn with scales [G*R, K/32];
 * out[t, g*R + r] = sum_k deq(a[t, g*K + k]) deq(w[g*R + r, k]) in double
 * (each 32-block dot exact, blocks summed in order).  gauge (may be NULL):
 * sum_k |deq a| |deq w|.  NaN codes or scale 0xFF -> DSV4_EINPUT. */
typedef struct dsv4_wo_a_bmm_args {
    const uint8_t *a, *a_scale, *w, *w_scale;
    int64_t T, G, R, K;
} dsv4_wo_a_bmm_args;
int dsv4_ref_mxfp8_wo_a_bmm(const dsv4_wo_a_bmm_args *a, double *out, double *gauge, dsv4_status *st);

#endif
