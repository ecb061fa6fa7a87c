/* gemm.c - block-scaled FP8 GEMM, shuffle_weight, the inverse-RoPE einsum; see gemm.h.
 * Semantics: docs/semantics/gemm.md Q7 (the GEMM, shuffle_weight) and A10 (wo_a). */
#include "gemm.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_inline.h"
#include "parallel.h"
#include "rope.h"
#include "simd.h"

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>
#endif

#define BLK DSV4_GEMM_BLOCK
#define MTILE 256 /* rows per tile: keeps the [MTILE, N] block product in cache */

/* ------------------------------------------------------------------ */
/* shuffle_weight                                                      */

/* aiter shuffle.py: IN = IK = 16, BK = 2*IK = 32, K_pack = Kp = 16 / elem_size;
 * view (N/IN, IN, K/BK, BK/Kp, Kp) permuted to (N/IN, K/BK, BK/Kp, IN, Kp)
 * (docs/semantics/gemm.md Q7, ROCm/aiter:aiter/ops/shuffle.py@e4048607): the
 * shuffled element offset of row n's run c (Kp elements, 16 bytes) of the
 * 32-wide k block kb. */
static inline int64_t shuffled_run(int64_t n, int64_t kb, int64_t c, int64_t K, int64_t Kp)
{
    return ((((n / 16) * (K / 32) + kb) * (32 / Kp) + c) * 16 + n % 16) * Kp;
}

int64_t dsv4_shuffle_index(int64_t n, int64_t k, int64_t K, int elem_size)
{
    const int64_t Kp = 16 / elem_size;
    return shuffled_run(n, k / 32, (k % 32) / Kp, K, Kp) + k % Kp;
}

int dsv4_shuffle_check(int64_t N, int64_t K, int elem_size, dsv4_status *st)
{
    if (elem_size != 1 && elem_size != 2)
        return dsv4_fail(st, DSV4_EINPUT, "shuffle_weight: element size %d (1: fp8, 2: bf16/fp16)", elem_size);
    if (N < 0 || K < 0 || N % 16 || K % 32)
        return dsv4_fail(st, DSV4_EINPUT,
                         "shuffle_weight: [N = %" PRId64 ", K = %" PRId64 "] needs N %% 16 == 0 and K %% 32 == 0",
                         N, K);
    return DSV4_OK;
}

typedef struct shuffle_job {
    const uint8_t *in;
    uint8_t *out;
    int64_t N, K;
    int es, inverse;
} shuffle_job;

/* Rows [n0, n1) of every batch matrix: the Kp = 16 / es elements at k0 =
 * Kp c (one 16-byte run) stay together in the shuffled layout, so each run
 * moves with one copy.  The offsets walked by 32-wide k block and run: one
 * shuffled_run a block, the block's runs 16 rows (256 bytes) apart. */
static int shuffle_range(void *ctx, int64_t n0, int64_t n1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const shuffle_job *j = ctx;
    const int64_t K = j->K, Kp = 16 / j->es, runs = 32 / Kp; /* 16-byte runs per k block */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *src = j->in + (size_t)(n * K) * (size_t)j->es;
        uint8_t *dst = j->out + (size_t)(n * K) * (size_t)j->es;
        for (int64_t kb = 0; kb < K / 32; kb++) {
            const int64_t block = shuffled_run(n, kb, 0, K, Kp) * j->es; /* bytes */
            for (int64_t c = 0; c < runs; c++) {
                const size_t plain = (size_t)(kb * 32 * j->es + c * 16), sh = (size_t)(block + c * 256);
                if (j->inverse)
                    memcpy(dst + plain, j->in + sh, 16);
                else
                    memcpy(j->out + sh, src + plain, 16);
            }
        }
    }
    return DSV4_OK;
}

