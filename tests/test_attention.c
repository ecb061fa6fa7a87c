/* test_attention.c - sparse attention with sink, the RoPE helpers and the
 * epilogue, checked against hand-derived answers and against a second,
 * naive formulation written here (a per-(token, head) loop in long double,
 * no BLAS, no gathering); plus the bound and the sink hints. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include "../compare/attn_hints.h"
#include "../harness/golden.h"
#include "../harness/op.h"
#include "../harness/rng.h"
#include "../ops/attention/attention.h"
#include "../ref/attention.h"
#include "../ref/numerics.h"
#include "testutil.h"

#define D 512

static uint16_t bf(double v) { return dsv4_bf16_from_f32((float)v); }

/* A dense one-segment problem over bf16 rows. */
typedef struct prob {
    int64_t T, H, rows, P;
    uint16_t *q, *kv;
    int32_t *idx, *lens;
    float *sink;
    dsv4_attn_args a;
} prob;

static void prob_init(prob *p, int64_t T, int64_t H, int64_t rows, int64_t P)
{
    memset(p, 0, sizeof *p);
    p->T = T, p->H = H, p->rows = rows, p->P = P;
    p->q = calloc((size_t)(T * H * D), 2);
    p->kv = calloc((size_t)(rows * D), 2);
    p->idx = malloc((size_t)(T * P) * 4);
    p->lens = calloc((size_t)T, 4);
    p->sink = malloc((size_t)H * 4);
    for (int64_t i = 0; i < T * P; i++)
        p->idx[i] = -1;
    for (int64_t h = 0; h < H; h++)
        p->sink[h] = -INFINITY;
    p->a.q = p->q;
    p->a.T = T;
    p->a.H = H;
    p->a.attn_sink = p->sink;
    p->a.scale = 1.0 / sqrt(512.0);
    p->a.nseg = 1;
    p->a.seg[0] = (dsv4_attn_segment){"kv", rows, p->kv, NULL, NULL, 0, p->idx, NULL, p->lens, P, 0, NULL};
}

static void prob_free(prob *p)
{
    free(p->q), free(p->kv), free(p->idx), free(p->lens), free(p->sink);
}

static double *run(prob *p, dsv4_attn_mode mode)
{
    double *out = malloc((size_t)(p->T * p->H * D + 1) * sizeof(double));
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_attn_check(&p->a, &st), 0);
    ck_assert_msg(dsv4_ref_sparse_attn(&p->a, mode, out, NULL, &st) == 0, "%s", st.msg);
    return out;
}

/* One valid key: the softmax weight is 1, so out = V exactly (both modes). */
START_TEST(test_one_key_is_v)
{
    prob p;
    prob_init(&p, 2, 3, 5, 4);
    dsv4_rng r;
    dsv4_rng_init(&r, 7, "t");
    for (int64_t i = 0; i < p.rows * D; i++)
        p.kv[i] = bf(dsv4_rng_normal(&r));
    for (int64_t i = 0; i < p.T * p.H * D; i++)
        p.q[i] = bf(dsv4_rng_normal(&r));
    /* token 0: [-1, 3, 99(out of range), -7], len 4; token 1: [2], len 1 */
    int32_t r0[4] = {-1, 3, 99, -7};
    memcpy(p.idx, r0, sizeof r0);
    p.idx[4] = 2;
    p.lens[0] = 4, p.lens[1] = 1;
    for (int mode = 0; mode < 2; mode++) {
        double *o = run(&p, (dsv4_attn_mode)mode);
        for (int64_t h = 0; h < p.H; h++)
            for (int d = 0; d < D; d++) {
                ck_assert(o[(0 * p.H + h) * D + d] == dsv4_bf16_to_f32(p.kv[3 * D + d]));
                ck_assert(o[(1 * p.H + h) * D + d] == dsv4_bf16_to_f32(p.kv[2 * D + d]));
            }
        free(o);
    }
    prob_free(&p);
}
END_TEST

/* Two equal keys (the same row twice, or two identical rows): out = V; and
 * with q = 0 and sink 0 the sink takes a third: out = (2/3) V... checked
 * with one key instead, where it halves the weight: out = V / 2 exactly. */
START_TEST(test_two_equal_keys_and_halving_sink)
{
    prob p;
    prob_init(&p, 3, 2, 4, 2);
    for (int d = 0; d < D; d++) {
        p.kv[0 * D + d] = p.kv[1 * D + d] = bf((d % 17) - 8); /* rows 0, 1 equal */
        p.kv[2 * D + d] = bf((d % 5) * 2);
    }
    for (int64_t i = 0; i < p.T * p.H * D; i++)
        p.q[i] = bf(((i * 7) % 11) / 8.0 - 0.5);
    p.idx[0] = 0, p.idx[1] = 1, p.lens[0] = 2; /* two equal rows */
    p.idx[2] = 2, p.idx[3] = 2, p.lens[1] = 2; /* one row twice */
    p.idx[4] = 2, p.lens[2] = 1;               /* one key, for the sink */
    double *o = run(&p, DSV4_ATTN_IDEAL);
    for (int64_t h = 0; h < 2; h++)
        for (int d = 0; d < D; d++) {
            ck_assert(fabs(o[(0 * 2 + h) * D + d] - dsv4_bf16_to_f32(p.kv[d])) < 1e-12);
            ck_assert(fabs(o[(1 * 2 + h) * D + d] - dsv4_bf16_to_f32(p.kv[2 * D + d])) < 1e-12);
        }
    free(o);
    /* q = 0 for token 2, sink 0: weights e^0 / (e^0 + e^0) = 1/2. */
    memset(p.q + 2 * 2 * D, 0, 2 * D * 2);
    p.sink[0] = p.sink[1] = 0.0f;
    for (int mode = 0; mode < 2; mode++) {
        o = run(&p, (dsv4_attn_mode)mode);
        for (int64_t h = 0; h < 2; h++)
            for (int d = 0; d < D; d++)
                ck_assert(o[(2 * 2 + h) * D + d] == dsv4_bf16_to_f32(p.kv[2 * D + d]) / 2.0);
        free(o);
    }
    prob_free(&p);
}
END_TEST

