/* rocm_inv_rope_einsum.cpp - wo_a on the bf16 path
 * (docs/semantics/gemm.md A10.1-A10.2 [S9]; ref/gemm.c dsv4_ref_inv_rope_einsum):
 * o_r = o, or with inverse_rope the inverse GPT-J rotation of the last
 * rope_head_dim lanes of every head in fp32 (unfused products, then the
 * sum, as ref/rope.c dsv4_rope_gptj_f32), rounded to bf16 (the kernel's
 * bf16 o_r, whose error the op's bound carries); then out[t, g, r] =
 * sum_d o_r[t, g, d] w[g, r, d] with fp32 accumulation (bf16 x bf16
 * products exact in fp32), bf16 RNE store.
 *
 * One launch, one warp per output element (t, g, r): lanes stride over
 * the Dg lanes of the group, each lane rotating its own lanes from the pair
 * (the rotation is recomputed per r: no scratch buffer), warp sum. */
#include "wo_a_common.h"

namespace {

const char *const variants[] = {"default", NULL};

__device__ inline float bf16f(uint16_t h) { return dsv4q_float((uint32_t)h << 16); }

__global__ void einsum_kernel(const uint16_t *__restrict__ o, const int64_t *__restrict__ positions,
                              const float *__restrict__ cs, const uint16_t *__restrict__ w, long long T,
                              long long H, long long G, long long R, int rd, int inverse, uint16_t *__restrict__ out)
{
    const int lane = (int)threadIdx.x % warpSize;
    const long long idx = (long long)blockIdx.x * (blockDim.x / warpSize) + threadIdx.x / warpSize;
    if (idx >= T * G * R)
        return; /* whole warp */
    const long long t = idx / (G * R), g = idx / R % G, r = idx % R;
    const long long Dg = H * 512 / G;
    const uint16_t *orow = o + t * H * 512; /* the token's H*512 lanes, viewed [G, Dg] */
    const uint16_t *wr = w + (g * R + r) * Dg;
    const float *crow = inverse ? cs + positions[t] * rd : cs;
    const int half = rd / 2, nope = 512 - rd;
    float s = 0.0f;
    for (long long d = lane; d < Dg; d += warpSize) {
        const long long j = g * Dg + d;
        const int l = (int)(j % 512);
        float x = bf16f(orow[j]);
        if (inverse && l >= nope) {
            const int k = (l - nope) / 2;
            const float c = crow[k], sn = crow[half + k]; /* cos | sin [S15] */
            const float e = bf16f(orow[j & ~1LL]), od = bf16f(orow[j | 1LL]);
            /* inverse GPT-J (docs/semantics/attention.md A9.1): e c + o s, o c - e s; fp32, then bf16 */
            x = (l & 1) ? __fsub_rn(__fmul_rn(od, c), __fmul_rn(e, sn)) : __fadd_rn(__fmul_rn(e, c), __fmul_rn(od, sn));
            x = bf16f(dsv4q_bf16(x));
        }
        s = fmaf(x, bf16f(wr[d]), s); /* "tgd,grd->tgr", fp32 accumulation */
    }
    s = warp_sum(s);
    if (lane == 0)
        out[idx] = dsv4q_bf16(s);
}

struct es_shape {
    int o, pos, cs, w, out;
    int64_t G, R, rd, inv;
    long long T, H, P;
};

int shape_of(const dsv4_hip_call *c, es_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "o:bfloat16:3 positions:int64:1 cos_sin_cache:float32:2 wo_a:bfloat16:2 -> "
                                  "out:bfloat16:2",
                               {&s->o, &s->pos, &s->cs, &s->w, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "n_local_groups o_lora_rank rope_head_dim inverse_rope",
                            {&s->G, &s->R, &s->rd, &s->inv}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->o], &s->T, &s->H);
    s->P = c->in[s->cs].shape[0];
    return DSV4_PLUGIN_OK;
}

/* einsum_args_of / dsv4_ref_inv_rope_einsum's contract. */
int check_shape(const dsv4_hip_call *c, const es_shape &s, char *err, size_t errlen)
{
    if (c->in[s.o].shape[2] != 512 || c->in[s.pos].shape[0] != s.T || c->in[s.cs].shape[1] != s.rd)
        return QFAIL("rocm_inv_rope_einsum: o [T, H, 512], positions [T], cos_sin_cache [P, rope_head_dim]");
    if (s.G < 1 || s.R < 0 || s.H < 1 || (s.H * 512) % s.G)
        return QFAIL("rocm_inv_rope_einsum: n_local_groups = %lld must divide H*512", (long long)s.G);
    const long long Dg = s.H * 512 / s.G;
    if (c->in[s.w].shape[0] != s.G * s.R || c->in[s.w].shape[1] != Dg)
        return QFAIL("rocm_inv_rope_einsum: wo_a must be [%lld, %lld]", (long long)(s.G * s.R), Dg);
    if (c->out[s.out].shape[0] != s.T || c->out[s.out].shape[1] != s.G * s.R)
        return QFAIL("rocm_inv_rope_einsum: out must be [T, G*R]");
    if (s.inv) {
        if (s.rd < 2 || s.rd > 512 || s.rd % 2)
            return QFAIL("rocm_inv_rope_einsum: rope_head_dim = %lld", (long long)s.rd);
        const int64_t *p = (const int64_t *)c->in[s.pos].data;
        for (long long t = 0; t < s.T; t++)
            if (p[t] < 0 || p[t] >= s.P)
                return QFAIL("rocm_inv_rope_einsum: positions[%lld] = %lld outside [0, %lld)", t, (long long)p[t],
                             s.P);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const es_shape &s, hipStream_t stream)
{
    return launch_per_output(s.T * s.G * s.R, c->prop, [&](dim3 grid, dim3 block) {
        hipLaunchKernelGGL(einsum_kernel, grid, block, 0, stream, (const uint16_t *)c->din[s.o],
                           (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs], (const uint16_t *)c->din[s.w],
                           s.T, s.H, (long long)s.G, (long long)s.R, (int)s.rd, (int)(s.inv != 0),
                           (uint16_t *)c->dout[s.out]);
    });
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_inv_rope_einsum, variants, es_shape);
