/* test_attention.c - sparse attention with sink, the RoPE helpers and the
 * epilogue, checked against hand-derived answers and against a second,
 * naive formulation written here (a per-(token, head) loop in long double,
 * no BLAS, no gathering); plus the bound and the sink hints. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compare/attn_hints.h"
#include "../harness/rng.h"
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
    p->a.seg[0] = (dsv4_attn_segment){"kv", rows, p->kv, NULL, NULL, 0, p->idx, NULL, p->lens, P, 0};
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
        double mag[20], sw[20];
        int64_t nv[5];
        dsv4_attn_diag dg = {absd, sw, nv, mag};
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_ref_sparse_attn(&p.a, DSV4_ATTN_IDEAL, ideal, &dg, &st), 0);
        double *faith = run(&p, DSV4_ATTN_FAITHFUL);
        for (int64_t i = 0; i < n; i++) {
            int64_t t = i / (p.H * D), h = i / D % p.H;
            ck_assert_msg(fabsl(ideal[i] - want[i]) <= 1e-12L * (1 + fabsl(want[i])), "seed %lu el %ld",
                          (unsigned long)seed, (long)i);
            double e = ideal[i], k = dsv4_round_bf16((float)faith[i]);
            double rho = dsv4_attn_rho(nv[t], mag[t * p.H + h]);
            double bound = dsv4_ulp(DSV4_BF16, e) + 0x1p-23 * fabs(e) + rho * absd[i];
            ck_assert_msg(fabs(k - e) <= bound, "seed %lu el %ld: |%g - %g| > %g", (unsigned long)seed, (long)i,
                          k, e, bound);
            ck_assert(rho < 0.01);
            if (nv[t] == 0)
                ck_assert(faith[i] == 0 && e == 0);
        }
        free(want), free(ideal), free(absd), free(faith);
        prob_free(&p);
    }
}
END_TEST

/* Ragged two-segment form = the same keys as one dense row. */
START_TEST(test_ragged_two_segments_equal_dense)
{
    prob p;
    random_prob(&p, 99, 3, 2, 30, 10);
    for (int64_t t = 0; t < 3; t++)
        p.lens[t] = 10;
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
    a.seg[0] = (dsv4_attn_segment){"main", 30, p.kv, NULL, NULL, 1, mi, mp, NULL, 0, 12};
    a.seg[1] = (dsv4_attn_segment){"extra", 30, p.kv, NULL, NULL, 1, ei, ep, NULL, 0, 18};
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
    random_prob(&p, 5, 4, 3, 30, 12);
    for (int64_t t = 0; t < 4; t++)
        p.lens[t] = 12;
    for (int64_t h = 0; h < 3; h++)
        p.sink[h] = 2.0f + (float)h;
    const int64_t n = p.T * p.H * D;
    double sw[12];
    int64_t nv[4];
    dsv4_attn_diag dg = {NULL, sw, nv, NULL};
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

static Suite *suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_one_key_is_v);
    tcase_add_test(tc, test_two_equal_keys_and_halving_sink);
    tcase_add_test(tc, test_integer_exact);
    tcase_add_test(tc, test_empty_rows_zero_and_nan_unused);
    tcase_add_test(tc, test_sweep_naive_and_faithful_bound);
    tcase_add_test(tc, test_ragged_two_segments_equal_dense);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_inverse_rope_rows_rotated);
    tcase_add_test(tc, test_sink_hints);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return dsv4_test_run(suite()); }
