/* ops_indexer.c - registry entries of the paged MXFP4 indexer:
 * rocm_mxfp4_indexer_k_store, rocm_mxfp4_indexer_q_quant,
 * paged_mxfp4_mqa_logits, rocm_mxfp4_sparse_attn_indexer and
 * rocm_mxfp4_sparse_mqa_indexer.  Semantics: ref/indexer.c; spec
 * quant_and_indexer.md 4-6; seeds 000 and 002. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/indexer.h"
#include "../ref/numerics.h"
#include "../ops/ops.h"
#include "rng.h"

#define SEED0 "vllm:vllm/models/deepseek_v41/amd/rocm.py (seed 000)"
#define SEED2 "vllm:vllm/model_executor/layers/rocm_paged_mxfp4_indexer.py (seed 002)"
#define U32 0x1p-24 /* fp32 unit roundoff */

/* ------------------------------------------------------------------ */
/* Shared helpers                                                      */

/* A bit-reproducible cos|sin table: c uniform in [-1, 1], s = +-sqrt(1 - c^2)
 * (IEEE sqrt is correctly rounded; libm's cos/sin are not portable). */
static void gen_cos_sin(dsv4_rng *rng, float *cs, int64_t P, int R)
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

/* Names a byte of an indexer cache [pages, page_entries, D/2 + D/32]. */
static void locate_cache(const dsv4_idx_layout *L, int64_t flat, char *buf, size_t len)
{
    const int64_t pb = dsv4_idx_page_bytes(L), page = flat / pb;
    int64_t entry;
    int is_scale, idx;
    dsv4_idx_locate_byte(L, flat % pb, &entry, &is_scale, &idx);
    if (is_scale)
        snprintf(buf, len, "page %" PRId64 ", entry %" PRId64 " (slot %" PRId64 "), scale %d (dims %d..%d)", page,
                 entry, page * L->page_entries + entry, idx, 32 * idx, 32 * idx + 31);
    else
        snprintf(buf, len, "page %" PRId64 ", entry %" PRId64 " (slot %" PRId64 "), value byte %d (dims %d, %d; block %d)",
                 page, entry, page * L->page_entries + entry, idx, 2 * idx, 2 * idx + 1, idx / 16);
}

static const char *const quant_variants[] = {"default", "quant=cache_a", NULL};
static const char *const quant_variant_docs[] = {
    "aiter fusions/k_norm_rope_mxfp4_cache + rope/q_rope_mxfp4_quant as the seed calls them (" SEED0
    "; spec 4 variant B): _mxfp4_quant_op SCALING_MODE 1 bit rule, v_cvt RNE e2m1 (-0 -> 0x8), "
    "Q weights fl(w * fl32(softmax_scale * head_scale))",
    "aiter attention/pa_mqa_logits_mxfp4_cache.py (spec 4 variant A, 4.3): ceil(log2_f32) scale, threshold "
    "e2m1 (-0 -> 0x0), Q weights fl(fl(w * fl32(softmax_scale)) * fl32(head_scale))",
};

/* ------------------------------------------------------------------ */
/* rocm_mxfp4_indexer_k_store                                          */

