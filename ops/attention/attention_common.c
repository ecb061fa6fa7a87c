/* attention_common.c - what the attention ops share (attention.h).
 * Semantics: ref/attention.c (docs/semantics/attention.md A8, A9).
 *
 * Tolerance of the attention output (rocm_sparse_attn_*, sparse_mla_fwd):
 * the golden is the double-precision ideal (stored as float32).  A correct
 * kernel (docs/semantics/attention.md A8.3, A8.4 [S9]: online softmax in
 * blocks, split-K, natural or base-2 exp) differs from it, per element
 * (t, h, d), with w_i the sink-normalised weights, A = sum_i w_i |V_i,d|,
 * A_top = w_top |V_top,d| the share of the highest-scoring key and n the
 * row's valid keys, by at most delta:
 *  - p rounded to bf16 before P.V (l keeps fp32 p): relative error <= u_bf16
 *    = 2^-8 per weight (RNE to 8 significant bits; p just above a power of
 *    two of the grid comes close to it), so <= 2^-8 (A - A_top): the key
 *    the kernel finds highest has p = exp(0) = 1, exact in bf16.  When that
 *    is not the ideal's top key (fp32 scores within 2 delta_s of each
 *    other), the top key's p lies in [e^{-2 delta_s}, 1] and rounds by at
 *    most 2 delta_s: covered by the next term once more;
 *  - fp32 scores: |ds_i| <= gamma_512 scale |q|.|K_i| + 2^-24 |s_i|
 *    <= delta_s = 513 2^-24 scale ||q|| max_i ||K_i|| (Cauchy-Schwarz); each
 *    normalised weight moves by a factor within e^{+-2 delta_s}, so
 *    <= (e^{2 delta_s} - 1) A; twice, for the top key above;
 *  - fp32 sums, exp and rescales: each weight reaches acc and l through its
 *    exp (2u), n additions (gamma_n), and per later key block or split a
 *    rescale (the rounded factor is common to acc and l, so only its 2
 *    products count, plus its exp where splits are merged): at most one
 *    block per key, so (8n + 16) 2^-24 A for numerator, denominator, the
 *    final division and the scale product;
 *  - the float32 golden: 2^-24 |e|, and the fp32 division once more: 2^-23 |e|.
 * The p term is reached: a key with p just above a power of two of the
 * bf16 grid, rounded by the full half ulp, whose V the exact top key's
 * cancels, errs by 2^-8 (A - A_top) itself.  It is charged at 5/4 of that
 * (P_CHARGE), as the bf16 store is charged a whole ulp where half is reached
 * (dsv4_bf16_store_bound: a correct kernel's bf16 is a neighbour of its
 * fp32 value), so that a correct kernel stays at <= 0.8 of the bound
 * whatever its inputs, while a kernel one ulp off still fails on rows led
 * by one key (A - A_top small).  Hence
 *   delta = 2^-23 |e| + 5/4 2^-8 (A - A_top) + (2 (e^{2 delta_s} - 1) + (8n + 16) 2^-24) A,
 *   bound = 1 ulp_bf16(|e| + delta) + delta.  Rows with no valid key have A = 0, e = 0: they must be 0 (to one
 * bf16 subnormal).  A keeps the bound proportional to the output's
 * magnitude, not to max|V|.  tests/soundness.h measures the bound against
 * a kernel model on 13,300 cases (docs/semantics/attention.md, "Error bound
 * of the attention output"). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compare/attn_hints.h"
#include "../../ref/kvcache.h"
#include "attention.h"

#define D DSV4_HEAD_DIM

/* ------------------------------------------------------------------ */
/* Generators                                                          */

/* NoPE lanes: fp8 times a power-of-two block scale is exact in bf16
 * (docs/semantics/kvcache.md A4); RoPE lanes plain bf16 (A2.1). */
