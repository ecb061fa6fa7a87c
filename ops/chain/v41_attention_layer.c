/* v41_attention_layer.c - the forward of vLLM's
 * DeepseekV41ROCMAiterMLAAttention ([SEED1], vllm/models/deepseek_v41/amd/
 * rocm.py; the non-aiter path: gathered bf16 prefill workspace, ragged
 * decode) as a chain of the registered ops, one step per kernel call
 * (docs/semantics/chain.md).  Where the seed calls something no op
 * covers, the step is composed from ops that exist and says so: the input
 * and output projections (fused_wqa_wkv, wq_b, the compressor's
 * fused_wkv_wgate, the indexer's wq_b / weights_proj / wk, wo_b) are the
 * block-scaled fp8 GEMM, fed by fp8_group_quant where the seed's linear
 * quantizes its own input. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/compressor.h"
#include "../../ref/numerics.h"
#include "v41.h"

#define SEED_SRC "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py [SEED1]"

static const dsv4_variant v41_variants[] = {
    {"default",
     "DeepseekV41ROCMAiterMLAAttention.forward with _use_aiter_sparse_mla off: _forward_csa2_full (C4/C128) or the "
     "SWA path, forward_mqa: prefill over the gathered bf16 workspace in 4-request chunks, then ragged decode; bf16 "
     "output with the standalone inverse RoPE of rows >= rotated, or MXFP8 (" SEED_SRC ")",
     NULL},
    {NULL, NULL, NULL},
};

static const char v41_params[] =
    "    mode                   str   = isolated  isolated: each step gets the reference chain's tensors; propagated: "
        "the implementation's upstream outputs\n"
    "    compress_ratio         int   = 4         0: SWA-only layer, 4: C4 (compressor + MXFP4 indexer), 128: C128 "
        "(compressor, identity top-k)\n"
    "    output                 str   = bf16      attention output: bf16 (rocm_inv_rope_einsum wo_a) or mxfp8 (wo_a "
        "BMM)\n"
    "    fused_inv_rope         int   = 0         bf16: 1 = the decode reduce rotates its rows (gfx950), rotated = "
        "decode tokens; 0 = rotated 0\n"
    "gen query_lens             int[] required    query tokens of each request; decodes (1) first\n"
    "gen prefix_lens            int[] = []        tokens already cached per request (default 0)\n"
    "    hidden_size            int   = 512       model dim (multiple of 128)\n"
    "    num_heads              int   = 4         local attention heads H\n"
    "    q_lora_rank            int   = 256       q_lora_rank (multiple of 128)\n"
    "    o_groups               int   = 2         n_local_groups of wo_a\n"
    "    o_lora_rank            int   = 128       o_lora_rank (o_groups * o_lora_rank a multiple of 128)\n"
    "    index_heads            int   = 64        C4: index heads (32 or 64)\n"
    "    index_topk             int   = 64        C4: index top-k (topk_tokens)\n"
    "    window_size            int   = 128       sliding window\n"
    "    max_model_len          int   = -1        N = ceil(max_model_len / c); -1: the longest request\n"
    "    max_num_batched_tokens int   = -1        workspace M = N + W + this; -1: the batch's tokens\n"
    "gen rope_theta             float = 10000     RoPE base of SWA-only layers\n"
    "gen compress_rope_theta    float = 160000    RoPE base of compressed layers\n"
    "    eps                    float = 1e-06     rms_norm_eps of every RMSNorm\n"
    "    gemm_ref_accum         str   = f64       the GEMM steps' ref_accum (f32 for production shapes)\n";

static const char v41_inputs[] =
    "hidden_states   bfloat16       [T, hidden] the layer input\n"
    "positions       int64          [T] token positions\n"
    "w_qkv           float8_e4m3fn  [q_lora_rank + 512, hidden] fused_wqa_wkv, bpreshuffled (+ _scale)\n"
    "w_q_b           float8_e4m3fn  [H*512, q_lora_rank] wq_b (+ _scale)\n"
    "q_norm_weight   bfloat16       [q_lora_rank]; kv_norm_weight [512]\n"
    "swa_cache       uint8          [pages, 64, 584] SWA cache before the step (+ swa_block_table, slot_mapping)\n"
    "cos_sin_cache   float32        [max_S, 64] the layer's rotary table (cos | sin)\n"
    "attn_sink       float32        [H]\n"
    "w_kv_gate       float8_e4m3fn  C4/C128: [2*coff*512, hidden] fused_wkv_wgate, bpreshuffled\n"
    "state_cache     float32        C4/C128: compressor state before (+ ape, comp_norm_weight, tables)\n"
    "kv_cache        uint8          C4/C128: [pages, 256/c, 584] compressed cache before (+ comp_block_table)\n"
    "w_idx_q_b       float8_e4m3fn  C4: indexer wq_b [IH*128, q_lora_rank]; w_idx_weights, w_idx_k\n"
    "idx_k_cache     uint8          C4: [pages, 64, 68] MXFP4 index-key cache before (+ idx tables)\n"
    "topk_indices    int32          C128: [T, roundup(N,128)] identity prefix (C4: the indexer's)\n"
    "wo_a            bfloat16       [G*R, H*512/G] bf16, or e4m3fn + wo_a_scale for mxfp8\n"
    "w_o_b           float8_e4m3fn  [hidden, G*R] wo_b, bpreshuffled (+ _scale)\n"
    "query_start_loc int32          and seq_lens, token_to_req, is_valid_token, gather_lens, workspace\n";

/* The stages, in the seed's order; each names the tap after it. */
static const char v41_outputs[] =
    "hidden_quant         float8_e4m3fn  hidden_fp8 + transposed 1x128 scales (fp8_group_quant, the _bpre_attn_gemm "
        "input quant)\n"
    "qkv_proj             bfloat16       qr_kv [T, q_lora_rank + 512] (gemm bpreshuffle: _fused_wqa_wkv_gemm)\n"
    "qk_norm_quant        float8_e4m3fn  qr fp8 + scales, kv normed (fused_qk_rmsnorm_group_quant)\n"
    "q_proj               bfloat16       q [T, H, 512] (gemm on the pre-quantized qr: _wq_b_proj)\n"
    "qnorm_rope_kv_insert bfloat16       q normed and RoPE'd, SWA cache after the insert\n"
    "compressor_proj      bfloat16       kv_score (gemm bpreshuffle, widened to fp32)\n"
    "compressor           uint8          state cache and compressed cache after the step\n"
    "indexer_k            uint8          k_pre = wk(latent) (group quant + gemm), index-key cache after the store\n"
    "indexer_q            uint8          index q (wq_b gemm), weights (weights_proj gemm), MXFP4 q + fp32 weights\n"
    "indexer_topk         int32          logits and topk_indices (rocm_mxfp4_sparse_attn_indexer)\n"
    "prefill_plan         int64          chunk plan (get_prefill_chunk_plan)\n"
    "prefill_gather       bfloat16       each chunk's workspace: compressed rows, then the SWA window\n"
    "prefill_combine      int32          each chunk's combined index rows and lens\n"
    "prefill_attn         bfloat16       each chunk's attention rows (rocm_sparse_attn_prefill)\n"
    "decode_indices       int32          decode top-k CSR and SWA CSR\n"
    "decode_attn          bfloat16       decode rows (rocm_sparse_attn_decode), + epilogue (rotate / MXFP8)\n"
    "inverse_rope         bfloat16       bf16: rows >= rotated inverse-RoPE'd; mxfp8: prefill rows quantized\n"
    "wo_a                 bfloat16       z [T, G*R] (rocm_inv_rope_einsum or rocm_mxfp8_wo_a_bmm)\n"
    "wo_b                 bfloat16       the layer output [T, hidden] (group quant + gemm bpreshuffle)\n";

