/* rocm_sparse_attn_decode.c - sparse MLA decode with sink over the paged
 * fp8_ds_mla caches: ragged lists over the SWA cache (main) and the
 * compressed cache (extra), bf16 out.  Semantics: ref/attention.c
 * (docs/semantics/attention.md A8.1, A8.2, A8.4); arguments, generator and
 * tolerance in ops/attention/attention_common.c. */
#include "attention.h"

static const dsv4_variant decode_variants[] = {
    {"default",
     "gfx950 / NVIDIA: both caches OCP e4m3fn; NaN lanes of K read as 0; ragged main (SWA) + extra "
     "(compressed) lists, valid iff 0 <= slot < pages*B "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     &dsv4_paged_main_ocp},
    {"fp8=fnuz", "gfx942: the SWA (main) cache is FNUZ (is_fnuz_main = platform), the compressed cache OCP "
                 "(docs/semantics/kvcache.md A2.3)",
     &dsv4_paged_main_fnuz},
    {NULL, NULL, NULL},
};

static const dsv4_paged_names decode_names = {"swa_k_cache", "swa_ragged_indices", "swa_ragged_indptr",
                                              "kv_cache", "topk_ragged_indices", "topk_ragged_indptr"};

static const char decode_inputs[] =
    "q                   bfloat16  [T, H, 512] decode queries\n"
    "swa_k_cache         uint8     [pages, 64, 584] fp8_ds_mla SWA cache\n"
    "kv_cache            uint8     [pages, 256/c, 584] fp8_ds_mla compressed cache\n"
    DSV4_ATTN_SINK_INPUT
    "swa_ragged_indices  int32     SWA slots, CSR\n"
    "swa_ragged_indptr   int32     [T+1]\n"
    "topk_ragged_indices int32     compressed slots, CSR\n"
    "topk_ragged_indptr  int32     [T+1]\n";
static const char decode_params[] = DSV4_PAGED_PARAMS;
static const char decode_outputs[] = DSV4_ATTN_OUTPUTS;

DSV4_PAGED_ATTN_OP_CALLBACKS(decode, decode_names, dsv4_attn_args_decode)

const dsv4_op dsv4_op_rocm_sparse_attn_decode = {
    .name = "rocm_sparse_attn_decode",
    .summary = "sparse MLA decode with sink over the paged fp8_ds_mla caches (ragged SWA + top-k lists), bf16 out",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/attention.md A8.1, A8.2, A8.4)",
    DSV4_OP_TABLES(decode),
    .generate = decode_generate,
    .validate = decode_validate,
    .alloc_outputs = decode_alloc,
    .reference = decode_reference,
    .policy = dsv4_attn_op_policy,
    .locate = decode_locate,
    .bound = decode_bound,
    .hint = decode_hint,
};
