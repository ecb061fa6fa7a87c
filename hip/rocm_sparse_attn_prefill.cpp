/* rocm_sparse_attn_prefill.cpp - sparse MLA prefill with sink over the
 * gathered bf16 workspace, dense index rows [T, 1, P] read up to
 * clamp(topk_length, 0, P) (docs/semantics/attention.md A8.1-A8.3 [S9]), in one
 * launch of the shared kernel of sparse_attn.h (one block per token and
 * group of 16 heads, online softmax, sink in the denominator only). */
#include "sparse_attn.h"

namespace {

const char *const variants[] = {"default", NULL};

struct prefill_shape {
    int q, kv, idx, len, sink, out;
    int64_t T, H, rows, P;
    double scale;
};

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

int shape_of(const dsv4_hip_call *c, prefill_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "q:bfloat16:3 kv:bfloat16:3 indices:int32:3 topk_length:int32:1 "
                                  "attn_sink:float32:1 -> output:bfloat16:3",
                               {&s->q, &s->kv, &s->idx, &s->len, &s->sink, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_float(c, "scale", &s->scale, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->q], &s->T, &s->H);
    s->rows = c->in[s->kv].shape[0];
    s->P = c->in[s->idx].shape[2];
    return DSV4_PLUGIN_OK;
}

/* Shapes the launch relies on (dsv4_attn_check's contract for the dense
 * form; the values are the validator's business). */
int check_shape(const dsv4_hip_call *c, const prefill_shape &s, char *err, size_t errlen)
{
    const int64_t *qs = c->in[s.q].shape, *ks = c->in[s.kv].shape, *is = c->in[s.idx].shape,
                  *os = c->out[s.out].shape;
    if (qs[2] != sattn::D || ks[1] != 1 || ks[2] != sattn::D)
        return FAIL("%s: q must be [T, H, 512] and kv [rows, 1, 512]", c->op);
    if (is[0] != s.T || is[1] != 1 || c->in[s.len].shape[0] != s.T)
        return FAIL("%s: indices must be [T = %lld, 1, P] and topk_length [T]", c->op, (long long)s.T);
    if (c->in[s.sink].shape[0] < s.H)
        return FAIL("%s: attn_sink has %lld entries for %lld heads", c->op, (long long)c->in[s.sink].shape[0],
                    (long long)s.H);
    if (os[0] != s.T || os[1] != s.H || os[2] != sattn::D)
        return FAIL("%s: output must be [T, H, 512]", c->op);
    if (!(s.scale > 0))
        return FAIL("%s: scale = %g must be > 0", c->op, s.scale);
    if (s.T * ((s.H + sattn::HG - 1) / sattn::HG) > 0x7fffffff)
        return FAIL("%s: T x head groups exceeds the grid", c->op);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const prefill_shape &s, hipStream_t stream)
{
    sattn::dense_src src;
    src.kv = (const uint16_t *)c->din[s.kv];
    src.rows = s.rows; /* num_rows = kv.shape[0] (docs/semantics/attention.md A8.2 [S9]) */
    src.idx = (const int32_t *)c->din[s.idx];
    src.len = (const int32_t *)c->din[s.len];
    src.P = s.P;
    const int32_t *len = (const int32_t *)c->in[s.len].data; /* host copy: the split count */
    long long max_n = 0;
    for (int64_t t = 0; t < s.T; t++) {
        const long long n = len[t] < 0 ? 0 : len[t] > s.P ? s.P : len[t];
        max_n = n > max_n ? n : max_n;
    }
    return sattn::attn_launch(src, c->din[s.q], c->din[s.sink], s.T, s.H, s.scale, max_n, c->dout[s.out], stream);
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_sparse_attn_prefill, variants, prefill_shape);