void dsv4_attn_gen_key_row(dsv4_rng *rng, uint16_t *row)
{
    for (int blk = 0; blk < DSV4_NOPE_DIM / 64; blk++) {
        double sc = ldexp(1.0, (int)dsv4_rng_range(rng, -2, 2));
        for (int d = blk * 64; d < blk * 64 + 64; d++) {
            float v = dsv4_fp8_to_f32(dsv4_fp8_from_f32((float)(dsv4_rng_normal(rng) * 2.0), DSV4_FP8_E4M3FN, 1),
                                      DSV4_FP8_E4M3FN);
            row[d] = dsv4_bf16_from_f32((float)(v * sc));
        }
    }
    for (int d = DSV4_NOPE_DIM; d < D; d++)
        row[d] = dsv4_bf16_from_f32((float)dsv4_rng_normal(rng));
}

/* q after the q-norm has rows of RMS about 1 (docs/semantics/gemm.md A3). */
void dsv4_attn_gen_q(dsv4_rng *rng, uint16_t *q, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        q[i] = dsv4_bf16_from_f32((float)dsv4_rng_normal(rng));
}

/* "random" = randn*10 per head (a dropped sink then moves the output well
 * beyond tolerance), "none" = -inf (no sink, docs/semantics/attention.md
 * A8.1), or a number for every head. */
int dsv4_attn_gen_sink(const char *mode, uint64_t seed, float *sink, int64_t H, dsv4_status *st)
{
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, "attn_sink");
    char *end;
    double v = strtod(mode, &end);
    int number = end != mode && *end == '\0';
    if (strcmp(mode, "random") && strcmp(mode, "none") && strcmp(mode, "-inf") && !number)
        return dsv4_fail(st, DSV4_EINPUT, "sink = '%s': random, none, -inf or a number", mode);
    for (int64_t h = 0; h < H; h++)
        sink[h] = !strcmp(mode, "random") ? (float)(dsv4_rng_normal(&rng) * 10.0)
                  : number               ? (float)v
                                         : -INFINITY;
    return DSV4_OK;
}

int dsv4_attn_gen_params_of(const dsv4_params *ps, dsv4_attn_gen_params *g, dsv4_status *st)
{
    g->H = dsv4_params_int(ps, "num_heads");
    g->W = dsv4_params_int(ps, "window_size");
    g->compress_ratio = dsv4_params_int(ps, "compress_ratio");
    g->topk = dsv4_params_int(ps, "topk");
    return dsv4_req_shape_of(ps, (int64_t)1 << 20, (int64_t)1 << 24, 1, &g->rs, st);
}

/* ------------------------------------------------------------------ */
/* The ops over dsv4_ref_sparse_attn                                   */

int dsv4_attn_args_of_op(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a,
                         dsv4_status *st)
{
    if (op == &dsv4_op_rocm_sparse_attn_prefill)
        return dsv4_attn_args_prefill(c, in, a, st);
    if (op == &dsv4_op_rocm_sparse_attn_decode)
        return dsv4_attn_args_decode(c, in, a, st);
    if (op == &dsv4_op_sparse_mla_fwd)
        return dsv4_attn_args_sparse_mla(c, in, a, st);
    return dsv4_fail(st, DSV4_EINPUT, "op %s is not an attention op", op ? op->name : "(none)");
}

int dsv4_attn_op_validate(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    return rc ? rc : dsv4_attn_check(&a, st);
}

int dsv4_attn_op_alloc(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                       dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[3] = {a.T, a.H, D};
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "output", DSV4_BF16, 3, shape, &o, st)))
        return rc;
    dsv4_poison(o); /* the kernels write every element, zeros included */
    return DSV4_OK;
}

int dsv4_attn_op_reference(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                           dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    if (rc)
        return rc;
    dsv4_tensor *o = dsv4_tensors_find(out, "output");
    const int64_t n = a.T * a.H * D;
    double *ideal = malloc((size_t)(n ? n : 1) * sizeof *ideal);
    if (!ideal)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!(rc = dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, NULL, st)))
        dsv4_tensor_set_all(o, ideal, n);
    free(ideal);
    return rc;
}

