/* rocm_sparse_attn_prefill.c - sparse MLA prefill with sink over the
 * gathered bf16 workspace (dense index rows).  Semantics: ref/attention.c
 * (docs/semantics/attention.md A8.1-A8.3); the tolerance is derived in
 * ops/attention/attention_common.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/indices.h"
#include "attention.h"

#define D DSV4_HEAD_DIM

/* One variant: nothing to choose, so no rule. */
static const dsv4_variant prefill_variants[] = {
    {"default",
     "dense rows over the gathered bf16 workspace, converted as build_ragged_indices_from_dense "
     "(len = clamp(topk_length, 0, P), valid iff 0 <= v < kv rows), no NaN scrubbing "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     NULL},
    {NULL, NULL, NULL},
};

static const char prefill_params[] =
    DSV4_ATTN_SCALE_PARAM
    DSV4_ATTN_HEADS_WINDOW_PARAMS
    "gen compress_ratio int   = 4    generator: c; 0 = SWA-only layer (top-k 0, N 0)\n"
    "gen topk           int   = 512  generator: top-k width K\n"
    DSV4_REQ_SHAPE_BCAST_PARAMS
    "gen max_model_len  int   = -1   generator: for N = ceil(max_model_len / c); -1: longest request\n"
    DSV4_ATTN_SINK_PARAM
    DSV4_ATTN_INVALID_FRAC_PARAM
    "gen oob_frac       float = 0    generator: fraction of entries set out of range (>= rows or <= -2)\n"
    "gen blank_rows     int[] = []   generator: tokens whose index row is all -1 (length kept)\n"
    "gen empty_rows     int[] = []   generator: tokens whose topk_length is 0\n"
    "gen nan_unused     int   = 1    generator: 1 = workspace rows no index reaches hold NaN (stale)\n";

static const char prefill_inputs[] =
    "q           bfloat16  [T, H, 512] queries after q-norm and RoPE\n"
    "kv          bfloat16  [rows, 1, 512] gathered workspace (compressed | SWA per request)\n"
    "indices     int32     [T, 1, P] combined rows into kv, -1 padded\n"
    "topk_length int32     [T] entries to read per row\n"
    "attn_sink   float32   [H] sink logit per head (-inf: none)\n";
static const char prefill_outputs[] = DSV4_ATTN_OUTPUTS;

/* The combined rows of the seed's _forward_prefill for one chunk: top-k
 * rows from the indexer, then combine_topk_swa_indices (ref/indices.c). */
static int prefill_indices(const dsv4_opctx *c, const dsv4_req_shape *rs, int64_t W, int64_t ratio, int64_t topk,
                           int64_t M, int64_t N, const int32_t *qsl, const int32_t *seq, const int32_t *gat,
                           int32_t *combined, int32_t *lens, dsv4_status *st)
{
    int64_t maxS = 1;
    for (int64_t r = 0; r < rs->R; r++)
        maxS = seq[r] + 1 > maxS ? seq[r] + 1 : maxS;
    int32_t *tk = malloc((size_t)(rs->T * (topk > 0 ? topk : 1)) * sizeof *tk);
    int32_t *scratch = malloc((size_t)maxS * sizeof *scratch);
    if (!tk || !scratch) {
        free(tk), free(scratch);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    int64_t t = 0;
    for (int64_t r = 0; r < rs->R; r++)
        for (int64_t i = 0; i < rs->qlen[r]; i++, t++)
            dsv4_fill_topk_row(&rng, tk + t * topk, topk, (rs->prefix[r] + i + 1) / ratio, scratch);
    dsv4_combine_args a = {tk, rs->T, topk, qsl, seq, gat, rs->R, W, ratio, topk, M, N};
    int rc = dsv4_ref_combine_topk_swa_indices(&a, DSV4_COMBINE_TORCH, combined, lens, st);
    free(tk);
    free(scratch);
    return rc;
}

/* Invalid, out-of-range, blank and empty rows, as the case asks. */
static void prefill_specials(const dsv4_opctx *c, int64_t T, int64_t P, int64_t rows, int32_t *idx,
                             int32_t *lens)
{
    const double inv = dsv4_params_float(c->params, "invalid_frac");
    const double oob = dsv4_params_float(c->params, "oob_frac");
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "indices.special");
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < lens[t] && j < P; j++) {
            double u = dsv4_rng_uniform(&rng);
            if (u < inv)
                idx[t * P + j] = -1;
            else if (u < inv + oob)
                idx[t * P + j] = (j & 1) ? (int32_t)(rows + dsv4_rng_range(&rng, 0, 1000))
                                         : (int32_t)(-2 - dsv4_rng_range(&rng, 0, 1000));
        }
        if (dsv4_params_list_has(c->params, "blank_rows", t))
            for (int64_t j = 0; j < P; j++)
                idx[t * P + j] = -1;
        if (dsv4_params_list_has(c->params, "empty_rows", t))
            lens[t] = 0;
    }
}

