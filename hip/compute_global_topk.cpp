/* compute_global_topk.cpp - local top-k compressed indices -> global cache
 * slots through the block table (docs/semantics/indices.md A5.6, both
 * variants) and the ROCm C4A decode CSR form (docs/semantics/indices.md A5.7), bit-exact with
 * ref/indices.c.
 *
 * Dense (A5.6): ONE launch, one 256-thread block per token row.  Base
 * variant: column j -> column j with 16-byte loads and stores where the row
 * width allows, lens by a block sum.  bounds=checked [S26]: survivors
 * compacted left in column order by a block scan (idx::block_compact),
 * then -1 up to K.
 *
 * Ragged (A5.7): the production op is a chain (lens, cumsum, scatter: A5.7
 * steps 1-3 [S6]) and so is this one, with no host round trip:
 *   1. one block per row: lens[t] = valid ? #{v >= 0} : 0;
 *   2. one block: indptr = exclusive cumsum of lens (idx::lens_scan_kernel);
 *   3. one block per row: flat[indptr[t] + j] for j < lens[t].
 * A one-launch decoupled look-back would need a zeroed status array, which
 * a plug-in launch has no scratch for. */
#include "idx_common.h"

namespace {

using idx::global_slot;
using idx::wrap_i32;

const char *const dense_variants[] = {"default", "bounds=checked", NULL};
const char *const ragged_variants[] = {"default", NULL};
enum { V_BASE = 0, V_CHECKED = 1 };
enum { ROW_THREADS = 256, UNROLL = 2 };

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

/* Ragged step 1 (docs/semantics/indices.md A5.7): lens[t] = valid ? #{j < K : v >= 0} : 0. */
__global__ void __launch_bounds__(ROW_THREADS) ragged_lens_kernel(gtopk_dev a, int32_t *__restrict__ lens)
{
    const long long t = blockIdx.x, K = a.K;
    int mine = 0;
    if (a.valid[t]) {
        const int32_t *src = a.topk + t * K;
        if ((K & 3) == 0) {
            const int4 *s4 = reinterpret_cast<const int4 *>(src);
            for (long long q = threadIdx.x; q < K / 4; q += blockDim.x) {
                int4 x = s4[q];
                mine += (x.x >= 0) + (x.y >= 0) + (x.z >= 0) + (x.w >= 0);
            }
        } else {
            for (long long j = threadIdx.x; j < K; j += blockDim.x)
                mine += src[j] >= 0;
        }
    }
    const int count = block_sum(mine); /* uniform branch above: every thread reaches the scan */
    if (threadIdx.x == 0)
        lens[t] = count;
}

struct lens_reader {
    const int32_t *lens;
    __device__ int operator()(long long i) const { return lens[i]; }
};

/* Ragged step 3: the FIRST lens[t] columns, -1 kept, trailing valid ones
 * dropped (docs/semantics/indices.md A5.7 [S6]). */
__global__ void __launch_bounds__(ROW_THREADS)
    ragged_scatter_kernel(gtopk_dev a, const int32_t *__restrict__ lens, const int32_t *__restrict__ indptr,
                          int32_t *__restrict__ flat)
{
    const long long t = blockIdx.x, n = lens[t];
    const int32_t *src = a.topk + t * a.K;
    int32_t *dst = flat + indptr[t];
    const long long r = a.t2r[t];
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        const int32_t v = src[j];
        dst[j] = v >= 0 ? global_slot(a.bt, a.bt_cols, r, v, a.bc) : -1;
    }
}

/* ---- host side ---- */

struct gtopk_shape {
    int topk, t2r, bt, valid;
    int64_t T, K, bc;
    gtopk_dev dev;
};

