/* compute_global_topk_indices_and_lens.cpp - local top-k compressed
 * indices -> global cache slots through the block table
 * (docs/semantics/indices.md A5.6, both variants), bit-exact with
 * ref/indices.c.
 *
 * ONE launch, one 256-thread block per token row.  Base variant: column j ->
 * column j with 16-byte loads and stores where the row width allows, lens by
 * a block sum.  bounds=checked [S26]: survivors compacted left in column
 * order by a block scan (idx::block_compact), then -1 up to K. */
#include "gtopk_common.h"

namespace {

using namespace gtopk;

const char *const dense_variants[] = {"default", "bounds=checked", NULL};
enum { UNROLL = 2 };

__global__ void __launch_bounds__(ROW_THREADS)
    dense_kernel(gtopk_dev a, int variant, int32_t *__restrict__ global, int32_t *__restrict__ lens)
{
    const long long t = blockIdx.x, K = a.K;
    const int32_t *src = a.topk + t * K;
    int32_t *dst = global + t * K;
    const long long r = a.t2r[t];
    int count;
    if (variant == V_BASE) {
        /* Column j -> column j, -1 for v < 0 (docs/semantics/indices.md A5.6 base [S1]); the host
         * checked that every v >= 0 reads inside the block table. */
        int mine = 0;
        if ((K & 3) == 0) { /* 16-byte aligned rows */
            const int4 *s4 = reinterpret_cast<const int4 *>(src);
            int4 *d4 = reinterpret_cast<int4 *>(dst);
            /* UNROLL 16-byte loads in flight per thread before any store
             * (the struct's pointers carry no __restrict__, so the
             * compiler would not hoist them past the stores itself). */
            const long long nq = K / 4;
            for (long long q0 = threadIdx.x; q0 < nq; q0 += UNROLL * (long long)blockDim.x) {
                int4 x[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    const long long q = q0 + u * (long long)blockDim.x;
                    x[u] = q < nq ? s4[q] : make_int4(-1, -1, -1, -1);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    const long long q = q0 + u * (long long)blockDim.x;
                    int32_t v[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
                    for (int e = 0; e < 4; e++) {
                        mine += v[e] >= 0;
                        v[e] = v[e] >= 0 ? global_slot(a.bt, a.bt_cols, r, v[e], a.bc) : -1;
                    }
                    if (q < nq)
                        d4[q] = make_int4(v[0], v[1], v[2], v[3]);
                }
            }
        } else {
            for (long long j = threadIdx.x; j < K; j += blockDim.x) {
                const int32_t v = src[j];
                mine += v >= 0;
                dst[j] = v >= 0 ? global_slot(a.bt, a.bt_cols, r, v, a.bc) : -1;
            }
        }
        count = block_sum(mine);
    } else {
        /* [S26]: a request outside [0, rows) gives a -1 row and lens 0;
         * survivors (v >= 0, v // Bc < shape[1]) compacted left. */
        const bool req_ok = r >= 0 && r < a.bt_rows;
        count = 0;
        if (req_ok) {
            const gtopk_dev &aa = a;
            count = idx::block_compact(
                [&](long long j, int32_t *out) {
                    const int32_t v = src[j];
                    if (v < 0 || (long long)((uint32_t)v / aa.bc) >= aa.bt_cols)
                        return 0;
                    *out = global_slot(aa.bt, aa.bt_cols, r, v, aa.bc);
                    return 1;
                },
                K, dst);
        }
        for (long long j = count + threadIdx.x; j < K; j += blockDim.x)
            dst[j] = -1;
    }
    /* lens = is_valid_token ? count : 0 (docs/semantics/indices.md A5.6). */
    if (threadIdx.x == 0)
        lens[t] = a.valid[t] ? count : 0;
}

int dense_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gtopk_shape s;
    int rc = check_common(c, &s, false, err, errlen);
    if (rc)
        return rc;
    int g, l;
    if ((rc = dsv4_hip_tensors(c, "-> global_topk_indices:int32:2 topk_lens:int32:1", {&g, &l}, err, errlen)))
        return rc;
    if (c->out[g].shape[0] != s.T || c->out[g].shape[1] != s.K || c->out[l].shape[0] != s.T)
        return IDX_FAIL("gtopk: outputs must be [T, K] and [T]");
    return DSV4_PLUGIN_OK;
}

hipError_t dense_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    gtopk_shape s;
    char err[256];
    int g, l;
    if (shape_of(c, &s, err, sizeof err) ||
        dsv4_hip_tensor(c, 1, "global_topk_indices", DSV4_PLUGIN_INT32, 2, &g, err, sizeof err) ||
        dsv4_hip_tensor(c, 1, "topk_lens", DSV4_PLUGIN_INT32, 1, &l, err, sizeof err))
        return hipErrorInvalidValue;
    if (s.T == 0)
        return hipSuccess;
    hipLaunchKernelGGL(dense_kernel, dim3((unsigned)s.T), dim3(ROW_THREADS), 0, stream, s.dev, c->variant,
                       (int32_t *)c->dout[g], (int32_t *)c->dout[l]);
    return hipGetLastError();
}

} // namespace

/* Not const: see DSV4_HIP_SHAPE_KERNEL in kernels.h. */
dsv4_hip_kernel dsv4_hip_compute_global_topk_indices_and_lens = {
    "compute_global_topk_indices_and_lens", dense_variants, dense_check, dense_launch};