static const dsv4_param_spec ks_params[] = {
    {"num_heads", DSV4_P_INT, "64", "index heads: picks the layout's n_per_tile (spec 5.1)", 0},
    {"head_dim", DSV4_P_INT, "128", "D (index head 128 = 64 NoPE + 64 RoPE)", 0},
    {"page_entries", DSV4_P_INT, "32", "cache entries per page (block_size / compress_ratio)", 0},
    {"shuffle", DSV4_P_INT, "1", "1: the preshuffle rocm_paged_mxfp4_cache_layout gives; 0: natural order", 0},
    {"compress_ratio", DSV4_P_INT, "4", "only tokens with (pos + 1) % c == 0 write (spec 4.1 step 1)", 0},
    {"rms_norm_eps", DSV4_P_FLOAT, "1e-6", "k_norm epsilon (vLLM passes 1e-6)", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: tokens of each request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: positions before each request's tokens", 1},
    {"spare_pages", DSV4_P_INT, "1", "generator: poisoned pages nobody writes", 1},
    {"invalid_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens given a negative slot", 1},
    {"scale", DSV4_P_FLOAT, "1", "generator: magnitude of k_pre", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec ks_inputs[] = {
    {"k_pre", DSV4_BF16, DSV4_DT_NONE, "[T, D] keys before the norm"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T] token positions"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_pos, 64] cos | sin"},
    {"rms_norm_weight", DSV4_BF16, DSV4_DT_NONE, "[D] k_norm weight"},
    {"kv_slot_mapping", DSV4_I64, DSV4_DT_NONE, "[T] compressed slots, < 0 = skip"},
    {"k_cache", DSV4_U8, DSV4_DT_NONE, "[pages, page_entries, D/2 + D/32] before the store"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec ks_outputs[] = {
    {"k_cache", DSV4_U8, DSV4_DT_NONE, "[pages, page_entries, D/2 + D/32] after (untouched entries keep their bytes)"},
    {NULL, 0, 0, NULL},
};

typedef struct ks_in {
    const dsv4_tensor *k, *pos, *cs, *w, *slots, *cache;
    dsv4_idx_layout L;
    dsv4_idx_kstore_args a;
} ks_in;

static int ks_args(const dsv4_opctx *c, const dsv4_tensors *in, ks_in *g, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int D = (int)dsv4_params_int(ps, "head_dim");
    int rc;
    if ((rc = dsv4_input(in, "k_pre", DSV4_BF16, 2, &g->k, st)) ||
        (rc = dsv4_input(in, "positions", DSV4_I64, 1, &g->pos, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &g->cs, st)) ||
        (rc = dsv4_input(in, "rms_norm_weight", DSV4_BF16, 1, &g->w, st)) ||
        (rc = dsv4_input(in, "kv_slot_mapping", DSV4_I64, 1, &g->slots, st)) ||
        (rc = dsv4_input(in, "k_cache", DSV4_U8, 3, &g->cache, st)) ||
        (rc = dsv4_idx_layout_make((int)dsv4_params_int(ps, "num_heads"), D, dsv4_params_int(ps, "page_entries"),
                                   (int)dsv4_params_int(ps, "shuffle"), &g->L, st)))
        return rc;
    const int64_t T = g->k->shape[0];
    if (g->k->shape[1] != D || g->pos->shape[0] != T || g->slots->shape[0] != T || g->w->shape[0] != D ||
        g->cs->shape[1] != DSV4_IDX_ROPE_DIM || g->cache->shape[1] != g->L.page_entries ||
        g->cache->shape[2] != dsv4_idx_entry_bytes(&g->L) || D > 1024)
        return dsv4_fail(st, DSV4_EINPUT, "k_pre [T, %d], positions [T], kv_slot_mapping [T], rms_norm_weight [%d], "
                         "cos_sin_cache [P, 64], k_cache [pages, %" PRId64 ", %" PRId64 "] expected",
                         D, D, g->L.page_entries, dsv4_idx_entry_bytes(&g->L));
    g->a = (dsv4_idx_kstore_args){g->k->data, g->pos->data, g->slots->data, T, g->cs->data, g->cs->shape[0],
                                  DSV4_IDX_ROPE_DIM, g->w->data, (float)dsv4_params_float(ps, "rms_norm_eps"),
                                  dsv4_params_int(ps, "compress_ratio"), g->cache->shape[0], &g->L,
                                  (dsv4_idx_quant)c->variant};
    return DSV4_OK;
}

static int ks_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    ks_in g;
    int rc = ks_args(c, in, &g, st);
    if (rc)
        return rc;
    const int64_t nslots = g.a.num_pages * g.L.page_entries, ratio = g.a.compress_ratio;
    if (ratio < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio %" PRId64 " must be >= 1", ratio);
    uint8_t *seen = calloc((size_t)(nslots ? nslots : 1), 1);
    if (!seen)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t t = 0; t < g.a.T && !rc; t++) {
        const int64_t s = g.a.slots[t], p = g.a.positions[t];
        if (p < 0 || p >= g.a.num_pos)
            rc = dsv4_fail(st, DSV4_EINPUT, "positions[%" PRId64 "] = %" PRId64 " outside cos_sin_cache [0, %" PRId64 ")",
                           t, p, g.a.num_pos);
        else if (s >= nslots)
            rc = dsv4_fail(st, DSV4_EINPUT, "kv_slot_mapping[%" PRId64 "] = %" PRId64 " >= pages*page_entries %" PRId64,
                           t, s, nslots);
        else if (s >= 0 && (p + 1) % ratio == 0 && seen[s]++)
            rc = dsv4_fail(st, DSV4_EINPUT, "kv_slot_mapping[%" PRId64 "] = %" PRId64 " is written twice", t, s);
    }
    for (int64_t d = 0; d < g.k->shape[0] * g.k->shape[1] && !rc; d++)
        if (isnan(dsv4_bf16_to_f32(((const uint16_t *)g.k->data)[d])))
            rc = dsv4_fail(st, DSV4_EINPUT, "k_pre element %" PRId64 " is NaN", d);
    free(seen);
    return rc;
}

static int ks_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t *ql, *pl;
    const int64_t R = dsv4_params_list(ps, "query_lens", &ql), np = dsv4_params_list(ps, "prefix_lens", &pl);
    const int64_t D = dsv4_params_int(ps, "head_dim"), P = dsv4_params_int(ps, "page_entries");
    const int64_t ratio = dsv4_params_int(ps, "compress_ratio"), spare = dsv4_params_int(ps, "spare_pages");
    const double inv = dsv4_params_float(ps, "invalid_frac"), scale = dsv4_params_float(ps, "scale");
    dsv4_idx_layout L;
    int rc = dsv4_idx_layout_make((int)dsv4_params_int(ps, "num_heads"), (int)D, P,
                                  (int)dsv4_params_int(ps, "shuffle"), &L, st);
    if (rc)
        return rc;
    if ((np && np != R) || ratio < 1 || spare < 0 || D != DSV4_IDX_HEAD_DIM)
        return dsv4_fail(st, DSV4_EINPUT, "prefix_lens must match query_lens; compress_ratio >= 1; head_dim 128");
    int64_t T = 0, pages = spare, maxpos = 1, blk[DSV4_PARAM_LIST_MAX];
    for (int64_t r = 0; r < R; r++) {
        const int64_t pre = np ? pl[r] : 0;
        if (ql[r] < 0 || pre < 0 || pre + ql[r] > (1 << 20))
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": query_lens / prefix_lens out of range", r);
        T += ql[r];
        blk[r] = ((pre + ql[r]) / ratio + P - 1) / P; /* pages of the request's compressed entries */
        pages += blk[r];
        maxpos = pre + ql[r] > maxpos ? pre + ql[r] : maxpos;
    }
    int64_t sk[2] = {T, D}, scs[2] = {maxpos, DSV4_IDX_ROPE_DIM}, sc[3] = {pages, P, dsv4_idx_entry_bytes(&L)};
    dsv4_tensor *k, *pos, *cs, *w, *sm, *kc;
    if ((rc = dsv4_tensors_add(in, "k_pre", DSV4_BF16, 2, sk, &k, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)) ||
        (rc = dsv4_tensors_add(in, "rms_norm_weight", DSV4_BF16, 1, &D, &w, st)) ||
        (rc = dsv4_tensors_add(in, "kv_slot_mapping", DSV4_I64, 1, &T, &sm, st)) ||
        (rc = dsv4_tensors_add(in, "k_cache", DSV4_U8, 3, sc, &kc, st)))
        return rc;
    dsv4_rng rk, rc_, rw, rs, rp;
    dsv4_rng_init(&rk, c->seed, "k_pre");
    dsv4_rng_init(&rc_, c->seed, "cos_sin_cache");
    dsv4_rng_init(&rw, c->seed, "rms_norm_weight");
    dsv4_rng_init(&rs, c->seed, "kv_slot_mapping");
    dsv4_rng_init(&rp, c->seed, "k_cache");
    uint16_t *kd = k->data, *wd = w->data;
    for (int64_t i = 0; i < T * D; i++) {
        /* a zero or tiny row now and then: the amax floors of the scale rules */
        double v = dsv4_rng_normal(&rk) * scale * ((i / D) % 7 == 3 ? 1e-30 : 1.0);
        kd[i] = dsv4_bf16_from_f32((float)v);
    }
    for (int64_t d = 0; d < D; d++)
        wd[d] = dsv4_bf16_from_f32((float)(1.0 + 0.25 * dsv4_rng_normal(&rw)));
    gen_cos_sin(&rc_, cs->data, maxpos, DSV4_IDX_ROPE_DIM);
    memset(kc->data, 0x5A, kc->nbytes); /* poison: untouched entries must keep it */
    int32_t *perm = malloc((size_t)(pages ? pages : 1) * sizeof *perm);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t p = 0; p < pages; p++)
        perm[p] = (int32_t)p;
    dsv4_rng_shuffle_i32(&rp, perm, pages); /* non-contiguous pages per request */
    int64_t t = 0, used = 0, *pd = pos->data, *sd = sm->data;
    for (int64_t r = 0; r < R; r++) {
        const int64_t pre = np ? pl[r] : 0;
        for (int64_t i = 0; i < ql[r]; i++, t++) {
            const int64_t p = pre + i, ci = p / ratio; /* the group's compressed index */
            pd[t] = p;
            /* every token carries its group's slot; only the last of a group writes */
            sd[t] = (int64_t)perm[used + ci / P] * P + ci % P;
            if (dsv4_rng_uniform(&rs) < inv)
                sd[t] = -1 - dsv4_rng_range(&rs, 0, 3); /* -1, -2, -3: negative slots skip */
        }
        used += blk[r];
    }
    free(perm);
    return DSV4_OK;
}