/* The whole bound is per element (dsv4_attn_op_bound). */
int dsv4_attn_op_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                        dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    dsv4_policy_float(pol, DSV4_BF16,
                      "1 ulp_bf16(|e|+d) + d, d = 2^-23|e| + 5/4 2^-8 (A - A_top) (bf16 p, the top key's exact) "
                      "+ (2(e^{2 ds}-1) + (8n+16)2^-24) A (fp32 scores, sums), A = sum_i w_i|V_i,d|, n keys");
    /* Flipping q[..., d] and the keys' lane d together keeps every score
     * bit for bit and flips output lane d; the generators draw those signs
     * fairly (docs/semantics/attention.md A8.6). */
    dsv4_policy_sign_test(pol);
    return DSV4_OK;
}

/* The charge for the bf16 rounding of p: 5/4 of its unit roundoff 2^-8
 * (the derivation at the top). */
#define P_CHARGE (1.25 * 0x1p-8)

double dsv4_attn_elem_bound(double e, double A, double A_top, int64_t nvalid, double score_mag)
{
    const double u32 = 0x1p-24, delta_s = 513.0 * u32 * score_mag;
    const double rest = A - A_top > 0 ? A - A_top : 0.0; /* A_top <= A up to the rounding of the dgemm */
    const double delta = 0x1p-23 * fabs(e) + P_CHARGE * rest +
                         (2.0 * expm1(2.0 * delta_s) + (8.0 * (double)nvalid + 16.0) * u32) * A;
    return dsv4_bf16_store_bound(e, delta);
}

/* The ideal attention of a's rows, run for the diagnostics dg asks for. */
static int attn_diagnose(const dsv4_attn_args *a, dsv4_attn_diag *dg, dsv4_status *st)
{
    const int64_t n = a->T * a->H * D;
    double *ideal = malloc((size_t)(n ? n : 1) * sizeof *ideal);
    if (!ideal)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = dsv4_ref_sparse_attn(a, DSV4_ATTN_IDEAL, ideal, dg, st);
    free(ideal);
    return rc;
}

/* The whole bound of every element (derivation at the top). */
int dsv4_attn_op_bound(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, double *bound, int64_t n,
                       dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    if (rc)
        return rc;
    if (n != a.T * a.H * D)
        return dsv4_fail(st, DSV4_EINPUT, "attention bound: %" PRId64 " elements for [%" PRId64 ", %" PRId64
                         ", 512]", n, a.T, a.H);
    double *mag = malloc((size_t)(a.T * a.H + 1) * sizeof(double));
    double *ideal = malloc((size_t)(n + 1) * sizeof(double)), *top = malloc((size_t)(n + 1) * sizeof(double));
    int64_t *nv = malloc((size_t)(a.T + 1) * sizeof(int64_t));
    dsv4_attn_diag dg = {bound, NULL, nv, mag, top};
    if (!mag || !nv || !ideal || !top)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, &dg, st);
    for (int64_t t = 0; !rc && t < a.T; t++)
        for (int64_t h = 0; h < a.H; h++)
            for (int d = 0; d < D; d++) {
                const int64_t i = (t * a.H + h) * D + d;
                /* the golden is float32: its value, as the comparison sees it */
                bound[i] = dsv4_attn_elem_bound((double)(float)ideal[i], bound[i], top[i], nv[t], mag[t * a.H + h]);
            }
    free(mag), free(nv), free(ideal), free(top);
    return rc;
}

void dsv4_attn_op_hint(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in,
                       const dsv4_tensor *expected, const dsv4_tensor *actual, dsv4_cmp_result *res)
{
    dsv4_attn_args a;
    dsv4_status st = {0};
    if (fn(c, in, &a, &st))
        return;
    double *sw = malloc((size_t)(a.T * a.H + 1) * sizeof(double));
    int64_t *nv = malloc((size_t)(a.T + 1) * sizeof(int64_t));
    dsv4_attn_diag dg = {NULL, sw, nv, NULL, NULL};
    if (sw && nv && !attn_diagnose(&a, &dg, &st)) {
        dsv4_attn_rows rows = {a.T, a.H, D, sw, nv};
        dsv4_attn_hint(expected, actual, &rows, res);
    }
    free(sw), free(nv);
}