static int v41_resolve(dsv4_params *ps, dsv4_status *st)
{
    v41_cfg *g = malloc(sizeof *g);
    int rc = g ? v41_cfg_of(ps, g, st) : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    free(g);
    return rc;
}

static const dsv4_op v41_desc = {
    .name = "v41_attention_layer",
    .summary = "the V4.1 ROCm sparse-MLA attention layer, stage by stage: projections, norms, q/kv insert, "
               "compressor, indexer, index builders, prefill and decode attention with sink, inverse RoPE, "
               "MXFP8 or bf16 output, wo_a, wo_b",
    .source = SEED_SRC " DeepseekV41ROCMAiterMLAAttention (docs/semantics/chain.md)",
    DSV4_OP_TABLES(v41),
    .resolve = v41_resolve,
};

/* ---- the wiring ----------------------------------------------------------------- */

typedef struct v41_run {
    dsv4_chain *x;
    v41_cfg g;
    dsv4_params ps;
} v41_run;

#define IO(...) ((const dsv4_chain_io[]){__VA_ARGS__, {NULL, NULL}})

static dsv4_params *fresh(v41_run *w)
{
    w->ps.n = 0;
    return &w->ps;
}

/* y = x W^T, block-scaled fp8 (plain: row-major x scales, the
 * pre-quantized path; bpreshuffle: transposed scales, shuffled W). */
static int gemm(v41_run *w, const char *step, int shuffled, const char *xq, const char *xs, const char *wq, int64_t M,
                int64_t N, int64_t K, const char *y)
{
    dsv4_params *ps = fresh(w);
    char wscale[DSV4_NAME_MAX];
    snprintf(wscale, sizeof wscale, "%s_scale", wq);
    dsv4_chain_pstr(w->x, ps, "ref_accum", w->g.accum);
    dsv4_chain_pint(w->x, ps, "M", M);
    dsv4_chain_pint(w->x, ps, "N", N);
    dsv4_chain_pint(w->x, ps, "K", K);
    return dsv4_chain_step(w->x, step, "gemm_a8w8_blockscale", shuffled ? "bpreshuffle" : "default", ps,
                           IO({"XQ", xq}, {"WQ", wq}, {"x_scale", xs}, {"w_scale", wscale}), IO({"Y", y}));
}

/* fp8 1x128 group quant of x [M, K] (transposed scales for bpreshuffle). */
static int group_quant(v41_run *w, const char *step, const char *x, int64_t M, int64_t K, int transposed,
                       const char *y, const char *scale)
{
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(w->x, ps, "M", M);
    dsv4_chain_pint(w->x, ps, "K", K);
    dsv4_chain_pint(w->x, ps, "transpose_scale", transposed);
    return dsv4_chain_step(w->x, step, "fp8_group_quant", "default", ps, IO({"x", x}), IO({"y", y}, {"scale", scale}));
}

