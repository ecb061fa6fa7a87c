/* soundness_models.h - the kernel models and case shapes of the soundness
 * table (tests/soundness.h), one section per op family.  Each model is a
 * second formulation of a correct kernel: fp32 arithmetic, the rounding
 * points of the ROCm kernels (docs/semantics/), orders and contractions
 * drawn per case; or the op's own faithful variant. */
#ifndef DSV4_TESTS_SOUNDNESS_MODELS_H
#define DSV4_TESTS_SOUNDNESS_MODELS_H

#include "../ref/compressor.h"
#include "../ref/gemm.h"
#include "../ref/kvcache.h"
#include "../ref/mx.h"
#include "soundness.h"

/* ---- the attention kernel model ------------------------------------------ */

#define SND_D DSV4_HEAD_DIM

/* The entries of token t of a segment (dense rows: the first
 * clamp(lens[t], 0, width) columns; ragged: indptr). */
static const int32_t *snd_seg_entries(const dsv4_attn_segment *s, int64_t t, int64_t *n)
{
    if (s->indptr) {
        *n = (int64_t)s->indptr[t + 1] - s->indptr[t];
        return s->indices + s->indptr[t];
    }
    const int64_t len = s->lens[t];
    *n = len < 0 ? 0 : len > s->width ? s->width : len;
    return s->indices + t * s->width;
}

typedef struct snd_attn_cfg {
    int block_n;  /* keys per online-softmax block */
    int splits;   /* split-K partitions (decode), reduced at the end */
    int base2;    /* exp2 of scores scaled by log2(e) (the gfx950 decode) */
    int order;    /* dot order of the scores (snd_dot) */
    int pv_order; /* 0: P.V as acc = fma(p, v, acc); 1: each block's P.V summed apart, then added */
} snd_attn_cfg;

/* One split of the keys of one (token, head): online softmax over blocks
 * of block_n keys, p rounded to bf16 before P.V, l summing the fp32 p. */
static void snd_attn_split(const snd_attn_cfg *cfg, const float *q, const float *K, int64_t n, float scale,
                           float *m_out, float *l_out, float *acc)
{
    const float neg = -3.4028234663852886e38f; /* the kernels' running-max start */
    float m = neg, l = 0.0f, blk[SND_D];
    for (int d = 0; d < SND_D; d++)
        acc[d] = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += cfg->block_n) {
        const int64_t j1 = j0 + cfg->block_n < n ? j0 + cfg->block_n : n;
        float s[256], mb = m;
        for (int64_t j = j0; j < j1; j++) {
            s[j - j0] = snd_dot(q, K + j * SND_D, SND_D, 1, cfg->order) * scale;
            mb = s[j - j0] > mb ? s[j - j0] : mb;
        }
        const float alpha = cfg->base2 ? exp2f(m - mb) : expf(m - mb);
        l *= alpha;
        for (int d = 0; d < SND_D; d++)
            acc[d] *= alpha, blk[d] = 0.0f;
        for (int64_t j = j0; j < j1; j++) {
            const float p = cfg->base2 ? exp2f(s[j - j0] - mb) : expf(s[j - j0] - mb);
            const float pb = dsv4_round_bf16(p);
            l += p;
            float *dst = cfg->pv_order ? blk : acc;
            for (int d = 0; d < SND_D; d++)
                dst[d] = fmaf(pb, K[j * SND_D + d], dst[d]);
        }
        if (cfg->pv_order)
            for (int d = 0; d < SND_D; d++)
                acc[d] += blk[d];
        m = mb;
    }
    *m_out = m;
    *l_out = l;
}

/* The whole attention of a's rows as a kernel would compute it (fp32), into
 * out [T, H, 512] floats before the bf16 store. */
