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
#include "../ops/ops.h"
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
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request (default 0; one entry: all)", 1},
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

typedef dsv4_req_shape req_shape;

/* One prefix_lens entry applies to every request. */
static int req_shape_of(const dsv4_params *ps, req_shape *rs, dsv4_status *st)
{
    return dsv4_req_shape_of(ps, (int64_t)1 << 20, (int64_t)1 << 24, 1, rs, st);
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

/* The inputs of the inverse-RoPE ops: o [T, H, 512] filled by fill_o from
 * the "o" stream, positions in [0, max_position), and the RoPE table. */
typedef void (*fill_o_fn)(dsv4_rng *rng, uint16_t *o, int64_t T, int64_t H);

static int rope_rows_generate(const dsv4_opctx *c, dsv4_tensors *in, fill_o_fn fill_o, dsv4_tensor **o_out,
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

static void rope_fill_o(dsv4_rng *rng, uint16_t *o, int64_t T, int64_t H)
{
    gen_q(rng, o, T * H * D);
}

static int rope_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return rope_rows_generate(c, in, rope_fill_o, NULL, NULL, st);
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

/* NaN/Inf in the RoPE table is bad input (it would poison every rotated lane). */
static int cos_sin_finite(const rope_io *r, dsv4_status *st)
{
    const float *cs = r->cs->data;
    for (int64_t i = 0; i < dsv4_tensor_numel(r->cs); i++)
        if (!isfinite(cs[i]))
            return dsv4_fail(st, DSV4_EINPUT, "cos_sin_cache[%" PRId64 ", %" PRId64 "] is not finite",
                             i / r->rd, i % r->rd);
    return DSV4_OK;
}

static int rope_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    rope_io r;
    int rc = rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    if ((rc = cos_sin_finite(&r, st)))
        return rc;
    const float *cs = r.cs->data;
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

/* ------------------------------------------------------------------ */
/* rocm_inverse_rope_mxfp8_rows (spec 9.3, quant 2 "Inverse RoPE")    */
/*
 * Outputs are MXFP8 bytes compared with the `mx` kind (scales in binades,
 * codes in e4m3 steps of the expected code times the expected scale).
 * Tolerance, derived per element from the inputs (rmx_risk):
 *  - NoPE lanes are bf16 values copied to fp32 exactly, so their blocks
 *    (0..13 of every head: 448 = 14 * 32) quantize identically on any
 *    correct kernel: 0 steps, scale exact.
 *  - A RoPE lane is fl(fl(a c) +- fl(b s)) here; a kernel may contract to
 *    an FMA or order the sum differently.  With r the exact a c +- b s and
 *    E_p the two products' rounding errors, any such fp32 formulation is
 *    within E_p + 2^-24 (|a c| + |b s| + E_p) of r (E_p <= 2^-24 (|a c| +
 *    |b s|)), and exactly r when the products and r are fp32 numbers (cos 1,
 *    sin 0); so kernel and golden x differ by at most Delta = |x - r| + that
 *    (rmx_delta), <= 4 * 2^-24 (|a c| + |b s|).  Scaled by the block's
 *    2^(127-code), Delta <= 4 * 2^-24 * sqrt(2) * 448 ~ 1.5e-4, far below
 *    the smallest e4m3 step (2^-9), so a lane moves by at most one code, and
 *    only when [x - Delta, x + Delta] * 2^(127-code) straddles an e4m3
 *    rounding boundary: such a lane is "at risk" and may be 1 step off;
 *    every other lane must be exact.  Likewise a block whose
 *    [amax - Delta, amax + Delta] straddles a scale boundary may come back
 *    one binade off, and then all its 32 lanes are at risk.
 *  - The flip budget is the count of lanes at risk (scale tolerance 1 only
 *    when some block is at risk), so a kernel that rounds the rotated
 *    values to bf16 before quantizing (about 3-6% of RoPE lanes flip) or
 *    flips a NoPE lane fails.  vLLM's own test allows half an e4m3 step at
 *    the top of the block (16 * 2^(code-127)) on every lane (spec 9.3
 *    [S11]); ours is much tighter and still admits every correct fp32
 *    rotation. */

static const char *const rmx_variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
static const char *const rmx_variant_docs[] = {
    "fp32 inverse GPT-J rotation of lanes 448..511 (NoPE lanes bit-unchanged), then the vLLM ROCm "
    "_mxfp8_scale_bits rule clamp(ceil(log2_f32(fl(max(amax, FLT_MIN)/448))) + 127, 0, 254) with the kernel's fp32 "
    "division and fp32 log2 (the default for bit-exactness with the kernels, spec quant 2 'Edge cases', 10), "
    "q = x * 2^(127-code), RNE e4m3fn (vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
    "the exact rule ceil(log2(max(amax, FLT_MIN)/448)) (spec quant 2, 10): one binade higher where amax/448 is a "
    "few ulps above 2^k",
    "where amax/448 is a few ulps above 2^k",
    "the older _mxfp8_e4m3_quantize_torch helper (vllm mxfp8_utils.py@00134422, spec 9.2 [S30]): "
    "clamp(floor(log2 amax) + 127, 0, 254), x / 2^(code-127)",
};
static const dsv4_mx_rule rmx_rule[] = {DSV4_MX_FP8_CEIL_F32LOG2, DSV4_MX_FP8_CEIL, DSV4_MX_FP8_FLOOR};

static const dsv4_param_spec rmx_params[] = {
    {"rope_head_dim", DSV4_P_INT, "64", "RoPE lanes at the end of each 512-lane head row", 0},
    {"num_tokens", DSV4_P_INT, "6", "generator: T", 1},
    {"num_heads", DSV4_P_INT, "8", "generator: H", 1},
    {"max_position", DSV4_P_INT, "512", "generator: rows of cos_sin_cache", 1},
    {"rope_theta", DSV4_P_FLOAT, "10000", "generator: base of the cos/sin table (SWA layers: rope_theta)", 1},
    {"specials", DSV4_P_INT, "1",
     "generator: 1 = token 0 at position 0 (cos 1, sin 0), -0 / all-zero blocks, a RoPE block "
     "with scale byte 0 and one near the top of bf16", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec rmx_inputs[] = {
    {"o", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] bf16 attention output rows (prefill workspace)"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T] the query tokens' own positions"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_position, rope_head_dim] rows cos | sin"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec rmx_outputs[] = {
    {"data", DSV4_F8E4M3FN, DSV4_DT_NONE, "[T, H*512] e4m3fn codes, head h at columns h*512"},
    {"scale", DSV4_U8, DSV4_DT_NONE, "[T, H*16] uint8 e8m0 bytes; (t, h*16+g) covers lanes 32g.. of head h"},
    {NULL, 0, 0, NULL},
};

/* The generator's special lanes (specials = 1), all in bf16: */
static void rmx_specials(uint16_t *o, int64_t T, int64_t H, int64_t *pos)
{
    pos[0] = 0;                              /* identity rotation: cos 1, sin 0 exactly */
    uint16_t *h0 = o, *hl = o + (T * H - 1) * D; /* token 0 head 0; last token, last head */
    memset(h0, 0, 32 * 2);                   /* all-zero NoPE block: scale byte 0, codes 0 */
    for (int d = 32; d < 64; d += 3)
        h0[d] = 0x8000;                      /* -0 lanes: e4m3 0x80 (NoPE keeps the sign) */
    /* A RoPE block with scale byte 0 from normal values (amax < 448*2^-127;
     * amax/448 is an fp32 denormal, code 0 with or without FTZ, quant spec 2
     * "Edge cases"); q = x*2^127 is exact in e4m3. */
    for (int d = 480; d < D; d++)
        h0[d] = (uint16_t)(dsv4_bf16_from_f32(ldexpf(1.0f + (float)(d % 7) / 8.0f, -122)) | (d & 1 ? 0x8000 : 0));
    if (T * H > 1)
        memset(hl + 448, 0, 32 * 2);         /* an all-zero RoPE block */
    for (int d = 480; d < D; d++)            /* near the top of bf16 (byte ~245; 254 is out of bf16's reach) */
        hl[d] = dsv4_bf16_from_f32((float)((d % 2 ? -1 : 1) * ldexp(1.0 + (d % 5) / 8.0, 126)));
}

/* Each head row at its own power-of-two magnitude. */
static void rmx_fill_o(dsv4_rng *rng, uint16_t *ov, int64_t T, int64_t H)
{
    for (int64_t r = 0; r < T * H; r++) {
        const double sc = ldexp(1.0, (int)dsv4_rng_range(rng, -8, 9));
        for (int d = 0; d < D; d++)
            ov[r * D + d] = dsv4_bf16_from_f32((float)(dsv4_rng_normal(rng) * sc));
    }
}

static int rmx_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_tensor *o, *pos;
    int rc = rope_rows_generate(c, in, rmx_fill_o, &o, &pos, st);
    if (rc)
        return rc;
    const int64_t T = o->shape[0], H = o->shape[1];
    if (dsv4_params_int(c->params, "specials") && T > 0)
        rmx_specials(o->data, T, H, pos->data);
    return DSV4_OK;
}

/* rope_inputs_of (this op has no `rotated`: every row is rotated), and
 * whole MX blocks of RoPE lanes. */
static int rmx_inputs_of(const dsv4_opctx *c, const dsv4_tensors *in, rope_io *r, dsv4_status *st)
{
    int rc = rope_inputs_of(c, in, r, st);
    if (rc)
        return rc;
    r->rotated = 0;
    if (r->rd > D || r->rd % DSV4_MX_BLOCK)
        return dsv4_fail(st, DSV4_EINPUT, "rope_head_dim = %d: must be a multiple of 32 up to 512", r->rd);
    return DSV4_OK;
}

/* The golden's fp32 rows (malloc'd) after checking every input. */
static float *rmx_rows(const dsv4_opctx *c, const dsv4_tensors *in, rope_io *r, dsv4_status *st)
{
    if (rmx_inputs_of(c, in, r, st))
        return NULL;
    if (cos_sin_finite(r, st))
        return NULL;
    const float *cs = r->cs->data;
    float *x = malloc((size_t)(r->T * r->H * D + 1) * sizeof *x);
    if (!x) {
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    if (dsv4_ref_inverse_rope_rows_f32(r->o->data, r->T, r->H, r->pos->data, cs, r->cs->shape[0], r->rd, x, st)) {
        free(x);
        return NULL;
    }
    return x;
}

static int rmx_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    rope_io r;
    float *x = rmx_rows(c, in, &r, st);
    free(x);
    return x ? DSV4_OK : st->code;
}

static int rmx_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    rope_io r;
    int rc = rmx_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    int64_t sd[2] = {r.T, r.H * D}, ss[2] = {r.T, r.H * D / DSV4_MX_BLOCK};
    dsv4_tensor *d, *s;
    if ((rc = dsv4_tensors_add(out, "data", DSV4_F8E4M3FN, 2, sd, &d, st)) ||
        (rc = dsv4_tensors_add(out, "scale", DSV4_U8, 2, ss, &s, st)))
        return rc;
    dsv4_poison(d);
    dsv4_poison(s);
    return DSV4_OK;
}

static int rmx_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    rope_io r;
    int rc = rmx_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    return dsv4_ref_inverse_rope_mxfp8_rows(r.o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                            rmx_rule[c->variant], dsv4_tensors_find(out, "data")->data,
                                            dsv4_tensors_find(out, "scale")->data, st);
}

