/* rocm_inverse_rope_mxfp8_rows.cpp - rocm_inverse_rope_mxfp8_rows
 * (docs/semantics/attention.md A9.3 [S9]; docs/semantics/quant.md Q2, inverse RoPE before wo_a;
 * ref/attention.c dsv4_ref_inverse_rope_mxfp8_rows), all three variants:
 * default (fl(a/448) and the correctly rounded fp32 log2, emulated in
 * integers), log2=exact (the exact ceil rule) and scale_rule=floor (x / 2^(byte-127)).
 *
 * x = fp32(o); the pairs of the last rope_head_dim lanes of every head get
 * the inverse GPT-J rotation at positions[t] in fp32 (products rounded,
 * then the sum: rope_device.h), NoPE lanes keep their bits; then MXFP8 of
 * every 32-lane block with the registry rule (quant_rules.h), bit-exact.
 *
 * One launch over [T*H, 512]: 8 lanes per thread (one 16-byte bf16 load;
 * rope_head_dim is a multiple of 32, so a thread's lanes are all NoPE or
 * all RoPE), 4 threads per 32-block, xor-shuffle amax, one 8-byte store of
 * codes per thread, the block's first thread stores the scale byte. */
#include "quant_device.h"
#include "rope_device.h"

namespace {

const char *const variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
enum { V_CEIL_F32LOG2 = 0, V_CEIL = 1, V_FLOOR = 2 };

constexpr int D = 512;

__global__ void rmx_kernel(const uint16_t *__restrict__ o, const int64_t *__restrict__ positions,
                           const float *__restrict__ cs, long long H, int rd, long long nchunks, int variant,
                           uint2 *__restrict__ data, uint8_t *__restrict__ scales)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = c < nchunks;
    float v[8];
    float m = dsv4q_float(0x7FC00000u);
    if (active) {
        load8_bf16(o, c * 8, v); /* step 1: x = fp32(o) */
        const int l = (int)(c % 64) * 8; /* first lane of the 8 in the head row */
        if (l >= D - rd) {       /* step 2: inverse GPT-J at positions[t] */
            const long long t = c / 64 / H;
            rope4(v, cs + positions[t] * rd, rd / 2, (l - (D - rd)) / 2, 0);
        }
        for (int i = 0; i < 8; i++)
            m = dsv4q_amax_step(m, v[i]);
    }
    m = group_amax(m, 4);
    if (!active)
        return;
    /* step 3: MXFP8 per 32-block (mx.c rules, quant_rules.h) */
    const uint8_t b = variant == V_FLOOR          ? dsv4q_fp8_scale_floor(m)
                      : variant == V_CEIL_F32LOG2 ? dsv4q_fp8_scale_ceil_f32log2(m)
                                                  : dsv4q_fp8_scale_ceil(m);
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < 8; i++) {
        const float q = variant == V_FLOOR ? dsv4q_div(v[i], dsv4q_pow2((int)b - 127)) /* x / 2^(byte-127) */
                                           : dsv4q_mul(v[i], dsv4q_pow2(127 - (int)b)); /* x * 2^(127-byte) */
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

struct rmx_shape {
    int o, pos, cs, d, s;
    int64_t rd;
    long long T, H, P;
};

int shape_of(const dsv4_hip_call *c, rmx_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "o", DSV4_PLUGIN_BFLOAT16, 3, &s->o, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "positions", DSV4_PLUGIN_INT64, 1, &s->pos, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "cos_sin_cache", DSV4_PLUGIN_FLOAT32, 2, &s->cs, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "data", DSV4_PLUGIN_FLOAT8_E4M3FN, 2, &s->d, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "scale", DSV4_PLUGIN_UINT8, 2, &s->s, err, errlen)) ||
        (rc = dsv4_hip_int(c, "rope_head_dim", &s->rd, err, errlen)))
        return rc;
    s->T = c->in[s->o].shape[0];
    s->H = c->in[s->o].shape[1];
    s->P = c->in[s->cs].shape[0];
    return DSV4_PLUGIN_OK;
}

/* rmx_inputs_of / rope_check: shapes, rope_head_dim a multiple of 32 up to
 * 512, positions inside the table, o finite. */
int rmx_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    rmx_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    if (c->in[s.o].shape[2] != D || c->in[s.pos].shape[0] != s.T || c->in[s.cs].shape[1] != s.rd)
        return QFAIL("%s: o [T, H, 512], positions [T], cos_sin_cache [P, rope_head_dim]", c->op);
    if (s.rd <= 0 || s.rd > D || s.rd % 32)
        return QFAIL("%s: rope_head_dim = %lld must be a multiple of 32 up to 512", c->op, (long long)s.rd);
    const dsv4_plugin_tensor *d = &c->out[s.d], *sc = &c->out[s.s];
    if (d->shape[0] != s.T || d->shape[1] != s.H * D || sc->shape[0] != s.T || sc->shape[1] != s.H * D / 32)
        return QFAIL("%s: data must be [T, H*512] and scale [T, H*16]", c->op);
    if (s.T * s.H * 64 / 256 > 0x7fffffffLL)
        return QFAIL("%s: too many rows for the grid", c->op);
    const int64_t *p = (const int64_t *)c->in[s.pos].data;
    for (long long t = 0; t < s.T; t++)
        if (p[t] < 0 || p[t] >= s.P)
            return QFAIL("%s: positions[%lld] = %lld outside the cos_sin_cache rows [0, %lld)", c->op, t,
                         (long long)p[t], s.P);
    const uint16_t *o = (const uint16_t *)c->in[s.o].data;
    for (long long i = 0; i < s.T * s.H * D; i++)
        if ((o[i] & 0x7F80u) == 0x7F80u)
            return QFAIL("%s: o flat element %lld is not finite", c->op, i);
    return DSV4_PLUGIN_OK;
}

hipError_t rmx_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    rmx_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const long long nchunks = s.T * s.H * 64;
    if (nchunks == 0)
        return hipSuccess;
    hipLaunchKernelGGL(rmx_kernel, dim3(grid_for(nchunks, 256)), dim3(256), 0, stream, (const uint16_t *)c->din[s.o],
                       (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs], s.H, (int)s.rd, nchunks, c->variant,
                       (uint2 *)c->dout[s.d], (uint8_t *)c->dout[s.s]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_rocm_inverse_rope_mxfp8_rows = {"rocm_inverse_rope_mxfp8_rows", variants, rmx_check,
                                                         rmx_launch};
