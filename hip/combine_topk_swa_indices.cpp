/* combine_topk_swa_indices.cpp - the prefill index rows
 * [top-k compressed | sliding window | -1 padding] in ONE launch
 * (docs/semantics/indices.md A6.2), bit-exact with ref/indices.c in all three
 * variants.
 *
 * One block per token row.  Thread 0 finds the token's request by binary
 * search over query_start_loc (docs/semantics/indices.md A6.2: qs = qsl[r] - qsl[0]) and derives
 * pos, tk and sw; then the block writes the whole P-wide row, 4 columns per
 * thread as one 16-byte store (P is a multiple of 128, docs/semantics/indices.md A6.2), so every
 * element of the row, the -1 padding included, is written exactly once. */
#include "idx_common.h"

namespace {

using idx::floor_div;
using idx::wrap_i32;

enum { V_TORCH = 0, V_NO_VALIDATE = 1, V_WIDTH_COL0 = 2 };

const char *const variants[] = {"default", "validate_topk=none", "width_guard=col0", NULL};

struct row_info {
    long long rM, pos, tk, sw, g0;
};

__global__ void combine_kernel(const int32_t *__restrict__ topk, long long Wk,
                               const int32_t *__restrict__ qsl, const int32_t *__restrict__ seq_lens,
                               const int32_t *__restrict__ gather_lens, int R, long long P, long long K,
                               long long W, long long c, long long M, long long N, int variant,
                               int32_t *__restrict__ combined, int32_t *__restrict__ lens)
{
    __shared__ row_info s;
    const long long t = blockIdx.x;
    if (threadIdx.x == 0) {
        /* The largest r with qsl[r] - qsl[0] <= t.  The host checked qsl
         * non-decreasing with qsl[R] - qsl[0] = T. */
        const long long base = qsl[0];
        const long long lo = idx::request_of_row(qsl, R, base + t);
        const long long qs = (long long)qsl[lo] - base, qe = (long long)qsl[lo + 1] - base;
        const long long S = seq_lens[lo];
        const long long pos = S - (qe - qs) + (t - qs); /* p0 + (t - qs), p0 = S - L */
        /* K_eff = min(K, Wk) in the Torch function [S4]; K in [S1, S2]. */
        const long long width = variant == V_TORCH ? (K < Wk ? K : Wk) : K;
        long long tk = floor_div(pos + 1, c);
        tk = tk > width ? width : tk;
        tk = tk < 0 ? 0 : tk; /* .clamp_min(0) [S4] */
        long long sw = pos + 1 < W ? pos + 1 : W;
        sw = sw < 0 ? 0 : sw;
        s.rM = (long long)lo * M;
        s.pos = pos;
        s.tk = tk;
        s.sw = sw;
        s.g0 = S - gather_lens[lo];
        lens[t] = wrap_i32(tk + sw);
    }
    __syncthreads();
    const row_info ri = s;
    const int32_t *src = topk + t * Wk;
    int4 *row = reinterpret_cast<int4 *>(combined + t * P);
    /* A 16-byte load of the top-k row needs 16-byte aligned rows. */
    const bool vec_src = (Wk & 3) == 0;
    for (long long q = threadIdx.x; q < P / 4; q += blockDim.x) {
        const long long j0 = 4 * q;
        int32_t v[4], in[4] = {0, 0, 0, 0};
        if (j0 < ri.tk) {
            if (vec_src && j0 + 4 <= Wk) {
                int4 x = *reinterpret_cast<const int4 *>(src + j0);
                in[0] = x.x, in[1] = x.y, in[2] = x.z, in[3] = x.w;
            } else {
                for (int e = 0; e < 4; e++)
                    if (j0 + e < ri.tk) /* width_guard=col0: past the stored row read column 0 [S2] */
                        in[e] = j0 + e < Wk ? src[j0 + e] : src[0];
            }
        }
        for (int e = 0; e < 4; e++) {
            const long long j = j0 + e;
            if (j < ri.tk) {
                const long long val = in[e];
                if (variant == V_NO_VALIDATE)
                    v[e] = wrap_i32(ri.rM + val); /* -1 becomes r*M - 1 [S1] */
                else
                    v[e] = (val >= 0 && val < N) ? wrap_i32(ri.rM + val) : -1;
            } else if (j < ri.tk + ri.sw) {
                /* r*M + N + (pos - sw + 1 + i) - g0, i = j - tk (docs/semantics/indices.md A6.2) */
                v[e] = wrap_i32(ri.rM + N + (ri.pos - ri.sw + 1 + (j - ri.tk)) - ri.g0);
            } else {
                v[e] = -1; /* torch.full(..., -1) [S4] */
            }
        }
        row[q] = make_int4(v[0], v[1], v[2], v[3]);
    }
}

struct combine_shape {
    int topk, qsl, seq, gat, ci, cl;
    int64_t T, Wk, R, P, W, c, K, M, N;
};

int shape_of(const dsv4_hip_call *c, combine_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "topk_indices:int32:2 query_start_loc:int32:1 seq_lens:int32:1 "
                                  "gather_lens:int32:1 -> combined_indices:int32:2 combined_lens:int32:1",
                               {&s->topk, &s->qsl, &s->seq, &s->gat, &s->ci, &s->cl}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "window_size compress_ratio topk M N",
                            {&s->W, &s->c, &s->K, &s->M, &s->N}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->topk], &s->T, &s->Wk);
    s->R = c->in[s->seq].shape[0];
    s->P = c->out[s->ci].shape[1];
    return DSV4_PLUGIN_OK;
}

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