static int snd_attn_kernel(const dsv4_attn_args *a, const snd_attn_cfg *cfg, float *out, dsv4_status *st)
{
    int64_t cap = 1;
    for (int64_t t = 0; t < a->T; t++) {
        int64_t tot = 0, n;
        for (int k = 0; k < a->nseg; k++) {
            snd_seg_entries(&a->seg[k], t, &n);
            tot += n;
        }
        cap = tot > cap ? tot : cap;
    }
    float *K = malloc((size_t)cap * SND_D * sizeof *K), *acc = malloc((size_t)cfg->splits * SND_D * sizeof *acc);
    float q[SND_D];
    if (!K || !acc) {
        free(K), free(acc);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    const float log2e = 1.4426950408889634f;
    const float scale = cfg->base2 ? (float)a->scale * log2e : (float)a->scale;
    int rc = DSV4_OK;
    for (int64_t t = 0; t < a->T && !rc; t++) {
        int64_t n = 0;
        for (int k = 0; k < a->nseg && !rc; k++) {
            const dsv4_attn_segment *s = &a->seg[k];
            int64_t ne;
            const int32_t *e = snd_seg_entries(s, t, &ne);
            for (int64_t j = 0; j < ne && !rc; j++) {
                if (e[j] < 0 || e[j] >= s->num_rows)
                    continue; /* -1 and out-of-range entries skipped */
                float *row = K + n * SND_D;
                if (s->bf16_rows)
                    for (int d = 0; d < SND_D; d++)
                        row[d] = dsv4_bf16_to_f32(s->bf16_rows[(int64_t)e[j] * SND_D + d]);
                else
                    rc = s->fetch(s->fetch_ctx, e[j], row, st);
                for (int d = 0; s->scrub_nan && d < SND_D; d++)
                    row[d] = isnan(row[d]) ? 0.0f : row[d];
                n++;
            }
        }
        for (int64_t h = 0; h < a->H && !rc; h++) {
            for (int d = 0; d < SND_D; d++)
                q[d] = dsv4_bf16_to_f32(a->q[(t * a->H + h) * SND_D + d]);
            const float sink = a->attn_sink ? a->attn_sink[h] * (cfg->base2 ? log2e : 1.0f) : -INFINITY;
            float ms[8], ls[8], M = sink;
            const int S = cfg->splits;
            for (int k = 0; k < S; k++) { /* contiguous slices of the keys */
                const int64_t j0 = n * k / S, j1 = n * (k + 1) / S;
                snd_attn_split(cfg, q, K + j0 * SND_D, j1 - j0, scale, &ms[k], &ls[k], acc + k * SND_D);
                M = ms[k] > M ? ms[k] : M;
            }
            float L = cfg->base2 ? exp2f(sink - M) : expf(sink - M), w[8];
            for (int k = 0; k < S; k++) {
                w[k] = cfg->base2 ? exp2f(ms[k] - M) : expf(ms[k] - M);
                L = fmaf(ls[k], w[k], L);
            }
            float *o = out + (t * a->H + h) * SND_D;
            for (int d = 0; d < SND_D; d++) {
                float x = 0.0f;
                for (int k = 0; k < S; k++)
                    x = fmaf(acc[k * SND_D + d], w[k], x);
                o[d] = L > 0.0f ? x / (L > 1e-30f ? L : 1e-30f) : 0.0f;
            }
        }
    }
    free(K), free(acc);
    return rc;
}

static int snd_model_attention(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                               const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st)
{
    (void)exp;
    dsv4_attn_args a;
    int rc = dsv4_attn_args_of_op(op, c, in, &a, st);
    if (rc)
        return rc;
    static const int blocks[] = {16, 32, 64};
    snd_attn_cfg cfg = {SND_PICK(var, blocks), 1, 0, (int)snd_int(var, 0, SND_DOT_ORDERS - 1),
                        (int)snd_int(var, 0, 1)};
    if (op != &dsv4_op_rocm_sparse_attn_prefill) { /* the decode kernels: split-K, gfx950 in base 2 */
        cfg.splits = (int)snd_int(var, 1, 4);
        cfg.base2 = (int)snd_int(var, 0, 1);
    }
    dsv4_tensor *o = dsv4_tensors_find(out, "output");
    const int64_t n = a.T * a.H * SND_D;
    float *y = malloc((size_t)(n + 1) * sizeof *y);
    if (!y)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    rc = snd_attn_kernel(&a, &cfg, y, st);
    for (int64_t i = 0; !rc && i < n; i++) {
        const uint16_t h = dsv4_bf16_from_f32(y[i]);
        ((uint16_t *)o->data)[i] = bias ? dsv4_bf16_from_f32(snd_bf16_up(dsv4_bf16_to_f32(h))) : h;
    }
    free(y);
    return rc;
}

/* ---- shapes --------------------------------------------------------------- */

static void snd_sink(dsv4_rng *r, snd_params *p)
{
    static const char *const sinks[] = {"random", "none", "0", "12", "-4"};
    snd_set(p, "sink", "%s", SND_PICK(r, sinks));
}

/* Prefill: small batches, every layer kind, softmax scales from 1e-3 to
 * 0.3, invalid entries now and then. */
static void snd_shape_prefill(dsv4_rng *r, snd_params *p)
{
    static const int heads[] = {1, 2, 4, 8, 16}, ratios[] = {0, 4, 4, 128}, windows[] = {1, 2, 3, 4, 8, 16, 128};
    const int nreq = (int)snd_int(r, 1, 3);
    snd_set(p, "num_heads", "%d", SND_PICK(r, heads));
    snd_set(p, "compress_ratio", "%d", SND_PICK(r, ratios));
    snd_set(p, "topk", "%" PRId64, snd_int(r, 1, 48));
    snd_set(p, "window_size", "%d", SND_PICK(r, windows));
    snd_list(r, p, "query_lens", nreq, 1, 5);
    snd_list(r, p, "prefix_lens", nreq, 0, 300);
    snd_set(p, "scale", "%.17g", dsv4_rng_uniform(r) < 0.3 ? 0.044194173824159216 : snd_log_uniform(r, 1e-3, 0.3));
    snd_sink(r, p);
    if (dsv4_rng_uniform(r) < 0.3)
        snd_set(p, "invalid_frac", "%.3f", 0.6 * dsv4_rng_uniform(r));
}

/* The held-out class: one to three valid keys per row (SWA-only layers with
 * a window of 1..3, some entries invalid), softmax scales from 1e-4 to
 * 0.05: weights near 1 and near powers of two of the bf16 grid. */
static void snd_shape_prefill_few_keys(dsv4_rng *r, snd_params *p)
{
    static const int heads[] = {1, 2, 4, 8};
    const int nreq = (int)snd_int(r, 1, 2);
    snd_set(p, "num_heads", "%d", SND_PICK(r, heads));
    snd_set(p, "compress_ratio", "0");
    snd_set(p, "window_size", "%" PRId64, snd_int(r, 1, 3));
    snd_list(r, p, "query_lens", nreq, 1, 4);
    snd_list(r, p, "prefix_lens", nreq, 0, 6);
    snd_set(p, "scale", "%.17g", snd_log_uniform(r, 1e-4, 0.05));
    snd_sink(r, p);
    if (dsv4_rng_uniform(r) < 0.3)
        snd_set(p, "invalid_frac", "%.3f", 0.4 * dsv4_rng_uniform(r));
}

/* The paged ops (decode: one token per request; sparse_mla_fwd: prefill
 * rows off the caches). */
static void snd_shape_paged(dsv4_rng *r, snd_params *p, int decode)
{
    static const int heads[] = {1, 2, 4, 8, 16}, windows[] = {1, 2, 3, 8, 16, 64};
    const int nreq = (int)snd_int(r, 1, 3), swa_only = dsv4_rng_uniform(r) < 0.3;
    snd_set(p, "num_heads", "%d", SND_PICK(r, heads));
    snd_set(p, "swa_only", "%d", swa_only);
    snd_set(p, "compress_ratio", "%d", dsv4_rng_uniform(r) < 0.7 ? 4 : 128);
    snd_set(p, "topk", "%" PRId64, snd_int(r, 1, 40));
    snd_set(p, "window_size", "%d", SND_PICK(r, windows));
    snd_list(r, p, "query_lens", nreq, 1, decode ? 1 : 4);
    snd_list(r, p, "prefix_lens", nreq, 0, 400);
    snd_set(p, "scale", "%.17g", dsv4_rng_uniform(r) < 0.3 ? 0.044194173824159216 : snd_log_uniform(r, 1e-3, 0.3));
    snd_sink(r, p);
    if (dsv4_rng_uniform(r) < 0.3)
        snd_set(p, "invalid_frac", "%.3f", 0.5 * dsv4_rng_uniform(r));
}
static void snd_shape_decode(dsv4_rng *r, snd_params *p) { snd_shape_paged(r, p, 1); }
static void snd_shape_sparse_mla(dsv4_rng *r, snd_params *p) { snd_shape_paged(r, p, 0); }

/* ---- RoPE in fp32 --------------------------------------------------------- */

/* a*c + sign*b*s in fp32 as a kernel may evaluate it: 0 two rounded
 * products and a rounded sum, 1 the first product fused, 2 the second. */
static float snd_rot(float a, float c, float b, float s, float sign, int form)
{
    volatile float p = a * c, q = sign * (b * s);
    switch (form) {
    case 1: return fmaf(a, c, q);
    case 2: return fmaf(sign * b, s, p);
    default: return p + q;
    }
}

/* Lanes [d0, d0 + rd) of a head row x (fp32, in place) rotated GPT-J style
 * at table row cs: inverse (e c + o s, o c - e s) or forward (e c - o s,
 * e s + o c), in the given form. */
static void snd_rope_f32(float *x, const float *cs, int rd, int inverse, int form)
{
    for (int k = 0; k < rd / 2; k++) {
        const float e = x[2 * k], o = x[2 * k + 1], c = cs[k], s = cs[rd / 2 + k];
        x[2 * k] = snd_rot(e, c, o, s, inverse ? 1.0f : -1.0f, form);
        x[2 * k + 1] = snd_rot(o, c, e, s, inverse ? -1.0f : 1.0f, form);
    }
}

/* The body of an inverse-RoPE model: the rows, positions and cos/sin table
 * r, already read from the inputs and checked. */
#define SND_ROPE_BODY(name)                                                                                   \
    static int snd_body_##name(const dsv4_opctx *c, const dsv4_rope_io *r, dsv4_tensors *out, dsv4_rng *var, \
                               int bias, dsv4_status *st)

