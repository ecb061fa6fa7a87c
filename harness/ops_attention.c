/* ops_attention.c - registry entries of the sparse attention with sink and
 * its epilogues.  Semantics: ref/attention.c; spec sparse_attention.md 8, 9.
 *
 * Tolerance of the attention output (rocm_sparse_attn_*): the golden is the
 * double-precision ideal (stored as float32).  The kernel (spec 8.3/8.4
 * [S9]) differs from it by, per element (t, h, d), with w_i the
 * sink-normalised weights, A = sum_i w_i |V_i,d| and n the row's valid keys:
 *  - p rounded to bf16 before P.V (l keeps fp32 p): relative error <= 2^-9
 *    per weight, so <= 2^-9 A;
 *  - fp32 scores: |ds_i| <= gamma_512 scale |q|.|K_i| + 2^-24 |s_i|
 *    <= delta = 513 2^-24 scale ||q|| max_i ||K_i|| (Cauchy-Schwarz); each
 *    normalised weight moves by a factor within e^{+-2 delta}, so
 *    <= (e^{2 delta} - 1) A;
 *  - fp32 sums of n terms (P.V and l: gamma_n each), exp, alpha, the final
 *    division and the scale product: <= (2n + 16) 2^-24 A;
 *  - the bf16 store: <= 0.5 ulp of the fp32 value, bounded by 1 ulp_bf16 of
 *    the ideal (covers a binade crossing), plus 2^-23 |e| for the float32
 *    golden and the fp32 division.
 * Hence bound = 1 ulp_bf16(e) + 2^-23 |e| + rho A (dsv4_attn_rho).  Rows
 * with no valid key have A = 0, e = 0: they must be 0 (to one bf16
 * subnormal).  The bound grows with n only through the fp32 accumulation
 * term; A keeps it proportional to the output's magnitude, not to max|V|. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compare/attn_hints.h"
#include "../ref/attention.h"
#include "../ref/indices.h"
#include "../ref/numerics.h"
#include "ops.h"
#include "rng.h"

#define D DSV4_HEAD_DIM

static const char *const default_only[] = {"default", NULL};

/* ------------------------------------------------------------------ */
/* Shared input generation                                             */

/* One bf16 key row as the gather writes it: NoPE lanes are fp8 e4m3fn
 * values times a power-of-two block scale (exact in bf16, spec 4), RoPE
 * lanes plain bf16 (spec 2.1). */
static void gen_key_row(dsv4_rng *rng, uint16_t *row)
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

/* q after the q-norm: rows of RMS about 1 (spec 3), as bf16. */
static void gen_q(dsv4_rng *rng, uint16_t *q, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        q[i] = dsv4_bf16_from_f32((float)dsv4_rng_normal(rng));
}

/* attn_sink [H]: "random" = randn*10 per head (anchors.md: a dropped sink
 * then moves the output well beyond tolerance), "none" = -inf (no sink,
 * spec 8.1), or a number for every head. */
static int gen_sink(const char *mode, uint64_t seed, float *sink, int64_t H, dsv4_status *st)
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

/* ------------------------------------------------------------------ */
/* rocm_sparse_attn_prefill                                            */

static const char *const prefill_variant_docs[] = {
    "dense rows over the gathered bf16 workspace, converted as build_ragged_indices_from_dense "
    "(len = clamp(topk_length, 0, P), valid iff 0 <= v < kv rows), no NaN scrubbing "
    "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
};