int dsv4_attn_thd_of(int64_t flat, int64_t T, int64_t H, int64_t *t, int64_t *h, int64_t *d)
{
    if (H < 1 || flat / (H * D) >= T)
        return 0;
    *t = flat / (H * D);
    *h = flat / D % H;
    *d = flat % D;
    return 1;
}

/* "token t, head h, dim d (NoPE|RoPE), n valid keys" */
void dsv4_attn_op_locate(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, int64_t flat,
                         char *buf, size_t len)
{
    dsv4_attn_args a;
    dsv4_status st = {0};
    int64_t t, h, d;
    buf[0] = '\0';
    if (fn(c, in, &a, &st) || !dsv4_attn_thd_of(flat, a.T, a.H, &t, &h, &d))
        return;
    snprintf(buf, len, "token %" PRId64 ", head %" PRId64 ", dim %" PRId64 " (%s), %" PRId64 " valid keys", t, h,
             d, d < DSV4_NOPE_DIM ? "NoPE" : "RoPE", dsv4_attn_count_valid(&a, t));
}

/* ------------------------------------------------------------------ */
/* The inverse-RoPE ops                                                */

int dsv4_rope_rows_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_rope_fill_fn fill_o, dsv4_tensor **o_out,
                            dsv4_tensor **pos_out, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "num_tokens"), H = dsv4_params_int(ps, "num_heads");
    const int64_t P = dsv4_params_int(ps, "max_position"), rd = dsv4_params_int(ps, "rope_head_dim");
    if (T < 0 || H < 1 || P < 1 || rd < 2 || rd > D || rd % 2)
        return dsv4_fail(st, DSV4_EINPUT, "num_tokens >= 0, num_heads >= 1, max_position >= 1, even rope_head_dim <= 512");
    dsv4_tensor *o, *pos, *cs;
    int64_t so[3] = {T, H, D}, scs[2] = {P, rd};
    int rc;
    if ((rc = dsv4_tensors_add(in, "o", DSV4_BF16, 3, so, &o, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "o");
    fill_o(&rng, o->data, T, H);
    dsv4_rng_init(&rng, c->seed, "positions");
    for (int64_t t = 0; t < T; t++)
        ((int64_t *)pos->data)[t] = dsv4_rng_range(&rng, 0, P);
    dsv4_gen_cos_sin(cs->data, P, (int)rd, dsv4_params_float(ps, "rope_theta"));
    if (o_out)
        *o_out = o;
    if (pos_out)
        *pos_out = pos;
    return DSV4_OK;
}

int dsv4_rope_inputs_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_rope_io *r, dsv4_status *st)
{
    int rc;
    if ((rc = dsv4_input(in, "o", DSV4_BF16, 3, &r->o, st)) ||
        (rc = dsv4_input(in, "positions", DSV4_I64, 1, &r->pos, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &r->cs, st)))
        return rc;
    r->T = r->o->shape[0];
    r->H = r->o->shape[1];
    r->rd = (int)dsv4_params_int(c->params, "rope_head_dim");
    r->rotated = dsv4_params_int(c->params, "rotated");
    if (r->o->shape[2] != D || r->pos->shape[0] != r->T || r->cs->shape[1] != r->rd)
        return dsv4_fail(st, DSV4_EINPUT,
                         "o must be [T, H, 512], positions [T] and cos_sin_cache [P, rope_head_dim = %d]", r->rd);
    return DSV4_OK;
}

int dsv4_rope_cos_sin_finite(const dsv4_rope_io *r, dsv4_status *st)
{
    const float *cs = r->cs->data;
    for (int64_t i = 0; i < dsv4_tensor_numel(r->cs); i++)
        if (!isfinite(cs[i]))
            return dsv4_fail(st, DSV4_EINPUT, "cos_sin_cache[%" PRId64 ", %" PRId64 "] is not finite",
                             i / r->rd, i % r->rd);
    return DSV4_OK;
}

