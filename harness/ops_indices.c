/* ops_indices.c - registry entries of the index and metadata builders.
 * Semantics: ref/indices.c; spec sparse_attention.md sections 5 and 6. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/indices.h"
#include "../ops/ops.h"
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

/* Per-request lengths from the generator parameters: each in [0, 2^29 - 1],
 * so that positions and token counts stay far inside int32. */
typedef dsv4_req_shape combine_shape;

static int combine_shape_of(const dsv4_params *ps, combine_shape *cs, dsv4_status *st)
{
    return dsv4_req_shape_of(ps, INT32_MAX / 4, INT32_MAX / 4, 0, cs, st);
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
            dsv4_fill_topk_row(&rng, row, Wk, (pos + 1) / ratio, scratch);
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

/* ------------------------------------------------------------------ */
/* Shared batch generator of the metadata builders: requests with      */
/* query_lens / prefix_lens (decodes first, as vLLM reorders them),    */
/* block tables of shuffled pages, invalid tokens (slot_mapping < 0).  */

/* Leading requests with query_len == 1 are decodes (reorder_batch_threshold
 * 1 [S12]); their tokens come first. */
static int64_t decode_tokens(const combine_shape *cs)
{
    int64_t n = 0;
    for (int64_t r = 0; r < cs->R && cs->qlen[r] == 1; r++)
        n++;
    return n;
}

/* query_start_loc (base 0), seq_lens, token_to_req_indices, is_valid_token
 * (a token is invalid with probability invalid_token_frac: slot_mapping
 * -1, spec 5.1). Each is optional (NULL name skips it). */
static int gen_batch(const dsv4_opctx *c, const combine_shape *cs, dsv4_tensors *in, int want_qsl,
                     dsv4_status *st)
{
    dsv4_tensor *q = NULL, *s = NULL, *t2r, *val;
    int64_t r1 = cs->R + 1;
    int rc;
    if (want_qsl && ((rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &r1, &q, st)) ||
                     (rc = dsv4_tensors_add(in, "seq_lens", DSV4_I32, 1, &cs->R, &s, st))))
        return rc;
    if ((rc = dsv4_tensors_add(in, "token_to_req_indices", DSV4_I32, 1, &cs->T, &t2r, st)) ||
        (rc = dsv4_tensors_add(in, "is_valid_token", DSV4_U8, 1, &cs->T, &val, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "is_valid_token");
    const double frac = dsv4_params_float(c->params, "invalid_token_frac");
    int64_t t = 0;
    for (int64_t r = 0; r < cs->R; r++) {
        if (q) {
            ((int32_t *)q->data)[0] = 0;
            ((int32_t *)q->data)[r + 1] = (int32_t)(t + cs->qlen[r]);
            ((int32_t *)s->data)[r] = (int32_t)(cs->prefix[r] + cs->qlen[r]);
        }
        for (int64_t i = 0; i < cs->qlen[r]; i++, t++) {
            ((int32_t *)t2r->data)[t] = (int32_t)r;
            ((uint8_t *)val->data)[t] = dsv4_rng_uniform(&rng) >= frac;
        }
    }
    return DSV4_OK;
}

/* block_table [R, width]: request r needs ceil(entries_r / B) pages, with
 * entries_r = S_r // ratio; width = the largest need + bt_pad.  Page ids
 * are a shuffled permutation of [0, R*width), so a wrong row or column
 * gives a wrong slot. */
static int gen_block_table(const dsv4_opctx *c, const combine_shape *cs, int64_t ratio, int64_t B,
                           dsv4_tensors *in, int64_t *width_out, dsv4_status *st)
{
    int64_t width = 0;
    for (int64_t r = 0; r < cs->R; r++) {
        int64_t need = ((cs->prefix[r] + cs->qlen[r]) / ratio + B - 1) / B;
        width = need > width ? need : width;
    }
    width += dsv4_params_int(c->params, "bt_pad");
    if (width < 1)
        width = 1;
    int64_t shape[2] = {cs->R, width};
    dsv4_tensor *bt;
    int rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, shape, &bt, st);
    if (rc)
        return rc;
    int32_t *p = bt->data;
    for (int64_t k = 0; k < cs->R * width; k++)
        p[k] = (int32_t)k;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "block_table");
    dsv4_rng_shuffle_i32(&rng, p, cs->R * width);
    *width_out = width;
    return DSV4_OK;
}

static int block_table_in(const dsv4_tensors *in, const dsv4_tensor **bt, dsv4_status *st)
{
    return dsv4_input(in, "block_table", DSV4_I32, 2, bt, st);
}

/* A 1-D input of exactly n elements. */
static int input_1d(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int64_t n,
                    const dsv4_tensor **out, dsv4_status *st)
{
    int rc = dsv4_input(in, name, dt, 1, out, st);
    if (!rc && n >= 0 && (*out)->shape[0] != n)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' has %" PRId64 " elements, expected %" PRId64, name,
                         (*out)->shape[0], n);
    return rc;
}

static void policy_exact_cb(dsv4_policy *pol, const char *output)
{
    char why[96];
    snprintf(why, sizeof why, "%s: integer metadata, bit-exact", output);
    dsv4_policy_exact(pol, why);
}

/* Mask of a flat ragged buffer: only [0, nnz) is specified. */
static void ragged_mask(uint8_t *mask, int64_t n, int64_t nnz)
{
    for (int64_t k = 0; k < n; k++)
        mask[k] = k < nnz;
}

static int64_t param_or(const dsv4_params *ps, const char *name, int64_t dflt)
{
    int64_t v = dsv4_params_int(ps, name);
    return v < 0 ? dflt : v;
}

/* ------------------------------------------------------------------ */
/* compute_global_topk_indices_and_lens (spec 5.6) and                 */
/* compute_global_topk_ragged_indices_and_indptr (spec 5.7)            */

static const char *const gtopk_variants[] = {"default", "bounds=checked", NULL};
static const char *const gtopk_variant_docs[] = {
    "base semantics, no bounds checks; an out-of-range block-table read is rejected as bad input "
    "(vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
    "bad request -> row -1, lens 0; v < 0 or v//Bc >= block_table width -> -1, not counted; survivors "
    "compacted left (vllm-project/vllm:tests/kernels/attention/test_compute_global_topk_bounds.py@"
    "4bc98fd4c928ff979dc709b8b800b83add548dd5)",
};
static const char *const gtopk_ragged_variants[] = {"default", NULL};
static const char *const gtopk_ragged_variant_docs[] = {
    "ROCm C4A decode: first lens[t] columns packed, -1 kept "
    "(vllm-project/vllm:vllm/models/deepseek_v4/amd/rocm.py@0c2f37a7a45e95cc9c4dba4a974f78357cf8ecc1)",
};

