/* test_gemm.c - the GEMM family: shuffle_weight against the reshape/permute
 * definition, hand-derived GEMM answers, exactness of the block dot against
 * integer arithmetic, thread-count invariance, bpreshuffle = plain, the fp32
 * model inside the derived bound, wo_a hand answers, permutation hints, and
 * CLI end to end (K % 128 rejected with exit 2; a shuffled weight read as
 * plain fails with a permutation hint). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../compare/perm_hint.h"
#include "../harness/golden.h"
#include "../ops/gemm/gemm.h"
#include "../ops/ops.h"
#include "../harness/rng.h"
#include "../ref/compressor.h"
#include "../ref/gemm.h"
#include "../ref/rope.h"
#include "../ref/numerics.h"
#include "../ref/parallel.h"
#include "../ref/simd.h"
#include "testutil.h"

/* ---- shuffle_weight ------------------------------------------------------- */

/* The definition as a 5-D view and permute (docs/semantics/gemm.md Q7): x viewed as
 * (N/16, 16, K/BK, BK/Kp, Kp), permuted to (N/16, K/BK, BK/Kp, 16, Kp),
 * written out in row-major order. */
static void shuffle_by_permute(const uint8_t *in, uint8_t *out, int N, int K, int es)
{
    const int Kp = 16 / es, BK = 32, kel = K; /* K in elements */
    size_t o = 0;
    for (int a = 0; a < N / 16; a++)
        for (int c = 0; c < kel / BK; c++)
            for (int d = 0; d < BK / Kp; d++)
                for (int b = 0; b < 16; b++)
                    for (int e = 0; e < Kp; e++, o++) {
                        int n = a * 16 + b, k = c * BK + d * Kp + e;
                        memcpy(out + o * es, in + ((size_t)n * K + k) * es, (size_t)es);
                    }
}

START_TEST(shuffle_matches_permute_definition)
{
    const int shapes[][2] = {{16, 32}, {32, 64}, {48, 96}, {16, 256}};
    for (int es = 1; es <= 2; es++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int N = shapes[s][0], K = shapes[s][1];
            const size_t nb = (size_t)N * K * es;
            uint8_t *in = malloc(nb), *ref = malloc(nb), *got = malloc(nb), *back = malloc(nb);
            for (size_t i = 0; i < nb; i++)
                in[i] = (uint8_t)(i * 131 + i / 256);
            shuffle_by_permute(in, ref, N, K, es);
            ck_assert_int_eq(dsv4_ref_shuffle_weight(in, got, 1, N, K, es, 0, NULL), 0);
            ck_assert_msg(memcmp(ref, got, nb) == 0, "shuffle N=%d K=%d es=%d differs from the permute", N, K, es);
            ck_assert_int_eq(dsv4_ref_shuffle_weight(got, back, 1, N, K, es, 1, NULL), 0);
            ck_assert_msg(memcmp(in, back, nb) == 0, "inverse(shuffle) is not the identity");
            free(in), free(ref), free(got), free(back);
        }
}
END_TEST

START_TEST(shuffle_hand_positions)
{
    /* fp8, K = 64: (0,0)->0; (0,15)->15; (0,16)->256 (second 16-byte sub-tile
     * after 16 rows x 16 bytes); (1,0)->16; (0,32)->512 (next 16x32 tile);
     * (16,0)->(1*2)*512 = 1024. */
    ck_assert_int_eq(dsv4_shuffle_index(0, 0, 64, 1), 0);
    ck_assert_int_eq(dsv4_shuffle_index(0, 15, 64, 1), 15);
    ck_assert_int_eq(dsv4_shuffle_index(0, 16, 64, 1), 256);
    ck_assert_int_eq(dsv4_shuffle_index(1, 0, 64, 1), 16);
    ck_assert_int_eq(dsv4_shuffle_index(0, 32, 64, 1), 512);
    ck_assert_int_eq(dsv4_shuffle_index(16, 0, 64, 1), 1024);
    ck_assert_int_eq(dsv4_shuffle_check(24, 64, 1, NULL), DSV4_EINPUT);
    ck_assert_int_eq(dsv4_shuffle_check(32, 48, 1, NULL), DSV4_EINPUT);
}
END_TEST

/* ---- gemm_a8w8_blockscale -------------------------------------------------- */

static uint8_t code(float v) { return dsv4_fp8_from_f32(v, DSV4_FP8_E4M3FN, 1); }

START_TEST(gemm_hand_answer)
{
    /* M = 2, N = 2, K = 256 (two blocks).  Row 0 of A: 1.0 in block 0 and
     * 0.5 in block 1; row 1: -2.0 then 448.  W row 0: all 1.5; row 1: 1.0 in
     * block 0, 0.0 in block 1.  x_scale = {2, 4 | 0.25, 1}, w_scale (one
     * row block) = {0.5, 8}.
     * Y[0,0] = 128*1*1.5*2*0.5 + 128*0.5*1.5*4*8 = 192 + 3072 = 3264
     * Y[0,1] = 128*1*1*2*0.5 = 128
     * Y[1,0] = 128*(-2)*1.5*0.25*0.5 + 128*448*1.5*1*8 = -48 + 688128 = 688080
     * Y[1,1] = 128*(-2)*1*0.25*0.5 = -32 */
    uint8_t xq[2 * 256], wq[2 * 256];
    for (int k = 0; k < 256; k++) {
        xq[k] = code(k < 128 ? 1.0f : 0.5f);
        xq[256 + k] = code(k < 128 ? -2.0f : 448.0f);
        wq[k] = code(1.5f);
        wq[256 + k] = code(k < 128 ? 1.0f : 0.0f);
    }
    float xs[4] = {2, 4, 0.25f, 1}, ws[2] = {0.5f, 8};
    dsv4_gemm_args a = {xq, wq, xs, ws, 2, 2, 256, DSV4_FP8_E4M3FN, 0, 0};
    double y[4];
    float yf[4];
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&a, y, NULL), 0);
    ck_assert(y[0] == 3264 && y[1] == 128 && y[2] == 688080 && y[3] == -32);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32(&a, yf, NULL), 0);
    ck_assert(yf[0] == 3264 && yf[1] == 128 && yf[2] == 688080 && yf[3] == -32);
    /* the transposed x_scale layout [K/128][M] gives the same */
    float xst[4] = {2, 0.25f, 4, 1};
    a.x_scale = xst;
    a.x_scale_transposed = 1;
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&a, y, NULL), 0);
    ck_assert(y[0] == 3264 && y[2] == 688080);
}
END_TEST

