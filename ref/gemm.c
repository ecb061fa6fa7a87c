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
    void *A, *B;     /* double [M, K] and [N, K] */
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
                ((double *)j->A)[m * K + k] = j->scaled ? v * fabs((double)xscale(a, m, k / BLK)) : v;
            }
        } else {
            const int64_t n = r - M;
            for (int64_t k = 0; k < K; k++) {
                int64_t src = a->w_shuffled ? dsv4_shuffle_index(n, k, K, 1) : n * K + k;
                double v = j->lut[a->wq[src]];
                v = j->absolute ? fabs(v) : v;
                ((double *)j->B)[n * K + k] = j->scaled ? v * fabs((double)wscale(a, n, k / BLK)) : v;
            }
        }
    }
    return DSV4_OK;
}

static int decode_operands(const dsv4_gemm_args *a, void **A, void **B, int absolute, int scaled, dsv4_status *st)
{
    double lut[256];
    decode_lut(a->kind, lut);
    const int64_t M = a->M, N = a->N, K = a->K;
    const size_t elem = sizeof(double);
    *A = malloc((size_t)(M * K + 1) * elem);
    *B = malloc((size_t)(N * K + 1) * elem);
    if (!*A || !*B) {
        free(*A), free(*B);
        *A = *B = NULL;
        return dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    }
    decode_job j = {a, lut, *A, *B, absolute, scaled};
    return dsv4_parallel_for(M + N, 64, 0, decode_range, &j, st);
}

/* ------------------------------------------------------------------ */
/* The block product: the ideal (double) and the fp32 model            */

/* Both sum, per element and per K block kb in order, the block's 128
 * products k in order from +0 into P, then scale P into the accumulator:
 *   ideal (double):  y = y + P * (xs * ws)    (xs * ws exact: 24 + 24 bits)
 *   fp32 model:      y = y + fl(P * xs) * ws  (docs/semantics/gemm.md Q7)
 * each operation rounded once, unfused.  Every fp8 x fp8 product is exact
 * in fp32 (at most 8 significant bits, in [2^-20, 2^17.7]), so fma(a, b, P)
 * rounds P + a b once, as the serial multiply-then-add does, and the
 * vector kernels' FMAs give the serial bits.  In double P is exact too (43
 * bits at most, gemm.h), so the ideal is the serial sums' bits whatever the
 * order; the fp32 model has one defined order, the same on every machine,
 * SIMD level and thread count (before 2026-12, it was OpenBLAS sgemm's,
 * whose blocking the sums followed).  One kernel serves both: the ideal's
 * epilogue is the model's with xs' = xs ws and ws' = 1 (x * 1 is exact).
 *
 * The operands are packed once, exact, as the sum's type: A in groups of
 * BP_MR rows [k][BP_MR], B in panels of nr columns [k][nr] (nr: two
 * vectors of 512 bits, 32 floats or 16 doubles; rows and columns past M
 * and N are zero and never stored).  Work items are
 * [BP_TM, BP_TN] output tiles, accumulated in a per-worker scratch tile
 * (in cache across the K blocks) and copied out at the end. */
#define BP_MR 12            /* rows of a micro tile (24 zmm accumulators) */
#define BP_TM (8 * BP_MR)   /* rows of an output tile */
#define BP_TN 256           /* columns of an output tile */

/* One micro tile: c [BP_MR, ldc] += the block's sums of ap and bp, scaled
 * as above by xs[BP_MR] and ws. */
typedef void bp_tile_fn(const void *ap, const void *bp, const void *xs, const void *ws, void *c, int64_t ldc);

/* The portable micro tile of element type T, nr columns: the definition. */
#define BP_TILE_PORTABLE(NAME, T, NR)                                                                 \
    static void NAME(const void *ap_, const void *bp_, const void *xs_, const void *ws_, void *c_,    \
                     int64_t ldc)                                                                    \
    {                                                                                                \
        const T *ap = ap_, *bp = bp_, *xs = xs_, ws = *(const T *)ws_;                               \
        T *c = c_;                                                                                   \
        for (int r = 0; r < BP_MR; r++)                                                              \
            for (int n = 0; n < (NR); n++) {                                                         \
                T p = 0;                                                                             \
                for (int k = 0; k < BLK; k++)                                                        \
                    p = p + ap[k * BP_MR + r] * bp[k * (NR) + n]; /* exact product: one rounding */ \
                const T px = p * xs[r];                                                              \
                c[r * ldc + n] = c[r * ldc + n] + px * ws;                                           \
            }                                                                                        \
    }
