/* v41_gen.c - the configuration and the primary tensors of the V4.1 layer
 * chain: the step's hidden states and positions, every weight, the caches
 * as the earlier steps left them, and the batch metadata
 * (docs/semantics/chain.md, "Generated tensors"). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/compressor.h"
#include "../../ref/indexer.h"
#include "../../ref/kvcache.h"
#include "../../ref/numerics.h"
#include "v41.h"

int v41_cfg_of(const dsv4_params *ps, v41_cfg *g, dsv4_status *st)
{
    memset(g, 0, sizeof *g);
    const int64_t *ql, *pl;
    g->R = dsv4_params_list(ps, "query_lens", &ql);
    const int np = dsv4_params_list(ps, "prefix_lens", &pl);
    const char *mode = dsv4_params_str(ps, "mode"), *out = dsv4_params_str(ps, "output");
    if (strcmp(mode, "isolated") && strcmp(mode, "propagated"))
        return dsv4_fail(st, DSV4_EINPUT, "mode = '%s': isolated or propagated", mode);
    if (strcmp(out, "bf16") && strcmp(out, "mxfp8"))
        return dsv4_fail(st, DSV4_EINPUT, "output = '%s': bf16 or mxfp8", out);
    g->mxfp8 = strcmp(out, "mxfp8") == 0;
    g->fused_inv_rope = (int)dsv4_params_int(ps, "fused_inv_rope");
    if (g->fused_inv_rope != 0 && g->fused_inv_rope != 1)
        return dsv4_fail(st, DSV4_EINPUT, "fused_inv_rope must be 0 or 1");
    if (g->fused_inv_rope && g->mxfp8)
        return dsv4_fail(st, DSV4_EINPUT, "fused_inv_rope applies to the bf16 output (the MXFP8 epilogue always rotates)");
    if (g->R < 1 || (np && np != g->R))
        return dsv4_fail(st, DSV4_EINPUT, "query_lens needs >= 1 request; prefix_lens none or one per request");
    for (int64_t r = 0; r < g->R; r++) {
        g->qlen[r] = ql[r];
        g->pre[r] = np ? pl[r] : 0;
        g->S[r] = g->qlen[r] + g->pre[r];
        if (g->qlen[r] < 1 || g->pre[r] < 0 || g->S[r] > (1 << 20))
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": query_lens >= 1, prefix_lens >= 0, length <= 2^20", r);
        /* vLLM reorders the batch: decodes (query_len 1) first. */
        if (g->qlen[r] == 1 && g->n_pf)
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 " is a decode (query_len 1) after a prefill: decodes "
                             "come first in a batch", r);
        if (g->qlen[r] == 1)
            g->n_dec++, g->T_dec++;
        else
            g->n_pf++, g->T_pf += g->qlen[r];
        g->T += g->qlen[r];
        g->max_S = g->S[r] > g->max_S ? g->S[r] : g->max_S;
    }
    g->c = dsv4_params_int(ps, "compress_ratio");
    g->D = dsv4_params_int(ps, "hidden_size");
    g->H = dsv4_params_int(ps, "num_heads");
    g->n1 = dsv4_params_int(ps, "q_lora_rank");
    g->G = dsv4_params_int(ps, "o_groups");
    g->Ro = dsv4_params_int(ps, "o_lora_rank");
    g->IH = dsv4_params_int(ps, "index_heads");
    g->itopk = dsv4_params_int(ps, "index_topk");
    g->W = dsv4_params_int(ps, "window_size");
    g->mml = dsv4_params_int(ps, "max_model_len");
    g->mnbt = dsv4_params_int(ps, "max_num_batched_tokens");
    g->rope_theta = dsv4_params_float(ps, "rope_theta");
    g->eps = dsv4_params_float(ps, "eps");
    g->accum = dsv4_params_str(ps, "gemm_ref_accum");
    if (g->c != 0 && g->c != 4 && g->c != 128)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": 0 (SWA-only), 4 (C4) or 128 (C128)", g->c);
    if (g->D < 128 || g->D % 128 || g->D > 16384 || g->n1 < 128 || g->n1 % 128 || g->n1 > 8192)
        return dsv4_fail(st, DSV4_EINPUT, "hidden_size and q_lora_rank: multiples of 128 (block scales), at most 16384 / 8192");
    if (g->H < 1 || g->H > 256 || g->G < 1 || g->G > 64 || (g->H * V41_HEAD_DIM) % g->G || g->Ro < 1 || g->Ro > 4096 ||
        (g->G * g->Ro) % 128)
        return dsv4_fail(st, DSV4_EINPUT, "num_heads in [1, 256], o_groups in [1, 64] dividing num_heads*512, "
                         "o_groups*o_lora_rank a multiple of 128 (wo_b's block scales)");
    g->Dg = g->H * V41_HEAD_DIM / g->G;
    if (g->mxfp8 && g->Dg % 32)
        return dsv4_fail(st, DSV4_EINPUT, "the MXFP8 wo_a needs num_heads*512/o_groups a multiple of 32");
    if (g->c == 4 && ((g->IH != 32 && g->IH != 64) || g->itopk < 1))
        return dsv4_fail(st, DSV4_EINPUT, "C4 layers: index_heads 32 or 64 (the MXFP4 cache layout), index_topk >= 1");
    if (g->W < 1 || g->W > 4096)
        return dsv4_fail(st, DSV4_EINPUT, "window_size in [1, 4096]");
    if (g->mml < 0)
        g->mml = g->max_S;
    if (g->mnbt < 0)
        g->mnbt = g->T;
    if (g->mml < g->max_S || g->mnbt < g->T)
        return dsv4_fail(st, DSV4_EINPUT, "max_model_len >= the longest request (%" PRId64 "), max_num_batched_tokens >= "
                         "the batch (%" PRId64 ")", g->max_S, g->T);
    if (!(g->eps > 0) || !(g->rope_theta > 1))
        return dsv4_fail(st, DSV4_EINPUT, "eps > 0, rope_theta > 1");
    if (strcmp(g->accum, "f64") && strcmp(g->accum, "f32"))
        return dsv4_fail(st, DSV4_EINPUT, "gemm_ref_accum = '%s': f64 or f32", g->accum);
    g->N = g->c ? (g->mml + g->c - 1) / g->c : 0;
    g->M = g->N + g->W + g->mnbt;
    if (g->c) {
        g->Bc = V41_MLA_BLOCK / g->c;
        g->coff = dsv4_compressor_coff(g->c);
        g->Bs = dsv4_compressor_state_block(g->c);
        g->rope_theta = dsv4_params_float(ps, "compress_rope_theta");
    }
    /* C4: the indexer's top-k; C128: the identity prefix of width
     * roundup(N, 128) (docs/semantics/indices.md A5.5). */
    g->K = g->c == 4 ? g->itopk : g->c == 128 ? (g->N + 127) / 128 * 128 : 0;
    return DSV4_OK;
}

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t seed_of(uint64_t seed, const char *name) { return seed ^ dsv4_fnv1a64(name); }