int dsv4_ref_shuffle_weight(const uint8_t *in, uint8_t *out, int64_t batch, int64_t N, int64_t K,
                            int elem_size, int inverse, dsv4_status *st)
{
    int rc = dsv4_shuffle_check(N, K, elem_size, st);
    if (rc)
        return rc;
    const size_t es = (size_t)elem_size;
    for (int64_t b = 0; b < batch && !rc; b++) {
        shuffle_job j = {in + (size_t)(b * N * K) * es, out + (size_t)(b * N * K) * es, N, K, elem_size, inverse};
        rc = dsv4_parallel_for(N, 64, 0, shuffle_range, &j, st);
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* gemm_a8w8_blockscale                                                */

static int fp8_is_nan(uint8_t b, dsv4_fp8_kind kind)
{
    return kind == DSV4_FP8_E4M3FN ? (b & 0x7F) == 0x7F : b == 0x80;
}

static int64_t kblocks(const dsv4_gemm_args *a) { return a->K / BLK; }

static float xscale(const dsv4_gemm_args *a, int64_t m, int64_t kb)
{
    /* bpreshuffle: memory [K/128][M], logical [M, K/128] (docs/semantics/gemm.md Q7) */
    return a->x_scale_transposed ? a->x_scale[kb * a->M + m] : a->x_scale[m * kblocks(a) + kb];
}

static float wscale(const dsv4_gemm_args *a, int64_t n, int64_t kb)
{
    return a->w_scale[(n / BLK) * kblocks(a) + kb]; /* per 128x128 block [ceil(N/128), K/128] */
}

int dsv4_gemm_check(const dsv4_gemm_args *a, dsv4_status *st)
{
    if (a->M < 0 || a->N < 0 || a->K < 0)
        return dsv4_fail(st, DSV4_EINPUT, "gemm: negative shape");
    if (a->K % BLK)
        return dsv4_fail(st, DSV4_EINPUT,
                         "gemm: K = %" PRId64 " is not a multiple of 128 (1x128 / 128x128 block scales; "
                         "prepare_attn_preshuffle requires K %% 128 == 0)", a->K);
    if (a->w_shuffled && a->N % 16)
        return dsv4_fail(st, DSV4_EINPUT, "gemm: N = %" PRId64 " is not a multiple of 16 (shuffle_weight)", a->N);
    const int64_t KB = kblocks(a), NB = (a->N + BLK - 1) / BLK;
    for (int64_t i = 0; i < a->M * a->K; i++)
        if (fp8_is_nan(a->xq[i], a->kind))
            return dsv4_fail(st, DSV4_EINPUT, "XQ[%" PRId64 ", %" PRId64 "] is a NaN code 0x%02X", i / a->K,
                             i % a->K, a->xq[i]);
    for (int64_t i = 0; i < a->N * a->K; i++)
        if (fp8_is_nan(a->wq[i], a->kind))
            return dsv4_fail(st, DSV4_EINPUT, "WQ flat element %" PRId64 " is a NaN code 0x%02X", i, a->wq[i]);
    for (int64_t i = 0; i < a->M * KB; i++)
        if (!isfinite(a->x_scale[i]))
            return dsv4_fail(st, DSV4_EINPUT, "x_scale flat element %" PRId64 " is not finite", i);
    for (int64_t i = 0; i < NB * KB; i++)
        if (!isfinite(a->w_scale[i]))
            return dsv4_fail(st, DSV4_EINPUT, "w_scale[%" PRId64 ", %" PRId64 "] is not finite", i / KB, i % KB);
    return DSV4_OK;
}

/* The fp8 operands decoded (exactly) into double or float, B unshuffled. */
static void decode_lut(dsv4_fp8_kind kind, double *lut)
{
    for (int b = 0; b < 256; b++)
        lut[b] = dsv4_fp8_to_f32((uint8_t)b, kind);
}

typedef struct decode_job {
    const dsv4_gemm_args *a;
    const double *lut;
    void *A, *B;     /* double, or float where f32 (the fp32 model's operands) */
    int absolute, scaled, f32;
} decode_job;

/* dst[i] = v in the job's element type (v is an fp8 value, maybe scaled:
 * exact in float where the fp32 model asks for it unscaled). */
static inline void put_operand(const decode_job *j, void *dst, int64_t i, double v)
{
    if (j->f32)
        ((float *)dst)[i] = (float)v;
    else
        ((double *)dst)[i] = v;
}

/* Rows [r0, r1) of the stacked [M + N, K] operands: A's rows, then B's. */
static int decode_range(void *ctx, int64_t r0, int64_t r1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const decode_job *j = ctx;
    const dsv4_gemm_args *a = j->a;
    const int64_t M = a->M, K = a->K;
    for (int64_t r = r0; r < r1; r++) {
        if (r < M) {
            const int64_t m = r;
            for (int64_t k = 0; k < K; k++) {
                double v = j->lut[a->xq[m * K + k]];
                v = j->absolute ? fabs(v) : v;
                put_operand(j, j->A, m * K + k, j->scaled ? v * fabs((double)xscale(a, m, k / BLK)) : v);
            }
        } else {
            const int64_t n = r - M;
            for (int64_t k = 0; k < K; k++) {
                int64_t src = a->w_shuffled ? dsv4_shuffle_index(n, k, K, 1) : n * K + k;
                double v = j->lut[a->wq[src]];
                v = j->absolute ? fabs(v) : v;
                put_operand(j, j->B, n * K + k, j->scaled ? v * fabs((double)wscale(a, n, k / BLK)) : v);
            }
        }
    }
    return DSV4_OK;
}

static int decode_operands(const dsv4_gemm_args *a, void **A, void **B, int absolute, int scaled, int f32,
                           dsv4_status *st)
{
    double lut[256];
    decode_lut(a->kind, lut);
    const int64_t M = a->M, N = a->N, K = a->K;
    const size_t elem = f32 ? sizeof(float) : sizeof(double);
    *A = malloc((size_t)(M * K + 1) * elem);
    *B = malloc((size_t)(N * K + 1) * elem);
    if (!*A || !*B) {
        free(*A), free(*B);
        *A = *B = NULL;
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    decode_job j = {a, lut, *A, *B, absolute, scaled, f32};
    return dsv4_parallel_for(M + N, 64, 0, decode_range, &j, st);
}

/* Output tiles of the block product (sized so that the tile's block
 * product P and its rows of y stay in the L2 cache). */
#define TILE_M 256
#define TILE_N 256

typedef struct tiles_job {
    const dsv4_gemm_args *a;
    const void *A, *B; /* decoded operands: double (f64) or float (f32) */
    void *y;
    void *P;           /* per worker [TILE_M, TILE_N] */
    int64_t tiles_n;
} tiles_job;

/* yr[n] += pr[n] * (xs * ws[n]): xs*ws exact in double (24 + 24 bits). */
DSV4_VECTOR_CLONES static void accumulate(double *restrict yr, const double *restrict pr, double xs, const double *restrict ws,
                       int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        yr[i] += pr[i] * (xs * ws[i]);
}

/* y[tile] = sum over K blocks, in order, of P_kb * (xs * ws): P_kb =
 * A[rows, kb] . B[cols, kb]^T is exact in double (gemm.h), so its tiling
 * does not matter; the accumulation order per element is the serial one. */
static int tiles_f64(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)st;
    const tiles_job *j = ctx;
    const dsv4_gemm_args *a = j->a;
    const int64_t M = a->M, N = a->N, K = a->K, KB = kblocks(a);
    const double *A = j->A, *B = j->B;
    double *y = j->y, *P = (double *)j->P + (size_t)worker * (TILE_M * TILE_N + TILE_N), *ws = P + TILE_M * TILE_N;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t m0 = t / j->tiles_n * TILE_M, n0 = t % j->tiles_n * TILE_N;
        const int64_t mt = M - m0 < TILE_M ? M - m0 : TILE_M, nt = N - n0 < TILE_N ? N - n0 : TILE_N;
        for (int64_t kb = 0; kb < KB; kb++) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)nt, BLK, 1.0, A + m0 * K + kb * BLK,
                        (int)K, B + n0 * K + kb * BLK, (int)K, 0.0, P, (int)nt);
            for (int64_t n = 0; n < nt; n++)
                ws[n] = wscale(a, n0 + n, kb);
            for (int64_t i = 0; i < mt; i++)
                accumulate(y + (m0 + i) * N + n0, P + i * nt, xscale(a, m0 + i, kb), ws, nt);
        }
    }
    return DSV4_OK;
}