/* _fused_wqa_wkv_gemm, _split_qkv_and_norm, _wq_b_proj and
 * _fused_qnorm_rope_kv_insert. */
static int stages_q_kv(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "hidden_quant");
    group_quant(w, "hidden_quant", "hidden_states", g->T, g->D, 1, "hidden_fp8", "hidden_scale_t");
    dsv4_chain_stage(x, "qkv_proj");
    gemm(w, "qkv_proj", 1, "hidden_fp8", "hidden_scale_t", "w_qkv", g->T, g->n1 + V41_HEAD_DIM, g->D, "qr_kv");
    dsv4_chain_stage(x, "qk_norm_quant");
    dsv4_chain_cols(x, "qr", "qr_kv", 0, g->n1);
    dsv4_chain_cols(x, "kv_raw", "qr_kv", g->n1, g->n1 + V41_HEAD_DIM);
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(x, ps, "m", g->T);
    dsv4_chain_pint(x, ps, "n1", g->n1);
    dsv4_chain_pint(x, ps, "n2", V41_HEAD_DIM);
    dsv4_chain_pfloat(x, ps, "q_epsilon", g->eps);
    dsv4_chain_pfloat(x, ps, "kv_epsilon", g->eps);
    dsv4_chain_step(x, "qk_norm_quant", "fused_qk_rmsnorm_group_quant", "default", ps,
                    IO({"q", "qr"}, {"q_weight", "q_norm_weight"}, {"kv", "kv_raw"}, {"kv_weight", "kv_norm_weight"}),
                    IO({"q_out", "qr_fp8"}, {"q_scale", "qr_scale"}, {"kv_out", "kv_normed"}));
    dsv4_chain_stage(x, "q_proj");
    gemm(w, "q_proj", 0, "qr_fp8", "qr_scale", "w_q_b", g->T, g->H * V41_HEAD_DIM, g->n1, "q_flat");
    dsv4_chain_reshape(x, "q_proj", "q_flat", 3, (const int64_t[]){g->T, g->H, V41_HEAD_DIM});
    dsv4_chain_stage(x, "qnorm_rope_kv_insert");
    const dsv4_tensor *swa = dsv4_chain_get(x, "swa_cache");
    if (!swa)
        return dsv4_chain_failed(x);
    ps = fresh(w);
    dsv4_chain_pfloat(x, ps, "eps", g->eps);
    dsv4_chain_pint(x, ps, "block_size", V41_SWA_BLOCK);
    dsv4_chain_pint(x, ps, "num_tokens", g->T);
    dsv4_chain_pint(x, ps, "num_slots", g->T);
    dsv4_chain_pint(x, ps, "num_heads", g->H);
    dsv4_chain_pint(x, ps, "num_blocks", swa->shape[0]);
    dsv4_chain_pint(x, ps, "max_position", g->max_S);
    return dsv4_chain_step(x, "qnorm_rope_kv_insert", "fused_qnorm_rope_kv_insert", "default", ps,
                           IO({"q", "q_proj"}, {"kv", "kv_normed"}, {"swa_cache", "swa_cache"},
                              {"slot_mapping", "slot_mapping"}, {"positions", "positions"},
                              {"cos_sin_cache", "cos_sin_cache"}),
                           IO({"q", "q_attn"}, {"swa_cache", "swa_cache"}));
}

/* The latent the compressor emits (the normalized compressed row of each
 * token closing a group, before RoPE and quant), which the indexer's wk
 * reads.  The compressor op exposes only the caches, so the chain takes
 * the latent from the reference compressor on the step's own inputs
 * (bf16, as the model holds it; 0 for tokens that emit none). */
static int latent_glue(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    const dsv4_tensor *ks = dsv4_chain_get(x, "kv_score"), *pos = dsv4_chain_get(x, "positions"),
                      *qsl = dsv4_chain_get(x, "query_start_loc"), *ape = dsv4_chain_get(x, "ape"),
                      *sc = dsv4_chain_get(x, "state_cache"), *ssm = dsv4_chain_get(x, "state_slot_mapping"),
                      *sbt = dsv4_chain_get(x, "state_block_table"), *nw = dsv4_chain_get(x, "comp_norm_weight"),
                      *cs = dsv4_chain_get(x, "cos_sin_cache"), *kc = dsv4_chain_get(x, "kv_cache"),
                      *bt = dsv4_chain_get(x, "comp_block_table");
    if (dsv4_chain_failed(x))
        return dsv4_chain_failed(x);
    float *state = malloc(sc->nbytes ? sc->nbytes : 1);
    uint8_t *cache = malloc(kc->nbytes ? kc->nbytes : 1);
    double *lat = malloc((size_t)(g->T * V41_HEAD_DIM + 1) * sizeof *lat);
    dsv4_status st = {0};
    int rc = state && cache && lat ? DSV4_OK : dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
    if (!rc) {
        memcpy(state, sc->data, sc->nbytes);
        memcpy(cache, kc->data, kc->nbytes);
        const dsv4_compressor_args a = {
            .ratio = g->c, .T = g->T, .R = g->R, .kv_score = ks->data, .positions = pos->data,
            .query_start_loc = qsl->data, .ape = ape->data, .state = state, .num_state_blocks = sc->shape[0],
            .state_slots = ssm->data, .state_block_table = sbt->data, .max_state_blocks = sbt->shape[1],
            .norm_weight = nw->data, .eps = g->eps, .cos_sin_cache = cs->data, .num_pos = cs->shape[0],
            .kv_cache = cache, .num_blocks = kc->shape[0], .block_table = bt->data, .max_blocks = bt->shape[1]};
        if (!(rc = dsv4_compressor_check(&a, &st)))
            rc = dsv4_ref_compressor_step(&a, lat, &st);
    }
    dsv4_tensor *l = rc ? NULL : dsv4_chain_new(x, "latent", DSV4_BF16, 2, (const int64_t[]){g->T, V41_HEAD_DIM},
                                                (const char *const[]){"kv_score", "state_cache", NULL});
    for (int64_t i = 0; l && i < g->T * V41_HEAD_DIM; i++)
        ((uint16_t *)l->data)[i] = isnan(lat[i]) ? 0 : dsv4_bf16_from_f32((float)lat[i]);
    free(state), free(cache), free(lat);
    return rc ? dsv4_chain_fail(x, rc, "compressor latent: %s", st.msg) : dsv4_chain_failed(x);
}

