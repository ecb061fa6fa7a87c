/* get_prefill_chunk_plan.cpp - greedy prefill chunking under the
 * gather-workspace area budget (docs/semantics/indices.md A7 [S12]),
 * bit-exact with ref/indices.c.
 *
 * ONE launch of one block, and the walk itself on ONE thread, on purpose:
 * the plan is a sequential greedy walk -- whether request i joins the open
 * chunk depends on the running maxima of every request before it in that
 * chunk, and where the next chunk starts depends on where this one
 * stopped -- so the only parallel work is the per-request (compressed,
 * gather) pair.  The block computes those pairs into shared memory, a tile
 * at a time, and thread 0 walks the tile; the walk then costs shared-memory
 * reads instead of dependent global loads and 64-bit divisions.  vLLM runs
 * this on the host over a handful of prefills; on the device it saves the
 * round trip of the lengths. */
#include "idx_common.h"

namespace {

const char *const variants[] = {"default", NULL};
enum { THREADS = 256, TILE = 2048 };

struct plan_args {
    long long n, ratio, chunk, W, max_model_len, max_tokens;
    int comp; /* has_compressed && c > 1 */
};

__global__ void __launch_bounds__(THREADS)
    plan_kernel(plan_args a, const int32_t *__restrict__ seq, const int32_t *__restrict__ qlen,
                long long *__restrict__ plan, long long *__restrict__ num_chunks)
{
    __shared__ long long comp[TILE], gath[TILE];
    /* Budget: area = chunk_size * (Nc + W + max_num_batched_tokens), Nc =
     * ceil(max_model_len / c), or 0 if c <= 1 (docs/semantics/indices.md A7 step 1). */
    const long long nc = a.comp ? (a.max_model_len + a.ratio - 1) / a.ratio : 0;
    const long long area = a.chunk * (nc + a.W + a.max_tokens);
    /* The open chunk [start, i) and its maxima; thread 0's registers. */
    long long n = 0, start = 0, mc = 0, mg = 0;
    for (long long base = 0; base < a.n; base += TILE) {
        const long long m = a.n - base < TILE ? a.n - base : TILE;
        for (long long k = threadIdx.x; k < m; k += blockDim.x) {
            const long long S = seq[base + k], q = qlen[base + k], pre = S - q;
            /* gather = q_len + clamp(prefix, 0, W - 1); compressed = S // c (step 2) */
            gath[k] = q + (pre < 0 ? 0 : (pre > a.W - 1 ? a.W - 1 : pre));
            comp[k] = a.comp ? S / a.ratio : 0;
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (long long k = 0; k < m; k++) {
                const long long i = base + k;
                const long long cmc = comp[k] > mc ? comp[k] : mc, cmg = gath[k] > mg ? gath[k] : mg;
                /* The first request always opens a chunk; extend while
                 * (count) * (max_comp + max_gather) <= area (step 3).  On a
                 * break request i opens the next chunk with its own pair
                 * (both >= 0), as the reference's restart at end does. */
                if (i > start && (i - start + 1) * (cmc + cmg) > area) {
                    long long *row = plan + 4 * n++;
                    row[0] = start;
                    row[1] = i;
                    row[2] = mc;
                    row[3] = mc + mg;
                    start = i;
                    mc = comp[k];
                    mg = gath[k];
                } else {
                    mc = cmc;
                    mg = cmg;
                }
            }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (a.n > 0) { /* the last open chunk */
            long long *row = plan + 4 * n++;
            row[0] = start;
            row[1] = a.n;
            row[2] = mc;
            row[3] = mc + mg;
        }
        *num_chunks = n;
    }
}

/* ---- host side ---- */

struct plan_shape {
    int seq, q, plan, nc;
    int64_t c, chunk, W, mml, mnbt, has;
};

int shape_of(const dsv4_hip_call *c, plan_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "prefill_seq_lens:int32:1 prefill_query_lens:int32:1 -> chunk_plan:int64:2 "
                                  "num_chunks:int64:1",
                               {&s->seq, &s->q, &s->plan, &s->nc}, err, errlen)) ||
        (rc = dsv4_hip_ints(c,
                            "compress_ratio prefill_chunk_size window_size max_model_len max_num_batched_tokens "
                            "has_compressed",
                            {&s->c, &s->chunk, &s->W, &s->mml, &s->mnbt, &s->has}, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

/* dsv4_chunkplan_check (ref/indices.c) plus the shapes: the plan has at
 * most one chunk per prefill, so [n, 4] always holds it. */
int check_shape(const dsv4_hip_call *c, const plan_shape &s, char *err, size_t errlen)
{
    const int64_t n = c->in[s.seq].shape[0];
    if (c->in[s.q].shape[0] != n || c->out[s.plan].shape[0] != n || c->out[s.plan].shape[1] != 4 ||
        c->out[s.nc].shape[0] != 1)
        return IDX_FAIL("plan: inputs [n], [n]; outputs [n, 4], [1]");
    if (s.chunk < 0 || s.W < 1 || s.mml < 0 || s.mnbt < 0)
        return IDX_FAIL("plan: window_size must be >= 1; chunk_size, max_model_len, max_num_batched_tokens >= 0");
    const int32_t *seq = (const int32_t *)c->in[s.seq].data, *q = (const int32_t *)c->in[s.q].data;
    for (int64_t i = 0; i < n; i++)
        if (seq[i] < 0 || q[i] < 0)
            return IDX_FAIL("plan: prefill %lld: seq_lens %d / query_lens %d must be >= 0", (long long)i, seq[i], q[i]);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const plan_shape &s, hipStream_t stream)
{
    /* c <= 1: zeros [S12]; has_compressed = 0: SWA-only layer (inferred). */
    const plan_args a{(long long)c->in[s.seq].shape[0], (long long)s.c, (long long)s.chunk, (long long)s.W,
                      (long long)s.mml, (long long)s.mnbt, s.has != 0 && s.c > 1};
    hipLaunchKernelGGL(plan_kernel, dim3(1), dim3(THREADS), 0, stream, a, (const int32_t *)c->din[s.seq],
                       (const int32_t *)c->din[s.q], (long long *)c->dout[s.plan], (long long *)c->dout[s.nc]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(get_prefill_chunk_plan, variants, plan_shape);