static void random_fp8(dsv4_rng *r, uint8_t *p, int64_t n, dsv4_fp8_kind kind)
{
    for (int64_t i = 0; i < n; i++) {
        uint8_t b;
        do
            b = (uint8_t)(dsv4_rng_next(r) >> 56);
        while (kind == DSV4_FP8_E4M3FN ? (b & 0x7F) == 0x7F : b == 0x80);
        p[i] = b;
    }
}

/* With unit scales and K = 128 the result is one block dot: compare it with
 * exact integer arithmetic (value = integer * 2^-9 (fn) / 2^-10 (fnuz)),
 * over every code including subnormals and +-448. */
START_TEST(block_dot_is_exact)
{
    for (int kind = 0; kind < 2; kind++) {
        const int M = 24, N = 40, K = 128;
        const double unit = kind ? 0x1p-10 : 0x1p-9;
        uint8_t *xq = malloc(M * K), *wq = malloc(N * K);
        dsv4_rng r;
        dsv4_rng_init(&r, 5, "exact");
        random_fp8(&r, xq, M * K, (dsv4_fp8_kind)kind);
        random_fp8(&r, wq, N * K, (dsv4_fp8_kind)kind);
        float xs[24], ws[1] = {1};
        for (int m = 0; m < M; m++)
            xs[m] = 1;
        dsv4_gemm_args a = {xq, wq, xs, ws, M, N, K, (dsv4_fp8_kind)kind, 0, 0};
        double *y = malloc(sizeof(double) * M * N);
        ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&a, y, NULL), 0);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                int64_t s = 0;
                for (int k = 0; k < K; k++)
                    s += (int64_t)(dsv4_fp8_to_f32(xq[m * K + k], (dsv4_fp8_kind)kind) / unit) *
                         (int64_t)(dsv4_fp8_to_f32(wq[n * K + k], (dsv4_fp8_kind)kind) / unit);
                ck_assert_msg(y[m * N + n] == (double)s * unit * unit, "kind %d (%d,%d): %.17g vs exact %.17g", kind,
                              m, n, y[m * N + n], (double)s * unit * unit);
            }
        free(xq), free(wq), free(y);
    }
}
END_TEST

typedef struct rand_gemm {
    uint8_t *xq, *wq, *wsh;
    float *xs, *xst, *ws;
    dsv4_gemm_args a;
} rand_gemm;

static void rand_gemm_make(rand_gemm *g, int M, int N, int K, uint64_t seed)
{
    const int KB = K / 128, NB = (N + 127) / 128;
    dsv4_rng r;
    dsv4_rng_init(&r, seed, "gemm");
    g->xq = malloc((size_t)M * K);
    g->wq = malloc((size_t)N * K);
    g->wsh = malloc((size_t)N * K);
    g->xs = malloc(sizeof(float) * (M * KB + 1));
    g->xst = malloc(sizeof(float) * (M * KB + 1));
    g->ws = malloc(sizeof(float) * NB * KB);
    random_fp8(&r, g->xq, (int64_t)M * K, DSV4_FP8_E4M3FN);
    random_fp8(&r, g->wq, (int64_t)N * K, DSV4_FP8_E4M3FN);
    for (int i = 0; i < M * KB; i++)
        g->xs[i] = (float)(dsv4_rng_uniform(&r) * 0.01 + 1e-4); /* non-power-of-two fp32 scales */
    for (int m = 0; m < M; m++)
        for (int kb = 0; kb < KB; kb++)
            g->xst[kb * M + m] = g->xs[m * KB + kb];
    for (int i = 0; i < NB * KB; i++)
        g->ws[i] = (float)ldexp(1.0, (int)dsv4_rng_range(&r, -12, -4));
    ck_assert_int_eq(dsv4_ref_shuffle_weight(g->wq, g->wsh, 1, N, K, 1, 0, NULL), 0);
    dsv4_gemm_args a = {g->xq, g->wq, g->xs, g->ws, M, N, K, DSV4_FP8_E4M3FN, 0, 0};
    g->a = a;
}

static void rand_gemm_free(rand_gemm *g)
{
    free(g->xq), free(g->wq), free(g->wsh), free(g->xs), free(g->xst), free(g->ws);
}

/* A second formulation: naive triple loop in long double, any order. */
START_TEST(ideal_matches_naive_and_bpreshuffle)
{
    const int M = 7, N = 48, K = 384;
    rand_gemm g;
    rand_gemm_make(&g, M, N, K, 9);
    double *y = malloc(sizeof(double) * M * N), *ysh = malloc(sizeof(double) * M * N);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&g.a, y, NULL), 0);
    dsv4_gemm_args b = g.a;
    b.wq = g.wsh, b.w_shuffled = 1, b.x_scale = g.xst, b.x_scale_transposed = 1;
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&b, ysh, NULL), 0);
    ck_assert_msg(memcmp(y, ysh, sizeof(double) * M * N) == 0, "bpreshuffle differs from plain");
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            long double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                long double p = (long double)dsv4_fp8_to_f32(g.xq[m * K + k], DSV4_FP8_E4M3FN) *
                                dsv4_fp8_to_f32(g.wq[n * K + k], DSV4_FP8_E4M3FN) * g.xs[m * 3 + k / 128] *
                                g.ws[k / 128];
                s += p;
                sa += fabsl(p);
            }
            ck_assert_msg(fabsl(y[m * N + n] - s) <= 0x1p-50L * sa, "(%d,%d) %.17g vs %.17Lg", m, n, y[m * N + n], s);
        }
    free(y), free(ysh);
    rand_gemm_free(&g);
}
END_TEST

