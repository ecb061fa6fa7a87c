/* rocm_mxfp4_indexer_q_quant.c - RoPE (at the token's position) + MXFP4 of
 * the index queries, the scales as one int32 per head, fp32 head weights
 * (docs/semantics/indexer.md Q4.2).  Reference: ref/indexer.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../ref/numerics.h"
#include "indexer.h"

static const char qq_params[] =
    "    softmax_scale float = 0.08838834764831845  index_weights_softmax_scale (head_dim^-0.5)\n"
    "    head_scale    float = 0.125                index_weights_head_scale (n_head^-0.5)\n"
    "gen T             int   required               generator: tokens\n"
    "gen H             int   = 64                   generator: index heads\n"
    "gen max_position  int   = 64                   generator: rows of cos_sin_cache\n"
    "gen scale         float = 1                    generator: magnitude of q\n";

static const char qq_inputs[] =
    "positions             int64     [T]\n"
    "index_q               bfloat16  [T, H, 128]\n"
    "index_q_cos_sin_cache float32   [max_pos, 64] cos | sin\n"
    "index_weights         float32   [T, H]\n";

static const char qq_outputs[] =
    "q_packed    uint8    [T, H, 64] e2m1 pairs, even element low\n"
    "q_scale     int32    [T, H] the 4 e8m0 bytes of a head as one little-endian int32\n"
    "weights_out float32  [T, H] fp32\n";

typedef struct qq_in {
    const dsv4_tensor *pos, *q, *cs, *w;
    dsv4_idx_qquant_args a;
} qq_in;

static int qq_args(const dsv4_opctx *c, const dsv4_tensors *in, qq_in *g, dsv4_status *st)
{
    const dsv4_idx_quant *quant = c->rule;
    int rc;
    if ((rc = dsv4_input(in, "positions", DSV4_I64, 1, &g->pos, st)) ||
        (rc = dsv4_input(in, "index_q", DSV4_BF16, 3, &g->q, st)) ||
        (rc = dsv4_input(in, "index_q_cos_sin_cache", DSV4_F32, 2, &g->cs, st)) ||
        (rc = dsv4_input(in, "index_weights", DSV4_F32, 2, &g->w, st)))
        return rc;
    const int64_t T = g->q->shape[0], H = g->q->shape[1];
    if (g->q->shape[2] != DSV4_IDX_HEAD_DIM || g->pos->shape[0] != T || g->w->shape[0] != T || g->w->shape[1] != H ||
        g->cs->shape[1] != DSV4_IDX_ROPE_DIM || H < 1 || H > 1024)
        return dsv4_fail(st, DSV4_EINPUT, "index_q [T, H, 128], positions [T], index_weights [T, H], "
                         "cos_sin_cache [P, 64] expected (D = 128: the scales form one int32 per head)");
    g->a = (dsv4_idx_qquant_args){g->q->data, g->pos->data, T, (int)H, DSV4_IDX_HEAD_DIM, g->cs->data, g->cs->shape[0],
                                  DSV4_IDX_ROPE_DIM, g->w->data, dsv4_params_float(c->params, "softmax_scale"),
                                  dsv4_params_float(c->params, "head_scale"), *quant};
    return DSV4_OK;
}

static int qq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    qq_in g;
    int rc = qq_args(c, in, &g, st);
    for (int64_t t = 0; !rc && t < g.a.T; t++)
        if (g.a.positions[t] < 0 || g.a.positions[t] >= g.a.num_pos)
            rc = dsv4_fail(st, DSV4_EINPUT, "positions[%" PRId64 "] = %" PRId64 " outside cos_sin_cache", t,
                           g.a.positions[t]);
    return rc;
}

static int qq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "T"), H = dsv4_params_int(ps, "H"), P = dsv4_params_int(ps, "max_position");
    const double scale = dsv4_params_float(ps, "scale");
    if (T < 0 || H < 1 || P < 1)
        return dsv4_fail(st, DSV4_EINPUT, "T >= 0, H >= 1, max_position >= 1");
    int64_t sq[3] = {T, H, DSV4_IDX_HEAD_DIM}, sw[2] = {T, H}, scs[2] = {P, DSV4_IDX_ROPE_DIM};
    dsv4_tensor *pos, *q, *cs, *w;
    int rc;
    if ((rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "index_q", DSV4_BF16, 3, sq, &q, st)) ||
        (rc = dsv4_tensors_add(in, "index_q_cos_sin_cache", DSV4_F32, 2, scs, &cs, st)) ||
        (rc = dsv4_tensors_add(in, "index_weights", DSV4_F32, 2, sw, &w, st)))
        return rc;
    dsv4_rng rp, rq, rc_, rw;
    dsv4_rng_init(&rp, c->seed, "positions");
    dsv4_rng_init(&rq, c->seed, "index_q");
    dsv4_rng_init(&rc_, c->seed, "index_q_cos_sin_cache");
    dsv4_rng_init(&rw, c->seed, "index_weights");
    for (int64_t t = 0; t < T; t++)
        ((int64_t *)pos->data)[t] = dsv4_rng_range(&rp, 0, P);
    uint16_t *qd = q->data;
    for (int64_t i = 0; i < T * H * DSV4_IDX_HEAD_DIM; i++) {
        const int64_t th = i / DSV4_IDX_HEAD_DIM, d = i % DSV4_IDX_HEAD_DIM;
        double v = dsv4_rng_normal(&rq) * scale;
        if (th % 11 == 5 && d < 32) /* a +-0 block: variant A's -0 -> 0x0 */
            v = (d & 1) ? -0.0 : 0.0;
        else if (th % 13 == 7 && d % 32 == 0) /* e2m1 ties after scaling: 0.25, 2.5, 5 */
            v = ldexp(5.0, (int)(d / 32) - 3);
        qd[i] = dsv4_bf16_from_f32((float)v);
    }
    dsv4_indexer_gen_cos_sin(&rc_, cs->data, P, DSV4_IDX_ROPE_DIM);
    for (int64_t i = 0; i < T * H; i++)
        ((float *)w->data)[i] = (float)(dsv4_rng_normal(&rw) * 0.5);
    return DSV4_OK;
}