/* Defines snd_model_<name> (a snd_model_fn) for the body snd_body_<name>:
 * the op's own reading of its inputs (a failure as the op's), then the body;
 * both read only the inputs, so op and exp go unread. */
#define SND_ROPE_MODEL(name)                                                                                  \
    static int snd_model_##name(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,               \
                                const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias,          \
                                dsv4_status *st)                                                              \
    {                                                                                                         \
        dsv4_rope_io r;                                                                                       \
        (void)op, (void)exp;                                                                                  \
        const int rc = dsv4_rope_inputs_of(c, in, &r, st);                                                   \
        return rc ? rc : snd_body_##name(c, &r, out, var, bias, st);                                         \
    }

/* rocm_inverse_rope_rows: rows >= rotated, lanes 448.. rotated in fp32,
 * each lane rounded to bf16; the rest untouched (out holds the input). */
SND_ROPE_BODY(inv_rope_rows)
{
    (void)c, (void)st;
    uint16_t *o = dsv4_tensors_find(out, "o")->data;
    const int form = (int)snd_int(var, 0, 2);
    for (int64_t t = r->rotated; t < r->T; t++) {
        const float *cs = (const float *)r->cs->data + ((const int64_t *)r->pos->data)[t] * r->rd;
        for (int64_t h = 0; h < r->H; h++) {
            uint16_t *row = o + (t * r->H + h) * SND_D + (SND_D - r->rd);
            float x[SND_D];
            for (int d = 0; d < r->rd; d++)
                x[d] = dsv4_bf16_to_f32(row[d]);
            snd_rope_f32(x, cs, r->rd, 1, form);
            for (int d = 0; d < r->rd; d++)
                row[d] = dsv4_bf16_from_f32(bias ? snd_bf16_up(x[d]) : x[d]);
        }
    }
    return DSV4_OK;
}
SND_ROPE_MODEL(inv_rope_rows)

/* rocm_inverse_rope_mxfp8_rows: the fp32 rows (RoPE lanes rotated in fp32,
 * not rounded), then MXFP8 by the variant's rule; bias moves the rotated
 * lanes up one bf16 ulp before the quantization. */