BP_TILE_PORTABLE(bp_tile_f32_portable, float, 32)
BP_TILE_PORTABLE(bp_tile_f64_portable, double, 16)

#if DSV4_HAVE_AVX2_PATHS
/* Unrolled whole, so that the accumulators live in registers. */
#define BP_UNROLL _Pragma("GCC unroll 16")

/* A vector micro tile: ROWS rows x 2 vectors of type V (intrinsics prefix
 * PRE, suffix SUF) of element type T, B rows nr apart.  AVX-512 takes the
 * whole BP_MR rows (24 accumulators); AVX2 (16 registers) a 6-row half of
 * them at a time. */
#define BP_TILE_VEC(NAME, TARGET, T, V, PRE, SUF, LANES, ROWS, NR)                                    \
    static inline __attribute__((target(TARGET), always_inline)) void NAME##_rows(                   \
        const T *restrict ap, const T *restrict bp, const T *restrict xs, T ws, T *restrict c,         \
        int64_t ldc)                                                                                 \
    {                                                                                                \
        V acc[ROWS][2];                                                                              \
        BP_UNROLL for (int r = 0; r < (ROWS); r++) acc[r][0] = acc[r][1] = PRE##_setzero_##SUF();    \
        for (int k = 0; k < BLK; k++) {                                                              \
            const V b0 = PRE##_loadu_##SUF(bp + k * (NR)), b1 = PRE##_loadu_##SUF(bp + k * (NR) + (LANES)); \
            BP_UNROLL for (int r = 0; r < (ROWS); r++) {                                             \
                const V x = PRE##_set1_##SUF(ap[k * BP_MR + r]);                                     \
                acc[r][0] = PRE##_fmadd_##SUF(x, b0, acc[r][0]);                                     \
                acc[r][1] = PRE##_fmadd_##SUF(x, b1, acc[r][1]);                                     \
            }                                                                                        \
        }                                                                                            \
        const V w = PRE##_set1_##SUF(ws);                                                            \
        BP_UNROLL for (int r = 0; r < (ROWS); r++) BP_UNROLL for (int v = 0; v < 2; v++) {           \
            T *o = c + r * ldc + (LANES) * v;                                                        \
            const V px = PRE##_mul_##SUF(acc[r][v], PRE##_set1_##SUF(xs[r]));                        \
            PRE##_storeu_##SUF(o, PRE##_add_##SUF(PRE##_loadu_##SUF(o), PRE##_mul_##SUF(px, w)));    \
        }                                                                                            \
    }                                                                                                \
    __attribute__((target(TARGET))) static void NAME(const void *ap_, const void *bp_, const void *xs_, \
                                                     const void *ws_, void *c_, int64_t ldc)          \
    {                                                                                                \
        const T *ap = ap_, *bp = bp_, *xs = xs_, ws = *(const T *)ws_;                               \
        T *c = c_;                                                                                   \
        for (int r0 = 0; r0 < BP_MR; r0 += (ROWS))                                                   \
            for (int n0 = 0; n0 < (NR); n0 += 2 * (LANES))                                           \
                NAME##_rows(ap + r0, bp + n0, xs + r0, ws, c + r0 * ldc + n0, ldc);                  \
    }
BP_TILE_VEC(bp_tile_f32_512, "avx512f,avx2,fma", float, __m512, _mm512, ps, 16, BP_MR, 32)
BP_TILE_VEC(bp_tile_f64_512, "avx512f,avx2,fma", double, __m512d, _mm512, pd, 8, BP_MR, 16)
BP_TILE_VEC(bp_tile_f32_avx2, "avx2,fma", float, __m256, _mm256, ps, 8, 6, 32)
BP_TILE_VEC(bp_tile_f64_avx2, "avx2,fma", double, __m256d, _mm256, pd, 4, 6, 16)
#endif