static int ks_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    ks_in g;
    dsv4_tensor *o;
    int rc = ks_args(c, in, &g, st);
    if (rc || (rc = dsv4_tensors_add(out, "k_cache", DSV4_U8, 3, g.cache->shape, &o, st)))
        return rc;
    memcpy(o->data, g.cache->data, o->nbytes); /* in/out buffer */
    return DSV4_OK;
}

static int ks_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    ks_in g;
    int rc = ks_args(c, in, &g, st);
    return rc ? rc : dsv4_ref_indexer_k_store(&g.a, dsv4_tensors_find(out, "k_cache")->data, st);
}

/* The cache bytes are exact for the reference; a kernel's RMSNorm order,
 * v_rsq and RoPE contraction may move a bf16 ulp and so flip a code or a
 * scale: the aiter test accepts >= 99.5% equal bytes (spec 4.3), which is
 * this budget (WARN, not FAIL, within it). */
static int ks_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    dsv4_policy_exact(pol, "cache bytes; <= 0.5% may differ as a warning (aiter k-store test, spec 4.3)");
    pol->budget = 0.005;
    return DSV4_OK;
}

static void ks_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                      size_t len)
{
    ks_in g;
    dsv4_status st = {0};
    (void)output;
    if (ks_args(c, in, &g, &st) == DSV4_OK)
        locate_cache(&g.L, flat, buf, len);
}

const dsv4_op dsv4_op_rocm_mxfp4_indexer_k_store = {
    .name = "rocm_mxfp4_indexer_k_store",
    .summary = "RMSNorm + RoPE (group start) + MXFP4 of index keys into the paged, preshuffled MXFP4 cache",
    .source = SEED0 "; aiter fusions/k_norm_rope_mxfp4_cache.py@689b79d5 (spec 4.1, 5.1)",
    .variants = quant_variants,
    .variant_docs = quant_variant_docs,
    .params = ks_params,
    .inputs = ks_inputs,
    .outputs = ks_outputs,
    .generate = ks_generate,
    .validate = ks_validate,
    .alloc_outputs = ks_alloc,
    .reference = ks_reference,
    .policy = ks_policy,
    .locate = ks_locate,
};

/* ------------------------------------------------------------------ */
/* rocm_mxfp4_indexer_q_quant                                          */

