/* ops_indices.c - registry entries of the index and metadata builders.
 * Semantics: ref/indices.c; spec sparse_attention.md sections 5 and 6. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/indices.h"
#include "ops.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* combine_topk_swa_indices                                            */

static const char *const combine_variants[] = {"default", "validate_topk=none",
                                               "width_guard=col0", NULL};
static const char *const combine_variant_docs[] = {
    "the seeds' Torch function: top-k values outside [0, N) -> -1, width min(topk, Wk) "
    "(vllm-project/vllm:vllm/models/deepseek_v4_1/amd/rocm.py@3578acb1b1c69fee6920e5cce5d424deb9376c7a)",
    "common Triton JIT: r*M + v for every v, even -1; topk <= Wk required "
    "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
    "common Triton with range check: 0 <= v < N, width topk, columns >= Wk read column 0 "
    "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@4fec5ad6fd00f5128c6a797e9536ae1939c3bbe6)",
};

static const dsv4_param_spec combine_params[] = {
    {"window_size", DSV4_P_INT, "128", "sliding window W", 0},
    {"compress_ratio", DSV4_P_INT, "4", "compress ratio c (>= 1)", 0},
    {"topk", DSV4_P_INT, "512", "top-k width K", 0},
    {"M", DSV4_P_INT, "-1", "workspace rows per request; -1: N + window_size + tokens", 0},
    {"N", DSV4_P_INT, "-1", "compressed rows per request; -1: ceil(max_model_len / c)", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request (default 0)", 1},
    {"qsl_base", DSV4_P_INT, "0", "generator: query_start_loc[0] (narrowed batch)", 1},
    {"topk_width", DSV4_P_INT, "-1", "generator: columns of topk_indices; -1: topk", 1},
    {"max_model_len", DSV4_P_INT, "-1", "generator: for N; -1: the longest request", 1},
    {"invalid_frac", DSV4_P_FLOAT, "0", "generator: fraction of top-k entries set to -1", 1},
    {"oob_frac", DSV4_P_FLOAT, "0", "generator: fraction set out of range (>= N or <= -2)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec combine_inputs[] = {
    {"topk_indices", DSV4_I32, DSV4_DT_NONE, "[T, Wk] local compressed indices, -1 padded"},
    {"query_start_loc", DSV4_I32, DSV4_DT_NONE, "[R+1], may start at a non-zero base"},
    {"seq_lens", DSV4_I32, DSV4_DT_NONE, "[R] total length S of each request"},
    {"gather_lens", DSV4_I32, DSV4_DT_NONE, "[R] SWA rows gathered for each request"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec combine_outputs[] = {
    {"combined_indices", DSV4_I32, DSV4_DT_NONE, "[T, P] rows into the [R*M] workspace, -1 padded"},
    {"combined_lens", DSV4_I32, DSV4_DT_NONE, "[T] valid entries per row (tk + sw)"},
    {NULL, 0, 0, NULL},
};

/* Per-request lengths from the generator parameters. */
typedef struct combine_shape {
    int64_t R, T;
    const int64_t *qlen;
    int64_t prefix[DSV4_PARAM_LIST_MAX];
} combine_shape;

static int combine_shape_of(const dsv4_params *ps, combine_shape *cs, dsv4_status *st)
{
    const int64_t *pre;
    cs->R = dsv4_params_list(ps, "query_lens", &cs->qlen);
    int np = dsv4_params_list(ps, "prefix_lens", &pre);
    if (np != 0 && np != cs->R)
        return dsv4_fail(st, DSV4_EINPUT, "prefix_lens has %d entries, query_lens %" PRId64, np,
                         cs->R);
    cs->T = 0;
    for (int64_t r = 0; r < cs->R; r++) {
        cs->prefix[r] = np ? pre[r] : 0;
        if (cs->qlen[r] < 0 || cs->prefix[r] < 0 || cs->qlen[r] > INT32_MAX / 4 ||
            cs->prefix[r] > INT32_MAX / 4)
            return dsv4_fail(st, DSV4_EINPUT,
                             "request %" PRId64 ": query_lens %" PRId64 " / prefix_lens %" PRId64
                             " out of range [0, 2^29 - 1]",
                             r, cs->qlen[r], cs->prefix[r]);
        cs->T += cs->qlen[r];
    }
    return DSV4_OK;
}

static int combine_resolve(dsv4_params *ps, dsv4_status *st)
{
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    int64_t c = dsv4_params_int(ps, "compress_ratio");
    if (c < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be >= 1", c);
    int64_t max_len = dsv4_params_int(ps, "max_model_len");
    if (max_len < 0) {
        max_len = 0;
        for (int64_t r = 0; r < cs.R; r++)
            if (cs.prefix[r] + cs.qlen[r] > max_len)
                max_len = cs.prefix[r] + cs.qlen[r];
        if ((rc = dsv4_params_set_int(ps, "max_model_len", max_len, st)))
            return rc;
    }
    int64_t N = dsv4_params_int(ps, "N");
    if (N < 0 && (rc = dsv4_params_set_int(ps, "N", N = (max_len + c - 1) / c, st)))
        return rc;
    /* M = N + W + max_num_batched_tokens (spec 6.1). */
    if (dsv4_params_int(ps, "M") < 0 &&
        (rc = dsv4_params_set_int(ps, "M", N + dsv4_params_int(ps, "window_size") + cs.T, st)))
        return rc;
    if (dsv4_params_int(ps, "topk_width") < 0 &&
        (rc = dsv4_params_set_int(ps, "topk_width", dsv4_params_int(ps, "topk"), st)))
        return rc;
    return DSV4_OK;
}

/* One token's top-k row as the indexer writes it: min(n, Wk) distinct
 * compressed indices from [0, n) in random order, then -1 (spec 6.1: the
 * indexer's topk_indices_buffer holds local compressed indices). */
static void fill_topk_row(dsv4_rng *rng, int32_t *row, int64_t Wk, int64_t n, int32_t *scratch)
{
    int64_t take = n < Wk ? n : Wk;
    for (int64_t i = 0; i < n; i++)
        scratch[i] = (int32_t)i;
    for (int64_t i = 0; i < take; i++) { /* partial Fisher-Yates */
        int64_t j = dsv4_rng_range(rng, i, n);
        int32_t tmp = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = tmp;
    }
    for (int64_t j = 0; j < Wk; j++)
        row[j] = j < take ? scratch[j] : -1;
}

static int combine_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t W = dsv4_params_int(ps, "window_size"), ratio = dsv4_params_int(ps, "compress_ratio");
    const int64_t Wk = dsv4_params_int(ps, "topk_width"), N = dsv4_params_int(ps, "N");
    const int64_t base = dsv4_params_int(ps, "qsl_base");
    const double invalid_frac = dsv4_params_float(ps, "invalid_frac");
    const double oob_frac = dsv4_params_float(ps, "oob_frac");
    if (ratio < 1 || Wk < 0 || W < 0)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio must be >= 1, topk_width and window_size >= 0");
    if (base < 0 || base + cs.T > INT32_MAX)
        return dsv4_fail(st, DSV4_EINPUT, "qsl_base %" PRId64 " out of range", base);
    /* The fractions are probabilities: NaN or Inf would silently turn the
     * special entries off (every comparison with NaN is false). */
    if (!(invalid_frac >= 0 && invalid_frac <= 1) || !(oob_frac >= 0 && oob_frac <= 1))
        return dsv4_fail(st, DSV4_EINPUT, "invalid_frac = %g and oob_frac = %g must be in [0, 1]",
                         invalid_frac, oob_frac);

    dsv4_tensor *topk, *qsl, *seq, *gat;
    int64_t shape2[2] = {cs.T, Wk}, r1 = cs.R + 1;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape2, &topk, st)) ||
        (rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &r1, &qsl, st)) ||
        (rc = dsv4_tensors_add(in, "seq_lens", DSV4_I32, 1, &cs.R, &seq, st)) ||
        (rc = dsv4_tensors_add(in, "gather_lens", DSV4_I32, 1, &cs.R, &gat, st)))
        return rc;
    int32_t *q = qsl->data, *s = seq->data, *g = gat->data, *tk = topk->data;
    int64_t max_n = 1;
    q[0] = (int32_t)base;
    for (int64_t r = 0; r < cs.R; r++) {
        int64_t S = cs.prefix[r] + cs.qlen[r];
        q[r + 1] = (int32_t)(q[r] + cs.qlen[r]);
        s[r] = (int32_t)S;
        /* gather_len = query_len + min(prefix_len, W - 1) (spec 5.3 [S12]). */
        int64_t keep = W > 0 ? W - 1 : 0;
        g[r] = (int32_t)(cs.qlen[r] + (cs.prefix[r] < keep ? cs.prefix[r] : keep));
        if (S / ratio + 1 > max_n)
            max_n = S / ratio + 1;
    }
    /* The shuffle scratch (one slot per compressed row, up to 2^29 for a
     * long prefix) counts against the memory limit like the tensors. */
    dsv4_tensor scratch_t;
    if ((rc = dsv4_tensor_alloc(&scratch_t, "topk_indices scratch", DSV4_I32, 1, &max_n, st)))
        return rc;
    int32_t *scratch = scratch_t.data;
    dsv4_rng rng, frac_rng;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    dsv4_rng_init(&frac_rng, c->seed, "topk_indices.special");
    int64_t t = 0;
    for (int64_t r = 0; r < cs.R; r++)
        for (int64_t i = 0; i < cs.qlen[r]; i++, t++) {
            int64_t pos = cs.prefix[r] + i;
            int32_t *row = tk + t * Wk;
            fill_topk_row(&rng, row, Wk, (pos + 1) / ratio, scratch);
            for (int64_t j = 0; j < Wk && row[j] >= 0; j++) {
                double u = dsv4_rng_uniform(&frac_rng);
                if (u < invalid_frac)
                    row[j] = -1;
                else if (u < invalid_frac + oob_frac)
                    row[j] = (j & 1) ? (int32_t)(N + dsv4_rng_range(&frac_rng, 0, 1000))
                                     : (int32_t)(-2 - dsv4_rng_range(&frac_rng, 0, 1000));
            }
        }
    dsv4_tensor_free(&scratch_t);
    return DSV4_OK;
}

