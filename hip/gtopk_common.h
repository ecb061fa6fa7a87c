/* gtopk_common.h - what the two global top-k kernels share
 * (compute_global_topk_indices_and_lens.cpp, dense, docs/semantics/indices.md
 * A5.6; compute_global_topk_ragged_indices_and_indptr.cpp, the ROCm C4A decode
 * CSR form, A5.7): the device view of the inputs, a block sum, and the
 * host-side shape checks.  Bit-exact with ref/indices.c. */
#ifndef DSV4_HIP_GTOPK_COMMON_H
#define DSV4_HIP_GTOPK_COMMON_H

#include "idx_common.h"

namespace gtopk {

using idx::global_slot;
using idx::wrap_i32;

enum { V_BASE = 0, V_CHECKED = 1 };
enum { ROW_THREADS = 256 };

struct gtopk_dev {
    const int32_t *topk;
    long long K;
    const int32_t *t2r;
    const uint8_t *valid;
    const int32_t *bt;
    long long bt_rows, bt_cols;
    uint32_t bc;
};

/* Block sum through the scan (every thread gets it). */
__device__ inline int block_sum(int x)
{
    int total;
    (void)idx::block_exclusive_scan(x, &total);
    return total;
}

/* ---- host side ---- */

struct gtopk_shape {
    int topk, t2r, bt, valid;
    int64_t T, K, bc;
    gtopk_dev dev;
};

inline int shape_of(const dsv4_hip_call *c, gtopk_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "topk_indices:int32:2 token_to_req_indices:int32:1 block_table:int32:2 "
                                  "is_valid_token:uint8:1",
                               {&s->topk, &s->t2r, &s->bt, &s->valid}, err, errlen)) ||
        (rc = dsv4_hip_int(c, "block_size", &s->bc, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->topk], &s->T, &s->K);
    const int64_t *bts = c->in[s->bt].shape;
    s->dev = gtopk_dev{c->din ? (const int32_t *)c->din[s->topk] : NULL, (long long)s->K,
                       c->din ? (const int32_t *)c->din[s->t2r] : NULL,
                       c->din ? (const uint8_t *)c->din[s->valid] : NULL,
                       c->din ? (const int32_t *)c->din[s->bt] : NULL, (long long)bts[0], (long long)bts[1],
                       (uint32_t)s->bc};
    return DSV4_PLUGIN_OK;
}

/* What the kernels rely on: dsv4_gtopk_check (ref/indices.c) — under the
 * base variant every read of the block table in range — plus the shapes. */
inline int check_common(const dsv4_hip_call *c, gtopk_shape *s, bool ragged, char *err, size_t errlen)
{
    int rc = shape_of(c, s, err, errlen);
    if (rc)
        return rc;
    if (s->bc < 1 || s->bc > INT32_MAX)
        return IDX_FAIL("gtopk: block_size = %lld: must be in [1, 2^31)", (long long)s->bc);
    if (c->in[s->t2r].shape[0] != s->T || c->in[s->valid].shape[0] != s->T)
        return IDX_FAIL("gtopk: token_to_req_indices and is_valid_token must have %lld elements", (long long)s->T);
    if (s->T > 0x7fffffff)
        return IDX_FAIL("gtopk: %lld tokens exceed the grid", (long long)s->T);
    const int32_t *topk = (const int32_t *)c->in[s->topk].data, *t2r = (const int32_t *)c->in[s->t2r].data;
    const uint8_t *valid = (const uint8_t *)c->in[s->valid].data;
    const int64_t rows = c->in[s->bt].shape[0], cols = c->in[s->bt].shape[1];
    for (int64_t t = 0; t < s->T; t++) {
        if (valid[t] > 1)
            return IDX_FAIL("gtopk: is_valid_token[%lld] = %u: must be 0 or 1", (long long)t, valid[t]);
        if (c->variant == V_CHECKED && !ragged)
            continue; /* [S26]: every read is bounds-checked on the device */
        const int64_t n = ragged && !valid[t] ? 0 : s->K, r = t2r[t];
        for (int64_t j = 0; j < n; j++) {
            const int32_t v = topk[t * s->K + j];
            if (v >= 0 && (r < 0 || r >= rows || (int64_t)((uint32_t)v / (uint32_t)s->bc) >= cols))
                return IDX_FAIL("gtopk: topk_indices[%lld, %lld] = %d (request %lld) reads outside the "
                                "block_table [%lld, %lld]",
                                (long long)t, (long long)j, v, (long long)r, (long long)rows, (long long)cols);
        }
    }
    return DSV4_PLUGIN_OK;
}

} // namespace gtopk

#endif