static const dsv4_param_spec gtopk_params[] = {
    {"block_size", DSV4_P_INT, "64", "Bc: compressed rows per page (256 / compress_ratio)", 0},
    {"compress_ratio", DSV4_P_INT, "4", "generator: c, visible entries (pos+1)//c", 1},
    {"topk", DSV4_P_INT, "512", "generator: top-k width K", 1},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request", 1},
    {"invalid_token_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens with slot_mapping -1", 1},
    {"hole_frac", DSV4_P_FLOAT, "0", "generator: fraction of top-k entries set to -1 (interior holes)", 1},
    {"oob_frac", DSV4_P_FLOAT, "0", "generator: fraction beyond the block table or <= -2 (checked)", 1},
    {"bad_req_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens with a bad request (checked)", 1},
    {"bt_pad", DSV4_P_INT, "1", "generator: extra block-table columns", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec gtopk_inputs[] = {
    {"topk_indices", DSV4_I32, DSV4_DT_NONE, "[T, K] local compressed indices, -1 padded"},
    {"token_to_req_indices", DSV4_I32, DSV4_DT_NONE, "[T] request of each token"},
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[R, maxb] compressed-cache pages"},
    {"is_valid_token", DSV4_U8, DSV4_DT_NONE, "[T] slot_mapping >= 0 (bool as uint8)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec gtopk_outputs[] = {
    {"global_topk_indices", DSV4_I32, DSV4_DT_NONE, "[T, K] cache slots, -1 padded"},
    {"topk_lens", DSV4_I32, DSV4_DT_NONE, "[T] valid entries (0 for invalid tokens)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec gtopk_ragged_outputs[] = {
    {"topk_ragged_indices", DSV4_I32, DSV4_DT_NONE, "[T*K] flat; entries past indptr[T] unspecified"},
    {"topk_ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[T+1] exclusive prefix sum of topk_lens"},
    {"topk_lens", DSV4_I32, DSV4_DT_NONE, "[T] valid entries (0 for invalid tokens)"},
    {NULL, 0, 0, NULL},
};

static int gtopk_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t ratio = dsv4_params_int(ps, "compress_ratio"), K = dsv4_params_int(ps, "topk");
    const int64_t bc = dsv4_params_int(ps, "block_size");
    if (ratio < 1 || K < 0 || bc < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio and block_size must be >= 1, topk >= 0");
    int64_t width, shape[2] = {cs.T, K};
    dsv4_tensor *topk;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape, &topk, st)) ||
        (rc = gen_batch(c, &cs, in, 0, st)) || (rc = gen_block_table(c, &cs, ratio, bc, in, &width, st)))
        return rc;
    int64_t max_n = 1;
    for (int64_t r = 0; r < cs.R; r++)
        max_n = (cs.prefix[r] + cs.qlen[r]) / ratio + 1 > max_n ? (cs.prefix[r] + cs.qlen[r]) / ratio + 1 : max_n;
    dsv4_tensor scratch_t; /* counts against the memory limit, like the tensors */
    if ((rc = dsv4_tensor_alloc(&scratch_t, "topk_indices scratch", DSV4_I32, 1, &max_n, st)))
        return rc;
    int32_t *scratch = scratch_t.data;
    const double hole = dsv4_params_float(ps, "hole_frac"), oob = dsv4_params_float(ps, "oob_frac");
    const double bad_req = dsv4_params_float(ps, "bad_req_frac");
    int32_t *t2r = dsv4_tensors_find(in, "token_to_req_indices")->data;
    dsv4_rng rng, sp;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    dsv4_rng_init(&sp, c->seed, "topk_indices.special");
    for (int64_t r = 0, t = 0; r < cs.R; r++)
        for (int64_t i = 0; i < cs.qlen[r]; i++, t++) {
            int32_t *row = (int32_t *)topk->data + t * K;
            dsv4_fill_topk_row(&rng, row, K, (cs.prefix[r] + i + 1) / ratio, scratch);
            for (int64_t j = 0; j < K && row[j] >= 0; j++) {
                double u = dsv4_rng_uniform(&sp);
                if (u < hole)
                    row[j] = -1;
                else if (u < hole + oob) /* past the block-table width, or a negative other than -1 */
                    row[j] = (j & 1) ? (int32_t)(width * bc + dsv4_rng_range(&sp, 0, 1000))
                                     : (int32_t)(-2 - dsv4_rng_range(&sp, 0, 1000));
            }
            if (dsv4_rng_uniform(&sp) < bad_req) /* req == rows, > rows, or < 0 [S26] */
                t2r[t] = (int32_t)((t & 1) ? cs.R + dsv4_rng_range(&sp, 0, 3) : -1);
        }
    dsv4_tensor_free(&scratch_t);
    return DSV4_OK;
}

static int gtopk_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gtopk_args *a, dsv4_status *st)
{
    const dsv4_tensor *topk, *t2r, *bt, *val;
    int rc;
    if ((rc = dsv4_input(in, "topk_indices", DSV4_I32, 2, &topk, st)) ||
        (rc = input_1d(in, "token_to_req_indices", DSV4_I32, topk->shape[0], &t2r, st)) ||
        (rc = input_1d(in, "is_valid_token", DSV4_U8, topk->shape[0], &val, st)) ||
        (rc = block_table_in(in, &bt, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->topk_indices = topk->data;
    a->num_tokens = topk->shape[0];
    a->topk_width = topk->shape[1];
    a->token_to_req = t2r->data;
    a->is_valid_token = val->data;
    a->block_table = bt->data;
    a->bt_rows = bt->shape[0];
    a->bt_cols = bt->shape[1];
    a->block_size = dsv4_params_int(c->params, "block_size");
    return DSV4_OK;
}

static int gtopk_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    return rc ? rc : dsv4_gtopk_check(&a, (dsv4_gtopk_variant)c->variant, 0, st);
}

static int gtopk_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_tokens, a.topk_width};
    dsv4_tensor *g, *l;
    if ((rc = dsv4_tensors_add(out, "global_topk_indices", DSV4_I32, 2, shape, &g, st)) ||
        (rc = dsv4_tensors_add(out, "topk_lens", DSV4_I32, 1, shape, &l, st)))
        return rc;
    dsv4_poison(g);
    dsv4_poison(l);
    return DSV4_OK;
}

static int gtopk_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_compute_global_topk_indices_and_lens(
                    &a, (dsv4_gtopk_variant)c->variant, dsv4_tensors_find(out, "global_topk_indices")->data,
                    dsv4_tensors_find(out, "topk_lens")->data, st);
}