static int combine_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_combine_args *a,
                        dsv4_status *st)
{
    const dsv4_tensor *topk, *qsl, *seq, *gat;
    int rc;
    if ((rc = dsv4_input(in, "topk_indices", DSV4_I32, 2, &topk, st)) ||
        (rc = dsv4_input(in, "query_start_loc", DSV4_I32, 1, &qsl, st)) ||
        (rc = dsv4_input(in, "seq_lens", DSV4_I32, 1, &seq, st)) ||
        (rc = dsv4_input(in, "gather_lens", DSV4_I32, 1, &gat, st)))
        return rc;
    if (qsl->shape[0] < 1 || seq->shape[0] != qsl->shape[0] - 1 || gat->shape[0] != seq->shape[0])
        return dsv4_fail(st, DSV4_EINPUT,
                         "query_start_loc [%" PRId64 "], seq_lens [%" PRId64 "] and gather_lens [%" PRId64
                         "] must be [R+1], [R], [R]",
                         qsl->shape[0], seq->shape[0], gat->shape[0]);
    memset(a, 0, sizeof *a);
    a->topk_indices = topk->data;
    a->num_tokens = topk->shape[0];
    a->topk_width = topk->shape[1];
    a->query_start_loc = qsl->data;
    a->seq_lens = seq->data;
    a->gather_lens = gat->data;
    a->num_reqs = seq->shape[0];
    a->window_size = dsv4_params_int(c->params, "window_size");
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->topk = dsv4_params_int(c->params, "topk");
    a->M = dsv4_params_int(c->params, "M");
    a->N = dsv4_params_int(c->params, "N");
    return DSV4_OK;
}