typedef struct bp_job {
    const dsv4_gemm_args *a;
    int f64;                     /* 1: the ideal in double; 0: the fp32 model */
    size_t elem;                 /* sizeof the sum's type */
    int nr;                      /* columns of a micro tile and of a B panel: 32 floats, 16 doubles */
    bp_tile_fn *tile;
    const double *lut;           /* fp8 code -> value */
    char *Ap, *Bp;               /* packed operands */
    void *y;                     /* [M, N]: double, or float where y_f32 */
    int y_f32;
    char *scratch;               /* per worker: [BP_TM, BP_TN] tile, BP_TM x scales, BP_MR scales */
    int64_t tiles_n;
} bp_job;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static void put_elem(const bp_job *j, char *dst, double v)
{
    if (j->f64)
        *(double *)dst = v;
    else
        *(float *)dst = (float)v; /* an fp8 value: exact */
}

/* Rows [r0, r1) of the stacked operands (A's padded rows, then B's), each
 * decoded exactly into its packed place; padding rows are zero. */
static int bp_pack_range(void *ctx, int64_t r0, int64_t r1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const bp_job *j = ctx;
    const dsv4_gemm_args *a = j->a;
    const int64_t M = a->M, N = a->N, K = a->K, Mp = round_up(M, BP_MR);
    for (int64_t r = r0; r < r1; r++) {
        const int is_a = r < Mp;
        const int64_t row = is_a ? r : r - Mp, w = is_a ? BP_MR : j->nr;
        char *dst = (is_a ? j->Ap : j->Bp) + (size_t)(row / w * K * w + row % w) * j->elem;
        const int pad = row >= (is_a ? M : N);
        for (int64_t k = 0; k < K; k++) {
            const uint8_t code = pad ? 0 : is_a ? a->xq[row * K + k]
                                       : a->wq[a->w_shuffled ? dsv4_shuffle_index(row, k, K, 1) : row * K + k];
            put_elem(j, dst + (size_t)(k * w) * j->elem, pad ? 0.0 : j->lut[code]);
        }
    }
    return DSV4_OK;
}

/* Output tiles [t0, t1): per K block, its x scales for the tile's rows,
 * then every (B panel, A row group) micro tile, panels outer so that the
 * block's 16 KiB panel stays in L1 across the row groups. */
static int bp_tiles(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)st;
    const bp_job *j = ctx;
    const dsv4_gemm_args *a = j->a;
    const int64_t M = a->M, N = a->N, K = a->K, KB = kblocks(a), nr = j->nr;
    const size_t es = j->elem;
    char *c = j->scratch + (size_t)worker * (BP_TM * BP_TN + BP_TM + BP_MR) * es;
    char *xs = c + BP_TM * BP_TN * es, *xw = xs + BP_TM * es;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t m0 = t / j->tiles_n * BP_TM, n0 = t % j->tiles_n * BP_TN;
        const int64_t mt = M - m0 < BP_TM ? M - m0 : BP_TM, nt = N - n0 < BP_TN ? N - n0 : BP_TN;
        const int64_t groups = (mt + BP_MR - 1) / BP_MR, panels = (nt + nr - 1) / nr;
        memset(c, 0, BP_TM * BP_TN * es);
        for (int64_t kb = 0; kb < KB; kb++) {
            for (int64_t i = 0; i < groups * BP_MR; i++)
                put_elem(j, xs + i * es, i < mt ? xscale(a, m0 + i, kb) : 0.0);
            for (int64_t p = 0; p < panels; p++) {
                const int64_t n = n0 + p * nr; /* a panel lies in one 128-column w-scale block */
                const char *bp = j->Bp + (size_t)((n / nr) * K * nr + kb * BLK * nr) * es;
                const float ws32 = wscale(a, n, kb);
                const double one = 1.0, ws64 = ws32;
                for (int64_t g = 0; g < groups; g++) {
                    const char *ap = j->Ap + (size_t)(((m0 / BP_MR) + g) * K * BP_MR + kb * BLK * BP_MR) * es;
                    const void *xg = xs + g * BP_MR * es;
                    if (j->f64) { /* the ideal's epilogue: xs' = xs ws, exact in double; ws' = 1 */
                        for (int r = 0; r < BP_MR; r++)
                            ((double *)xw)[r] = ((const double *)xg)[r] * ws64;
                        xg = xw;
                    }
                    j->tile(ap, bp, xg, j->f64 ? (const void *)&one : (const void *)&ws32,
                            c + (size_t)(g * BP_MR * BP_TN + p * nr) * es, BP_TN);
                }
            }
        }
        for (int64_t i = 0; i < mt; i++) {
            const char *src = c + (size_t)(i * BP_TN) * es;
            if (j->y_f32)
                memcpy((float *)j->y + (m0 + i) * N + n0, src, sizeof(float) * (size_t)nt);
            else if (j->f64)
                memcpy((double *)j->y + (m0 + i) * N + n0, src, sizeof(double) * (size_t)nt);
            else
                for (int64_t n = 0; n < nt; n++)
                    ((double *)j->y)[(m0 + i) * N + n0 + n] = ((const float *)src)[n]; /* exact */
        }
    }
    return DSV4_OK;
}

