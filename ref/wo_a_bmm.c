/* wo_a_bmm.c - rocm_mxfp8_wo_a_bmm, the wo_a grouped product; see gemm.h.
 * Semantics: docs/semantics/gemm.md A10. */
#include "gemm.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_inline.h"
#include "parallel.h"
#include "simd.h"

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------ */
/* rocm_mxfp8_wo_a_bmm (docs/semantics/gemm.md A10.3 [S9])             */

/* Output columns r per work item; tokens per vector block (two vectors
 * of four); K lanes per chunk (a multiple of 32: the chunk's operands stay
 * in the L2 cache). */
#define BMM_RB 16
#define BMM_TB 8
#define BMM_KC 256

typedef struct bmm_job {
    const dsv4_wo_a_bmm_args *a;
    const double *lut, *lut_abs, *pow2; /* e4m3fn codes and |codes|; e8m0 bytes 2^(b-127) */
    int64_t tp;               /* T rounded up to BMM_TB */
    int level;                /* dsv4_simd_level(): which kernel runs (the same sums) */
    double *at;               /* deq a per group transposed [G, K, tp] (then |deq a| the same), zero past T */
    double *out, *gauge;
    double *scratch;          /* per worker: bmm_scratch(tp) doubles */
} bmm_job;

/* A worker's rows of deq w and |deq w| [BMM_RB, BMM_KC] and its sums, of
 * values and of magnitudes [BMM_RB, tp]. */
static size_t bmm_scratch(int64_t tp) { return (size_t)(2 * BMM_RB * BMM_KC + 2 * BMM_RB * tp); }

/* Tokens per slice of the a decode (their scales held on the stack). */
#define BMM_TSLICE 64

/* deq x = fp8 * 2^(s - 127): exact in double (8 significant bits, the
 * exponent within [-136, 136]), so a block's dot of deq values is the
 * block's fp8 dot times 2^(sa+sw-254), exactly (docs/semantics/gemm.md A10.3). */
static int bmm_decode_a(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const bmm_job *j = ctx;
    const dsv4_wo_a_bmm_args *a = j->a;
    const int64_t T = a->T, G = a->G, K = a->K, KB = K / 32, tp = j->tp;
    double sc[BMM_TSLICE];
    for (int64_t i = i0; i < i1; i++) { /* item i: block i % KB of group i / KB, every token */
        const int64_t g = i / KB, kb = i % KB;
        double *at = j->at + g * K * tp, *at_abs = j->gauge ? j->at + (G + g) * K * tp : NULL;
        for (int64_t t0 = 0; t0 < tp; t0 += BMM_TSLICE) { /* tokens in slices: sc on the stack */
            const int64_t nt = tp - t0 < BMM_TSLICE ? tp - t0 : BMM_TSLICE;
            for (int64_t t = 0; t < nt; t++)
                sc[t] = t0 + t < T ? j->pow2[a->a_scale[((t0 + t) * G + g) * KB + kb]] : 0.0;
            for (int64_t k = kb * 32; k < kb * 32 + 32; k++) /* the rows of at in order */
                for (int64_t t = 0; t < nt; t++) {
                    const double v = t0 + t < T ? j->lut[a->a[((t0 + t) * G + g) * K + k]] * sc[t] : 0.0;
                    at[k * tp + t0 + t] = v;
                    if (j->gauge)
                        at_abs[k * tp + t0 + t] = fabs(v);
                }
        }
    }
    return DSV4_OK;
}

/* Four doubles side by side: GCC/clang vector extensions (each lane the
 * scalar IEEE multiply or add; no FMA under -std=c11), else a plain array.
 * Macros, not functions: a function passing a 32-byte vector would change
 * the ABI between the AVX2 and the default clone. */
