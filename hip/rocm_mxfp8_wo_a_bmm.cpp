/* rocm_mxfp8_wo_a_bmm.cpp - wo_a on the MXFP8 path
 * (docs/semantics/gemm.md A10.3 [S9]; ref/gemm.c dsv4_ref_mxfp8_wo_a_bmm):
 * out[t, g*R + r] = sum_kb dot32(a, w) * 2^(sa-127) * 2^(sw-127) over the
 * 32-lane blocks of group g (tiles never cross groups), fp32 accumulation,
 * bf16 RNE store.  e4m3 x e4m3 products are exact in fp32.
 *
 * One launch, one warp per output element: lane l takes the 32-blocks
 * l, l + warpSize, ... (two 16-byte loads of each operand), the block dot
 * in fp32, scaled by the two e8m0 powers of two, and the warp sums. */
#include "wo_a_common.h"

namespace {

const char *const variants[] = {"default", NULL};

__global__ void bmm_kernel(const uint8_t *__restrict__ a, const uint8_t *__restrict__ as, const uint8_t *__restrict__ w,
                           const uint8_t *__restrict__ ws, long long T, long long G, long long R, long long K,
                           uint16_t *__restrict__ out)
{
    const int lane = (int)threadIdx.x % warpSize;
    const long long idx = (long long)blockIdx.x * (blockDim.x / warpSize) + threadIdx.x / warpSize;
    if (idx >= T * G * R)
        return; /* whole warp */
    const long long t = idx / (G * R), g = idx / R % G, r = idx % R, KB = K / 32;
    const uint8_t *ar = a + (t * G + g) * K, *wr = w + (g * R + r) * K;
    const uint8_t *asr = as + (t * G + g) * KB, *wsr = ws + (g * R + r) * KB;
    float s = 0.0f;
    for (long long kb = lane; kb < KB; kb += warpSize) {
        const uint4 *pa = reinterpret_cast<const uint4 *>(ar + kb * 32), *pw = reinterpret_cast<const uint4 *>(wr + kb * 32);
        const uint4 qa[2] = {pa[0], pa[1]}, qw[2] = {pw[0], pw[1]};
        float p = 0.0f;
        for (int h = 0; h < 2; h++) {
            const uint32_t xa[4] = {qa[h].x, qa[h].y, qa[h].z, qa[h].w}, xw[4] = {qw[h].x, qw[h].y, qw[h].z, qw[h].w};
            for (int i = 0; i < 16; i++) {
                const uint8_t ca = (uint8_t)(xa[i / 4] >> (8 * (i % 4))), cw = (uint8_t)(xw[i / 4] >> (8 * (i % 4)));
                p = fmaf(dsv4q_fp8_decode(ca, 0), dsv4q_fp8_decode(cw, 0), p); /* e4m3fn, NaN codes rejected */
            }
        }
        /* deq = code * 2^(byte - 127) per 1x32 block (e8m0, docs/semantics/gemm.md A10.3) */
        const float sc = __fmul_rn(dsv4q_pow2((int)asr[kb] - 127), dsv4q_pow2((int)wsr[kb] - 127));
        s = fmaf(p, sc, s);
    }
    s = warp_sum(s);
    if (lane == 0)
        out[idx] = dsv4q_bf16(s);
}

struct bmm_shape {
    int a, as, w, ws, out;
    int64_t G, R;
    long long T, K;
};

int shape_of(const dsv4_hip_call *c, bmm_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "a:float8_e4m3fn:2 a_scale:uint8:2 wo_a:float8_e4m3fn:2 wo_a_scale:uint8:2 -> "
                                  "out:bfloat16:2",
                               {&s->a, &s->as, &s->w, &s->ws, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "n_local_groups o_lora_rank", {&s->G, &s->R}, err, errlen)))
        return rc;
    s->T = c->in[s->a].shape[0];
    s->K = c->in[s->w].shape[1];
    return DSV4_PLUGIN_OK;
}

/* bmm_args_of / dsv4_ref_mxfp8_wo_a_bmm's contract: shapes, no NaN codes,
 * no e8m0 NaN scale 0xFF. */
int check_shape(const dsv4_hip_call *c, const bmm_shape &s, char *err, size_t errlen)
{
    const long long G = s.G, R = s.R, K = s.K, T = s.T;
    if (G < 1 || R < 0 || K % 32 || c->in[s.a].shape[1] != G * K || c->in[s.w].shape[0] != G * R ||
        c->in[s.as].shape[0] != T || c->in[s.as].shape[1] != G * K / 32 || c->in[s.ws].shape[0] != G * R ||
        c->in[s.ws].shape[1] != K / 32 || c->out[s.out].shape[0] != T || c->out[s.out].shape[1] != G * R)
        return QFAIL("rocm_mxfp8_wo_a_bmm: a [T, G*K], a_scale [T, G*K/32], wo_a [G*R, K], wo_a_scale [G*R, K/32], "
                     "out [T, G*R] with G = %lld, R = %lld, K = %lld (a multiple of 32)", G, R, K);
    const uint8_t *q[2] = {(const uint8_t *)c->in[s.a].data, (const uint8_t *)c->in[s.w].data};
    const uint8_t *sc[2] = {(const uint8_t *)c->in[s.as].data, (const uint8_t *)c->in[s.ws].data};
    const long long nq[2] = {T * G * K, G * R * K};
    for (int k = 0; k < 2; k++) {
        for (long long i = 0; i < nq[k]; i++)
            if ((q[k][i] & 0x7F) == 0x7F)
                return QFAIL("rocm_mxfp8_wo_a_bmm: %s flat element %lld is a NaN code", k ? "wo_a" : "a", i);
        for (long long i = 0; i < nq[k] / 32; i++)
            if (sc[k][i] == 0xFF)
                return QFAIL("rocm_mxfp8_wo_a_bmm: %s flat element %lld is the e8m0 NaN 0xFF",
                             k ? "wo_a_scale" : "a_scale", i);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const bmm_shape &s, hipStream_t stream)
{
    return launch_per_output(s.T * s.G * s.R, c->prop, [&](dim3 grid, dim3 block) {
        hipLaunchKernelGGL(bmm_kernel, grid, block, 0, stream, (const uint8_t *)c->din[s.a],
                           (const uint8_t *)c->din[s.as], (const uint8_t *)c->din[s.w], (const uint8_t *)c->din[s.ws],
                           s.T, (long long)s.G, (long long)s.R, s.K, (uint16_t *)c->dout[s.out]);
    });
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_mxfp8_wo_a_bmm, variants, bmm_shape);
