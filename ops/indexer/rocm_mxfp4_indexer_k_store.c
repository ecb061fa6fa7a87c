/* rocm_mxfp4_indexer_k_store.c - RMSNorm + RoPE (at the group start) +
 * MXFP4 of the index keys into the paged, preshuffled MXFP4 cache
 * (docs/semantics/indexer.md Q4.1, Q5.1).  Reference: ref/indexer.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/numerics.h"
#include "indexer.h"

static const char ks_params[] =
    "    num_heads      int   = 64      index heads: picks the layout's n_per_tile (docs/semantics/indexer.md Q5.1)\n"
    "    head_dim       int   = 128     D (index head 128 = 64 NoPE + 64 RoPE)\n"
    "    page_entries   int   = 32      cache entries per page (block_size / compress_ratio)\n"
    "    shuffle        int   = 1       1: the preshuffle rocm_paged_mxfp4_cache_layout gives; 0: natural order\n"
    "    compress_ratio int   = 4       only tokens with (pos + 1) % c == 0 write (docs/semantics/indexer.md Q4.1 step "
        "1)\n"
    "    rms_norm_eps   float = 1e-6    k_norm epsilon (vLLM passes 1e-6)\n"
    "gen query_lens     int[] required  generator: tokens of each request\n"
    "gen prefix_lens    int[] = []      generator: positions before each request's tokens\n"
    "gen spare_pages    int   = 1       generator: poisoned pages nobody writes\n"
    "gen invalid_frac   float = 0       generator: fraction of tokens given a negative slot\n"
    "gen scale          float = 1       generator: magnitude of k_pre\n";

static const char ks_inputs[] =
    "k_pre           bfloat16  [T, D] keys before the norm\n"
    "positions       int64     [T] token positions\n"
    "cos_sin_cache   float32   [max_pos, 64] cos | sin\n"
    "rms_norm_weight bfloat16  [D] k_norm weight\n"
    "kv_slot_mapping int64     [T] compressed slots, < 0 = skip\n"
    "k_cache         uint8     [pages, page_entries, D/2 + D/32] before the store\n";

static const char ks_outputs[] =
    "k_cache uint8  [pages, page_entries, D/2 + D/32] after (untouched entries keep their bytes)\n";

typedef struct ks_in {
    const dsv4_tensor *k, *pos, *cs, *w, *slots, *cache;
    dsv4_idx_layout L;
    dsv4_idx_kstore_args a;
} ks_in;

static int ks_args(const dsv4_opctx *c, const dsv4_tensors *in, ks_in *g, dsv4_status *st)
{
    const dsv4_idx_quant *quant = c->rule;
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
                                  dsv4_params_int(ps, "compress_ratio"), g->cache->shape[0], &g->L, *quant};
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
    dsv4_indexer_gen_cos_sin(&rc_, cs->data, maxpos, DSV4_IDX_ROPE_DIM);
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
 * scale: the aiter test accepts >= 99.5% equal value and scale bytes
 * (docs/semantics/indexer.md Q4.3), which is this budget (WARN, not FAIL,
 * within it) -- over the bytes the op writes only (ks_mask).  Untouched
 * entries keep their bytes exactly ("untouched slots keep their previous
 * bytes", Q4.3): a kernel that writes there corrupts another request's
 * cache. */
static int ks_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    dsv4_policy_exact(pol, "cache bytes; <= 0.5% of the written value and scale bytes may differ as a warning "
                           "(aiter k-store test, docs/semantics/indexer.md Q4.3); untouched entries exact");
    pol->budget = 0.005;
    return DSV4_OK;
}

/* The entries the op writes (a non-negative slot at the last position of
 * its group, docs/semantics/indexer.md Q4.1 step 1) are DSV4_MASK_BUDGET,
 * every other byte DSV4_MASK_EXACT. */
static int ks_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                   dsv4_status *st)
{
    (void)output;
    ks_in g;
    int rc = ks_args(c, in, &g, st);
    if (rc)
        return rc;
    const dsv4_idx_layout *L = &g.L;
    const int64_t pb = dsv4_idx_page_bytes(L), nslots = g.a.num_pages * L->page_entries;
    if (n != g.a.num_pages * pb)
        return dsv4_fail(st, DSV4_EINPUT, "k_store mask: %" PRId64 " bytes for %" PRId64 " pages", n, g.a.num_pages);
    memset(mask, DSV4_MASK_EXACT, (size_t)n);
    for (int64_t t = 0; t < g.a.T; t++) {
        const int64_t slot = g.a.slots[t];
        if (slot < 0 || slot >= nslots || (g.a.positions[t] + 1) % g.a.compress_ratio != 0)
            continue;
        uint8_t *page = mask + slot / L->page_entries * pb;
        const int64_t p = slot % L->page_entries;
        for (int b = 0; b < L->head_dim / 2; b++)
            page[dsv4_idx_value_offset(L, p, b)] = DSV4_MASK_BUDGET;
        for (int k = 0; k < L->head_dim / DSV4_MX_BLOCK; k++)
            page[dsv4_idx_scale_offset(L, p, k)] = DSV4_MASK_BUDGET;
    }
    return DSV4_OK;
}

/* Names a byte of the cache [pages, page_entries, D/2 + D/32]. */
static void ks_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                      size_t len)
{
    ks_in g;
    dsv4_status st = {0};
    (void)output;
    if (ks_args(c, in, &g, &st) != DSV4_OK)
        return;
    const dsv4_idx_layout *L = &g.L;
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

const dsv4_op dsv4_op_rocm_mxfp4_indexer_k_store = {
    .name = "rocm_mxfp4_indexer_k_store",
    .summary = "RMSNorm + RoPE (group start) + MXFP4 of index keys into the paged, preshuffled MXFP4 cache",
    .source = DSV4_INDEXER_SEED0 "; aiter fusions/k_norm_rope_mxfp4_cache.py@689b79d5 "
                                 "(docs/semantics/indexer.md Q4.1, Q5.1)",
    .variants = dsv4_indexer_quant_variants,
    DSV4_OP_SCHEMAS(ks),
    .generate = ks_generate,
    .validate = ks_validate,
    .alloc_outputs = ks_alloc,
    .reference = ks_reference,
    .policy = ks_policy,
    .mask = ks_mask,
    .locate = ks_locate,
};