static const dsv4_param_spec qq_params[] = {
    {"softmax_scale", DSV4_P_FLOAT, "0.08838834764831845", "index_weights_softmax_scale (head_dim^-0.5)", 0},
    {"head_scale", DSV4_P_FLOAT, "0.125", "index_weights_head_scale (n_head^-0.5)", 0},
    {"T", DSV4_P_INT, NULL, "generator: tokens", 1},
    {"H", DSV4_P_INT, "64", "generator: index heads", 1},
    {"max_position", DSV4_P_INT, "64", "generator: rows of cos_sin_cache", 1},
    {"scale", DSV4_P_FLOAT, "1", "generator: magnitude of q", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec qq_inputs[] = {
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T]"},
    {"index_q", DSV4_BF16, DSV4_DT_NONE, "[T, H, 128]"},
    {"index_q_cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_pos, 64] cos | sin"},
    {"index_weights", DSV4_F32, DSV4_DT_NONE, "[T, H]"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec qq_outputs[] = {
    {"q_packed", DSV4_U8, DSV4_DT_NONE, "[T, H, 64] e2m1 pairs, even element low"},
    {"q_scale", DSV4_I32, DSV4_DT_NONE, "[T, H] the 4 e8m0 bytes of a head as one little-endian int32"},
    {"weights_out", DSV4_F32, DSV4_DT_NONE, "[T, H] fp32"},
    {NULL, 0, 0, NULL},
};

typedef struct qq_in {
    const dsv4_tensor *pos, *q, *cs, *w;
    dsv4_idx_qquant_args a;
} qq_in;

static int qq_args(const dsv4_opctx *c, const dsv4_tensors *in, qq_in *g, dsv4_status *st)
{
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
                                  dsv4_params_float(c->params, "head_scale"), (dsv4_idx_quant)c->variant};
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
    gen_cos_sin(&rc_, cs->data, P, DSV4_IDX_ROPE_DIM);
    for (int64_t i = 0; i < T * H; i++)
        ((float *)w->data)[i] = (float)(dsv4_rng_normal(&rw) * 0.5);
    return DSV4_OK;
}

static int qq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    qq_in g;
    int rc = qq_args(c, in, &g, st);
    int64_t sp[3] = {g.a.T, g.a.H, DSV4_IDX_HEAD_DIM / 2}, ss[2] = {g.a.T, g.a.H};
    dsv4_tensor *p, *s, *w;
    if (rc || (rc = dsv4_tensors_add(out, "q_packed", DSV4_U8, 3, sp, &p, st)) ||
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
        dsv4_policy_exact(pol, "fp32 products with fp32-rounded constants (spec 4.2; aiter: weights exact)");
    else
        dsv4_policy_exact(pol, "MXFP4 codes and e8m0 scales of the bf16 RoPE output (spec 4.2)");
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
    .source = SEED0 "; aiter rope/q_rope_mxfp4_quant.py@5677775a (spec 4.2)",
    .variants = quant_variants,
    .variant_docs = quant_variant_docs,
    .params = qq_params,
    .inputs = qq_inputs,
    .outputs = qq_outputs,
    .generate = qq_generate,
    .validate = qq_validate,
    .alloc_outputs = qq_alloc,
    .reference = qq_reference,
    .policy = qq_policy,
    .locate = qq_locate,
};

/* ------------------------------------------------------------------ */
/* The logits family: shared inputs, generator, bound                  */

#define LG_PARAMS                                                                                               \
    {"heads", DSV4_P_INT, "64", "index heads H (picks the layout's tiles too)", 0},                              \
    {"page_entries", DSV4_P_INT, "32", "keys per cache page", 0},                                                \
    {"shuffle", DSV4_P_INT, "1", "1: the preshuffled cache of rocm_paged_mxfp4_cache_layout; 0: natural", 0},    \
    {"max_model_len", DSV4_P_INT, "0", "logits width in compressed positions (0: the longest context)", 0},      \
    {"seq_lens", DSV4_P_INTLIST, NULL, "generator: tokens of each request (uncompressed)", 1},                   \
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query rows of each request (1 = decode)", 1},               \
    {"compress_ratio", DSV4_P_INT, "4", "generator: row end (pos+1)//c, context seq//c (spec 5.2)", 1},          \
    {"spare_pages", DSV4_P_INT, "2", "generator: NaN-poisoned pages nobody maps", 1},                            \
    {"wild", DSV4_P_INT, "0", "generator: 1 far-apart block scales (the exact fallback), 2 also NaN scales", 1}, \
    {"ties", DSV4_P_INT, "0", "generator: exact (even requests) and near (odd) ties at the k-th key", 1}

#define LG_INPUTS                                                                                  \
    {"q", DSV4_U8, DSV4_DT_NONE, "[rows, H, 64] e2m1 pairs"},                                      \
    {"q_scale", DSV4_I32, DSV4_DT_NONE, "[rows, H] 4 e8m0 bytes per head (little-endian int32)"},  \
    {"weights", DSV4_F32, DSV4_DT_NONE, "[rows, H] head weights"},                                 \
    {"kv_cache", DSV4_U8, DSV4_DT_NONE, "[pages, page_entries, 68] the paged MXFP4 cache"},        \
    {"context_lens", DSV4_I32, DSV4_DT_NONE, "[B] compressed"},                                    \
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[B, max_blocks]"},                                    \
    {"query_start_loc", DSV4_I32, DSV4_DT_NONE, "[B + 1] rows of each request"},                   \
    {"row_ends", DSV4_I32, DSV4_DT_NONE, "[rows] compressed end of each row"}

typedef struct lg_in {
    const dsv4_tensor *q, *qs, *w, *kc, *ctx, *bt, *qsl, *re;
    dsv4_idx_layout L;
    dsv4_idx_logits_args a;
} lg_in;

static int lg_args(const dsv4_opctx *c, const dsv4_tensors *in, lg_in *g, dsv4_status *st)
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
        return dsv4_fail(st, DSV4_EINPUT, "page_entries %" PRId64 ": the kernel needs a power of two (spec 6.1)", P);
    if ((rc = dsv4_idx_layout_make((int)H, DSV4_IDX_HEAD_DIM, P, (int)dsv4_params_int(ps, "shuffle"), &g->L, st)))
        return rc;
    g->a = (dsv4_idx_logits_args){g->q->data, g->qs->data, g->w->data, rows, (int)H, DSV4_IDX_HEAD_DIM,
                                  g->kc->data, g->kc->shape[0], &g->L, g->bt->data, g->bt->shape[1], g->ctx->data,
                                  g->qsl->data, B, g->re->data, dsv4_params_int(ps, "max_model_len")};
    return DSV4_OK;
}

static int lg_validate_args(const dsv4_opctx *c, const dsv4_tensors *in, lg_in *g, dsv4_status *st)
{
    int rc = lg_args(c, in, g, st);
    if (rc || (rc = dsv4_idx_logits_check(&g->a, st)))
        return rc;
    const float *w = g->a.weights;
    for (int64_t i = 0; i < g->a.rows * g->a.H; i++)
        if (!isfinite(w[i]))
            return dsv4_fail(st, DSV4_EINPUT, "weights element %" PRId64 " is not finite", i);
    return DSV4_OK;
}

static int lg_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    lg_in g;
    return lg_validate_args(c, in, &g, st);
}

/* max_model_len 0: the longest compressed context. */
static int lg_resolve(dsv4_params *ps, dsv4_status *st)
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

static int run_logits(const lg_in *g, dsv4_idx_mode mode, double **out, double **bound, dsv4_status *st)
{
    const size_t n = (size_t)(g->a.rows * g->a.width);
    *out = malloc((n ? n : 1) * sizeof **out);
    if (bound)
        *bound = malloc((n ? n : 1) * sizeof **bound);
    if (!*out || (bound && !*bound))
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    return dsv4_ref_mqa_logits(&g->a, mode, *out, bound ? *bound : NULL, st);
}

/* Ties: for odd requests the last q block gets a scale 2^-20 lower first
 * (so a key differing only there scores within the tolerance); then the
 * k-th best key of the request's last row is copied over its worst key
 * (exact tie), and for odd requests the copy's last block re-randomized
 * (near tie). */
static int make_ties(const dsv4_opctx *c, const dsv4_tensors *in, int64_t tie_k, dsv4_rng *rng, dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc)
        return rc;
    uint8_t *qs = (uint8_t *)g.qs->data, *cache = (uint8_t *)g.kc->data;
    for (int64_t b = 1; b < g.a.B; b += 2)
        for (int64_t r = g.a.query_start_loc[b]; r < g.a.query_start_loc[b + 1]; r++)
            for (int h = 0; h < g.a.H; h++)
                qs[(r * g.a.H + h) * 4 + 3] = (uint8_t)(qs[(r * g.a.H + h) * 4 + 3] - 20);
    double *lg = NULL;
    if ((rc = run_logits(&g, DSV4_IDX_IDEAL, &lg, NULL, st))) {
        free(lg);
        return rc;
    }
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

static int lg_generate(const dsv4_opctx *c, dsv4_tensors *in, int64_t tie_k, dsv4_status *st)
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