/* The golden path and the fp32 model are bit-identical for 1, 2 and 3
 * reference threads (a shape of several output tiles, with row and column
 * tails). */
START_TEST(ideal_thread_invariant)
{
    const int M = 300, N = 640, K = 512;
    rand_gemm g;
    rand_gemm_make(&g, M, N, K, 21);
    double *y1 = malloc(sizeof(double) * M * N), *y2 = malloc(sizeof(double) * M * N);
    float *f1 = malloc(sizeof(float) * M * N), *f2 = malloc(sizeof(float) * M * N);
    const int saved = dsv4_threads();
    dsv4_set_threads(1);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&g.a, y1, NULL), 0);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32(&g.a, f1, NULL), 0);
    for (int t = 2; t <= 3; t++) {
        dsv4_set_threads(t);
        ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&g.a, y2, NULL), 0);
        ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32(&g.a, f2, NULL), 0);
        ck_assert_msg(memcmp(y1, y2, sizeof(double) * M * N) == 0, "ideal depends on the thread count (%d)", t);
        ck_assert_msg(memcmp(f1, f2, sizeof(float) * M * N) == 0, "fp32 model depends on the thread count (%d)", t);
    }
    dsv4_set_threads(saved);
    free(y1), free(y2), free(f1), free(f2);
    rand_gemm_free(&g);
}
END_TEST

/* The serial definitions of both block products, written out here apart
 * from ref/gemm.c: per element, per K block in order, P = the block's
 * products summed k in order from +0 (float for the fp32 model, double for
 * the ideal); the model's acc = acc + fl(P xs) ws, the ideal's y = y + P
 * (xs ws); each step rounded once. */
static void serial_block_products(const dsv4_gemm_args *a, const uint8_t *w_plain, const float *xs_plain, float *f,
                                  double *y)
{
    const int64_t M = a->M, N = a->N, K = a->K, KB = K / 128;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0;
            double yd = 0;
            for (int64_t kb = 0; kb < KB; kb++) {
                float p = 0;
                double pd = 0;
                for (int64_t k = kb * 128; k < kb * 128 + 128; k++) {
                    const float x = dsv4_fp8_to_f32(a->xq[m * K + k], a->kind);
                    const float w = dsv4_fp8_to_f32(w_plain[n * K + k], a->kind);
                    const float prod = x * w; /* exact */
                    p = p + prod;
                    pd = pd + (double)prod;
                }
                const float xs = xs_plain[m * KB + kb], ws = a->w_scale[(n / 128) * KB + kb];
                const float px = p * xs;
                const float pxw = px * ws;
                acc = acc + pxw;
                const double s = (double)xs * (double)ws;
                const double ps = pd * s;
                yd = yd + ps;
            }
            f[m * N + n] = acc;
            y[m * N + n] = yd;
        }
}

/* Every SIMD level gives the serial definitions' bits, for both models:
 * shapes with row and column tails (not multiples of the 12-row micro tile,
 * the 16- and 32-column panels or the 96 x 256 output tiles; N = 37 not even
 * of 16, plain layout only), plain and
 * bpreshuffle layouts, e4m3fn and e4m3fnuz codes, subnormal codes and
 * extreme scales (sums that cancel, products near the fp32 range's ends). */
START_TEST(block_products_are_the_serial_sums)
{
    static const int shapes[][3] = {{1, 16, 128}, {13, 48, 256}, {97, 272, 384}, {25, 112, 128}, {5, 37, 256}};
    static const int levels[] = {DSV4_SIMD_PORTABLE, DSV4_SIMD_AVX2_FMA, DSV4_SIMD_AVX512};
    for (int s = 0; s < 5; s++)
        for (int kind = 0; kind < 2; kind++) {
            const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], KB = K / 128, NB = (N + 127) / 128;
            const int layouts = N % 16 ? 1 : 2; /* shuffle_weight needs N % 16 == 0 */
            const dsv4_fp8_kind fk = kind ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
            dsv4_rng r;
            dsv4_rng_init(&r, 100 + s * 2 + kind, "gemm levels");
            uint8_t *xq = malloc((size_t)M * K), *wq = malloc((size_t)N * K), *wsh = malloc((size_t)N * K);
            float *xs = malloc(sizeof(float) * M * KB), *xst = malloc(sizeof(float) * M * KB);
            float *ws = malloc(sizeof(float) * NB * KB);
            random_fp8(&r, xq, (int64_t)M * K, fk);
            random_fp8(&r, wq, (int64_t)N * K, fk);
            for (int i = 0; i < M * K; i += 7) /* subnormal codes in runs */
                xq[i] = (uint8_t)(dsv4_rng_next(&r) >> 61);
            for (int i = 0; i < M * KB; i++)
                xs[i] = (float)(dsv4_rng_uniform(&r) * ldexp(1.0, (int)dsv4_rng_range(&r, -40, 40)));
            for (int m = 0; m < M; m++)
                for (int kb = 0; kb < KB; kb++)
                    xst[kb * M + m] = xs[m * KB + kb];
            for (int i = 0; i < NB * KB; i++)
                ws[i] = (float)(dsv4_rng_uniform(&r) * ldexp(1.0, (int)dsv4_rng_range(&r, -40, 40)));
            if (layouts == 2)
                ck_assert_int_eq(dsv4_ref_shuffle_weight(wq, wsh, 1, N, K, 1, 0, NULL), 0);
            const size_t n = (size_t)M * N;
            float *fs = malloc(sizeof(float) * n), *f = malloc(sizeof(float) * n);
            double *ys = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n), *fw = malloc(sizeof(double) * n);
            dsv4_gemm_args a = {xq, wq, xs, ws, M, N, K, fk, 0, 0};
            serial_block_products(&a, wq, xs, fs, ys);
            for (int lv = 0; lv < 3; lv++)
                for (int layout = 0; layout < layouts; layout++) {
                    dsv4_gemm_args b = a;
                    if (layout)
                        b.wq = wsh, b.w_shuffled = 1, b.x_scale = xst, b.x_scale_transposed = 1;
                    dsv4_simd_cap_level(levels[lv]);
                    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32(&b, f, NULL), 0);
                    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32_wide(&b, fw, NULL), 0);
                    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&b, y, NULL), 0);
                    dsv4_simd_cap_level(DSV4_SIMD_AVX512);
                    for (size_t i = 0; i < n; i++) {
                        ck_assert_msg(memcmp(&f[i], &fs[i], sizeof *f) == 0 && fw[i] == (double)fs[i],
                                      "fp32 model, shape %d kind %d level %d layout %d, element (%zu, %zu): %a, "
                                      "serial %a", s, kind, levels[lv], layout, i / N, i % N, f[i], fs[i]);
                        ck_assert_msg(memcmp(&y[i], &ys[i], sizeof *y) == 0,
                                      "ideal, shape %d kind %d level %d layout %d, element (%zu, %zu): %a, "
                                      "serial %a", s, kind, levels[lv], layout, i / N, i % N, y[i], ys[i]);
                    }
                }
            free(xq), free(wq), free(wsh), free(xs), free(xst), free(ws), free(fs), free(f), free(ys), free(y),
                free(fw);
        }
}
END_TEST