/* Another op's generator at the given params; the tensors named in take
 * ({op tensor, pool name} pairs) are copied into the pool: weights come out
 * exactly as that op's own cases make them. */
static int take_from_generator(dsv4_chain *x, const char *opname, const char *variant, dsv4_params *ps,
                               uint64_t seed, const dsv4_chain_io *take)
{
    const dsv4_op *op = dsv4_op_find(opname);
    dsv4_status st = {0};
    if (dsv4_chain_failed(x))
        return dsv4_chain_failed(x);
    if (!op || dsv4_op_variant(op, variant) < 0)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "no op %s [%s]", opname, variant);
    dsv4_tensors in = {0};
    int rc = dsv4_op_complete_params(op, ps, opname, &st);
    if (!rc) {
        const dsv4_opctx c = dsv4_opctx_make(op, ps, dsv4_op_variant(op, variant), seed);
        rc = op->generate(&c, &in, &st);
    }
    if (rc) {
        dsv4_tensors_free(&in);
        return dsv4_chain_fail(x, rc, "generating %s: %s", opname, st.msg);
    }
    for (const dsv4_chain_io *t = take; t->io; t++) {
        const dsv4_tensor *s = dsv4_tensors_get(&in, t->io);
        dsv4_tensor *d = s ? dsv4_chain_new(x, t->pool, s->dtype, s->ndim, s->shape, NULL) : NULL;
        if (d && d->nbytes)
            memcpy(d->data, s->data, d->nbytes);
        else if (!s)
            dsv4_chain_fail(x, DSV4_ERUNTIME, "%s's generator made no '%s'", opname, t->io);
    }
    dsv4_tensors_free(&in);
    return dsv4_chain_failed(x);
}

