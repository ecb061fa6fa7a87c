/* indices_common.c - the code the index and metadata builders share
 * (indices.h): batch readers and generators, the block table, the top-k
 * rows, small output helpers, and the parameters, inputs, generator and
 * argument reader of the two compute_global_topk ops. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "indices.h"

int dsv4_indices_shape_of(const dsv4_params *ps, dsv4_req_shape *rs, dsv4_status *st)
{
    return dsv4_req_shape_of(ps, INT32_MAX / 4, INT32_MAX / 4, 0, rs, st);
}

int64_t dsv4_indices_longest(const dsv4_req_shape *rs)
{
    int64_t longest = 0;
    for (int64_t r = 0; r < rs->R; r++)
        if (rs->prefix[r] + rs->qlen[r] > longest)
            longest = rs->prefix[r] + rs->qlen[r];
    return longest;
}

int64_t dsv4_indices_decode_tokens(const dsv4_req_shape *rs)
{
    int64_t n = 0;
    for (int64_t r = 0; r < rs->R && rs->qlen[r] == 1; r++)
        n++;
    return n;
}

int dsv4_indices_gen_params_of(const dsv4_params *ps, dsv4_indices_gen_params *g, dsv4_status *st)
{
    static const struct {
        const char *name;
        size_t offset;
    } ints[] = {
        {"window_size", offsetof(dsv4_indices_gen_params, window_size)},
        {"block_size", offsetof(dsv4_indices_gen_params, block_size)},
        {"compress_ratio", offsetof(dsv4_indices_gen_params, compress_ratio)},
        {"topk", offsetof(dsv4_indices_gen_params, topk)},
        {"topk_width", offsetof(dsv4_indices_gen_params, topk_width)},
        {"N", offsetof(dsv4_indices_gen_params, N)},
        {"num_compressed", offsetof(dsv4_indices_gen_params, num_compressed)},
        {"token_offset", offsetof(dsv4_indices_gen_params, token_offset)},
        {"num_out_rows", offsetof(dsv4_indices_gen_params, num_out_rows)},
        {"qsl_base", offsetof(dsv4_indices_gen_params, qsl_base)},
        {"cp_world_size", offsetof(dsv4_indices_gen_params, cp_world_size)},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        *(int64_t *)((char *)g + ints[k].offset) = dsv4_params_int(ps, ints[k].name);
    return dsv4_indices_shape_of(ps, &g->rs, st);
}

int dsv4_indices_default_to(dsv4_params *ps, const char *name, int64_t value, dsv4_status *st)
{
    return dsv4_params_int(ps, name) < 0 ? dsv4_params_set_int(ps, name, value, st) : DSV4_OK;
}

int dsv4_indices_resolve_compressed(dsv4_params *ps, const dsv4_req_shape *rs, const char *n_name,
                                    dsv4_status *st)
{
    const int64_t c = dsv4_params_int(ps, "compress_ratio");
    if (c < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be >= 1", c);
    int rc = dsv4_indices_default_to(ps, "max_model_len", dsv4_indices_longest(rs), st);
    if (rc)
        return rc;
    const int64_t max_len = dsv4_params_int(ps, "max_model_len");
    return dsv4_indices_default_to(ps, n_name, (max_len + c - 1) / c, st);
}

int64_t dsv4_indices_position(const int32_t *query_start_loc, const int32_t *seq_lens, int64_t r, int64_t t)
{
    return (int64_t)seq_lens[r] - ((int64_t)query_start_loc[r + 1] - query_start_loc[r]) +
           (t - query_start_loc[r]);
}

/* The per-token half of dsv4_indices_gen_paged_batch. */
static int gen_batch(const dsv4_opctx *c, const dsv4_req_shape *rs, dsv4_tensors *in, int want_qsl,
                     dsv4_status *st)
{
    dsv4_tensor *q = NULL, *s = NULL, *t2r, *val;
    int64_t r1 = rs->R + 1;
    int rc;
    if (want_qsl && ((rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &r1, &q, st)) ||
                     (rc = dsv4_tensors_add(in, "seq_lens", DSV4_I32, 1, &rs->R, &s, st))))
        return rc;
    if ((rc = dsv4_tensors_add(in, "token_to_req_indices", DSV4_I32, 1, &rs->T, &t2r, st)) ||
        (rc = dsv4_tensors_add(in, "is_valid_token", DSV4_U8, 1, &rs->T, &val, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "is_valid_token");
    const double frac = dsv4_params_float(c->params, "invalid_token_frac");
    int64_t t = 0;
    for (int64_t r = 0; r < rs->R; r++) {
        if (q) {
            ((int32_t *)q->data)[0] = 0;
            ((int32_t *)q->data)[r + 1] = (int32_t)(t + rs->qlen[r]);
            ((int32_t *)s->data)[r] = (int32_t)(rs->prefix[r] + rs->qlen[r]);
        }
        for (int64_t i = 0; i < rs->qlen[r]; i++, t++) {
            ((int32_t *)t2r->data)[t] = (int32_t)r;
            ((uint8_t *)val->data)[t] = dsv4_rng_uniform(&rng) >= frac;
        }
    }
    return DSV4_OK;
}

/* The block-table half of dsv4_indices_gen_paged_batch. */
static int gen_block_table(const dsv4_opctx *c, const dsv4_req_shape *rs, int64_t ratio, int64_t B,
                           dsv4_tensors *in, int64_t *width_out, dsv4_status *st)
{
    int64_t width = 0;
    for (int64_t r = 0; r < rs->R; r++) {
        int64_t need = ((rs->prefix[r] + rs->qlen[r]) / ratio + B - 1) / B;
        width = need > width ? need : width;
    }
    width += dsv4_params_int(c->params, "bt_pad");
    if (width < 1)
        width = 1;
    int64_t shape[2] = {rs->R, width};
    dsv4_tensor *bt;
    int rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, shape, &bt, st);
    if (rc)
        return rc;
    int32_t *p = bt->data;
    for (int64_t k = 0; k < rs->R * width; k++)
        p[k] = (int32_t)k;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "block_table");
    dsv4_rng_shuffle_i32(&rng, p, rs->R * width);
    *width_out = width;
    return DSV4_OK;
}