#if defined(__GNUC__)
typedef double bmm_v4 __attribute__((vector_size(32)));
#define V4_ZERO ((bmm_v4){0.0, 0.0, 0.0, 0.0})
#define V4_SPLAT(x) ((bmm_v4){(x), (x), (x), (x)})
#define V4_MADD(p, x, w) ((p) + (x) * (w))
#define V4_ADD(p, q) ((p) + (q))
#else
typedef struct { double v[4]; } bmm_v4;
static inline bmm_v4 v4_splat(double x) { return (bmm_v4){{x, x, x, x}}; }
static inline bmm_v4 v4_madd(bmm_v4 p, bmm_v4 x, bmm_v4 w)
{
    for (int i = 0; i < 4; i++)
        p.v[i] = p.v[i] + x.v[i] * w.v[i];
    return p;
}
static inline bmm_v4 v4_add(bmm_v4 p, bmm_v4 q)
{
    for (int i = 0; i < 4; i++)
        p.v[i] += q.v[i];
    return p;
}
#define V4_ZERO v4_splat(0.0)
#define V4_SPLAT(x) v4_splat(x)
#define V4_MADD(p, x, w) v4_madd(p, x, w)
#define V4_ADD(p, q) v4_add(p, q)
#endif

/* out[k] = deq x[k] for n lanes (a multiple of 32) from their codes and
 * the e8m0 scale of each 32: the e4m3fn value built from its bits (sign,
 * exponent + 1016, mantissa; a subnormal m 2^-9 as (1 + m/8) 2^-6 - 2^-6,
 * exact, its sign put back so that 0x80 stays -0), times the scale: the
 * same doubles as lut[code] * 2^(s-127), four lanes at a time (NaN codes
 * were refused before). */
DSV4_VECTOR_CLONES static void bmm_decode_row(const uint8_t *restrict x, const uint8_t *restrict scales,
                                              const double *restrict pow2, const double *restrict lut, int64_t n,
                                              double *restrict out)
{
#if defined(__GNUC__)
    typedef uint64_t u4 __attribute__((vector_size(32)));
    (void)lut;
    for (int64_t k0 = 0; k0 < n; k0 += 32) {
        const bmm_v4 sc = V4_SPLAT(pow2[scales[k0 / 32]]);
        for (int64_t k = k0; k < k0 + 32; k += 8) {
            uint64_t w8; /* eight codes: lanes of four by a shift each */
            memcpy(&w8, x + k, sizeof w8);
            const u4 wv = {w8, w8, w8, w8};
            for (int h = 0; h < 2; h++) {
                const u4 c = (wv >> ((u4){0, 8, 16, 24} + (uint64_t)(32 * h))) & 255;
                const u4 e = (c >> 3) & 15, sign = (c & 0x80) << 56, sub = (u4)(e == 0);
                const u4 bits = sign | (((e | (sub & 1)) + 1016) << 52) | ((c & 7) << 49);
                const u4 corr = (sign | ((u4){1017, 1017, 1017, 1017} << 52)) & sub;
                const bmm_v4 v = (bmm_v4)bits - (bmm_v4)corr;
                const bmm_v4 r = (bmm_v4)((u4)v | sign) * sc;
                memcpy(out + k + 4 * h, &r, sizeof r);
            }
        }
    }
#else
    for (int64_t k = 0; k < n; k++)
        out[k] = lut[x[k]] * pow2[scales[k / 32]];
#endif
}

/* s[r][t] (rows w[0..3], 8 tokens each) += the kc/32 block dots of a chunk
 * (at: [kc, ldt] from the block's first token; w[r]: row r's chunk), block
 * by block in order, each block dot exact (32 exact products whose sum is
 * exact in double, so its order does not matter; gemm.h): the serial "acc
 * += P_kb * 2^(sa+sw-254)" over kb.  Per lane: 2 token vectors and 4 row
 * broadcasts feed 8 products (the loads stay below the multiplies). */
