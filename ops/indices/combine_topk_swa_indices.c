/* combine_topk_swa_indices.c - prefill rows [top-k compressed | sliding
 * window] into the gathered workspace.  Semantics: ref/indices.c
 * (docs/semantics/indices.md A6). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "indices.h"

static const dsv4_combine_variant combine_torch = DSV4_COMBINE_TORCH;
static const dsv4_combine_variant combine_no_validate = DSV4_COMBINE_NO_VALIDATE;
static const dsv4_combine_variant combine_width_col0 = DSV4_COMBINE_WIDTH_COL0;

static const dsv4_variant combine_variants[] = {
    {"default",
     "the seeds' Torch function: top-k values outside [0, N) -> -1, width min(topk, Wk) "
     "(vllm-project/vllm:vllm/models/deepseek_v4_1/amd/rocm.py@3578acb1b1c69fee6920e5cce5d424deb9376c7a)",
     &combine_torch},
    {"validate_topk=none",
     "common Triton JIT: r*M + v for every v, even -1; topk <= Wk required "
     "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
     &combine_no_validate},
    {"width_guard=col0",
     "common Triton with range check: 0 <= v < N, width topk, columns >= Wk read column 0 "
     "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@4fec5ad6fd00f5128c6a797e9536ae1939c3bbe6)",
     &combine_width_col0},
    {NULL, NULL, NULL},
};

static const char combine_params[] =
    DSV4_INDICES_WINDOW_SIZE_PARAM
    DSV4_INDICES_COMPRESS_RATIO_PARAM
    "    topk           int   = 512  top-k width K\n"
    "    M              int   = -1   workspace rows per request; -1: N + window_size + tokens\n"
    "    N              int   = -1   compressed rows per request; -1: ceil(max_model_len / c)\n"
    DSV4_REQ_SHAPE_PARAMS
    "gen qsl_base       int   = 0    generator: query_start_loc[0] (narrowed batch)\n"
    "gen topk_width     int   = -1   generator: columns of topk_indices; -1: topk\n"
    DSV4_INDICES_MAX_MODEL_LEN_PARAM
    "gen invalid_frac   float = 0    generator: fraction of top-k entries set to -1\n"
    "gen oob_frac       float = 0    generator: fraction set out of range (>= N or <= -2)\n";

static const char combine_inputs[] =
    "topk_indices    int32  [T, Wk] local compressed indices, -1 padded\n"
    "query_start_loc int32  [R+1], may start at a non-zero base\n"
    "seq_lens        int32  [R] total length S of each request\n"
    "gather_lens     int32  [R] SWA rows gathered for each request\n";

static const char combine_outputs[] =
    "combined_indices int32  [T, P] rows into the [R*M] workspace, -1 padded\n"
    "combined_lens    int32  [T] valid entries per row (tk + sw)\n";

static int combine_resolve(dsv4_params *ps, dsv4_status *st)
{
    dsv4_req_shape rs;
    int rc;
    if ((rc = dsv4_indices_shape_of(ps, &rs, st)) || (rc = dsv4_indices_resolve_compressed(ps, &rs, "N", st)))
        return rc;
    /* M = N + W + max_num_batched_tokens (docs/semantics/indices.md A6.1). */
    const int64_t N = dsv4_params_int(ps, "N");
    if ((rc = dsv4_indices_default_to(ps, "M", N + dsv4_params_int(ps, "window_size") + rs.T, st)))
        return rc;
    return dsv4_indices_default_to(ps, "topk_width", dsv4_params_int(ps, "topk"), st);
}