/* ------------------------------------------------------------------ */
/* The paged-cache ops: ragged lists over the fp8_ds_mla caches         */
/* (main = SWA cache, extra = compressed)                               */

/* slot -> (slot // B, slot % B) (docs/semantics/kvcache.md A2.1), decoded
 * as NoPE bf16(fp8 * 2^(b-127)) (exact) + RoPE bf16
 * (docs/semantics/attention.md A8.4). */
static int paged_fetch(const void *ctx, int64_t slot, float *out, dsv4_status *st)
{
    (void)st;
    const dsv4_paged_src *p = ctx;
    dsv4_kv_decode_token_bf16_f32(p->bytes + (slot / p->B) * p->stride, p->B, slot % p->B, p->kind, out);
    return DSV4_OK;
}

/* The token's value, scale and RoPE bytes, ahead of paged_fetch. */
static void paged_prefetch(const void *ctx, int64_t slot)
{
#if defined(__GNUC__)
    const dsv4_paged_src *p = ctx;
    const uint8_t *page = p->bytes + (slot / p->B) * p->stride;
    const int64_t row = slot % p->B;
    for (int c = 0; c < DSV4_KV_NOPE_DIM; c += 64)
        __builtin_prefetch(page + dsv4_kv_value_offset(row) + c);
    __builtin_prefetch(page + dsv4_kv_scale_offset(p->B, row));
    __builtin_prefetch(page + dsv4_kv_rope_offset(row));
    __builtin_prefetch(page + dsv4_kv_rope_offset(row) + 64);
#else
    (void)ctx, (void)slot;
#endif
}

const dsv4_paged_attn_rule dsv4_paged_main_ocp = {DSV4_FP8_E4M3FN}, dsv4_paged_main_fnuz = {DSV4_FP8_E4M3FNUZ};

int dsv4_paged_args_of(const dsv4_paged_names *nm, const dsv4_opctx *c, const dsv4_tensors *in,
                       dsv4_paged_args *pa, dsv4_status *st)
{
    const dsv4_paged_attn_rule *rule = c->rule;
    const dsv4_tensor *q, *sink, *cache[2], *idx[2], *ptr[2];
    const char *cn[2] = {nm->main_cache, nm->extra_cache}, *in_[2] = {nm->main_idx, nm->extra_idx},
               *pn[2] = {nm->main_ptr, nm->extra_ptr};
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_BF16, 3, &q, st)) || (rc = dsv4_input(in, "attn_sink", DSV4_F32, 1, &sink, st)))
        return rc;
    memset(pa, 0, sizeof *pa);
    dsv4_attn_args *a = &pa->a;
    a->q = q->data;
    a->T = q->shape[0];
    a->H = q->shape[1];
    a->attn_sink = sink->data;
    a->scale = dsv4_params_float(c->params, "scale");
    if (q->shape[2] != D || sink->shape[0] < a->H)
        return dsv4_fail(st, DSV4_EINPUT, "q must be [T, H, 512] and attn_sink [>= H]");
    /* SWA-only layers have no extra segment (docs/semantics/attention.md A8.4). */
    a->nseg = dsv4_params_int(c->params, "swa_only") ? 1 : 2;
    for (int k = 0; k < a->nseg; k++) {
        if ((rc = dsv4_input(in, cn[k], DSV4_U8, 3, &cache[k], st)) ||
            (rc = dsv4_input(in, in_[k], DSV4_I32, 1, &idx[k], st)) ||
            (rc = dsv4_input(in, pn[k], DSV4_I32, 1, &ptr[k], st)))
            return rc;
        if (cache[k]->shape[2] != DSV4_KV_TOKEN_BYTES || ptr[k]->shape[0] != a->T + 1)
            return dsv4_fail(st, DSV4_EINPUT, "%s must be [pages, B, 584] and %s [T + 1 = %" PRId64 "]", cn[k],
                             pn[k], a->T + 1);
        dsv4_paged_src *s = &pa->src[k];
        s->bytes = cache[k]->data;
        s->B = cache[k]->shape[1];
        s->stride = s->B * DSV4_KV_TOKEN_BYTES; /* [nb, B, 584] allocation [S11] */
        /* The compressed cache is always OCP; the SWA cache is FNUZ on gfx942
         * (is_fnuz_main = platform, docs/semantics/kvcache.md A2.3 [S1, S4, S9]). */
        s->kind = k == 0 ? rule->main_fp8 : DSV4_FP8_E4M3FN;
        dsv4_attn_segment *g = &a->seg[k];
        g->name = cn[k];
        g->num_rows = cache[k]->shape[0] * s->B; /* cache.shape[0] * shape[1] (docs/semantics/attention.md A8.2) */
        g->fetch = paged_fetch;
        g->prefetch = paged_prefetch;
        g->fetch_ctx = s;
        g->scrub_nan = 1; /* NaN K -> 0 (docs/semantics/attention.md A8.4: non-gfx950 kernels always) */
        g->indices = idx[k]->data;
        g->indptr = ptr[k]->data;
        g->num_indices = idx[k]->shape[0];
    }
    return DSV4_OK;
}