static const dsv4_param_spec prefill_params[] = {
    {"scale", DSV4_P_FLOAT, "0.044194173824159216", "softmax scale, head_dim^-0.5 = 512^-0.5 [S14]", 0},
    {"num_heads", DSV4_P_INT, "8", "generator: H", 1},
    {"window_size", DSV4_P_INT, "128", "generator: sliding window W", 1},
    {"compress_ratio", DSV4_P_INT, "4", "generator: c; 0 = SWA-only layer (top-k 0, N 0)", 1},
    {"topk", DSV4_P_INT, "512", "generator: top-k width K", 1},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request (default 0)", 1},
    {"max_model_len", DSV4_P_INT, "-1", "generator: for N = ceil(max_model_len / c); -1: longest request", 1},
    {"sink", DSV4_P_STR, "random", "generator: attn_sink: random (randn*10), none (-inf), or a number", 1},
    {"invalid_frac", DSV4_P_FLOAT, "0", "generator: fraction of entries set to -1", 1},
    {"oob_frac", DSV4_P_FLOAT, "0", "generator: fraction of entries set out of range (>= rows or <= -2)", 1},
    {"blank_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose index row is all -1 (length kept)", 1},
    {"empty_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose topk_length is 0", 1},
    {"nan_unused", DSV4_P_INT, "1", "generator: 1 = workspace rows no index reaches hold NaN (stale)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec prefill_inputs[] = {
    {"q", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] queries after q-norm and RoPE"},
    {"kv", DSV4_BF16, DSV4_DT_NONE, "[rows, 1, 512] gathered workspace (compressed | SWA per request)"},
    {"indices", DSV4_I32, DSV4_DT_NONE, "[T, 1, P] combined rows into kv, -1 padded"},
    {"topk_length", DSV4_I32, DSV4_DT_NONE, "[T] entries to read per row"},
    {"attn_sink", DSV4_F32, DSV4_DT_NONE, "[H] sink logit per head (-inf: none)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec attn_outputs[] = {
    {"output", DSV4_BF16, DSV4_F32, "[T, H, 512] attention output (golden: the ideal)"},
    {NULL, 0, 0, NULL},
};

typedef struct req_shape {
    int64_t R, T;
    const int64_t *qlen;
    int64_t prefix[DSV4_PARAM_LIST_MAX];
} req_shape;

static int req_shape_of(const dsv4_params *ps, req_shape *rs, dsv4_status *st)
{
    const int64_t *pre;
    rs->R = dsv4_params_list(ps, "query_lens", &rs->qlen);
    int np = dsv4_params_list(ps, "prefix_lens", &pre);
    if (np != 0 && np != rs->R)
        return dsv4_fail(st, DSV4_EINPUT, "prefix_lens has %d entries, query_lens %" PRId64, np, rs->R);
    rs->T = 0;
    for (int64_t r = 0; r < rs->R; r++) {
        rs->prefix[r] = np ? pre[r] : 0;
        if (rs->qlen[r] < 0 || rs->prefix[r] < 0 || rs->qlen[r] > (1 << 20) || rs->prefix[r] > (1 << 24))
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": query_lens / prefix_lens out of range", r);
        rs->T += rs->qlen[r];
    }
    return DSV4_OK;
}

/* Distinct compressed indices from [0, n) in random order, -1 padded (the
 * indexer's topk_indices_buffer rows, spec 6.1). */
static void fill_topk_row(dsv4_rng *rng, int32_t *row, int64_t Wk, int64_t n, int32_t *scratch)
{
    int64_t take = n < Wk ? n : Wk;
    for (int64_t i = 0; i < n; i++)
        scratch[i] = (int32_t)i;
    for (int64_t i = 0; i < take; i++) {
        int64_t j = dsv4_rng_range(rng, i, n);
        int32_t tmp = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = tmp;
    }
    for (int64_t j = 0; j < Wk; j++)
        row[j] = j < take ? scratch[j] : -1;
}

static int in_list(const dsv4_params *ps, const char *name, int64_t v)
{
    const int64_t *l;
    int n = dsv4_params_list(ps, name, &l);
    for (int k = 0; k < n; k++)
        if (l[k] == v)
            return 1;
    return 0;
}

/* The combined rows of the seed's _forward_prefill for one chunk: top-k
 * rows from the indexer, then combine_topk_swa_indices (ref/indices.c). */
static int prefill_indices(const dsv4_opctx *c, const req_shape *rs, int64_t W, int64_t ratio, int64_t topk,
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
            fill_topk_row(&rng, tk + t * topk, topk, (rs->prefix[r] + i + 1) / ratio, scratch);
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
        if (in_list(c->params, "blank_rows", t))
            for (int64_t j = 0; j < P; j++)
                idx[t * P + j] = -1;
        if (in_list(c->params, "empty_rows", t))
            lens[t] = 0;
    }
}