/* compressor_chain: kv_score = hidden @ fused_wkv_wgate^T, then the
 * compressor (save_partial_states, compress, insert_cache). */
static int stages_compressor(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "compressor_proj");
    gemm(w, "compressor_proj", 1, "hidden_fp8", "hidden_scale_t", "w_kv_gate", g->T, 2 * g->coff * V41_HEAD_DIM, g->D,
         "kv_score_bf16");
    dsv4_chain_to_f32(x, "kv_score", "kv_score_bf16");
    dsv4_chain_stage(x, "compressor");
    if (g->c == 4)
        latent_glue(w);
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c);
    dsv4_chain_pfloat(x, ps, "eps", g->eps);
    return dsv4_chain_step(x, "compressor", "compressor", "default", ps,
                           IO({"kv_score", "kv_score"}, {"positions", "positions"}, {"query_start_loc", "query_start_loc"},
                              {"ape", "ape"}, {"state_cache", "state_cache"}, {"state_slot_mapping", "state_slot_mapping"},
                              {"state_block_table", "state_block_table"}, {"norm_weight", "comp_norm_weight"},
                              {"cos_sin_cache", "cos_sin_cache"}, {"kv_cache", "kv_cache"},
                              {"block_table", "comp_block_table"}),
                           IO({"state_cache", "state_cache"}, {"kv_cache", "kv_cache"}));
}

/* indexer._produce_k, indexer.forward_q and the source indexer's top-k
 * (RocmSparseAttnIndexer.forward_hip). */
static int stages_indexer(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "indexer_k");
    group_quant(w, "indexer_wk_quant", "latent", g->T, V41_HEAD_DIM, 0, "latent_fp8", "latent_scale");
    gemm(w, "indexer_wk", 0, "latent_fp8", "latent_scale", "w_idx_k", g->T, V41_IDX_DIM, V41_HEAD_DIM, "k_pre");
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(x, ps, "num_heads", g->IH);
    dsv4_chain_pint(x, ps, "page_entries", V41_IDX_PAGE);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c);
    dsv4_chain_pfloat(x, ps, "rms_norm_eps", g->eps);
    dsv4_chain_step(x, "indexer_k_store", "rocm_mxfp4_indexer_k_store", "default", ps,
                    IO({"k_pre", "k_pre"}, {"positions", "positions"}, {"cos_sin_cache", "cos_sin_cache"},
                       {"rms_norm_weight", "idx_k_norm_weight"}, {"kv_slot_mapping", "idx_slot_mapping"},
                       {"k_cache", "idx_k_cache"}),
                    IO({"k_cache", "idx_k_cache"}));
    dsv4_chain_stage(x, "indexer_q");
    gemm(w, "indexer_q_proj", 0, "qr_fp8", "qr_scale", "w_idx_q_b", g->T, g->IH * V41_IDX_DIM, g->n1, "index_q_flat");
    dsv4_chain_reshape(x, "index_q", "index_q_flat", 3, (const int64_t[]){g->T, g->IH, V41_IDX_DIM});
    gemm(w, "indexer_weights_proj", 1, "hidden_fp8", "hidden_scale_t", "w_idx_weights", g->T, g->IH, g->D,
         "index_w_bf16");
    dsv4_chain_to_f32(x, "index_weights", "index_w_bf16");
    ps = fresh(w);
    dsv4_chain_pfloat(x, ps, "softmax_scale", 1.0 / sqrt((double)V41_IDX_DIM));
    dsv4_chain_pfloat(x, ps, "head_scale", 1.0 / sqrt((double)g->IH));
    dsv4_chain_pint(x, ps, "H", g->IH);
    dsv4_chain_pint(x, ps, "max_position", g->max_S);
    dsv4_chain_step(x, "indexer_q_quant", "rocm_mxfp4_indexer_q_quant", "default", ps,
                    IO({"positions", "positions"}, {"index_q", "index_q"}, {"index_q_cos_sin_cache", "cos_sin_cache"},
                       {"index_weights", "index_weights"}),
                    IO({"q_packed", "idx_q"}, {"q_scale", "idx_q_scale"}, {"weights_out", "idx_weights"}));
    dsv4_chain_stage(x, "indexer_topk");
    ps = fresh(w);
    dsv4_chain_pint(x, ps, "heads", g->IH);
    dsv4_chain_pint(x, ps, "page_entries", V41_IDX_PAGE);
    dsv4_chain_pint(x, ps, "max_model_len", g->N);
    dsv4_chain_pint(x, ps, "topk", g->itopk);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c);
    return dsv4_chain_step(x, "indexer_topk", "rocm_mxfp4_sparse_attn_indexer", "default", ps,
                           IO({"q", "idx_q"}, {"q_scale", "idx_q_scale"}, {"weights", "idx_weights"},
                              {"kv_cache", "idx_k_cache"}, {"context_lens", "context_lens"},
                              {"block_table", "idx_block_table"}, {"query_start_loc", "query_start_loc"},
                              {"row_ends", "row_ends"}),
                           IO({"topk_indices", "topk_indices"}));
}

