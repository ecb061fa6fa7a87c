/* copy_ragged_to_graph_buffers.c - copy a step's CSR metadata into the
 * persistent CUDA-graph buffers (the seeds' _copy_ragged_to_graph_buffers):
 * stable base pointer, indptr bounds the reads.  Semantics: ref/indices.c
 * (docs/semantics/indices.md A5.8). */
#include <stdlib.h>
#include <string.h>

#include "indices.h"

/* What a variant changes: on gfx950 the returned indices view is trimmed to
 * the source's entries. */
typedef struct gcopy_rule {
    int gfx950;
} gcopy_rule;

static const gcopy_rule gcopy_generic = {0};
static const gcopy_rule gcopy_on_gfx950 = {1};

static const dsv4_variant gcopy_variants[] = {
    {"default",
     "indices view = buffer[:max(num_rows * max_entries_per_row, 1)] "
     "(vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py [SEED1])",
     &gcopy_generic},
    {"arch=gfx950", "_ON_GFX950: the view is trimmed to max(source_entries, 1), same base pointer ([SEED1])",
     &gcopy_on_gfx950},
    {NULL, NULL, NULL},
};

static const char gcopy_params[] =
    "    num_rows            int   required  rows of this step (num_decode_tokens)\n"
    "    max_entries_per_row int   required  entries per row the buffer is sized for (K or W)\n"
    "gen source_rows         int   = -1      generator: rows of the source CSR; -1: num_rows\n"
    "gen source_entries      int   = -1      generator: numel of the source flat buffer; -1: source_rows * "
        "max_entries_per_row\n"
    "gen indices_capacity    int   = -1      generator: persistent indices buffer size; -1: 2 * num_rows * "
        "max_entries_per_row + 7\n"
    "gen indptr_capacity     int   = -1      generator: persistent indptr buffer size; -1: 2 * num_rows + 5\n"
    "gen empty_frac          float = 0       generator: fraction of empty source rows\n";

static const char gcopy_inputs[] =
    "ragged_indices       int32  [E] source flat indices (only indptr[end] meaningful)\n"
    "ragged_indptr        int32  [source_rows + 1] source row offsets\n"
    "stale_indices_buffer int32  [cap] persistent indices buffer before the copy\n"
    "stale_indptr_buffer  int32  [cap2] persistent indptr buffer before the copy\n";

static const char gcopy_outputs[] =
    "ragged_indices_buffer int32  [cap] in/out: the source copied to the front, the rest stale\n"
    "ragged_indptr_buffer  int32  [cap2] in/out: indptr copied to [0, num_rows+1)\n"
    "view_lens             int64  [2] numel of the returned indices view and indptr view\n";

/* A generator size parameter: its value, or dflt where it is -1. */
static int64_t param_or(const dsv4_params *ps, const char *name, int64_t dflt)
{
    int64_t v = dsv4_params_int(ps, name);
    return v < 0 ? dflt : v;
}

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
    const gcopy_rule *rule = c->rule;
    const dsv4_tensor *ri, *rp;
    int rc;
    if ((rc = dsv4_indices_input_1d(in, "ragged_indices", DSV4_I32, -1, &ri, st)) ||
        (rc = dsv4_indices_input_1d(in, "ragged_indptr", DSV4_I32, -1, &rp, st)) ||
        (rc = dsv4_indices_input_1d(in, "stale_indices_buffer", DSV4_I32, -1, sb, st)) ||
        (rc = dsv4_indices_input_1d(in, "stale_indptr_buffer", DSV4_I32, -1, sp, st)))
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
    a->gfx950 = rule->gfx950;
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
    /* In/out: the persistent buffers keep what the copy does not cover. */
    int64_t two = 2;
    if ((rc = dsv4_indices_add_inout(out, "ragged_indices_buffer", sb, st)) ||
        (rc = dsv4_indices_add_inout(out, "ragged_indptr_buffer", sp, st)))
        return rc;
    return dsv4_indices_add_output(out, "view_lens", DSV4_I64, 1, &two, st);
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
    .source = "vllm-project/vllm:vllm/models/deepseek_v41/amd/rocm.py ([SEED1] "
              "_copy_ragged_to_graph_buffers; docs/semantics/indices.md A5.8)",
    DSV4_OP_TABLES(gcopy),
    .generate = gcopy_generate,
    .validate = gcopy_validate,
    .alloc_outputs = gcopy_alloc,
    .reference = gcopy_reference,
    .policy = dsv4_indices_exact_policy,
    .mask = NULL,
    .locate = NULL,
};
