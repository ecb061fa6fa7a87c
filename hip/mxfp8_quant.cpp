/* mxfp8_quant.cpp - MXFP8 rows (docs/semantics/quant.md Q2,
 * docs/semantics/attention.md A9.2), the three variants of harness/ops_quant.c, bit-exact with ref/mx.c:
 * default (fl(a/448) and the correctly rounded fp32 log2, emulated in
 * integers by dsv4q_ceil_log2_f32, not the device log2), log2=exact (the
 * exact ceil rule) and scale_rule=floor.
 *
 * One launch over [T, W]: 8 elements per thread (16-byte bf16 load), 4 lanes
 * per 32-block, xor-shuffle amax, one 8-byte store of codes per thread, the
 * block's first lane stores its scale byte. */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
enum { V_CEIL_F32LOG2 = 0, V_CEIL = 1, V_FLOOR = 2 };

__global__ void mxfp8_kernel(const void *__restrict__ x, int is_bf16, long long nchunks, int variant,
                             uint2 *__restrict__ data, uint8_t *__restrict__ scales)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = c < nchunks;
    float v[8];
    float m = dsv4q_float(0x7FC00000u);
    if (active) {
        load8(x, is_bf16, c * 8, v);
        for (int i = 0; i < 8; i++)
            m = dsv4q_amax_step(m, v[i]);
    }
    m = group_amax(m, 4);
    if (!active)
        return;
    const uint8_t b = variant == V_FLOOR          ? dsv4q_fp8_scale_floor(m)
                      : variant == V_CEIL_F32LOG2 ? dsv4q_fp8_scale_ceil_f32log2(m)
                                                  : dsv4q_fp8_scale_ceil(m);
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < 8; i++) {
        float q;
        if (dsv4q_isnan(m))
            q = dsv4q_float(0x7FC00000u); /* all-NaN block: every code is fp8(NAN) (mx.c) */
        else if (variant == V_FLOOR)
            q = dsv4q_div(v[i], dsv4q_pow2((int)b - 127)); /* x / 2^(byte-127) (@00134422) */
        else
            q = dsv4q_mul(v[i], dsv4q_pow2(127 - (int)b)); /* reciprocal multiply (docs/semantics/quant.md Q2 step 3) */
        const uint32_t code = dsv4q_fp8(q, 0);
        if (i < 4)
            lo |= code << (8 * i);
        else
            hi |= code << (8 * (i - 4));
    }
    data[c] = make_uint2(lo, hi);
    if ((c & 3) == 0)
        scales[c / 4] = b;
}

struct mx_shape {
    int x, d, s, is_bf16;
    long long T, W;
};

int shape_of(const dsv4_hip_call *c, mx_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = quant_input_x(c, &s->x, &s->is_bf16, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "data", DSV4_PLUGIN_FLOAT8_E4M3FN, 2, &s->d, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "scale", DSV4_PLUGIN_UINT8, 2, &s->s, err, errlen)))
        return rc;
    s->T = c->in[s->x].shape[0];
    s->W = c->in[s->x].shape[1];
    return DSV4_PLUGIN_OK;
}

int mxfp8_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    mx_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    if (s.W % 32 != 0)
        return QFAIL("mxfp8_quant: W = %lld is not a multiple of 32", s.W);
    const dsv4_plugin_tensor *d = &c->out[s.d], *sc = &c->out[s.s];
    if (d->shape[0] != s.T || d->shape[1] != s.W || sc->shape[0] != s.T || sc->shape[1] != s.W / 32)
        return QFAIL("mxfp8_quant: outputs must be [%lld, %lld] and [%lld, %lld]", s.T, s.W, s.T, s.W / 32);
    if (s.T * s.W / 8 > (long long)0x7fffffff * 256)
        return QFAIL("mxfp8_quant: tensor too large for the grid");
    return DSV4_PLUGIN_OK;
}

hipError_t mxfp8_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    mx_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const long long nchunks = s.T * s.W / 8;
    if (nchunks == 0)
        return hipSuccess;
    const int threads = 256;
    hipLaunchKernelGGL(mxfp8_kernel, dim3(grid_for(nchunks, threads)), dim3(threads), 0, stream, c->din[s.x],
                       s.is_bf16, nchunks, c->variant, (uint2 *)c->dout[s.d], (uint8_t *)c->dout[s.s]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_mxfp8_quant = {"mxfp8_quant", variants, mxfp8_check, mxfp8_launch};