/* The largest distance, for any fp32 formulation of one rotated lane (a c
 * + b s or b c - a s: products rounded then summed, or an FMA), between a
 * kernel's value and the golden's x: |x - r| + E_p + 2^-24 (|a c| + |b s|
 * + E_p), with r the exact value and E_p the two products' rounding errors
 * (all exact in double: 8 x 24-bit products); 0 when both products and r
 * are exact in fp32 (e.g. cos 1, sin 0: every formulation is exact). */
static double rmx_delta(double a, double b, double c, double s, int odd, float x)
{
    const double p1 = odd ? b * c : a * c, p2 = odd ? a * s : b * s; /* inverse: a c + b s, b c - a s */
    const double ep = fabs((double)(float)p1 - p1) + fabs((double)(float)p2 - p2);
    const double r = odd ? p1 - p2 : p1 + p2;
    if (ep == 0 && (double)(float)r == r)
        return fabs((double)x - r);
    return fabs((double)x - r) + ep + 0x1p-24 * (fabs(p1) + fabs(p2) + ep);
}

/* y rounded to fp32 away from the interval's inside: down (dir < 0) or up. */
static float rmx_out(double y, int dir)
{
    float f = (float)y;
    if (dir < 0 && (double)f > y)
        f = nextafterf(f, -INFINITY);
    if (dir > 0 && (double)f < y)
        f = nextafterf(f, INFINITY);
    return f;
}