static int prefill_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    req_shape rs;
    int rc = req_shape_of(ps, &rs, st);
    if (rc)
        return rc;
    const int64_t H = dsv4_params_int(ps, "num_heads"), W = dsv4_params_int(ps, "window_size");
    const int64_t c_in = dsv4_params_int(ps, "compress_ratio");
    if (H < 1 || H > 1024 || W < 1 || c_in < 0 || dsv4_params_int(ps, "topk") < 0)
        return dsv4_fail(st, DSV4_EINPUT, "num_heads in [1, 1024], window_size >= 1, compress_ratio, topk >= 0");
    /* SWA-only layers: top_k = 0 and N = 0 (seed _forward_prefill); the
     * combine then needs c >= 1 (spec 6.3: the fused kernel clamps to 1). */
    const int64_t ratio = c_in ? c_in : 1, topk = c_in ? dsv4_params_int(ps, "topk") : 0;
    int64_t mml = dsv4_params_int(ps, "max_model_len");
    int32_t qsl[DSV4_PARAM_LIST_MAX + 1], seq[DSV4_PARAM_LIST_MAX], gat[DSV4_PARAM_LIST_MAX];
    qsl[0] = 0;
    for (int64_t r = 0; r < rs.R; r++) {
        int64_t S = rs.prefix[r] + rs.qlen[r];
        qsl[r + 1] = (int32_t)(qsl[r] + rs.qlen[r]);
        seq[r] = (int32_t)S;
        /* gather_len = query_len + min(prefix_len, W - 1) (spec 5.3 [S12]) */
        gat[r] = (int32_t)(rs.qlen[r] + (rs.prefix[r] < W - 1 ? rs.prefix[r] : W - 1));
        mml = mml < S ? S : mml;
    }
    /* N = ceil(max_model_len / c), M = N + W + tokens (spec 6.1). */
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
     * entries and r*M + N + [0, G) the SWA window (spec 6.1); the rest is
     * stale from other layers (NaN here, to prove it is never read). */
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "kv");
    uint16_t *k = kv->data;
    const int nan_unused = dsv4_params_int(ps, "nan_unused") != 0;
    for (int64_t r = 0; r < rs.R; r++)
        for (int64_t x = 0; x < M; x++) {
            uint16_t *row = k + (r * M + x) * D;
            int used = (x < seq[r] / ratio && c_in) || (x >= N && x < N + gat[r]);
            if (used || !nan_unused)
                gen_key_row(&rng, row);
            else
                for (int d = 0; d < D; d++)
                    row[d] = 0x7FC0; /* bf16 quiet NaN */
        }
    dsv4_rng_init(&rng, c->seed, "q");
    gen_q(&rng, q->data, rs.T * H * D);
    return gen_sink(dsv4_params_str(ps, "sink"), c->seed, sink->data, H, st);
}

/* The attention arguments of the dense prefill form. */
static int prefill_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st)
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
    s->num_rows = kv->shape[0]; /* num_rows = kv.shape[0] (spec 8.2 [S9]) */
    s->bf16_rows = kv->data;
    s->scrub_nan = 0;           /* no NaN scrubbing in prefill (spec 8.3) */
    s->indices = idx->data;
    s->lens = len->data;
    s->width = idx->shape[2];
    return DSV4_OK;
}

typedef int (*args_fn)(const dsv4_opctx *, const dsv4_tensors *, dsv4_attn_args *, dsv4_status *);

/* The attention ops share everything below through their args function. */
static int attn_validate_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    return rc ? rc : dsv4_attn_check(&a, st);
}

static int attn_alloc_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
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

static int attn_reference_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
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
    rc = dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, NULL, st);
    if (!rc && o->dtype == DSV4_F32)
        for (int64_t i = 0; i < n; i++)
            ((float *)o->data)[i] = (float)ideal[i];
    else if (!rc)
        for (int64_t i = 0; i < n; i++)
            dsv4_tensor_set(o, i, ideal[i]);
    free(ideal);
    return rc;
}

static int attn_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_FLOAT;
    pol->ulp = 1.0;
    pol->rtol = 0x1p-23;
    pol->output_dtype = DSV4_BF16;
    pol->nan = DSV4_NAN_MATCH;
    snprintf(pol->rule, sizeof pol->rule,
             "per element: 1 ulp_bf16(e) + 2^-23|e| + rho*sum_i w_i|V_i,d|, rho = 2^-9 (bf16 p) + "
             "e^{2 delta}-1 (fp32 scores) + (2n+16)2^-24 (fp32 sums, n valid keys); no valid key: 0");
    return DSV4_OK;
}