DSV4_VECTOR_CLONES static void bmm_kernel(const double *restrict at, int64_t ldt, int64_t kc,
                                          const double *restrict w0, const double *restrict w1,
                                          const double *restrict w2, const double *restrict w3,
                                          double *restrict s, int64_t lds)
{
    bmm_v4 acc[8];
    for (int r = 0; r < 4; r++)
        memcpy(acc + 2 * r, s + r * lds, 2 * sizeof *acc);
    for (int64_t k0 = 0; k0 < kc; k0 += 32) {
        /* named, not an array: GCC -O2 keeps an array of vectors in memory */
        bmm_v4 p00 = V4_ZERO, p01 = V4_ZERO, p10 = V4_ZERO, p11 = V4_ZERO;
        bmm_v4 p20 = V4_ZERO, p21 = V4_ZERO, p30 = V4_ZERO, p31 = V4_ZERO;
        for (int64_t k = k0; k < k0 + 32; k++) {
            bmm_v4 a0, a1;
            memcpy(&a0, at + k * ldt, sizeof a0);
            memcpy(&a1, at + k * ldt + 4, sizeof a1);
            const bmm_v4 x0 = V4_SPLAT(w0[k]), x1 = V4_SPLAT(w1[k]), x2 = V4_SPLAT(w2[k]), x3 = V4_SPLAT(w3[k]);
            p00 = V4_MADD(p00, a0, x0), p01 = V4_MADD(p01, a1, x0);
            p10 = V4_MADD(p10, a0, x1), p11 = V4_MADD(p11, a1, x1);
            p20 = V4_MADD(p20, a0, x2), p21 = V4_MADD(p21, a1, x2);
            p30 = V4_MADD(p30, a0, x3), p31 = V4_MADD(p31, a1, x3);
        }
        acc[0] = V4_ADD(acc[0], p00), acc[1] = V4_ADD(acc[1], p01), acc[2] = V4_ADD(acc[2], p10);
        acc[3] = V4_ADD(acc[3], p11), acc[4] = V4_ADD(acc[4], p20), acc[5] = V4_ADD(acc[5], p21);
        acc[6] = V4_ADD(acc[6], p30), acc[7] = V4_ADD(acc[7], p31);
    }
    for (int r = 0; r < 4; r++)
        memcpy(s + r * lds, acc + 2 * r, 2 * sizeof *acc);
}

#if DSV4_HAVE_AVX2_PATHS
/* The fused kernels (AVX2 + FMA, AVX-512F): the same block sums with
 * fused multiply-adds, straight from the weight codes.  Each block sums
 * deq a x fp8 w over its 32 lanes (fp8 w = lut[code], no scale), then
 * adds that sum times 2^(sw-127) to the output in one fma, blocks in
 * order.  Why every step is exact, so the doubles are the serial sums':
 * deq a = code 2^(sa-127) and fp8 w are e4m3fn values (4 significant
 * bits at most; subnormals m 2^-9 have 3) and s in [0, 254] (0xFF is
 * refused), so each product has at most 8 significant bits and lies in
 * [2^-9 2^-127 2^-9, 448^2 2^127] = [2^-145, 2^144.6], inside the normal
 * doubles: fma(x, w, p) and p + x w round the same exact value once.  A
 * block's partial sums are multiples of 2^(sa-127-18) below 2^(sa-127+23)
 * (41 bits): exact, in any order.  The block sum times 2^(sw-127) is exact
 * too ([2^-272, 2^272]), so fma(P, 2^(sw-127), acc) rounds acc + P_kb
 * 2^(sa+sw-254) once, as the serial "acc += P_kb * sc" does.  Signed
 * zeros: the sums start at +0 and x + (-x) is +0, so no sum is -0, and
 * +0 plus a -0 product is +0 either way.  tests/test_wo_a_bmm.c runs every
 * level against the serial sums (extreme scales, subnormals, -0). */
#define BMM_FMA __attribute__((target("avx2,fma")))
#define BMM_512 __attribute__((target("avx512f,avx2,fma")))
#define BMM_UNROLL _Pragma("GCC unroll 16")

/* s[r][t] (4 rows, 8 tokens) += the kc/32 block sums: row r's codes w[r]
 * and scale bytes ws[r] from the chunk's first lane. */