/* Integer-valued inputs with an exact answer: q = 0 makes every score 0, so
 * out = (sum of the valid rows, duplicates twice) / n; with sink ln-free
 * choices: sink -inf and n = 4 (a power of two) the mean is exact.  A second
 * token puts one huge score on one key: q . K = 2^10 * 512^0.5 ... the other
 * weights are e^-1024 = 0 in double: out = that row exactly. */
START_TEST(test_integer_exact)
{
    prob p;
    prob_init(&p, 2, 1, 6, 6);
    for (int64_t r = 0; r < 6; r++)
        for (int d = 0; d < D; d++)
            p.kv[r * D + d] = bf((double)((r * 31 + d * 7) % 23) - 11);
    int32_t r0[6] = {0, 0, 4, -1, 5, 17}; /* valid: 0, 0, 4, 5 */
    memcpy(p.idx, r0, sizeof r0);
    p.lens[0] = 6;
    double *o = run(&p, DSV4_ATTN_IDEAL);
    for (int d = 0; d < D; d++) {
        double want = (2.0 * dsv4_bf16_to_f32(p.kv[d]) + dsv4_bf16_to_f32(p.kv[4 * D + d]) +
                       dsv4_bf16_to_f32(p.kv[5 * D + d])) / 4.0;
        ck_assert_msg(o[d] == want, "d %d: %g vs %g", d, o[d], want);
    }
    free(o);
    /* token 1: keys 1 and 2; q = 32 on lane 0 only; K[1][0] = 64, K[2][0] = -64
     * : s1 - s2 = 181, e^-181 ~ 1e-79, below 2^-53 relative. */
    for (int64_t i = 0; i < D; i++)
        p.q[D + i] = 0;
    p.q[D] = bf(32);
    p.kv[1 * D] = bf(64);
    p.kv[2 * D] = bf(-64);
    /* s1 - s2 = 2 * 32 * 64 / sqrt(512) = 181 */
    p.idx[6] = 1, p.idx[7] = 2, p.lens[1] = 2;
    o = run(&p, DSV4_ATTN_IDEAL);
    for (int d = 0; d < D; d++) /* exact where V1 != 0; e^-181 V2 where V1 = 0 */
        ck_assert(fabs(o[D + d] - dsv4_bf16_to_f32(p.kv[1 * D + d])) <= 1e-70);
    free(o);
    prob_free(&p);
}
END_TEST

/* No valid index (length 0, all -1, all out of range): exactly 0 for any
 * sink; NaN rows that nothing references do not leak in. */
START_TEST(test_empty_rows_zero_and_nan_unused)
{
    prob p;
    prob_init(&p, 3, 2, 4, 3);
    for (int64_t i = 0; i < p.rows * D; i++)
        p.kv[i] = 0x7FC0; /* NaN everywhere ... */
    for (int d = 0; d < D; d++)
        p.kv[1 * D + d] = bf(d % 3); /* ... except row 1 */
    for (int64_t i = 0; i < p.T * p.H * D; i++)
        p.q[i] = bf(0.25);
    p.sink[0] = 0.0f, p.sink[1] = 30.0f;
    p.idx[0] = 1, p.lens[0] = 0;                           /* length 0 */
    p.lens[1] = 3;                                         /* all -1 */
    p.idx[6] = 4, p.idx[7] = -5, p.idx[8] = 1, p.lens[2] = 2; /* oob, -5; col 2 beyond len */
    for (int mode = 0; mode < 2; mode++) {
        double *o = run(&p, (dsv4_attn_mode)mode);
        for (int64_t i = 0; i < p.T * p.H * D; i++)
            ck_assert_msg(o[i] == 0.0 && !signbit(o[i]), "element %ld = %g", (long)i, o[i]);
        free(o);
    }
    /* A referenced NaN row is bad input in prefill (no scrubbing). */
    p.idx[0] = 0, p.lens[0] = 1;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_attn_check(&p.a, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "kv row 0"));
    /* With scrubbing (decode), the NaN row reads as zeros: score 0, V 0. */
    p.a.seg[0].scrub_nan = 1;
    p.sink[0] = p.sink[1] = -INFINITY;
    double *o = run(&p, DSV4_ATTN_IDEAL);
    for (int64_t i = 0; i < p.H * D; i++)
        ck_assert(o[i] == 0.0);
    free(o);
    prob_free(&p);
}
END_TEST