/* The fp32 model of the kernel (ref_accum=f32) stays inside the derived
 * bound of the ideal: 1 ulp_bf16(|e| + d) + d, d = gamma_n G. */
START_TEST(f32_model_within_bound)
{
    const int M = 16, N = 256, K = 1536;
    rand_gemm g;
    rand_gemm_make(&g, M, N, K, 33);
    double *e = malloc(sizeof(double) * M * N), *G = malloc(sizeof(double) * M * N);
    float *f = malloc(sizeof(float) * M * N);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f64(&g.a, e, NULL), 0);
    ck_assert_int_eq(dsv4_ref_gemm_a8w8_blockscale_f32(&g.a, f, NULL), 0);
    ck_assert_int_eq(dsv4_gemm_abs_gauge(&g.a, G, NULL), 0);
    const double nr = K + 3.0 * K / 128, gam = nr * 0x1p-24 / (1 - nr * 0x1p-24);
    double worst = 0;
    for (int i = 0; i < M * N; i++) {
        const double d = gam * G[i], y = dsv4_bf16_to_f32(dsv4_bf16_from_f32(f[i]));
        const double b = dsv4_bf16_store_bound(e[i], d);
        ck_assert_msg(fabs(y - e[i]) <= b, "element %d: |%.9g - %.9g| > %.3g", i, y, e[i], b);
        worst = fmax(worst, fabs((double)f[i] - e[i]) / d);
    }
    ck_assert_msg(worst > 0 && worst < 1, "fp32 error / gamma_n G = %.3g", worst); /* the model rounds, inside gamma */
    free(e), free(G), free(f);
    rand_gemm_free(&g);
}
END_TEST

START_TEST(gemm_rejects_bad_input)
{
    uint8_t xq[200] = {0}, wq[200] = {0};
    float xs[2] = {1, 1}, ws[2] = {1, 1};
    dsv4_status st = {0};
    dsv4_gemm_args a = {xq, wq, xs, ws, 1, 1, 200, DSV4_FP8_E4M3FN, 0, 0};
    ck_assert_int_eq(dsv4_gemm_check(&a, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "not a multiple of 128"));
    uint8_t x2[128] = {0}, w2[128] = {0};
    x2[77] = 0xFF; /* NaN code */
    dsv4_gemm_args b = {x2, w2, xs, ws, 1, 1, 128, DSV4_FP8_E4M3FN, 0, 0};
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_gemm_check(&b, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "XQ[0, 77]"));
}
END_TEST

/* ---- the family's op definitions (ops/gemm/) ------------------------------ */

/* Every op of the family declares its variants as one table (no parallel
 * string arrays), with the names and order the goldens store. */
