/* common.c - small helpers shared by the op definitions. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

void dsv4_poison(dsv4_tensor *t)
{
    /* 0x7B: as int32 0x7B7B7B7B (2071690107), as float ~1.3e36, as fp8 a large
     * normal: an unwritten element never looks like a plausible result. */
    if (t->data && t->nbytes)
        memset(t->data, 0x7B, t->nbytes);
}

int dsv4_input(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int ndim,
               const dsv4_tensor **out, dsv4_status *st)
{
    const dsv4_tensor *t = dsv4_tensors_get(in, name);
    if (!t)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is missing", name);
    if (t->dtype != dt)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is %s, expected %s", name,
                         dsv4_dtype_name(t->dtype), dsv4_dtype_name(dt));
    if (ndim >= 0 && t->ndim != ndim)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' has %d dims, expected %d", name, t->ndim,
                         ndim);
    *out = t;
    return DSV4_OK;
}

void dsv4_gen_cos_sin(float *cache, int64_t P, int rd, double theta)
{
    for (int64_t p = 0; p < P; p++)
        for (int k = 0; k < rd / 2; k++) {
            double ang = (double)p * pow(theta, -2.0 * k / rd);
            cache[p * rd + k] = (float)cos(ang);
            cache[p * rd + rd / 2 + k] = (float)sin(ang);
        }
}

int dsv4_req_shape_of(const dsv4_params *ps, int64_t max_query, int64_t max_prefix, int broadcast,
                      dsv4_req_shape *rs, dsv4_status *st)
{
    const int64_t *pre;
    rs->R = dsv4_params_list(ps, "query_lens", &rs->qlen);
    int np = dsv4_params_list(ps, "prefix_lens", &pre);
    if (np != 0 && np != rs->R && !(broadcast && np == 1))
        return dsv4_fail(st, DSV4_EINPUT, "prefix_lens has %d entries, query_lens %" PRId64, np, rs->R);
    rs->T = 0;
    for (int64_t r = 0; r < rs->R; r++) {
        rs->prefix[r] = np ? pre[np == 1 ? 0 : r] : 0;
        if (rs->qlen[r] < 0 || rs->prefix[r] < 0 || rs->qlen[r] > max_query || rs->prefix[r] > max_prefix)
            return dsv4_fail(st, DSV4_EINPUT,
                             "request %" PRId64 ": query_lens %" PRId64 " / prefix_lens %" PRId64
                             " out of range [0, %" PRId64 "] / [0, %" PRId64 "]",
                             r, rs->qlen[r], rs->prefix[r], max_query, max_prefix);
        rs->T += rs->qlen[r];
    }
    return DSV4_OK;
}

void dsv4_fill_topk_row(dsv4_rng *rng, int32_t *row, int64_t Wk, int64_t n, int32_t *scratch)
{
    int64_t take = n < Wk ? n : Wk;
    for (int64_t i = 0; i < n; i++)
        scratch[i] = (int32_t)i;
    for (int64_t i = 0; i < take; i++) { /* partial Fisher-Yates */
        int64_t j = dsv4_rng_range(rng, i, n);
        int32_t tmp = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = tmp;
    }
    for (int64_t j = 0; j < Wk; j++)
        row[j] = j < take ? scratch[j] : -1;
}