/* The common start of the GEMM entry points: check the arguments and zero
 * the [M, N] output (every element is an accumulator); *empty when there is
 * nothing to accumulate. */
static int gemm_start(const dsv4_gemm_args *a, void *y, size_t elem_size, int *empty, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    memset(y, 0, (size_t)(a->M * a->N) * elem_size);
    *empty = a->M == 0 || a->N == 0 || a->K == 0;
    return DSV4_OK;
}

/* The fp32 model: per row block of MTILE rows, the K blocks in order (the
 * serial path's sgemm calls, unchanged: fp32 sums depend on the BLAS
 * blocking), row blocks in parallel. */
static int rows_f32(void *ctx, int64_t b0, int64_t b1, int worker, dsv4_status *st)
{
    (void)st;
    const tiles_job *j = ctx;
    const dsv4_gemm_args *a = j->a;
    const int64_t M = a->M, N = a->N, K = a->K, KB = kblocks(a);
    const float *A = j->A, *B = j->B;
    float *y = j->y, *P = (float *)j->P + (size_t)worker * MTILE * N;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t m0 = b * MTILE, mt = M - m0 < MTILE ? M - m0 : MTILE;
        for (int64_t kb = 0; kb < KB; kb++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)N, BLK, 1.0f, A + m0 * K + kb * BLK,
                        (int)K, B + kb * BLK, (int)K, 0.0f, P, (int)N);
            for (int64_t i = 0; i < mt; i++) {
                const float xs = xscale(a, m0 + i, kb);
                float *yr = y + (m0 + i) * N;
                const float *pr = P + i * N;
                for (int64_t n = 0; n < N; n++) {
                    float px = pr[n] * xs;            /* fl(P * xs) (docs/semantics/gemm.md Q7, Triton) */
                    yr[n] = yr[n] + px * wscale(a, n, kb); /* acc += fl(.)*ws, unfused */
                }
            }
        }
    }
    return DSV4_OK;
}

