/* indexer_common.c - the indexer ops' shared variants, generators, bound,
 * policies and locators (indexer.h). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexer.h"

#define U32 0x1p-24 /* fp32 unit roundoff */

const dsv4_variant dsv4_indexer_quant_variants[] = {
    {"default",
     "aiter fusions/k_norm_rope_mxfp4_cache + rope/q_rope_mxfp4_quant as the seed calls them (" DSV4_INDEXER_SEED0
     "; docs/semantics/indexer.md Q4 variant B): _mxfp4_quant_op SCALING_MODE 1 bit rule, v_cvt RNE e2m1 (-0 -> 0x8), "
     "Q weights fl(w * fl32(softmax_scale * head_scale))",
     &(const dsv4_idx_quant){DSV4_IDX_QUANT_B}},
    {"quant=cache_a",
     "aiter attention/pa_mqa_logits_mxfp4_cache.py (docs/semantics/indexer.md Q4 variant A, Q4.3): ceil(log2_f32) "
     "scale, threshold e2m1 (-0 -> 0x0), Q weights fl(fl(w * fl32(softmax_scale)) * fl32(head_scale))",
     &(const dsv4_idx_quant){DSV4_IDX_QUANT_A}},
    {NULL, NULL, NULL},
};

/* c uniform in [-1, 1], s = +-sqrt(1 - c^2): IEEE sqrt is correctly
 * rounded, libm's cos/sin are not portable. */
void dsv4_indexer_gen_cos_sin(dsv4_rng *rng, float *cs, int64_t P, int R)
{
    for (int64_t p = 0; p < P; p++)
        for (int i = 0; i < R / 2; i++) {
            double c = 2.0 * dsv4_rng_uniform(rng) - 1.0;
            float cf = (float)c;
            double s = sqrt(1.0 - (double)cf * cf);
            cs[p * R + i] = cf;
            cs[p * R + R / 2 + i] = (float)(dsv4_rng_uniform(rng) < 0.5 ? -s : s);
        }
}

/* ---- inputs ------------------------------------------------------------------ */

int dsv4_indexer_lg_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_indexer_lg *g, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_U8, 3, &g->q, st)) || (rc = dsv4_input(in, "q_scale", DSV4_I32, 2, &g->qs, st)) ||
        (rc = dsv4_input(in, "weights", DSV4_F32, 2, &g->w, st)) ||
        (rc = dsv4_input(in, "kv_cache", DSV4_U8, 3, &g->kc, st)) ||
        (rc = dsv4_input(in, "context_lens", DSV4_I32, 1, &g->ctx, st)) ||
        (rc = dsv4_input(in, "block_table", DSV4_I32, 2, &g->bt, st)) ||
        (rc = dsv4_input(in, "query_start_loc", DSV4_I32, 1, &g->qsl, st)) ||
        (rc = dsv4_input(in, "row_ends", DSV4_I32, 1, &g->re, st)))
        return rc;
    const int64_t rows = g->q->shape[0], H = g->q->shape[1], B = g->ctx->shape[0];
    const int64_t P = dsv4_params_int(ps, "page_entries");
    if (H != dsv4_params_int(ps, "heads") || g->q->shape[2] != DSV4_IDX_HEAD_DIM / 2 || g->qs->shape[0] != rows ||
        g->qs->shape[1] != H || g->w->shape[0] != rows || g->w->shape[1] != H || g->re->shape[0] != rows ||
        g->qsl->shape[0] != B + 1 || g->bt->shape[0] != B || g->kc->shape[1] != P || g->kc->shape[2] != 68)
        return dsv4_fail(st, DSV4_EINPUT, "q [rows, heads, 64], q_scale and weights [rows, heads], row_ends [rows], "
                         "query_start_loc [B + 1], block_table [B, *], kv_cache [pages, %" PRId64 ", 68] expected", P);
    if (P <= 0 || (P & (P - 1)))
        return dsv4_fail(st, DSV4_EINPUT, "page_entries %" PRId64 ": the kernel needs a power of two "
                                                                  "(docs/semantics/indexer.md Q6.1)", P);
    if ((rc = dsv4_idx_layout_make((int)H, DSV4_IDX_HEAD_DIM, P, (int)dsv4_params_int(ps, "shuffle"), &g->L, st)))
        return rc;
    g->a = (dsv4_idx_logits_args){g->q->data, g->qs->data, g->w->data, rows, (int)H, DSV4_IDX_HEAD_DIM,
                                  g->kc->data, g->kc->shape[0], &g->L, g->bt->data, g->bt->shape[1], g->ctx->data,
                                  g->qsl->data, B, g->re->data, dsv4_params_int(ps, "max_model_len")};
    return DSV4_OK;
}