/* The lanes at risk (see the derivation above): risk[i] = 1 where a correct
 * fp32 kernel may return a code one step from the golden's (NULL: count
 * only); *lanes and *blocks count lanes and blocks at risk.  E4m3 RNE and
 * the scale rules are monotone, so a code can change within [x - Delta,
 * x + Delta] iff the endpoints' codes differ. */
static int rmx_risk(const dsv4_opctx *c, const dsv4_tensors *in, uint8_t *risk, int64_t *lanes, int64_t *blocks,
                    dsv4_status *st)
{
    rope_io r;
    float *x = rmx_rows(c, in, &r, st);
    if (!x)
        return st->code;
    const dsv4_mx_rule rule = rmx_rule[c->variant];
    const uint16_t *o = r.o->data;
    const float *cs = r.cs->data;
    const int half = r.rd / 2;
    double delta[DSV4_MX_BLOCK];
    *lanes = *blocks = 0;
    for (int64_t t = 0; t < r.T; t++) {
        const float *row = cs + ((const int64_t *)r.pos->data)[t] * r.rd;
        for (int64_t h = 0; h < r.H; h++)
            for (int j = (D - r.rd) / DSV4_MX_BLOCK; j < D / DSV4_MX_BLOCK; j++) { /* RoPE blocks only */
                const int64_t b0 = (t * r.H + h) * D + j * DSV4_MX_BLOCK;
                double lo = 0, hi = 0;
                for (int i = 0; i < DSV4_MX_BLOCK; i++) {
                    const int k = (j * DSV4_MX_BLOCK + i - (D - r.rd)) / 2, odd = i & 1;
                    const int64_t p = b0 + i - odd; /* the pair's even lane */
                    const double xi = fabs((double)x[b0 + i]);
                    delta[i] = rmx_delta(dsv4_bf16_to_f32(o[p]), dsv4_bf16_to_f32(o[p + 1]), row[k], row[half + k],
                                         odd, x[b0 + i]);
                    lo = fmax(lo, xi - delta[i]);
                    hi = fmax(hi, xi + delta[i]);
                }
                const uint8_t code = dsv4_mx_scale_byte(rule, dsv4_mx_amax(x + b0, DSV4_MX_BLOCK));
                const int scale_risk = dsv4_mx_scale_byte(rule, rmx_out(lo, -1)) !=
                                       dsv4_mx_scale_byte(rule, rmx_out(hi, 1));
                const double m = ldexp(1.0, 127 - (int)code);
                *blocks += scale_risk;
                for (int i = 0; i < DSV4_MX_BLOCK; i++) {
                    const double v = x[b0 + i];
                    const int at = scale_risk ||
                                   dsv4_fp8_from_f32(rmx_out((v - delta[i]) * m, -1), DSV4_FP8_E4M3FN, 1) !=
                                       dsv4_fp8_from_f32(rmx_out((v + delta[i]) * m, 1), DSV4_FP8_E4M3FN, 1);
                    *lanes += at;
                    if (risk)
                        risk[b0 + i] = (uint8_t)at;
                }
            }
    }
    free(x);
    return DSV4_OK;
}