/* A block-scaled fp8 weight [N, K] and its scales, as gemm_a8w8_blockscale
 * generates them with std 1/sqrt(K) (unit-RMS activations stay so);
 * shuffled: the bpreshuffle layout (prepare_attn_preshuffle). */
static int gen_fp8_weight(dsv4_chain *x, const char *name, int64_t N, int64_t K, int shuffled, uint64_t seed)
{
    dsv4_params *ps = calloc(1, sizeof *ps);
    if (!ps)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory");
    char scale[DSV4_NAME_MAX];
    snprintf(scale, sizeof scale, "%s_scale", name);
    dsv4_chain_pint(x, ps, "M", 0);
    dsv4_chain_pint(x, ps, "N", N);
    dsv4_chain_pint(x, ps, "K", K);
    dsv4_chain_pfloat(x, ps, "w_std", 1.0 / sqrt((double)K));
    int rc = take_from_generator(x, "gemm_a8w8_blockscale", shuffled ? "bpreshuffle" : "default", ps,
                                 seed_of(seed, name), (const dsv4_chain_io[]){{"WQ", name}, {"w_scale", scale}, {NULL, NULL}});
    free(ps);
    return rc;
}

static void fill_bf16(dsv4_tensor *t, uint64_t seed, double mean, double std)
{
    if (!t)
        return;
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, t->name);
    for (int64_t i = 0; i < dsv4_tensor_numel(t); i++)
        ((uint16_t *)t->data)[i] = dsv4_bf16_from_f32((float)(mean + std * dsv4_rng_normal(&rng)));
}

/* Page tables: request r maps its logical pages [skip[r], pages[r]) to
 * pages of a shuffled [0, total); the pages before skip[r] hold nothing a
 * step reads (before the sliding window) and stay unmapped (-1), as do the
 * columns past pages[r].  skip NULL: none. */
static dsv4_tensor *gen_pages(dsv4_chain *x, const char *name, const int64_t *pages, const int64_t *skip, int64_t R,
                              int64_t total, uint64_t seed)
{
    int64_t width = 1;
    for (int64_t r = 0; r < R; r++)
        width = pages[r] > width ? pages[r] : width;
    const int64_t shape[2] = {R, width};
    dsv4_tensor *t = dsv4_chain_new(x, name, DSV4_I32, 2, shape, NULL);
    int32_t *perm = t ? malloc((size_t)(total + 1) * sizeof *perm) : NULL;
    if (!perm) {
        if (t)
            dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < total; i++)
        perm[i] = (int32_t)i;
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, name);
    dsv4_rng_shuffle_i32(&rng, perm, total);
    int64_t k = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < width; j++)
            ((int32_t *)t->data)[r * width + j] = j < pages[r] && j >= (skip ? skip[r] : 0) ? perm[k++] : -1;
    free(perm);
    return t;
}

/* A 584-byte slot no step may read: NaN codes, NaN RoPE, NaN scales. */
static void poison_slot(uint8_t *page, int64_t B, int64_t row)
{
    memset(page + dsv4_kv_value_offset(row), 0x7F, DSV4_KV_NOPE_DIM);
    const uint16_t nan = 0x7FC0;
    for (int d = 0; d < DSV4_KV_ROPE_DIM; d++)
        memcpy(page + dsv4_kv_rope_offset(row) + 2 * d, &nan, 2);
    memset(page + dsv4_kv_scale_offset(B, row), 0xFF, DSV4_KV_NQBLOCKS);
}

/* A paged 584-byte cache of rows[r] rows per request: every slot
 * poisoned, then rows [first[r], filled[r]) encoded from random unit-normal
 * bf16 keys (what the earlier steps wrote and this one reads); pages wholly
 * below first[r] unmapped.  first NULL: 0. */