/* The naive formulation: per (t, h), long double, no BLAS. */
static void naive(const prob *p, long double *out)
{
    for (int64_t t = 0; t < p->T; t++)
        for (int64_t h = 0; h < p->H; h++) {
            const uint16_t *q = p->q + (t * p->H + h) * D;
            int64_t n = p->lens[t] < 0 ? 0 : (p->lens[t] > p->P ? p->P : p->lens[t]);
            long double s[64], m = p->sink[h], l = 0;
            int64_t rows[64], k = 0;
            for (int64_t j = 0; j < n; j++) {
                int32_t v = p->idx[t * p->P + j];
                if (v < 0 || v >= p->rows)
                    continue;
                long double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += (long double)dsv4_bf16_to_f32(q[d]) * dsv4_bf16_to_f32(p->kv[v * D + d]);
                s[k] = dot * p->a.scale;
                rows[k++] = v;
                m = s[k - 1] > m ? s[k - 1] : m;
            }
            for (int d = 0; d < D; d++)
                out[(t * p->H + h) * D + d] = 0;
            if (!k)
                continue;
            for (int64_t i = 0; i < k; i++)
                l += expl(s[i] - m);
            l += expl((long double)p->sink[h] - m);
            for (int64_t i = 0; i < k; i++)
                for (int d = 0; d < D; d++)
                    out[(t * p->H + h) * D + d] += expl(s[i] - m) / l * dsv4_bf16_to_f32(p->kv[rows[i] * D + d]);
        }
}

static void random_prob(prob *p, uint64_t seed, int64_t T, int64_t H, int64_t rows, int64_t P)
{
    prob_init(p, T, H, rows, P);
    dsv4_rng r;
    dsv4_rng_init(&r, seed, "p");
    for (int64_t i = 0; i < rows * D; i++)
        p->kv[i] = bf(dsv4_rng_normal(&r) * (1 + (i / 64) % 3));
    for (int64_t i = 0; i < T * H * D; i++)
        p->q[i] = bf(dsv4_rng_normal(&r));
    for (int64_t t = 0; t < T; t++) {
        p->lens[t] = (int32_t)dsv4_rng_range(&r, -1, P + 3);
        for (int64_t j = 0; j < P; j++)
            p->idx[t * P + j] = (int32_t)dsv4_rng_range(&r, -3, rows + 3);
    }
    for (int64_t h = 0; h < H; h++)
        p->sink[h] = h % 3 == 0 ? -INFINITY : (float)(dsv4_rng_normal(&r) * 4);
}

/* random_prob with every row's length the full P: the same draws, so the
 * same keys, but no row short or empty. */
static void random_full_prob(prob *p, uint64_t seed, int64_t T, int64_t H, int64_t rows, int64_t P)
{
    random_prob(p, seed, T, H, rows, P);
    for (int64_t t = 0; t < T; t++)
        p->lens[t] = (int32_t)P;
}

/* Sweep against the naive loop; then faithful vs ideal within the
 * documented bound (and the bound not vacuous: well under 1% of A). */
START_TEST(test_sweep_naive_and_faithful_bound)
{
    for (uint64_t seed = 1; seed <= 12; seed++) {
        prob p;
        random_prob(&p, seed, 5, 4, 40, 48);
        const int64_t n = p.T * p.H * D;
        long double *want = malloc((size_t)n * sizeof *want);
        naive(&p, want);
        double *ideal = malloc((size_t)n * sizeof(double)), *absd = malloc((size_t)n * sizeof(double));
        double *top = malloc((size_t)n * sizeof(double));
        double mag[20], sw[20];
        int64_t nv[5];
        dsv4_attn_diag dg = {absd, sw, nv, mag, top};
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_ref_sparse_attn(&p.a, DSV4_ATTN_IDEAL, ideal, &dg, &st), 0);
        double *faith = run(&p, DSV4_ATTN_FAITHFUL);
        for (int64_t i = 0; i < n; i++) {
            int64_t t = i / (p.H * D), h = i / D % p.H;
            ck_assert_msg(fabsl(ideal[i] - want[i]) <= 1e-12L * (1 + fabsl(want[i])), "seed %lu el %ld",
                          (unsigned long)seed, (long)i);
            double e = ideal[i], k = dsv4_round_bf16((float)faith[i]);
            double bound = dsv4_attn_elem_bound(e, absd[i], top[i], nv[t], mag[t * p.H + h]);
            ck_assert_msg(fabs(k - e) <= bound, "seed %lu el %ld: |%g - %g| > %g", (unsigned long)seed, (long)i,
                          k, e, bound);
            /* not vacuous: within 2 ulps and 2% of A (tests/soundness.h measures it closer) */
            ck_assert(bound <= 2 * dsv4_ulp(DSV4_BF16, fabs(e) + 0.02 * absd[i]) + 0.02 * absd[i]);
            ck_assert(top[i] <= absd[i] * (1 + 1e-12));
            if (nv[t] == 0)
                ck_assert(faith[i] == 0 && e == 0);
        }
        free(want), free(ideal), free(absd), free(top), free(faith);
        prob_free(&p);
    }
}
END_TEST

/* Ragged two-segment form = the same keys as one dense row. */
START_TEST(test_ragged_two_segments_equal_dense)
{
    prob p;
    random_full_prob(&p, 99, 3, 2, 30, 10);
    double *dense = run(&p, DSV4_ATTN_IDEAL);
    /* main = columns [0, 4), extra = [4, 10), as CSR */
    int32_t mi[12], ei[18], mp[4] = {0}, ep[4] = {0};
    for (int64_t t = 0; t < 3; t++) {
        for (int j = 0; j < 4; j++)
            mi[t * 4 + j] = p.idx[t * 10 + j];
        for (int j = 0; j < 6; j++)
            ei[t * 6 + j] = p.idx[t * 10 + 4 + j];
        mp[t + 1] = (int32_t)(4 * (t + 1));
        ep[t + 1] = (int32_t)(6 * (t + 1));
    }
    dsv4_attn_args a = p.a;
    a.nseg = 2;
    a.seg[0] = (dsv4_attn_segment){"main", 30, p.kv, NULL, NULL, 1, mi, mp, NULL, 0, 12, NULL};
    a.seg[1] = (dsv4_attn_segment){"extra", 30, p.kv, NULL, NULL, 1, ei, ep, NULL, 0, 18, NULL};
    double *rag = malloc(3 * 2 * D * sizeof(double));
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_attn_check(&a, &st), 0);
    ck_assert_int_eq(dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, rag, NULL, &st), 0);
    for (int64_t i = 0; i < 3 * 2 * D; i++)
        ck_assert(fabs(rag[i] - dense[i]) <= 1e-12 * (1 + fabs(dense[i])));
    mp[2] = 13; /* beyond the indices: bad input naming indptr */
    ck_assert_int_eq(dsv4_attn_check(&a, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "main indptr[2]"));
    free(dense), free(rag);
    prob_free(&p);
}
END_TEST