static int rmx_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                      dsv4_status *st)
{
    int64_t lanes = 0, blocks = 0;
    int rc = rmx_risk(c, in, NULL, &lanes, &blocks, st);
    if (rc)
        return rc;
    rope_io r;
    if ((rc = rmx_inputs_of(c, in, &r, st)))
        return rc;
    const int codes = strcmp(output, "data") == 0;
    const double n = (double)(r.T * r.H * D);
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_MX;
    pol->output_dtype = DSV4_DT_NONE;
    pol->block = DSV4_MX_BLOCK;
    snprintf(pol->companion, sizeof pol->companion, "%s", codes ? "scale" : "data");
    pol->scale_tol = blocks > 0;
    pol->budget = n > 0 ? (codes ? (double)lanes / n : (double)blocks / (n / DSV4_MX_BLOCK)) : 0;
    snprintf(pol->rule, sizeof pol->rule,
             "mx: NoPE lanes exact; a RoPE lane exact unless x +- Delta (fp32 rotation error, <= 4*2^-24(|ac|+|bs|)) "
             "straddles an e4m3 or scale boundary: then 1 step; %" PRId64 " lanes, %" PRId64 " blocks at risk = budget",
             lanes, blocks);
    return DSV4_OK;
}

/* Per-lane extra tolerance in steps (compare/mx.c adds it to pol->ulp). */
static int rmx_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                     dsv4_status *st)
{
    if (strcmp(output, "data"))
        return DSV4_OK;
    uint8_t *risk = calloc(n ? (size_t)n : 1, 1);
    if (!risk)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int64_t lanes, blocks;
    int rc = rmx_risk(c, in, risk, &lanes, &blocks, st);
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] = risk[i];
    free(risk);
    return rc;
}

