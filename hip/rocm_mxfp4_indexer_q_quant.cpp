/* rocm_mxfp4_indexer_q_quant.cpp - RoPE (the token's own position) + MXFP4
 * of the index queries, the four e8m0 bytes of a head as one little-endian
 * int32, and the fp32 head weights; both quant variants, bit-exact with
 * ref/indexer.c dsv4_ref_indexer_q_quant (docs/semantics/indexer.md Q4.2).
 *
 * One launch, 32 lanes per (token, head) row, 4 rows per 128-thread block;
 * lane l holds dims 4l..4l+3 (one 8-byte load) and stores packed bytes 2l,
 * 2l+1 (one 2-byte store); the first lane of a 32-block stores its scale
 * byte, lane 0 the weight. */
#include "indexer_common.h"

namespace {

using namespace idxr;

enum { ROWS_PER_BLOCK = 4, THREADS = 32 * ROWS_PER_BLOCK };

struct qq_args {
    const uint16_t *q;
    const int64_t *pos;
    const float *cs, *w;
    long long rows, H;
    int rule, elem, variant_a;
    float ws_b, ss_a, hs_a;
};

__global__ void __launch_bounds__(THREADS)
    qquant_kernel(qq_args a, uint8_t *__restrict__ packed, uint8_t *__restrict__ scales, float *__restrict__ wout)
{
    const int lane = (int)threadIdx.x % 32, d0 = 4 * lane;
    const long long th = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const bool active = th < a.rows;
    float x[4] = {0, 0, 0, 0};
    if (active) {
        /* NoPE lanes raw (docs/semantics/indexer.md Q4.2) */
        const uint2 u = *reinterpret_cast<const uint2 *>(a.q + th * D + d0);
        x[0] = dsv4q_float(u.x << 16), x[1] = dsv4q_float(u.x & 0xFFFF0000u);
        x[2] = dsv4q_float(u.y << 16), x[3] = dsv4q_float(u.y & 0xFFFF0000u);
        if (d0 >= D - ROPE) /* RoPE at the token's own position, bf16 out */
            rope4(x, a.cs + a.pos[th / a.H] * ROPE, (d0 - (D - ROPE)) / 2);
    }
    uint8_t sb;
    const uint32_t w = quant4(x, a.rule, a.elem, &sb); /* all lanes: full-mask shuffles */
    if (!active)
        return;
    *reinterpret_cast<uint16_t *>(packed + th * TB + d0 / 2) = (uint16_t)w;
    if (d0 % 32 == 0) /* [T, H, 4] bytes = one little-endian int32 per head */
        scales[th * NB + d0 / 32] = sb;
    if (lane == 0) {
        /* B: fl(w * fl32(softmax_scale * head_scale)); A: fl(fl(w * ss) * hs) (docs/semantics/indexer.md Q4.2) */
        const float wi = a.w[th];
        wout[th] = a.variant_a ? __fmul_rn(__fmul_rn(wi, a.ss_a), a.hs_a) : __fmul_rn(wi, a.ws_b);
    }
}

struct qq_shape {
    int pos, q, cs, w, op, os, ow;
    double ss, hs;
};

int shape_of(const dsv4_hip_call *c, qq_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "positions", DSV4_PLUGIN_INT64, 1, &s->pos, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "index_q", DSV4_PLUGIN_BFLOAT16, 3, &s->q, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "index_q_cos_sin_cache", DSV4_PLUGIN_FLOAT32, 2, &s->cs, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "index_weights", DSV4_PLUGIN_FLOAT32, 2, &s->w, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "q_packed", DSV4_PLUGIN_UINT8, 3, &s->op, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "q_scale", DSV4_PLUGIN_INT32, 2, &s->os, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "weights_out", DSV4_PLUGIN_FLOAT32, 2, &s->ow, err, errlen)) ||
        (rc = float_param(c, "softmax_scale", &s->ss, err, errlen)) ||
        (rc = float_param(c, "head_scale", &s->hs, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

/* Memory safety: shapes and every position inside cos_sin_cache. */
int qq_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    qq_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    const dsv4_plugin_tensor *q = &c->in[s.q];
    const long long T = q->shape[0], H = q->shape[1];
    const dsv4_plugin_tensor *w = &c->in[s.w], *op = &c->out[s.op], *os = &c->out[s.os], *ow = &c->out[s.ow];
    if (q->shape[2] != D || c->in[s.pos].shape[0] != T || w->shape[0] != T || w->shape[1] != H ||
        c->in[s.cs].shape[1] != ROPE || op->shape[0] != T || op->shape[1] != H || op->shape[2] != TB ||
        os->shape[0] != T || os->shape[1] != H || ow->shape[0] != T || ow->shape[1] != H)
        return IFAIL("%s: index_q [T, H, 128], positions [T], index_weights [T, H], cos_sin_cache [P, 64]; outputs "
                     "[T, H, 64], [T, H], [T, H] expected", c->op);
    const int64_t *p = (const int64_t *)c->in[s.pos].data;
    for (long long t = 0; t < T; t++)
        if (p[t] < 0 || p[t] >= c->in[s.cs].shape[0])
            return IFAIL("%s: positions[%lld] = %lld outside cos_sin_cache [0, %lld)", c->op, t, (long long)p[t],
                         (long long)c->in[s.cs].shape[0]);
    if (T * H > (long long)0x7fffffff)
        return IFAIL("%s: too many rows for the grid", c->op);
    return DSV4_PLUGIN_OK;
}

hipError_t qq_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    qq_shape s;
    char err[160];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const long long T = c->in[s.q].shape[0], H = c->in[s.q].shape[1];
    if (T * H == 0)
        return hipSuccess;
    /* the Python floats reach the kernel as fp32 arguments (docs/semantics/indexer.md Q4.2; the
     * seeds pass the product softmax_scale * head_scale, [SEED1]) */
    qq_args a = {(const uint16_t *)c->din[s.q], (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs],
                 (const float *)c->din[s.w], T * H, H, quant_rule(c->variant), quant_elem(c->variant),
                 c->variant == 1, (float)(s.ss * s.hs), (float)s.ss, (float)s.hs};
    hipLaunchKernelGGL(qquant_kernel, dim3(grid_for(T * H, ROWS_PER_BLOCK)), dim3(THREADS), 0, stream, a,
                       (uint8_t *)c->dout[s.op], (uint8_t *)c->dout[s.os], (float *)c->dout[s.ow]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_rocm_mxfp4_indexer_q_quant = {"rocm_mxfp4_indexer_q_quant", idxr::quant_variants, qq_check,
                                                        qq_launch};