int shape_of(const dsv4_hip_call *c, gtopk_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "topk_indices", DSV4_PLUGIN_INT32, 2, &s->topk, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "token_to_req_indices", DSV4_PLUGIN_INT32, 1, &s->t2r, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "block_table", DSV4_PLUGIN_INT32, 2, &s->bt, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "is_valid_token", DSV4_PLUGIN_UINT8, 1, &s->valid, err, errlen)) ||
        (rc = dsv4_hip_int(c, "block_size", &s->bc, err, errlen)))
        return rc;
    s->T = c->in[s->topk].shape[0];
    s->K = c->in[s->topk].shape[1];
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
int check_common(const dsv4_hip_call *c, gtopk_shape *s, bool ragged, char *err, size_t errlen)
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

int dense_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gtopk_shape s;
    int rc = check_common(c, &s, false, err, errlen);
    if (rc)
        return rc;
    int g, l;
    if ((rc = dsv4_hip_tensor(c, 1, "global_topk_indices", DSV4_PLUGIN_INT32, 2, &g, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "topk_lens", DSV4_PLUGIN_INT32, 1, &l, err, errlen)))
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

struct ragged_out {
    int flat, indptr, lens;
};

int ragged_outputs(const dsv4_hip_call *c, ragged_out *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 1, "topk_ragged_indices", DSV4_PLUGIN_INT32, 1, &o->flat, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "topk_ragged_indptr", DSV4_PLUGIN_INT32, 1, &o->indptr, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "topk_lens", DSV4_PLUGIN_INT32, 1, &o->lens, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

int ragged_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gtopk_shape s;
    ragged_out o;
    int rc = check_common(c, &s, true, err, errlen);
    if (rc || (rc = ragged_outputs(c, &o, err, errlen)))
        return rc;
    if (c->out[o.flat].shape[0] != s.T * s.K || c->out[o.indptr].shape[0] != s.T + 1 ||
        c->out[o.lens].shape[0] != s.T)
        return IDX_FAIL("gtopk ragged: outputs must be [T*K], [T+1], [T]");
    /* The int32 cumsum never wraps, and every flat offset is < 2^31. */
    if (s.T * s.K > INT32_MAX)
        return IDX_FAIL("gtopk ragged: T*K = %lld exceeds int32 offsets", (long long)(s.T * s.K));
    return DSV4_PLUGIN_OK;
}

hipError_t ragged_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    gtopk_shape s;
    ragged_out o;
    char err[256];
    if (shape_of(c, &s, err, sizeof err) || ragged_outputs(c, &o, err, sizeof err))
        return hipErrorInvalidValue;
    int32_t *flat = (int32_t *)c->dout[o.flat], *indptr = (int32_t *)c->dout[o.indptr];
    int32_t *lens = (int32_t *)c->dout[o.lens];
    if (s.T > 0) {
        hipLaunchKernelGGL(ragged_lens_kernel, dim3((unsigned)s.T), dim3(ROW_THREADS), 0, stream, s.dev, lens);
        hipError_t e = hipGetLastError();
        if (e != hipSuccess)
            return e;
    }
    hipLaunchKernelGGL(idx::lens_scan_kernel<lens_reader>, dim3(1), dim3(idx::SCAN_THREADS), 0, stream,
                       lens_reader{lens}, (long long)s.T, (int32_t *)NULL, indptr);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess || s.T == 0)
        return e;
    hipLaunchKernelGGL(ragged_scatter_kernel, dim3((unsigned)s.T), dim3(ROW_THREADS), 0, stream, s.dev,
                       (const int32_t *)lens, (const int32_t *)indptr, flat);
    return hipGetLastError();
}

} // namespace

/* Not const: see combine_topk_swa_indices.cpp. */
dsv4_hip_kernel dsv4_hip_compute_global_topk_indices_and_lens = {
    "compute_global_topk_indices_and_lens", dense_variants, dense_check, dense_launch};
dsv4_hip_kernel dsv4_hip_compute_global_topk_ragged_indices_and_indptr = {
    "compute_global_topk_ragged_indices_and_indptr", ragged_variants, ragged_check, ragged_launch};
