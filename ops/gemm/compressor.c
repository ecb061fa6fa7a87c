/* compressor.c - one step of the KV compressor (vLLM's compressor_chain:
 * save_partial_states, compress, insert_cache; docs/semantics/gemm.md A11,
 * docs/semantics/kvcache.md A2.5, docs/semantics/indices.md A5.4).
 * Semantics: ref/compressor.c.
 *
 * state_cache: [kv | score + ape] rows, one fp32 add each: bit-exact.
 * kv_cache: the 584-byte bytes of the compressed rows, computed from the
 * double ideal (softmax with exp, RMSNorm) rounded to fp32 and bf16 as the
 * kernel stores them.  The kernel's fp32 exp/rsqrt move n by a few fp32
 * ulps, which flips a bf16 (hence fp8 code) rounding only when n lies
 * within those ulps of a rounding boundary ("FP8 codes may differ by 1 near
 * rounding ties", docs/semantics/README.md A14): compared exactly, with a
 * budget of 1/256 of the value and scale bytes of the rows the step writes
 * before the verdict turns from warn to fail (comp_mask); every other byte
 * -- rows the step does not write, and the pad byte of the rows it does --
 * must be exact. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/compressor.h"
#include "../../ref/kvcache.h"
#include "../../ref/numerics.h"
#include "gemm.h"

/* One reading (C4 and C128 are a parameter): the variant carries no rule. */
static const dsv4_variant comp_variants[] = {
    {"default",
     "C4 (overlapping 2c window, coff 2, state page 4) and C128 (coff 1, state page 8) by compress_ratio; OCP "
     "e4m3fn, FP8MAX 448; RoPE at (pos // c) * c on the unrounded n "
     "(vllm-project/vllm:vllm/models/deepseek_v4/compressor.py@01cc1d3e7640a8ada37f99ca60cc3ee66490cf38, "
     "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py@045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0)",
     NULL},
    {NULL, NULL, NULL},
};

static const char comp_params[] =
    "    compress_ratio int   = 4       c: 4 (CSA) or 128 (HCA)\n"
    "    eps            float = 1e-06   RMSNorm epsilon\n"
    "gen query_lens     int[] required  generator: tokens of this step per request\n"
    "gen prefix_lens    int[] = []      generator: tokens of earlier steps per request (default 0)\n"
    "gen prefix_steps   int   = 1       generator: the prefix runs through the reference in this many steps\n"
    "gen rope_theta     float = 160000  generator: compress_rope_theta of the cos/sin table\n"
    "gen score_scale    float = 2       generator: std of the gate scores\n";

static const char comp_inputs[] =
    "kv_score           float32  [T, 2*coff*512] hidden @ fused_wkv_wgate^T (fp32): kv | score\n"
    "positions          int64    [T]\n"
    "query_start_loc    int32    [R+1] token ranges of the requests\n"
    "ape                float32  [c, coff*512] absolute position bias of the scores\n"
    "state_cache        float32  [num_state_blocks, Bs, 2*coff*512] state before this step\n"
    "state_slot_mapping int64    [T] state slots (-1: none)\n"
    "state_block_table  int32    [R, max_state_blocks] state pages\n"
    "norm_weight        float32  [512] RMSNorm weight\n"
    "cos_sin_cache      float32  [P, 64] rows cos | sin (compressed-layer table)\n"
    "kv_cache           uint8    [num_blocks, 256/c, 584] compressed cache before\n"
    "block_table        int32    [R, max_blocks] compressed-cache pages\n";

static const char comp_outputs[] =
    "state_cache float32  state after save_partial_states\n"
    "kv_cache    uint8    compressed cache after insert_cache\n";

