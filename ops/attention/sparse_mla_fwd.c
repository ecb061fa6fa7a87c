/* sparse_mla_fwd.c - aiter's Triton sparse MLA with sink over a main (SWA)
 * and an extra (compressed) paged cache, as the seed's aiter decode and
 * prefill call it: the same math as rocm_sparse_attn_decode under aiter's
 * argument names.  Semantics: ref/attention.c (docs/semantics/attention.md
 * A8.5); arguments, generator and tolerance in
 * ops/attention/attention_common.c. */
#include "attention.h"

static const dsv4_variant aiter_variants[] = {
    {"default",
     "aiter Triton sparse_mla_fwd as the seed calls it: SWA window as the main segment, top-k compressed "
     "tokens as the extra one, sink in the denominator; same math as rocm_sparse_attn_decode "
     "(ROCm/aiter:aiter/ops/triton/attention/sparse_mla.py@013f408ebe8491e80ddab1fbab4c3dbcbc98bd74)",
     &dsv4_paged_main_ocp},
    {"fp8=fnuz", "gfx942: fp8 read in the arch-native encoding (FNUZ) for the main cache "
                 "(docs/semantics/attention.md A8.5 [S24])",
     &dsv4_paged_main_fnuz},
    {NULL, NULL, NULL},
};

static const dsv4_paged_names aiter_names = {"kv_buffer", "kv_indices", "kv_indptr",
                                             "extra_kv_buffer", "extra_kv_indices", "extra_kv_indptr"};

static const char aiter_inputs[] =
    "q                bfloat16  [T, H, 512] queries\n"
    "kv_buffer        uint8     [pages, 64, 584] fp8_dsv4_mla SWA cache (main)\n"
    "extra_kv_buffer  uint8     [pages, 256/c, 584] compressed cache (extra)\n"
    DSV4_ATTN_SINK_INPUT
    "kv_indices       int32     main slots, CSR\n"
    "kv_indptr        int32     [T+1]\n"
    "extra_kv_indices int32     extra slots, CSR\n"
    "extra_kv_indptr  int32     [T+1]\n";
static const char aiter_params[] = DSV4_PAGED_PARAMS;
static const char aiter_outputs[] = DSV4_ATTN_OUTPUTS;

DSV4_PAGED_ATTN_OP_CALLBACKS(aiter, aiter_names, dsv4_attn_args_sparse_mla)

const dsv4_op dsv4_op_sparse_mla_fwd = {
    .name = "sparse_mla_fwd",
    .summary = "aiter Triton sparse MLA with sink, main + extra paged caches (the seed's aiter decode/prefill)",
    .source = "ROCm/aiter:aiter/ops/triton/attention/sparse_mla.py@013f408ebe8491e80ddab1fbab4c3dbcbc98bd74 "
              "(docs/semantics/attention.md A8.5)",
    DSV4_OP_TABLES(aiter),
    .generate = aiter_generate,
    .validate = aiter_validate,
    .alloc_outputs = aiter_alloc,
    .reference = aiter_reference,
    .policy = dsv4_attn_op_policy,
    .locate = aiter_locate,
    .bound = aiter_bound,
    .hint = aiter_hint,
};
