/* gemm.c - block-scaled FP8 GEMM, shuffle_weight, wo_a; see gemm.h.
 * "spec" is ../shared/spec/quant_and_indexer.md unless named otherwise. */
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

#define BLK DSV4_GEMM_BLOCK
#define MTILE 256 /* rows per tile: keeps the [MTILE, N] block product in cache */

/* ------------------------------------------------------------------ */
/* shuffle_weight                                                      */

int64_t dsv4_shuffle_index(int64_t n, int64_t k, int64_t K, int elem_size)
{
    /* aiter shuffle.py: IN = IK = 16, BK = 2*IK = 32, K_pack = 16 / elem_size;
     * view (N/IN, IN, K/BK, BK/Kp, Kp) permuted to (N/IN, K/BK, BK/Kp, IN, Kp)
     * (spec 7, ROCm/aiter:aiter/ops/shuffle.py@e4048607). */
    const int64_t Kp = 16 / elem_size;
    return ((((n / 16) * (K / 32) + k / 32) * (32 / Kp) + (k % 32) / Kp) * 16 + n % 16) * Kp + k % Kp;
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
 * moves with one copy. */
static int shuffle_range(void *ctx, int64_t n0, int64_t n1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const shuffle_job *j = ctx;
    const int64_t K = j->K, Kp = 16 / j->es;
    const size_t es = (size_t)j->es;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t k0 = 0; k0 < K; k0 += Kp) {
            const int64_t plain = n * K + k0, sh = dsv4_shuffle_index(n, k0, K, j->es);
            if (j->inverse)
                memcpy(j->out + (size_t)plain * es, j->in + (size_t)sh * es, 16);
            else
                memcpy(j->out + (size_t)sh * es, j->in + (size_t)plain * es, 16);
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
    /* bpreshuffle: memory [K/128][M], logical [M, K/128] (spec 7) */
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
    double *A, *B;
    int absolute, scaled;
} decode_job;

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
                j->A[m * K + k] = j->scaled ? v * fabs((double)xscale(a, m, k / BLK)) : v;
            }
        } else {
            const int64_t n = r - M;
            for (int64_t k = 0; k < K; k++) {
                int64_t src = a->w_shuffled ? dsv4_shuffle_index(n, k, K, 1) : n * K + k;
                double v = j->lut[a->wq[src]];
                v = j->absolute ? fabs(v) : v;
                j->B[n * K + k] = j->scaled ? v * fabs((double)wscale(a, n, k / BLK)) : v;
            }
        }
    }
    return DSV4_OK;
}

static int decode_operands(const dsv4_gemm_args *a, double **A, double **B, int absolute, int scaled,
                           dsv4_status *st)
{
    double lut[256];
    decode_lut(a->kind, lut);
    const int64_t M = a->M, N = a->N, K = a->K;
    *A = malloc((size_t)(M * K + 1) * sizeof(double));
    *B = malloc((size_t)(N * K + 1) * sizeof(double));
    if (!*A || !*B) {
        free(*A), free(*B);
        *A = *B = NULL;
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    decode_job j = {a, lut, *A, *B, absolute, scaled};
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

int dsv4_ref_gemm_a8w8_blockscale_f64(const dsv4_gemm_args *a, double *y, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    const int64_t M = a->M, N = a->N, K = a->K;
    memset(y, 0, (size_t)(M * N) * sizeof *y);
    if (M == 0 || N == 0 || K == 0)
        return DSV4_OK;
    double *A, *B;
    if ((rc = decode_operands(a, &A, &B, 0, 0, st)))
        return rc;
    const int64_t tm = (M + TILE_M - 1) / TILE_M, tn = (N + TILE_N - 1) / TILE_N;
    const int nw = dsv4_parallel_workers(tm * tn, 1);
    double *P = malloc((size_t)nw * (TILE_M * TILE_N + TILE_N) * sizeof *P); /* P and the tile's w scales */
    if (!P) {
        free(A), free(B);
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    tiles_job j = {a, A, B, y, P, tn};
    rc = dsv4_parallel_for(tm * tn, 1, DSV4_PAR_BLAS, tiles_f64, &j, st);
    free(A), free(B), free(P);
    return rc;
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
                    float px = pr[n] * xs;            /* fl(P * xs) (spec 7, Triton) */
                    yr[n] = yr[n] + px * wscale(a, n, kb); /* acc += fl(.)*ws, unfused */
                }
            }
        }
    }
    return DSV4_OK;
}