/* Per-element term rho(t, h) * A[t, h, d] (derivation at the top). */
static int attn_bound_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, double *bound, int64_t n,
                           dsv4_status *st)
{
    dsv4_attn_args a;
    int rc = fn(c, in, &a, st);
    if (rc)
        return rc;
    if (n != a.T * a.H * D)
        return dsv4_fail(st, DSV4_EINPUT, "attention bound: %" PRId64 " elements for [%" PRId64 ", %" PRId64
                         ", 512]", n, a.T, a.H);
    double *ideal = malloc((size_t)(n ? n : 1) * sizeof(double));
    double *mag = malloc((size_t)(a.T * a.H + 1) * sizeof(double));
    int64_t *nv = malloc((size_t)(a.T + 1) * sizeof(int64_t));
    dsv4_attn_diag dg = {bound, NULL, nv, mag};
    if (!ideal || !mag || !nv)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, &dg, st);
    for (int64_t t = 0; !rc && t < a.T; t++)
        for (int64_t h = 0; h < a.H; h++) {
            double rho = dsv4_attn_rho(nv[t], mag[t * a.H + h]);
            for (int d = 0; d < D; d++)
                bound[(t * a.H + h) * D + d] *= rho;
        }
    free(ideal), free(mag), free(nv);
    return rc;
}

static void attn_hint_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in,
                           const dsv4_tensor *expected, const dsv4_tensor *actual, dsv4_cmp_result *res)
{
    dsv4_attn_args a;
    dsv4_status st = {0};
    if (fn(c, in, &a, &st))
        return;
    const int64_t n = a.T * a.H * D;
    double *ideal = malloc((size_t)(n ? n : 1) * sizeof(double));
    double *sw = malloc((size_t)(a.T * a.H + 1) * sizeof(double));
    int64_t *nv = malloc((size_t)(a.T + 1) * sizeof(int64_t));
    dsv4_attn_diag dg = {NULL, sw, nv, NULL};
    if (ideal && sw && nv && !dsv4_ref_sparse_attn(&a, DSV4_ATTN_IDEAL, ideal, &dg, &st)) {
        dsv4_attn_rows rows = {a.T, a.H, D, sw, nv};
        dsv4_attn_hint(expected, actual, &rows, res);
    }
    free(ideal), free(sw), free(nv);
}

/* "token t, head h, dim d (NoPE|RoPE), n valid keys" */
static void attn_locate_with(args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, int64_t flat, char *buf,
                             size_t len)
{
    dsv4_attn_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (fn(c, in, &a, &st) || a.H < 1)
        return;
    const int64_t t = flat / (a.H * D), h = flat / D % a.H, d = flat % D;
    if (t >= a.T)
        return;
    snprintf(buf, len, "token %" PRId64 ", head %" PRId64 ", dim %" PRId64 " (%s), %" PRId64 " valid keys", t, h,
             d, d < DSV4_NOPE_DIM ? "NoPE" : "RoPE", dsv4_attn_count_valid(&a, t));
}

#define ATTN_CALLBACKS(prefix, fn)                                                                            \
    static int prefix##_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)               \
    {                                                                                                         \
        return attn_validate_with(fn, c, in, st);                                                             \
    }                                                                                                         \
    static int prefix##_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,                 \
                              dsv4_status *st)                                                                \
    {                                                                                                         \
        return attn_alloc_with(fn, c, in, out, st);                                                           \
    }                                                                                                         \
    static int prefix##_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,             \
                                  dsv4_status *st)                                                            \
    {                                                                                                         \
        return attn_reference_with(fn, c, in, out, st);                                                       \
    }                                                                                                         \
    static int prefix##_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *b,     \
                              int64_t n, dsv4_status *st)                                                     \
    {                                                                                                         \
        (void)output;                                                                                         \
        return attn_bound_with(fn, c, in, b, n, st);                                                          \
    }                                                                                                         \
    static void prefix##_hint(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,                \
                              const dsv4_tensor *e, const dsv4_tensor *a, dsv4_cmp_result *res)               \
    {                                                                                                         \
        (void)output;                                                                                         \
        attn_hint_with(fn, c, in, e, a, res);                                                                 \
    }                                                                                                         \
    static void prefix##_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t f,   \
                                char *buf, size_t len)                                                        \
    {                                                                                                         \
        (void)output;                                                                                         \
        attn_locate_with(fn, c, in, f, buf, len);                                                             \
    }

ATTN_CALLBACKS(prefill, prefill_args)

