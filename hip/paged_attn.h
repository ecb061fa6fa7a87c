/* paged_attn.h - host side shared by rocm_sparse_attn_decode and
 * sparse_mla_fwd: the same math over the same two paged fp8_ds_mla caches
 * (docs/semantics/attention.md A8.4, A8.5), told apart only by their input names. */
#ifndef DSV4_HIP_PAGED_ATTN_H
#define DSV4_HIP_PAGED_ATTN_H

#include "sparse_attn.h"

namespace pattn {

/* variant 1 = fp8=fnuz: the main (SWA) cache is FNUZ on gfx942
 * (is_fnuz_main = platform); the compressed cache is always OCP (docs/semantics/kvcache.md A2.3
 * [S1, S4, S9]). */
static const char *const variants[] = {"default", "fp8=fnuz", NULL};

/* The most scratch the decoded rows may take (1 KiB a row): 1 GiB, about a
 * million entries, covers decode batches; prefill-sized calls decode in the
 * attention blocks instead. */
constexpr size_t PREDECODE_MAX = (size_t)1 << 30;

struct names {
    const char *main_cache, *main_idx, *main_ptr, *extra_cache, *extra_idx, *extra_ptr;
};

struct shape {
    int q, sink, out, cache[2], idx[2], ptr[2], nseg;
    int64_t T, H;
    double scale;
};

#define PFAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

static int shape_of(const names &nm, const dsv4_hip_call *c, shape *s, char *err, size_t errlen)
{
    int rc;
    int64_t swa_only;
    if ((rc = dsv4_hip_tensors(c, "q:bfloat16:3 attn_sink:float32:1 -> output:bfloat16:3",
                               {&s->q, &s->sink, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_int(c, "swa_only", &swa_only, err, errlen)) ||
        (rc = dsv4_hip_float(c, "scale", &s->scale, err, errlen)))
        return rc;
    s->nseg = swa_only ? 1 : 2; /* SWA-only layers: no extra segment (docs/semantics/attention.md A8.4) */
    const char *cn[2] = {nm.main_cache, nm.extra_cache}, *in[2] = {nm.main_idx, nm.extra_idx},
               *pn[2] = {nm.main_ptr, nm.extra_ptr};
    for (int k = 0; k < s->nseg; k++)
        if ((rc = dsv4_hip_tensor(c, 0, cn[k], DSV4_PLUGIN_UINT8, 3, &s->cache[k], err, errlen)) ||
            (rc = dsv4_hip_tensor(c, 0, in[k], DSV4_PLUGIN_INT32, 1, &s->idx[k], err, errlen)) ||
            (rc = dsv4_hip_tensor(c, 0, pn[k], DSV4_PLUGIN_INT32, 1, &s->ptr[k], err, errlen)))
            return rc;
    dsv4_hip_dims(c->in[s->q], &s->T, &s->H);
    return DSV4_PLUGIN_OK;
}

/* What the launch relies on for memory safety: shapes, and every indptr
 * non-decreasing inside its indices (dsv4_attn_check's ragged rule). */
static int check(const names &nm, const dsv4_hip_call *c, char *err, size_t errlen)
{
    shape s;
    int rc = shape_of(nm, c, &s, err, errlen);
    if (rc)
        return rc;
    const int64_t *os = c->out[s.out].shape;
    if (c->in[s.q].shape[2] != sattn::D || os[0] != s.T || os[1] != s.H || os[2] != sattn::D)
        return PFAIL("%s: q and output must be [T, H, 512]", c->op);
    if (c->in[s.sink].shape[0] < s.H)
        return PFAIL("%s: attn_sink has fewer than H = %lld entries", c->op, (long long)s.H);
    if (!(s.scale > 0))
        return PFAIL("%s: scale = %g must be > 0", c->op, s.scale);
    const char *pn[2] = {nm.main_ptr, nm.extra_ptr};
    for (int k = 0; k < s.nseg; k++) {
        const dsv4_plugin_tensor *cache = &c->in[s.cache[k]], *ptr = &c->in[s.ptr[k]];
        if (cache->shape[2] != 584 || cache->shape[1] < 1)
            return PFAIL("%s: %s must be [pages, B >= 1, 584]", c->op, cache->name);
        if (ptr->shape[0] != s.T + 1)
            return PFAIL("%s: %s must be [T + 1 = %lld]", c->op, pn[k], (long long)s.T + 1);
        const int32_t *p = (const int32_t *)ptr->data;
        const int64_t ni = c->in[s.idx[k]].shape[0];
        if (s.T >= 0 && p[0] < 0)
            return PFAIL("%s: %s[0] = %d must be >= 0", c->op, pn[k], p[0]);
        for (int64_t t = 0; t < s.T; t++)
            if (p[t + 1] < p[t] || p[t + 1] > ni)
                return PFAIL("%s: %s[%lld] = %d must be in [%s[%lld] = %d, %lld]", c->op, pn[k],
                             (long long)t + 1, p[t + 1], pn[k], (long long)t, p[t], (long long)ni);
    }
    if (s.T * ((s.H + sattn::HG - 1) / sattn::HG) > 0x7fffffff)
        return PFAIL("%s: T x head groups exceeds the grid", c->op);
    return DSV4_PLUGIN_OK;
}

static hipError_t launch(const names &nm, const dsv4_hip_call *c, hipStream_t stream)
{
    shape s;
    char err[8];
    if (shape_of(nm, c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    sattn::paged_src src;
    memset(&src, 0, sizeof src);
    src.nseg = s.nseg;
    for (int k = 0; k < s.nseg; k++) {
        const dsv4_plugin_tensor *cache = &c->in[s.cache[k]];
        sattn::paged_seg &g = src.seg[k];
        g.cache = (const uint8_t *)c->din[s.cache[k]];
        g.B = cache->shape[1];
        g.rows = cache->shape[0] * cache->shape[1]; /* shape[0] * shape[1] (docs/semantics/attention.md A8.2) */
        g.idx = (const int32_t *)c->din[s.idx[k]];
        g.ptr = (const int32_t *)c->din[s.ptr[k]];
        g.fnuz = k == 0 && c->variant == 1;
    }
    long long max_n = 0; /* from the host indptr copies: the split count */
    for (int64_t t = 0; t < s.T; t++) {
        long long n = 0;
        for (int k = 0; k < s.nseg; k++) {
            const int32_t *p = (const int32_t *)c->in[s.ptr[k]].data;
            n += (long long)p[t + 1] - p[t];
        }
        max_n = n > max_n ? n : max_n;
    }
    /* Decode every entry once, then attend over the bf16 rows, when the rows
     * fit in PREDECODE_MAX of scratch (decode batches); else decode in the
     * attention blocks, once per head group. */
    long long total = 0;
    for (int k = 0; k < s.nseg; k++) {
        const int32_t *p = (const int32_t *)c->in[s.ptr[k]].data;
        total += (long long)p[s.T] - p[0];
    }
    const size_t rows_bytes = ((size_t)total * sattn::D * sizeof(uint16_t) + 255) / 256 * 256;
    const long long tiles = (max_n + sattn::KT - 1) / sattn::KT;
    if (s.T == 0 || s.H == 0 || total == 0 || rows_bytes > PREDECODE_MAX || s.T > 65535) /* grid.y <= 65535 */
        return sattn::attn_launch(src, c->din[s.q], c->din[s.sink], s.T, s.H, s.scale, max_n, c->dout[s.out],
                                  stream);
    uint8_t *scratch;
    hipError_t e = dsv4_hip_scratch(rows_bytes + sattn::part_bytes(s.T, s.H, max_n, sattn::decoded_src::BF16_ROWS), (void **)&scratch);
    if (e != hipSuccess)
        return e;
    sattn::decoded_src dec = {src, (const uint16_t *)scratch};
    hipLaunchKernelGGL(sattn::decode_rows_kernel<sattn::paged_src>, dim3((unsigned)tiles, (unsigned)s.T),
                       dim3(sattn::NT), 0, stream, src, dec, (uint16_t *)scratch);
    return sattn::attn_launch_parts(dec, c->din[s.q], c->din[s.sink], s.T, s.H, s.scale, max_n, c->dout[s.out],
                                    (float *)(scratch + rows_bytes), stream);
}

/* The check and launch of the op whose tensors are called nm: the two ops
 * are these two with their own names. */
template <const names &nm> int check_named(const dsv4_hip_call *c, char *err, size_t errlen)
{
    return check(nm, c, err, errlen);
}

template <const names &nm> hipError_t launch_named(const dsv4_hip_call *c, hipStream_t stream)
{
    return launch(nm, c, stream);
}

} // namespace pattn

#endif