static int64_t i32_at(const dsv4_tensor *t, int64_t i) { return ((const int32_t *)t->data)[i]; }

/* One chunk of _forward_prefill: the two gathers into the workspace slabs,
 * the combine, the attention (the seed's loop body). */
static int prefill_chunk(v41_run *w, int64_t k, int64_t start, int64_t end, int64_t cN, int64_t cM)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    const int64_t cs = end - start, r0 = g->n_dec + start, r1 = g->n_dec + end;
    const dsv4_tensor *qsl = dsv4_chain_get(x, "query_start_loc");
    if (!qsl)
        return dsv4_chain_failed(x);
    const int64_t base = i32_at(qsl, g->n_dec), qs = i32_at(qsl, r0) - base, qe = i32_at(qsl, r1) - base;
    char step[DSV4_NAME_MAX];
    dsv4_chain_stage(x, "prefill_gather");
    dsv4_chain_rows(x, "ws_rows", "workspace", 0, cs * cM);
    dsv4_chain_reshape(x, "ws_view", "ws_rows", 3, (const int64_t[]){cs, cM, V41_HEAD_DIM});
    dsv4_chain_rows(x, "c_seq", "seq_lens", r0, r1);
    dsv4_chain_rows(x, "c_gather", "gather_lens", r0, r1);
    dsv4_chain_rows(x, "c_swa_bt", "swa_block_table", r0, r1);
    dsv4_params *ps;
    if (g->c) { /* compressed rows [0, S // c) of each slab */
        dsv4_chain_rows(x, "c_comp_bt", "comp_block_table", r0, r1);
        dsv4_tensor *t = dsv4_chain_new(x, "c_comp_seq", DSV4_I32, 1, &cs, (const char *const[]){"c_seq", NULL});
        const dsv4_tensor *sl = dsv4_chain_get(x, "c_seq");
        for (int64_t i = 0; t && sl && i < cs; i++) /* seq_lens // c */
            ((int32_t *)t->data)[i] = (int32_t)(i32_at(sl, i) / g->c);
        ps = fresh(w);
        dsv4_chain_pint(x, ps, "block_size", g->Bc);
        dsv4_chain_pint(x, ps, "offset", 0);
        dsv4_chain_pint(x, ps, "has_gather_lens", 0);
        snprintf(step, sizeof step, "gather_compressed.c%" PRId64, k);
        dsv4_chain_step(x, step, "dequantize_and_gather_k_cache", "default", ps,
                        IO({"out", "ws_view"}, {"k_cache", "kv_cache"}, {"seq_lens", "c_comp_seq"},
                           {"block_table", "c_comp_bt"}),
                        IO({"out", "ws_view"}));
    }
    ps = fresh(w); /* the SWA window at rows [chunk_N, chunk_N + G) */
    dsv4_chain_pint(x, ps, "block_size", V41_SWA_BLOCK);
    dsv4_chain_pint(x, ps, "offset", cN);
    dsv4_chain_pint(x, ps, "has_gather_lens", 1);
    snprintf(step, sizeof step, "gather_swa.c%" PRId64, k);
    dsv4_chain_step(x, step, "dequantize_and_gather_k_cache", "default", ps,
                    IO({"out", "ws_view"}, {"k_cache", "swa_cache"}, {"seq_lens", "c_seq"}, {"gather_lens", "c_gather"},
                       {"block_table", "c_swa_bt"}),
                    IO({"out", "ws_view"}));
    dsv4_chain_reshape(x, "ws_flat", "ws_view", 2, (const int64_t[]){cs * cM, V41_HEAD_DIM});
    dsv4_chain_put_rows(x, "workspace", "ws_flat", 0);

    dsv4_chain_stage(x, "prefill_combine");
    const dsv4_tensor *tk = dsv4_chain_get(x, "topk_indices");
    if (!tk)
        return dsv4_chain_failed(x);
    const int64_t width = tk->shape[1];
    dsv4_chain_rows(x, "c_topk", "topk_indices", g->T_dec + qs, g->T_dec + qe);
    dsv4_chain_rows(x, "c_qsl", "query_start_loc", r0, r1 + 1);
    ps = fresh(w);
    dsv4_chain_pint(x, ps, "window_size", g->W);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c ? g->c : 1); /* SWA-only: top-k 0 reads no column */
    dsv4_chain_pint(x, ps, "topk", g->K);
    dsv4_chain_pint(x, ps, "M", cM);
    dsv4_chain_pint(x, ps, "N", cN);
    dsv4_chain_pint(x, ps, "qsl_base", base + qs);
    dsv4_chain_pint(x, ps, "topk_width", width);
    dsv4_chain_pint(x, ps, "max_model_len", g->mml);
    snprintf(step, sizeof step, "combine.c%" PRId64, k);
    dsv4_chain_step(x, step, "combine_topk_swa_indices", "default", ps,
                    IO({"topk_indices", "c_topk"}, {"query_start_loc", "c_qsl"}, {"seq_lens", "c_seq"},
                       {"gather_lens", "c_gather"}),
                    IO({"combined_indices", "c_idx"}, {"combined_lens", "c_lens"}));

    dsv4_chain_stage(x, "prefill_attn");
    const dsv4_tensor *ci = dsv4_chain_get(x, "c_idx");
    if (!ci)
        return dsv4_chain_failed(x);
    dsv4_chain_reshape(x, "c_idx3", "c_idx", 3, (const int64_t[]){qe - qs, 1, ci->shape[1]});
    dsv4_chain_reshape(x, "c_kv", "ws_flat", 3, (const int64_t[]){cs * cM, 1, V41_HEAD_DIM});
    dsv4_chain_rows(x, "c_q", "q_attn", g->T_dec + qs, g->T_dec + qe);
    ps = fresh(w);
    dsv4_chain_pfloat(x, ps, "scale", 1.0 / sqrt((double)V41_HEAD_DIM));
    dsv4_chain_pint(x, ps, "num_heads", g->H);
    dsv4_chain_pint(x, ps, "window_size", g->W);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c);
    dsv4_chain_pint(x, ps, "topk", g->K);
    snprintf(step, sizeof step, "prefill_attn.c%" PRId64, k);
    dsv4_chain_step(x, step, "rocm_sparse_attn_prefill", "default", ps,
                    IO({"q", "c_q"}, {"kv", "c_kv"}, {"indices", "c_idx3"}, {"topk_length", "c_lens"},
                       {"attn_sink", "attn_sink"}),
                    IO({"output", "c_out"}));
    return dsv4_chain_put_rows(x, "attn_pf", "c_out", qs);
}