/* The block product into y, zeroed first: the operands decoded (as floats
 * for the fp32 model), then its work items in parallel, each worker with a
 * scratch P: [TILE_M, TILE_N] output tiles with P and the tile's w scales
 * (tiles_f64), or the fp32 model's MTILE-row blocks with P [MTILE, N]
 * (rows_f32). */
static int block_product(const dsv4_gemm_args *a, void *y, int f32, dsv4_status *st)
{
    int empty, rc = gemm_start(a, y, f32 ? sizeof(float) : sizeof(double), &empty, st);
    if (rc || empty)
        return rc;
    const int64_t M = a->M, N = a->N;
    void *A, *B;
    if ((rc = decode_operands(a, &A, &B, 0, 0, f32, st)))
        return rc;
    const int64_t tn = f32 ? 0 : (N + TILE_N - 1) / TILE_N;
    const int64_t items = f32 ? (M + MTILE - 1) / MTILE : (M + TILE_M - 1) / TILE_M * tn;
    const int nw = dsv4_parallel_workers(items, 1);
    const size_t scratch = f32 ? (size_t)(MTILE * N) * sizeof(float) : (TILE_M * TILE_N + TILE_N) * sizeof(double);
    void *P = malloc((size_t)nw * scratch);
    if (!P) {
        free(A), free(B);
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    tiles_job j = {a, A, B, y, P, tn};
    rc = dsv4_parallel_for(items, 1, DSV4_PAR_BLAS, f32 ? rows_f32 : tiles_f64, &j, st);
    free(A), free(B), free(P);
    return rc;
}

int dsv4_ref_gemm_a8w8_blockscale_f64(const dsv4_gemm_args *a, double *y, dsv4_status *st)
{
    return block_product(a, y, 0, st);
}

int dsv4_ref_gemm_a8w8_blockscale_f32(const dsv4_gemm_args *a, float *y, dsv4_status *st)
{
    return block_product(a, y, 1, st);
}

int dsv4_gemm_abs_gauge(const dsv4_gemm_args *a, double *g, dsv4_status *st)
{
    int empty, rc = gemm_start(a, g, sizeof *g, &empty, st);
    if (rc || empty)
        return rc;
    const int64_t M = a->M, N = a->N, K = a->K;
    void *A, *B;
    if ((rc = decode_operands(a, &A, &B, 1, 1, 0, st)))
        return rc;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, A, (int)K, B, (int)K, 0.0, g,
                (int)N);
    free(A), free(B);
    return DSV4_OK;
}