static int qq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    qq_in g;
    int rc = qq_args(c, in, &g, st);
    if (rc)
        return rc;
    int64_t sp[3] = {g.a.T, g.a.H, DSV4_IDX_HEAD_DIM / 2}, ss[2] = {g.a.T, g.a.H};
    dsv4_tensor *p, *s, *w;
    if ((rc = dsv4_tensors_add(out, "q_packed", DSV4_U8, 3, sp, &p, st)) ||
        (rc = dsv4_tensors_add(out, "q_scale", DSV4_I32, 2, ss, &s, st)) ||
        (rc = dsv4_tensors_add(out, "weights_out", DSV4_F32, 2, ss, &w, st)))
        return rc;
    dsv4_poison(p);
    dsv4_poison(s);
    dsv4_poison(w);
    return DSV4_OK;
}

static int qq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    qq_in g;
    int rc = qq_args(c, in, &g, st);
    /* q_scale: the [T, H, 4] bytes viewed as int32 (a little-endian host, as the GPU). */
    return rc ? rc
              : dsv4_ref_indexer_q_quant(&g.a, dsv4_tensors_find(out, "q_packed")->data,
                                         dsv4_tensors_find(out, "q_scale")->data,
                                         dsv4_tensors_find(out, "weights_out")->data, st);
}

static int qq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    if (strcmp(output, "weights_out") == 0)
        dsv4_policy_exact(pol, "fp32 products with fp32-rounded constants (docs/semantics/indexer.md Q4.2; aiter: "
                               "weights exact)");
    else
        dsv4_policy_exact(pol, "MXFP4 codes and e8m0 scales of the bf16 RoPE output (docs/semantics/indexer.md Q4.2)");
    return DSV4_OK;
}

static void qq_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                      size_t len)
{
    const dsv4_tensor *q = dsv4_tensors_get(in, "index_q");
    (void)c;
    if (!q || q->ndim != 3)
        return;
    const int64_t H = q->shape[1];
    if (strcmp(output, "q_packed") == 0)
        snprintf(buf, len, "token %" PRId64 ", head %" PRId64 ", dims %" PRId64 ", %" PRId64 " (block %" PRId64 ", %s)",
                 flat / (H * 64), flat / 64 % H, 2 * (flat % 64), 2 * (flat % 64) + 1, flat % 64 / 16,
                 flat % 64 >= 32 ? "RoPE" : "NoPE");
    else
        snprintf(buf, len, "token %" PRId64 ", head %" PRId64, flat / H, flat % H);
}

const dsv4_op dsv4_op_rocm_mxfp4_indexer_q_quant = {
    .name = "rocm_mxfp4_indexer_q_quant",
    .summary = "RoPE (token position) + MXFP4 of the index queries; scales as one int32 per head; fp32 weights",
    .source = DSV4_INDEXER_SEED0 "; aiter rope/q_rope_mxfp4_quant.py@5677775a (docs/semantics/indexer.md Q4.2)",
    .variants = dsv4_indexer_quant_variants,
    DSV4_OP_SCHEMAS(qq),
    .generate = qq_generate,
    .validate = qq_validate,
    .alloc_outputs = qq_alloc,
    .reference = qq_reference,
    .policy = qq_policy,
    .locate = qq_locate,
};