/* Error analysis of the fp32 kernel against the ideal (spec 6.2):
 * s_h = q_h.k: 128 exact products summed in fp32 in an unknown (MFMA)
 * order: |err| <= 128 u A_h, A_h = sum_d |q_hd k_d|; relu is 1-Lipschitz;
 * relu(s_h) w_h rounds once (<= u |w_h| A_h); the H-term head sum with FMA
 * <= H u sum_h |w_h| A_h; the final fl(A0 + A1) one more u.  So
 * |logit - ideal| <= (128 + H + 2) u sum_h |w_h| A_h, u = 2^-24.
 * Faithful mode models the per-MFMA rounding and the fold: what remains is
 * the MFMA's internal rounding (spec 9 q. 1): 2 u sum_h |w_h| A_h. */
static double lg_bound_factor(const dsv4_opctx *c, int H, int faithful)
{
    (void)c;
    return faithful ? 2.0 * U32 : (128.0 + H + 2.0) * U32;
}

static int lg_mask_rows(const lg_in *g, uint8_t *mask, int64_t n)
{
    for (int64_t r = 0; r < g->a.rows; r++) {
        const int64_t e = dsv4_idx_row_end(&g->a, r);
        for (int64_t j = 0; j < g->a.width && r * g->a.width + j < n; j++)
            mask[r * g->a.width + j] = j < e;
    }
    return DSV4_OK;
}

static void lg_locate_elem(const dsv4_opctx *c, const dsv4_tensors *in, int64_t flat, char *buf, size_t len)
{
    lg_in g;
    dsv4_status st = {0};
    if (lg_args(c, in, &g, &st))
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

/* Policies shared by the three ops. */
static void policy_logits(const dsv4_opctx *c, int H, int faithful, dsv4_policy *pol)
{
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_FLOAT;
    pol->output_dtype = DSV4_F32;
    pol->ulp = faithful ? 2 : 0;
    snprintf(pol->rule, sizeof pol->rule,
             "float: |a - e| <= %s%.4g * sum_h |w_h| sum_d |q_hd k_d| (%s; op bound); past the row end unspecified",
             faithful ? "2 ulp(fp32) + " : "", lg_bound_factor(c, H, faithful),
             faithful ? "model of the per-MFMA rounding and head fold: 2u" : "(128 + H + 2) u: fp32 dot of 128 in any order, relu*w, H-term head sum");
}

/* The tie tolerance of the top-k sets: two scores closer than the logits
 * error bound may be ordered either way by the kernel.  Per row that bound
 * is at most rtol * max|score of the row| with rtol = the largest, over the
 * rows, of (the row's largest element bound / its largest |score|). */
static int tie_rtol(const dsv4_opctx *c, const lg_in *g, double *rtol, dsv4_status *st)
{
    double *lg = NULL, *bd = NULL;
    int rc = run_logits(g, DSV4_IDX_IDEAL, &lg, &bd, st);
    const double f = lg_bound_factor(c, g->a.H, 0);
    *rtol = 0;
    for (int64_t r = 0; !rc && r < g->a.rows; r++) {
        double mb = 0, ms = 0;
        for (int64_t j = 0; j < g->a.width; j++) {
            const double b = bd[r * g->a.width + j] * f, v = fabs(lg[r * g->a.width + j]);
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

static void policy_index_set(dsv4_policy *pol, const char *companion, double rtol, const char *what)
{
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_INDEX_SET;
    pol->output_dtype = DSV4_DT_NONE;
    pol->rtol = rtol;
    snprintf(pol->companion, sizeof pol->companion, "%s", companion);
    snprintf(pol->rule, sizeof pol->rule,
             "index_set: %s as sets, -1 padding apart; a difference is forgiven within %.3g x max|%s| of the row "
             "of its k-th score (the logits error bound: the kernel may order such scores either way)",
             what, rtol, companion);
}

/* ------------------------------------------------------------------ */
/* paged_mxfp4_mqa_logits                                              */

static const char *const lg_variants[] = {"default", "mode=faithful", NULL};
static const char *const lg_variant_docs[] = {
    "the ideal: exact per-head dots of the dequantized MXFP4 values, relu * w summed in double (spec 6.2)",
    "the kernel's fp32 model: two K=64 MFMAs each rounded once, the fixed head fold with FMA, fl(A0 + A1) "
    "(spec 6.2 steps 1-3; 32 or 64 heads)",
};

static const dsv4_param_spec lgop_params[] = {
    LG_PARAMS,
    {"tie_k", DSV4_P_INT, "16", "generator: the k whose k-th key gets the ties", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec lg_inputs[] = {LG_INPUTS, {NULL, 0, 0, NULL}};

static const dsv4_io_spec lg_outputs[] = {
    {"logits", DSV4_F32, DSV4_F64, "[rows, max_model_len] fp32; columns past the row end unspecified"},
    {NULL, 0, 0, NULL},
};

static int lgop_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return lg_generate(c, in, dsv4_params_int(c->params, "tie_k"), st);
}

static int add_logits_out(const lg_in *g, dsv4_tensors *out, dsv4_status *st)
{
    int64_t s[2] = {g->a.rows, g->a.width};
    dsv4_tensor *o;
    int rc = dsv4_tensors_add(out, "logits", DSV4_F32, 2, s, &o, st);
    if (!rc)
        for (int64_t i = 0; i < s[0] * s[1]; i++)
            ((float *)o->data)[i] = -INFINITY; /* the launcher's pre-fill (spec 6.2) */
    return rc;
}

static int lgop_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    return rc ? rc : add_logits_out(&g, out, st);
}

static int lgop_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    return rc ? rc
              : dsv4_ref_mqa_logits(&g.a, c->variant == 1 ? DSV4_IDX_FAITHFUL : DSV4_IDX_IDEAL,
                                    dsv4_tensors_find(out, "logits")->data, NULL, st);
}

static int lgop_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)output;
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (!rc)
        policy_logits(c, g.a.H, c->variant == 1, pol);
    return rc;
}

static int lgop_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                     dsv4_status *st)
{
    (void)output;
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    return rc ? rc : lg_mask_rows(&g, mask, n);
}

static int logits_bound(const dsv4_opctx *c, const lg_in *g, int faithful, double *bound, int64_t n,
                        dsv4_status *st)
{
    double *lg = NULL, *bd = NULL;
    int rc = run_logits(g, DSV4_IDX_IDEAL, &lg, &bd, st);
    const double f = lg_bound_factor(c, g->a.H, faithful);
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] = bd[i] * f;
    free(lg);
    free(bd);
    return rc;
}