SND_ROPE_BODY(inv_rope_mxfp8)
{
    const int64_t rows = r->T * r->H;
    float *x = malloc((size_t)(rows * SND_D + 1) * sizeof *x);
    if (!x)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    const int form = (int)snd_int(var, 0, 2);
    const uint16_t *o = r->o->data;
    for (int64_t i = 0; i < rows * SND_D; i++)
        x[i] = dsv4_bf16_to_f32(o[i]);
    for (int64_t t = 0; t < r->T; t++) {
        const float *cs = (const float *)r->cs->data + ((const int64_t *)r->pos->data)[t] * r->rd;
        for (int64_t h = 0; h < r->H; h++) {
            float *lanes = x + (t * r->H + h) * SND_D + (SND_D - r->rd);
            snd_rope_f32(lanes, cs, r->rd, 1, form);
            for (int d = 0; bias && d < r->rd; d++)
                lanes[d] = (float)((double)lanes[d] + dsv4_ulp(DSV4_BF16, (double)lanes[d]));
        }
    }
    uint8_t *data = dsv4_tensors_find(out, "data")->data, *scale = dsv4_tensors_find(out, "scale")->data;
    const int rc = dsv4_mx_quant_rows_fp8(x, rows, SND_D, *(const dsv4_mx_rule *)c->rule, data, scale, st);
    free(x);
    return rc;
}
SND_ROPE_MODEL(inv_rope_mxfp8)

static void snd_shape_inv_rope(dsv4_rng *r, snd_params *p)
{
    static const int positions[] = {4, 64, 512, 4096};
    static const double thetas[] = {10000, 160000};
    const int64_t T = snd_int(r, 1, 8);
    snd_set(p, "num_tokens", "%" PRId64, T);
    snd_set(p, "num_heads", "%" PRId64, snd_int(r, 1, 8));
    snd_set(p, "rotated", "%" PRId64, snd_int(r, 0, T));
    snd_set(p, "max_position", "%d", SND_PICK(r, positions));
    snd_set(p, "rope_theta", "%g", SND_PICK(r, thetas));
}

static void snd_shape_inv_rope_mxfp8(dsv4_rng *r, snd_params *p)
{
    static const int positions[] = {4, 64, 512, 4096};
    snd_set(p, "num_tokens", "%" PRId64, snd_int(r, 1, 6));
    snd_set(p, "num_heads", "%" PRId64, snd_int(r, 1, 8));
    snd_set(p, "max_position", "%d", SND_PICK(r, positions));
    snd_set(p, "specials", "%" PRId64, snd_int(r, 0, 1));
}

/* ---- the GEMM family --------------------------------------------------------- */

/* The four inputs a GEMM-family model reads, by name; fails naming the
 * model when one is missing. */
static int snd_four_inputs(const dsv4_tensors *in, const char *const names[4], const dsv4_tensor *t[4],
                           const char *model, dsv4_status *st)
{
    for (int i = 0; i < 4; i++)
        if (!(t[i] = dsv4_tensors_get(in, names[i])))
            return dsv4_fail(st, DSV4_EINPUT, "%s model: inputs missing", model);
    return DSV4_OK;
}

/* The body of a GEMM-family model: its four inputs t, in the order of their
 * names, already fetched. */
#define SND_FOUR_INPUT_BODY(name)                                                                             \
    static int snd_body_##name(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensor *const t[4],        \
                               dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st)

/* Defines snd_model_<name> (a snd_model_fn) for the body snd_body_<name>:
 * the four inputs in0..in3 fetched by name (a failure names the model), then
 * the body on them; the GEMM family recomputes every output, so exp goes
 * unread. */
#define SND_FOUR_INPUT_MODEL(name, in0, in1, in2, in3)                                                        \
    static int snd_model_##name(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,               \
                                const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias,          \
                                dsv4_status *st)                                                              \
    {                                                                                                         \
        static const char *const names[4] = {in0, in1, in2, in3};                                            \
        const dsv4_tensor *t[4];                                                                              \
        (void)exp;                                                                                            \
        const int rc = snd_four_inputs(in, names, t, #name, st);                                             \
        return rc ? rc : snd_body_##name(op, c, t, out, var, bias, st);                                      \
    }

/* Two fp32 scratch buffers of na and nb elements (one more each, so that an
 * empty shape still allocates): both, or neither and an error. */
static int snd_two_buffers(float **a, int64_t na, float **b, int64_t nb, dsv4_status *st)
{
    *a = malloc((size_t)(na + 1) * sizeof **a);
    *b = malloc((size_t)(nb + 1) * sizeof **b);
    if (*a && *b)
        return DSV4_OK;
    free(*a), free(*b);
    *a = *b = NULL;
    return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
}

/* gemm_a8w8_blockscale: per 128-wide K block the fp32 dot P of the exact fp8
 * products in one of the orders, then acc += fl(P xs) ws (Triton) or
 * acc = fma(P, fl(xs ws), acc) (a kernel that folds the two scales); bf16. */
SND_FOUR_INPUT_BODY(gemm)
{
    const dsv4_tensor *xq = t[0], *wq = t[1], *xs = t[2], *ws = t[3];
    const int64_t M = xq->shape[0], K = xq->shape[1], N = wq->shape[0], KB = K / 128;
    const int shuffled = !strcmp(dsv4_op_variant_name(op, c->variant), "bpreshuffle");
    const dsv4_fp8_kind kind = xq->dtype == DSV4_F8E4M3FNUZ ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
    const int order = (int)snd_int(var, 0, SND_DOT_ORDERS - 1), fold = (int)snd_int(var, 0, 1);
    float *a, *b;
    int rc = snd_two_buffers(&a, K, &b, N * K, st);
    if (rc)
        return rc;
    const uint8_t *xb = xq->data, *wb = wq->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            b[n * K + k] = dsv4_fp8_to_f32(wb[shuffled ? dsv4_shuffle_index(n, k, K, 1) : n * K + k], kind);
    const float *xsd = xs->data, *wsd = ws->data;
    uint16_t *y = dsv4_tensors_find(out, "Y")->data;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++)
            a[k] = dsv4_fp8_to_f32(xb[m * K + k], kind);
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t kb = 0; kb < KB; kb++) {
                const float P = snd_dot(a + kb * 128, b + n * K + kb * 128, 128, 1, order);
                const float sx = xsd[shuffled ? kb * M + m : m * KB + kb], sw = wsd[(n / 128) * KB + kb];
                acc = fold ? fmaf(P, sx * sw, acc) : acc + (P * sx) * sw;
            }
            y[m * N + n] = dsv4_bf16_from_f32(bias ? snd_bf16_up(acc) : acc);
        }
    }
    free(a), free(b);
    return DSV4_OK;
}
SND_FOUR_INPUT_MODEL(gemm, "XQ", "WQ", "x_scale", "w_scale")

