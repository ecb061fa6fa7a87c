/* get_compressed_slot_mapping.c - the compressed-cache slot of every token
 * that closes a compressed entry, with context parallelism.  Semantics:
 * ref/indices.c (docs/semantics/indices.md A5.4). */
#include <inttypes.h>
#include <string.h>

#include "indices.h"

/* One reading; context parallelism is a parameter, not a variant. */
static const dsv4_variant cslot_variants[] = {
    {"default",
     "_compressed_slot_mapping_kernel: the whole buffer filled with -1, then for (pos + 1) % c == 0 the slot "
     "block_table[r, e // (B W)] B + offset of entry e = pos // c in this rank's share of the virtual page "
     "(W = cp_world_size ranks taking cp_interleave entries in turn) "
     "(vllm-project/vllm:vllm/v1/attention/backends/mla/compressor_utils.py@0ff8df7bef328b26f94c678c5e7bffb1d2cbc213)",
     NULL},
    {NULL, NULL, NULL},
};

static const char cslot_params[] =
    "    compress_ratio int = 4   c: one compressed entry per c positions (4: C4, 128: C128)\n"
    "    block_size     int = -1  compressed page size Bc; -1: storage_block_size 256 / c\n"
    "    cp_world_size  int = 1   context-parallel ranks\n"
    "    cp_rank        int = 0   this rank\n"
    "    cp_interleave  int = 1   cp_kv_cache_interleave_size: entries a rank takes in turn\n"
    "    pad_tokens     int = 0   output entries past the batch (a CUDA-graph-padded buffer)\n"
    DSV4_REQ_SHAPE_PARAMS
    DSV4_INDICES_BT_PAD_PARAM;

static const char cslot_inputs[] =
    "query_start_loc int32  [R+1] base 0\n"
    DSV4_INDICES_SEQ_LENS_INPUT
    DSV4_INDICES_BLOCK_TABLE_INPUT;

static const char cslot_outputs[] =
    "slot_mapping int64  [T + pad_tokens] slot or -1\n";

static int cslot_resolve(dsv4_params *ps, dsv4_status *st)
{
    const int64_t c = dsv4_params_int(ps, "compress_ratio");
    if (c < 1 || c > 256)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be in [1, 256]", c);
    return dsv4_indices_default_to(ps, "block_size", 256 / c, st);
}

/* The pages a request needs: ceil(ceil(S / c) / (Bc W)) virtual pages
 * (dsv4_indices_gen_paged_batch sizes the table by S // ratio, so ask it
 * for ratio c * W, which covers the virtual page). */
static int cslot_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_indices_gen_params gp;
    int rc = dsv4_indices_gen_params_of(c->params, &gp, st);
    if (rc)
        return rc;
    if (gp.block_size < 1 || gp.cp_world_size < 1)
        return dsv4_fail(st, DSV4_EINPUT, "block_size and cp_world_size must be >= 1");
    /* The batch generator also makes token_to_req_indices and
     * is_valid_token, which this op does not take: keep only its inputs. */
    dsv4_tensors batch = {0};
    int64_t width;
    const int64_t virtual_page = gp.compress_ratio * gp.block_size * gp.cp_world_size;
    rc = dsv4_indices_gen_paged_batch(c, &gp.rs, 1, 1, virtual_page, &batch, &width, st);
    for (const dsv4_io_spec *io = dsv4_op_inputs(&dsv4_op_get_compressed_slot_mapping); !rc && io->name; io++) {
        const dsv4_tensor *src = dsv4_tensors_get(&batch, io->name);
        dsv4_tensor *dst;
        if (!(rc = dsv4_tensors_add(in, io->name, src->dtype, src->ndim, src->shape, &dst, st)))
            memcpy(dst->data, src->data, src->nbytes);
    }
    dsv4_tensors_free(&batch);
    return rc;
}

static int cslot_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_cslot_args *a, dsv4_status *st)
{
    int64_t bt_rows;
    int rc;
    if ((rc = dsv4_indices_request_inputs(in, &a->query_start_loc, &a->seq_lens, &a->num_reqs, st)) ||
        (rc = dsv4_indices_block_table(in, &a->block_table, &bt_rows, &a->bt_cols, st)))
        return rc;
    if (bt_rows != a->num_reqs)
        return dsv4_fail(st, DSV4_EINPUT, "block_table has %" PRId64 " rows, seq_lens %" PRId64
                         " requests (the kernel runs one program per block-table row)", bt_rows, a->num_reqs);
    const int64_t pad = dsv4_params_int(c->params, "pad_tokens");
    const int32_t *q = a->query_start_loc;
    if (pad < 0 || q[0] != 0)
        return dsv4_fail(st, DSV4_EINPUT, "pad_tokens >= 0 and query_start_loc[0] = 0 (got %" PRId64 ", %d)", pad,
                         q[0]);
    a->out_len = q[a->num_reqs] + pad;
    a->compress_ratio = dsv4_params_int(c->params, "compress_ratio");
    a->block_size = dsv4_params_int(c->params, "block_size");
    a->cp_world_size = dsv4_params_int(c->params, "cp_world_size");
    a->cp_rank = dsv4_params_int(c->params, "cp_rank");
    a->cp_interleave = dsv4_params_int(c->params, "cp_interleave");
    return DSV4_OK;
}

DSV4_VALIDATE_VIA_ARGS(cslot_validate, dsv4_cslot_args, cslot_args, dsv4_cslot_check)

/* Poisoned: the op itself fills the whole buffer with -1 first. */
static int cslot_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_cslot_args a;
    int rc = cslot_args(c, in, &a, st);
    return rc ? rc : dsv4_indices_add_output(out, "slot_mapping", DSV4_I64, 1, &a.out_len, st);
}

static int cslot_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_cslot_args a;
    int rc = cslot_args(c, in, &a, st);
    return rc ? rc : dsv4_ref_get_compressed_slot_mapping(&a, dsv4_tensors_find(out, "slot_mapping")->data, st);
}

const dsv4_op dsv4_op_get_compressed_slot_mapping = {
    .name = "get_compressed_slot_mapping",
    .summary = "compressed-cache slot of every token closing a compressed entry, -1 elsewhere (context parallel)",
    .source = "vllm-project/vllm:vllm/v1/attention/backends/mla/compressor_utils.py@0ff8df7b "
              "(docs/semantics/indices.md A5.4)",
    DSV4_OP_TABLES(cslot),
    .resolve = cslot_resolve,
    .generate = cslot_generate,
    .validate = cslot_validate,
    .alloc_outputs = cslot_alloc,
    .reference = cslot_reference,
    .policy = dsv4_indices_exact_policy,
};