/* RoPE: hand values (a quarter turn), forward/inverse round trip, and the
 * bf16 rows helper leaves NoPE lanes alone. */
START_TEST(test_rope)
{
    float cs[4] = {0.0f, 0.5f, 1.0f, 0.75f}; /* rope_dim 4: cos {0, .5} | sin {1, .75} */
    float x[4] = {3, 5, 2, -4};
    dsv4_rope_gptj_f32(x, cs, 4, DSV4_ROPE_FORWARD);
    /* pair 0: c 0, s 1: (3*0 - 5*1, 3*1 + 5*0) = (-5, 3)
     * pair 1: c .5, s .75: (2*.5 + 4*.75, 2*.75 - 4*.5) = (4, -0.5) */
    ck_assert(x[0] == -5 && x[1] == 3 && x[2] == 4 && x[3] == -0.5f);
    dsv4_rope_gptj_f32(x, cs, 4, DSV4_ROPE_INVERSE);
    /* inverse pair 1: (4*.5 + -.5*.75, -.5*.5 - 4*.75) = (1.625, -3.25): not
     * a round trip since c^2 + s^2 != 1 here, as the formulas say. */
    ck_assert(x[0] == 3 && x[1] == 5 && x[2] == 1.625f && x[3] == -3.25f);
    double y[4] = {1, 2, 3, 4};
    dsv4_rope_gptj_f64(y, cs, 4, DSV4_ROPE_INVERSE);
    ck_assert(y[0] == 2 && y[1] == -1 && y[2] == 1.5 + 3 && y[3] == 2 - 2.25);
    /* unit-circle round trip in double */
    float cs2[64];
    for (int k = 0; k < 32; k++)
        cs2[k] = (float)cos(0.1 * k + 0.3), cs2[32 + k] = (float)sin(0.1 * k + 0.3);
    double z[64], z0[64];
    for (int i = 0; i < 64; i++)
        z[i] = z0[i] = i - 31.5;
    dsv4_rope_gptj_f64(z, cs2, 64, DSV4_ROPE_FORWARD);
    dsv4_rope_gptj_f64(z, cs2, 64, DSV4_ROPE_INVERSE);
    for (int i = 0; i < 64; i++)
        ck_assert(fabs(z[i] - z0[i]) < 1e-5); /* fp32 c^2 + s^2 = 1 +- 2^-23 */
    uint16_t row[2 * D];
    for (int i = 0; i < 2 * D; i++)
        row[i] = bf(i % 9 - 4);
    uint16_t before[2 * D];
    memcpy(before, row, sizeof row);
    dsv4_rope_rows_bf16(row, 2, D, cs2, 64, DSV4_ROPE_INVERSE);
    for (int r = 0; r < 2; r++) {
        ck_assert(memcmp(row + r * D, before + r * D, 448 * 2) == 0);
        for (int k = 0; k < 32; k++) {
            float a = dsv4_bf16_to_f32(before[r * D + 448 + 2 * k]), b = dsv4_bf16_to_f32(before[r * D + 449 + 2 * k]);
            ck_assert(row[r * D + 448 + 2 * k] == dsv4_bf16_from_f32(a * cs2[k] + b * cs2[32 + k]));
            ck_assert(row[r * D + 449 + 2 * k] == dsv4_bf16_from_f32(b * cs2[k] - a * cs2[32 + k]));
        }
    }
    dsv4_status st = {0};
    const float *rp;
    ck_assert_int_eq(dsv4_rope_row(cs2, 1, 64, 1, "positions[3]", &rp, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "positions[3] = 1"));
}
END_TEST

/* rocm_inverse_rope_rows_: rows < rotated untouched; bad position named. */
START_TEST(test_inverse_rope_rows_rotated)
{
    float cs[2 * 64];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 32; k++)
            cs[p * 64 + k] = (float)cos(p + k), cs[p * 64 + 32 + k] = (float)sin(p + k);
    uint16_t o[3 * 2 * D], o0[3 * 2 * D];
    for (int i = 0; i < 3 * 2 * D; i++)
        o[i] = o0[i] = bf((i % 13) * 0.25 - 1);
    int64_t pos[3] = {1, 0, 1};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_inverse_rope_rows(o, 3, 2, pos, cs, 2, 64, 1, &st), 0);
    ck_assert(memcmp(o, o0, 2 * D * 2) == 0);
    ck_assert(memcmp(o + 2 * D, o0 + 2 * D, 448 * 2) == 0);
    ck_assert(memcmp(o + 2 * D + 448, o0 + 2 * D + 448, 64 * 2) != 0);
    pos[2] = 2;
    ck_assert_int_eq(dsv4_ref_inverse_rope_rows(o, 3, 2, pos, cs, 2, 64, 1, &st), DSV4_EINPUT);
    ck_assert_ptr_nonnull(strstr(st.msg, "positions[2] = 2"));
}
END_TEST