static void snd_shape_gemm(dsv4_rng *r, snd_params *p)
{
    snd_set(p, "M", "%" PRId64, snd_int(r, 1, 12));
    snd_set(p, "N", "%" PRId64, 16 * snd_int(r, 1, 16));
    snd_set(p, "K", "%" PRId64, 128 * snd_int(r, 1, 4));
    snd_set(p, "act_scale", "%.6g", snd_log_uniform(r, 1e-3, 30));
    snd_set(p, "w_std", "%.6g", snd_log_uniform(r, 1e-3, 1));
    if (dsv4_rng_uniform(r) < 0.2)
        snd_set(p, "big_rows", "[0]");
    if (dsv4_rng_uniform(r) < 0.2)
        snd_set(p, "zero_rows", "[1]");
}

/* rocm_inv_rope_einsum: o_r = o, or with the last 64 lanes of every head
 * rotated inversely in fp32 and rounded to bf16; out = fp32 dots over Dg
 * lanes (bf16 products exact in fp32) in one of the orders; bf16. */
SND_FOUR_INPUT_BODY(einsum)
{
    (void)op;
    const dsv4_tensor *o = t[0], *pos = t[1], *cs = t[2], *w = t[3];
    const int64_t T = o->shape[0], H = o->shape[1], G = dsv4_params_int(c->params, "n_local_groups");
    const int64_t R = dsv4_params_int(c->params, "o_lora_rank"), Dg = H * SND_D / G;
    const int rd = (int)dsv4_params_int(c->params, "rope_head_dim"), inv = dsv4_params_int(c->params, "inverse_rope");
    const int order = (int)snd_int(var, 0, SND_DOT_ORDERS - 1), form = (int)snd_int(var, 0, 2);
    float *x, *wf;
    int rc = snd_two_buffers(&x, H * SND_D, &wf, G * R * Dg, st);
    if (rc)
        return rc;
    for (int64_t i = 0; i < G * R * Dg; i++)
        wf[i] = dsv4_bf16_to_f32(((const uint16_t *)w->data)[i]);
    uint16_t *y = dsv4_tensors_find(out, "out")->data;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < H * SND_D; i++)
            x[i] = dsv4_bf16_to_f32(((const uint16_t *)o->data)[t * H * SND_D + i]);
        for (int64_t h = 0; inv && h < H; h++) {
            float *lanes = x + h * SND_D + (SND_D - rd);
            snd_rope_f32(lanes, (const float *)cs->data + ((const int64_t *)pos->data)[t] * rd, rd, 1, form);
            for (int d = 0; d < rd; d++)
                lanes[d] = dsv4_round_bf16(lanes[d]);
        }
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                const float v = snd_dot(x + g * Dg, wf + (g * R + r) * Dg, Dg, 1, order);
                y[t * G * R + g * R + r] = dsv4_bf16_from_f32(bias ? snd_bf16_up(v) : v);
            }
    }
    free(x), free(wf);
    return DSV4_OK;
}
SND_FOUR_INPUT_MODEL(einsum, "o", "positions", "cos_sin_cache", "wo_a")

static void snd_shape_einsum(dsv4_rng *r, snd_params *p)
{
    static const int heads[] = {1, 2, 4}, groups[] = {1, 2, 4}, ranks[] = {8, 32, 64};
    snd_set(p, "num_tokens", "%" PRId64, snd_int(r, 1, 4));
    snd_set(p, "num_heads", "%d", SND_PICK(r, heads));
    snd_set(p, "n_local_groups", "%d", SND_PICK(r, groups));
    snd_set(p, "o_lora_rank", "%d", SND_PICK(r, ranks));
    snd_set(p, "inverse_rope", "%" PRId64, snd_int(r, 0, 1));
}

/* rocm_mxfp8_wo_a_bmm: per 32-lane block the fp32 dot of the raw e4m3
 * values times 2^(sa + sw - 254) (exact), blocks accumulated in fp32; or the
 * dequantized values dotted straight through; bf16. */
SND_FOUR_INPUT_BODY(bmm)
{
    (void)op;
    const dsv4_tensor *a = t[0], *as = t[1], *w = t[2], *ws = t[3];
    const int64_t T = a->shape[0], G = dsv4_params_int(c->params, "n_local_groups");
    const int64_t R = dsv4_params_int(c->params, "o_lora_rank"), K = w->shape[1], KB = K / 32;
    const int order = (int)snd_int(var, 0, SND_DOT_ORDERS - 1), blocked = (int)snd_int(var, 0, 1);
    float *av, *wv;
    int rc = snd_two_buffers(&av, K, &wv, K, st);
    if (rc)
        return rc;
    const uint8_t *ab = a->data, *asb = as->data, *wb = w->data, *wsb = ws->data;
    uint16_t *y = dsv4_tensors_find(out, "out")->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                const int64_t wr = g * R + r;
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    av[k] = dsv4_fp8_to_f32(ab[t * G * K + g * K + k], DSV4_FP8_E4M3FN);
                    wv[k] = dsv4_fp8_to_f32(wb[wr * K + k], DSV4_FP8_E4M3FN);
                    if (!blocked) { /* dequantized first: exact powers of two */
                        av[k] = ldexpf(av[k], asb[t * G * KB + g * KB + k / 32] - 127);
                        wv[k] = ldexpf(wv[k], wsb[wr * KB + k / 32] - 127);
                    }
                }
                if (blocked)
                    for (int64_t kb = 0; kb < KB; kb++)
                        acc += ldexpf(snd_dot(av + kb * 32, wv + kb * 32, 32, 1, order),
                                      asb[t * G * KB + g * KB + kb] + wsb[wr * KB + kb] - 254);
                else
                    acc = snd_dot(av, wv, K, 1, order);
                y[t * G * R + wr] = dsv4_bf16_from_f32(bias ? snd_bf16_up(acc) : acc);
            }
    free(av), free(wv);
    return DSV4_OK;
}
SND_FOUR_INPUT_MODEL(bmm, "a", "a_scale", "wo_a", "wo_a_scale")