BMM_FMA static void bmm_kernel_fma(const double *restrict at, int64_t ldt, int64_t kc, const uint8_t *const *w,
                                   const uint8_t *const *ws, const double *restrict lut, const double *restrict pow2,
                                   double *restrict s, int64_t lds)
{
    const uint8_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    for (int64_t k0 = 0; k0 < kc; k0 += 32) {
        __m256d p00 = _mm256_setzero_pd(), p01 = p00, p10 = p00, p11 = p00;
        __m256d p20 = p00, p21 = p00, p30 = p00, p31 = p00;
        for (int64_t k = k0; k < k0 + 32; k++) {
            const __m256d a0 = _mm256_loadu_pd(at + k * ldt), a1 = _mm256_loadu_pd(at + k * ldt + 4);
            const __m256d x0 = _mm256_broadcast_sd(lut + w0[k]), x1 = _mm256_broadcast_sd(lut + w1[k]);
            const __m256d x2 = _mm256_broadcast_sd(lut + w2[k]), x3 = _mm256_broadcast_sd(lut + w3[k]);
            p00 = _mm256_fmadd_pd(a0, x0, p00), p01 = _mm256_fmadd_pd(a1, x0, p01);
            p10 = _mm256_fmadd_pd(a0, x1, p10), p11 = _mm256_fmadd_pd(a1, x1, p11);
            p20 = _mm256_fmadd_pd(a0, x2, p20), p21 = _mm256_fmadd_pd(a1, x2, p21);
            p30 = _mm256_fmadd_pd(a0, x3, p30), p31 = _mm256_fmadd_pd(a1, x3, p31);
        }
        const __m256d p[8] = {p00, p01, p10, p11, p20, p21, p30, p31};
        BMM_UNROLL for (int i = 0; i < 8; i++) {
            double *o = s + (i / 2) * lds + (i % 2) * 4;
            const __m256d sc = _mm256_broadcast_sd(pow2 + ws[i / 2][k0 / 32]);
            _mm256_storeu_pd(o, _mm256_fmadd_pd(p[i], sc, _mm256_loadu_pd(o)));
        }
    }
}

/* The AVX-512 tile: 8 rows x 8 nt tokens (nt vectors of 8, nt 1 or 2),
 * 8 nt accumulators; fully unrolled, so that they live in registers. */
static inline __attribute__((target("avx512f,avx2,fma"), always_inline)) void
bmm_tile_512(const double *restrict at, int64_t ldt, int64_t kc, const uint8_t *const *w, const uint8_t *const *ws,
             const double *restrict lut, const double *restrict pow2, double *restrict s, int64_t lds, const int nt)
{
    const uint8_t *wr[8];
    BMM_UNROLL for (int r = 0; r < 8; r++)
        wr[r] = w[r];
    for (int64_t k0 = 0; k0 < kc; k0 += 32) {
        __m512d p[8][2];
        BMM_UNROLL for (int r = 0; r < 8; r++)
            BMM_UNROLL for (int v = 0; v < nt; v++)
                p[r][v] = _mm512_setzero_pd();
        for (int64_t k = k0; k < k0 + 32; k++) {
            __m512d x[2];
            BMM_UNROLL for (int v = 0; v < nt; v++)
                x[v] = _mm512_loadu_pd(at + k * ldt + 8 * v);
            BMM_UNROLL for (int r = 0; r < 8; r++) {
                const __m512d wv = _mm512_set1_pd(lut[wr[r][k]]);
                BMM_UNROLL for (int v = 0; v < nt; v++)
                    p[r][v] = _mm512_fmadd_pd(x[v], wv, p[r][v]);
            }
        }
        BMM_UNROLL for (int r = 0; r < 8; r++) {
            const __m512d sc = _mm512_set1_pd(pow2[ws[r][k0 / 32]]);
            BMM_UNROLL for (int v = 0; v < nt; v++) {
                double *o = s + r * lds + 8 * v;
                _mm512_storeu_pd(o, _mm512_fmadd_pd(p[r][v], sc, _mm512_loadu_pd(o)));
            }
        }
    }
}