static int prefill_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    dsv4_attn_gen_params g;
    int rc = dsv4_attn_gen_params_of(ps, &g, st);
    if (rc)
        return rc;
    const dsv4_req_shape rs = g.rs;
    const int64_t H = g.H, W = g.W, c_in = g.compress_ratio;
    if (H < 1 || H > 1024 || W < 1 || c_in < 0 || g.topk < 0)
        return dsv4_fail(st, DSV4_EINPUT, "num_heads in [1, 1024], window_size >= 1, compress_ratio, topk >= 0");
    /* SWA-only layers: top_k = 0 and N = 0 (seed _forward_prefill); the
     * combine then needs c >= 1 (docs/semantics/indices.md A6.3: the fused
     * kernel clamps to 1). */
    const int64_t ratio = c_in ? c_in : 1, topk = c_in ? g.topk : 0;
    int64_t mml = dsv4_params_int(ps, "max_model_len");
    int32_t qsl[DSV4_PARAM_LIST_MAX + 1], seq[DSV4_PARAM_LIST_MAX], gat[DSV4_PARAM_LIST_MAX];
    qsl[0] = 0;
    for (int64_t r = 0; r < rs.R; r++) {
        int64_t S = rs.prefix[r] + rs.qlen[r];
        qsl[r + 1] = (int32_t)(qsl[r] + rs.qlen[r]);
        seq[r] = (int32_t)S;
        /* gather_len = query_len + min(prefix_len, W - 1) (docs/semantics/indices.md A5.3 [S12]) */
        gat[r] = (int32_t)(rs.qlen[r] + (rs.prefix[r] < W - 1 ? rs.prefix[r] : W - 1));
        mml = mml < S ? S : mml;
    }
    /* N = ceil(max_model_len / c), M = N + W + tokens (docs/semantics/indices.md A6.1). */
    const int64_t N = c_in ? (mml + ratio - 1) / ratio : 0, M = N + W + rs.T;
    const int64_t P = dsv4_combine_width(topk, W), rows = rs.R * M;
    dsv4_tensor *q, *kv, *idx, *len, *sink;
    int64_t sq[3] = {rs.T, H, D}, skv[3] = {rows, 1, D}, sidx[3] = {rs.T, 1, P};
    if ((rc = dsv4_tensors_add(in, "q", DSV4_BF16, 3, sq, &q, st)) ||
        (rc = dsv4_tensors_add(in, "kv", DSV4_BF16, 3, skv, &kv, st)) ||
        (rc = dsv4_tensors_add(in, "indices", DSV4_I32, 3, sidx, &idx, st)) ||
        (rc = dsv4_tensors_add(in, "topk_length", DSV4_I32, 1, &rs.T, &len, st)) ||
        (rc = dsv4_tensors_add(in, "attn_sink", DSV4_F32, 1, &H, &sink, st)))
        return rc;
    if ((rc = prefill_indices(c, &rs, W, ratio, topk, M, N, qsl, seq, gat, idx->data, len->data, st)))
        return rc;
    prefill_specials(c, rs.T, P, rows, idx->data, len->data);
    /* Workspace: per request r, rows r*M + [0, S//c) hold the compressed
     * entries and r*M + N + [0, G) the SWA window (docs/semantics/indices.md
     * A6.1); the rest is stale from other layers (NaN here, to prove it is
     * never read). */
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "kv");
    uint16_t *k = kv->data;
    const int nan_unused = dsv4_params_int(ps, "nan_unused") != 0;
    for (int64_t r = 0; r < rs.R; r++)
        for (int64_t x = 0; x < M; x++) {
            uint16_t *row = k + (r * M + x) * D;
            int used = (x < seq[r] / ratio && c_in) || (x >= N && x < N + gat[r]);
            if (used || !nan_unused)
                dsv4_attn_gen_key_row(&rng, row);
            else
                for (int d = 0; d < D; d++)
                    row[d] = 0x7FC0; /* bf16 quiet NaN */
        }
    dsv4_rng_init(&rng, c->seed, "q");
    dsv4_attn_gen_q(&rng, q->data, rs.T * H * D);
    return dsv4_attn_gen_sink(dsv4_params_str(ps, "sink"), c->seed, sink->data, H, st);
}