int dsv4_indexer_lg_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_indexer_lg *g, dsv4_status *st)
{
    int rc = dsv4_indexer_lg_args(c, in, g, st);
    if (rc || (rc = dsv4_idx_logits_check(&g->a, st)))
        return rc;
    const float *w = g->a.weights;
    for (int64_t i = 0; i < g->a.rows * g->a.H; i++)
        if (!isfinite(w[i]))
            return dsv4_fail(st, DSV4_EINPUT, "weights element %" PRId64 " is not finite", i);
    return DSV4_OK;
}

int dsv4_indexer_lg_resolve(dsv4_params *ps, dsv4_status *st)
{
    const int64_t *sl;
    const int64_t R = dsv4_params_list(ps, "seq_lens", &sl), ratio = dsv4_params_int(ps, "compress_ratio");
    if (dsv4_params_int(ps, "max_model_len") != 0)
        return DSV4_OK;
    if (ratio < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio must be >= 1");
    int64_t w = 1;
    for (int64_t r = 0; r < R; r++)
        w = sl[r] / ratio > w ? sl[r] / ratio : w;
    return dsv4_params_set_int(ps, "max_model_len", w, st);
}

int dsv4_indexer_run_logits(const dsv4_indexer_lg *g, dsv4_idx_mode mode, double **out, dsv4_status *st)
{
    const size_t n = (size_t)(g->a.rows * g->a.width);
    *out = malloc((n ? n : 1) * sizeof **out);
    if (!*out)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = dsv4_ref_mqa_logits(&g->a, mode, *out, NULL, st);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- the generator ------------------------------------------------------------ */

/* Random entries: codes uniform over all 16 nibbles, scale bytes in
 * [124, 128] (exponent spread 4 per operand: the fp32 GEMM stays exact,
 * ref/indexer.c pair_exact); wild entries get far exponents or NaN. */
static void gen_entry(dsv4_rng *rng, uint8_t *v, uint8_t *s, int wild, int64_t j)
{
    for (int b = 0; b < 64; b++)
        v[b] = (uint8_t)dsv4_rng_range(rng, 0, 256);
    for (int b = 0; b < 4; b++)
        s[b] = (uint8_t)(124 + dsv4_rng_range(rng, 0, 5));
    if (wild >= 1 && j % 41 == 7)
        s[j % 4] = (uint8_t)(j % 2 ? 127 - 40 : 127 + 35);
    if (wild >= 2 && j % 97 == 13)
        s[0] = 0xFF;
}

/* Ties: for odd requests the last q block gets a scale 2^-20 lower first
 * (so a key differing only there scores within the tolerance); then the
 * k-th best key of the request's last row is copied over its worst key
 * (exact tie), and for odd requests the copy's last block re-randomized
 * (near tie). */
static int make_ties(const dsv4_opctx *c, const dsv4_tensors *in, int64_t tie_k, dsv4_rng *rng, dsv4_status *st)
{
    dsv4_indexer_lg g;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc)
        return rc;
    uint8_t *qs = (uint8_t *)g.qs->data, *cache = (uint8_t *)g.kc->data;
    for (int64_t b = 1; b < g.a.B; b += 2)
        for (int64_t r = g.a.query_start_loc[b]; r < g.a.query_start_loc[b + 1]; r++)
            for (int h = 0; h < g.a.H; h++)
                qs[(r * g.a.H + h) * 4 + 3] = (uint8_t)(qs[(r * g.a.H + h) * 4 + 3] - 20);
    double *lg;
    if ((rc = dsv4_indexer_run_logits(&g, DSV4_IDX_IDEAL, &lg, st)))
        return rc;
    int32_t *rank = malloc((size_t)(g.a.width ? g.a.width : 1) * sizeof *rank);
    if (!rank) {
        free(lg);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    const int64_t P = g.L.page_entries, pb = dsv4_idx_page_bytes(&g.L);
    for (int64_t b = 0; b < g.a.B; b++) {
        const int64_t r = g.a.query_start_loc[b + 1] - 1, e = r >= g.a.query_start_loc[b] ? dsv4_idx_row_end(&g.a, r) : 0;
        if (e < tie_k + 2 || tie_k < 1)
            continue;
        dsv4_idx_topk_row(lg + r * g.a.width, e, e, 0, rank);
        const int64_t src = rank[tie_k - 1], dst = rank[e - 1];
        uint8_t v[64], s[4];
        const int32_t *bt = g.a.block_table + b * g.a.max_blocks;
        dsv4_idx_read_entry(&g.L, cache + bt[src / P] * pb, src % P, v, s);
        if (b % 2)
            for (int i = 48; i < 64; i++)
                v[i] = (uint8_t)dsv4_rng_range(rng, 0, 256);
        dsv4_idx_write_entry(&g.L, cache + bt[dst / P] * pb, dst % P, v, s);
    }
    free(rank);
    free(lg);
    return DSV4_OK;
}

int dsv4_indexer_lg_generate(const dsv4_opctx *c, dsv4_tensors *in, int64_t tie_k, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t *sl, *ql;
    const int64_t B = dsv4_params_list(ps, "seq_lens", &sl), nq = dsv4_params_list(ps, "query_lens", &ql);
    const int64_t H = dsv4_params_int(ps, "heads"), P = dsv4_params_int(ps, "page_entries");
    const int64_t ratio = dsv4_params_int(ps, "compress_ratio"), spare = dsv4_params_int(ps, "spare_pages");
    const int64_t width = dsv4_params_int(ps, "max_model_len");
    const int wild = (int)dsv4_params_int(ps, "wild");
    dsv4_idx_layout L;
    int rc = dsv4_idx_layout_make((int)H, DSV4_IDX_HEAD_DIM, P, (int)dsv4_params_int(ps, "shuffle"), &L, st);
    if (rc)
        return rc;
    if (nq != B || ratio < 1 || spare < 0 || H > 128)
        return dsv4_fail(st, DSV4_EINPUT, "query_lens must match seq_lens; compress_ratio >= 1; heads <= 128");
    int64_t rows = 0, pages = spare, maxb = 1, nblk[DSV4_PARAM_LIST_MAX];
    for (int64_t b = 0; b < B; b++) {
        if (ql[b] < 0 || ql[b] > sl[b] || sl[b] / ratio > width)
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": 0 <= query_lens <= seq_lens, seq_lens/ratio <= "
                             "max_model_len", b);
        rows += ql[b];
        nblk[b] = (sl[b] / ratio + P - 1) / P;
        pages += nblk[b];
        maxb = nblk[b] > maxb ? nblk[b] : maxb;
    }
    int64_t sq[3] = {rows, H, 64}, sh[2] = {rows, H}, skc[3] = {pages, P, 68}, sbt[2] = {B, maxb}, nqsl = B + 1;
    dsv4_tensor *q, *qs, *w, *kc, *ctx, *bt, *qsl, *re;
    if ((rc = dsv4_tensors_add(in, "q", DSV4_U8, 3, sq, &q, st)) ||
        (rc = dsv4_tensors_add(in, "q_scale", DSV4_I32, 2, sh, &qs, st)) ||
        (rc = dsv4_tensors_add(in, "weights", DSV4_F32, 2, sh, &w, st)) ||
        (rc = dsv4_tensors_add(in, "kv_cache", DSV4_U8, 3, skc, &kc, st)) ||
        (rc = dsv4_tensors_add(in, "context_lens", DSV4_I32, 1, &B, &ctx, st)) ||
        (rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, sbt, &bt, st)) ||
        (rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &nqsl, &qsl, st)) ||
        (rc = dsv4_tensors_add(in, "row_ends", DSV4_I32, 1, &rows, &re, st)))
        return rc;
    dsv4_rng rq, rw, rk, rp, rt;
    dsv4_rng_init(&rq, c->seed, "q");
    dsv4_rng_init(&rw, c->seed, "weights");
    dsv4_rng_init(&rk, c->seed, "kv_cache");
    dsv4_rng_init(&rp, c->seed, "block_table");
    dsv4_rng_init(&rt, c->seed, "ties");
    uint8_t *qv = q->data, *qsb = qs->data, *cache = kc->data;
    for (int64_t rh = 0; rh < rows * H; rh++)
        gen_entry(&rq, qv + rh * 64, qsb + rh * 4, wild, rh + 3);
    for (int64_t i = 0; i < rows * H; i++)
        ((float *)w->data)[i] = (float)(dsv4_rng_normal(&rw) * 0.3);
    /* Poison: codes 6.0 with NaN scales, so a read of a wrong entry shows. */
    for (int64_t p = 0; p < pages; p++) {
        memset(cache + p * P * 68, 0x77, (size_t)(P * 64));
        memset(cache + p * P * 68 + P * 64, 0xFF, (size_t)(P * 4));
    }
    int32_t *perm = malloc((size_t)(pages ? pages : 1) * sizeof *perm);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t p = 0; p < pages; p++)
        perm[p] = (int32_t)p;
    dsv4_rng_shuffle_i32(&rp, perm, pages);
    int32_t *btd = bt->data, *ctxd = ctx->data, *qsld = qsl->data, *red = re->data;
    int64_t used = 0, r = 0;
    qsld[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        ctxd[b] = (int32_t)(sl[b] / ratio);
        for (int64_t i = 0; i < maxb; i++)
            btd[b * maxb + i] = i < nblk[b] ? perm[used + i] : -1;
        for (int64_t j = 0; j < ctxd[b]; j++) {
            uint8_t v[64], s[4];
            gen_entry(&rk, v, s, wild, j);
            dsv4_idx_write_entry(&L, cache + (int64_t)btd[b * maxb + j / P] * P * 68, j % P, v, s);
        }
        used += nblk[b];
        for (int64_t i = 0; i < ql[b]; i++, r++) /* position sl - ql + i; end (pos + 1) // c */
            red[r] = (int32_t)((sl[b] - ql[b] + i + 1) / ratio);
        qsld[b + 1] = (int32_t)r;
    }
    free(perm);
    if (dsv4_params_int(ps, "ties"))
        return make_ties(c, in, tie_k, &rt, st);
    return DSV4_OK;
}