BMM_512 static void bmm_kernel_512x16(const double *restrict at, int64_t ldt, int64_t kc, const uint8_t *const *w,
                                      const uint8_t *const *ws, const double *restrict lut,
                                      const double *restrict pow2, double *restrict s, int64_t lds)
{
    bmm_tile_512(at, ldt, kc, w, ws, lut, pow2, s, lds, 2);
}

BMM_512 static void bmm_kernel_512x8(const double *restrict at, int64_t ldt, int64_t kc, const uint8_t *const *w,
                                     const uint8_t *const *ws, const double *restrict lut,
                                     const double *restrict pow2, double *restrict s, int64_t lds)
{
    bmm_tile_512(at, ldt, kc, w, ws, lut, pow2, s, lds, 1);
}

/* One chunk [c0, c0 + kc) of the item's rows [r0, r0 + nr) with a fused
 * kernel into s [BMM_RB, tp]: at is the chunk of deq a (or |deq a|), lut
 * the codes' values (or magnitudes).  The tile's rows past nr repeat row
 * nr - 1 (their sums are never read). */
static void bmm_chunk_fused(const bmm_job *j, const double *at, const double *lut, int64_t g, int64_t c0,
                            int64_t kc, int64_t r0, int nr, double *s)
{
    const dsv4_wo_a_bmm_args *a = j->a;
    const int64_t R = a->R, K = a->K, KB = K / 32, tp = j->tp;
    const uint8_t *w[BMM_RB], *ws[BMM_RB];
    for (int r = 0; r < BMM_RB; r++) {
        const int64_t row = g * R + r0 + (r < nr ? r : nr - 1);
        w[r] = a->w + row * K + c0;
        ws[r] = a->w_scale + row * KB + c0 / 32;
    }
    if (j->level >= DSV4_SIMD_AVX512) {
        int64_t t0 = 0;
        for (; t0 + 16 <= tp; t0 += 16)
            for (int r = 0; r < nr; r += 8)
                bmm_kernel_512x16(at + t0, tp, kc, w + r, ws + r, lut, j->pow2, s + r * tp + t0, tp);
        for (; t0 < tp; t0 += 8)
            for (int r = 0; r < nr; r += 8)
                bmm_kernel_512x8(at + t0, tp, kc, w + r, ws + r, lut, j->pow2, s + r * tp + t0, tp);
    } else {
        for (int64_t t0 = 0; t0 < tp; t0 += BMM_TB)
            for (int r = 0; r < nr; r += 4)
                bmm_kernel_fma(at + t0, tp, kc, w + r, ws + r, lut, j->pow2, s + r * tp + t0, tp);
    }
}
#endif

/* Item i: columns [16 b, 16 b + 16) of group g (i = g nrb + b, nrb the
 * column blocks of a group: items never cross groups), every token, K in chunks:
 * the chunk of the 16 rows decoded once, then each 4 rows against every
 * block of 8 tokens (the fused levels read the codes in the kernel). */