static void snd_shape_bmm(dsv4_rng *r, snd_params *p)
{
    static const int ranks[] = {8, 32, 64};
    snd_set(p, "num_tokens", "%" PRId64, snd_int(r, 1, 4));
    snd_set(p, "n_local_groups", "%" PRId64, snd_int(r, 1, 2));
    snd_set(p, "o_lora_rank", "%d", SND_PICK(r, ranks));
    snd_set(p, "K", "%" PRId64, 32 * snd_int(r, 1, 16));
}

/* fused_qnorm_rope_kv_insert, q: fp32 sum of squares in one of the orders,
 * mean (exact), + eps, an rsqrt within one fp32 ulp (v_rsq), x * r, the
 * forward RoPE in fp32, bf16; the cache is the reference's (exact). */
static int snd_model_qnorm(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensors *exp,
                           dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st)
{
    (void)op;
    const dsv4_tensor *q = dsv4_tensors_get(in, "q"), *pos = dsv4_tensors_get(in, "positions");
    const dsv4_tensor *cs = dsv4_tensors_get(in, "cos_sin_cache"), *cache = dsv4_tensors_get(exp, "swa_cache");
    if (!q || !pos || !cs || !cache)
        return dsv4_fail(st, DSV4_EINPUT, "qnorm model: inputs missing");
    memcpy(dsv4_tensors_find(out, "swa_cache")->data, cache->data, cache->nbytes);
    const int64_t T = q->shape[0], H = q->shape[1];
    const float eps = (float)dsv4_params_float(c->params, "eps");
    const int order = (int)snd_int(var, 0, SND_DOT_ORDERS - 1), form = (int)snd_int(var, 0, 2);
    uint16_t *y = dsv4_tensors_find(out, "q")->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float x[SND_D];
            for (int d = 0; d < SND_D; d++)
                x[d] = dsv4_bf16_to_f32(((const uint16_t *)q->data)[(t * H + h) * SND_D + d]);
            const float ms = snd_dot(x, x, SND_D, 1, order) * (1.0f / SND_D);
            float r = 1.0f / sqrtf(ms + eps);
            r = nextafterf(r, dsv4_rng_uniform(var) < 0.5 ? 0.0f : INFINITY); /* an approximate rsqrt */
            for (int d = 0; d < SND_D; d++)
                x[d] *= r;
            snd_rope_f32(x + (SND_D - 64), (const float *)cs->data + ((const int64_t *)pos->data)[t] * 64, 64, 0,
                         form);
            for (int d = 0; d < SND_D; d++)
                y[(t * H + h) * SND_D + d] = dsv4_bf16_from_f32(bias ? snd_bf16_up(x[d]) : x[d]);
        }
    return DSV4_OK;
}

static void snd_shape_qnorm(dsv4_rng *r, snd_params *p)
{
    static const double eps[] = {1e-6, 1e-20, 1e-2};
    const int64_t T = snd_int(r, 1, 6);
    snd_set(p, "num_tokens", "%" PRId64, T);
    snd_set(p, "num_heads", "%" PRId64, snd_int(r, 1, 8));
    snd_set(p, "eps", "%g", SND_PICK(r, eps));
    snd_set(p, "kv_scale", "%.6g", snd_log_uniform(r, 1e-3, 100));
}

/* ---- models that are an op's own faithful variant ----------------------------- */

/* The reference of the variant named in var_name (the faithful one) on the
 * same inputs, in the kernel's dtypes. */