/* ---- the error bound ------------------------------------------------------------ */

/* Error analysis of the fp32 kernel against the ideal
 * (docs/semantics/indexer.md Q6.2): s_h = q_h.k: 128 exact products summed
 * in fp32 in an unknown (MFMA) order: |err| <= 128 u A_h, A_h = sum_d
 * |q_hd k_d|; relu is 1-Lipschitz; relu(s_h) w_h rounds once (<= u |w_h|
 * A_h); the H-term head sum with FMA <= H u sum_h |w_h| A_h; the final
 * fl(A0 + A1) one more u.  So |logit - ideal| <= (128 + H + 2) u sum_h |w_h|
 * A_h, u = 2^-24.  Faithful mode models the per-MFMA rounding and the fold:
 * what remains is the MFMA's internal rounding (docs/semantics/README.md
 * Q9, question 1): 2 u sum_h |w_h| A_h. */
static double bound_factor(int H, int faithful) { return faithful ? 2.0 * U32 : (128.0 + H + 2.0) * U32; }

/* 2|v| of an e2m1 code (the sign bit dropped): {0, .5, 1, 1.5, 2, 3, 4, 6}
 * times 2, integers. */
static const float e2m1_twice_magnitude[8] = {0, 1, 2, 3, 4, 6, 8, 12};