static int bmm_items(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)st;
    const bmm_job *j = ctx;
    const dsv4_wo_a_bmm_args *a = j->a;
    const int64_t T = a->T, G = a->G, R = a->R, K = a->K, KB = K / 32, tp = j->tp, nrb = (R + BMM_RB - 1) / BMM_RB;
    double *wd = j->scratch + (size_t)worker * bmm_scratch(tp), *wa = wd + BMM_RB * BMM_KC;
    double *acc = wa + BMM_RB * BMM_KC, *acc_abs = acc + BMM_RB * tp;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t g = i / nrb, r0 = i % nrb * BMM_RB;
        const int nr = R - r0 < BMM_RB ? (int)(R - r0) : BMM_RB;
        const double *at_g = j->at + g * K * tp, *at_abs = j->gauge ? j->at + (G + g) * K * tp : NULL;
        memset(acc, 0, (size_t)(2 * BMM_RB * tp) * sizeof *acc);
        for (int64_t c0 = 0; c0 < K; c0 += BMM_KC) {
            const int64_t kc = K - c0 < BMM_KC ? K - c0 : BMM_KC;
#if DSV4_HAVE_AVX2_PATHS
            if (j->level >= DSV4_SIMD_AVX2_FMA) {
                bmm_chunk_fused(j, at_g + c0 * tp, j->lut, g, c0, kc, r0, nr, acc);
                if (j->gauge)
                    bmm_chunk_fused(j, at_abs + c0 * tp, j->lut_abs, g, c0, kc, r0, nr, acc_abs);
                continue;
            }
#endif
            for (int r = 0; r < BMM_RB; r++) {
                double *d = wd + r * BMM_KC, *da = wa + r * BMM_KC;
                if (r >= nr) {
                    memset(d, 0, (size_t)kc * sizeof *d);
                    memset(da, 0, (size_t)kc * sizeof *da);
                    continue;
                }
                const uint8_t *wr = a->w + (g * R + r0 + r) * K + c0, *sr = a->w_scale + (g * R + r0 + r) * KB + c0 / 32;
                bmm_decode_row(wr, sr, j->pow2, j->lut, kc, d);
                if (j->gauge)
                    for (int64_t k = 0; k < kc; k++)
                        da[k] = fabs(d[k]);
            }
            for (int64_t t0 = 0; t0 < tp; t0 += BMM_TB)
                for (int r = 0; r < nr; r += 4) {
                    const double *at = at_g + c0 * tp + t0, *w = wd + r * BMM_KC, *v = wa + r * BMM_KC;
                    bmm_kernel(at, tp, kc, w, w + BMM_KC, w + 2 * BMM_KC, w + 3 * BMM_KC, acc + r * tp + t0, tp);
                    if (j->gauge) /* sum |deq a||deq w| the same way */
                        bmm_kernel(at_abs + c0 * tp + t0, tp, kc, v, v + BMM_KC, v + 2 * BMM_KC, v + 3 * BMM_KC,
                                   acc_abs + r * tp + t0, tp);
                }
        }
        for (int64_t t = 0; t < T; t++)
            for (int r = 0; r < nr; r++) {
                j->out[(t * G + g) * R + r0 + r] = acc[r * tp + t];
                if (j->gauge)
                    j->gauge[(t * G + g) * R + r0 + r] = acc_abs[r * tp + t];
            }
    }
    return DSV4_OK;
}

/* The first e4m3fn NaN code (0x7F or 0xFF) in x[0, n), else -1.  Eight
 * bytes at a time: with the sign bits cleared (bytes <= 0x7F), adding 1 to
 * each byte sets its top bit only for 0x7F, and never carries into the
 * next byte. */
#if DSV4_HAVE_AVX2_PATHS
/* The whole vectors of 64 bytes before the first one holding a NaN code:
 * the byte scan below then starts there. */
__attribute__((target("avx2"))) static int64_t clean_prefix_avx2(const uint8_t *x, int64_t n)
{
    const __m256i low7 = _mm256_set1_epi8(0x7F);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + i + 32));
        const __m256i nan = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v0, low7), low7),
                                            _mm256_cmpeq_epi8(_mm256_and_si256(v1, low7), low7));
        if (!_mm256_testz_si256(nan, nan))
            break;
    }
    return i;
}
#endif

static int64_t first_e4m3_nan(const uint8_t *x, int64_t n)
{
    const uint64_t ones = 0x0101010101010101ull, low7 = 0x7F7F7F7F7F7F7F7Full;
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2())
        i = clean_prefix_avx2(x, n);
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, x + i, sizeof w);
        if (((w & low7) + ones) & ~low7)
            break;
    }
    for (; i < n; i++)
        if ((x[i] & 0x7F) == 0x7F)
            return i;
    return -1;
}

