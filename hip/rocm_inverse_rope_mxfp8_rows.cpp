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
 * One launch over [T*H, 512], 256-thread blocks, one 32-lane block a
 * thread (rope_head_dim is a multiple of 32, so a block's lanes are all
 * NoPE or all RoPE): its four 16-byte bf16 loads issued first, the RoPE,
 * then quant_device.h store_mxfp8_block (the amax and the scale rule once,
 * two 16-byte stores of codes, one scale byte). */
#include "quant_device.h"
#include "rope_device.h"

namespace {

const char *const variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
/* the variant index is the rule number of store_mxfp8_block (quant_device.h) */
enum { V_CEIL_F32LOG2 = MXFP8_CEIL_F32LOG2, V_CEIL = MXFP8_CEIL, V_FLOOR = MXFP8_FLOOR };

constexpr int D = 512;

template <int VARIANT>
__global__ void __launch_bounds__(MX_THREADS)
    rmx_kernel(const uint16_t *__restrict__ o, const int64_t *__restrict__ positions, const float *__restrict__ cs,
               long long H, int rd, long long nblocks, uint4 *__restrict__ data, uint8_t *__restrict__ scales)
{
    const long long g = mx_block_index();
    if (g >= nblocks)
        return;
    const int l0 = (int)(g & 15) * 32; /* first lane of the block in the head row */
    const bool rope = l0 >= D - rd;
    /* a RoPE block's position is read before its lanes, so that the cos/sin
     * reads wait on one load latency, not on two in a row */
    const float *csrow = nullptr;
    if (rope) {
        const long long row = g >> 4;
        /* 32-bit division where it fits (always at bench shapes): a 64-bit one is a long subroutine */
        const long long t = (row >> 31) == 0 && (H >> 31) == 0 ? (long long)((uint32_t)row / (uint32_t)H) : row / H;
        csrow = cs + positions[t] * rd;
    }
    float v[MX_BLOCK_CHUNKS][8];
    load_mx_block(o, 1, g, v); /* step 1: x = fp32(o) */
    if (rope) {                /* step 2: inverse GPT-J at positions[t] */
        #pragma unroll
        for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
            rope4(v[k], csrow, rd / 2, (l0 + 8 * k - (D - rd)) / 2, 0);
    }
    store_mxfp8_block<VARIANT, false>(v, data + 2 * g, scales + g); /* step 3: MXFP8 per 32-block (mx.c rules) */
}

struct rmx_shape {
    int o, pos, cs, d, s;
    int64_t rd;
    long long T, H, P;
};

int shape_of(const dsv4_hip_call *c, rmx_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "o:bfloat16:3 positions:int64:1 cos_sin_cache:float32:2 -> data:float8_e4m3fn:2 "
                                  "scale:uint8:2",
                               {&s->o, &s->pos, &s->cs, &s->d, &s->s}, err, errlen)) ||
        (rc = dsv4_hip_int(c, "rope_head_dim", &s->rd, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->o], &s->T, &s->H);
    s->P = c->in[s->cs].shape[0];
    return DSV4_PLUGIN_OK;
}

/* rmx_inputs_of / rope_check: shapes, rope_head_dim a multiple of 32 up to
 * 512, positions inside the table, o finite. */
int check_shape(const dsv4_hip_call *c, const rmx_shape &s, char *err, size_t errlen)
{
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

hipError_t launch_shape(const dsv4_hip_call *c, const rmx_shape &s, hipStream_t stream)
{
    const long long nblocks = s.T * s.H * 16;
    if (nblocks == 0)
        return hipSuccess;
    const unsigned grid = grid_for(nblocks, MX_THREADS);
    const uint16_t *o = (const uint16_t *)c->din[s.o];
    const int64_t *pos = (const int64_t *)c->din[s.pos];
    const float *cs = (const float *)c->din[s.cs];
    uint4 *data = (uint4 *)c->dout[s.d];
    uint8_t *sc = (uint8_t *)c->dout[s.s];
    if (c->variant == V_FLOOR)
        hipLaunchKernelGGL(rmx_kernel<V_FLOOR>, dim3(grid), dim3(MX_THREADS), 0, stream, o, pos, cs, s.H,
                           (int)s.rd, nblocks, data, sc);
    else if (c->variant == V_CEIL)
        hipLaunchKernelGGL(rmx_kernel<V_CEIL>, dim3(grid), dim3(MX_THREADS), 0, stream, o, pos, cs, s.H,
                           (int)s.rd, nblocks, data, sc);
    else
        hipLaunchKernelGGL(rmx_kernel<V_CEIL_F32LOG2>, dim3(grid), dim3(MX_THREADS), 0, stream, o, pos, cs, s.H,
                           (int)s.rd, nblocks, data, sc);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_inverse_rope_mxfp8_rows, variants, rmx_shape);
