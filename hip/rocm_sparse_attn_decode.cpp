/* rocm_sparse_attn_decode.cpp - sparse MLA decode with sink over the paged
 * fp8_ds_mla caches: ragged SWA (main) + top-k compressed (extra) lists,
 * the 584-byte records decoded inside the kernel (docs/semantics/kvcache.md
 * A2.1, A4; docs/semantics/attention.md A8.4 [S9]).  One launch, single pass
 * over main then extra (the non-gfx942/950 form of A8.4); kernel and host
 * side in sparse_attn.h and paged_attn.h. */
#include "paged_attn.h"

namespace {

const pattn::names decode_names = {"swa_k_cache", "swa_ragged_indices", "swa_ragged_indptr",
                                   "kv_cache",    "topk_ragged_indices", "topk_ragged_indptr"};

} // namespace

dsv4_hip_kernel dsv4_hip_rocm_sparse_attn_decode = {"rocm_sparse_attn_decode", pattn::variants,
                                                    pattn::check_named<decode_names>,
                                                    pattn::launch_named<decode_names>};