int dsv4_ref_gemm_a8w8_blockscale_f32(const dsv4_gemm_args *a, float *y, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    const int64_t M = a->M, N = a->N, K = a->K;
    memset(y, 0, (size_t)(M * N) * sizeof *y);
    if (M == 0 || N == 0 || K == 0)
        return DSV4_OK;
    double lut[256];
    decode_lut(a->kind, lut);
    const int64_t nb = (M + MTILE - 1) / MTILE;
    const int nw = dsv4_parallel_workers(nb, 1);
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(N * K) * sizeof *B);
    float *P = malloc((size_t)nw * (size_t)(MTILE * N) * sizeof *P);
    if (!A || !B || !P) {
        free(A), free(B), free(P);
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    for (int64_t i = 0; i < M * K; i++)
        A[i] = (float)lut[a->xq[i]];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            B[n * K + k] = (float)lut[a->wq[a->w_shuffled ? dsv4_shuffle_index(n, k, K, 1) : n * K + k]];
    tiles_job j = {a, A, B, y, P, 0};
    rc = dsv4_parallel_for(nb, 1, DSV4_PAR_BLAS, rows_f32, &j, st);
    free(A), free(B), free(P);
    return rc;
}

int dsv4_gemm_abs_gauge(const dsv4_gemm_args *a, double *g, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    const int64_t M = a->M, N = a->N, K = a->K;
    memset(g, 0, (size_t)(M * N) * sizeof *g);
    if (M == 0 || N == 0 || K == 0)
        return DSV4_OK;
    double *A, *B;
    if ((rc = decode_operands(a, &A, &B, 1, 1, st)))
        return rc;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, A, (int)K, B, (int)K, 0.0, g,
                (int)N);
    free(A), free(B);
    return DSV4_OK;
}

/* ------------------------------------------------------------------ */
/* rocm_inv_rope_einsum (sparse_attention.md 10.2 [S9])                */

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
    if (!a->inverse_rope) /* o is already rotated and bf16 (spec 10.2 step 1) */
        return DSV4_OK;
    const float *row;
    char what[48];
    snprintf(what, sizeof what, "positions[%" PRId64 "]", t);
    int rc = dsv4_rope_row(a->cos_sin_cache, a->num_pos, a->rope_dim, a->positions[t], what, &row, st);
    if (rc)
        return rc;
    double *lanes = x + DSV4_HEAD_DIM - a->rope_dim;
    double orig[DSV4_HEAD_DIM];
    memcpy(orig, lanes, (size_t)a->rope_dim * sizeof *orig);
    dsv4_rope_gptj_f64(lanes, row, a->rope_dim, DSV4_ROPE_INVERSE); /* spec 9.1: e c + o s, o c - e s */
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
    double *x = malloc((size_t)W * sizeof *x), *err = malloc((size_t)W * sizeof *err);
    if (!x || !err) {
        free(x), free(err);
        return dsv4_fail(st, DSV4_ERUNTIME, "einsum: out of memory");
    }
    int rc = DSV4_OK;
    for (int64_t t = 0; t < a->T && !rc; t++) {
        for (int64_t h = 0; h < a->H && !rc; h++)
            rc = einsum_row(a, t, h, x + h * DSV4_HEAD_DIM, err + h * DSV4_HEAD_DIM, st);
        for (int64_t g = 0; g < a->G && !rc; g++)
            for (int64_t r = 0; r < a->R; r++) {
                const uint16_t *wr = a->w + (g * a->R + r) * Dg; /* W[g, r, :] */
                const double *xg = x + g * Dg, *eg = err + g * Dg;
                double s = 0, sa = 0, se = 0;
                for (int64_t d = 0; d < Dg; d++) { /* "tgd,grd->tgr", fixed order */
                    const double w = dsv4_bf16_to_f32(wr[d]);
                    s += xg[d] * w;
                    sa += fabs(xg[d] * w);
                    se += eg[d] * fabs(w);
                }
                const int64_t i = (t * a->G + g) * a->R + r;
                out[i] = s;
                if (gauge)
                    gauge[i] = sa;
                if (rope_err)
                    rope_err[i] = se;
            }
    }
    free(x), free(err);
    return rc;
}