static int gen_kv_cache(dsv4_chain *x, const char *name, const char *table, const int64_t *rows, const int64_t *first,
                        const int64_t *filled, int64_t R, int64_t B, uint64_t seed)
{
    int64_t pages[DSV4_PARAM_LIST_MAX], skip[DSV4_PARAM_LIST_MAX], total = 1; /* one spare page nobody maps */
    for (int64_t r = 0; r < R; r++) {
        pages[r] = (rows[r] + B - 1) / B;
        skip[r] = first ? first[r] / B : 0;
        total += pages[r] - skip[r];
    }
    const dsv4_tensor *bt = gen_pages(x, table, pages, skip, R, total, seed);
    const int64_t shape[3] = {total, B, DSV4_KV_TOKEN_BYTES};
    dsv4_tensor *kc = bt ? dsv4_chain_new(x, name, DSV4_U8, 3, shape, NULL) : NULL;
    if (!kc)
        return dsv4_chain_failed(x);
    uint8_t *bytes = kc->data;
    for (int64_t p = 0; p < total; p++)
        for (int64_t i = 0; i < B; i++)
            poison_slot(bytes + p * B * DSV4_KV_TOKEN_BYTES, B, i);
    const dsv4_kv_encode_opts enc = dsv4_kv_encode_opts_default(0);
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, name);
    float row[DSV4_KV_HEAD_DIM];
    dsv4_status st = {0};
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = first ? first[r] : 0; i < filled[r]; i++) {
            for (int d = 0; d < DSV4_KV_HEAD_DIM; d++)
                row[d] = dsv4_round_bf16((float)dsv4_rng_normal(&rng));
            const int32_t page = ((const int32_t *)bt->data)[r * bt->shape[1] + i / B];
            if (dsv4_kv_encode_token(bytes + page * B * DSV4_KV_TOKEN_BYTES, B, i % B, row, &enc, &st))
                return dsv4_chain_fail(x, st.code, "%s: %s", name, st.msg);
        }
    return DSV4_OK;
}

/* slot of (request r, row i) through a page table of page size B. */
static int64_t slot_of(const dsv4_tensor *bt, int64_t r, int64_t i, int64_t B)
{
    return (int64_t)((const int32_t *)bt->data)[r * bt->shape[1] + i / B] * B + i % B;
}

static dsv4_tensor *new_i32(dsv4_chain *x, const char *name, int64_t n)
{
    return dsv4_chain_new(x, name, DSV4_I32, 1, &n, NULL);
}

/* The batch: positions, query_start_loc, seq_lens, token_to_req, every
 * token valid, gather_lens (docs/semantics/indices.md A5.1, A5.3), the
 * prefill lists, the persistent decode SWA buffer before the step and the
 * prefill workspace (stale: NaN, no index may reach it). */
static int gen_batch(dsv4_chain *x, const v41_cfg *g)
{
    const int64_t T = g->T;
    dsv4_tensor *pos = dsv4_chain_new(x, "positions", DSV4_I64, 1, &T, NULL);
    dsv4_tensor *qsl = new_i32(x, "query_start_loc", g->R + 1), *sl = new_i32(x, "seq_lens", g->R);
    dsv4_tensor *ttr = new_i32(x, "token_to_req", T), *gl = new_i32(x, "gather_lens", g->R);
    dsv4_tensor *valid = dsv4_chain_new(x, "is_valid_token", DSV4_U8, 1, &T, NULL);
    if (dsv4_chain_failed(x))
        return dsv4_chain_failed(x);
    int64_t t = 0;
    ((int32_t *)qsl->data)[0] = 0;
    for (int64_t r = 0; r < g->R; r++) {
        for (int64_t i = 0; i < g->qlen[r]; i++, t++) {
            ((int64_t *)pos->data)[t] = g->pre[r] + i;
            ((int32_t *)ttr->data)[t] = (int32_t)r;
            ((uint8_t *)valid->data)[t] = 1;
        }
        ((int32_t *)qsl->data)[r + 1] = (int32_t)t;
        ((int32_t *)sl->data)[r] = (int32_t)g->S[r];
        const int64_t keep = g->pre[r] < g->W - 1 ? g->pre[r] : g->W - 1;
        ((int32_t *)gl->data)[r] = (int32_t)(g->qlen[r] + keep);
    }
    if (g->n_pf) {
        dsv4_tensor *ps = new_i32(x, "prefill_seq_lens", g->n_pf), *pq = new_i32(x, "prefill_query_lens", g->n_pf);
        for (int64_t k = 0; ps && pq && k < g->n_pf; k++) {
            ((int32_t *)ps->data)[k] = (int32_t)g->S[g->n_dec + k];
            ((int32_t *)pq->data)[k] = (int32_t)g->qlen[g->n_dec + k];
        }
        const int64_t ws[2] = {V41_CHUNK * g->M, V41_HEAD_DIM};
        dsv4_tensor *w = dsv4_chain_new(x, "workspace", DSV4_BF16, 2, ws, NULL);
        for (int64_t i = 0; w && i < ws[0] * ws[1]; i++)
            ((uint16_t *)w->data)[i] = 0x7FC0;
    }
    if (g->T_dec) {
        const int64_t s[3] = {g->T_dec, 1, g->W};
        dsv4_tensor *b = dsv4_chain_new(x, "stale_decode_swa", DSV4_I32, 3, s, NULL);
        for (int64_t i = 0; b && i < s[0] * s[2]; i++)
            ((int32_t *)b->data)[i] = -1;
    }
    return dsv4_chain_failed(x);
}