/* Generation: per request r with positions [prefix, prefix + qlen), the
 * SWA cache holds every position (B = 64, random page order), the
 * compressed cache entries [0, S // c) (B = 256 / c); unused slots are
 * poisoned (fp8 NaN codes, scale 0xFF, NaN RoPE) to prove they are never
 * read.  Token lists: the window max(pos - W + 1, 0)..pos
 * (docs/semantics/indices.md A5.2), and the top-k compressed indices of
 * [0, (pos + 1) // c) (C4: random distinct, C128: the identity prefix, A5.5)
 * mapped through the block table (A5.7). */
/* Token `row` of a page as NaN: the fp8 NaN code of the page's format
 * (e4m3fn 0x7F; e4m3fnuz has one NaN, 0x80, and reads 0x7F as 240,
 * docs/semantics/numerics.md A1), NaN RoPE lanes and e8m0 NaN scales. */
static void poison_token(uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind)
{
    memset(page + dsv4_kv_value_offset(row), kind == DSV4_FP8_E4M3FNUZ ? 0x80 : 0x7F, DSV4_KV_NOPE_DIM);
    uint16_t nan = 0x7FC0;
    for (int d = 0; d < DSV4_ROPE_DIM; d++)
        memcpy(page + dsv4_kv_rope_offset(row) + 2 * d, &nan, 2);
    memset(page + dsv4_kv_scale_offset(B, row), 0xFF, DSV4_KV_NQBLOCKS); /* e8m0 NaN */
}

/* A random key row, encoded into token `row` of a page of B tokens. */
static int encode_key(dsv4_rng *rng, uint8_t *page, int64_t B, int64_t row, const dsv4_kv_encode_opts *enc,
                      dsv4_status *st)
{
    float x[D];
    uint16_t k[D];
    dsv4_attn_gen_key_row(rng, k);
    for (int d = 0; d < D; d++)
        x[d] = dsv4_bf16_to_f32(k[d]);
    return dsv4_kv_encode_token(page, B, row, x, enc, st);
}

typedef struct flat_list {
    int32_t *idx;
    int64_t n, cap;
} flat_list;

static int list_push(flat_list *l, int32_t v)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 256;
        int32_t *p = realloc(l->idx, (size_t)cap * sizeof *p);
        if (!p)
            return 1;
        l->idx = p, l->cap = cap;
    }
    l->idx[l->n++] = v;
    return 0;
}

