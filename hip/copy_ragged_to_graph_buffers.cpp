/* copy_ragged_to_graph_buffers.cpp - a step's CSR metadata copied into the
 * persistent CUDA-graph buffers (_copy_ragged_to_graph_buffers of vllm
 * deepseek_v41/amd/rocm.py [SEED1]; docs/semantics/indices.md A5.8), both
 * variants, bit-exact with ref/indices.c.
 *
 * ONE launch, min(items / 256, SMs x 8) x 256: a grid-stride copy over both
 * destination ranges, the indices in 16-byte quads (Torch's dst.copy_(src):
 * equal sizes, or a one-element source broadcast), block 0
 * also writing the two view lengths.  Every range follows from shapes and
 * parameters alone, so the host sizes the launch without reading device
 * data; what lies outside the copied ranges keeps its stale contents. */
#include "idx_common.h"

namespace {

const char *const variants[] = {"default", "arch=gfx950", NULL};
enum { V_DEFAULT = 0, V_GFX950 = 1 };
enum { THREADS = 256 };

struct gc_plan {
    long long n_ip, nd, view0; /* indptr elements, indices elements, indices view numel */
    long long ns_ip, ns;       /* source sizes (1: broadcast) */
};

/* Work items: the n_ip indptr elements one by one, then the indices four
 * at a time (one 16-byte load and store; a last partial quad element by
 * element): the buffers start 16-byte aligned. */
__device__ inline long long quads(const gc_plan &p) { return (p.nd + 3) / 4; }

__global__ void __launch_bounds__(THREADS)
    copy_kernel(gc_plan p, const int32_t *__restrict__ src_ip, const int32_t *__restrict__ src,
                int32_t *__restrict__ dst_ip, int32_t *__restrict__ dst, long long *__restrict__ view_lens)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < p.n_ip + quads(p); k += stride) {
        if (k < p.n_ip) {
            dst_ip[k] = src_ip[p.ns_ip == 1 ? 0 : k];
            continue;
        }
        const long long e = 4 * (k - p.n_ip); /* first index element of the quad */
        if (e + 4 <= p.nd) {
            int4 v;
            if (p.ns == 1) { /* a one-element source broadcast */
                const int32_t x = src[0];
                v = make_int4(x, x, x, x);
            } else {
                v = reinterpret_cast<const int4 *>(src)[e / 4];
            }
            reinterpret_cast<int4 *>(dst)[e / 4] = v;
        } else {
            for (long long j = e; j < p.nd; j++)
                dst[j] = src[p.ns == 1 ? 0 : j];
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        view_lens[0] = p.view0;
        view_lens[1] = p.n_ip;
    }
}

/* ---- host side ---- */

struct gc_shape {
    int ri, rp, ob, op, vl;
    int64_t rows, mepr;
};

int shape_of(const dsv4_hip_call *c, gc_shape *s, char *err, size_t errlen)
{
    int rc, sb, sp;
    if ((rc = dsv4_hip_tensors(c, "ragged_indices:int32:1 ragged_indptr:int32:1 stale_indices_buffer:int32:1 "
                                  "stale_indptr_buffer:int32:1 -> ragged_indices_buffer:int32:1 "
                                  "ragged_indptr_buffer:int32:1 view_lens:int64:1",
                               {&s->ri, &s->rp, &sb, &sp, &s->ob, &s->op, &s->vl}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "num_rows max_entries_per_row", {&s->rows, &s->mepr}, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

/* The ranges of dsv4_ref_copy_ragged_to_graph_buffers; DSV4_PLUGIN_EINPUT
 * where Torch's copy_ raises (sizes that do not broadcast). */
int plan_of(const dsv4_hip_call *c, const gc_shape *s, gc_plan *p, char *err, size_t errlen)
{
    const int64_t E = c->in[s->ri].shape[0], L = c->in[s->rp].shape[0];
    const int64_t cap = c->out[s->ob].shape[0], cap2 = c->out[s->op].shape[0];
    if (s->rows < 0 || s->mepr < 0)
        return IDX_FAIL("gcopy: num_rows and max_entries_per_row must be >= 0");
    if (c->out[s->vl].shape[0] != 2)
        return IDX_FAIL("gcopy: view_lens must be [2]");
    /* indptr_out = buffer[:num_rows + 1]: Python slicing clamps to the buffer. */
    p->n_ip = s->rows + 1 < cap2 ? s->rows + 1 : cap2;
    if (L != p->n_ip && L != 1)
        return IDX_FAIL("gcopy: ragged_indptr: copy_ of %lld elements into a view of %lld", (long long)L,
                        (long long)p->n_ip);
    /* max_entries = max(num_rows * max_entries_per_row, 1); ragged_out = buffer[:max_entries]. */
    int64_t max_entries = s->rows * s->mepr;
    max_entries = max_entries < 1 ? 1 : max_entries;
    int64_t n_out = max_entries < cap ? max_entries : cap;
    /* ragged_out[:source_entries].copy_(ragged_indices) when there are any. */
    p->nd = E > 0 ? (E < n_out ? E : n_out) : 0;
    if (E > 0 && E != p->nd && E != 1)
        return IDX_FAIL("gcopy: ragged_indices: copy_ of %lld elements into a view of %lld", (long long)E,
                        (long long)p->nd);
    /* gfx950: trimmed to max(source_entries, 1), same base pointer. */
    const int64_t trim = E > 1 ? E : 1;
    if (c->variant == V_GFX950 && n_out > trim)
        n_out = trim;
    p->view0 = n_out;
    p->ns_ip = L;
    p->ns = E;
    return DSV4_PLUGIN_OK;
}

int gc_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gc_shape s;
    gc_plan p;
    int rc = shape_of(c, &s, err, errlen);
    return rc ? rc : plan_of(c, &s, &p, err, errlen);
}

hipError_t gc_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    gc_shape s;
    gc_plan p;
    char err[256];
    if (shape_of(c, &s, err, sizeof err) || plan_of(c, &s, &p, err, sizeof err))
        return hipErrorInvalidValue;
    const long long n = p.n_ip + (p.nd + 3) / 4; /* copy_kernel's work items */
    long long blocks = (n + THREADS - 1) / THREADS;
    const long long most = (long long)c->prop->multiProcessorCount * 8;
    blocks = blocks < 1 ? 1 : (blocks > most ? most : blocks);
    hipLaunchKernelGGL(copy_kernel, dim3((unsigned)blocks), dim3(THREADS), 0, stream, p,
                       (const int32_t *)c->din[s.rp], (const int32_t *)c->din[s.ri], (int32_t *)c->dout[s.op],
                       (int32_t *)c->dout[s.ob], (long long *)c->dout[s.vl]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_copy_ragged_to_graph_buffers = {"copy_ragged_to_graph_buffers", variants, gc_check,
                                                         gc_launch};