/* The attention arguments of the dense prefill form. */
int dsv4_attn_args_prefill(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st)
{
    const dsv4_tensor *q, *kv, *idx, *len, *sink;
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_BF16, 3, &q, st)) || (rc = dsv4_input(in, "kv", DSV4_BF16, 3, &kv, st)) ||
        (rc = dsv4_input(in, "indices", DSV4_I32, 3, &idx, st)) ||
        (rc = dsv4_input(in, "topk_length", DSV4_I32, 1, &len, st)) ||
        (rc = dsv4_input(in, "attn_sink", DSV4_F32, 1, &sink, st)))
        return rc;
    const int64_t T = q->shape[0], H = q->shape[1];
    if (q->shape[2] != D || kv->shape[1] != 1 || kv->shape[2] != D)
        return dsv4_fail(st, DSV4_EINPUT, "q must be [T, H, 512] and kv [rows, 1, 512]");
    if (idx->shape[0] != T || idx->shape[1] != 1 || len->shape[0] != T)
        return dsv4_fail(st, DSV4_EINPUT, "indices must be [T = %" PRId64 ", 1, P] and topk_length [T]", T);
    if (sink->shape[0] < H)
        return dsv4_fail(st, DSV4_EINPUT, "attn_sink has %" PRId64 " entries for %" PRId64 " heads",
                         sink->shape[0], H);
    memset(a, 0, sizeof *a);
    a->q = q->data;
    a->T = T;
    a->H = H;
    a->attn_sink = sink->data; /* attn_sink[:H] [S9] */
    a->scale = dsv4_params_float(c->params, "scale");
    a->nseg = 1;
    dsv4_attn_segment *s = &a->seg[0];
    s->name = "kv";
    s->num_rows = kv->shape[0]; /* num_rows = kv.shape[0] (docs/semantics/attention.md A8.2 [S9]) */
    s->bf16_rows = kv->data;
    s->scrub_nan = 0;           /* no NaN scrubbing in prefill (docs/semantics/attention.md A8.3) */
    s->indices = idx->data;
    s->lens = len->data;
    s->width = idx->shape[2];
    return DSV4_OK;
}

DSV4_ATTN_OP_CALLBACKS(prefill, dsv4_attn_args_prefill)

const dsv4_op dsv4_op_rocm_sparse_attn_prefill = {
    .name = "rocm_sparse_attn_prefill",
    .summary = "sparse MLA prefill with sink over the gathered bf16 workspace (dense index rows)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/attention.md A8.1-A8.3)",
    DSV4_OP_TABLES(prefill),
    .generate = prefill_generate,
    .validate = prefill_validate,
    .alloc_outputs = prefill_alloc,
    .reference = prefill_reference,
    .policy = dsv4_attn_op_policy,
    .locate = prefill_locate,
    .bound = prefill_bound,
    .hint = prefill_hint,
};