/* ------------------------------------------------------------------ */
/* rocm_inv_rope_einsum (docs/semantics/gemm.md A10.2 [S9])            */

/* Head row o[t, h, :] as double, inverse-rotated when asked; err (may be
 * NULL) gets each lane's kernel-vs-ideal error bound (0 for NoPE lanes). */
static int einsum_row(const dsv4_einsum_args *a, int64_t t, int64_t h, double *x, double *err, dsv4_status *st)
{
    const uint16_t *src = a->o + (t * a->H + h) * DSV4_HEAD_DIM;
    for (int d = 0; d < DSV4_HEAD_DIM; d++) {
        x[d] = dsv4_bf16_to_f32(src[d]);
        if (err)
            err[d] = 0;
    }
    if (!a->inverse_rope) /* o is already rotated and bf16 (docs/semantics/gemm.md A10.2 step 1) */
        return DSV4_OK;
    const float *row;
    int rc = dsv4_rope_row_of_token(a->cos_sin_cache, a->num_pos, a->rope_dim, a->positions, t, &row, st);
    if (rc)
        return rc;
    double *lanes = x + DSV4_HEAD_DIM - a->rope_dim;
    double orig[DSV4_HEAD_DIM];
    memcpy(orig, lanes, (size_t)a->rope_dim * sizeof *orig);
    /* docs/semantics/attention.md A9.1: e c + o s, o c - e s */
    dsv4_rope_gptj_f64(lanes, row, a->rope_dim, DSV4_ROPE_INVERSE);
    if (err)
        for (int k = 0; k < a->rope_dim / 2; k++) {
            const double c = row[k], s = row[a->rope_dim / 2 + k];
            const double delta = 3 * 0x1p-24 * (fabs(orig[2 * k] * c) + fabs(orig[2 * k + 1] * s) +
                                                fabs(orig[2 * k + 1] * c) + fabs(orig[2 * k] * s));
            /* the kernel stores bf16(fp32 rotation): 1 ulp_bf16 covers the
             * 0.5-ulp rounding of a value up to delta away */
            err[DSV4_HEAD_DIM - a->rope_dim + 2 * k] = dsv4_ulp(DSV4_BF16, fabs(lanes[2 * k]) + delta) + delta;
            err[DSV4_HEAD_DIM - a->rope_dim + 2 * k + 1] =
                dsv4_ulp(DSV4_BF16, fabs(lanes[2 * k + 1]) + delta) + delta;
        }
    return DSV4_OK;
}

#define EINSUM_RB 16 /* output columns r per work item: one sum per lane */

typedef struct einsum_job {
    const dsv4_einsum_args *a;
    double *x, *err;          /* [T, H*512]: the head rows (rotated) and their lanes' error bounds */
    double *out, *gauge, *rope_err;
    double *wt;               /* per worker: [Dg, EINSUM_RB] w and |w|, transposed */
} einsum_job;

static int einsum_rows(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const einsum_job *j = ctx;
    const dsv4_einsum_args *a = j->a;
    const int64_t W = a->H * DSV4_HEAD_DIM;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t h = 0; h < a->H; h++) {
            int rc = einsum_row(a, t, h, j->x + t * W + h * DSV4_HEAD_DIM, j->err + t * W + h * DSV4_HEAD_DIM, st);
            if (rc)
                return rc;
        }
    return DSV4_OK;
}

/* Item (g, r block): the block's weights transposed once, then for every
 * token the EINSUM_RB sums side by side, each over d in the fixed order
 * "tgd,grd->tgr" (one lane per r: the serial sums, vectorized across r). */