static int combine_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    return rc ? rc : dsv4_combine_check(&a, (dsv4_combine_variant)c->variant, st);
}

static int combine_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                         dsv4_status *st)
{
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_tokens, dsv4_combine_width(a.topk, a.window_size)};
    dsv4_tensor *ci, *cl;
    if ((rc = dsv4_tensors_add(out, "combined_indices", DSV4_I32, 2, shape, &ci, st)) ||
        (rc = dsv4_tensors_add(out, "combined_lens", DSV4_I32, 1, shape, &cl, st)))
        return rc;
    dsv4_poison(ci);
    dsv4_poison(cl);
    return DSV4_OK;
}

static int combine_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                             dsv4_status *st)
{
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    if (rc)
        return rc;
    return dsv4_ref_combine_topk_swa_indices(&a, (dsv4_combine_variant)c->variant,
                                             dsv4_tensors_find(out, "combined_indices")->data,
                                             dsv4_tensors_find(out, "combined_lens")->data, st);
}

static int combine_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                          dsv4_policy *pol, dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    dsv4_policy_exact(pol, "integer indices into the gathered workspace");
    return DSV4_OK;
}

/* Names the part of a combined row an element belongs to: the request,
 * the token's position, and whether the column is in the top-k part, the
 * window part or the -1 padding. */