/* The SWA cache (every position of every request has a slot; the prefix
 * already written) and the step's slot_mapping. */
static int gen_swa(dsv4_chain *x, const v41_cfg *g, uint64_t seed)
{
    int64_t first[DSV4_PARAM_LIST_MAX]; /* the oldest position a window reads */
    for (int64_t r = 0; r < g->R; r++)
        first[r] = g->pre[r] - g->W + 1 > 0 ? g->pre[r] - g->W + 1 : 0;
    if (gen_kv_cache(x, "swa_cache", "swa_block_table", g->S, first, g->pre, g->R, V41_SWA_BLOCK, seed))
        return dsv4_chain_failed(x);
    const int64_t T = g->T;
    const dsv4_tensor *bt = dsv4_chain_get(x, "swa_block_table");
    dsv4_tensor *sm = dsv4_chain_new(x, "slot_mapping", DSV4_I64, 1, &T, NULL);
    for (int64_t r = 0, t = 0; sm && r < g->R; r++)
        for (int64_t i = 0; i < g->qlen[r]; i++, t++)
            ((int64_t *)sm->data)[t] = slot_of(bt, r, g->pre[r] + i, V41_SWA_BLOCK);
    return dsv4_chain_failed(x);
}

/* Compressed layers: the compressor's weights, its state cache (the rows
 * of the prefix the first windows read; the rest NaN) and the compressed
 * cache (entries [0, prefix // c) written). */