static void rmx_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                       size_t len)
{
    rope_io r;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (rmx_inputs_of(c, in, &r, &st) || r.H < 1)
        return;
    const int sc = strcmp(output, "scale") == 0;
    const int64_t per = sc ? r.H * D / DSV4_MX_BLOCK : r.H * D, t = flat / per, col = flat % per;
    const int64_t h = sc ? col / (D / DSV4_MX_BLOCK) : col / D;
    const int64_t d = sc ? col % (D / DSV4_MX_BLOCK) * DSV4_MX_BLOCK : col % D;
    if (t >= r.T)
        return;
    snprintf(buf, len, "token %" PRId64 " (position %" PRId64 "), head %" PRId64 ", %s %" PRId64 " (%s)", t,
             ((const int64_t *)r.pos->data)[t], h, sc ? "block of lanes" : "lane", d,
             d < D - r.rd ? "NoPE: not rotated" : "RoPE");
}

const dsv4_op dsv4_op_rocm_inverse_rope_mxfp8_rows = {
    .name = "rocm_inverse_rope_mxfp8_rows",
    .summary = "inverse GPT-J RoPE of bf16 attention rows in fp32, then MXFP8 (wo_a's input, prefill rows)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 9.3, quant_and_indexer.md 2)",
    .variants = rmx_variants,
    .variant_docs = rmx_variant_docs,
    .params = rmx_params,
    .inputs = rmx_inputs,
    .outputs = rmx_outputs,
    .generate = rmx_generate,
    .validate = rmx_validate,
    .alloc_outputs = rmx_alloc,
    .reference = rmx_reference,
    .policy = rmx_policy,
    .locate = rmx_locate,
    .bound = rmx_bound,
};

/* ------------------------------------------------------------------ */
/* rocm_sparse_attn_decode and sparse_mla_fwd: ragged lists over the    */
/* paged fp8_ds_mla caches (main = SWA cache, extra = compressed)       */

#include "../ref/kvcache.h"

/* Input names of the two entries (the seeds' Python argument names). */
typedef struct paged_names {
    const char *main_cache, *main_idx, *main_ptr, *extra_cache, *extra_idx, *extra_ptr;
} paged_names;

static const paged_names decode_names = {"swa_k_cache", "swa_ragged_indices", "swa_ragged_indptr",
                                         "kv_cache", "topk_ragged_indices", "topk_ragged_indptr"};
static const paged_names aiter_names = {"kv_buffer", "kv_indices", "kv_indptr",
                                        "extra_kv_buffer", "extra_kv_indices", "extra_kv_indptr"};

/* One paged cache as a key source: slot -> (slot // B, slot % B) (spec
 * 2.1), decoded as NoPE bf16(fp8 * 2^(b-127)) (exact) + RoPE bf16 (spec 8.4). */
typedef struct paged_src {
    const uint8_t *bytes;
    int64_t B, stride;
    dsv4_fp8_kind kind;
} paged_src;

static int paged_fetch(const void *ctx, int64_t slot, float *out, dsv4_status *st)
{
    (void)st;
    const paged_src *p = ctx;
    uint16_t row[D];
    dsv4_kv_decode_token_bf16(p->bytes + (slot / p->B) * p->stride, p->B, slot % p->B, p->kind, row);
    for (int d = 0; d < D; d++)
        out[d] = dsv4_bf16_to_f32(row[d]);
    return DSV4_OK;
}