enum { SCALE_BLOCKS = DSV4_IDX_HEAD_DIM / 32, KEYS_PER_CHUNK = 1024 };

/* One operand (a head of q, or a key) as the bound reads it: 2|v_d| per
 * element, and half the scale of each 32-block (NaN for the e8m0 NaN). */
static void abs_operand_of(const uint8_t *v, const uint8_t *s, float *twice_mag, double *half_scale)
{
    for (int d = 0; d < DSV4_IDX_HEAD_DIM; d++)
        twice_mag[d] = e2m1_twice_magnitude[((d & 1) ? v[d / 2] >> 4 : v[d / 2]) & 7];
    for (int b = 0; b < SCALE_BLOCKS; b++)
        half_scale[b] = s[b] == 0xFF ? NAN : ldexp(1.0, (int)s[b] - 128);
}

typedef struct abs_work {
    float *qm, *km, *dots; /* [H, 128], [KEYS_PER_CHUNK, 128], [SCALE_BLOCKS, H, KEYS_PER_CHUNK] */
    double *qs, *ks, *acc; /* [H, SCALE_BLOCKS], [KEYS_PER_CHUNK, SCALE_BLOCKS], [KEYS_PER_CHUNK] */
} abs_work;

/* Row r against keys j0 .. j0 + n - 1 (read into w->km, w->ks): per block
 * the sums of 32 products 2|q| 2|k| are integers below 2^13, so the fp32
 * GEMM gives them exactly whatever its kernel and thread count; each is
 * scaled by the two half scales (powers of two: exact in double), the
 * blocks added in pairs as ref/indexer.c exact_dot adds them, and the heads
 * in order.  A NaN scale makes the element NaN, written as +inf. */