/* _forward_prefill: the chunk plan, then its chunks. */
static int stages_prefill(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "prefill_plan");
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c);
    dsv4_chain_pint(x, ps, "prefill_chunk_size", V41_CHUNK);
    dsv4_chain_pint(x, ps, "window_size", g->W);
    dsv4_chain_pint(x, ps, "max_model_len", g->mml);
    dsv4_chain_pint(x, ps, "max_num_batched_tokens", g->mnbt);
    dsv4_chain_pint(x, ps, "has_compressed", g->c > 0);
    dsv4_chain_step(x, "prefill_plan", "get_prefill_chunk_plan", "default", ps,
                    IO({"prefill_seq_lens", "prefill_seq_lens"}, {"prefill_query_lens", "prefill_query_lens"}),
                    IO({"chunk_plan", "chunk_plan"}, {"num_chunks", "num_chunks"}));
    dsv4_chain_new(x, "attn_pf", DSV4_BF16, 3, (const int64_t[]){g->T_pf, g->H, V41_HEAD_DIM}, NULL);
    const dsv4_tensor *plan = dsv4_chain_get(x, "chunk_plan"), *nc = dsv4_chain_get(x, "num_chunks");
    if (!plan || !nc)
        return dsv4_chain_failed(x);
    /* In a propagated run the plan may be the implementation's: the loop
     * follows it as the seed would, within the workspace's bounds. */
    const int code = dsv4_chain_diverged(x, "chunk_plan") || dsv4_chain_diverged(x, "num_chunks") ? DSV4_EFAIL
                                                                                                  : DSV4_ERUNTIME;
    const int64_t n = ((const int64_t *)nc->data)[0];
    int64_t row[DSV4_PARAM_LIST_MAX][4];
    if (n < 1 || n > g->n_pf)
        return dsv4_chain_fail(x, code, "the chunk plan has %" PRId64 " chunks for %" PRId64 " prefills", n, g->n_pf);
    memcpy(row, plan->data, (size_t)n * sizeof row[0]);
    for (int64_t k = 0; k < n; k++) {
        const int64_t s = row[k][0], e = row[k][1], cN = row[k][2], cM = row[k][3];
        if (s < 0 || e <= s || e > g->n_pf || cN < 0 || cM < cN || (e - s) * cM > V41_CHUNK * g->M)
            return dsv4_chain_fail(x, code, "chunk %" PRId64 " of the plan (%" PRId64 ", %" PRId64 ", %" PRId64
                                   ", %" PRId64 ") does not fit the batch or the workspace", k, s, e, cN, cM);
        if (prefill_chunk(w, k, s, e, cN, cM))
            break;
    }
    return dsv4_chain_failed(x);
}

/* _forward_decode: the decode top-k CSR (_decode_topk_ragged), the SWA CSR
 * (the metadata builder's), the ragged decode, its epilogue. */
