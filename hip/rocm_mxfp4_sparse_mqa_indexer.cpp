/* rocm_mxfp4_sparse_mqa_indexer.cpp - a candidate-consuming indexer layer
 * (RocmSparseMQAIndexer.forward [SEED2]; docs/semantics/indexer.md Q6.3):
 * logits of the candidate pool only (ids 0 <= id < ceil(end / C), columns
 * id*C + i below the row end), then the top-k of those columns as
 * positions, -1 padding.
 *
 * Two launches: the logits kernel over the row's compact slots (slot t ->
 * candidate t / C, column id*C + t % C: the gather of
 * build_candidate_gather, no dense pass), then one block per row selecting
 * over the same slots.  Other columns keep the launcher's -inf. */
#include "indexer_logits.h"

namespace {

using namespace idxr;

const char *const variants[] = {"default", NULL};

__global__ void __launch_bounds__(TOPK_THREADS)
    mq_select_kernel(lg_args a, const float *__restrict__ logits, int k, int32_t *__restrict__ topk)
{
    const long long r = blockIdx.x;
    long long req;
    const long long end = row_end(a, r, &req);
    const float *row = logits + r * a.width;
    block_topk(
        [&](long long t, uint32_t *key, int32_t *ix) {
            const long long col = slot_col(a, r, t, end);
            if (col < 0)
                return 0;
            *key = order_key(row[col]);
            *ix = (int32_t)col;
            return 1;
        },
        a.ncand * a.C, k, topk + r * k);
}

struct mq_shape {
    lg_shape l;
    int ti, cand;
    int64_t topk, C;
};

int shape_of(const dsv4_hip_call *c, mq_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = lg_shape_of(c, &s->l, err, errlen)) ||
        (rc = dsv4_hip_tensors(c, "candidate_blocks:int32:2 -> topk_indices:int32:2", {&s->cand, &s->ti}, err,
                               errlen)) ||
        (rc = dsv4_hip_ints(c, "topk candidate_block_size", {&s->topk, &s->C}, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

/* Beyond lg_check: the candidate rows, and no valid id twice (a duplicate
 * is bad input, ref/indexer.c dsv4_idx_candidate_ids). */
int check_shape(const dsv4_hip_call *c, const mq_shape &s, char *err, size_t errlen)
{
    const int rc = lg_check(c, s.l, err, errlen);
    if (rc)
        return rc;
    const dsv4_plugin_tensor *cb = &c->in[s.cand];
    const long long rows = c->out[s.l.logits].shape[0], n = cb->shape[1];
    if (s.topk < 1 || s.topk > 0x7fffffff || c->out[s.ti].shape[0] != rows || c->out[s.ti].shape[1] != s.topk ||
        cb->shape[0] != rows)
        return IFAIL("%s: topk %lld >= 1, topk_indices [rows, topk], candidate_blocks [rows, n] expected", c->op,
                     (long long)s.topk);
    if (s.C < 1 || n * s.C / KT >= 65535)
        return IFAIL("%s: candidate_block_size %lld >= 1 (and the pool within the grid)", c->op, (long long)s.C);
    const int32_t *qsl = (const int32_t *)c->in[s.l.qsl].data, *ctx = (const int32_t *)c->in[s.l.ctx].data;
    const int32_t *re = (const int32_t *)c->in[s.l.re].data, *cd = (const int32_t *)cb->data;
    const long long B = c->in[s.l.ctx].shape[0];
    for (long long r = 0; r < rows; r++) {
        long long b;
        const long long nbe = (host_row_end(qsl, ctx, re, B, r, &b) + s.C - 1) / s.C;
        for (long long i = 0; i < n; i++)
            for (long long j = 0; j < i; j++)
                if (cd[r * n + i] >= 0 && cd[r * n + i] < nbe && cd[r * n + j] == cd[r * n + i])
                    return IFAIL("%s: candidate_blocks row %lld: block %d appears twice", c->op, r, cd[r * n + i]);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const mq_shape &s, hipStream_t stream)
{
    lg_args a = lg_make_args(c, s.l);
    a.cand = (const int32_t *)c->din[s.cand];
    a.ncand = c->in[s.cand].shape[1];
    a.C = s.C;
    a.c_shift = log2_exact(s.C);
    float *logits = (float *)c->dout[s.l.logits];
    hipError_t e = launch_logits(a, logits, a.ncand * a.C, stream);
    if (e != hipSuccess || a.rows == 0)
        return e;
    hipLaunchKernelGGL(mq_select_kernel, dim3((unsigned)a.rows), dim3(TOPK_THREADS), 0, stream, a,
                       (const float *)logits, (int)s.topk, (int32_t *)c->dout[s.ti]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_mxfp4_sparse_mqa_indexer, variants, mq_shape);