static int comp_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_compressor_args *a, dsv4_status *st)
{
    const dsv4_tensor *ks, *pos, *qsl, *ape, *sc, *ssm, *sbt, *nw, *cs, *kc, *bt;
    int rc;
    if ((rc = dsv4_input(in, "kv_score", DSV4_F32, 2, &ks, st)) || (rc = dsv4_input(in, "positions", DSV4_I64, 1, &pos, st)) ||
        (rc = dsv4_input(in, "query_start_loc", DSV4_I32, 1, &qsl, st)) || (rc = dsv4_input(in, "ape", DSV4_F32, 2, &ape, st)) ||
        (rc = dsv4_input(in, "state_cache", DSV4_F32, 3, &sc, st)) ||
        (rc = dsv4_input(in, "state_slot_mapping", DSV4_I64, 1, &ssm, st)) ||
        (rc = dsv4_input(in, "state_block_table", DSV4_I32, 2, &sbt, st)) ||
        (rc = dsv4_input(in, "norm_weight", DSV4_F32, 1, &nw, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &cs, st)) || (rc = dsv4_input(in, "kv_cache", DSV4_U8, 3, &kc, st)) ||
        (rc = dsv4_input(in, "block_table", DSV4_I32, 2, &bt, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->ratio = dsv4_params_int(c->params, "compress_ratio");
    if (a->ratio != 4 && a->ratio != 128)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": 4 or 128", a->ratio);
    const int coff = dsv4_compressor_coff(a->ratio);
    const int64_t W2 = 2 * coff * 512, Bs = dsv4_compressor_state_block(a->ratio);
    a->T = ks->shape[0];
    a->R = qsl->shape[0] - 1;
    if (ks->shape[1] != W2 || pos->shape[0] != a->T || a->R < 0 || ape->shape[0] != a->ratio ||
        ape->shape[1] != coff * 512 || sc->shape[1] != Bs || sc->shape[2] != W2 || ssm->shape[0] != a->T ||
        sbt->shape[0] != a->R || nw->shape[0] != 512 || cs->shape[1] != 64 || kc->shape[1] != 256 / a->ratio ||
        kc->shape[2] != DSV4_KV_TOKEN_BYTES || bt->shape[0] != a->R)
        return dsv4_fail(st, DSV4_EINPUT,
                         "compressor shapes (c = %" PRId64 "): kv_score [T, %" PRId64 "], ape [c, %d], state_cache [n, %" PRId64
                         ", %" PRId64 "], kv_cache [n, %" PRId64 ", 584], block tables [R, .], query_start_loc [R+1]",
                         a->ratio, W2, coff * 512, Bs, W2, 256 / a->ratio);
    a->kv_score = ks->data;
    a->positions = pos->data;
    a->query_start_loc = qsl->data;
    a->ape = ape->data;
    a->state = sc->data; /* replaced by the output copy before a step runs */
    a->num_state_blocks = sc->shape[0];
    a->state_slots = ssm->data;
    a->state_block_table = sbt->data;
    a->max_state_blocks = sbt->shape[1];
    a->norm_weight = nw->data;
    a->eps = dsv4_params_float(c->params, "eps");
    a->cos_sin_cache = cs->data;
    a->num_pos = cs->shape[0];
    a->kv_cache = kc->data;
    a->num_blocks = kc->shape[0];
    a->block_table = bt->data;
    a->max_blocks = bt->shape[1];
    return DSV4_OK;
}

/* Page tables: request r gets n[r] pages from a shuffled [0, total). */
static int gen_pages(dsv4_rng *rng, const int64_t *n, int64_t R, int64_t maxp, int64_t total, int32_t *table,
                     dsv4_status *st)
{
    int32_t *perm = malloc((size_t)(total + 1) * sizeof *perm);
    if (!perm)
        return dsv4_gemmops_oom(st);
    for (int64_t i = 0; i < total; i++)
        perm[i] = (int32_t)i;
    dsv4_rng_shuffle_i32(rng, perm, total);
    int64_t k = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < maxp; j++)
            table[r * maxp + j] = j < n[r] ? perm[k++] : -1;
    free(perm);
    return DSV4_OK;
}

typedef struct comp_gen {
    int64_t R, ratio, coff, W2, Bs, B, qlen[DSV4_PARAM_LIST_MAX], pre[DSV4_PARAM_LIST_MAX];
    float *ks_all[DSV4_PARAM_LIST_MAX]; /* per request: kv_score of positions [0, S) */
} comp_gen;

/* The token rows of one step over positions [lo[r], hi[r]) of every
 * request: kv_score, positions, query_start_loc and the state group's
 * per-token slots through the state block table sbt [R, max_sb]
 * (docs/semantics/kvcache.md A2.5).  Returns the step's T. */
static int64_t comp_fill_step(const comp_gen *g, const int64_t *lo, const int64_t *hi, const int32_t *sbt,
                              int64_t max_sb, float *ks, int64_t *pos, int32_t *qsl, int64_t *ssm)
{
    int64_t t = 0;
    qsl[0] = 0;
    for (int64_t r = 0; r < g->R; r++) {
        for (int64_t p = lo[r]; p < hi[r]; p++, t++) {
            memcpy(ks + t * g->W2, g->ks_all[r] + p * g->W2, (size_t)g->W2 * sizeof *ks);
            pos[t] = p;
            ssm[t] = (int64_t)sbt[r * max_sb + p / g->Bs] * g->Bs + p % g->Bs;
        }
        qsl[r + 1] = (int32_t)t;
    }
    return t;
}

/* One earlier step through the reference, into the state and cache of a
 * (its token buffers: scratch of the largest step). */
static int comp_gen_step(const comp_gen *g, const int64_t *lo, const int64_t *hi, dsv4_compressor_args *a,
                         float *ks, int64_t *pos, int32_t *qsl, int64_t *ssm, dsv4_status *st)
{
    a->T = comp_fill_step(g, lo, hi, a->state_block_table, a->max_state_blocks, ks, pos, qsl, ssm);
    a->kv_score = ks;
    a->positions = pos;
    a->query_start_loc = qsl;
    a->state_slots = ssm;
    return dsv4_ref_compressor_step(a, NULL, st);
}

static int comp_generate_inner(const dsv4_opctx *c, comp_gen *g, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    int64_t T = 0, maxS = 1, nsp[DSV4_PARAM_LIST_MAX], ncp[DSV4_PARAM_LIST_MAX], tot_s = 1, tot_c = 1, msp = 1, mcp = 1;
    for (int64_t r = 0; r < g->R; r++) {
        const int64_t S = g->pre[r] + g->qlen[r];
        T += g->qlen[r];
        maxS = S > maxS ? S : maxS;
        nsp[r] = (S + g->Bs - 1) / g->Bs;
        ncp[r] = ((S + g->ratio - 1) / g->ratio + g->B - 1) / g->B;
        tot_s += nsp[r], tot_c += ncp[r];
        msp = nsp[r] > msp ? nsp[r] : msp;
        mcp = ncp[r] > mcp ? ncp[r] : mcp;
    }
    const int64_t R1 = g->R + 1, half = g->coff * 512;
    int64_t sks[2] = {T, g->W2}, sape[2] = {g->ratio, half}, ssc[3] = {tot_s, g->Bs, g->W2}, ssbt[2] = {g->R, msp},
            snw = 512, scs[2] = {maxS + 1, 64}, skc[3] = {tot_c, g->B, DSV4_KV_TOKEN_BYTES}, sbt[2] = {g->R, mcp};
    dsv4_tensor *ks, *pos, *qsl, *ape, *sc, *ssm, *sbtt, *nw, *cs, *kc, *bt;
    int rc;
    if ((rc = dsv4_tensors_add(in, "kv_score", DSV4_F32, 2, sks, &ks, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &R1, &qsl, st)) ||
        (rc = dsv4_tensors_add(in, "ape", DSV4_F32, 2, sape, &ape, st)) ||
        (rc = dsv4_tensors_add(in, "state_cache", DSV4_F32, 3, ssc, &sc, st)) ||
        (rc = dsv4_tensors_add(in, "state_slot_mapping", DSV4_I64, 1, &T, &ssm, st)) ||
        (rc = dsv4_tensors_add(in, "state_block_table", DSV4_I32, 2, ssbt, &sbtt, st)) ||
        (rc = dsv4_tensors_add(in, "norm_weight", DSV4_F32, 1, &snw, &nw, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)) ||
        (rc = dsv4_tensors_add(in, "kv_cache", DSV4_U8, 3, skc, &kc, st)) ||
        (rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, sbt, &bt, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "pages");
    if ((rc = gen_pages(&rng, nsp, g->R, msp, tot_s, sbtt->data, st)) ||
        (rc = gen_pages(&rng, ncp, g->R, mcp, tot_c, bt->data, st)))
        return rc;
    dsv4_rng_init(&rng, c->seed, "kv_score");
    const double sscale = dsv4_params_float(ps, "score_scale");
    for (int64_t r = 0; r < g->R; r++) {
        const int64_t S = g->pre[r] + g->qlen[r];
        g->ks_all[r] = malloc((size_t)(S * g->W2 + 1) * sizeof(float));
        if (!g->ks_all[r])
            return dsv4_gemmops_oom(st);
        for (int64_t i = 0; i < S * g->W2; i++)
            g->ks_all[r][i] = (float)(dsv4_rng_normal(&rng) * (i % g->W2 < half ? 1.0 : sscale));
    }
    dsv4_rng_init(&rng, c->seed, "ape");
    for (int64_t i = 0; i < g->ratio * half; i++)
        ((float *)ape->data)[i] = (float)(dsv4_rng_normal(&rng) * 0.5);
    dsv4_rng_init(&rng, c->seed, "norm_weight");
    for (int64_t i = 0; i < 512; i++) /* bf16 checkpoint weights held as fp32 */
        ((float *)nw->data)[i] = dsv4_round_bf16((float)(1.0 + 0.1 * dsv4_rng_normal(&rng)));
    dsv4_gen_cos_sin(cs->data, maxS + 1, 64, dsv4_params_float(ps, "rope_theta"));
    dsv4_compressor_args a;
    if ((rc = comp_args_of(c, in, &a, st)))
        return rc;
    /* Earlier steps: the prefix through the reference, in prefix_steps chunks. */
    const int64_t steps = dsv4_params_int(ps, "prefix_steps");
    int64_t lo[DSV4_PARAM_LIST_MAX], hi[DSV4_PARAM_LIST_MAX], maxpre = 0;
    for (int64_t r = 0; r < g->R; r++)
        maxpre = g->pre[r] > maxpre ? g->pre[r] : maxpre;
    float *tks = malloc((size_t)((maxpre * g->R + 1) * g->W2) * sizeof *tks);
    int64_t *tpos = malloc((size_t)(maxpre * g->R + 1) * sizeof *tpos), *tssm = malloc((size_t)(maxpre * g->R + 1) * sizeof *tssm);
    int32_t tqsl[DSV4_PARAM_LIST_MAX + 1];
    if (!tks || !tpos || !tssm)
        rc = dsv4_gemmops_oom(st);
    for (int64_t s = 0; !rc && s < steps; s++) {
        for (int64_t r = 0; r < g->R; r++)
            lo[r] = g->pre[r] * s / steps, hi[r] = g->pre[r] * (s + 1) / steps;
        rc = comp_gen_step(g, lo, hi, &a, tks, tpos, tqsl, tssm, st);
    }
    free(tks), free(tpos), free(tssm);
    if (rc)
        return rc;
    /* This step: the query tokens, into the inputs. */
    for (int64_t r = 0; r < g->R; r++)
        lo[r] = g->pre[r], hi[r] = g->pre[r] + g->qlen[r];
    comp_fill_step(g, lo, hi, sbtt->data, msp, ks->data, pos->data, qsl->data, ssm->data);
    return DSV4_OK;
}

static int comp_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    comp_gen g;
    memset(&g, 0, sizeof g);
    const int64_t *ql, *pl;
    g.R = dsv4_params_list(ps, "query_lens", &ql);
    int np = dsv4_params_list(ps, "prefix_lens", &pl);
    g.ratio = dsv4_params_int(ps, "compress_ratio");
    if ((g.ratio != 4 && g.ratio != 128) || (np && np != g.R) || dsv4_params_int(ps, "prefix_steps") < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio 4 or 128; prefix_lens as long as query_lens; prefix_steps >= 1");
    for (int64_t r = 0; r < g.R; r++) {
        g.qlen[r] = ql[r], g.pre[r] = np ? pl[r] : 0;
        if (g.qlen[r] < 0 || g.pre[r] < 0 || g.qlen[r] + g.pre[r] > 100000)
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": lengths out of range", r);
    }
    g.coff = dsv4_compressor_coff(g.ratio);
    g.W2 = 2 * g.coff * 512;
    g.Bs = dsv4_compressor_state_block(g.ratio);
    g.B = 256 / g.ratio;
    int rc = comp_generate_inner(c, &g, in, st);
    for (int64_t r = 0; r < g.R; r++)
        free(g.ks_all[r]);
    return rc;
}

DSV4_VALIDATE_VIA_ARGS(comp_validate, dsv4_compressor_args, comp_args_of, dsv4_compressor_check)

static int comp_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    if (rc)
        return rc;
    if ((rc = dsv4_gemmops_add_inplace(out, in, "state_cache", st)))
        return rc;
    return dsv4_gemmops_add_inplace(out, in, "kv_cache", st);
}