static int lgop_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                      dsv4_status *st)
{
    (void)output;
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    return rc ? rc : logits_bound(c, &g, c->variant == 1, bound, n, st);
}

static void lgop_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)output;
    lg_locate_elem(c, in, flat, buf, len);
}

double dsv4_indexer_logits_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    const dsv4_tensor *re = dsv4_tensors_get(in, "row_ends");
    double keys = 0;
    for (int64_t r = 0; re && r < re->shape[0]; r++)
        keys += ((const int32_t *)re->data)[r];
    return 2.0 * (double)dsv4_params_int(ps, "heads") * DSV4_IDX_HEAD_DIM * keys;
}

const dsv4_op dsv4_op_paged_mxfp4_mqa_logits = {
    .name = "paged_mxfp4_mqa_logits",
    .summary = "logits[r, j] = sum_h relu(q_h . k_j) w_h over the paged MXFP4 cache, below each row's end",
    .source = "aiter _gluon_kernels/gfx950/attention/pa_mqa_logits_mxfp4.py (ids 69149300224, 69254406641; spec 6.1-6.2)",
    .variants = lg_variants,
    .variant_docs = lg_variant_docs,
    .params = lgop_params,
    .inputs = lg_inputs,
    .outputs = lg_outputs,
    .resolve = lg_resolve,
    .generate = lgop_generate,
    .validate = lg_validate,
    .alloc_outputs = lgop_alloc,
    .reference = lgop_reference,
    .policy = lgop_policy,
    .mask = lgop_mask,
    .locate = lgop_locate,
    .bound = lgop_bound,
};

/* ------------------------------------------------------------------ */
/* rocm_mxfp4_sparse_attn_indexer (the source layer)                   */

static const char *const one_variant[] = {"default", NULL};
static const char *const sa_variant_docs[] = {
    "RocmSparseAttnIndexer.forward_hip (" SEED2 "): dense logits, top-k over [0, row end) into "
    "topk_indices_buffer (-1 padding); with candidate_block_size > 0 the pool: block scores (per-C max, newest "
    "block +inf), candidate_blocks = top-k blocks (spec 6.2 step 4, 6.4)",
};

static const dsv4_param_spec sa_params[] = {
    LG_PARAMS,
    {"topk", DSV4_P_INT, "512", "topk_tokens", 0},
    {"candidate_block_size", DSV4_P_INT, "0", "C of the candidate pool (8 in V4.1); 0: no pool written", 0},
    {"candidate_topk_blocks", DSV4_P_INT, "0", "candidate blocks per row (a power of two)", 0},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec sa_outputs[] = {
    {"logits", DSV4_F32, DSV4_F64, "[rows, max_model_len] the scores the top-k ranks"},
    {"topk_indices", DSV4_I32, DSV4_DT_NONE, "[rows, topk] compressed positions, -1 padding, any order"},
    {"block_scores", DSV4_F32, DSV4_F64, "[rows, ceil(width / C)] (only with candidate_block_size > 0)"},
    {"candidate_blocks", DSV4_I32, DSV4_DT_NONE, "[rows, candidate_topk_blocks] block ids, -1 padding"},
    {NULL, 0, 0, NULL},
};

static int sa_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return lg_generate(c, in, dsv4_params_int(c->params, "topk"), st);
}

static int sa_check_pool(const dsv4_params *ps, int64_t *C, int64_t *nb, dsv4_status *st)
{
    *C = dsv4_params_int(ps, "candidate_block_size");
    *nb = dsv4_params_int(ps, "candidate_topk_blocks");
    if (dsv4_params_int(ps, "topk") < 1)
        return dsv4_fail(st, DSV4_EINPUT, "topk must be >= 1");
    if (*C < 0 || (*C > 0 && (*nb < 1 || (*nb & (*nb - 1)) || dsv4_params_int(ps, "page_entries") % *C)))
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size %" PRId64 " must divide page_entries and "
                         "candidate_topk_blocks %" PRId64 " be a power of two (spec 5.2)", *C, *nb);
    return DSV4_OK;
}

static int sa_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    return rc ? rc : lg_validate(c, in, st);
}

static int sa_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    if (rc || (rc = lg_args(c, in, &g, st)) || (rc = add_logits_out(&g, out, st)))
        return rc;
    int64_t s[2] = {g.a.rows, dsv4_params_int(c->params, "topk")};
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "topk_indices", DSV4_I32, 2, s, &o, st)))
        return rc;
    memset(o->data, 0xFF, o->nbytes); /* rows preset to -1 (spec 6.4) */
    if (C == 0)
        return DSV4_OK;
    int64_t sb[2] = {g.a.rows, (g.a.width + C - 1) / C}, sc[2] = {g.a.rows, nb};
    if ((rc = dsv4_tensors_add(out, "block_scores", DSV4_F32, 2, sb, &o, st)))
        return rc;
    for (int64_t i = 0; i < sb[0] * sb[1]; i++)
        ((float *)o->data)[i] = -INFINITY; /* the caller's pre-fill (spec 6.2 step 4) */
    if ((rc = dsv4_tensors_add(out, "candidate_blocks", DSV4_I32, 2, sc, &o, st)))
        return rc;
    memset(o->data, 0xFF, o->nbytes);
    return DSV4_OK;
}

/* Top-k of each row over [0, end) of its logits (double, golden dtype). */
static void topk_rows(const lg_in *g, const double *lg, int64_t k, int32_t *out)
{
    for (int64_t r = 0; r < g->a.rows; r++)
        dsv4_idx_topk_row(lg + r * g->a.width, dsv4_idx_row_end(&g->a, r), k, 0, out + r * k);
}

static int sa_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    int64_t C, nb;
    int rc = sa_check_pool(c->params, &C, &nb, st);
    if (rc || (rc = lg_args(c, in, &g, st)))
        return rc;
    double *lg = dsv4_tensors_find(out, "logits")->data;
    if ((rc = dsv4_ref_mqa_logits(&g.a, DSV4_IDX_IDEAL, lg, NULL, st)))
        return rc;
    const int64_t k = dsv4_params_int(c->params, "topk");
    topk_rows(&g, lg, k, dsv4_tensors_find(out, "topk_indices")->data);
    if (C == 0)
        return DSV4_OK;
    double *bs = dsv4_tensors_find(out, "block_scores")->data;
    int32_t *cb = dsv4_tensors_find(out, "candidate_blocks")->data;
    const int64_t nblocks = (g.a.width + C - 1) / C;
    for (int64_t r = 0; r < g.a.rows; r++) {
        const int64_t e = dsv4_idx_row_end(&g.a, r);
        dsv4_idx_block_scores_row(lg + r * g.a.width, e, C, nblocks, bs + r * nblocks);
        /* _topk(block_scores, block_ends, ...): over [0, ceil(end/C)), -inf -> -1 (spec 6.4) */
        dsv4_idx_topk_row(bs + r * nblocks, (e + C - 1) / C, nb, 1, cb + r * nb);
    }
    return DSV4_OK;
}

