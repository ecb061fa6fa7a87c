/* rocm_inverse_rope_rows.cpp - rocm_inverse_rope_rows_
 * (docs/semantics/attention.md A9.1 [S9]): in place on the bf16 output o [T, H, 512],
 * rows t >= rotated get the inverse GPT-J rotation of the last rope_dim
 * lanes at positions[t] in fp32, each lane stored as bf16 RNE; NoPE lanes
 * and rows < rotated are not touched (never written).  One thread per
 * rotated lane pair, one launch. */
#include "kernels.h"

namespace {

const char *const variants[] = {"default", NULL};

constexpr int D = 512;

__device__ inline uint32_t bf16_rne(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

__global__ void inv_rope_kernel(uint16_t *__restrict__ o, const int64_t *__restrict__ positions,
                                const float *__restrict__ cs, long long H, long long rotated, int rd,
                                long long npairs)
{
    const int half = rd / 2;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < npairs; i += stride) {
        const long long row = i / half; /* (t - rotated) * H + h */
        const int k = (int)(i % half);
        const long long t = rotated + row / H;
        const float *c_row = cs + positions[t] * rd;
        const float c = c_row[k], s = c_row[half + k]; /* cos | sin layout [S15] */
        uint32_t *pair = reinterpret_cast<uint32_t *>(o + (t * H + row % H) * D + (D - rd)) + k;
        const uint32_t w = *pair; /* GPT-J pair (2k, 2k+1) [S14] */
        const float e = __uint_as_float(w << 16), od = __uint_as_float(w & 0xFFFF0000u);
        /* e' = e c + o s, o' = o c - e s: each product rounded to fp32, then
         * the sum (ref/rope.c dsv4_rope_gptj_f32, no contraction) */
        const float e2 = __fadd_rn(__fmul_rn(e, c), __fmul_rn(od, s));
        const float o2 = __fsub_rn(__fmul_rn(od, c), __fmul_rn(e, s));
        *pair = bf16_rne(e2) | bf16_rne(o2) << 16; /* bf16 RNE store [S9] */
    }
}

struct rope_shape {
    int o_in, pos, cs, o_out;
    int64_t T, H, rotated, rd, num_pos;
};

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

int shape_of(const dsv4_hip_call *c, rope_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "positions:int64:1 cos_sin_cache:float32:2 -> o:bfloat16:3",
                               {&s->pos, &s->cs, &s->o_out}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "rotated rope_head_dim", {&s->rotated, &s->rd}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->out[s->o_out], &s->T, &s->H);
    s->num_pos = c->in[s->cs].shape[0];
    return DSV4_PLUGIN_OK;
}

/* The contract of rope_check (ref/attention.c): rope_dim even in (0, 512],
 * rotated in [0, T], positions of the rotated rows inside the cache. */
int check_shape(const dsv4_hip_call *c, const rope_shape &s, char *err, size_t errlen)
{
    if (c->out[s.o_out].shape[2] != D || c->in[s.pos].shape[0] != s.T)
        return FAIL("%s: o must be [T, H, 512] and positions [T]", c->op);
    if (s.rd <= 0 || s.rd > D || s.rd % 2 || c->in[s.cs].shape[1] != s.rd)
        return FAIL("%s: rope_head_dim = %lld must be even, in (0, 512], and cos_sin_cache's width", c->op,
                    (long long)s.rd);
    if (s.rotated < 0 || s.rotated > s.T)
        return FAIL("%s: rotated = %lld must be in [0, T = %lld]", c->op, (long long)s.rotated, (long long)s.T);
    const int64_t *p = (const int64_t *)c->in[s.pos].data;
    for (int64_t t = s.rotated; t < s.T; t++)
        if (p[t] < 0 || p[t] >= s.num_pos)
            return FAIL("%s: positions[%lld] = %lld outside the cos_sin_cache rows [0, %lld)", c->op, (long long)t,
                        (long long)p[t], (long long)s.num_pos);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const rope_shape &s, hipStream_t stream)
{
    const long long npairs = (long long)(s.T - s.rotated) * s.H * (s.rd / 2);
    if (npairs <= 0)
        return hipSuccess;
    const int threads = 256;
    long long blocks = (npairs + threads - 1) / threads;
    const long long cap = (long long)c->prop->multiProcessorCount * 32;
    blocks = blocks < cap ? blocks : cap;
    hipLaunchKernelGGL(inv_rope_kernel, dim3((unsigned)blocks), dim3(threads), 0, stream, (uint16_t *)c->dout[s.o_out],
                       (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs], (long long)s.H,
                       (long long)s.rotated, (int)s.rd, npairs);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_inverse_rope_rows, variants, rope_shape);