static void combine_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                           int64_t flat, char *buf, size_t len)
{
    dsv4_combine_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (combine_args(c, in, &a, &st) || dsv4_combine_check(&a, (dsv4_combine_variant)c->variant, &st))
        return;
    const int is_rows = strcmp(output, "combined_indices") == 0;
    const int64_t P = dsv4_combine_width(a.topk, a.window_size);
    const int64_t t = is_rows ? flat / P : flat, j = is_rows ? flat % P : -1;
    for (int64_t r = 0; r < a.num_reqs; r++) {
        int64_t qs = (int64_t)a.query_start_loc[r] - a.query_start_loc[0];
        int64_t qe = (int64_t)a.query_start_loc[r + 1] - a.query_start_loc[0];
        if (t < qs || t >= qe)
            continue;
        int64_t pos = a.seq_lens[r] - (qe - qs) + (t - qs);
        int64_t width = a.topk < a.topk_width || c->variant != DSV4_COMBINE_TORCH ? a.topk : a.topk_width;
        int64_t tk = (pos + 1) / a.compress_ratio;
        tk = tk > width ? width : (tk < 0 ? 0 : tk);
        int64_t sw = pos + 1 < a.window_size ? pos + 1 : a.window_size;
        sw = sw < 0 ? 0 : sw;
        const char *part = !is_rows ? "length" : j < tk ? "top-k part" : j < tk + sw ? "window part" : "-1 padding";
        snprintf(buf, len, "request %" PRId64 ", position %" PRId64 ", %s (tk=%" PRId64 ", sw=%" PRId64 ")",
                 r, pos, part, tk, sw);
        return;
    }
}

const dsv4_op dsv4_op_combine_topk_swa_indices = {
    .name = "combine_topk_swa_indices",
    .summary = "prefill rows [top-k compressed | sliding window] into the gathered workspace",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4_1/amd/rocm.py@3578acb1b1c69fee6920e5cce5d424deb9376c7a "
              "(spec sparse_attention.md 6)",
    .variants = combine_variants,
    .variant_docs = combine_variant_docs,
    .params = combine_params,
    .inputs = combine_inputs,
    .outputs = combine_outputs,
    .resolve = combine_resolve,
    .generate = combine_generate,
    .validate = combine_validate,
    .alloc_outputs = combine_alloc,
    .reference = combine_reference,
    .policy = combine_policy,
    .locate = combine_locate,
};