static int comp_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    if (rc)
        return rc;
    a.state = dsv4_tensors_find(out, "state_cache")->data;
    a.kv_cache = dsv4_tensors_find(out, "kv_cache")->data;
    return dsv4_ref_compressor_step(&a, NULL, st);
}

static int comp_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    if (!strcmp(output, "state_cache")) {
        dsv4_policy_exact(pol, "state rows [kv | score + ape] (one fp32 add)");
        return DSV4_OK;
    }
    dsv4_policy_exact(pol, "584-byte compressed rows from the ideal n; budget 1/256 of the written rows' value and "
                           "scale bytes (warn): fp32 exp/rsqrt flip codes only near bf16/fp8 rounding boundaries "
                           "(docs/semantics/README.md A14); unwritten rows and pad bytes exact");
    pol->budget = 1.0 / 256;
    return DSV4_OK;
}

/* kv_cache: the 576 value bytes and 7 scale bytes of each row the step
 * writes are DSV4_MASK_BUDGET; the pad byte and every other row
 * DSV4_MASK_EXACT.  state_cache has no budget: no mask needed there. */
static int comp_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                     dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    if (rc)
        return rc;
    memset(mask, DSV4_MASK_EXACT, (size_t)n);
    if (strcmp(output, "kv_cache"))
        return DSV4_OK;
    const int64_t B = 256 / a.ratio, page_bytes = B * DSV4_KV_TOKEN_BYTES;
    if (n != a.num_blocks * page_bytes)
        return dsv4_fail(st, DSV4_EINPUT, "compressor mask: %" PRId64 " bytes for %" PRId64 " pages", n, a.num_blocks);
    for (int64_t t = 0; t < a.T; t++) {
        int64_t page, row;
        if (!dsv4_compressor_emit_row(&a, t, &page, &row))
            continue;
        uint8_t *p = mask + page * page_bytes;
        memset(p + dsv4_kv_value_offset(row), DSV4_MASK_BUDGET, DSV4_KV_DATA_BYTES);
        memset(p + dsv4_kv_scale_offset(B, row), DSV4_MASK_BUDGET, DSV4_KV_NQBLOCKS); /* not the pad byte */
    }
    return DSV4_OK;
}