START_TEST(family_variants_are_tables)
{
    static const struct {
        const char *op;
        const char *names[4];
    } want[] = {
        {"gemm_a8w8_blockscale", {"default", "bpreshuffle", "fp8=fnuz", NULL}},
        {"shuffle_weight", {"default", "inverse", NULL}},
        {"rocm_inv_rope_einsum", {"default", NULL}},
        {"rocm_mxfp8_wo_a_bmm", {"default", NULL}},
        {"fused_qnorm_rope_kv_insert", {"default", "fp8=fnuz", NULL}},
        {"compressor", {"default", NULL}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const dsv4_op *op = dsv4_op_find(want[i].op);
        ck_assert_ptr_nonnull(op);
        ck_assert_ptr_nonnull(op->variants);
        int n = 0;
        while (want[i].names[n])
            n++;
        ck_assert_int_eq(dsv4_op_variant_count(op), n);
        for (int k = 0; k < n; k++) {
            ck_assert_str_eq(dsv4_op_variant_name(op, k), want[i].names[k]);
            ck_assert_int_gt((int)strlen(dsv4_op_variant_doc(op, k)), 20);
        }
    }
}
END_TEST

/* A context of op's variant `variant` with its default parameters. */
static dsv4_opctx ctx_of(const dsv4_op *op, dsv4_params *ps, const char *variant)
{
    dsv4_status st = {0};
    memset(ps, 0, sizeof *ps);
    ck_assert_int_eq(dsv4_op_complete_params(op, ps, "test", &st), 0);
    const int k = dsv4_op_variant(op, variant);
    ck_assert_int_ge(k, 0);
    return dsv4_opctx_make(op, ps, k, 7);
}

/* The GEMM's variant rules reach the generator: fp8=fnuz codes, and under
 * bpreshuffle the same weight as shuffle_weight bytes with x_scale
 * transposed; the reference reads them back to the same ideal. */
START_TEST(gemm_variant_rules_shape_inputs)
{
    const dsv4_op *op = dsv4_op_find("gemm_a8w8_blockscale");
    dsv4_params ps[3];
    const dsv4_opctx plain = ctx_of(op, &ps[0], "default"), bpre = ctx_of(op, &ps[1], "bpreshuffle"),
                     fnuz = ctx_of(op, &ps[2], "fp8=fnuz");
    dsv4_status st = {0};
    dsv4_tensors in[3] = {{0}}, out[3] = {{0}};
    const dsv4_opctx *cs[3] = {&plain, &bpre, &fnuz};
    for (int v = 0; v < 3; v++) {
        ck_assert_int_eq(op->generate(cs[v], &in[v], &st), 0);
        ck_assert_int_eq(op->validate(cs[v], &in[v], &st), 0);
        ck_assert_int_eq(op->alloc_outputs(cs[v], &in[v], &out[v], &st), 0);
        ck_assert_int_eq(op->reference(cs[v], &in[v], &out[v], &st), 0);
    }
    const dsv4_tensor *xq0 = dsv4_tensors_get(&in[0], "XQ"), *xs0 = dsv4_tensors_get(&in[0], "x_scale");
    const dsv4_tensor *wq0 = dsv4_tensors_get(&in[0], "WQ"), *wq1 = dsv4_tensors_get(&in[1], "WQ");
    const dsv4_tensor *xs1 = dsv4_tensors_get(&in[1], "x_scale");
    ck_assert_int_eq(xq0->dtype, DSV4_F8E4M3FN);
    ck_assert_int_eq(dsv4_tensors_get(&in[2], "XQ")->dtype, DSV4_F8E4M3FNUZ);
    const int64_t M = xq0->shape[0], KB = xq0->shape[1] / 128, N = wq0->shape[0], K = wq0->shape[1];
    ck_assert(xs0->shape[0] == M && xs0->shape[1] == KB && xs1->shape[0] == KB && xs1->shape[1] == M);
    for (int64_t m = 0; m < M; m++)
        for (int64_t kb = 0; kb < KB; kb++)
            ck_assert(((const float *)xs1->data)[kb * M + m] == ((const float *)xs0->data)[m * KB + kb]);
    uint8_t *shuffled = malloc((size_t)(N * K));
    ck_assert_int_eq(dsv4_ref_shuffle_weight(wq0->data, shuffled, 1, N, K, 1, 0, &st), 0);
    ck_assert_int_eq(memcmp(shuffled, wq1->data, (size_t)(N * K)), 0);
    ck_assert_int_ne(memcmp(wq0->data, wq1->data, (size_t)(N * K)), 0);
    free(shuffled);
    const dsv4_tensor *y0 = dsv4_tensors_get(&out[0], "Y"), *y1 = dsv4_tensors_get(&out[1], "Y");
    ck_assert_int_eq(memcmp(y0->data, y1->data, y0->nbytes), 0);
    for (int v = 0; v < 3; v++)
        dsv4_tensors_free(&in[v]), dsv4_tensors_free(&out[v]);
}
END_TEST

/* shuffle_weight's inverse variant undoes the default one. */
START_TEST(shuffle_inverse_variant_round_trips)
{
    const dsv4_op *op = dsv4_op_find("shuffle_weight");
    dsv4_params p0, p1;
    const dsv4_opctx fwd = ctx_of(op, &p0, "default"), inv = ctx_of(op, &p1, "inverse");
    dsv4_status st = {0};
    dsv4_tensors in = {0}, mid = {0}, back = {0};
    ck_assert_int_eq(op->generate(&fwd, &in, &st), 0);
    ck_assert_int_eq(op->alloc_outputs(&fwd, &in, &mid, &st), 0);
    ck_assert_int_eq(op->reference(&fwd, &in, &mid, &st), 0);
    dsv4_tensor *m = dsv4_tensors_find(&mid, "out");
    snprintf(m->name, sizeof m->name, "x"); /* the shuffled bytes as the inverse's input */
    ck_assert_int_eq(op->alloc_outputs(&inv, &mid, &back, &st), 0);
    ck_assert_int_eq(op->reference(&inv, &mid, &back, &st), 0);
    const dsv4_tensor *x = dsv4_tensors_get(&in, "x"), *b = dsv4_tensors_get(&back, "out");
    ck_assert_int_ne(memcmp(x->data, m->data, x->nbytes), 0);
    ck_assert_int_eq(memcmp(x->data, b->data, x->nbytes), 0);
    dsv4_tensors_free(&in), dsv4_tensors_free(&mid), dsv4_tensors_free(&back);
}
END_TEST

/* bound = 1 ulp_bf16(|e| + d) + d, d = gamma gauge + extra, by hand:
 * e = 1, d = 0.5 * 2^-10 = 2^-11: ulp_bf16 at 1 + 2^-11 is 2^-7;
 * e = -3, d = 2^-20: ulp_bf16 in [2, 4) is 2^-6. */
START_TEST(bf16_ideal_bound_by_hand)
{
    dsv4_bf16_ideal id;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_bf16_ideal_alloc(&id, 2, 1, &st), 0);
    id.e[0] = 1.0, id.e[1] = -3.0;
    id.gauge[0] = 0x1p-10, id.gauge[1] = 0.0;
    id.extra[0] = 0.0, id.extra[1] = 0x1p-20;
    id.gamma = 0.5;
    dsv4_bf16_ideal_bounds(&id, id.gauge); /* in place, as the GEMM hint uses it */
    ck_assert(id.gauge[0] == 0x1p-7 + 0x1p-11);
    ck_assert(id.gauge[1] == 0x1p-6 + 0x1p-20);
    dsv4_bf16_ideal_free(&id);
    ck_assert_ptr_null(id.e);
}
END_TEST

/* The 584-byte record's parts: a RoPE byte, an fp8 value, a scale byte. */
START_TEST(cache_locate_names_parts)
{
    char buf[160];
    dsv4_gemmops_cache_locate(1 * 64 * 584 + 3 * 576 + 450, 64, buf, sizeof buf);
    ck_assert_str_eq(buf, "page 1, token 3 (slot 67), bf16 RoPE byte 450");
    dsv4_gemmops_cache_locate(1 * 2 * 584 + 17, 2, buf, sizeof buf);
    ck_assert_str_eq(buf, "page 1, token 0 (slot 2), fp8 value of dim 17");
    dsv4_gemmops_cache_locate(64 * 576 + 2 * 8 + 5, 64, buf, sizeof buf);
    ck_assert_str_eq(buf, "page 0, token 2 (slot 2), scale byte 5");
    dsv4_gemmops_cache_locate(5, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "");
}
END_TEST