static int sa_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0 || strcmp(output, "block_scores") == 0) {
        policy_logits(c, g.a.H, 0, pol);
        if (output[0] == 'b')
            snprintf(pol->rule, sizeof pol->rule, "float: the block's largest logits bound (a max of logits); "
                     "+-inf exact (the pinned newest block, the pre-filled tail)");
        return DSV4_OK;
    }
    double tol;
    if ((rc = tie_rtol(c, &g, &tol, st)))
        return rc;
    if (strcmp(output, "topk_indices") == 0)
        policy_index_set(pol, "logits", tol, "top-k positions of each row");
    else
        policy_index_set(pol, "block_scores", tol, "top-k candidate blocks of each row");
    return DSV4_OK;
}

static int sa_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0)
        return lg_mask_rows(&g, mask, n);
    memset(mask, 1, (size_t)n);
    return DSV4_OK;
}

static int sa_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0)
        return logits_bound(c, &g, 0, bound, n, st);
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size"), nblocks = n / (g.a.rows ? g.a.rows : 1);
    const size_t m = (size_t)(g.a.rows * g.a.width);
    double *eb = malloc((m ? m : 1) * sizeof *eb);
    if (!eb)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if ((rc = logits_bound(c, &g, 0, eb, (int64_t)m, st)) == DSV4_OK)
        for (int64_t r = 0; r < g.a.rows; r++)
            for (int64_t i = 0; i < nblocks; i++) {
                double b = 0;
                for (int64_t j = i * C; j < (i + 1) * C && j < g.a.width; j++)
                    b = eb[r * g.a.width + j] > b ? eb[r * g.a.width + j] : b;
                bound[r * nblocks + i] = b;
            }
    free(eb);
    return rc;
}

/* The top-k layers name logits elements; their index outputs report rows. */
static void logits_output_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                                 char *buf, size_t len)
{
    if (strcmp(output, "logits") == 0)
        lg_locate_elem(c, in, flat, buf, len);
}

const dsv4_op dsv4_op_rocm_mxfp4_sparse_attn_indexer = {
    .name = "rocm_mxfp4_sparse_attn_indexer",
    .summary = "the source indexer layer: paged MXFP4 logits, top-k positions, and the candidate pool it publishes",
    .source = SEED2 " RocmSparseAttnIndexer; vLLM candidate_blocks.py id 68922604649 (spec 6.2-6.4)",
    .variants = one_variant,
    .variant_docs = sa_variant_docs,
    .params = sa_params,
    .inputs = lg_inputs,
    .outputs = sa_outputs,
    .resolve = lg_resolve,
    .generate = sa_generate,
    .validate = sa_validate,
    .alloc_outputs = sa_alloc,
    .reference = sa_reference,
    .policy = sa_policy,
    .mask = sa_mask,
    .locate = logits_output_locate,
    .bound = sa_bound,
};

/* ------------------------------------------------------------------ */
/* rocm_mxfp4_sparse_mqa_indexer (the candidate consumers)            */

static const char *const mq_variant_docs[] = {
    "RocmSparseMQAIndexer.forward (" SEED2 "): score only the candidate pool (ids 0 <= id < ceil(end/C), "
    "columns id*C + i below the row end), top-k over them, compact slots remapped to positions (spec 6.3)",
};