/* The sink hints: dropping the sink (= sink -inf) and doubling it (= sink +
 * ln 2) are recognised row by row; a zero row that is not zero too. */
START_TEST(test_sink_hints)
{
    prob p;
    random_full_prob(&p, 5, 4, 3, 30, 12);
    for (int64_t h = 0; h < 3; h++)
        p.sink[h] = 2.0f + (float)h;
    const int64_t n = p.T * p.H * D;
    double sw[12];
    int64_t nv[4];
    dsv4_attn_diag dg = {NULL, sw, nv, NULL, NULL};
    dsv4_status st = {0};
    int64_t shape[3] = {p.T, p.H, D};
    dsv4_tensor e, a;
    ck_assert_int_eq(dsv4_tensor_alloc(&e, "output", DSV4_F64, 3, shape, &st), 0);
    ck_assert_int_eq(dsv4_tensor_alloc(&a, "output", DSV4_F64, 3, shape, &st), 0);
    ck_assert_int_eq(dsv4_ref_sparse_attn(&p.a, DSV4_ATTN_IDEAL, e.data, &dg, &st), 0);
    dsv4_attn_rows rows = {p.T, p.H, D, sw, nv};
    const char *want[2] = {"ignored", "counted twice"};
    for (int mode = 0; mode < 2; mode++) {
        float keep[3];
        memcpy(keep, p.sink, sizeof keep);
        for (int64_t h = 0; h < 3; h++)
            p.sink[h] = mode == 0 ? -INFINITY : p.sink[h] + (float)log(2.0);
        ck_assert_int_eq(dsv4_ref_sparse_attn(&p.a, DSV4_ATTN_IDEAL, a.data, NULL, &st), 0);
        memcpy(p.sink, keep, sizeof keep);
        for (int64_t i = 0; i < n; i++) /* as a bf16 kernel would store it */
            ((double *)a.data)[i] = dsv4_round_bf16((float)((double *)a.data)[i]);
        dsv4_cmp_result res;
        memset(&res, 0, sizeof res);
        res.bad = 1;
        dsv4_attn_hint(&e, &a, &rows, &res);
        ck_assert_msg(strstr(res.hint, want[mode]) != NULL, "mode %d: %s", mode, res.hint);
    }
    /* one head scaled by 0.5 on every token: named, not a sink mistake */
    memcpy(a.data, e.data, e.nbytes);
    for (int64_t t = 0; t < p.T; t++)
        for (int d = 0; d < D; d++)
            ((double *)a.data)[(t * 3 + 1) * D + d] *= 0.5;
    dsv4_cmp_result res;
    memset(&res, 0, sizeof res);
    dsv4_attn_hint(&e, &a, &rows, &res);
    ck_assert_msg(strstr(res.hint, "only head 1") && strstr(res.hint, "x 0.5"), "%s", res.hint);
    /* a row with no valid key that is not zero */
    memcpy(a.data, e.data, e.nbytes);
    nv[2] = 0;
    for (int d = 0; d < D; d++)
        ((double *)e.data)[(2 * 3 + 0) * D + d] = 0;
    ((double *)a.data)[(2 * 3 + 0) * D + 5] = 1e-3;
    for (int h = 1; h < 3; h++)
        for (int d = 0; d < D; d++)
            ((double *)a.data)[(2 * 3 + h) * D + d] = ((double *)e.data)[(2 * 3 + h) * D + d] = 0;
    memset(&res, 0, sizeof res);
    dsv4_attn_hint(&e, &a, &rows, &res);
    ck_assert_msg(strstr(res.hint, "token 2, head 0") && strstr(res.hint, "not exactly 0"), "%s", res.hint);
    dsv4_tensor_free(&e);
    dsv4_tensor_free(&a);
    prob_free(&p);
}
END_TEST

/* ---- rocm_inverse_rope_mxfp8_rows (docs/semantics/attention.md A9.3) ---- */

/* Hand-derived bytes.  Position 0: cos 1, sin 0 (pairs unchanged); position
 * 1: cos 0, sin 1, so (a, b) -> (a*0 + b*1, b*0 - a*1) = (b, -a).
 * e4m3fn = s|eeee (bias 7)|mmm: 448 = 1.75*2^8 -> 0x7E, 1 -> 0x38, 2 -> 0x40,
 * 0.5 -> 0x30, 0.25 -> 0x28, 256 -> 0x78, 128 -> 0x70, 192 = 1.5*2^7 ->
 * 0x74, 64 -> 0x68, 384 = 1.5*2^8 -> 0x7C; sign bit 0x80.  Scale bytes
 * ceil(log2(amax/448)) + 127: amax 448 -> 127, 1 -> ceil(-8.81) + 127 = 119,
 * 3 -> ceil(-7.22) + 127 = 120, all zero -> clamp(-7) = 0. */