static void abs_scale_row(const dsv4_idx_logits_args *a, int64_t r, int64_t j0, int64_t n, abs_work *w,
                          double *scale)
{
    const int H = a->H, D = DSV4_IDX_HEAD_DIM;
    for (int h = 0; h < H; h++)
        abs_operand_of(a->q + (r * H + h) * (D / 2), a->q_scale + (r * H + h) * (D / 32), w->qm + h * D,
                       w->qs + h * SCALE_BLOCKS);
    for (int b = 0; b < SCALE_BLOCKS; b++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, H, (int)n, 32, 1.0f, w->qm + 32 * b, D,
                    w->km + 32 * b, D, 0.0f, w->dots + (int64_t)b * H * KEYS_PER_CHUNK, KEYS_PER_CHUNK);
    memset(w->acc, 0, (size_t)n * sizeof *w->acc);
    for (int h = 0; h < H; h++) {
        const double wh = fabs((double)a->weights[r * H + h]), *qs = w->qs + h * SCALE_BLOCKS;
        const float *dot[SCALE_BLOCKS];
        for (int b = 0; b < SCALE_BLOCKS; b++)
            dot[b] = w->dots + ((int64_t)b * H + h) * KEYS_PER_CHUNK;
        for (int64_t j = 0; j < n; j++) {
            const double *ks = w->ks + j * SCALE_BLOCKS;
            const double s = ((double)dot[0][j] * qs[0] * ks[0] + (double)dot[1][j] * qs[1] * ks[1]) +
                             ((double)dot[2][j] * qs[2] * ks[2] + (double)dot[3][j] * qs[3] * ks[3]);
            w->acc[j] += wh * s;
        }
    }
    for (int64_t j = 0; j < n; j++)
        scale[r * a->width + j0 + j] = isfinite(w->acc[j]) ? w->acc[j] : INFINITY;
}

/* scale[r, j] = sum_h |w_h| sum_d |q_hd k_d| below the row end (non-finite:
 * +inf), 0 past it.  Computed here, exactly, rather than taken from the
 * reference's fp32 GEMM of |q| and |k|, whose last bits follow the BLAS
 * kernel and its thread count (and with them every tolerance built on this
 * scale). */