static int exact_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                        dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    policy_exact_cb(pol, output);
    return DSV4_OK;
}

/* Names token, request and column of an element of a [T, K] output. */
static void gtopk_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                         char *buf, size_t len)
{
    dsv4_gtopk_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (gtopk_args(c, in, &a, &st) || a.topk_width == 0)
        return;
    int64_t t = strcmp(output, "global_topk_indices") == 0 ? flat / a.topk_width : flat;
    if (t < a.num_tokens)
        snprintf(buf, len, "token %" PRId64 " (request %d, %s)", t, a.token_to_req[t],
                 a.is_valid_token[t] ? "valid" : "invalid token");
}

static int gtopk_ragged_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    return rc ? rc : dsv4_gtopk_check(&a, DSV4_GTOPK_BASE, 1, st);
}

static int gtopk_ragged_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                              dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    /* Flat size T*K (spec 5.7): the caller's buffer, not the nnz. */
    int64_t nflat = a.num_tokens * a.topk_width, n1 = a.num_tokens + 1;
    dsv4_tensor *f, *ip, *l;
    if ((rc = dsv4_tensors_add(out, "topk_ragged_indices", DSV4_I32, 1, &nflat, &f, st)) ||
        (rc = dsv4_tensors_add(out, "topk_ragged_indptr", DSV4_I32, 1, &n1, &ip, st)) ||
        (rc = dsv4_tensors_add(out, "topk_lens", DSV4_I32, 1, &a.num_tokens, &l, st)))
        return rc;
    dsv4_poison(f);
    dsv4_poison(ip);
    dsv4_poison(l);
    return DSV4_OK;
}

static int gtopk_ragged_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                                  dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_compute_global_topk_ragged_indices_and_indptr(
                    &a, dsv4_tensors_find(out, "topk_ragged_indices")->data,
                    dsv4_tensors_find(out, "topk_ragged_indptr")->data, dsv4_tensors_find(out, "topk_lens")->data,
                    st);
}

/* nnz = sum of lens, recomputed from the inputs (not from either output). */
static int gtopk_ragged_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask,
                             int64_t n, dsv4_status *st)
{
    dsv4_gtopk_args a;
    int rc = gtopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t nnz = 0;
    for (int64_t t = 0; t < a.num_tokens; t++)
        for (int64_t j = 0; a.is_valid_token[t] && j < a.topk_width; j++)
            nnz += a.topk_indices[t * a.topk_width + j] >= 0;
    ragged_mask(mask, n, strcmp(output, "topk_ragged_indices") == 0 ? nnz : n);
    return DSV4_OK;
}

const dsv4_op dsv4_op_compute_global_topk_indices_and_lens = {
    .name = "compute_global_topk_indices_and_lens",
    .summary = "local top-k compressed indices -> global cache slots through the block table, and lens",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(spec sparse_attention.md 5.6)",
    .variants = gtopk_variants,
    .variant_docs = gtopk_variant_docs,
    .params = gtopk_params,
    .inputs = gtopk_inputs,
    .outputs = gtopk_outputs,
    .generate = gtopk_generate,
    .validate = gtopk_validate,
    .alloc_outputs = gtopk_alloc,
    .reference = gtopk_reference,
    .policy = exact_policy,
    .locate = gtopk_locate,
};