static const dsv4_param_spec mq_params[] = {
    LG_PARAMS,
    {"topk", DSV4_P_INT, "512", "topk_tokens", 0},
    {"candidate_block_size", DSV4_P_INT, "8", "C of the candidate pool", 0},
    {"candidate_topk_blocks", DSV4_P_INT, "64", "generator: candidate blocks per row", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec mq_inputs[] = {
    LG_INPUTS,
    {"candidate_blocks", DSV4_I32, DSV4_DT_NONE, "[rows, n] block ids the source layer published, -1 padding"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec mq_outputs[] = {
    {"logits", DSV4_F32, DSV4_F64, "[rows, max_model_len]; only candidate columns below the row end specified"},
    {"topk_indices", DSV4_I32, DSV4_DT_NONE, "[rows, topk] compressed positions, -1 padding, any order"},
    {NULL, 0, 0, NULL},
};

static int mq_cands(const dsv4_tensors *in, const lg_in *g, const dsv4_tensor **cb, dsv4_status *st)
{
    int rc = dsv4_input(in, "candidate_blocks", DSV4_I32, 2, cb, st);
    if (!rc && (*cb)->shape[0] != g->a.rows)
        rc = dsv4_fail(st, DSV4_EINPUT, "candidate_blocks must have one row per query row");
    return rc;
}

/* Per row: a column mask of the candidate columns below the end. */
static int mq_columns(const dsv4_opctx *c, const lg_in *g, const dsv4_tensor *cb, uint8_t *colmask,
                      dsv4_status *st)
{
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size"), n = cb->shape[1];
    if (C < 1)
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size must be >= 1");
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    memset(colmask, 0, (size_t)(g->a.rows * g->a.width));
    for (int64_t r = 0; r < g->a.rows && !rc; r++) {
        const int64_t e = dsv4_idx_row_end(&g->a, r);
        int64_t nids, ncols;
        if ((rc = dsv4_idx_candidate_ids((const int32_t *)cb->data + r * n, n, e, C, ids, &nids, &ncols, st))) {
            dsv4_status_prefix(st, "candidate_blocks row");
            break;
        }
        for (int64_t i = 0; i < nids; i++)
            for (int64_t j = (int64_t)ids[i] * C; j < ((int64_t)ids[i] + 1) * C && j < e; j++)
                colmask[r * g->a.width + j] = 1;
    }
    free(ids);
    return rc;
}

static int mq_setup(const dsv4_opctx *c, const dsv4_tensors *in, lg_in *g, const dsv4_tensor **cb,
                    uint8_t **colmask, dsv4_status *st)
{
    int rc = lg_args(c, in, g, st);
    if (rc || (rc = mq_cands(in, g, cb, st)))
        return rc;
    const int64_t n = g->a.rows * g->a.width;
    *colmask = malloc((size_t)(n > 0 ? n : 1));
    if (!*colmask)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    return mq_columns(c, g, *cb, *colmask, st);
}

static int mq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    lg_in g;
    const dsv4_tensor *cb;
    uint8_t *cm = NULL;
    int rc = dsv4_params_int(c->params, "topk") < 1 ? dsv4_fail(st, DSV4_EINPUT, "topk must be >= 1")
                                                    : lg_validate_args(c, in, &g, st);
    if (!rc)
        rc = mq_setup(c, in, &g, &cb, &cm, st);
    free(cm);
    return rc;
}

static int mq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    int rc = lg_generate(c, in, dsv4_params_int(c->params, "topk"), st);
    if (rc)
        return rc;
    lg_in g;
    if ((rc = lg_args(c, in, &g, st)))
        return rc;
    const int64_t C = dsv4_params_int(c->params, "candidate_block_size");
    const int64_t nb = dsv4_params_int(c->params, "candidate_topk_blocks");
    if (C < 1 || nb < 1)
        return dsv4_fail(st, DSV4_EINPUT, "candidate_block_size and candidate_topk_blocks must be >= 1");
    int64_t s[2] = {g.a.rows, nb};
    dsv4_tensor *cb;
    if ((rc = dsv4_tensors_add(in, "candidate_blocks", DSV4_I32, 2, s, &cb, st)))
        return rc;
    /* The pool the source layer would publish from these logits (spec 6.2
     * step 4), then perturbed: an out-of-range id (filtered) and -1 slots. */
    double *lg = NULL, *bs = NULL;
    const int64_t nblocks = (g.a.width + C - 1) / C;
    rc = run_logits(&g, DSV4_IDX_IDEAL, &lg, NULL, st);
    if (!rc && !(bs = malloc((size_t)(nblocks ? nblocks : 1) * sizeof *bs)))
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int32_t *cd = cb->data;
    for (int64_t r = 0; !rc && r < g.a.rows; r++) {
        const int64_t e = dsv4_idx_row_end(&g.a, r), be = (e + C - 1) / C;
        dsv4_idx_block_scores_row(lg + r * g.a.width, e, C, nblocks, bs);
        dsv4_idx_topk_row(bs, be, nb, 1, cd + r * nb);
        if (r % 3 == 1 && cd[r * nb + nb - 1] >= 0)
            cd[r * nb + nb - 1] = (int32_t)(be + 2); /* >= ceil(end/C): dropped (spec 6.3) */
    }
    free(lg);
    free(bs);
    return rc;
}

static int mq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc || (rc = add_logits_out(&g, out, st)))
        return rc;
    int64_t s[2] = {g.a.rows, dsv4_params_int(c->params, "topk")};
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "topk_indices", DSV4_I32, 2, s, &o, st)))
        return rc;
    memset(o->data, 0xFF, o->nbytes);
    return DSV4_OK;
}

static int mq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    lg_in g;
    const dsv4_tensor *cb;
    uint8_t *cm = NULL;
    int rc = mq_setup(c, in, &g, &cb, &cm, st);
    double *lg = rc ? NULL : dsv4_tensors_find(out, "logits")->data;
    if (!rc)
        rc = dsv4_ref_mqa_logits(&g.a, DSV4_IDX_IDEAL, lg, NULL, st);
    if (!rc) {
        /* the gathered kernel scores the candidate slots only; the others
         * are -inf (apply_candidate_mask, spec 6.3) and never selected */
        for (int64_t i = 0; i < g.a.rows * g.a.width; i++)
            if (!cm[i])
                lg[i] = -INFINITY;
        const int64_t k = dsv4_params_int(c->params, "topk");
        int32_t *ti = dsv4_tensors_find(out, "topk_indices")->data;
        for (int64_t r = 0; r < g.a.rows; r++) {
            int64_t n = 0;
            for (int64_t j = 0; j < g.a.width; j++)
                n += cm[r * g.a.width + j];
            /* top-k over the compact columns, remapped: the valid count is
             * min(k, cu); -inf columns past the pool are dropped */
            dsv4_idx_topk_row(lg + r * g.a.width, g.a.width, k < n ? k : n, 0, ti + r * k);
            for (int64_t i = n; i < k; i++)
                ti[r * k + i] = -1;
        }
    }
    free(cm);
    return rc;
}

static int mq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    if (rc)
        return rc;
    if (strcmp(output, "logits") == 0) {
        policy_logits(c, g.a.H, 0, pol);
        return DSV4_OK;
    }
    double tol;
    if ((rc = tie_rtol(c, &g, &tol, st)))
        return rc;
    policy_index_set(pol, "logits", tol, "top-k positions among the candidates");
    return DSV4_OK;
}

static int mq_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    lg_in g;
    const dsv4_tensor *cb;
    uint8_t *cm = NULL;
    int rc = mq_setup(c, in, &g, &cb, &cm, st);
    if (!rc) {
        if (strcmp(output, "logits") == 0)
            memcpy(mask, cm, (size_t)n);
        else
            memset(mask, 1, (size_t)n);
    }
    free(cm);
    return rc;
}

static int mq_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    (void)output;
    lg_in g;
    int rc = lg_args(c, in, &g, st);
    return rc ? rc : logits_bound(c, &g, 0, bound, n, st);
}

const dsv4_op dsv4_op_rocm_mxfp4_sparse_mqa_indexer = {
    .name = "rocm_mxfp4_sparse_mqa_indexer",
    .summary = "a candidate-consuming indexer layer: logits of the candidate pool only, top-k positions",
    .source = SEED2 " RocmSparseMQAIndexer; spec 6.3 (build_candidate_gather, _remap_compact_topk)",
    .variants = one_variant,
    .variant_docs = mq_variant_docs,
    .params = mq_params,
    .inputs = mq_inputs,
    .outputs = mq_outputs,
    .resolve = lg_resolve,
    .generate = mq_generate,
    .validate = mq_validate,
    .alloc_outputs = mq_alloc,
    .reference = mq_reference,
    .policy = mq_policy,
    .mask = mq_mask,
    .locate = logits_output_locate,
    .bound = mq_bound,
};