/* DSV4_EINPUT naming the first NaN code (a, then w) or NaN scale byte. */
static int bmm_check_codes(const dsv4_wo_a_bmm_args *a, dsv4_status *st)
{
    const int64_t T = a->T, G = a->G, R = a->R, K = a->K, KB = K / 32;
    int64_t i = first_e4m3_nan(a->a, T * G * K);
    if (i >= 0)
        return dsv4_fail(st, DSV4_EINPUT, "a[%" PRId64 ", %" PRId64 "] is a NaN code", i / (G * K), i % (G * K));
    if ((i = first_e4m3_nan(a->w, G * R * K)) >= 0)
        return dsv4_fail(st, DSV4_EINPUT, "wo_a[%" PRId64 ", %" PRId64 "] is a NaN code", i / K, i % K);
    for (i = 0; i < T * G * KB; i++)
        if (a->a_scale[i] == 0xFF)
            return dsv4_fail(st, DSV4_EINPUT, "a_scale flat element %" PRId64 " is the e8m0 NaN 0xFF", i);
    for (i = 0; i < G * R * KB; i++)
        if (a->w_scale[i] == 0xFF)
            return dsv4_fail(st, DSV4_EINPUT, "wo_a scale flat element %" PRId64 " is the e8m0 NaN 0xFF", i);
    return DSV4_OK;
}

int dsv4_ref_mxfp8_wo_a_bmm(const dsv4_wo_a_bmm_args *a, double *out, double *gauge, dsv4_status *st)
{
    const int64_t T = a->T, G = a->G, R = a->R, K = a->K;
    if (T < 0 || G < 1 || R < 0 || K < 0 || K % 32)
        return dsv4_fail(st, DSV4_EINPUT, "wo_a bmm: K = %" PRId64 " must be a multiple of 32 (MXFP8 blocks)", K);
    /* The fused kernels read the weight codes through a table that holds
     * the NaNs, so a NaN code or scale (in a or w) makes NaN outputs: its
     * row's or token's, for every token or row (fma(x, NaN, p) is NaN even
     * for x = 0); finite inputs give no NaN (sums below 2^272 K).  Those
     * levels scan the codes (a pass over all of w) only when an output is
     * NaN, for the message.  The portable decode builds no NaN from a NaN
     * code, so it scans first, as does an empty output. */
    const int level = dsv4_simd_level(), scan_after = level >= DSV4_SIMD_AVX2_FMA && T > 0 && R > 0;
    int rc = scan_after ? DSV4_OK : bmm_check_codes(a, st);
    if (rc || T == 0 || R == 0)
        return rc;
    double lut[256], lut_abs[256], pow2[256];
    for (int b = 0; b < 256; b++) {
        lut[b] = dsv4_fp8_to_f32((uint8_t)b, DSV4_FP8_E4M3FN);
        pow2[b] = dsv4_e8m0_to_f64((uint8_t)b), lut_abs[b] = fabs(lut[b]);
    }
    const int64_t nrb = (R + BMM_RB - 1) / BMM_RB, tp = (T + BMM_TB - 1) / BMM_TB * BMM_TB;
    const int nw = dsv4_parallel_workers(G * nrb, 1);
    double *at = malloc((size_t)((gauge ? 2 : 1) * G * tp * K + 1) * sizeof *at);
    double *scratch = malloc((size_t)nw * bmm_scratch(tp) * sizeof *scratch);
    rc = at && scratch ? DSV4_OK : dsv4_fail(st, DSV4_ERUNTIME, "wo_a bmm: out of memory");
    if (!rc) { /* every group at once; items never cross groups (docs/semantics/gemm.md A10.3) */
        bmm_job j = {a, lut, lut_abs, pow2, tp, level, at, out, gauge, scratch};
        if (!(rc = dsv4_parallel_for(G * (K / 32), 16, 0, bmm_decode_a, &j, st)))
            rc = dsv4_parallel_for(G * nrb, 1, 0, bmm_items, &j, st);
    }
    free(at), free(scratch);
    if (!rc && scan_after) {
        int nan_out = 0;
        for (int64_t e = 0; e < T * G * R; e++)
            nan_out |= isnan(out[e]);
        if (nan_out && !(rc = bmm_check_codes(a, st)))
            rc = dsv4_fail(st, DSV4_ERUNTIME, "wo_a bmm: a NaN output from codes and scales without NaN");
    }
    return rc;
}