const dsv4_op dsv4_op_compute_global_topk_ragged_indices_and_indptr = {
    .name = "compute_global_topk_ragged_indices_and_indptr",
    .summary = "ROCm C4A decode: global top-k slots as CSR (lens, indptr, flat)",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/amd/rocm.py@0c2f37a7a45e95cc9c4dba4a974f78357cf8ecc1 "
              "(spec sparse_attention.md 5.7)",
    .variants = gtopk_ragged_variants,
    .variant_docs = gtopk_ragged_variant_docs,
    .params = gtopk_params,
    .inputs = gtopk_inputs,
    .outputs = gtopk_ragged_outputs,
    .generate = gtopk_generate,
    .validate = gtopk_ragged_validate,
    .alloc_outputs = gtopk_ragged_alloc,
    .reference = gtopk_ragged_reference,
    .policy = exact_policy,
    .mask = gtopk_ragged_mask,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* build_prefill_topk_ragged_indices (spec 5.9, inferred from [S29])   */

static const char *const pftopk_variants[] = {"default", "invalid=drop", NULL};
static const char *const pftopk_variant_docs[] = {
    "inferred: first cap = min((pos+1)//c, Wk) columns; entries outside [0, N) (or slots outside "
    "[0, num_rows)) kept as -1 (spec 5.9, test id 69177189503; source not found)",
    "inferred: those entries dropped and the row compacted (spec 5.9 open question 5)",
};

static const dsv4_param_spec pftopk_params[] = {
    {"block_size", DSV4_P_INT, "64", "Bc: compressed rows per page (256 / compress_ratio)", 0},
    {"compress_ratio", DSV4_P_INT, "4", "compress ratio c (>= 1)", 0},
    {"num_compressed", DSV4_P_INT, "-1", "N; -1: ceil(max_model_len / c)", 0},
    {"token_offset", DSV4_P_INT, "-1", "num_decode_tokens; -1: tokens of the leading query_len-1 requests", 0},
    {"num_rows", DSV4_P_INT, "-1", "slots outside [0, num_rows) -> -1; -1: no bound", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request (decodes first)", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request", 1},
    {"topk_width", DSV4_P_INT, "512", "generator: Wk, columns of topk_indices", 1},
    {"max_model_len", DSV4_P_INT, "-1", "generator: for N; -1: the longest request", 1},
    {"invalid_token_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens with slot_mapping -1", 1},
    {"fail_frac", DSV4_P_FLOAT, "0", "generator: fraction of rows with -1 and N+3 under the cap (as S29)", 1},
    {"bt_pad", DSV4_P_INT, "1", "generator: extra block-table columns", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec pftopk_inputs[] = {
    {"topk_indices", DSV4_I32, DSV4_DT_NONE, "[T_pf, Wk] local top-k rows of the prefill tokens"},
    {"token_to_req_indices", DSV4_I32, DSV4_DT_NONE, "[T] request of each batch token"},
    {"query_start_loc", DSV4_I32, DSV4_DT_NONE, "[R+1] whole batch, base 0"},
    {"seq_lens", DSV4_I32, DSV4_DT_NONE, "[R]"},
    {"is_valid_token", DSV4_U8, DSV4_DT_NONE, "[T] slot_mapping >= 0"},
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[R, maxb] compressed-cache pages"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec pftopk_outputs[] = {
    {"topk_ragged_indices", DSV4_I32, DSV4_DT_NONE, "[T_pf*Wk] flat; entries past indptr[T_pf] unspecified"},
    {"topk_ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[T_pf+1] row offsets"},
    {NULL, 0, 0, NULL},
};

static int pftopk_resolve(dsv4_params *ps, dsv4_status *st)
{
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t c = dsv4_params_int(ps, "compress_ratio");
    if (c < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be >= 1", c);
    int64_t max_len = 0;
    for (int64_t r = 0; r < cs.R; r++)
        max_len = cs.prefix[r] + cs.qlen[r] > max_len ? cs.prefix[r] + cs.qlen[r] : max_len;
    if (dsv4_params_int(ps, "max_model_len") < 0 && (rc = dsv4_params_set_int(ps, "max_model_len", max_len, st)))
        return rc;
    max_len = dsv4_params_int(ps, "max_model_len");
    if (dsv4_params_int(ps, "num_compressed") < 0 &&
        (rc = dsv4_params_set_int(ps, "num_compressed", (max_len + c - 1) / c, st)))
        return rc;
    if (dsv4_params_int(ps, "token_offset") < 0 &&
        (rc = dsv4_params_set_int(ps, "token_offset", decode_tokens(&cs), st)))
        return rc;
    return DSV4_OK;
}

static int pftopk_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t ratio = dsv4_params_int(ps, "compress_ratio"), Wk = dsv4_params_int(ps, "topk_width");
    const int64_t bc = dsv4_params_int(ps, "block_size"), N = dsv4_params_int(ps, "num_compressed");
    const int64_t off = dsv4_params_int(ps, "token_offset");
    if (ratio < 1 || bc < 1 || Wk < 0 || off < 0 || off > cs.T)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio, block_size >= 1; topk_width >= 0; token_offset in [0, T]");
    int64_t width, shape[2] = {cs.T - off, Wk};
    dsv4_tensor *topk;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape, &topk, st)) ||
        (rc = gen_batch(c, &cs, in, 1, st)) || (rc = gen_block_table(c, &cs, ratio, bc, in, &width, st)))
        return rc;
    dsv4_tensor scratch_t; /* counts against the memory limit, like the tensors */
    int64_t n_scratch = N + 1;
    if ((rc = dsv4_tensor_alloc(&scratch_t, "topk_indices scratch", DSV4_I32, 1, &n_scratch, st)))
        return rc;
    int32_t *scratch = scratch_t.data;
    const double fail = dsv4_params_float(ps, "fail_frac");
    dsv4_rng rng, sp;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    dsv4_rng_init(&sp, c->seed, "topk_indices.special");
    for (int64_t r = 0, t = 0; r < cs.R; r++)
        for (int64_t i = 0; i < cs.qlen[r]; i++, t++) {
            if (t < off)
                continue;
            int32_t *row = (int32_t *)topk->data + (t - off) * Wk;
            int64_t visible = (cs.prefix[r] + i + 1) / ratio, cap = visible < Wk ? visible : Wk;
            dsv4_fill_topk_row(&rng, row, Wk, visible < N ? visible : N, scratch);
            /* As S29: a failed candidate and one past the pool under the cap;
             * stale values in [0, N) past it, which no reader may use. */
            if (cap >= 2 && dsv4_rng_uniform(&sp) < fail) {
                row[0] = -1;
                row[1] = (int32_t)(N + 3);
            }
            for (int64_t j = cap; j < Wk && N > 0; j++)
                row[j] = (int32_t)dsv4_rng_range(&sp, 0, N);
        }
    dsv4_tensor_free(&scratch_t);
    return DSV4_OK;
}

static int pftopk_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_pftopk_args *a, dsv4_status *st)
{
    const dsv4_tensor *topk, *t2r, *val, *qsl, *seq, *bt;
    int rc;
    if ((rc = dsv4_input(in, "topk_indices", DSV4_I32, 2, &topk, st)) ||
        (rc = input_1d(in, "token_to_req_indices", DSV4_I32, -1, &t2r, st)) ||
        (rc = input_1d(in, "is_valid_token", DSV4_U8, t2r->shape[0], &val, st)) ||
        (rc = input_1d(in, "seq_lens", DSV4_I32, -1, &seq, st)) ||
        (rc = input_1d(in, "query_start_loc", DSV4_I32, seq->shape[0] + 1, &qsl, st)) ||
        (rc = block_table_in(in, &bt, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->topk_indices = topk->data;
    a->num_prefill_tokens = topk->shape[0];
    a->topk_width = topk->shape[1];
    a->token_to_req = t2r->data;
    a->is_valid_token = val->data;
    a->num_tokens = t2r->shape[0];
    a->query_start_loc = qsl->data;
    a->seq_lens = seq->data;
    a->num_reqs = seq->shape[0];
    a->block_table = bt->data;
    a->bt_rows = bt->shape[0];
    a->bt_cols = bt->shape[1];
    a->block_size = dsv4_params_int(c->params, "block_size");
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->num_compressed = dsv4_params_int(c->params, "num_compressed");
    a->token_offset = dsv4_params_int(c->params, "token_offset");
    a->num_rows = dsv4_params_int(c->params, "num_rows");
    return DSV4_OK;
}

static int pftopk_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    return rc ? rc : dsv4_pftopk_check(&a, st);
}

static int pftopk_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t nflat = a.num_prefill_tokens * a.topk_width, n1 = a.num_prefill_tokens + 1;
    dsv4_tensor *f, *ip;
    if ((rc = dsv4_tensors_add(out, "topk_ragged_indices", DSV4_I32, 1, &nflat, &f, st)) ||
        (rc = dsv4_tensors_add(out, "topk_ragged_indptr", DSV4_I32, 1, &n1, &ip, st)))
        return rc;
    dsv4_poison(f);
    dsv4_poison(ip);
    return DSV4_OK;
}

static int pftopk_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_build_prefill_topk_ragged_indices(&a, (dsv4_pftopk_variant)c->variant,
                                                          dsv4_tensors_find(out, "topk_ragged_indices")->data,
                                                          dsv4_tensors_find(out, "topk_ragged_indptr")->data, st);
}

/* nnz from a private run of the reference on the inputs: the mask must not
 * trust the backend's indptr. */
static int pftopk_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask,
                       int64_t n, dsv4_status *st)
{
    if (strcmp(output, "topk_ragged_indices") != 0) {
        ragged_mask(mask, n, n);
        return DSV4_OK;
    }
    dsv4_pftopk_args a;
    int rc = pftopk_args(c, in, &a, st);
    if (rc)
        return rc;
    int32_t *flat = malloc((size_t)(a.num_prefill_tokens * a.topk_width + 1) * sizeof *flat);
    int32_t *ip = malloc((size_t)(a.num_prefill_tokens + 1) * sizeof *ip);
    if (!flat || !ip)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_ref_build_prefill_topk_ragged_indices(&a, (dsv4_pftopk_variant)c->variant, flat, ip, st);
    if (!rc)
        ragged_mask(mask, n, ip[a.num_prefill_tokens]);
    free(flat);
    free(ip);
    return rc;
}