/* args + the fetch contexts they point at */
typedef struct paged_args {
    dsv4_attn_args a;
    paged_src src[2];
} paged_args;

static int paged_args_of(const paged_names *nm, const dsv4_opctx *c, const dsv4_tensors *in, paged_args *pa,
                         dsv4_status *st)
{
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
    /* SWA-only layers have no extra segment (spec 8.4). */
    a->nseg = dsv4_params_int(c->params, "swa_only") ? 1 : 2;
    for (int k = 0; k < a->nseg; k++) {
        if ((rc = dsv4_input(in, cn[k], DSV4_U8, 3, &cache[k], st)) ||
            (rc = dsv4_input(in, in_[k], DSV4_I32, 1, &idx[k], st)) ||
            (rc = dsv4_input(in, pn[k], DSV4_I32, 1, &ptr[k], st)))
            return rc;
        if (cache[k]->shape[2] != DSV4_KV_TOKEN_BYTES || ptr[k]->shape[0] != a->T + 1)
            return dsv4_fail(st, DSV4_EINPUT, "%s must be [pages, B, 584] and %s [T + 1 = %" PRId64 "]", cn[k],
                             pn[k], a->T + 1);
        paged_src *s = &pa->src[k];
        s->bytes = cache[k]->data;
        s->B = cache[k]->shape[1];
        s->stride = s->B * DSV4_KV_TOKEN_BYTES; /* [nb, B, 584] allocation [S11] */
        /* The compressed cache is always OCP; the SWA cache is FNUZ on gfx942
         * (is_fnuz_main = platform, spec 2.3 [S1, S4, S9]). */
        s->kind = (k == 0 && c->variant == 1) ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
        dsv4_attn_segment *g = &a->seg[k];
        g->name = cn[k];
        g->num_rows = cache[k]->shape[0] * s->B; /* cache.shape[0] * shape[1] (spec 8.2) */
        g->fetch = paged_fetch;
        g->fetch_ctx = s;
        g->scrub_nan = 1; /* NaN K -> 0 (spec 8.4: non-gfx950 kernels always) */
        g->indices = idx[k]->data;
        g->indptr = ptr[k]->data;
        g->num_indices = idx[k]->shape[0];
    }
    return DSV4_OK;
}

static int decode_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st);
static int aiter_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st);

/* The fetch contexts must outlive the args: one static slot per entry is
 * not reentrant, so the args functions keep them in thread-local storage. */
static _Thread_local paged_args decode_pa, aiter_pa;

static int decode_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st)
{
    int rc = paged_args_of(&decode_names, c, in, &decode_pa, st);
    *a = decode_pa.a;
    return rc;
}

static int aiter_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st)
{
    int rc = paged_args_of(&aiter_names, c, in, &aiter_pa, st);
    *a = aiter_pa.a;
    return rc;
}

/* Generation: per request r with positions [prefix, prefix + qlen), the
 * SWA cache holds every position (B = 64, random page order), the
 * compressed cache entries [0, S // c) (B = 256 / c); unused slots are
 * poisoned (fp8 NaN codes, scale 0xFF, NaN RoPE) to prove they are never
 * read.  Token lists: the window max(pos - W + 1, 0)..pos (spec 5.2), and
 * the top-k compressed indices of [0, (pos + 1) // c) (C4: random distinct,
 * C128: the identity prefix, spec 5.5) mapped through the block table
 * (spec 5.7). */
static const dsv4_param_spec paged_params[] = {
    {"scale", DSV4_P_FLOAT, "0.044194173824159216", "softmax scale, 512^-0.5 [S14]", 0},
    {"swa_only", DSV4_P_INT, "0", "1: SWA-only layer, no extra (compressed) segment", 0},
    {"num_heads", DSV4_P_INT, "8", "generator: H", 1},
    {"window_size", DSV4_P_INT, "128", "generator: sliding window W", 1},
    {"compress_ratio", DSV4_P_INT, "4", "generator: c (4 or 128; ignored when swa_only)", 1},
    {"topk", DSV4_P_INT, "512", "generator: top-k width", 1},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request (one entry: all)", 1},
    {"sink", DSV4_P_STR, "random", "generator: attn_sink: random (randn*10), none (-inf), or a number", 1},
    {"invalid_frac", DSV4_P_FLOAT, "0", "generator: fraction of entries set to -1", 1},
    {"oob_frac", DSV4_P_FLOAT, "0", "generator: fraction of entries set out of range", 1},
    {"empty_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose lists are all -1", 1},
    {"nan_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose first window key is a NaN-poisoned slot", 1},
    {NULL, 0, NULL, NULL, 0},
};