int dsv4_paged_generate(const dsv4_paged_names *nm, const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_paged_attn_rule *rule = c->rule;
    const dsv4_params *ps = c->params;
    dsv4_attn_gen_params g;
    int rc = dsv4_attn_gen_params_of(ps, &g, st);
    if (rc)
        return rc;
    const dsv4_req_shape rs = g.rs;
    const int64_t H = g.H, W = g.W, ratio = g.compress_ratio, topk = g.topk;
    const int swa_only = dsv4_params_int(ps, "swa_only") != 0;
    if (H < 1 || W < 1 || (!swa_only && ratio != 4 && ratio != 128) || topk < 0)
        return dsv4_fail(st, DSV4_EINPUT, "num_heads >= 1, window_size >= 1, compress_ratio 4 or 128, topk >= 0");
    const int64_t B = 64, Bc = swa_only ? 2 : 256 / ratio; /* docs/semantics/kvcache.md A2.1 [S12, S13] */
    int64_t pages = 0, cpages = 0, maxc = 1;
    int64_t first_page[DSV4_PARAM_LIST_MAX], first_cpage[DSV4_PARAM_LIST_MAX];
    for (int64_t r = 0; r < rs.R; r++) {
        int64_t S = rs.prefix[r] + rs.qlen[r], nc = swa_only ? 0 : S / ratio;
        first_page[r] = pages, first_cpage[r] = cpages;
        pages += (S + B - 1) / B + 1; /* one spare, poisoned page per request */
        cpages += (nc + Bc - 1) / Bc + 1;
        maxc = nc + 1 > maxc ? nc + 1 : maxc;
    }
    dsv4_tensor *q, *sink, *cache[2];
    int64_t sq[3] = {rs.T, H, D}, sc0[3] = {pages, B, DSV4_KV_TOKEN_BYTES}, sc1[3] = {cpages, Bc, DSV4_KV_TOKEN_BYTES};
    if ((rc = dsv4_tensors_add(in, "q", DSV4_BF16, 3, sq, &q, st)) ||
        (rc = dsv4_tensors_add(in, nm->main_cache, DSV4_U8, 3, sc0, &cache[0], st)) ||
        (rc = dsv4_tensors_add(in, nm->extra_cache, DSV4_U8, 3, sc1, &cache[1], st)) ||
        (rc = dsv4_tensors_add(in, "attn_sink", DSV4_F32, 1, &H, &sink, st)))
        return rc;
    /* Every slot poisoned first; the used ones are then encoded. */
    for (int k = 0; k < 2; k++)
        for (int64_t p = 0; p < cache[k]->shape[0]; p++)
            for (int64_t i = 0; i < cache[k]->shape[1]; i++)
                poison_token((uint8_t *)cache[k]->data + p * cache[k]->shape[1] * DSV4_KV_TOKEN_BYTES,
                             cache[k]->shape[1], i, k == 0 ? rule->main_fp8 : DSV4_FP8_E4M3FN);
    /* Block tables: request r owns pages first_page[r].. in reversed order
     * (a non-identity mapping). */
    dsv4_rng rng, lrng;
    dsv4_rng_init(&rng, c->seed, "kv_cache");
    const dsv4_kv_encode_opts enc = dsv4_kv_encode_opts_default(rule->main_fp8 == DSV4_FP8_E4M3FNUZ);
    const dsv4_kv_encode_opts ocp = dsv4_kv_encode_opts_default(0); /* compressed cache: OCP [S1] */
    int32_t *scratch = malloc((size_t)maxc * sizeof *scratch);
    flat_list L[2] = {{0}, {0}};
    int32_t *ptrs[2] = {calloc((size_t)rs.T + 1, 4), calloc((size_t)rs.T + 1, 4)};
    if (!scratch || !ptrs[0] || !ptrs[1])
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t r = 0; !rc && r < rs.R; r++) {
        int64_t S = rs.prefix[r] + rs.qlen[r], nc = swa_only ? 0 : S / ratio;
        int64_t np = (S + B - 1) / B + 1, ncp = (nc + Bc - 1) / Bc + 1;
        for (int64_t pos = 0; pos < S && !rc; pos++) {
            int64_t page = first_page[r] + (np - 1 - pos / B);
            rc = encode_key(&rng, (uint8_t *)cache[0]->data + page * B * DSV4_KV_TOKEN_BYTES, B, pos % B, &enc, st);
        }
        for (int64_t ci = 0; ci < nc && !rc; ci++) {
            int64_t page = first_cpage[r] + (ncp - 1 - ci / Bc);
            rc = encode_key(&rng, (uint8_t *)cache[1]->data + page * Bc * DSV4_KV_TOKEN_BYTES, Bc, ci % Bc, &ocp,
                            st);
        }
    }
    dsv4_rng_init(&lrng, c->seed, "indices");
    const double inv = dsv4_params_float(ps, "invalid_frac"), oob = dsv4_params_float(ps, "oob_frac");
    int64_t t = 0;
    for (int64_t r = 0; !rc && r < rs.R; r++) {
        int64_t S = rs.prefix[r] + rs.qlen[r], nc = swa_only ? 0 : S / ratio;
        int64_t np = (S + B - 1) / B + 1, ncp = (nc + Bc - 1) / Bc + 1;
        for (int64_t i = 0; i < rs.qlen[r] && !rc; i++, t++) {
            int64_t pos = rs.prefix[r] + i, start = pos - W + 1 > 0 ? pos - W + 1 : 0;
            int empty = dsv4_params_list_has(ps, "empty_rows", t), nanrow = dsv4_params_list_has(ps, "nan_rows", t);
            for (int64_t p = start; p <= pos && !rc; p++) {
                int64_t slot = (first_page[r] + np - 1 - p / B) * B + p % B;
                if (nanrow && p == start)
                    slot = (first_page[r] + np - 1 - (S + B - 1) / B) * B; /* the spare, poisoned page */
                rc = list_push(&L[0], empty ? -1 : (int32_t)slot);
            }
            if (!swa_only) {
                int64_t n = (pos + 1) / ratio, take = n < topk ? n : topk;
                if (ratio == 4) /* distinct random indices: the first `take` of a shuffle */
                    dsv4_fill_topk_row(&lrng, scratch, take, n, scratch);
                for (int64_t j = 0; j < take && !rc; j++) {
                    int64_t v = ratio == 4 ? scratch[j] : j; /* C128: identity prefix (docs/semantics/indices.md A5.5) */
                    int64_t slot = (first_cpage[r] + ncp - 1 - v / Bc) * Bc + v % Bc;
                    rc = list_push(&L[1], empty ? -1 : (int32_t)slot);
                }
            }
            ptrs[0][t + 1] = (int32_t)L[0].n;
            ptrs[1][t + 1] = (int32_t)L[1].n;
        }
    }
    for (int k = 0; !rc && k < 2; k++)
        for (int64_t j = 0; j < L[k].n; j++) {
            double u = dsv4_rng_uniform(&lrng);
            int64_t rows = cache[k]->shape[0] * cache[k]->shape[1];
            if (u < inv)
                L[k].idx[j] = -1;
            else if (u < inv + oob)
                L[k].idx[j] = (j & 1) ? (int32_t)(rows + dsv4_rng_range(&lrng, 0, 100)) : -2;
        }
    dsv4_tensor *ti[2], *tp[2];
    const char *inames[2] = {nm->main_idx, nm->extra_idx}, *pnames[2] = {nm->main_ptr, nm->extra_ptr};
    for (int k = 0; !rc && k < 2; k++) {
        int64_t n = L[k].n, np1 = rs.T + 1;
        if ((rc = dsv4_tensors_add(in, inames[k], DSV4_I32, 1, &n, &ti[k], st)) ||
            (rc = dsv4_tensors_add(in, pnames[k], DSV4_I32, 1, &np1, &tp[k], st)))
            break;
        if (n)
            memcpy(ti[k]->data, L[k].idx, (size_t)n * 4);
        memcpy(tp[k]->data, ptrs[k], (size_t)np1 * 4);
    }
    free(scratch), free(L[0].idx), free(L[1].idx), free(ptrs[0]), free(ptrs[1]);
    if (rc)
        return rc;
    dsv4_rng_init(&rng, c->seed, "q");
    dsv4_attn_gen_q(&rng, q->data, rs.T * H * D);
    return dsv4_attn_gen_sink(dsv4_params_str(ps, "sink"), c->seed, sink->data, H, st);
}