static int abs_scale(const dsv4_indexer_lg *g, double *scale, dsv4_status *st)
{
    const dsv4_idx_logits_args *a = &g->a;
    const int H = a->H, D = DSV4_IDX_HEAD_DIM;
    const int64_t P = g->L.page_entries, pb = dsv4_idx_page_bytes(&g->L);
    int rc = dsv4_idx_logits_check(a, st);
    if (rc)
        return rc;
    for (int64_t i = 0; i < a->rows * a->width; i++)
        scale[i] = 0;
    abs_work w = {malloc((size_t)H * D * sizeof(float)), malloc((size_t)KEYS_PER_CHUNK * D * sizeof(float)),
                  malloc((size_t)SCALE_BLOCKS * H * KEYS_PER_CHUNK * sizeof(float)),
                  malloc((size_t)H * SCALE_BLOCKS * sizeof(double)),
                  malloc((size_t)KEYS_PER_CHUNK * SCALE_BLOCKS * sizeof(double)),
                  malloc((size_t)KEYS_PER_CHUNK * sizeof(double))};
    if (!w.qm || !w.km || !w.dots || !w.qs || !w.ks || !w.acc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory (logits bound)");
    for (int64_t b = 0; b < a->B && !rc; b++) {
        const int64_t q0 = a->query_start_loc[b], q1 = a->query_start_loc[b + 1];
        int64_t nk = 0;
        for (int64_t r = q0; r < q1; r++)
            nk = dsv4_idx_row_end(a, r) > nk ? dsv4_idx_row_end(a, r) : nk;
        for (int64_t j0 = 0; j0 < nk; j0 += KEYS_PER_CHUNK) {
            const int64_t nc = nk - j0 < KEYS_PER_CHUNK ? nk - j0 : KEYS_PER_CHUNK;
            for (int64_t j = 0; j < nc; j++) {
                const int64_t key = j0 + j;
                uint8_t v[DSV4_IDX_HEAD_DIM / 2], s[SCALE_BLOCKS];
                dsv4_idx_read_entry(&g->L, a->cache + (int64_t)a->block_table[b * a->max_blocks + key / P] * pb,
                                    key % P, v, s);
                abs_operand_of(v, s, w.km + j * D, w.ks + j * SCALE_BLOCKS);
            }
            for (int64_t r = q0; r < q1; r++) {
                const int64_t n = dsv4_idx_row_end(a, r) - j0;
                if (n > 0)
                    abs_scale_row(a, r, j0, n < nc ? n : nc, &w, scale);
            }
        }
    }
    free(w.qm);
    free(w.km);
    free(w.dots);
    free(w.qs);
    free(w.ks);
    free(w.acc);
    return rc;
}
int dsv4_indexer_logits_bound(const dsv4_indexer_lg *g, int faithful, double *bound, int64_t n, dsv4_status *st)
{
    if (n != g->a.rows * g->a.width)
        return dsv4_fail(st, DSV4_ERUNTIME, "logits bound of %" PRId64 " elements, the logits have %" PRId64, n,
                         g->a.rows * g->a.width);
    int rc = abs_scale(g, bound, st);
    const double f = bound_factor(g->a.H, faithful);
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] *= f;
    return rc;
}

/* Two scores closer than the logits error bound may be ordered either way
 * by the kernel.  Per row that bound is at most rtol * max|score of the
 * row| with rtol = the largest, over the rows, of (the row's largest
 * element bound / its largest |score|). */
int dsv4_indexer_tie_rtol(const dsv4_indexer_lg *g, double *rtol, dsv4_status *st)
{
    const size_t n = (size_t)(g->a.rows * g->a.width);
    double *lg = NULL, *bd = malloc((n ? n : 1) * sizeof *bd);
    int rc = bd ? dsv4_indexer_logits_bound(g, 0, bd, (int64_t)n, st) : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_indexer_run_logits(g, DSV4_IDX_IDEAL, &lg, st);
    *rtol = 0;
    for (int64_t r = 0; !rc && r < g->a.rows; r++) {
        double mb = 0, ms = 0;
        for (int64_t j = 0; j < g->a.width; j++) {
            const double b = bd[r * g->a.width + j], v = fabs(lg[r * g->a.width + j]);
            mb = isfinite(b) && b > mb ? b : mb;
            ms = isfinite(v) && v > ms ? v : ms;
        }
        if (ms > 0 && mb / ms > *rtol)
            *rtol = mb / ms;
    }
    free(lg);
    free(bd);
    return rc;
}

/* ---- policies, mask, locator, outputs ------------------------------------------- */

