/* fp8_group_quant.cpp - FP8 per-1xg group quant (docs/semantics/quant.md
 * Q3.1 aiter HIP, Q3.2 vLLM Triton), the four variants of harness/ops_quant.c,
 * bit-exact with ref/fp8quant.c (IEEE fp32 division: nvcc's -prec-div
 * default, HIP clang's correctly rounded default; no fast-math).
 *
 * One launch over [M, K]: 8 elements per thread (16-byte bf16 load), g/8
 * aligned lanes per group (g/8 a power of two <= 32: g in 8..256, the
 * production 128 included), xor-shuffle amax, 8-byte code stores, the
 * group's first lane stores the fp32 scale (row-major or transposed). */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "fp8=fnuz", "impl=triton", "impl=triton,fp8=fnuz", NULL};

__global__ void group_kernel(const void *__restrict__ x, int is_bf16, long long nchunks, long long M,
                             long long K, int lanes, int triton, int fnuz, float fp8_max, float inv_max,
                             int transpose, uint2 *__restrict__ y, float *__restrict__ scale)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = c < nchunks;
    float v[8];
    float m = 1e-10f; /* amax floored at 1e-10 (docs/semantics/quant.md Q3.1 step 1, Q3.2 step 1); NaN ignored */
    if (active) {
        load8(x, is_bf16, c * 8, v);
        for (int i = 0; i < 8; i++)
            m = dsv4q_amax_step(m, v[i]);
    }
    m = group_amax(m, lanes);
    if (!active)
        return;
    float s, inv = 0.0f;
    if (triton) {
        s = m / fp8_max; /* division (Q3.2 step 2) */
    } else {
        s = m * inv_max;  /* fl(amax * fl(1/MAX)) (Q3.1 step 2) */
        inv = 1.0f / s;   /* IEEE division (Q3.1 step 3) */
    }
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < 8; i++) {
        float q = triton ? dsv4q_div(v[i], s) : dsv4q_mul(v[i], inv);
        q = q < -fp8_max ? -fp8_max : q > fp8_max ? fp8_max : q; /* clamp; NaN passes (fp8quant.c clampf) */
        const uint32_t code = dsv4q_fp8(q, fnuz);
        if (i < 4)
            lo |= code << (8 * i);
        else
            hi |= code << (8 * (i - 4));
    }
    y[c] = make_uint2(lo, hi);
    if (c % lanes == 0) {
        const long long g = c / lanes, G = K / (8LL * lanes), row = g / G, col = g % G;
        scale[transpose ? col * M + row : g] = s; /* (m, g) at g*M + m when transposed (docs/semantics/quant.md Q3.1) */
    }
}

struct gq_shape {
    int x, y, s, is_bf16;
    int64_t g, tr;
    long long M, K;
};

int shape_of(const dsv4_hip_call *c, gq_shape *s, char *err, size_t errlen)
{
    int rc;
    const int fnuz = c->variant & 1;
    if ((rc = quant_input_x(c, &s->x, &s->is_bf16, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "y", fnuz ? DSV4_PLUGIN_FLOAT8_E4M3FNUZ : DSV4_PLUGIN_FLOAT8_E4M3FN, 2,
                              &s->y, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "scale", DSV4_PLUGIN_FLOAT32, 2, &s->s, err, errlen)) ||
        (rc = dsv4_hip_int(c, "group_size", &s->g, err, errlen)) ||
        (rc = dsv4_hip_int(c, "transpose_scale", &s->tr, err, errlen)))
        return rc;
    s->M = c->in[s->x].shape[0];
    s->K = c->in[s->x].shape[1];
    return DSV4_PLUGIN_OK;
}

int group_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    gq_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    const long long lanes = s.g / 8;
    if (s.g % 8 != 0 || lanes < 1 || lanes > 32 || (lanes & (lanes - 1)))
        return QFAIL("fp8_group_quant: group_size %lld: the kernel needs 8 * 2^k <= 256", (long long)s.g);
    if (s.K % s.g != 0)
        return QFAIL("fp8_group_quant: K = %lld is not a multiple of group_size %lld", s.K, (long long)s.g);
    const long long G = s.K / s.g;
    const dsv4_plugin_tensor *y = &c->out[s.y], *sc = &c->out[s.s];
    if (y->shape[0] != s.M || y->shape[1] != s.K || sc->shape[0] != (s.tr ? G : s.M) ||
        sc->shape[1] != (s.tr ? s.M : G))
        return QFAIL("fp8_group_quant: output shapes do not match [M, K] = [%lld, %lld]", s.M, s.K);
    if (s.M * s.K / 8 > (long long)0x7fffffff * 256)
        return QFAIL("fp8_group_quant: tensor too large for the grid");
    return DSV4_PLUGIN_OK;
}

hipError_t group_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    gq_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const long long nchunks = s.M * s.K / 8;
    if (nchunks == 0)
        return hipSuccess;
    const int triton = c->variant >= 2, fnuz = c->variant & 1;
    /* FP8 max: 448 (fn), 240 (aiter fnuz), 224 (vLLM fnuz) (fp8quant.c dsv4_fp8q_default_max) */
    const float mx = !fnuz ? 448.0f : triton ? 224.0f : 240.0f;
    const int threads = 256;
    hipLaunchKernelGGL(group_kernel, dim3(grid_for(nchunks, threads)), dim3(threads), 0, stream, c->din[s.x],
                       s.is_bf16, nchunks, s.M, s.K, (int)(s.g / 8), triton, fnuz, mx, 1.0f / mx, (int)(s.tr != 0),
                       (uint2 *)c->dout[s.y], (float *)c->dout[s.s]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_fp8_group_quant = {"fp8_group_quant", variants, group_check, group_launch};