static void poison_token(uint8_t *page, int64_t B, int64_t row)
{
    memset(page + dsv4_kv_value_offset(row), 0x7F, DSV4_KV_NOPE_DIM); /* e4m3fn NaN */
    uint16_t nan = 0x7FC0;
    for (int d = 0; d < DSV4_ROPE_DIM; d++)
        memcpy(page + dsv4_kv_rope_offset(row) + 2 * d, &nan, 2);
    memset(page + dsv4_kv_scale_offset(B, row), 0xFF, DSV4_KV_NQBLOCKS); /* e8m0 NaN */
}

typedef struct flat_list {
    int32_t *idx;
    int32_t *ptr;
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

static int paged_generate_with(const paged_names *nm, const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    req_shape rs;
    int rc = req_shape_of(ps, &rs, st);
    if (rc)
        return rc;
    const int64_t H = dsv4_params_int(ps, "num_heads"), W = dsv4_params_int(ps, "window_size");
    const int swa_only = dsv4_params_int(ps, "swa_only") != 0;
    const int64_t ratio = dsv4_params_int(ps, "compress_ratio"), topk = dsv4_params_int(ps, "topk");
    if (H < 1 || W < 1 || (!swa_only && ratio != 4 && ratio != 128) || topk < 0)
        return dsv4_fail(st, DSV4_EINPUT, "num_heads >= 1, window_size >= 1, compress_ratio 4 or 128, topk >= 0");
    const int64_t B = 64, Bc = swa_only ? 2 : 256 / ratio; /* spec 2.1 [S12, S13] */
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
                             cache[k]->shape[1], i);
    /* Block tables: request r owns pages first_page[r].. in reversed order
     * (a non-identity mapping). */
    dsv4_rng rng, lrng;
    dsv4_rng_init(&rng, c->seed, "kv_cache");
    const dsv4_kv_encode_opts enc = dsv4_kv_encode_opts_default(c->variant == 1);
    float x[D];
    uint16_t row[D];
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
            gen_key_row(&rng, row);
            for (int d = 0; d < D; d++)
                x[d] = dsv4_bf16_to_f32(row[d]);
            rc = dsv4_kv_encode_token((uint8_t *)cache[0]->data + page * B * DSV4_KV_TOKEN_BYTES, B, pos % B, x,
                                      &enc, st);
        }
        dsv4_kv_encode_opts ocp = dsv4_kv_encode_opts_default(0); /* compressed cache: OCP [S1] */
        for (int64_t ci = 0; ci < nc && !rc; ci++) {
            int64_t page = first_cpage[r] + (ncp - 1 - ci / Bc);
            gen_key_row(&rng, row);
            for (int d = 0; d < D; d++)
                x[d] = dsv4_bf16_to_f32(row[d]);
            rc = dsv4_kv_encode_token((uint8_t *)cache[1]->data + page * Bc * DSV4_KV_TOKEN_BYTES, Bc, ci % Bc, x,
                                      &ocp, st);
        }
        (void)ncp;
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
                    int64_t v = ratio == 4 ? scratch[j] : j; /* C128: identity prefix (spec 5.5) */
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
    gen_q(&rng, q->data, rs.T * H * D);
    return gen_sink(dsv4_params_str(ps, "sink"), c->seed, sink->data, H, st);
}

static int decode_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return paged_generate_with(&decode_names, c, in, st);
}

static int aiter_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return paged_generate_with(&aiter_names, c, in, st);
}

ATTN_CALLBACKS(decode, decode_args)
ATTN_CALLBACKS(aiter, aiter_args)

