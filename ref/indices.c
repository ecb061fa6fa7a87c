/* indices.c - index builders; see indices.h.  Every rule cites
 * ../shared/spec/sparse_attention.md (the "spec") and its sources. */
#include "indices.h"

#include <inttypes.h>

/* Torch's .to(int32) (and int32 tensor arithmetic) wraps modulo 2^32; do the
 * same without signed-overflow UB. */
static int32_t wrap_i32(int64_t v)
{
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) + INT32_MIN;
}

/* Torch integer `//` is floor division (spec 1: "floor division plus
 * clamp_min(0)" [S4]); C's `/` truncates toward zero. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int64_t dsv4_combine_width(int64_t topk, int64_t window_size)
{
    const int64_t align = DSV4_SPARSE_PREFILL_TOPK_ALIGNMENT;
    return (topk + window_size + align - 1) / align * align;
}

int dsv4_combine_check(const dsv4_combine_args *a, dsv4_combine_variant v, dsv4_status *st)
{
    if ((unsigned)v >= DSV4_COMBINE_VARIANT_COUNT)
        return dsv4_fail(st, DSV4_EINPUT, "unknown combine variant %d", (int)v);
    /* Torch's floor division by zero raises; the fused Triton [S5] clamps to
     * 1, which is a different contract: reject here. */
    if (a->compress_ratio < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": must be >= 1",
                         a->compress_ratio);
    if (a->window_size < 0 || a->topk < 0 || a->M < 0 || a->N < 0)
        return dsv4_fail(st, DSV4_EINPUT,
                         "window_size, topk, M and N must be >= 0 (got %" PRId64 ", %" PRId64
                         ", %" PRId64 ", %" PRId64 ")",
                         a->window_size, a->topk, a->M, a->N);
    if (a->topk_width < 0 || a->num_tokens < 0 || a->num_reqs < 0)
        return dsv4_fail(st, DSV4_EINPUT, "negative tensor size");
    if (v == DSV4_COMBINE_NO_VALIDATE && a->topk > a->topk_width)
        return dsv4_fail(st, DSV4_EINPUT,
                         "validate_topk=none needs topk (%" PRId64 ") <= topk_indices width (%" PRId64
                         "): the kernel reads past the row otherwise",
                         a->topk, a->topk_width);
    if (v == DSV4_COMBINE_WIDTH_COL0 && a->topk > 0 && a->topk_width == 0)
        return dsv4_fail(st, DSV4_EINPUT, "width_guard=col0 needs a non-empty topk_indices row");
    /* repeat_interleave needs non-negative query lengths summing to T. */
    const int32_t *qsl = a->query_start_loc;
    for (int64_t r = 0; r < a->num_reqs; r++)
        if (qsl[r + 1] < qsl[r])
            return dsv4_fail(st, DSV4_EINPUT,
                             "query_start_loc[%" PRId64 "] = %d < query_start_loc[%" PRId64
                             "] = %d: query lengths must be >= 0",
                             r + 1, qsl[r + 1], r, qsl[r]);
    int64_t covered = a->num_reqs > 0 ? (int64_t)qsl[a->num_reqs] - qsl[0] : 0;
    if (covered != a->num_tokens)
        return dsv4_fail(st, DSV4_EINPUT,
                         "query_start_loc covers %" PRId64 " tokens but topk_indices has %" PRId64
                         " rows",
                         covered, a->num_tokens);
    return DSV4_OK;
}

/* One request's rows.  Spec 6.2: qs/qe relative to qsl[0]; positions
 * p0 + (t - qs) with p0 = S - L; g0 = S - G. */
static void combine_request(const dsv4_combine_args *a, dsv4_combine_variant v, int64_t r,
                            int64_t P, int32_t *combined, int32_t *lens)
{
    const int32_t *qsl = a->query_start_loc;
    const int64_t qs = (int64_t)qsl[r] - qsl[0], qe = (int64_t)qsl[r + 1] - qsl[0];
    const int64_t L = qe - qs, S = a->seq_lens[r], g0 = S - a->gather_lens[r];
    const int64_t rM = r * a->M;
    /* logical_topk_width = min(topk, Wk) in the Torch function [S4]; the
     * older Triton versions use topk itself [S1, S2]. */
    const int64_t width = v == DSV4_COMBINE_TORCH ? (a->topk < a->topk_width ? a->topk : a->topk_width)
                                                  : a->topk;
    for (int64_t t = qs; t < qe; t++) {
        const int64_t pos = S - L + (t - qs);
        int32_t *row = combined + t * P;
        const int32_t *src = a->topk_indices + t * a->topk_width;
        int64_t tk = floor_div(pos + 1, a->compress_ratio);
        if (tk > width)
            tk = width;
        if (tk < 0)
            tk = 0; /* .clamp_min(0) [S4] */
        int64_t sw = pos + 1 < a->window_size ? pos + 1 : a->window_size;
        if (sw < 0)
            sw = 0;
        for (int64_t j = 0; j < P; j++)
            row[j] = -1; /* torch.full(..., -1) [S4] */
        for (int64_t j = 0; j < tk; j++) {
            /* width_guard=col0: columns past the stored row read column 0 [S2]. */
            int64_t val = j < a->topk_width ? src[j] : src[0];
            if (v == DSV4_COMBINE_NO_VALIDATE)
                row[j] = wrap_i32(rM + val); /* no check: -1 becomes r*M - 1 [S1] */
            else
                row[j] = (val >= 0 && val < a->N) ? wrap_i32(rM + val) : -1;
        }
        /* Window part, relative to the gathered SWA buffer at offset N:
         * r*M + N + (pos - sw + 1 + i) - g0 (spec 6.2). */
        for (int64_t i = 0; i < sw && tk + i < P; i++)
            row[tk + i] = wrap_i32(rM + a->N + (pos - sw + 1 + i) - g0);
        lens[t] = wrap_i32(tk + sw);
    }
}

int dsv4_ref_combine_topk_swa_indices(const dsv4_combine_args *a, dsv4_combine_variant v,
                                      int32_t *combined, int32_t *combined_lens,
                                      dsv4_status *st)
{
    int rc = dsv4_combine_check(a, v, st);
    if (rc)
        return rc;
    const int64_t P = dsv4_combine_width(a->topk, a->window_size);
    for (int64_t r = 0; r < a->num_reqs; r++)
        combine_request(a, v, r, P, combined, combined_lens);
    return DSV4_OK;
}