static int snd_model_variant(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const char *var_name,
                             dsv4_tensors *out, dsv4_status *st)
{
    const int v = dsv4_op_variant(op, var_name);
    if (v < 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s has no variant %s", op->name, var_name);
    const dsv4_opctx cf = dsv4_opctx_make(op, c->params, v, c->seed);
    dsv4_tensors f = {0};
    int rc = dsv4_reference_outputs(op, &cf, in, &f, st);
    for (int k = 0; !rc && k < out->n; k++) {
        dsv4_tensor *o = &out->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(&f, o->name);
        if (!e || dsv4_tensor_numel(e) != dsv4_tensor_numel(o))
            rc = dsv4_fail(st, DSV4_EINPUT, "variant %s: output %s missing", var_name, o->name);
        else if (e->dtype == o->dtype)
            memcpy(o->data, e->data, o->nbytes);
        else
            for (int64_t i = 0; i < dsv4_tensor_numel(o); i++)
                dsv4_tensor_set(o, i, dsv4_tensor_get(e, i));
    }
    dsv4_tensors_free(&f);
    return rc;
}

static int snd_model_faithful(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                              const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st)
{
    (void)exp, (void)var, (void)bias;
    return snd_model_variant(op, c, in, "mode=faithful", out, st);
}

static void snd_shape_logits(dsv4_rng *r, snd_params *p)
{
    static const int heads[] = {32, 64}, ratios[] = {4, 4, 128};
    const int nreq = (int)snd_int(r, 1, 3);
    snd_set(p, "heads", "%d", SND_PICK(r, heads));
    snd_set(p, "compress_ratio", "%d", SND_PICK(r, ratios));
    snd_list(r, p, "seq_lens", nreq, 4, 1200);
    snd_list(r, p, "query_lens", nreq, 1, 3);
    snd_set(p, "wild", "%d", dsv4_rng_uniform(r) < 0.2 ? 1 : 0);
    snd_set(p, "shuffle", "%" PRId64, snd_int(r, 0, 1));
}

static void snd_shape_fused_qk(dsv4_rng *r, snd_params *p)
{
    snd_set(p, "m", "%" PRId64, snd_int(r, 1, 4));
    snd_set(p, "n1", "%" PRId64, 128 * snd_int(r, 1, 12));
    snd_set(p, "n2", "%" PRId64, 128 * snd_int(r, 1, 4));
    snd_set(p, "scale", "%.6g", snd_log_uniform(r, 1e-3, 100));
}

/* ---- the compressor --------------------------------------------------------------- */

/* compressor, kv_cache: the state rows as the reference leaves them (one
 * fp32 add each: exact), then per emitting token and dim the softmax over
 * the window in fp32 (expf, sums in order), RMSNorm in fp32 (the sum of
 * squares in one of the orders, 1/sqrtf, (y r) w), the forward RoPE at
 * (pos // c) * c in fp32, and the 584-byte encode of those fp32 values. */
static int snd_model_compressor(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                                const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st)
{
    (void)op;
    const dsv4_tensor *pos = dsv4_tensors_get(in, "positions"), *qsl = dsv4_tensors_get(in, "query_start_loc");
    const dsv4_tensor *ssm = dsv4_tensors_get(in, "state_slot_mapping"), *sbt = dsv4_tensors_get(in, "state_block_table");
    const dsv4_tensor *nw = dsv4_tensors_get(in, "norm_weight"), *cs = dsv4_tensors_get(in, "cos_sin_cache");
    const dsv4_tensor *bt = dsv4_tensors_get(in, "block_table"), *state = dsv4_tensors_get(exp, "state_cache");
    dsv4_tensor *kc = dsv4_tensors_find(out, "kv_cache");
    if (!pos || !qsl || !ssm || !sbt || !nw || !cs || !bt || !state || !kc)
        return dsv4_fail(st, DSV4_EINPUT, "compressor model: inputs missing");
    memcpy(dsv4_tensors_find(out, "state_cache")->data, state->data, state->nbytes);
    const int64_t ratio = dsv4_params_int(c->params, "compress_ratio"), coff = dsv4_compressor_coff(ratio);
    const int64_t half = coff * 512, W2 = 2 * half, nu = coff * ratio, Bs = dsv4_compressor_state_block(ratio);
    const float eps = (float)dsv4_params_float(c->params, "eps");
    const int order = (int)snd_int(var, 0, SND_DOT_ORDERS - 1), form = (int)snd_int(var, 0, 2);
    dsv4_compressor_args a;
    memset(&a, 0, sizeof a);
    a.ratio = ratio;
    a.T = pos->shape[0];
    a.R = qsl->shape[0] - 1;
    a.positions = pos->data;
    a.query_start_loc = qsl->data;
    a.state_slots = ssm->data;
    a.block_table = bt->data;
    a.max_blocks = bt->shape[1];
    a.num_blocks = kc->shape[0];
    const float *sd = state->data, *w = nw->data;
    const int32_t *q0 = qsl->data, *sb = sbt->data;
    int rc = DSV4_OK;
    for (int64_t t = 0; t < a.T && !rc; t++) {
        int64_t page, row, r = 0;
        if (!dsv4_compressor_emit_row(&a, t, &page, &row))
            continue;
        while (r + 1 < a.R + 1 && t >= q0[r + 1])
            r++;
        const int64_t p_t = a.positions[t];
        float y[512];
        for (int d = 0; d < 512; d++) {
            float m = -INFINITY, z = 0.0f, s = 0.0f;
            const float *kvr[256], *scr[256];
            for (int64_t u = 0; u < nu; u++) {
                const int64_t p = p_t - nu + 1 + u, off = (coff == 2 && u >= ratio) ? 512 : 0;
                kvr[u] = scr[u] = NULL;
                if (p < 0)
                    continue;
                const int64_t ri = (int64_t)sb[r * sbt->shape[1] + p / Bs] * Bs + p % Bs;
                kvr[u] = sd + ri * W2 + off;
                scr[u] = sd + ri * W2 + half + off;
                m = scr[u][d] > m ? scr[u][d] : m;
            }
            for (int64_t u = 0; u < nu; u++)
                if (scr[u]) {
                    const float e = expf(scr[u][d] - m);
                    z += e;
                    s = fmaf(e, kvr[u][d], s);
                }
            y[d] = s / z;
        }
        const float inv = 1.0f / sqrtf(snd_dot(y, y, 512, 1, order) / 512.0f + eps);
        for (int d = 0; d < 512; d++)
            y[d] = (y[d] * inv) * w[d];
        snd_rope_f32(y + 448, (const float *)cs->data + (p_t / ratio * ratio) * 64, 64, 0, form);
        for (int d = 0; bias && d < 512; d++)
            y[d] = (float)((double)y[d] + dsv4_ulp(DSV4_BF16, (double)y[d]));
        const dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
        rc = dsv4_kv_encode_token((uint8_t *)kc->data + page * (256 / ratio) * DSV4_KV_TOKEN_BYTES, 256 / ratio, row,
                                  y, &o, st);
    }
    return rc;
}

static void snd_shape_compressor(dsv4_rng *r, snd_params *p)
{
    const int nreq = (int)snd_int(r, 1, 3), c4 = dsv4_rng_uniform(r) < 0.7;
    snd_set(p, "compress_ratio", "%d", c4 ? 4 : 128);
    snd_list(r, p, "query_lens", nreq, 1, c4 ? 12 : 140);
    snd_list(r, p, "prefix_lens", nreq, 0, c4 ? 20 : 130);
    snd_set(p, "prefix_steps", "%" PRId64, snd_int(r, 1, 3));
    snd_set(p, "score_scale", "%.4g", snd_log_uniform(r, 0.1, 8));
}

/* ---- the table ------------------------------------------------------------------- */

/* {label, op, variant, shape, model, model doc, cases (make soundness),
 *  bias by model, bias only this output} */
static const snd_entry snd_entries[] = {
    {"rocm_sparse_attn_prefill", "rocm_sparse_attn_prefill", "default", snd_shape_prefill, snd_model_attention,
     "online softmax in blocks of 16/32/64 keys, fp32 dots in 5 orders, p -> bf16 before P.V, l of fp32 p, "
     "sink merged last", 1000, 0, NULL},
    {"rocm_sparse_attn_prefill: 1-3 keys, scale 1e-4..0.05", "rocm_sparse_attn_prefill", "default",
     snd_shape_prefill_few_keys, snd_model_attention, "the same model on the held-out class", 10000, 0, NULL},
    {"rocm_sparse_attn_decode", "rocm_sparse_attn_decode", "default", snd_shape_decode, snd_model_attention,
     "split-K (1-4 splits) online softmax, natural or base-2 exp, p -> bf16, reduce with the sink", 1000, 0, NULL},
    {"rocm_sparse_attn_decode [fp8=fnuz]", "rocm_sparse_attn_decode", "fp8=fnuz", snd_shape_decode,
     snd_model_attention, "as above, FNUZ SWA cache", 300, 0, NULL},
    {"sparse_mla_fwd", "sparse_mla_fwd", "default", snd_shape_sparse_mla, snd_model_attention,
     "split-K online softmax over both caches, p -> bf16", 1000, 0, NULL},
    {"rocm_inverse_rope_rows", "rocm_inverse_rope_rows", "default", snd_shape_inv_rope, snd_model_inv_rope_rows,
     "fp32 rotation, products rounded or either one fused, bf16", 1000, 1, NULL},
    {"rocm_inverse_rope_mxfp8_rows", "rocm_inverse_rope_mxfp8_rows", "default", snd_shape_inv_rope_mxfp8,
     snd_model_inv_rope_mxfp8, "fp32 rotation (3 contractions), MXFP8 of the fp32 rows", 1000, 1, NULL},
    {"rocm_inverse_rope_mxfp8_rows [log2=exact]", "rocm_inverse_rope_mxfp8_rows", "log2=exact",
     snd_shape_inv_rope_mxfp8, snd_model_inv_rope_mxfp8, "as above, exact scale rule", 300, 1, NULL},
    {"rocm_inverse_rope_mxfp8_rows [scale_rule=floor]", "rocm_inverse_rope_mxfp8_rows", "scale_rule=floor",
     snd_shape_inv_rope_mxfp8, snd_model_inv_rope_mxfp8, "as above, floor scale rule", 300, 1, NULL},
    {"gemm_a8w8_blockscale", "gemm_a8w8_blockscale", "default", snd_shape_gemm, snd_model_gemm,
     "per K block an fp32 dot in 5 orders, acc += fl(P xs) ws or fma(P, xs ws, acc), bf16", 1000, 0, NULL},
    {"gemm_a8w8_blockscale [bpreshuffle]", "gemm_a8w8_blockscale", "bpreshuffle", snd_shape_gemm, snd_model_gemm,
     "as above, read through the (16,16) shuffle and transposed x_scale", 300, 0, NULL},
    {"gemm_a8w8_blockscale [fp8=fnuz]", "gemm_a8w8_blockscale", "fp8=fnuz", snd_shape_gemm, snd_model_gemm,
     "as above, FNUZ codes", 300, 0, NULL},
    {"rocm_inv_rope_einsum", "rocm_inv_rope_einsum", "default", snd_shape_einsum, snd_model_einsum,
     "bf16 of the fp32 inverse rotation (3 contractions), fp32 dots over Dg in 5 orders, bf16", 1000, 0, NULL},
    {"rocm_mxfp8_wo_a_bmm", "rocm_mxfp8_wo_a_bmm", "default", snd_shape_bmm, snd_model_bmm,
     "fp32 dots per 32-block then scaled, or of the dequantized values, 5 orders, bf16", 1000, 0, NULL},
    {"fused_qnorm_rope_kv_insert", "fused_qnorm_rope_kv_insert", "default", snd_shape_qnorm, snd_model_qnorm,
     "fp32 sum of squares in 5 orders, rsqrt one ulp off, fp32 RoPE (3 contractions), bf16", 1000, 0, "q"},
    {"paged_mxfp4_mqa_logits", "paged_mxfp4_mqa_logits", "default", snd_shape_logits, snd_model_faithful,
     "the op's mode=faithful variant (per-MFMA fp32 rounding, the head fold with FMA)", 1000, 0, NULL},
    {"fused_qk_rmsnorm_group_quant", "fused_qk_rmsnorm_group_quant", "default", snd_shape_fused_qk,
     snd_model_faithful, "the op's mode=faithful variant (sequential fp32 FMA, 1/sqrtf, bf16 kv)", 1000, 0, "kv_out"},
    {"compressor", "compressor", "default", snd_shape_compressor, snd_model_compressor,
     "fp32 window softmax (expf), fp32 RMSNorm (5 orders), fp32 RoPE, the 584-byte encode", 1000, 1, NULL},
};

#define SND_ENTRIES ((int)(sizeof snd_entries / sizeof snd_entries[0]))

#endif