DSV4_VECTOR_CLONES static int einsum_items(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)st;
    const einsum_job *j = ctx;
    const dsv4_einsum_args *a = j->a;
    const int64_t Dg = a->H * DSV4_HEAD_DIM / a->G, W = a->H * DSV4_HEAD_DIM, nrb = (a->R + EINSUM_RB - 1) / EINSUM_RB;
    double *restrict wt = j->wt + (size_t)worker * 2 * (size_t)Dg * EINSUM_RB, *restrict wa = wt + Dg * EINSUM_RB;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t g = i / nrb, r0 = i % nrb * EINSUM_RB;
        const int nr = a->R - r0 < EINSUM_RB ? (int)(a->R - r0) : EINSUM_RB;
        for (int k = 0; k < EINSUM_RB; k++) {
            const uint16_t *wr = a->w + (g * a->R + r0 + (k < nr ? k : 0)) * Dg; /* W[g, r, :] */
            for (int64_t d = 0; d < Dg; d++) {
                const double w = k < nr ? dsv4_bf16_to_f32_inline(wr[d]) : 0.0;
                wt[d * EINSUM_RB + k] = w;
                wa[d * EINSUM_RB + k] = fabs(w);
            }
        }
        for (int64_t t = 0; t < a->T; t++) {
            const double *restrict xg = j->x + t * W + g * Dg, *restrict eg = j->err + t * W + g * Dg;
            double s[EINSUM_RB] = {0}, sa[EINSUM_RB] = {0}, se[EINSUM_RB] = {0};
            for (int64_t d = 0; d < Dg; d++) {
                const double xv = xg[d], ev = eg[d];
                for (int k = 0; k < EINSUM_RB; k++) {
                    s[k] += xv * wt[d * EINSUM_RB + k];
                    sa[k] += fabs(xv * wt[d * EINSUM_RB + k]);
                    se[k] += ev * wa[d * EINSUM_RB + k];
                }
            }
            for (int k = 0; k < nr; k++) {
                const int64_t o = (t * a->G + g) * a->R + r0 + k;
                j->out[o] = s[k];
                if (j->gauge)
                    j->gauge[o] = sa[k];
                if (j->rope_err)
                    j->rope_err[o] = se[k];
            }
        }
    }
    return DSV4_OK;
}

int dsv4_ref_inv_rope_einsum(const dsv4_einsum_args *a, double *out, double *gauge, double *rope_err,
                             dsv4_status *st)
{
    if (a->G < 1 || a->H < 1 || (a->H * DSV4_HEAD_DIM) % a->G || a->R < 0 || a->T < 0)
        return dsv4_fail(st, DSV4_EINPUT,
                         "einsum: H*512 = %" PRId64 " must split into G = %" PRId64 " groups (R >= 0)",
                         a->H * DSV4_HEAD_DIM, a->G);
    if (a->inverse_rope && (a->rope_dim < 2 || a->rope_dim > DSV4_HEAD_DIM || a->rope_dim % 2))
        return dsv4_fail(st, DSV4_EINPUT, "einsum: rope_dim %d", a->rope_dim);
    const int64_t Dg = a->H * DSV4_HEAD_DIM / a->G, W = a->H * DSV4_HEAD_DIM;
    const int64_t items = a->G * ((a->R + EINSUM_RB - 1) / EINSUM_RB);
    const int nw = dsv4_parallel_workers(items, 1);
    double *x = malloc((size_t)(a->T * W + 1) * sizeof *x), *err = malloc((size_t)(a->T * W + 1) * sizeof *err);
    double *wt = malloc((size_t)nw * 2 * (size_t)Dg * EINSUM_RB * sizeof *wt);
    int rc = x && err && wt ? DSV4_OK : dsv4_fail(st, DSV4_ERUNTIME, "einsum: out of memory");
    einsum_job j = {a, x, err, out, gauge, rope_err, wt};
    if (!rc)
        rc = dsv4_parallel_for(a->T, 16, 0, einsum_rows, &j, st);
    if (!rc && a->T > 0)
        rc = dsv4_parallel_for(items, 1, 0, einsum_items, &j, st);
    free(x), free(err), free(wt);
    return rc;
}