static bp_tile_fn *bp_pick_tile(int f64)
{
#if DSV4_HAVE_AVX2_PATHS
    const int level = dsv4_simd_level();
    if (level >= DSV4_SIMD_AVX512)
        return f64 ? bp_tile_f64_512 : bp_tile_f32_512;
    if (level >= DSV4_SIMD_AVX2_FMA)
        return f64 ? bp_tile_f64_avx2 : bp_tile_f32_avx2;
#endif
    return f64 ? bp_tile_f64_portable : bp_tile_f32_portable;
}

/* The block product into y ([M, N], double or, y_f32, float): f64 the
 * ideal, else the fp32 model.  Every element of y is written. */
static int block_product(const dsv4_gemm_args *a, void *y, int y_f32, int f64, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    const int64_t M = a->M, N = a->N, K = a->K;
    if (M == 0 || N == 0 || K == 0) {
        memset(y, 0, (size_t)(M * N) * (y_f32 ? sizeof(float) : sizeof(double)));
        return DSV4_OK;
    }
    double lut[256];
    decode_lut(a->kind, lut);
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    const int nr = f64 ? 16 : 32;
    const int64_t Mp = round_up(M, BP_MR), Np = round_up(N, nr);
    const int64_t tn = (N + BP_TN - 1) / BP_TN, items = (M + BP_TM - 1) / BP_TM * tn;
    const int nw = dsv4_parallel_workers(items, 1);
    bp_job j = {a, f64, es, nr, bp_pick_tile(f64), lut, malloc(es * (size_t)(Mp * K)), malloc(es * (size_t)(Np * K)),
                y, y_f32, malloc(es * (size_t)nw * (BP_TM * BP_TN + BP_TM + BP_MR)), tn};
    if (!j.Ap || !j.Bp || !j.scratch)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "gemm: out of memory");
    else if (!(rc = dsv4_parallel_for(Mp + Np, 64, 0, bp_pack_range, &j, st)))
        rc = dsv4_parallel_for(items, 1, 0, bp_tiles, &j, st);
    free(j.Ap), free(j.Bp), free(j.scratch);
    return rc;
}

int dsv4_ref_gemm_a8w8_blockscale_f64(const dsv4_gemm_args *a, double *y, dsv4_status *st)
{
    return block_product(a, y, 0, 1, st);
}

int dsv4_ref_gemm_a8w8_blockscale_f32(const dsv4_gemm_args *a, float *y, dsv4_status *st)
{
    return block_product(a, y, 1, 0, st);
}

int dsv4_ref_gemm_a8w8_blockscale_f32_wide(const dsv4_gemm_args *a, double *y, dsv4_status *st)
{
    return block_product(a, y, 0, 0, st);
}

int dsv4_gemm_abs_gauge(const dsv4_gemm_args *a, double *g, dsv4_status *st)
{
    int rc = dsv4_gemm_check(a, st);
    if (rc)
        return rc;
    memset(g, 0, (size_t)(a->M * a->N) * sizeof *g);
    if (a->M == 0 || a->N == 0 || a->K == 0)
        return DSV4_OK;
    const int64_t M = a->M, N = a->N, K = a->K;
    void *A, *B;
    if ((rc = decode_operands(a, &A, &B, 1, 1, st)))
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