START_TEST(test_inverse_rope_mxfp8_hand)
{
    float cs[2 * 64];
    for (int k = 0; k < 32; k++)
        cs[k] = 1, cs[32 + k] = 0, cs[64 + k] = 0, cs[96 + k] = 1;
    uint16_t o[2 * D];
    memset(o, 0, sizeof o);
    for (int t = 0; t < 2; t++) {
        uint16_t *r = o + t * D;
        r[0] = bf(3.0);
        r[33] = 0x8000; /* -0 in a NoPE lane: kept (0x80) */
        for (int d = 448; d < 480; d++)
            r[d] = bf(0.25);
        r[448] = bf(448), r[449] = bf(1), r[450] = bf(-2), r[451] = bf(0.5);
        r[480] = bf(1), r[481] = bf(0.5), r[482] = bf(-0.75), r[483] = bf(0.25);
    }
    int64_t pos[2] = {0, 1};
    uint8_t data[2 * D], sc[2 * 16];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_inverse_rope_mxfp8_rows(o, 2, 1, pos, cs, 2, 64, DSV4_MX_FP8_CEIL, data, sc, &st), 0);
    static const uint8_t want_sc[16] = {120, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 119};
    ck_assert(memcmp(sc, want_sc, 16) == 0 && memcmp(sc + 16, want_sc, 16) == 0);
    for (int t = 0; t < 2; t++) {
        const uint8_t *r = data + t * D;
        ck_assert_uint_eq(r[0], 0x7C);
        ck_assert_uint_eq(r[33], 0x80);
        for (int d = 1; d < 448; d++)
            if (d != 33)
                ck_assert_uint_eq(r[d], 0x00);
    }
    static const uint8_t id[8] = {0x7E, 0x38, 0xC0, 0x30, 0x78, 0x70, 0xF4, 0x68};
    static const uint8_t sw[8] = {0x38, 0xFE, 0x30, 0x40, 0x70, 0xF8, 0x68, 0x74};
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(data[448 + i], id[i]);
        ck_assert_uint_eq(data[480 + i], id[4 + i]);
        ck_assert_uint_eq(data[D + 448 + i], sw[i]);
        ck_assert_uint_eq(data[D + 480 + i], sw[4 + i]);
    }
    for (int d = 452; d < 480; d++) { /* (0.25, 0.25) -> same, or (0.25, -0.25) */
        ck_assert_uint_eq(data[d], 0x28);
        ck_assert_uint_eq(data[D + d], d % 2 ? 0xA8 : 0x28);
    }
    for (int d = 484; d < D; d++) /* (0, 0) -> (+0, +0) under either rotation */
        ck_assert(data[d] == 0 && data[D + d] == 0);
    /* bad input named */
    o[D + 7] = 0x7FC0;
    ck_assert_int_eq(dsv4_ref_inverse_rope_mxfp8_rows(o, 2, 1, pos, cs, 2, 64, DSV4_MX_FP8_CEIL, data, sc, &st),
                     DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, "o[1, 0, 7]") != NULL, "%s", st.msg);
    pos[1] = 2;
    ck_assert_int_eq(dsv4_ref_inverse_rope_mxfp8_rows(o, 2, 1, pos, cs, 2, 64, DSV4_MX_FP8_CEIL, data, sc, &st),
                     DSV4_EINPUT);
}
END_TEST

/* A second formulation written here: the rotation with explicit fp32
 * temporaries, the exact ceil(log2) from frexp, and e4m3 by a nearest search
 * over all 126 positive finite codes (ties to the even code). */
static uint8_t e4m3_nearest(float q)
{
    float a = fabsf(q);
    int best = 0;
    for (int c = 1; c < 0x7F; c++) {
        float v = dsv4_fp8_to_f32((uint8_t)c, DSV4_FP8_E4M3FN), bv = dsv4_fp8_to_f32((uint8_t)best, DSV4_FP8_E4M3FN);
        if (fabsf(v - a) < fabsf(bv - a) || (fabsf(v - a) == fabsf(bv - a) && (c & 1) == 0))
            best = c;
    }
    return (uint8_t)(best | (signbit(q) ? 0x80 : 0));
}

START_TEST(test_inverse_rope_mxfp8_second_formulation)
{
    enum { T = 3, H = 2, P = 5 };
    float cs[P * 64];
    dsv4_rng rng;
    dsv4_rng_init(&rng, 11, "cs");
    for (int i = 0; i < P * 32; i++) {
        double ang = dsv4_rng_uniform(&rng) * 6.283185307179586;
        cs[i / 32 * 64 + i % 32] = (float)cos(ang), cs[i / 32 * 64 + 32 + i % 32] = (float)sin(ang);
    }
    uint16_t o[T * H * D];
    for (int i = 0; i < T * H * D; i++)
        o[i] = bf(dsv4_rng_normal(&rng) * ldexp(1.0, (int)(i / D) * 3 - 6));
    int64_t pos[T] = {4, 1, 3};
    uint8_t data[T * H * D], sc[T * H * 16];
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_ref_inverse_rope_mxfp8_rows(o, T, H, pos, cs, P, 64, DSV4_MX_FP8_CEIL, data, sc, &st), 0);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            float x[D];
            const uint16_t *r = o + (t * H + h) * D;
            for (int d = 0; d < D; d++)
                x[d] = dsv4_bf16_to_f32(r[d]);
            for (int k = 0; k < 32; k++) {
                const float c = cs[pos[t] * 64 + k], s = cs[pos[t] * 64 + 32 + k];
                const float a = x[448 + 2 * k], b = x[449 + 2 * k];
                const float ac = a * c, bs = b * s, bc = b * c, as = a * s;
                x[448 + 2 * k] = ac + bs, x[449 + 2 * k] = bc - as;
            }
            for (int g = 0; g < 16; g++) {
                double amax = 0x1p-126;
                for (int i = 0; i < 32; i++)
                    amax = fmax(amax, fabs(x[g * 32 + i]));
                int e;
                double f = frexp(amax / 448.0, &e); /* amax/448 = f 2^e, f in [0.5, 1) */
                int code = (f > 0.5 ? e : e - 1) + 127;
                code = code < 0 ? 0 : code > 254 ? 254 : code;
                ck_assert_int_eq(sc[(t * H + h) * 16 + g], code);
                for (int i = 0; i < 32; i++) {
                    const int d = g * 32 + i;
                    ck_assert_uint_eq(data[(t * H + h) * D + d], e4m3_nearest(ldexpf(x[d], 127 - code)));
                }
            }
        }
}
END_TEST