const dsv4_op dsv4_op_rocm_sparse_attn_prefill = {
    .name = "rocm_sparse_attn_prefill",
    .summary = "sparse MLA prefill with sink over the gathered bf16 workspace (dense index rows)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 8.1-8.3)",
    .variants = default_only,
    .variant_docs = prefill_variant_docs,
    .params = prefill_params,
    .inputs = prefill_inputs,
    .outputs = attn_outputs,
    .generate = prefill_generate,
    .validate = prefill_validate,
    .alloc_outputs = prefill_alloc,
    .reference = prefill_reference,
    .policy = attn_policy,
    .locate = prefill_locate,
    .bound = prefill_bound,
    .hint = prefill_hint,
};

/* ------------------------------------------------------------------ */
/* rocm_inverse_rope_rows (rocm_inverse_rope_rows_, spec 9.1)          */
/*
 * Tolerance: NoPE lanes and rows < rotated are untouched: exact.  A RoPE
 * lane is bf16(fp32(a*c) +- fp32(b*s)) against the double a*c +- b*s of the
 * same fp32 c, s: the fp32 value is within delta = 3 * 2^-24 (|a c| + |b s|)
 * (two products and one sum, each rounded once; an FMA is closer still),
 * the bf16 store adds 0.5 ulp_bf16 of that value, and the float32 golden
 * 2^-24 |e|: bound = 0.5 ulp_bf16(|e| + delta) + delta + 2^-24 |e|. */

static const char *const rope_variant_docs[] = {
    "in place on the bf16 output: inverse GPT-J rotation of lanes 448..511 in fp32 at the token's "
    "position, bf16 RNE store, NoPE lanes and rows < rotated untouched "
    "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
};

static const dsv4_param_spec rope_params[] = {
    {"rotated", DSV4_P_INT, "0", "leading rows the decode epilogue already rotated (left untouched)", 0},
    {"rope_head_dim", DSV4_P_INT, "64", "RoPE lanes at the end of each 512-lane head row", 0},
    {"num_tokens", DSV4_P_INT, "8", "generator: T", 1},
    {"num_heads", DSV4_P_INT, "8", "generator: H", 1},
    {"max_position", DSV4_P_INT, "512", "generator: rows of cos_sin_cache", 1},
    {"rope_theta", DSV4_P_FLOAT, "10000", "generator: base of the cos/sin table (SWA layers: rope_theta)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec rope_inputs[] = {
    {"o", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] attention output (bf16)"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T] the query tokens' own positions"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_position, rope_head_dim] rows cos | sin"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec rope_outputs[] = {
    {"o", DSV4_BF16, DSV4_F32, "[T, H, 512] o after the in-place inverse RoPE (golden: the ideal)"},
    {NULL, 0, 0, NULL},
};

/* cos_sin_cache of a plain RoPE table: cos/sin(p * theta^(-2k/rd)) rounded
 * to fp32 (spec 11 [S21]: SWA-only layers use rope_theta, factor 1).  The
 * reference never recomputes it: it is an input. */
static void gen_cos_sin(float *cache, int64_t P, int rd, double theta)
{
    for (int64_t p = 0; p < P; p++)
        for (int k = 0; k < rd / 2; k++) {
            double ang = (double)p * pow(theta, -2.0 * k / rd);
            cache[p * rd + k] = (float)cos(ang);
            cache[p * rd + rd / 2 + k] = (float)sin(ang);
        }
}

static int rope_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
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
    gen_q(&rng, o->data, T * H * D);
    dsv4_rng_init(&rng, c->seed, "positions");
    for (int64_t t = 0; t < T; t++)
        ((int64_t *)pos->data)[t] = dsv4_rng_range(&rng, 0, P);
    gen_cos_sin(cs->data, P, (int)rd, dsv4_params_float(ps, "rope_theta"));
    return DSV4_OK;
}

typedef struct rope_io {
    const dsv4_tensor *o, *pos, *cs;
    int64_t T, H, rotated;
    int rd;
} rope_io;

static int rope_inputs_of(const dsv4_opctx *c, const dsv4_tensors *in, rope_io *r, dsv4_status *st)
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

static int rope_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    rope_io r;
    int rc = rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    const float *cs = r.cs->data;
    for (int64_t i = 0; i < dsv4_tensor_numel(r.cs); i++)
        if (!isfinite(cs[i]))
            return dsv4_fail(st, DSV4_EINPUT, "cos_sin_cache[%" PRId64 ", %" PRId64 "] is not finite",
                             i / r.rd, i % r.rd);
    double *tmp = malloc((size_t)(r.T * r.H * D + 1) * sizeof(double));
    if (!tmp)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    rc = dsv4_ref_inverse_rope_rows_f64(r.o->data, r.T, r.H, r.pos->data, cs, r.cs->shape[0], r.rd, r.rotated,
                                        tmp, st);
    free(tmp);
    return rc;
}