static void comp_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)in;
    buf[0] = '\0';
    const int64_t ratio = dsv4_params_int(c->params, "compress_ratio");
    if (ratio != 4 && ratio != 128)
        return;
    if (!strcmp(output, "kv_cache")) {
        dsv4_gemmops_cache_locate(flat, 256 / ratio, buf, len);
        return;
    }
    const int64_t W2 = 2 * dsv4_compressor_coff(ratio) * 512, Bs = dsv4_compressor_state_block(ratio);
    snprintf(buf, len, "state page %" PRId64 ", row %" PRId64 ", %s lane %" PRId64, flat / (Bs * W2), flat / W2 % Bs,
             flat % W2 < W2 / 2 ? "kv" : "score", flat % (W2 / 2));
}

const dsv4_op dsv4_op_compressor = {
    .name = "compressor",
    .summary = "KV compressor step: save partial states, softmax-gated window, RMSNorm, RoPE, 584-byte insert",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/compressor.py@01cc1d3e7640a8ada37f99ca60cc3ee66490cf38, "
              "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/save_partial_states.py@0487d5c235baf6fdfb5ad1e0d97449ba548c68a0, "
              "vllm-project/vllm:vllm/v1/attention/backends/mla/compressor_utils.py@0ff8df7bef328b26f94c678c5e7bffb1d2cbc213 "
              "(docs/semantics/gemm.md A11, docs/semantics/kvcache.md A2.5, "
              "docs/semantics/indices.md A5.4; seed _forward_csa2_full compressor_chain)",
    DSV4_OP_TABLES(comp),
    .generate = comp_generate,
    .validate = comp_validate,
    .alloc_outputs = comp_alloc,
    .reference = comp_reference,
    .policy = comp_policy,
    .mask = comp_mask,
    .locate = comp_locate,
};