const dsv4_op dsv4_op_build_prefill_topk_ragged_indices = {
    .name = "build_prefill_topk_ragged_indices",
    .summary = "aiter paged prefill: causal-capped local top-k rows -> global slots as CSR (inferred)",
    .source = "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py (seed 000, _prefill_topk_ragged); "
              "semantics inferred from test id 69177189503 (spec sparse_attention.md 5.9)",
    .variants = pftopk_variants,
    .variant_docs = pftopk_variant_docs,
    .params = pftopk_params,
    .inputs = pftopk_inputs,
    .outputs = pftopk_outputs,
    .resolve = pftopk_resolve,
    .generate = pftopk_generate,
    .validate = pftopk_validate,
    .alloc_outputs = pftopk_alloc,
    .reference = pftopk_reference,
    .policy = exact_policy,
    .mask = pftopk_mask,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* decode_swa_indices_and_lens (spec 5.2 [S12]) + ragged form (5.8)    */

static const char *const swa_variants[] = {"default", NULL};
static const char *const swa_variant_docs[] = {
    "_compute_swa_indices_and_lens_kernel; invalid tokens: lens 0, indices row not rewritten; ragged "
    "form by build_ragged_indices_from_dense "
    "(vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6, "
    "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
};

static const dsv4_param_spec swa_params[] = {
    {"window_size", DSV4_P_INT, "128", "sliding window W", 0},
    {"block_size", DSV4_P_INT, "64", "SWA cache page size B", 0},
    {"token_offset", DSV4_P_INT, "0", "first batch token of row 0 (num_decode_tokens for prefill rows)", 0},
    {"num_out_rows", DSV4_P_INT, "-1", "rows; -1: decode tokens (token_offset 0) or the rest of the batch", 0},
    {"ragged_num_rows", DSV4_P_INT, "-1", "build_ragged_indices_from_dense num_rows (-1: no bound)", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each request (decodes first)", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each request", 1},
    {"invalid_token_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens with slot_mapping -1", 1},
    {"bt_pad", DSV4_P_INT, "1", "generator: extra block-table columns", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec swa_inputs[] = {
    {"query_start_loc", DSV4_I32, DSV4_DT_NONE, "[R+1] whole batch, base 0"},
    {"seq_lens", DSV4_I32, DSV4_DT_NONE, "[R]"},
    {"token_to_req_indices", DSV4_I32, DSV4_DT_NONE, "[T]"},
    {"is_valid_token", DSV4_U8, DSV4_DT_NONE, "[T] slot_mapping >= 0"},
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[R, maxb] SWA-cache pages"},
    {"stale_decode_swa_indices", DSV4_I32, DSV4_DT_NONE, "[rows, 1, W] the persistent buffer before the launch"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec swa_outputs[] = {
    {"decode_swa_indices", DSV4_I32, DSV4_DT_NONE, "[rows, 1, W] in/out: invalid tokens' rows stay stale"},
    {"decode_swa_lens", DSV4_I32, DSV4_DT_NONE, "[rows]"},
    {"decode_swa_ragged_indices", DSV4_I32, DSV4_DT_NONE, "[rows*W] flat; past indptr[rows] unspecified"},
    {"decode_swa_ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[rows+1]"},
    {NULL, 0, 0, NULL},
};

static int swa_resolve(dsv4_params *ps, dsv4_status *st)
{
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t off = dsv4_params_int(ps, "token_offset");
    if (dsv4_params_int(ps, "num_out_rows") < 0 &&
        (rc = dsv4_params_set_int(ps, "num_out_rows", off == 0 ? decode_tokens(&cs) : cs.T - off, st)))
        return rc;
    return DSV4_OK;
}

static int swa_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    const int64_t W = dsv4_params_int(ps, "window_size"), B = dsv4_params_int(ps, "block_size");
    const int64_t rows = dsv4_params_int(ps, "num_out_rows");
    if (W < 0 || B < 1 || rows < 0)
        return dsv4_fail(st, DSV4_EINPUT, "window_size >= 0, block_size >= 1, num_out_rows >= 0");
    int64_t width, shape[3] = {rows, 1, W};
    dsv4_tensor *stale;
    if ((rc = gen_batch(c, &cs, in, 1, st)) || (rc = gen_block_table(c, &cs, 1, B, in, &width, st)) ||
        (rc = dsv4_tensors_add(in, "stale_decode_swa_indices", DSV4_I32, 3, shape, &stale, st)))
        return rc;
    /* The previous step's slots (any int32): an unwritten row must keep them. */
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "stale_decode_swa_indices");
    for (int64_t k = 0; k < rows * W; k++)
        ((int32_t *)stale->data)[k] = (int32_t)dsv4_rng_range(&rng, -1, 1 << 20);
    return DSV4_OK;
}

static int swa_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_swa_args *a, const dsv4_tensor **stale,
                    dsv4_status *st)
{
    const dsv4_tensor *t2r, *val, *qsl, *seq, *bt;
    int rc;
    if ((rc = input_1d(in, "token_to_req_indices", DSV4_I32, -1, &t2r, st)) ||
        (rc = input_1d(in, "is_valid_token", DSV4_U8, t2r->shape[0], &val, st)) ||
        (rc = input_1d(in, "seq_lens", DSV4_I32, -1, &seq, st)) ||
        (rc = input_1d(in, "query_start_loc", DSV4_I32, seq->shape[0] + 1, &qsl, st)) ||
        (rc = block_table_in(in, &bt, st)) || (rc = dsv4_input(in, "stale_decode_swa_indices", DSV4_I32, 3, stale, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->query_start_loc = qsl->data;
    a->seq_lens = seq->data;
    a->num_reqs = seq->shape[0];
    a->token_to_req = t2r->data;
    a->is_valid_token = val->data;
    a->num_tokens = t2r->shape[0];
    a->block_table = bt->data;
    a->bt_rows = bt->shape[0];
    a->bt_cols = bt->shape[1];
    a->window_size = dsv4_params_int(c->params, "window_size");
    a->block_size = dsv4_params_int(c->params, "block_size");
    a->token_offset = dsv4_params_int(c->params, "token_offset");
    a->out_rows = dsv4_params_int(c->params, "num_out_rows");
    if ((*stale)->shape[0] != a->out_rows || (*stale)->shape[1] != 1 || (*stale)->shape[2] != a->window_size)
        return dsv4_fail(st, DSV4_EINPUT, "stale_decode_swa_indices must be [%" PRId64 ", 1, %" PRId64 "]",
                         a->out_rows, a->window_size);
    return DSV4_OK;
}

static int swa_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_swa_args a;
    const dsv4_tensor *stale;
    int rc = swa_args(c, in, &a, &stale, st);
    return rc ? rc : dsv4_swa_check(&a, st);
}

static int swa_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_swa_args a;
    const dsv4_tensor *stale;
    int rc = swa_args(c, in, &a, &stale, st);
    if (rc)
        return rc;
    int64_t nflat = a.out_rows * a.window_size, n1 = a.out_rows + 1;
    dsv4_tensor *idx, *l, *f, *ip;
    if ((rc = dsv4_tensors_add(out, "decode_swa_indices", DSV4_I32, 3, stale->shape, &idx, st)) ||
        (rc = dsv4_tensors_add(out, "decode_swa_lens", DSV4_I32, 1, &a.out_rows, &l, st)) ||
        (rc = dsv4_tensors_add(out, "decode_swa_ragged_indices", DSV4_I32, 1, &nflat, &f, st)) ||
        (rc = dsv4_tensors_add(out, "decode_swa_ragged_indptr", DSV4_I32, 1, &n1, &ip, st)))
        return rc;
    /* In/out: the kernel leaves invalid tokens' rows as they were [S12]. */
    memcpy(idx->data, stale->data, stale->nbytes);
    dsv4_poison(l);
    dsv4_poison(f);
    dsv4_poison(ip);
    return DSV4_OK;
}

static int swa_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_swa_args a;
    const dsv4_tensor *stale;
    int rc = swa_args(c, in, &a, &stale, st);
    if (rc)
        return rc;
    int32_t *idx = dsv4_tensors_find(out, "decode_swa_indices")->data;
    int32_t *lens = dsv4_tensors_find(out, "decode_swa_lens")->data;
    if ((rc = dsv4_ref_decode_swa_indices_and_lens(&a, idx, lens, st)))
        return rc;
    /* ROCm builders: decode_swa_indices.reshape(T_dec, W) with decode_swa_lens (spec 5.8 [S6, S4]). */
    dsv4_ref_build_ragged_indices_from_dense(idx, a.out_rows, a.window_size, lens,
                                             dsv4_params_int(c->params, "ragged_num_rows"),
                                             dsv4_tensors_find(out, "decode_swa_ragged_indices")->data,
                                             dsv4_tensors_find(out, "decode_swa_ragged_indptr")->data);
    return DSV4_OK;
}

/* nnz = sum over valid tokens of min(pos + 1, W), from the inputs. */
static int swa_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                    dsv4_status *st)
{
    dsv4_swa_args a;
    const dsv4_tensor *stale;
    int rc = swa_args(c, in, &a, &stale, st);
    if (rc)
        return rc;
    int64_t nnz = 0;
    for (int64_t i = 0; i < a.out_rows; i++) {
        int64_t t = i + a.token_offset, r = a.token_to_req[t];
        if (!a.is_valid_token[t])
            continue;
        int64_t pos = (int64_t)a.seq_lens[r] - (a.query_start_loc[r + 1] - a.query_start_loc[r]) +
                      (t - a.query_start_loc[r]);
        nnz += pos + 1 < a.window_size ? pos + 1 : a.window_size;
    }
    ragged_mask(mask, n, strcmp(output, "decode_swa_ragged_indices") == 0 ? nnz : n);
    return DSV4_OK;
}

const dsv4_op dsv4_op_decode_swa_indices_and_lens = {
    .name = "decode_swa_indices_and_lens",
    .summary = "decode SWA window slots [T_dec, 1, W] and lens, plus their ragged (CSR) form",
    .source = "vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(spec sparse_attention.md 5.2, 5.8)",
    .variants = swa_variants,
    .variant_docs = swa_variant_docs,
    .params = swa_params,
    .inputs = swa_inputs,
    .outputs = swa_outputs,
    .resolve = swa_resolve,
    .generate = swa_generate,
    .validate = swa_validate,
    .alloc_outputs = swa_alloc,
    .reference = swa_reference,
    .policy = exact_policy,
    .mask = swa_mask,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* copy_ragged_to_graph_buffers (seed 000: _copy_ragged_to_graph_buffers) */

static const char *const gcopy_variants[] = {"default", "arch=gfx950", NULL};
static const char *const gcopy_variant_docs[] = {
    "indices view = buffer[:max(num_rows * max_entries_per_row, 1)] "
    "(vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py, seed 000_2c64f3fb85d9f20a)",
    "_ON_GFX950: the view is trimmed to max(source_entries, 1), same base pointer (seed 000)",
};

static const dsv4_param_spec gcopy_params[] = {
    {"num_rows", DSV4_P_INT, NULL, "rows of this step (num_decode_tokens)", 0},
    {"max_entries_per_row", DSV4_P_INT, NULL, "entries per row the buffer is sized for (K or W)", 0},
    {"source_rows", DSV4_P_INT, "-1", "generator: rows of the source CSR; -1: num_rows", 1},
    {"source_entries", DSV4_P_INT, "-1", "generator: numel of the source flat buffer; -1: source_rows * max_entries_per_row", 1},
    {"indices_capacity", DSV4_P_INT, "-1", "generator: persistent indices buffer size; -1: 2 * num_rows * max_entries_per_row + 7", 1},
    {"indptr_capacity", DSV4_P_INT, "-1", "generator: persistent indptr buffer size; -1: 2 * num_rows + 5", 1},
    {"empty_frac", DSV4_P_FLOAT, "0", "generator: fraction of empty source rows", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec gcopy_inputs[] = {
    {"ragged_indices", DSV4_I32, DSV4_DT_NONE, "[E] source flat indices (only indptr[end] meaningful)"},
    {"ragged_indptr", DSV4_I32, DSV4_DT_NONE, "[source_rows + 1] source row offsets"},
    {"stale_indices_buffer", DSV4_I32, DSV4_DT_NONE, "[cap] persistent indices buffer before the copy"},
    {"stale_indptr_buffer", DSV4_I32, DSV4_DT_NONE, "[cap2] persistent indptr buffer before the copy"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec gcopy_outputs[] = {
    {"ragged_indices_buffer", DSV4_I32, DSV4_DT_NONE, "[cap] in/out: the source copied to the front, the rest stale"},
    {"ragged_indptr_buffer", DSV4_I32, DSV4_DT_NONE, "[cap2] in/out: indptr copied to [0, num_rows+1)"},
    {"view_lens", DSV4_I64, DSV4_DT_NONE, "[2] numel of the returned indices view and indptr view"},
    {NULL, 0, 0, NULL},
};

static int gcopy_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t rows = dsv4_params_int(ps, "num_rows"), mepr = dsv4_params_int(ps, "max_entries_per_row");
    if (rows < 0 || mepr < 0 || rows > (1 << 20) || mepr > (1 << 16))
        return dsv4_fail(st, DSV4_EINPUT, "num_rows in [0, 2^20], max_entries_per_row in [0, 2^16]");
    const int64_t srows = param_or(ps, "source_rows", rows), E = param_or(ps, "source_entries", srows * mepr);
    const int64_t cap = param_or(ps, "indices_capacity", 2 * rows * mepr + 7);
    const int64_t cap2 = param_or(ps, "indptr_capacity", 2 * rows + 5), n1 = srows + 1;
    dsv4_tensor *ri, *rp, *sb, *sp;
    int rc;
    if ((rc = dsv4_tensors_add(in, "ragged_indices", DSV4_I32, 1, &E, &ri, st)) ||
        (rc = dsv4_tensors_add(in, "ragged_indptr", DSV4_I32, 1, &n1, &rp, st)) ||
        (rc = dsv4_tensors_add(in, "stale_indices_buffer", DSV4_I32, 1, &cap, &sb, st)) ||
        (rc = dsv4_tensors_add(in, "stale_indptr_buffer", DSV4_I32, 1, &cap2, &sp, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "ragged_indptr");
    const double empty = dsv4_params_float(ps, "empty_frac");
    int32_t *ip = rp->data, *fl = ri->data;
    ip[0] = 0;
    for (int64_t r = 0; r < srows; r++) {
        int64_t len = dsv4_rng_uniform(&rng) < empty ? 0 : dsv4_rng_range(&rng, 0, mepr + 1);
        ip[r + 1] = (int32_t)(ip[r] + len > E ? E : ip[r] + len);
    }
    dsv4_rng_init(&rng, c->seed, "ragged_indices");
    for (int64_t k = 0; k < E; k++) /* slots, with -1 entries as the builders emit them */
        fl[k] = (int32_t)dsv4_rng_range(&rng, -1, 1 << 20);
    dsv4_rng_init(&rng, c->seed, "stale_buffers");
    for (int64_t k = 0; k < cap; k++)
        ((int32_t *)sb->data)[k] = (int32_t)dsv4_rng_range(&rng, -1000, 1000);
    for (int64_t k = 0; k < cap2; k++)
        ((int32_t *)sp->data)[k] = (int32_t)dsv4_rng_range(&rng, -1000, 1000);
    return DSV4_OK;
}

static int gcopy_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_graphcopy_args *a,
                      const dsv4_tensor **sb, const dsv4_tensor **sp, dsv4_status *st)
{
    const dsv4_tensor *ri, *rp;
    int rc;
    if ((rc = input_1d(in, "ragged_indices", DSV4_I32, -1, &ri, st)) ||
        (rc = input_1d(in, "ragged_indptr", DSV4_I32, -1, &rp, st)) ||
        (rc = input_1d(in, "stale_indices_buffer", DSV4_I32, -1, sb, st)) ||
        (rc = input_1d(in, "stale_indptr_buffer", DSV4_I32, -1, sp, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->ragged_indices = ri->data;
    a->num_entries = ri->shape[0];
    a->ragged_indptr = rp->data;
    a->indptr_len = rp->shape[0];
    a->indices_capacity = (*sb)->shape[0];
    a->indptr_capacity = (*sp)->shape[0];
    a->num_rows = dsv4_params_int(c->params, "num_rows");
    a->max_entries_per_row = dsv4_params_int(c->params, "max_entries_per_row");
    a->gfx950 = c->variant == 1;
    return DSV4_OK;
}

/* Runs the copy on scratch buffers: the checks torch's copy_ would raise on. */
static int gcopy_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_graphcopy_args a;
    const dsv4_tensor *sb, *sp;
    int rc = gcopy_args(c, in, &a, &sb, &sp, st);
    if (rc)
        return rc;
    int32_t *b1 = malloc(sb->nbytes + 4), *b2 = malloc(sp->nbytes + 4);
    int64_t v[2];
    rc = (b1 && b2) ? dsv4_ref_copy_ragged_to_graph_buffers(&a, b1, b2, v, st)
                    : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    free(b1);
    free(b2);
    return rc;
}

static int gcopy_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_graphcopy_args a;
    const dsv4_tensor *sb, *sp;
    int rc = gcopy_args(c, in, &a, &sb, &sp, st);
    if (rc)
        return rc;
    int64_t two = 2;
    dsv4_tensor *ob, *op, *vl;
    if ((rc = dsv4_tensors_add(out, "ragged_indices_buffer", DSV4_I32, 1, sb->shape, &ob, st)) ||
        (rc = dsv4_tensors_add(out, "ragged_indptr_buffer", DSV4_I32, 1, sp->shape, &op, st)) ||
        (rc = dsv4_tensors_add(out, "view_lens", DSV4_I64, 1, &two, &vl, st)))
        return rc;
    /* In/out: persistent buffers keep what the copy does not cover. */
    memcpy(ob->data, sb->data, sb->nbytes);
    memcpy(op->data, sp->data, sp->nbytes);
    dsv4_poison(vl);
    return DSV4_OK;
}

static int gcopy_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_graphcopy_args a;
    const dsv4_tensor *sb, *sp;
    int rc = gcopy_args(c, in, &a, &sb, &sp, st);
    return rc ? rc
              : dsv4_ref_copy_ragged_to_graph_buffers(&a, dsv4_tensors_find(out, "ragged_indices_buffer")->data,
                                                      dsv4_tensors_find(out, "ragged_indptr_buffer")->data,
                                                      dsv4_tensors_find(out, "view_lens")->data, st);
}

const dsv4_op dsv4_op_copy_ragged_to_graph_buffers = {
    .name = "copy_ragged_to_graph_buffers",
    .summary = "copy step CSR metadata into persistent CUDA-graph buffers (stable base, indptr bounds reads)",
    .source = "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py (seed 000_2c64f3fb85d9f20a, "
              "_copy_ragged_to_graph_buffers; spec sparse_attention.md 5.8)",
    .variants = gcopy_variants,
    .variant_docs = gcopy_variant_docs,
    .params = gcopy_params,
    .inputs = gcopy_inputs,
    .outputs = gcopy_outputs,
    .generate = gcopy_generate,
    .validate = gcopy_validate,
    .alloc_outputs = gcopy_alloc,
    .reference = gcopy_reference,
    .policy = exact_policy,
    .mask = NULL,
    .locate = NULL,
};

/* ------------------------------------------------------------------ */
/* get_prefill_chunk_plan (spec 7 [S12])                               */
/* Output shape: the worst case [num_prefills, 4] plus num_chunks [1]  */
/* (rows >= num_chunks masked), not the exact count: a backend that     */
/* plans a different number of chunks then fails on num_chunks, with   */
/* the count in the report, instead of being forced into our shape.    */

static const char *const plan_variants[] = {"default", NULL};
static const char *const plan_variant_docs[] = {
    "greedy area-bounded chunking "
    "(vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6)",
};

static const dsv4_param_spec plan_params[] = {
    {"compress_ratio", DSV4_P_INT, "4", "c (<= 1: no compressed rows)", 0},
    {"prefill_chunk_size", DSV4_P_INT, "4", "PREFILL_CHUNK_SIZE: workspace slabs", 0},
    {"window_size", DSV4_P_INT, "128", "W (>= 1)", 0},
    {"max_model_len", DSV4_P_INT, "-1", "-1: the longest request", 0},
    {"max_num_batched_tokens", DSV4_P_INT, "-1", "-1: the batch's prefill tokens", 0},
    {"has_compressed", DSV4_P_INT, "1", "0: SWA-only layer, compressed widths 0 (inferred from the seed call)", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: query tokens of each prefill", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: cached prefix of each prefill", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec plan_inputs[] = {
    {"prefill_seq_lens", DSV4_I32, DSV4_DT_NONE, "[num_prefills] (CPU)"},
    {"prefill_query_lens", DSV4_I32, DSV4_DT_NONE, "[num_prefills] (CPU)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec plan_outputs[] = {
    {"chunk_plan", DSV4_I64, DSV4_DT_NONE, "[num_prefills, 4] (start, end, max_compressed, chunk_M); rows >= num_chunks unspecified"},
    {"num_chunks", DSV4_I64, DSV4_DT_NONE, "[1] len(plan)"},
    {NULL, 0, 0, NULL},
};

static int plan_resolve(dsv4_params *ps, dsv4_status *st)
{
    combine_shape cs;
    int rc = combine_shape_of(ps, &cs, st);
    if (rc)
        return rc;
    int64_t max_len = 0;
    for (int64_t r = 0; r < cs.R; r++)
        max_len = cs.prefix[r] + cs.qlen[r] > max_len ? cs.prefix[r] + cs.qlen[r] : max_len;
    if (dsv4_params_int(ps, "max_model_len") < 0 && (rc = dsv4_params_set_int(ps, "max_model_len", max_len, st)))
        return rc;
    if (dsv4_params_int(ps, "max_num_batched_tokens") < 0 &&
        (rc = dsv4_params_set_int(ps, "max_num_batched_tokens", cs.T, st)))
        return rc;
    return DSV4_OK;
}

static int plan_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    combine_shape cs;
    int rc = combine_shape_of(c->params, &cs, st);
    dsv4_tensor *s, *q;
    if (rc || (rc = dsv4_tensors_add(in, "prefill_seq_lens", DSV4_I32, 1, &cs.R, &s, st)) ||
        (rc = dsv4_tensors_add(in, "prefill_query_lens", DSV4_I32, 1, &cs.R, &q, st)))
        return rc;
    for (int64_t r = 0; r < cs.R; r++) {
        ((int32_t *)s->data)[r] = (int32_t)(cs.prefix[r] + cs.qlen[r]);
        ((int32_t *)q->data)[r] = (int32_t)cs.qlen[r];
    }
    return DSV4_OK;
}

static int plan_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_chunkplan_args *a, dsv4_status *st)
{
    const dsv4_tensor *s, *q;
    int rc;
    if ((rc = input_1d(in, "prefill_seq_lens", DSV4_I32, -1, &s, st)) ||
        (rc = input_1d(in, "prefill_query_lens", DSV4_I32, s->shape[0], &q, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->seq_lens = s->data;
    a->query_lens = q->data;
    a->num_prefills = s->shape[0];
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->chunk_size = dsv4_params_int(c->params, "prefill_chunk_size");
    a->window_size = dsv4_params_int(c->params, "window_size");
    a->max_model_len = dsv4_params_int(c->params, "max_model_len");
    a->max_num_batched_tokens = dsv4_params_int(c->params, "max_num_batched_tokens");
    a->has_compressed = dsv4_params_int(c->params, "has_compressed") != 0;
    return DSV4_OK;
}

static int plan_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    return rc ? rc : dsv4_chunkplan_check(&a, st);
}

static int plan_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.num_prefills, 4}, one = 1;
    dsv4_tensor *p, *n;
    if ((rc = dsv4_tensors_add(out, "chunk_plan", DSV4_I64, 2, shape, &p, st)) ||
        (rc = dsv4_tensors_add(out, "num_chunks", DSV4_I64, 1, &one, &n, st)))
        return rc;
    dsv4_poison(p);
    dsv4_poison(n);
    return DSV4_OK;
}

static int plan_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    return rc ? rc
              : dsv4_ref_get_prefill_chunk_plan(&a, dsv4_tensors_find(out, "chunk_plan")->data,
                                                dsv4_tensors_find(out, "num_chunks")->data, st);
}

static int plan_mask(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, uint8_t *mask, int64_t n,
                     dsv4_status *st)
{
    dsv4_chunkplan_args a;
    int rc = plan_args(c, in, &a, st);
    if (rc)
        return rc;
    int64_t *plan = malloc((size_t)(a.num_prefills * 4 + 1) * sizeof *plan), nc = 0;
    if (!plan)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    rc = dsv4_ref_get_prefill_chunk_plan(&a, plan, &nc, st);
    free(plan);
    if (!rc)
        ragged_mask(mask, n, strcmp(output, "chunk_plan") == 0 ? nc * 4 : n);
    return rc;
}

const dsv4_op dsv4_op_get_prefill_chunk_plan = {
    .name = "get_prefill_chunk_plan",
    .summary = "greedy prefill chunking under the gather-workspace area budget",
    .source = "vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(spec sparse_attention.md 7)",
    .variants = plan_variants,
    .variant_docs = plan_variant_docs,
    .params = plan_params,
    .inputs = plan_inputs,
    .outputs = plan_outputs,
    .resolve = plan_resolve,
    .generate = plan_generate,
    .validate = plan_validate,
    .alloc_outputs = plan_alloc,
    .reference = plan_reference,
    .policy = exact_policy,
    .mask = plan_mask,
    .locate = NULL,
};