static int rope_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    rope_io r;
    int rc = rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "o", DSV4_BF16, 3, r.o->shape, &o, st)))
        return rc;
    memcpy(o->data, r.o->data, r.o->nbytes); /* in place: starts as the input */
    return DSV4_OK;
}

static int rope_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    rope_io r;
    int rc = rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    dsv4_tensor *o = dsv4_tensors_find(out, "o");
    const int64_t n = r.T * r.H * D;
    if (o->dtype == DSV4_BF16) /* no ideal asked for: the kernel's own steps */
        return dsv4_ref_inverse_rope_rows(o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                          r.rotated, st);
    double *ideal = malloc((size_t)(n + 1) * sizeof(double));
    if (!ideal)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    rc = dsv4_ref_inverse_rope_rows_f64(r.o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                        r.rotated, ideal, st);
    for (int64_t i = 0; !rc && i < n; i++)
        dsv4_tensor_set(o, i, ideal[i]);
    free(ideal);
    return rc;
}

static int rope_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_FLOAT;
    pol->output_dtype = DSV4_BF16;
    pol->nan = DSV4_NAN_MATCH;
    snprintf(pol->rule, sizeof pol->rule,
             "NoPE lanes and rows < rotated exact; RoPE lanes 0.5 ulp_bf16(|e|+delta) + delta + 2^-24|e|, "
             "delta = 3*2^-24(|a c| + |b s|) (fp32 products and sum)");
    return DSV4_OK;
}

static int rope_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                      dsv4_status *st)
{
    (void)output;
    rope_io r;
    int rc = rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    if (n != r.T * r.H * D)
        return dsv4_fail(st, DSV4_EINPUT, "inverse rope bound: element count");
    const uint16_t *o = r.o->data;
    const float *cs = r.cs->data;
    const int half = r.rd / 2;
    for (int64_t t = r.rotated; t < r.T; t++) {
        const float *row = cs + ((const int64_t *)r.pos->data)[t] * r.rd;
        for (int64_t h = 0; h < r.H; h++)
            for (int k = 0; k < half; k++) {
                const int64_t i = (t * r.H + h) * D + (D - r.rd) + 2 * k;
                const double a = dsv4_bf16_to_f32(o[i]), b = dsv4_bf16_to_f32(o[i + 1]);
                const double cc = row[k], s = row[half + k];
                const double delta = 3.0 * 0x1p-24 * (fabs(a * cc) + fabs(b * s));
                const double e0 = fabs(a * cc + b * s), e1 = fabs(b * cc - a * s);
                bound[i] = 0.5 * dsv4_ulp(DSV4_BF16, e0 + delta) + delta + 0x1p-24 * e0;
                bound[i + 1] = 0.5 * dsv4_ulp(DSV4_BF16, e1 + delta) + delta + 0x1p-24 * e1;
            }
    }
    return DSV4_OK;
}

static void rope_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)output;
    rope_io r;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (rope_inputs_of(c, in, &r, &st) || r.H < 1)
        return;
    const int64_t t = flat / (r.H * D), h = flat / D % r.H, d = flat % D;
    if (t >= r.T)
        return;
    snprintf(buf, len, "token %" PRId64 " (position %" PRId64 "), head %" PRId64 ", dim %" PRId64 " (%s)", t,
             ((const int64_t *)r.pos->data)[t], h, d,
             t < r.rotated ? "row already rotated: untouched" : d < D - r.rd ? "NoPE: untouched" : "RoPE pair");
}

const dsv4_op dsv4_op_rocm_inverse_rope_rows = {
    .name = "rocm_inverse_rope_rows",
    .summary = "in-place inverse GPT-J RoPE of attention output rows past `rotated` (bf16 path)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 9.1)",
    .variants = default_only,
    .variant_docs = rope_variant_docs,
    .params = rope_params,
    .inputs = rope_inputs,
    .outputs = rope_outputs,
    .generate = rope_generate,
    .validate = rope_validate,
    .alloc_outputs = rope_alloc,
    .reference = rope_reference,
    .policy = rope_policy,
    .locate = rope_locate,
    .bound = rope_bound,
};