/* The policy: a RoPE lane whose golden value is an e4m3 tie reached through
 * an inexact product is at risk (a one-code flip passes); a flip anywhere
 * else, or two codes off, fails. */
static int rmx_compare(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensors *e,
                       const dsv4_tensors *a, int64_t *at_risk)
{
    dsv4_status st = {0};
    dsv4_policy pol;
    ck_assert_int_eq(op->policy(c, in, "data", &pol, &st), 0);
    const dsv4_tensor *de = dsv4_tensors_get(e, "data");
    const int64_t n = dsv4_tensor_numel(de);
    double *bound = calloc((size_t)n, sizeof *bound);
    ck_assert_int_eq(op->bound(c, in, "data", bound, n, &st), 0);
    *at_risk = 0;
    for (int64_t i = 0; i < n; i++)
        *at_risk += bound[i] > 0;
    dsv4_cmp_aux aux = {dsv4_tensors_get(e, "scale"), dsv4_tensors_get(a, "scale"), bound, NULL};
    dsv4_cmp_result res;
    memset(&res, 0, sizeof res);
    ck_assert_int_eq(dsv4_compare(de, dsv4_tensors_get(a, "data"), &pol, NULL, NULL, NULL, &aux, &res, &st), 0);
    free(bound);
    return res.verdict;
}

START_TEST(test_inverse_rope_mxfp8_policy)
{
    const dsv4_op *op = dsv4_op_find("rocm_inverse_rope_mxfp8_rows");
    ck_assert_ptr_nonnull(op);
    dsv4_params ps;
    memset(&ps, 0, sizeof ps);
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_params_set_int(&ps, "num_tokens", 2, &st), 0);
    ck_assert_int_eq(dsv4_params_set_int(&ps, "num_heads", 2, &st), 0);
    ck_assert_int_eq(dsv4_params_set_int(&ps, "max_position", 4, &st), 0);
    ck_assert_int_eq(dsv4_op_complete_params(op, &ps, "test", &st), 0);
    dsv4_opctx c = dsv4_opctx_make(op, &ps, 0, 3);
    dsv4_tensors in, e, a;
    memset(&in, 0, sizeof in), memset(&e, 0, sizeof e), memset(&a, 0, sizeof a);
    ck_assert_int_eq(op->generate(&c, &in, &st), 0);
    /* Token 1 at position 1, head 0: lane 448 = 448 (k = 0: cos 1, sin 0)
     * pins scale 127; pair k = 1 has b = 0 and c = fl(1.0625 / 3) nudged
     * until fl(3 c) = 1.0625 (the tie of 1 and 1.125) while 3 c is not. */
    float *cs = dsv4_tensors_find(&in, "cos_sin_cache")->data;
    ((int64_t *)dsv4_tensors_find(&in, "positions")->data)[1] = 1;
    float cc = (float)(1.0625 / 3.0);
    for (int i = 0; i < 64 && !(3.0f * cc == 1.0625f && 3.0 * cc != 1.0625); i++)
        cc = nextafterf(cc, i % 2 ? 1.0f : 0.0f);
    ck_assert(3.0f * cc == 1.0625f && 3.0 * cc != 1.0625);
    for (int k = 0; k < 32; k++) /* position 1: cos 1, sin 0 but for pair 1 */
        cs[64 + k] = k == 1 ? cc : 1, cs[96 + k] = 0;
    uint16_t *o = dsv4_tensors_find(&in, "o")->data;
    uint16_t *r = o + 2 * D; /* token 1, head 0 */
    for (int d = 448; d < 480; d++)
        r[d] = bf(0.5);
    r[448] = bf(448), r[449] = 0, r[450] = bf(3), r[451] = 0;
    ck_assert_int_eq(op->validate(&c, &in, &st), 0);
    ck_assert_int_eq(op->alloc_outputs(&c, &in, &e, &st), 0);
    ck_assert_int_eq(op->reference(&c, &in, &e, &st), 0);
    uint8_t *de = dsv4_tensors_find(&e, "data")->data;
    const int64_t tie = 2 * D + 450;
    ck_assert_uint_eq(de[tie], 0x38); /* RNE: 1.0625 -> 1.0 (even) */
    ck_assert_uint_eq(((uint8_t *)dsv4_tensors_find(&e, "scale")->data)[2 * 16 + 14], 127);
    for (int i = 0; i < e.n; i++) {
        dsv4_tensor *t;
        ck_assert_int_eq(dsv4_tensors_add(&a, e.t[i].name, e.t[i].dtype, e.t[i].ndim, e.t[i].shape, &t, &st), 0);
    }
    uint8_t *da = dsv4_tensors_find(&a, "data")->data;
    const size_t nb = dsv4_tensors_find(&e, "data")->nbytes;
    memcpy(dsv4_tensors_find(&a, "scale")->data, dsv4_tensors_find(&e, "scale")->data,
           dsv4_tensors_find(&e, "scale")->nbytes);
    int64_t risk;
    memcpy(da, de, nb);
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_PASS);
    ck_assert_int_ge(risk, 1);
    da[tie] = 0x39; /* the other side of the tie: allowed */
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_PASS);
    da[tie] = 0x3A; /* two codes off */
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_FAIL);
    memcpy(da, de, nb);
    da[2 * D + 5] ^= 1; /* a NoPE lane one code off */
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_FAIL);
    memcpy(da, de, nb);
    da[2 * D + 452] ^= 1; /* 0.5 rotated at cos 1, sin 0: exact, not at risk */
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_FAIL);
    memcpy(da, de, nb);
    da[3 * D + 497] ^= 1; /* another RoPE lane (token 1, head 1): not at risk */
    ck_assert_int_eq(rmx_compare(op, &c, &in, &e, &a, &risk), DSV4_FAIL);
    dsv4_tensors_free(&in), dsv4_tensors_free(&e), dsv4_tensors_free(&a);
}
END_TEST