int dsv4_indices_gen_paged_batch(const dsv4_opctx *c, const dsv4_req_shape *rs, int want_qsl, int64_t ratio,
                                 int64_t B, dsv4_tensors *in, int64_t *width, dsv4_status *st)
{
    int rc = gen_batch(c, rs, in, want_qsl, st);
    return rc ? rc : gen_block_table(c, rs, ratio, B, in, width, st);
}

int dsv4_indices_gen_topk_rows(const dsv4_opctx *c, const dsv4_req_shape *rs, int64_t ratio, int32_t *topk,
                               int64_t Wk, const dsv4_topk_specials *sp, dsv4_status *st)
{
    /* The shuffle scratch (one slot per compressed row, up to 2^29 for a
     * long prefix) counts against the memory limit like the tensors. */
    int64_t max_n = 1;
    for (int64_t r = 0; r < rs->R; r++)
        if ((rs->prefix[r] + rs->qlen[r]) / ratio + 1 > max_n)
            max_n = (rs->prefix[r] + rs->qlen[r]) / ratio + 1;
    dsv4_tensor scratch_t;
    int rc = dsv4_tensor_alloc(&scratch_t, "topk_indices scratch", DSV4_I32, 1, &max_n, st);
    if (rc)
        return rc;
    dsv4_rng rng, special;
    dsv4_rng_init(&rng, c->seed, "topk_indices");
    dsv4_rng_init(&special, c->seed, "topk_indices.special");
    for (int64_t r = 0, t = 0; r < rs->R; r++)
        for (int64_t i = 0; i < rs->qlen[r]; i++, t++) {
            int32_t *row = topk + t * Wk;
            dsv4_fill_topk_row(&rng, row, Wk, (rs->prefix[r] + i + 1) / ratio, scratch_t.data);
            for (int64_t j = 0; j < Wk && row[j] >= 0; j++) {
                double u = dsv4_rng_uniform(&special);
                if (u < sp->hole_frac)
                    row[j] = -1;
                else if (u < sp->hole_frac + sp->oob_frac)
                    row[j] = (j & 1) ? (int32_t)(sp->oob_base + dsv4_rng_range(&special, 0, 1000))
                                     : (int32_t)(-2 - dsv4_rng_range(&special, 0, 1000));
            }
            /* A request == rows, > rows, or < 0 (docs/semantics/indices.md A5.6). */
            if (sp->token_to_req && dsv4_rng_uniform(&special) < sp->bad_req_frac)
                sp->token_to_req[t] = (int32_t)((t & 1) ? rs->R + dsv4_rng_range(&special, 0, 3) : -1);
        }
    dsv4_tensor_free(&scratch_t);
    return DSV4_OK;
}

int dsv4_indices_input_1d(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int64_t n,
                          const dsv4_tensor **out, dsv4_status *st)
{
    int rc = dsv4_input(in, name, dt, 1, out, st);
    if (!rc && n >= 0 && (*out)->shape[0] != n)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' has %" PRId64 " elements, expected %" PRId64, name,
                         (*out)->shape[0], n);
    return rc;
}

int dsv4_indices_token_inputs(const dsv4_tensors *in, int64_t n, const int32_t **token_to_req,
                              const uint8_t **is_valid_token, int64_t *T, dsv4_status *st)
{
    const dsv4_tensor *t2r, *val;
    int rc;
    if ((rc = dsv4_indices_input_1d(in, "token_to_req_indices", DSV4_I32, n, &t2r, st)) ||
        (rc = dsv4_indices_input_1d(in, "is_valid_token", DSV4_U8, t2r->shape[0], &val, st)))
        return rc;
    *token_to_req = t2r->data;
    *is_valid_token = val->data;
    *T = t2r->shape[0];
    return DSV4_OK;
}

