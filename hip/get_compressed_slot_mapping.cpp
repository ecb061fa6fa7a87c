/* get_compressed_slot_mapping.cpp - the compressed-cache slot of every token
 * that closes a compressed entry, -1 elsewhere, with context parallelism
 * (docs/semantics/indices.md A5.4 [S20]), bit-exact with ref/indices.c.
 *
 * ONE launch, one thread per output entry: the upstream fill of the whole
 * buffer with -1 and the per-request kernel become one pass, each thread
 * finding its request by a binary search of query_start_loc (entries past
 * the batch, a CUDA-graph pad, get -1). */
#include "idx_common.h"

namespace {

const char *const variants[] = {"default", NULL};
enum { THREADS = 256 };

struct cslot_dev {
    const int32_t *qsl, *seq, *bt;
    long long R, bt_cols, out_len;
    long long c, B, W, rank, I;
};

__global__ void __launch_bounds__(THREADS) cslot_kernel(cslot_dev a, long long *__restrict__ out)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= a.out_len)
        return;
    long long slot = -1;
    if (a.R > 0 && t >= a.qsl[0] && t < a.qsl[a.R]) {
        const long long r = idx::request_of_row(a.qsl, a.R, t), qs = a.qsl[r], ql = (long long)a.qsl[r + 1] - qs;
        const long long pos = ((long long)a.seq[r] - ql) + (t - qs); /* >= 0: checked on the host */
        if ((pos + 1) % a.c == 0) {
            const long long e = pos / a.c, vpage = a.B * a.W, page = e / vpage, voff = e - page * vpage;
            if ((voff / a.I) % a.W == a.rank) /* this rank's run of cp_interleave entries */
                slot = (long long)a.bt[r * a.bt_cols + page] * a.B + (voff / (a.W * a.I)) * a.I + voff % a.I;
        }
    }
    out[t] = slot;
}

/* ---- host side ---- */

struct cslot_shape {
    int qsl, seq, bt, out;
    cslot_dev dev;
};

int shape_of(const dsv4_hip_call *c, cslot_shape *s, char *err, size_t errlen)
{
    int64_t ratio, B, W, rank, I;
    int rc;
    if ((rc = dsv4_hip_tensors(c, "query_start_loc:int32:1 seq_lens:int32:1 block_table:int32:2 -> "
                                  "slot_mapping:int64:1",
                               {&s->qsl, &s->seq, &s->bt, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "compress_ratio block_size cp_world_size cp_rank cp_interleave",
                            {&ratio, &B, &W, &rank, &I}, err, errlen)))
        return rc;
    const void *const *d = c->din;
    s->dev = cslot_dev{d ? (const int32_t *)d[s->qsl] : NULL, d ? (const int32_t *)d[s->seq] : NULL,
                       d ? (const int32_t *)d[s->bt] : NULL, (long long)c->in[s->seq].shape[0],
                       (long long)c->in[s->bt].shape[1], (long long)c->out[s->out].shape[0],
                       (long long)ratio, (long long)B, (long long)W, (long long)rank, (long long)I};
    return DSV4_PLUGIN_OK;
}

/* What the kernel relies on: dsv4_cslot_check (ref/indices.c) -- positions
 * >= 0, every written slot's page inside the block table -- plus shapes. */
int check_shape(const dsv4_hip_call *c, const cslot_shape &s, char *err, size_t errlen)
{
    const cslot_dev &a = s.dev;
    if (a.c < 1 || a.B < 1 || a.W < 1 || a.I < 1 || a.rank < 0 || a.rank >= a.W)
        return IDX_FAIL("cslot: compress_ratio, block_size, cp_world_size, cp_interleave >= 1, 0 <= cp_rank < ranks");
    if (c->in[s.qsl].shape[0] != a.R + 1 || c->in[s.bt].shape[0] != a.R)
        return IDX_FAIL("cslot: query_start_loc must be [R+1] and block_table [R, maxb]");
    const int32_t *q = (const int32_t *)c->in[s.qsl].data, *seq = (const int32_t *)c->in[s.seq].data;
    const int32_t *bt = (const int32_t *)c->in[s.bt].data;
    if (a.R > 0 && (q[0] < 0 || q[a.R] > a.out_len))
        return IDX_FAIL("cslot: query_start_loc spans [%d, %d), outside the %lld-entry output", q[0], q[a.R],
                        a.out_len);
    for (long long r = 0; r < a.R; r++) {
        const long long ql = (long long)q[r + 1] - q[r];
        if (ql < 0 || seq[r] < ql)
            return IDX_FAIL("cslot: request %lld: query_start_loc decreasing or seq_len < query_len", r);
        for (long long pos = seq[r] - ql; pos < seq[r]; pos++) {
            if ((pos + 1) % a.c)
                continue;
            const long long e = pos / a.c, vpage = a.B * a.W, page = e / vpage, voff = e - page * vpage;
            if ((voff / a.I) % a.W != a.rank)
                continue;
            if (page >= a.bt_cols)
                return IDX_FAIL("cslot: request %lld, position %lld: page %lld past the block table", r, pos, page);
            const long long slot = (long long)bt[r * a.bt_cols + page] * a.B + (voff / (a.W * a.I)) * a.I + voff % a.I;
            if (slot < INT32_MIN || slot > INT32_MAX)
                return IDX_FAIL("cslot: request %lld, position %lld: slot %lld overflows int32", r, pos, slot);
        }
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const cslot_shape &s, hipStream_t stream)
{
    if (s.dev.out_len == 0)
        return hipSuccess;
    const unsigned blocks = (unsigned)((s.dev.out_len + THREADS - 1) / THREADS);
    hipLaunchKernelGGL(cslot_kernel, dim3(blocks), dim3(THREADS), 0, stream, s.dev, (long long *)c->dout[s.out]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(get_compressed_slot_mapping, variants, cslot_shape);