/* ------------------------------------------------------------------ */
/* rocm_mxfp8_wo_a_bmm (sparse_attention.md 10.3 [S9])                 */

int dsv4_ref_mxfp8_wo_a_bmm(const dsv4_wo_a_bmm_args *a, double *out, double *gauge, dsv4_status *st)
{
    const int64_t T = a->T, G = a->G, R = a->R, K = a->K, KB = K / 32;
    if (T < 0 || G < 1 || R < 0 || K < 0 || K % 32)
        return dsv4_fail(st, DSV4_EINPUT, "wo_a bmm: K = %" PRId64 " must be a multiple of 32 (MXFP8 blocks)", K);
    for (int64_t i = 0; i < T * G * K; i++)
        if (fp8_is_nan(a->a[i], DSV4_FP8_E4M3FN))
            return dsv4_fail(st, DSV4_EINPUT, "a[%" PRId64 ", %" PRId64 "] is a NaN code", i / (G * K), i % (G * K));
    for (int64_t i = 0; i < G * R * K; i++)
        if (fp8_is_nan(a->w[i], DSV4_FP8_E4M3FN))
            return dsv4_fail(st, DSV4_EINPUT, "wo_a[%" PRId64 ", %" PRId64 "] is a NaN code", i / K, i % K);
    for (int64_t i = 0; i < T * G * KB; i++)
        if (a->a_scale[i] == 0xFF)
            return dsv4_fail(st, DSV4_EINPUT, "a_scale flat element %" PRId64 " is the e8m0 NaN 0xFF", i);
    for (int64_t i = 0; i < G * R * KB; i++)
        if (a->w_scale[i] == 0xFF)
            return dsv4_fail(st, DSV4_EINPUT, "wo_a scale flat element %" PRId64 " is the e8m0 NaN 0xFF", i);
    double lut[256];
    decode_lut(DSV4_FP8_E4M3FN, lut);
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                const uint8_t *ar = a->a + t * G * K + g * K, *wr = a->w + (g * R + r) * K;
                const uint8_t *as = a->a_scale + t * G * KB + g * KB, *ws = a->w_scale + (g * R + r) * KB;
                double s = 0, sa = 0;
                for (int64_t kb = 0; kb < KB; kb++) { /* tiles never cross groups (spec 10.3) */
                    double p = 0, pa = 0;             /* exact: 32 fp8 products */
                    for (int k = 0; k < 32; k++) {
                        p += lut[ar[kb * 32 + k]] * lut[wr[kb * 32 + k]];
                        pa += fabs(lut[ar[kb * 32 + k]] * lut[wr[kb * 32 + k]]);
                    }
                    const double sc = dsv4_e8m0_to_f64(as[kb]) * dsv4_e8m0_to_f64(ws[kb]); /* 2^(sa+sw-254) */
                    s += p * sc;
                    sa += pa * sc;
                }
                out[t * G * R + g * R + r] = s;
                if (gauge)
                    gauge[t * G * R + g * R + r] = sa;
            }
    return DSV4_OK;
}