void dsv4_indexer_policy_logits(int H, int faithful, dsv4_policy *pol)
{
    char rule[sizeof pol->rule];
    snprintf(rule, sizeof rule,
             "float: |a - e| <= %s%.4g * sum_h |w_h| sum_d |q_hd k_d| (%s; op bound); past the row end unspecified",
             faithful ? "2 ulp(fp32) + " : "", bound_factor(H, faithful),
             faithful ? "model of the per-MFMA rounding and head fold: 2u" : "(128 + H + 2) u: fp32 dot of 128 in any order, relu*w, H-term head sum");
    dsv4_policy_float(pol, DSV4_F32, rule);
    pol->ulp = faithful ? 2 : 0;
}

int dsv4_indexer_topk_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *scores, const char *what,
                             dsv4_policy *pol, dsv4_status *st)
{
    dsv4_indexer_lg g;
    double tol;
    int rc = dsv4_indexer_lg_args(c, in, &g, st);
    if (rc || (rc = dsv4_indexer_tie_rtol(&g, &tol, st)))
        return rc;
    dsv4_policy_index_set(pol, scores, tol, what);
    return DSV4_OK;
}

void dsv4_indexer_mask_rows(const dsv4_indexer_lg *g, uint8_t *mask, int64_t n)
{
    for (int64_t r = 0; r < g->a.rows; r++) {
        const int64_t e = dsv4_idx_row_end(&g->a, r);
        for (int64_t j = 0; j < g->a.width && r * g->a.width + j < n; j++)
            mask[r * g->a.width + j] = j < e;
    }
}

void dsv4_indexer_locate_logits(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                                char *buf, size_t len)
{
    dsv4_indexer_lg g;
    dsv4_status st = {0};
    if (strcmp(output, "logits") != 0 || dsv4_indexer_lg_args(c, in, &g, &st))
        return;
    const int64_t r = flat / g.a.width, j = flat % g.a.width;
    int64_t b = 0;
    while (b < g.a.B && r >= g.a.query_start_loc[b + 1])
        b++;
    const int64_t e = b < g.a.B ? dsv4_idx_row_end(&g.a, r) : -1;
    if (b < g.a.B && j < e)
        snprintf(buf, len, "row %" PRId64 " (request %" PRId64 ", end %" PRId64 "), key %" PRId64 " at page %d entry %"
                 PRId64, r, b, e, j, g.a.block_table[b * g.a.max_blocks + j / g.L.page_entries], j % g.L.page_entries);
    else
        snprintf(buf, len, "row %" PRId64 ", column %" PRId64 " (past the row end %" PRId64 ")", r, j, e);
}

int dsv4_indexer_add_logits(const dsv4_indexer_lg *g, dsv4_tensors *out, dsv4_status *st)
{
    int64_t s[2] = {g->a.rows, g->a.width};
    dsv4_tensor *o;
    int rc = dsv4_tensors_add(out, "logits", DSV4_F32, 2, s, &o, st);
    if (!rc)
        for (int64_t i = 0; i < s[0] * s[1]; i++)
            ((float *)o->data)[i] = -INFINITY; /* the launcher's pre-fill (docs/semantics/indexer.md Q6.2) */
    return rc;
}

int dsv4_indexer_add_topk(const dsv4_indexer_lg *g, int64_t k, dsv4_tensors *out, dsv4_status *st)
{
    int64_t s[2] = {g->a.rows, k};
    dsv4_tensor *o;
    int rc = dsv4_tensors_add(out, "topk_indices", DSV4_I32, 2, s, &o, st);
    if (!rc)
        memset(o->data, 0xFF, o->nbytes); /* rows preset to -1 (docs/semantics/indexer.md Q6.4) */
    return rc;
}

void dsv4_indexer_pool_row(const double *logits, int64_t end, int64_t C, int64_t nblocks, int64_t nb, double *bs,
                           int32_t *blocks)
{
    dsv4_idx_block_scores_row(logits, end, C, nblocks, bs);
    /* _topk(block_scores, block_ends, ...): over [0, ceil(end/C)), -inf -> -1 */
    dsv4_idx_topk_row(bs, (end + C - 1) / C, nb, 1, blocks);
}