static int gen_compressor(dsv4_chain *x, const v41_cfg *g, uint64_t seed)
{
    const int64_t half = g->coff * V41_HEAD_DIM, W2 = 2 * half, sape[2] = {g->c, half}, nw = V41_HEAD_DIM;
    gen_fp8_weight(x, "w_kv_gate", W2, g->D, 1, seed);
    dsv4_tensor *ape = dsv4_chain_new(x, "ape", DSV4_F32, 2, sape, NULL);
    dsv4_tensor *w = dsv4_chain_new(x, "comp_norm_weight", DSV4_F32, 1, &nw, NULL);
    if (dsv4_chain_failed(x))
        return dsv4_chain_failed(x);
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, "ape");
    for (int64_t i = 0; i < g->c * half; i++)
        ((float *)ape->data)[i] = (float)(0.5 * dsv4_rng_normal(&rng));
    dsv4_rng_init(&rng, seed, "comp_norm_weight");
    for (int64_t i = 0; i < nw; i++) /* bf16 checkpoint weights held as fp32 */
        ((float *)w->data)[i] = dsv4_round_bf16((float)(1.0 + 0.1 * dsv4_rng_normal(&rng)));
    /* State rows before lo[r] are never read: the first window of this
     * step starts at prefix - coff*c + 1. */
    int64_t pages[DSV4_PARAM_LIST_MAX], skip[DSV4_PARAM_LIST_MAX], total = 1, lo[DSV4_PARAM_LIST_MAX];
    int64_t crow[DSV4_PARAM_LIST_MAX], cfill[DSV4_PARAM_LIST_MAX];
    for (int64_t r = 0; r < g->R; r++) {
        lo[r] = g->pre[r] > g->coff * g->c ? g->pre[r] - g->coff * g->c : 0;
        pages[r] = (g->S[r] + g->Bs - 1) / g->Bs;
        skip[r] = lo[r] / g->Bs;
        total += pages[r] - skip[r];
        crow[r] = (g->S[r] + g->c - 1) / g->c;
        cfill[r] = g->pre[r] / g->c;
    }
    const dsv4_tensor *sbt = gen_pages(x, "state_block_table", pages, skip, g->R, total, seed);
    const int64_t ss[3] = {total, g->Bs, W2}, T = g->T;
    dsv4_tensor *sc = sbt ? dsv4_chain_new(x, "state_cache", DSV4_F32, 3, ss, NULL) : NULL;
    dsv4_tensor *ssm = sc ? dsv4_chain_new(x, "state_slot_mapping", DSV4_I64, 1, &T, NULL) : NULL;
    if (!ssm)
        return dsv4_chain_failed(x);
    float *state = sc->data;
    for (int64_t i = 0; i < total * g->Bs * W2; i++)
        state[i] = NAN;
    dsv4_rng_init(&rng, seed, "state_cache");
    for (int64_t r = 0, t = 0; r < g->R; r++) {
        for (int64_t p = lo[r]; p < g->pre[r]; p++) { /* bf16-valued, as kv_score is */
            float *row = state + slot_of(sbt, r, p, g->Bs) * W2;
            for (int64_t d = 0; d < W2; d++)
                row[d] = dsv4_round_bf16((float)(dsv4_rng_normal(&rng) * (d < half ? 1.0 : 2.0)));
        }
        for (int64_t i = 0; i < g->qlen[r]; i++, t++)
            ((int64_t *)ssm->data)[t] = slot_of(sbt, r, g->pre[r] + i, g->Bs);
    }
    return gen_kv_cache(x, "kv_cache", "comp_block_table", crow, NULL, cfill, g->R, g->Bc, seed);
}

/* C4 layers: the indexer's weights and its paged MXFP4 K cache, with the
 * prefix's entries written by the reference k store (random keys). */