/* ---- wo_a ---------------------------------------------------------------- */

START_TEST(bmm_hand_answer)
{
    /* T = 1, G = 2, R = 1, K = 64: a = 1.0 (scale 2^0) in group 0 and 3.0
     * with scale byte 125 (2^-2) in group 1; W row 0 = 2.0, scale 126 (0.5);
     * W row 1 = -1.0 in block 0 (scale 127), 0 in block 1.
     * out[0] = 64 * 1 * 2 * 0.5 = 64; out[1] = 32 * 0.75 * -1 = -24. */
    uint8_t a[128], as[4] = {127, 127, 125, 125}, w[128], ws[4] = {126, 126, 127, 127};
    for (int k = 0; k < 64; k++) {
        a[k] = code(1.0f), a[64 + k] = code(3.0f);
        w[k] = code(2.0f), w[64 + k] = code(k < 32 ? -1.0f : 0.0f);
    }
    dsv4_wo_a_bmm_args b = {a, as, w, ws, 1, 2, 1, 64};
    double out[2], gauge[2];
    ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&b, out, gauge, NULL), 0);
    ck_assert(out[0] == 64 && out[1] == -24 && gauge[1] == 24);
}
END_TEST

START_TEST(einsum_hand_answer)
{
    /* T = 1, H = 1, G = 2 (Dg = 256), R = 1.  o[d] = 1 except the last pair
     * (510, 511) = (2, 3); W = 1 everywhere.  No RoPE: group 1 sums 254 + 5 =
     * 259.  Inverse RoPE with cos = 0, sin = 1 on every pair (e' = o, o' =
     * -e): pairs (1,1) -> (1,-1) sum 0 each; (2,3) -> (3,-2) sum 1; group 1 =
     * 192 + 31*0 + 1 = 193; group 0 untouched = 256. */
    uint16_t o[512], w[512];
    for (int d = 0; d < 512; d++)
        o[d] = dsv4_bf16_from_f32(1.0f), w[d] = dsv4_bf16_from_f32(1.0f);
    o[510] = dsv4_bf16_from_f32(2.0f), o[511] = dsv4_bf16_from_f32(3.0f);
    float cs[64];
    for (int k = 0; k < 32; k++)
        cs[k] = 0.0f, cs[32 + k] = 1.0f;
    int64_t pos = 0;
    dsv4_einsum_args a = {o, 1, 1, 2, 1, &pos, cs, 1, 64, 0, w};
    double out[2];
    ck_assert_int_eq(dsv4_ref_inv_rope_einsum(&a, out, NULL, NULL, NULL), 0);
    ck_assert(out[0] == 256 && out[1] == 259);
    a.inverse_rope = 1;
    ck_assert_int_eq(dsv4_ref_inv_rope_einsum(&a, out, NULL, NULL, NULL), 0);
    ck_assert_msg(out[0] == 256 && out[1] == 193, "%g %g", out[0], out[1]);
}
END_TEST


/* ---- fused_qnorm_rope_kv_insert ---------------------------------------------- */

START_TEST(qnorm_insert_hand)
{
    /* q rows of 2.0: mean(x^2) = 4, y = 2 / sqrt(4 + eps) -> 1 (eps = 0).
     * cos = 0, sin = 1: forward (e, o) -> (-o, e).  kv: NoPE 1.0, RoPE pairs
     * (0.5, -3); the cache RoPE lanes must hold bf16 (3, 0.5). */
    uint16_t q[2 * 512], kv[2 * 512];
    for (int i = 0; i < 1024; i++)
        q[i] = dsv4_bf16_from_f32(2.0f);
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 512; d++)
            kv[t * 512 + d] = dsv4_bf16_from_f32(d < 448 ? 1.0f : (d % 2 ? -3.0f : 0.5f));
    float cs[64];
    for (int k = 0; k < 32; k++)
        cs[k] = 0.0f, cs[32 + k] = 1.0f;
    int64_t pos[2] = {0, 0}, slots[2] = {-1, 5};
    dsv4_qnorm_insert_args a = {q, 2, 1, kv, slots, 2, pos, cs, 1, 0.0};
    double out[1024], mag[1024];
    ck_assert_int_eq(dsv4_ref_qnorm_rope(&a, out, mag, NULL), 0);
    for (int d = 0; d < 448; d++)
        ck_assert(out[d] == 1.0 && mag[d] == 1.0);
    for (int k = 0; k < 32; k++)
        ck_assert(out[448 + 2 * k] == -1.0 && out[449 + 2 * k] == 1.0);
    const int64_t B = 4;
    uint8_t cache[2 * 4 * 584];
    memset(cache, 0xAB, sizeof cache);
    dsv4_kv_layout L = {B, 2, 0};
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    ck_assert_int_eq(dsv4_ref_kv_rope_insert(&a, cache, &L, &o, NULL), 0);
    /* slot 5 = page 1, row 1: RoPE lanes at 576 + 448 */
    const uint8_t *page = cache + B * 584;
    for (int k = 0; k < 32; k++) {
        uint16_t e, od;
        memcpy(&e, page + 576 + 448 + 4 * k, 2);
        memcpy(&od, page + 576 + 448 + 4 * k + 2, 2);
        ck_assert_msg(dsv4_bf16_to_f32(e) == 3.0f && dsv4_bf16_to_f32(od) == 0.5f, "pair %d: %g %g", k,
                      dsv4_bf16_to_f32(e), dsv4_bf16_to_f32(od));
    }
    /* NoPE 1.0 in every block: amax 1 -> e = ceil(log2(1/448)) = -8, byte 119, code of 256 = 0x78 */
    ck_assert_int_eq(page[576], 0x78);
    ck_assert_int_eq(page[B * 576 + 8], 119);
    for (size_t i = 0; i < B * 584; i++) /* page 0 untouched (slot -1 skipped) */
        ck_assert_int_eq(cache[i], 0xAB);
}
END_TEST

/* ---- compressor -------------------------------------------------------------- */