static int stages_decode(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "decode_indices");
    dsv4_params *ps;
    if (g->c) {
        dsv4_chain_rows(x, "d_topk", "topk_indices", 0, g->T_dec);
        dsv4_chain_rows(x, "d_ttr", "token_to_req", 0, g->T_dec);
        dsv4_chain_rows(x, "d_bt", "comp_block_table", 0, g->n_dec);
        dsv4_chain_rows(x, "d_valid", "is_valid_token", 0, g->T_dec);
        ps = fresh(w);
        dsv4_chain_pint(x, ps, "block_size", g->Bc);
        dsv4_chain_pint(x, ps, "compress_ratio", g->c);
        dsv4_chain_pint(x, ps, "topk", g->K);
        dsv4_chain_step(x, "decode_topk_ragged", "compute_global_topk_ragged_indices_and_indptr", "default", ps,
                        IO({"topk_indices", "d_topk"}, {"token_to_req_indices", "d_ttr"}, {"block_table", "d_bt"},
                           {"is_valid_token", "d_valid"}),
                        IO({"topk_ragged_indices", "d_topk_idx"}, {"topk_ragged_indptr", "d_topk_ptr"}));
    }
    ps = fresh(w);
    dsv4_chain_pint(x, ps, "window_size", g->W);
    dsv4_chain_pint(x, ps, "block_size", V41_SWA_BLOCK);
    dsv4_chain_pint(x, ps, "token_offset", 0);
    dsv4_chain_pint(x, ps, "num_out_rows", g->T_dec);
    dsv4_chain_step(x, "decode_swa_indices", "decode_swa_indices_and_lens", "default", ps,
                    IO({"query_start_loc", "query_start_loc"}, {"seq_lens", "seq_lens"},
                       {"token_to_req_indices", "token_to_req"}, {"is_valid_token", "is_valid_token"},
                       {"block_table", "swa_block_table"}, {"stale_decode_swa_indices", "stale_decode_swa"}),
                    IO({"decode_swa_ragged_indices", "d_swa_idx"}, {"decode_swa_ragged_indptr", "d_swa_ptr"}));

    dsv4_chain_stage(x, "decode_attn");
    dsv4_chain_rows(x, "d_q", "q_attn", 0, g->T_dec);
    dsv4_chain_rows(x, "d_pos", "positions", 0, g->T_dec);
    ps = fresh(w);
    dsv4_chain_pfloat(x, ps, "scale", 1.0 / sqrt((double)V41_HEAD_DIM));
    dsv4_chain_pint(x, ps, "swa_only", g->c == 0);
    dsv4_chain_pint(x, ps, "num_heads", g->H);
    dsv4_chain_pint(x, ps, "window_size", g->W);
    dsv4_chain_pint(x, ps, "compress_ratio", g->c ? g->c : 4);
    dsv4_chain_pint(x, ps, "topk", g->K);
    if (g->c)
        dsv4_chain_step(x, "decode_attn", "rocm_sparse_attn_decode", "default", ps,
                        IO({"q", "d_q"}, {"swa_k_cache", "swa_cache"}, {"kv_cache", "kv_cache"},
                           {"attn_sink", "attn_sink"}, {"swa_ragged_indices", "d_swa_idx"},
                           {"swa_ragged_indptr", "d_swa_ptr"}, {"topk_ragged_indices", "d_topk_idx"},
                           {"topk_ragged_indptr", "d_topk_ptr"}),
                        IO({"output", "attn_dec"}));
    else
        dsv4_chain_step(x, "decode_attn", "rocm_sparse_attn_decode", "default", ps,
                        IO({"q", "d_q"}, {"swa_k_cache", "swa_cache"}, {"attn_sink", "attn_sink"},
                           {"swa_ragged_indices", "d_swa_idx"}, {"swa_ragged_indptr", "d_swa_ptr"}),
                        IO({"output", "attn_dec"}));
    if (!g->mxfp8 && !g->fused_inv_rope)
        return dsv4_chain_failed(x);
    /* The reduce epilogue, composed: the rotation of the decode rows
     * (bf16, fused_inv_rope) or rotation and MXFP8 of every decode row. */
    ps = fresh(w);
    dsv4_chain_pint(x, ps, "rope_head_dim", 64);
    dsv4_chain_pint(x, ps, "num_tokens", g->T_dec);
    dsv4_chain_pint(x, ps, "num_heads", g->H);
    dsv4_chain_pint(x, ps, "max_position", g->max_S);
    if (g->mxfp8)
        return dsv4_chain_step(x, "decode_mxfp8", "rocm_inverse_rope_mxfp8_rows", "default", ps,
                               IO({"o", "attn_dec"}, {"positions", "d_pos"}, {"cos_sin_cache", "cos_sin_cache"}),
                               IO({"data", "dec_mx"}, {"scale", "dec_mx_scale"}));
    dsv4_chain_pint(x, ps, "rotated", 0);
    return dsv4_chain_step(x, "decode_epilogue", "rocm_inverse_rope_rows", "default", ps,
                           IO({"o", "attn_dec"}, {"positions", "d_pos"}, {"cos_sin_cache", "cos_sin_cache"}),
                           IO({"o", "attn_dec"}));
}

/* Decode rows then prefill rows into one [T, ...] tensor. */
static int stack_rows(v41_run *w, const char *dst, const char *dec, const char *pf, dsv4_dtype dt, int ndim,
                      const int64_t *shape)
{
    dsv4_chain *x = w->x;
    dsv4_chain_new(x, dst, dt, ndim, shape, NULL);
    if (w->g.T_dec)
        dsv4_chain_put_rows(x, dst, dec, 0);
    if (w->g.T_pf)
        dsv4_chain_put_rows(x, dst, pf, w->g.T_dec);
    return dsv4_chain_failed(x);
}