static int gen_indexer(dsv4_chain *x, const v41_cfg *g, uint64_t seed)
{
    gen_fp8_weight(x, "w_idx_q_b", g->IH * V41_IDX_DIM, g->n1, 0, seed);
    gen_fp8_weight(x, "w_idx_weights", g->IH, g->D, 1, seed);
    gen_fp8_weight(x, "w_idx_k", V41_IDX_DIM, V41_HEAD_DIM, 0, seed);
    const int64_t D = V41_IDX_DIM, T = g->T;
    fill_bf16(dsv4_chain_new(x, "idx_k_norm_weight", DSV4_BF16, 1, &D, NULL), seed, 1.0, 0.25);
    int64_t pages[DSV4_PARAM_LIST_MAX], total = 1, nfill = 0;
    for (int64_t r = 0; r < g->R; r++) {
        total += pages[r] = ((g->S[r] + g->c - 1) / g->c + V41_IDX_PAGE - 1) / V41_IDX_PAGE;
        nfill += g->pre[r] / g->c;
    }
    const dsv4_tensor *bt = gen_pages(x, "idx_block_table", pages, NULL, g->R, total, seed);
    dsv4_idx_layout L;
    dsv4_status st = {0};
    if (!bt || dsv4_idx_layout_make((int)g->IH, V41_IDX_DIM, V41_IDX_PAGE, 1, &L, &st))
        return dsv4_chain_failed(x) ? dsv4_chain_failed(x) : dsv4_chain_fail(x, st.code, "%s", st.msg);
    const int64_t sc[3] = {total, V41_IDX_PAGE, dsv4_idx_entry_bytes(&L)};
    dsv4_tensor *kc = dsv4_chain_new(x, "idx_k_cache", DSV4_U8, 3, sc, NULL);
    dsv4_tensor *sm = kc ? dsv4_chain_new(x, "idx_slot_mapping", DSV4_I64, 1, &T, NULL) : NULL;
    dsv4_tensor *re = sm ? new_i32(x, "row_ends", T) : NULL;
    dsv4_tensor *cl = re ? new_i32(x, "context_lens", g->R) : NULL;
    if (!cl)
        return dsv4_chain_failed(x);
    memset(kc->data, 0x5A, kc->nbytes); /* entries nobody wrote */
    for (int64_t r = 0, t = 0; r < g->R; r++) {
        ((int32_t *)cl->data)[r] = (int32_t)(g->S[r] / g->c);
        for (int64_t i = 0; i < g->qlen[r]; i++, t++) { /* each token carries its group's slot */
            const int64_t p = g->pre[r] + i;
            ((int64_t *)sm->data)[t] = slot_of(bt, r, p / g->c, V41_IDX_PAGE);
            ((int32_t *)re->data)[t] = (int32_t)((p + 1) / g->c);
        }
    }
    if (!nfill)
        return DSV4_OK;
    /* The prefix's entries: one token per compressed entry, at the last
     * position of its group, through the op's reference. */
    const dsv4_op *op = &dsv4_op_rocm_mxfp4_indexer_k_store;
    dsv4_tensors mine = {0}, in = {0}, out = {0};
    const int64_t sk[2] = {nfill, D};
    dsv4_tensor *k, *pos, *slots;
    dsv4_params *ps = calloc(1, sizeof *ps);
    int rc = ps ? DSV4_OK : dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
    if (!rc && !(rc = dsv4_tensors_add(&mine, "k_pre", DSV4_BF16, 2, sk, &k, &st)) &&
        !(rc = dsv4_tensors_add(&mine, "positions", DSV4_I64, 1, &nfill, &pos, &st)))
        rc = dsv4_tensors_add(&mine, "kv_slot_mapping", DSV4_I64, 1, &nfill, &slots, &st);
    if (!rc) {
        fill_bf16(k, seed, 0.0, 1.0);
        for (int64_t r = 0, n = 0; r < g->R; r++)
            for (int64_t ci = 0; ci < g->pre[r] / g->c; ci++, n++) {
                ((int64_t *)pos->data)[n] = ci * g->c + g->c - 1;
                ((int64_t *)slots->data)[n] = slot_of(bt, r, ci, V41_IDX_PAGE);
            }
        in = mine;
        const char *shared[][2] = {{"cos_sin_cache", "cos_sin_cache"}, {"rms_norm_weight", "idx_k_norm_weight"},
                                   {"k_cache", "idx_k_cache"}};
        for (int i = 0; i < 3; i++) {
            in.t[in.n] = *dsv4_chain_get(x, shared[i][1]);
            snprintf(in.t[in.n].name, sizeof in.t[in.n].name, "%s", shared[i][0]);
            in.n++;
        }
        dsv4_chain_pint(x, ps, "num_heads", g->IH);
        dsv4_chain_pint(x, ps, "page_entries", V41_IDX_PAGE);
        dsv4_chain_pint(x, ps, "compress_ratio", g->c);
        dsv4_chain_pfloat(x, ps, "rms_norm_eps", g->eps);
        dsv4_chain_plist(x, ps, "query_lens", &nfill, 1);
        if (!(rc = dsv4_op_complete_params(op, ps, "indexer cache prefix", &st))) {
            const dsv4_opctx c = dsv4_opctx_make(op, ps, 0, seed);
            if (!(rc = op->alloc_outputs(&c, &in, &out, &st)) && !(rc = op->reference(&c, &in, &out, &st)))
                memcpy(kc->data, dsv4_tensors_get(&out, "k_cache")->data, kc->nbytes);
        }
    }
    dsv4_tensors_free(&mine);
    dsv4_tensors_free(&out);
    free(ps);
    return rc ? dsv4_chain_fail(x, rc, "indexer cache prefix: %s", st.msg) : dsv4_chain_failed(x);
}

/* The top-k rows the combine and the decode builder read: C128 the
 * identity prefix min((pos+1) // 128, Wc) (docs/semantics/indices.md
 * A5.5); SWA-only layers a row the combine never reads (top-k 0). */
