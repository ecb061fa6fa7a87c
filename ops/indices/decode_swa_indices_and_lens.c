/* decode_swa_indices_and_lens.c - decode SWA window slots [T_dec, 1, W]
 * and lens, plus their ragged (CSR) form as the ROCm builders make it.
 * Semantics: ref/indices.c (docs/semantics/indices.md A5.2, A5.8). */
#include <inttypes.h>
#include <string.h>

#include "indices.h"

/* One reading only: no rule. */
static const dsv4_variant swa_variants[] = {
    {"default",
     "_compute_swa_indices_and_lens_kernel; invalid tokens: lens 0, indices row not rewritten; ragged "
     "form by build_ragged_indices_from_dense "
     "(vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6, "
     "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     NULL},
    {NULL, NULL, NULL},
};

static const char swa_params[] =
    DSV4_INDICES_WINDOW_SIZE_PARAM
    "    block_size         int   = 64   SWA cache page size B\n"
    "    token_offset       int   = 0    first batch token of row 0 (num_decode_tokens for prefill rows)\n"
    "    num_out_rows       int   = -1   rows; -1: the leading decode tokens (token_offset 0) or the rest of the "
        "batch\n"
    "    ragged_num_rows    int   = -1   build_ragged_indices_from_dense num_rows (-1: no bound)\n"
    DSV4_REQ_SHAPE_PARAMS
    DSV4_INDICES_INVALID_TOKEN_FRAC_PARAM
    DSV4_INDICES_BT_PAD_PARAM;

static const char swa_inputs[] =
    DSV4_INDICES_QUERY_START_LOC_INPUT
    DSV4_INDICES_SEQ_LENS_INPUT
    "token_to_req_indices     int32  [T]\n"
    DSV4_INDICES_IS_VALID_TOKEN_INPUT
    "block_table              int32  [R, maxb] SWA-cache pages\n"
    "stale_decode_swa_indices int32  [rows, 1, W] the persistent buffer before the launch\n";

static const char swa_outputs[] =
    "decode_swa_indices        int32  [rows, 1, W] in/out: invalid tokens' rows stay stale\n"
    "decode_swa_lens           int32  [rows]\n"
    "decode_swa_ragged_indices int32  [rows*W] flat; past indptr[rows] unspecified\n"
    "decode_swa_ragged_indptr  int32  [rows+1]\n";

static int swa_resolve(dsv4_params *ps, dsv4_status *st)
{
    dsv4_req_shape rs;
    int rc = dsv4_indices_shape_of(ps, &rs, st);
    if (rc)
        return rc;
    const int64_t off = dsv4_params_int(ps, "token_offset");
    return dsv4_indices_default_to(ps, "num_out_rows", off == 0 ? dsv4_indices_decode_tokens(&rs) : rs.T - off, st);
}

static int swa_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_indices_gen_params gp;
    int rc = dsv4_indices_gen_params_of(c->params, &gp, st);
    if (rc)
        return rc;
    if (gp.window_size < 0 || gp.block_size < 1 || gp.num_out_rows < 0)
        return dsv4_fail(st, DSV4_EINPUT, "window_size >= 0, block_size >= 1, num_out_rows >= 0");
    int64_t width, shape[3] = {gp.num_out_rows, 1, gp.window_size};
    dsv4_tensor *stale;
    if ((rc = dsv4_indices_gen_paged_batch(c, &gp.rs, 1, 1, gp.block_size, in, &width, st)) ||
        (rc = dsv4_tensors_add(in, "stale_decode_swa_indices", DSV4_I32, 3, shape, &stale, st)))
        return rc;
    /* The previous step's slots (any int32): an unwritten row must keep them. */
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "stale_decode_swa_indices");
    for (int64_t k = 0; k < gp.num_out_rows * gp.window_size; k++)
        ((int32_t *)stale->data)[k] = (int32_t)dsv4_rng_range(&rng, -1, 1 << 20);
    return DSV4_OK;
}

static int swa_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_swa_args *a, const dsv4_tensor **stale,
                    dsv4_status *st)
{
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = dsv4_indices_token_inputs(in, -1, &a->token_to_req, &a->is_valid_token, &a->num_tokens, st)) ||
        (rc = dsv4_indices_request_inputs(in, &a->query_start_loc, &a->seq_lens, &a->num_reqs, st)) ||
        (rc = dsv4_indices_block_table(in, &a->block_table, &a->bt_rows, &a->bt_cols, st)) ||
        (rc = dsv4_input(in, "stale_decode_swa_indices", DSV4_I32, 3, stale, st)))
        return rc;
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
    /* In/out: the kernel leaves invalid tokens' rows as they were
     * (docs/semantics/indices.md A5.2). */
    if ((rc = dsv4_indices_add_inout(out, "decode_swa_indices", stale, st)) ||
        (rc = dsv4_indices_add_output(out, "decode_swa_lens", DSV4_I32, 1, &a.out_rows, st)) ||
        (rc = dsv4_indices_add_output(out, "decode_swa_ragged_indices", DSV4_I32, 1, &nflat, st)))
        return rc;
    return dsv4_indices_add_output(out, "decode_swa_ragged_indptr", DSV4_I32, 1, &n1, st);
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
    /* ROCm builders: decode_swa_indices.reshape(T_dec, W) with
     * decode_swa_lens (docs/semantics/indices.md A5.8). */
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
        int64_t t = i + a.token_offset;
        if (!a.is_valid_token[t])
            continue;
        int64_t pos = dsv4_indices_position(a.query_start_loc, a.seq_lens, a.token_to_req[t], t);
        nnz += pos + 1 < a.window_size ? pos + 1 : a.window_size;
    }
    dsv4_indices_ragged_mask(mask, n, strcmp(output, "decode_swa_ragged_indices") == 0 ? nnz : n);
    return DSV4_OK;
}

const dsv4_op dsv4_op_decode_swa_indices_and_lens = {
    .name = "decode_swa_indices_and_lens",
    .summary = "decode SWA window slots [T_dec, 1, W] and lens, plus their ragged (CSR) form",
    .source = "vllm-project/vllm:vllm/v1/attention/backends/mla/sparse_swa.py@03dc564956172b5b2835be7a84ddde5de1d5dba6 "
              "(docs/semantics/indices.md A5.2, A5.8)",
    DSV4_OP_TABLES(swa),
    .resolve = swa_resolve,
    .generate = swa_generate,
    .validate = swa_validate,
    .alloc_outputs = swa_alloc,
    .reference = swa_reference,
    .policy = dsv4_indices_exact_policy,
    .mask = swa_mask,
    .locate = NULL,
};
