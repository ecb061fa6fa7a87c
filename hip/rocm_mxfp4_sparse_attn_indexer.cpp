/* rocm_mxfp4_sparse_attn_indexer.cpp - the source indexer layer
 * (RocmSparseAttnIndexer.forward_hip [SEED2]; docs/semantics/indexer.md Q6.2-Q6.4):
 * dense paged MXFP4 logits, the top-k positions of [0, row end) with -1
 * padding, and with candidate_block_size C > 0 the candidate pool: block
 * scores (per-C max, NaN propagating, the newest block +inf, blocks past
 * the end -inf) and the top candidate_topk_blocks blocks of
 * [0, ceil(end / C)), a selected -inf written as -1.
 *
 * Two launches: the logits kernel (indexer_logits.h), then one block per
 * row that selects the top-k, writes the row's block scores and selects
 * the candidate blocks from them (the block's own global writes, visible
 * after its barrier). */
#include "indexer_logits.h"

namespace {

using namespace idxr;

const char *const variants[] = {"default", NULL};

__global__ void __launch_bounds__(TOPK_THREADS)
    sa_select_kernel(lg_args a, const float *logits, int k, int32_t *__restrict__ topk, long long C, long long nblocks,
                     int nb, float *bs, int32_t *__restrict__ cb)
{
    const long long r = blockIdx.x;
    long long req;
    const long long end = row_end(a, r, &req);
    const float *row = logits + r * a.width;
    block_topk(
        [&](long long t, uint32_t *key, int32_t *ix) {
            *key = order_key(row[t]);
            *ix = (int32_t)t;
            return 1;
        },
        end, k, topk + r * k);
    if (C == 0)
        return;
    float *brow = bs + r * nblocks;
    for (long long i = threadIdx.x; i < nblocks; i += blockDim.x) {
        /* calc_block_scores (docs/semantics/indexer.md Q6.2 step 4): max below end, NaN propagates */
        float m = -__int_as_float(0x7F800000);
        for (long long j = i * C; j < (i + 1) * C && j < end && m == m; j++)
            if (row[j] != row[j] || row[j] > m)
                m = row[j];
        if (end > 0 && i == (end - 1) / C)
            m = __int_as_float(0x7F800000); /* the newest block is pinned */
        brow[i] = m;
    }
    __syncthreads();
    /* _topk(block_scores, block_ends): [0, ceil(end/C)), -inf -> -1 (docs/semantics/indexer.md Q6.4) */
    block_topk(
        [&](long long t, uint32_t *key, int32_t *ix) {
            const float v = brow[t];
            *key = order_key(v);
            *ix = (int32_t)t;
            return v != -__int_as_float(0x7F800000) ? 1 : 0;
        },
        (end + C - 1) / C, nb, cb + r * nb);
}

struct sa_shape {
    lg_shape l;
    int ti, bs, cb;
    int64_t topk, C, nb;
};

int shape_of(const dsv4_hip_call *c, sa_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = lg_shape_of(c, &s->l, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "topk_indices", DSV4_PLUGIN_INT32, 2, &s->ti, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "topk candidate_block_size candidate_topk_blocks", {&s->topk, &s->C, &s->nb}, err,
                            errlen)))
        return rc;
    s->bs = s->cb = -1;
    if (s->C > 0 && (rc = dsv4_hip_tensors(c, "-> block_scores:float32:2 candidate_blocks:int32:2", {&s->bs, &s->cb},
                                           err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

int check_shape(const dsv4_hip_call *c, const sa_shape &s, char *err, size_t errlen)
{
    const int rc = lg_check(c, s.l, err, errlen);
    if (rc)
        return rc;
    const long long rows = c->out[s.l.logits].shape[0], width = c->out[s.l.logits].shape[1];
    if (s.topk < 1 || s.topk > 0x7fffffff || c->out[s.ti].shape[0] != rows || c->out[s.ti].shape[1] != s.topk)
        return IFAIL("%s: topk %lld >= 1 and topk_indices [rows, topk] expected", c->op, (long long)s.topk);
    if (s.C < 0 || (s.C > 0 && (s.nb < 1 || s.nb > 0x7fffffff)))
        return IFAIL("%s: candidate_block_size %lld >= 0, candidate_topk_blocks %lld >= 1", c->op, (long long)s.C,
                     (long long)s.nb);
    if (s.C > 0 && (c->out[s.bs].shape[0] != rows || c->out[s.bs].shape[1] != (width + s.C - 1) / s.C ||
                    c->out[s.cb].shape[0] != rows || c->out[s.cb].shape[1] != s.nb))
        return IFAIL("%s: block_scores [rows, ceil(width / C)] and candidate_blocks [rows, %lld] expected", c->op,
                     (long long)s.nb);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const sa_shape &s, hipStream_t stream)
{
    const lg_args a = lg_make_args(c, s.l);
    float *logits = (float *)c->dout[s.l.logits];
    hipError_t e = launch_logits(a, logits, a.width, stream);
    if (e != hipSuccess || a.rows == 0)
        return e;
    const long long nblocks = s.C > 0 ? (a.width + s.C - 1) / s.C : 0;
    hipLaunchKernelGGL(sa_select_kernel, dim3((unsigned)a.rows), dim3(TOPK_THREADS), 0, stream, a, (const float *)logits,
                       (int)s.topk, (int32_t *)c->dout[s.ti], (long long)s.C, nblocks, (int)s.nb,
                       s.C > 0 ? (float *)c->dout[s.bs] : (float *)NULL,
                       s.C > 0 ? (int32_t *)c->dout[s.cb] : (int32_t *)NULL);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_mxfp4_sparse_attn_indexer, variants, sa_shape);