static int gen_topk_rows(dsv4_chain *x, const v41_cfg *g)
{
    const int64_t w = g->c == 128 ? g->K : 1, s[2] = {g->T, w};
    dsv4_tensor *t = dsv4_chain_new(x, "topk_indices", DSV4_I32, 2, s, NULL);
    const dsv4_tensor *pos = dsv4_chain_get(x, "positions");
    for (int64_t i = 0; t && pos && i < g->T; i++) {
        const int64_t p = ((const int64_t *)pos->data)[i], n = g->c == 128 ? (p + 1) / 128 : 0;
        for (int64_t j = 0; j < w; j++)
            ((int32_t *)t->data)[i * w + j] = j < n ? (int32_t)j : -1;
    }
    return dsv4_chain_failed(x);
}

/* The output projections: wo_a as the bf16 einsum or the MXFP8 BMM reads
 * it (generated by those ops' own generators), wo_b block-scaled fp8. */
static int gen_output_weights(dsv4_chain *x, const v41_cfg *g, uint64_t seed)
{
    dsv4_params *ps = calloc(1, sizeof *ps);
    if (!ps)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory");
    dsv4_chain_pint(x, ps, "num_tokens", 0);
    dsv4_chain_pint(x, ps, "n_local_groups", g->G);
    dsv4_chain_pint(x, ps, "o_lora_rank", g->Ro);
    if (g->mxfp8) {
        dsv4_chain_pint(x, ps, "K", g->Dg);
        take_from_generator(x, "rocm_mxfp8_wo_a_bmm", "default", ps, seed_of(seed, "wo_a"),
                            (const dsv4_chain_io[]){{"wo_a", "wo_a"}, {"wo_a_scale", "wo_a_scale"}, {NULL, NULL}});
    } else {
        dsv4_chain_pint(x, ps, "num_heads", g->H);
        take_from_generator(x, "rocm_inv_rope_einsum", "default", ps, seed_of(seed, "wo_a"),
                            (const dsv4_chain_io[]){{"wo_a", "wo_a"}, {NULL, NULL}});
    }
    free(ps);
    return gen_fp8_weight(x, "w_o_b", g->D, g->G * g->Ro, 1, seed);
}

int v41_generate(dsv4_chain *x, const dsv4_params *ps, uint64_t seed)
{
    v41_cfg *g = malloc(sizeof *g);
    dsv4_status st = {0};
    if (!g)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory");
    if (v41_cfg_of(ps, g, &st)) {
        free(g);
        return dsv4_chain_fail(x, st.code, "%s", st.msg);
    }
    const int64_t sh[2] = {g->T, g->D}, n1 = g->n1, kv = V41_HEAD_DIM, H = g->H, scs[2] = {g->max_S, 64};
    gen_batch(x, g);
    fill_bf16(dsv4_chain_new(x, "hidden_states", DSV4_BF16, 2, sh, NULL), seed, 0.0, 1.0);
    gen_fp8_weight(x, "w_qkv", g->n1 + V41_HEAD_DIM, g->D, 1, seed);
    fill_bf16(dsv4_chain_new(x, "q_norm_weight", DSV4_BF16, 1, &n1, NULL), seed, 1.0, 0.1);
    fill_bf16(dsv4_chain_new(x, "kv_norm_weight", DSV4_BF16, 1, &kv, NULL), seed, 1.0, 0.1);
    gen_fp8_weight(x, "w_q_b", g->H * V41_HEAD_DIM, g->n1, 0, seed);
    dsv4_tensor *sink = dsv4_chain_new(x, "attn_sink", DSV4_F32, 1, &H, NULL);
    dsv4_rng rng;
    dsv4_rng_init(&rng, seed, "attn_sink");
    for (int64_t h = 0; sink && h < H; h++)
        ((float *)sink->data)[h] = (float)(2.0 * dsv4_rng_normal(&rng));
    /* One RoPE table for the layer (rotary_emb): compressed layers use
     * compress_rope_theta, SWA-only layers rope_theta (docs/semantics/gemm.md A11). */
    dsv4_tensor *cs = dsv4_chain_new(x, "cos_sin_cache", DSV4_F32, 2, scs, NULL);
    if (cs)
        dsv4_gen_cos_sin(cs->data, scs[0], 64, g->rope_theta);
    gen_swa(x, g, seed);
    if (g->c)
        gen_compressor(x, g, seed);
    if (g->c == 4)
        gen_indexer(x, g, seed);
    else
        gen_topk_rows(x, g);
    gen_output_weights(x, g, seed);
    free(g);
    return dsv4_chain_failed(x);
}