static const char *const paged_variants[] = {"default", "fp8=fnuz", NULL};
static const char *const decode_variant_docs[] = {
    "gfx950 / NVIDIA: both caches OCP e4m3fn; NaN lanes of K read as 0; ragged main (SWA) + extra "
    "(compressed) lists, valid iff 0 <= slot < pages*B "
    "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
    "gfx942: the SWA (main) cache is FNUZ (is_fnuz_main = platform), the compressed cache OCP (spec 2.3)",
};
static const char *const aiter_variant_docs[] = {
    "aiter Triton sparse_mla_fwd as the seed calls it: SWA window as the main segment, top-k compressed "
    "tokens as the extra one, sink in the denominator; same math as rocm_sparse_attn_decode "
    "(ROCm/aiter:aiter/ops/triton/attention/sparse_mla.py@013f408ebe8491e80ddab1fbab4c3dbcbc98bd74)",
    "gfx942: fp8 read in the arch-native encoding (FNUZ) for the main cache (spec 8.5 [S24])",
};

static const dsv4_io_spec decode_inputs[] = {
    {"q", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] decode queries"},
    {"swa_k_cache", DSV4_U8, DSV4_DT_NONE, "[pages, 64, 584] fp8_ds_mla SWA cache"},
    {"kv_cache", DSV4_U8, DSV4_DT_NONE, "[pages, 256/c, 584] fp8_ds_mla compressed cache"},
    {"attn_sink", DSV4_F32, DSV4_DT_NONE, "[H] sink logit per head"},
    {"swa_ragged_indices", DSV4_I32, DSV4_DT_NONE, "SWA slots, CSR"},
    {"swa_ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[T+1]"},
    {"topk_ragged_indices", DSV4_I32, DSV4_DT_NONE, "compressed slots, CSR"},
    {"topk_ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[T+1]"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec aiter_inputs[] = {
    {"q", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] queries"},
    {"kv_buffer", DSV4_U8, DSV4_DT_NONE, "[pages, 64, 584] fp8_dsv4_mla SWA cache (main)"},
    {"extra_kv_buffer", DSV4_U8, DSV4_DT_NONE, "[pages, 256/c, 584] compressed cache (extra)"},
    {"attn_sink", DSV4_F32, DSV4_DT_NONE, "[H] sink logit per head"},
    {"kv_indices", DSV4_I32, DSV4_DT_NONE, "main slots, CSR"},
    {"kv_indptr", DSV4_I32, DSV4_DT_NONE, "[T+1]"},
    {"extra_kv_indices", DSV4_I32, DSV4_DT_NONE, "extra slots, CSR"},
    {"extra_kv_indptr", DSV4_I32, DSV4_DT_NONE, "[T+1]"},
    {NULL, 0, 0, NULL},
};

const dsv4_op dsv4_op_rocm_sparse_attn_decode = {
    .name = "rocm_sparse_attn_decode",
    .summary = "sparse MLA decode with sink over the paged fp8_ds_mla caches (ragged SWA + top-k lists), bf16 out",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 8.1, 8.2, 8.4)",
    .variants = paged_variants,
    .variant_docs = decode_variant_docs,
    .params = paged_params,
    .inputs = decode_inputs,
    .outputs = attn_outputs,
    .generate = decode_generate,
    .validate = decode_validate,
    .alloc_outputs = decode_alloc,
    .reference = decode_reference,
    .policy = attn_policy,
    .locate = decode_locate,
    .bound = decode_bound,
    .hint = decode_hint,
};

const dsv4_op dsv4_op_sparse_mla_fwd = {
    .name = "sparse_mla_fwd",
    .summary = "aiter Triton sparse MLA with sink, main + extra paged caches (the seed's aiter decode/prefill)",
    .source = "ROCm/aiter:aiter/ops/triton/attention/sparse_mla.py@013f408ebe8491e80ddab1fbab4c3dbcbc98bd74 "
              "(spec sparse_attention.md 8.5)",
    .variants = paged_variants,
    .variant_docs = aiter_variant_docs,
    .params = paged_params,
    .inputs = aiter_inputs,
    .outputs = attn_outputs,
    .generate = aiter_generate,
    .validate = aiter_validate,
    .alloc_outputs = aiter_alloc,
    .reference = aiter_reference,
    .policy = attn_policy,
    .locate = aiter_locate,
    .bound = aiter_bound,
    .hint = aiter_hint,
};