/* An independent formulation straight from kv_score (no state cache):
 * window rows p = pos - coff c + 1 .. pos, row u uses dims off = 512 [u >= c]
 * (C4), score = fl(score + ape[p % c]), softmax per dim, RMSNorm * w. */
static void naive_latent(int64_t ratio, const float *ks, const float *ape, const float *w, double eps, int64_t pos,
                         double *n)
{
    const int coff = ratio == 4 ? 2 : 1;
    const int64_t half = coff * 512, W2 = 2 * half, nu = coff * ratio;
    double ss = 0;
    for (int d = 0; d < 512; d++) {
        double m = -INFINITY, z = 0, s = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t u = 0; u < nu; u++) {
                const int64_t p = pos - nu + 1 + u, off = (coff == 2 && u >= ratio) ? 512 : 0;
                if (p < 0)
                    continue;
                const float sc = ks[p * W2 + half + off + d] + ape[(p % ratio) * half + off + d];
                if (pass == 0)
                    m = fmax(m, sc);
                else
                    z += exp(sc - m), s += exp(sc - m) * ks[p * W2 + off + d];
            }
        n[d] = s / z;
        ss += n[d] * n[d];
    }
    for (int d = 0; d < 512; d++)
        n[d] = n[d] / sqrt(ss / 512 + eps) * w[d];
}

static void compressor_vs_naive(int64_t ratio, int64_t T)
{
    const int coff = ratio == 4 ? 2 : 1;
    const int64_t half = coff * 512, W2 = 2 * half, Bs = ratio == 4 ? 4 : 8, nsb = (T + Bs - 1) / Bs;
    const int64_t B = 256 / ratio, nb = ((T + ratio - 1) / ratio + B - 1) / B;
    dsv4_rng r;
    dsv4_rng_init(&r, 77, "comp");
    float *ks = malloc(sizeof(float) * T * W2), *ape = malloc(sizeof(float) * ratio * half), w[512];
    float *state = calloc((size_t)(nsb * Bs * W2), sizeof(float)), cs[64 * 256];
    uint8_t *cache = calloc((size_t)(nb * B * 584), 1);
    int64_t *pos = malloc(sizeof(int64_t) * T), *ssm = malloc(sizeof(int64_t) * T);
    int32_t qsl[2] = {0, (int32_t)T}, sbt[64], bt[4];
    for (int64_t i = 0; i < T * W2; i++)
        ks[i] = (float)(dsv4_rng_normal(&r) * 2);
    for (int64_t i = 0; i < ratio * half; i++)
        ape[i] = (float)dsv4_rng_normal(&r);
    for (int d = 0; d < 512; d++)
        w[d] = (float)(1 + 0.1 * dsv4_rng_normal(&r));
    for (int i = 0; i < 64 * 256; i++)
        cs[i] = (float)(dsv4_rng_uniform(&r) * 2 - 1);
    for (int64_t j = 0; j < nsb; j++) /* pages in reverse order */
        sbt[j] = (int32_t)(nsb - 1 - j);
    for (int64_t j = 0; j < nb; j++)
        bt[j] = (int32_t)(nb - 1 - j);
    for (int64_t t = 0; t < T; t++)
        pos[t] = t, ssm[t] = sbt[t / Bs] * Bs + t % Bs;
    dsv4_compressor_args a = {ratio, T, 1, ks, pos, qsl, ape, state, nsb, ssm, sbt, nsb, w, 1e-6, cs, 256,
                              cache, nb, bt, nb};
    double *lat = malloc(sizeof(double) * T * 512), n[512];
    ck_assert_int_eq(dsv4_ref_compressor_step(&a, lat, NULL), 0);
    int emitted = 0;
    for (int64_t t = 0; t < T; t++) {
        if ((t + 1) % ratio) {
            ck_assert(isnan(lat[t * 512]));
            continue;
        }
        emitted++;
        naive_latent(ratio, ks, ape, w, 1e-6, t, n);
        float dec[512];
        const int64_t cidx = t / ratio;
        dsv4_kv_decode_token_f32(cache + bt[cidx / B] * B * 584, B, cidx % B, DSV4_FP8_E4M3FN, dec);
        double rot[64];
        for (int d = 0; d < 64; d++)
            rot[d] = n[448 + d];
        dsv4_rope_gptj_f64(rot, cs + (t / ratio * ratio) * 64, 64, DSV4_ROPE_FORWARD);
        for (int d = 0; d < 512; d++) {
            ck_assert_msg(fabs(lat[t * 512 + d] - n[d]) <= 1e-12 * (1 + fabs(n[d])), "t %ld d %d", (long)t, d);
            /* NoPE: fp8 of bf16(n) within half an e4m3 step at the block top
             * (2^-4 of 448 * 2^e >= amax) plus the bf16 rounding; RoPE: bf16. */
            double amax = 0;
            for (int j = d / 64 * 64; d < 448 && j < d / 64 * 64 + 64; j++)
                amax = fmax(amax, fabs(n[j]));
            const double want = d < 448 ? n[d] : rot[d - 448];
            const double tol = d < 448 ? amax * 2 * 0x1p-4 + dsv4_ulp(DSV4_BF16, want) : dsv4_ulp(DSV4_BF16, want);
            ck_assert_msg(fabs(dec[d] - want) <= tol, "t %ld d %d: %g vs %g", (long)t, d, dec[d], want);
        }
    }
    ck_assert_int_eq(emitted, (int)(T / ratio));
    /* the state rows hold [kv | fl(score + ape)] */
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            const float *row = state + ssm[t] * W2;
            ck_assert(row[j] == ks[t * W2 + j]);
            ck_assert(row[half + j] == ks[t * W2 + half + j] + ape[(t % ratio) * half + j]);
        }
    free(ks), free(ape), free(state), free(cache), free(pos), free(ssm), free(lat);
}

START_TEST(compressor_c4_matches_naive)
{
    compressor_vs_naive(4, 14);
}
END_TEST

START_TEST(compressor_c128_matches_naive)
{
    compressor_vs_naive(128, 256);
}
END_TEST