static int combine_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    dsv4_indices_gen_params gp;
    int rc = dsv4_indices_gen_params_of(ps, &gp, st);
    if (rc)
        return rc;
    const double invalid_frac = dsv4_params_float(ps, "invalid_frac");
    const double oob_frac = dsv4_params_float(ps, "oob_frac");
    if (gp.compress_ratio < 1 || gp.topk_width < 0 || gp.window_size < 0)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio must be >= 1, topk_width and window_size >= 0");
    if (gp.qsl_base < 0 || gp.qsl_base + gp.rs.T > INT32_MAX)
        return dsv4_fail(st, DSV4_EINPUT, "qsl_base %" PRId64 " out of range", gp.qsl_base);
    /* The fractions are probabilities: NaN or Inf would silently turn the
     * special entries off (every comparison with NaN is false). */
    if (!(invalid_frac >= 0 && invalid_frac <= 1) || !(oob_frac >= 0 && oob_frac <= 1))
        return dsv4_fail(st, DSV4_EINPUT, "invalid_frac = %g and oob_frac = %g must be in [0, 1]",
                         invalid_frac, oob_frac);

    dsv4_tensor *topk, *qsl, *seq, *gat;
    int64_t shape2[2] = {gp.rs.T, gp.topk_width}, r1 = gp.rs.R + 1;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape2, &topk, st)) ||
        (rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &r1, &qsl, st)) ||
        (rc = dsv4_tensors_add(in, "seq_lens", DSV4_I32, 1, &gp.rs.R, &seq, st)) ||
        (rc = dsv4_tensors_add(in, "gather_lens", DSV4_I32, 1, &gp.rs.R, &gat, st)))
        return rc;
    int32_t *q = qsl->data, *s = seq->data, *g = gat->data;
    q[0] = (int32_t)gp.qsl_base;
    for (int64_t r = 0; r < gp.rs.R; r++) {
        q[r + 1] = (int32_t)(q[r] + gp.rs.qlen[r]);
        s[r] = (int32_t)(gp.rs.prefix[r] + gp.rs.qlen[r]);
        /* gather_len = query_len + min(prefix_len, W - 1) (docs/semantics/indices.md A5.3). */
        int64_t keep = gp.window_size > 0 ? gp.window_size - 1 : 0;
        g[r] = (int32_t)(gp.rs.qlen[r] + (gp.rs.prefix[r] < keep ? gp.rs.prefix[r] : keep));
    }
    const dsv4_topk_specials sp = {.hole_frac = invalid_frac, .oob_frac = oob_frac, .oob_base = gp.N};
    return dsv4_indices_gen_topk_rows(c, &gp.rs, gp.compress_ratio, topk->data, gp.topk_width, &sp, st);
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
    const dsv4_combine_variant *rule = c->rule;
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    return rc ? rc : dsv4_combine_check(&a, *rule, st);
}

static int combine_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                         dsv4_status *st)
{
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_tokens, dsv4_combine_width(a.topk, a.window_size)};
    if ((rc = dsv4_indices_add_output(out, "combined_indices", DSV4_I32, 2, shape, st)))
        return rc;
    return dsv4_indices_add_output(out, "combined_lens", DSV4_I32, 1, shape, st);
}

static int combine_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                             dsv4_status *st)
{
    const dsv4_combine_variant *rule = c->rule;
    dsv4_combine_args a;
    int rc = combine_args(c, in, &a, st);
    if (rc)
        return rc;
    return dsv4_ref_combine_topk_swa_indices(&a, *rule, dsv4_tensors_find(out, "combined_indices")->data,
                                             dsv4_tensors_find(out, "combined_lens")->data, st);
}

DSV4_EXACT_POLICY(combine_policy, "integer indices into the gathered workspace")

/* Names the part of a combined row an element belongs to: the request,
 * the token's position, and whether the column is in the top-k part, the
 * window part or the -1 padding. */
static void combine_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                           int64_t flat, char *buf, size_t len)
{
    const dsv4_combine_variant *rule = c->rule;
    dsv4_combine_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (combine_args(c, in, &a, &st) || dsv4_combine_check(&a, *rule, &st))
        return;
    const int is_rows = strcmp(output, "combined_indices") == 0;
    const int64_t P = dsv4_combine_width(a.topk, a.window_size);
    const int64_t t = is_rows ? flat / P : flat, j = is_rows ? flat % P : -1;
    const int64_t t_abs = t + a.query_start_loc[0];
    for (int64_t r = 0; r < a.num_reqs; r++) {
        if (t_abs < a.query_start_loc[r] || t_abs >= a.query_start_loc[r + 1])
            continue;
        int64_t pos = dsv4_indices_position(a.query_start_loc, a.seq_lens, r, t_abs);
        /* The Torch function's top-k part is min(topk, Wk) wide, the Triton
         * ones' topk (docs/semantics/indices.md A6.2). */
        int64_t width = a.topk < a.topk_width || *rule != DSV4_COMBINE_TORCH ? a.topk : a.topk_width;
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
              "(docs/semantics/indices.md A6)",
    DSV4_OP_TABLES(combine),
    .resolve = combine_resolve,
    .generate = combine_generate,
    .validate = combine_validate,
    .alloc_outputs = combine_alloc,
    .reference = combine_reference,
    .policy = combine_policy,
    .locate = combine_locate,
};