/* forward_mqa's epilogue (the rotated split or the MXFP8 rows) and _o_proj. */
static int stages_output(v41_run *w)
{
    dsv4_chain *x = w->x;
    const v41_cfg *g = &w->g;
    dsv4_chain_stage(x, "inverse_rope");
    dsv4_params *ps = fresh(w);
    dsv4_chain_pint(x, ps, "rope_head_dim", 64);
    dsv4_chain_pint(x, ps, "num_heads", g->H);
    dsv4_chain_pint(x, ps, "max_position", g->max_S);
    if (g->mxfp8) {
        if (g->T_pf) {
            dsv4_chain_rows(x, "p_pos", "positions", g->T_dec, g->T);
            dsv4_chain_pint(x, ps, "num_tokens", g->T_pf);
            dsv4_chain_step(x, "inverse_rope_mxfp8", "rocm_inverse_rope_mxfp8_rows", "default", ps,
                            IO({"o", "attn_pf"}, {"positions", "p_pos"}, {"cos_sin_cache", "cos_sin_cache"}),
                            IO({"data", "pf_mx"}, {"scale", "pf_mx_scale"}));
        }
        stack_rows(w, "attn_mx", "dec_mx", "pf_mx", DSV4_F8E4M3FN, 2, (const int64_t[]){g->T, g->H * V41_HEAD_DIM});
        stack_rows(w, "attn_mx_scale", "dec_mx_scale", "pf_mx_scale", DSV4_U8, 2,
                   (const int64_t[]){g->T, g->H * V41_HEAD_DIM / 32});
        dsv4_chain_stage(x, "wo_a");
        ps = fresh(w);
        dsv4_chain_pint(x, ps, "n_local_groups", g->G);
        dsv4_chain_pint(x, ps, "o_lora_rank", g->Ro);
        dsv4_chain_pint(x, ps, "num_tokens", g->T);
        dsv4_chain_pint(x, ps, "K", g->Dg);
        dsv4_chain_step(x, "wo_a", "rocm_mxfp8_wo_a_bmm", "default", ps,
                        IO({"a", "attn_mx"}, {"a_scale", "attn_mx_scale"}, {"wo_a", "wo_a"}, {"wo_a_scale", "wo_a_scale"}),
                        IO({"out", "z"}));
    } else {
        stack_rows(w, "attn_raw", "attn_dec", "attn_pf", DSV4_BF16, 3, (const int64_t[]){g->T, g->H, V41_HEAD_DIM});
        /* rocm_inverse_rope_rows_(output[rotated:]): the op leaves the
         * leading `rotated` rows as they are. */
        dsv4_chain_pint(x, ps, "rotated", g->fused_inv_rope ? g->T_dec : 0);
        dsv4_chain_pint(x, ps, "num_tokens", g->T);
        dsv4_chain_step(x, "inverse_rope", "rocm_inverse_rope_rows", "default", ps,
                        IO({"o", "attn_raw"}, {"positions", "positions"}, {"cos_sin_cache", "cos_sin_cache"}),
                        IO({"o", "attn_out"}));
        dsv4_chain_stage(x, "wo_a");
        ps = fresh(w);
        dsv4_chain_pint(x, ps, "n_local_groups", g->G);
        dsv4_chain_pint(x, ps, "o_lora_rank", g->Ro);
        dsv4_chain_pint(x, ps, "inverse_rope", 0);
        dsv4_chain_pint(x, ps, "num_tokens", g->T);
        dsv4_chain_pint(x, ps, "num_heads", g->H);
        dsv4_chain_pint(x, ps, "max_position", g->max_S);
        dsv4_chain_step(x, "wo_a", "rocm_inv_rope_einsum", "default", ps,
                        IO({"o", "attn_out"}, {"positions", "positions"}, {"cos_sin_cache", "cos_sin_cache"},
                           {"wo_a", "wo_a"}),
                        IO({"out", "z"}));
    }
    dsv4_chain_stage(x, "wo_b"); /* _wo_b_after_wo_a = _bpre_attn_gemm(wo_b) */
    group_quant(w, "wo_b_quant", "z", g->T, g->G * g->Ro, 1, "z_fp8", "z_scale_t");
    return gemm(w, "wo_b", 1, "z_fp8", "z_scale_t", "w_o_b", g->T, g->D, g->G * g->Ro, "layer_out");
}

static int v41_run_stages(dsv4_chain *x, const dsv4_params *ps)
{
    v41_run *w = calloc(1, sizeof *w);
    dsv4_status st = {0};
    if (!w)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory");
    w->x = x;
    if (v41_cfg_of(ps, &w->g, &st)) {
        free(w);
        return dsv4_chain_fail(x, st.code, "%s", st.msg);
    }
    stages_q_kv(w);
    if (w->g.c)
        stages_compressor(w);
    if (w->g.c == 4)
        stages_indexer(w);
    if (w->g.T_pf)
        stages_prefill(w);
    if (w->g.T_dec)
        stages_decode(w);
    stages_output(w);
    free(w);
    return dsv4_chain_failed(x);
}

const dsv4_chain_def dsv4_chain_v41_attention_layer = {&v41_desc, v41_generate, v41_run_stages, "layer_out"};