/* What the kernel relies on: the contract of dsv4_combine_check
 * (ref/indices.c) plus the output shapes. */
int check_shape(const dsv4_hip_call *c, const combine_shape &s, char *err, size_t errlen)
{
    if (c->in[s.qsl].shape[0] != s.R + 1 || c->in[s.gat].shape[0] != s.R)
        return FAIL("combine: query_start_loc, seq_lens, gather_lens must be [R+1], [R], [R]");
    if (s.c < 1 || s.W < 0 || s.K < 0 || s.M < 0 || s.N < 0)
        return FAIL("combine: compress_ratio >= 1 and window_size, topk, M, N >= 0 required");
    const int64_t P = (s.K + s.W + 127) / 128 * 128; /* docs/semantics/indices.md A6.2 */
    if (c->out[s.ci].shape[0] != s.T || s.P != P || c->out[s.cl].shape[0] != s.T)
        return FAIL("combine: outputs must be [T, %lld] and [T]", (long long)P);
    if (c->variant == V_NO_VALIDATE && s.K > s.Wk)
        return FAIL("combine: validate_topk=none needs topk (%lld) <= topk_indices width (%lld)",
                    (long long)s.K, (long long)s.Wk);
    if (c->variant == V_WIDTH_COL0 && s.K > 0 && s.Wk == 0)
        return FAIL("combine: width_guard=col0 needs a non-empty topk_indices row");
    if (s.T > 0x7fffffff)
        return FAIL("combine: %lld tokens exceed the grid", (long long)s.T);
    const int32_t *q = (const int32_t *)c->in[s.qsl].data;
    for (int64_t r = 0; r < s.R; r++)
        if (q[r + 1] < q[r])
            return FAIL("combine: query_start_loc[%lld] < query_start_loc[%lld]", (long long)r + 1,
                        (long long)r);
    if ((s.R > 0 ? (int64_t)q[s.R] - q[0] : 0) != s.T)
        return FAIL("combine: query_start_loc does not cover the %lld topk_indices rows", (long long)s.T);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const combine_shape &s, hipStream_t stream)
{
    if (s.T == 0)
        return hipSuccess;
    const int threads = 256;
    hipLaunchKernelGGL(combine_kernel, dim3((unsigned)s.T), dim3(threads), 0, stream,
                       (const int32_t *)c->din[s.topk], (long long)s.Wk, (const int32_t *)c->din[s.qsl],
                       (const int32_t *)c->din[s.seq], (const int32_t *)c->din[s.gat], (int)s.R,
                       (long long)s.P, (long long)s.K, (long long)s.W, (long long)s.c, (long long)s.M,
                       (long long)s.N, c->variant, (int32_t *)c->dout[s.ci], (int32_t *)c->dout[s.cl]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(combine_topk_swa_indices, variants, combine_shape);