START_TEST(compressor_rejects_bad_tables)
{
    float ks[2048] = {0}, ape[4 * 1024] = {0}, w[512], state[4 * 2048], cs[64] = {0};
    uint8_t cache[64 * 584];
    int64_t pos[1] = {3}, ssm[1] = {3};
    int32_t qsl[2] = {0, 1}, sbt[1] = {0}, bt[1] = {7};
    for (int d = 0; d < 512; d++)
        w[d] = 1;
    dsv4_compressor_args a = {4, 1, 1, ks, pos, qsl, ape, state, 1, ssm, sbt, 1, w, 1e-6, cs, 1, cache, 1, bt, 1};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_compressor_check(&a, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, "block_table[0, 0] = 7") != NULL, "%s", st.msg);
    bt[0] = 0;
    ks[5] = NAN;
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_compressor_check(&a, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "kv_score"));
}
END_TEST

/* ---- hints ----------------------------------------------------------------- */

START_TEST(generic_permutation_hint)
{
    dsv4_tensor e, a;
    int64_t shape[1] = {64};
    ck_assert_int_eq(dsv4_tensor_alloc(&e, "Y", DSV4_F64, 1, shape, NULL), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(&a, "Y", DSV4_BF16, 1, shape, NULL), 0);
    for (int i = 0; i < 64; i++) {
        ((double *)e.data)[i] = i * 0.75 - 20;
        dsv4_tensor_set(&a, 63 - i, i * 0.75 - 20); /* reversed */
    }
    dsv4_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.kind = DSV4_CMP_FLOAT;
    pol.ulp = 0.5;
    pol.output_dtype = DSV4_BF16;
    dsv4_cmp_result res;
    ck_assert_int_eq(dsv4_compare(&e, &a, &pol, NULL, NULL, NULL, NULL, &res, NULL), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert_msg(strstr(res.hint, "permutation") != NULL, "hint: %s", res.hint);
    /* a perturbation (not a permutation) gets no such hint */
    for (int i = 0; i < 64; i++)
        dsv4_tensor_set(&a, i, (i * 0.75 - 20) * 1.1 + 0.3);
    ck_assert_int_eq(dsv4_compare(&e, &a, &pol, NULL, NULL, NULL, NULL, &res, NULL), 0);
    ck_assert_int_eq(res.verdict, DSV4_FAIL);
    ck_assert(strstr(res.hint, "permutation") == NULL);
    dsv4_tensor_free(&e), dsv4_tensor_free(&a);
}
END_TEST

/* ---- CLI end to end ---------------------------------------------------------- */

static char tmpdir[256];
static char out[1 << 16];

static void setup(void) { dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4gemm"); }
static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

START_TEST(cli_rejects_k_not_multiple_of_128)
{
    char path[512];
    snprintf(path, sizeof path, "%s/k200.yaml", tmpdir);
    dsv4_test_write_file(path, "suite: t\ncases:\n  - name: gemm_k200\n    op: gemm_a8w8_blockscale\n"
                               "    params: {M: 2, N: 128, K: 200}\n");
    int rc = dsv4_test_cli(out, sizeof out, "run %s", path);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "not a multiple of 128") != NULL, "%s", out);
}
END_TEST

/* A golden of the plain variant whose WQ is replaced by its shuffled bytes
 * (the variant left unshuffled): check fails (exit 1) and the report says
 * the output looks like a permutation through the shuffled weight. */
START_TEST(cli_shuffled_weight_as_plain_fails_with_permutation_hint)
{
    char yaml[512], golden[512], bad[600];
    snprintf(yaml, sizeof yaml, "%s/g.yaml", tmpdir);
    dsv4_test_write_file(yaml, "suite: t\ncases:\n  - name: gemm_plain\n    op: gemm_a8w8_blockscale\n"
                               "    params: {M: 4, N: 64, K: 256}\n");
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "gen %s -o %s", yaml, tmpdir), 0);
    snprintf(golden, sizeof golden, "%s/gemm_plain.h5", tmpdir);
    ck_assert_int_eq(dsv4_test_cli(out, sizeof out, "check %s", golden), 0);
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(dsv4_golden_read(golden, &g, NULL), 0);
    dsv4_tensor *w = dsv4_tensors_find(&g.inputs, "WQ");
    ck_assert_ptr_nonnull(w);
    uint8_t *sh = malloc(w->nbytes);
    ck_assert_int_eq(dsv4_ref_shuffle_weight(w->data, sh, 1, w->shape[0], w->shape[1], 1, 0, NULL), 0);
    memcpy(w->data, sh, w->nbytes);
    free(sh);
    snprintf(bad, sizeof bad, "%s/gemm_shuffled_as_plain.h5", tmpdir);
    ck_assert_int_eq(dsv4_golden_write(bad, &g, 1, NULL), 0);
    dsv4_golden_free(&g);
    int rc = dsv4_test_cli(out, sizeof out, "check %s", bad);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "permutation") != NULL && strstr(out, "shuffle_weight") != NULL, "%s", out);
}
END_TEST

int main(void)
{
    dsv4_h5_quiet();
    return dsv4_test_groups_main(
        "gemm",
        DSV4_TEST_GROUPS(
            DSV4_TEST_GROUP("core", 60, NULL, NULL, shuffle_matches_permute_definition, shuffle_hand_positions,
                            gemm_hand_answer, block_dot_is_exact, ideal_matches_naive_and_bpreshuffle,
                            ideal_thread_invariant, block_products_are_the_serial_sums, f32_model_within_bound, gemm_rejects_bad_input, bmm_hand_answer,
                            einsum_hand_answer, generic_permutation_hint, qnorm_insert_hand,
                            compressor_c4_matches_naive, compressor_c128_matches_naive, compressor_rejects_bad_tables,
                            family_variants_are_tables, gemm_variant_rules_shape_inputs,
                            shuffle_inverse_variant_round_trips, bf16_ideal_bound_by_hand, cache_locate_names_parts),
            DSV4_TEST_GROUP("cli", 60, setup, teardown, cli_rejects_k_not_multiple_of_128,
                            cli_shuffled_weight_as_plain_fails_with_permutation_hint)));
}