/* ---- end to end: build/dsv4check check on doctored goldens ---- */

static char cli_out[1 << 16];

/* Head 3 of a committed golden's output scaled by 0.5: check fails (1), the
 * report names token and head, and the hint names the head, not a sink. */
START_TEST(test_e2e_head_scaled)
{
    dsv4_golden g;
    dsv4_status st = {0};
    memset(&g, 0, sizeof g);
    ck_assert_msg(dsv4_golden_read("data/ci/attn_prefill_sink_none.h5", &g, &st) == 0, "%s", st.msg);
    dsv4_tensor *o = dsv4_tensors_find(&g.outputs, "output");
    ck_assert_ptr_nonnull(o);
    const int64_t T = o->shape[0], H = o->shape[1];
    for (int64_t t = 0; t < T; t++)
        for (int d = 0; d < D; d++)
            ((float *)o->data)[(t * H + 3) * D + d] *= 0.5f;
    char dir[] = "/tmp/dsv4attn.XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/scaled.h5", dir);
    ck_assert_msg(dsv4_golden_write(path, &g, 0, &st) == 0, "%s", st.msg);
    ck_assert_int_eq(dsv4_test_cli(cli_out, sizeof cli_out, "check %s --impl ref", path), 1);
    ck_assert_msg(strstr(cli_out, "token 0, head 3"), "%s", cli_out);
    ck_assert_msg(strstr(cli_out, "only head 3") && !strstr(cli_out, "attention sink is"), "%s", cli_out);
    /* The same golden with head 5 made as if the sink were ignored
     * (expected / (1 - w)): the sink hint. */
    dsv4_golden_free(&g);
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(dsv4_golden_read("data/ci/attn_prefill_c4.h5", &g, &st), 0);
    o = dsv4_tensors_find(&g.outputs, "output");
    const dsv4_tensor *q = dsv4_tensors_get(&g.inputs, "q"), *kv = dsv4_tensors_get(&g.inputs, "kv");
    const dsv4_tensor *idx = dsv4_tensors_get(&g.inputs, "indices"), *len = dsv4_tensors_get(&g.inputs, "topk_length");
    const dsv4_tensor *sink = dsv4_tensors_get(&g.inputs, "attn_sink");
    const int64_t T2 = q->shape[0], H2 = q->shape[1];
    dsv4_attn_args a = {q->data, T2, H2, sink->data, 1.0 / sqrt(512.0), 1, {{0}}};
    a.seg[0] = (dsv4_attn_segment){"kv", kv->shape[0], kv->data, NULL, NULL, 0, idx->data, NULL, len->data,
                                   idx->shape[2], 0, NULL};
    double *ideal = malloc((size_t)(T2 * H2 * D) * sizeof(double)), *sw = malloc((size_t)(T2 * H2) * sizeof(double));
    dsv4_attn_diag dg = {NULL, sw, NULL, NULL, NULL};
    ck_assert_int_eq(dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, &dg, &st), 0);
    int64_t h5 = 0; /* the head with the largest smallest sink weight */
    double best = -1;
    for (int64_t h = 0; h < H2; h++) {
        double mn = 1;
        for (int64_t t = 0; t < T2; t++)
            mn = fmin(mn, sw[t * H2 + h]);
        if (mn > best && mn < 0.9)
            best = mn, h5 = h;
    }
    ck_assert_msg(best > 0.05, "no head with a sink weight to test (best %g)", best);
    for (int64_t t = 0; t < T2; t++)
        for (int d = 0; d < D; d++)
            ((float *)o->data)[(t * H2 + h5) * D + d] =
                (float)(ideal[(t * H2 + h5) * D + d] / (1.0 - sw[t * H2 + h5]));
    snprintf(path, sizeof path, "%s/nosink.h5", dir);
    ck_assert_msg(dsv4_golden_write(path, &g, 0, &st) == 0, "%s", st.msg);
    ck_assert_int_eq(dsv4_test_cli(cli_out, sizeof cli_out, "check %s --impl ref", path), 1);
    char want[64];
    snprintf(want, sizeof want, "head %ld", (long)h5);
    ck_assert_msg(strstr(cli_out, want) && strstr(cli_out, "attention sink is ignored"), "%s", cli_out);
    free(ideal), free(sw);
    dsv4_golden_free(&g);
    dsv4_test_rm_rf(dir);
}
END_TEST

DSV4_TEST_MAIN("attention", "core", 60, NULL, NULL, test_one_key_is_v, test_two_equal_keys_and_halving_sink,
               test_integer_exact, test_empty_rows_zero_and_nan_unused, test_sweep_naive_and_faithful_bound,
               test_ragged_two_segments_equal_dense, test_rope, test_inverse_rope_rows_rotated, test_sink_hints,
               test_inverse_rope_mxfp8_hand, test_inverse_rope_mxfp8_second_formulation,
               test_inverse_rope_mxfp8_policy, test_e2e_head_scaled)