int dsv4_indices_request_inputs(const dsv4_tensors *in, const int32_t **query_start_loc, const int32_t **seq_lens,
                                int64_t *R, dsv4_status *st)
{
    const dsv4_tensor *qsl, *seq;
    int rc;
    if ((rc = dsv4_indices_input_1d(in, "seq_lens", DSV4_I32, -1, &seq, st)) ||
        (rc = dsv4_indices_input_1d(in, "query_start_loc", DSV4_I32, seq->shape[0] + 1, &qsl, st)))
        return rc;
    *query_start_loc = qsl->data;
    *seq_lens = seq->data;
    *R = seq->shape[0];
    return DSV4_OK;
}

int dsv4_indices_block_table(const dsv4_tensors *in, const int32_t **block_table, int64_t *rows, int64_t *cols,
                             dsv4_status *st)
{
    const dsv4_tensor *bt;
    int rc = dsv4_input(in, "block_table", DSV4_I32, 2, &bt, st);
    if (rc)
        return rc;
    *block_table = bt->data;
    *rows = bt->shape[0];
    *cols = bt->shape[1];
    return DSV4_OK;
}

int dsv4_indices_add_output(dsv4_tensors *out, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                            dsv4_status *st)
{
    dsv4_tensor *t;
    int rc = dsv4_tensors_add(out, name, dt, ndim, shape, &t, st);
    if (!rc)
        dsv4_poison(t);
    return rc;
}

int dsv4_indices_add_inout(dsv4_tensors *out, const char *name, const dsv4_tensor *before, dsv4_status *st)
{
    dsv4_tensor *t;
    int rc = dsv4_tensors_add(out, name, before->dtype, before->ndim, before->shape, &t, st);
    if (!rc)
        memcpy(t->data, before->data, before->nbytes);
    return rc;
}

void dsv4_indices_ragged_mask(uint8_t *mask, int64_t n, int64_t nnz)
{
    for (int64_t k = 0; k < n; k++)
        mask[k] = k < nnz;
}

int dsv4_indices_exact_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                              dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    char why[96];
    snprintf(why, sizeof why, "%s: integer metadata, bit-exact", output);
    dsv4_policy_exact(pol, why);
    return DSV4_OK;
}

/* ---- compute_global_topk_indices_and_lens and its ragged form ---- */

int dsv4_indices_gtopk_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    dsv4_indices_gen_params gp;
    int rc = dsv4_indices_gen_params_of(ps, &gp, st);
    if (rc)
        return rc;
    if (gp.compress_ratio < 1 || gp.topk < 0 || gp.block_size < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio and block_size must be >= 1, topk >= 0");
    int64_t width, shape[2] = {gp.rs.T, gp.topk};
    dsv4_tensor *topk;
    if ((rc = dsv4_tensors_add(in, "topk_indices", DSV4_I32, 2, shape, &topk, st)) ||
        (rc = dsv4_indices_gen_paged_batch(c, &gp.rs, 0, gp.compress_ratio, gp.block_size, in, &width, st)))
        return rc;
    /* Out of range: past the block-table width, or a negative other than -1. */
    const dsv4_topk_specials sp = {
        .hole_frac = dsv4_params_float(ps, "hole_frac"),
        .oob_frac = dsv4_params_float(ps, "oob_frac"),
        .oob_base = width * gp.block_size,
        .token_to_req = dsv4_tensors_find(in, "token_to_req_indices")->data,
        .bad_req_frac = dsv4_params_float(ps, "bad_req_frac"),
    };
    return dsv4_indices_gen_topk_rows(c, &gp.rs, gp.compress_ratio, topk->data, gp.topk, &sp, st);
}

int dsv4_indices_gtopk_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gtopk_args *a, dsv4_status *st)
{
    const dsv4_tensor *topk;
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = dsv4_input(in, "topk_indices", DSV4_I32, 2, &topk, st)) ||
        (rc = dsv4_indices_token_inputs(in, topk->shape[0], &a->token_to_req, &a->is_valid_token, &a->num_tokens,
                                        st)) ||
        (rc = dsv4_indices_block_table(in, &a->block_table, &a->bt_rows, &a->bt_cols, st)))
        return rc;
    a->topk_indices = topk->data;
    a->topk_width = topk->shape[1];
    a->block_size = dsv4_params_int(c->params, "block_size");
    return DSV4_OK;
}

int dsv4_indices_gtopk_validate(const dsv4_opctx *c, const dsv4_tensors *in, int ragged, dsv4_status *st)
{
    const dsv4_gtopk_variant *rule = c->rule;
    dsv4_gtopk_args a;
    int rc = dsv4_indices_gtopk_args(c, in, &a, st);
    return rc ? rc : dsv4_gtopk_check(&a, *rule, ragged, st);
}
