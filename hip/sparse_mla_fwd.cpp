/* sparse_mla_fwd.cpp - aiter's sparse_mla_fwd as the seeds call it: main
 * (SWA) + extra (compressed) paged fp8_dsv4_mla caches, sink in the
 * denominator; the decode contract under aiter's argument names
 * (docs/semantics/attention.md A8.5 [S24]).  Same kernel as rocm_sparse_attn_decode. */
#include "paged_attn.h"

namespace {

const pattn::names aiter_names = {"kv_buffer",       "kv_indices",       "kv_indptr",
                                  "extra_kv_buffer", "extra_kv_indices", "extra_kv_indptr"};

} // namespace

dsv4_hip_kernel dsv4_hip_sparse_mla_fwd = {"sparse_mla_fwd", pattn::variants, pattn::check_named<aiter_names>,
                                           pattn::launch_named<aiter_names>};
