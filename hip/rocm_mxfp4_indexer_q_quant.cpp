/* rocm_mxfp4_indexer_q_quant.cpp - RoPE (the token's own position) + MXFP4
 * of the index queries, the four e8m0 bytes of a head as one little-endian
 * int32, and the fp32 head weights; both quant variants, bit-exact with
 * ref/indexer.c dsv4_ref_indexer_q_quant (docs/semantics/indexer.md Q4.2).
 *
 * One launch, 64 rows (token, head) per 256-thread block, 16 at a time in
 * four steps, each row in two halves of 8 lanes: threads [0, 128) take the
 * NoPE halves (dims 0..63) of the block's rows and threads [128, 256) the
 * RoPE halves, so that every warp (wave) runs one path: with the halves in
 * one warp, each warp issued the RoPE (cos / sin reads, the position's
 * division, the bf16 roundings) with half its lanes idle.  A thread issues
 * the loads of all four of its rows (and a RoPE thread its four positions,
 * then their cos / sin) before it quantizes the first, so that 64 bytes of
 * q a thread are in flight, not 16.  Lane l of a half holds its dims
 * 8l..8l+7 (one 16-byte load; a RoPE lane reads its 4 cos and its 4 sin as
 * one 16-byte load each), a 32-block is 4 lanes (2-step xor-shuffle amax of
 * integer keys), each lane stores its 8 codes as one 32-bit word, and lane
 * 0 of a half stores its two scale bytes as one 16-bit word (lane 0 of the
 * NoPE half also the weight). */
#include "indexer_common.h"

namespace {

using namespace idxr;

enum { HALF_LANES = 8, ROWS_PER_STEP = 16, STEPS = 4, THREADS = 2 * HALF_LANES * ROWS_PER_STEP };

struct qq_args {
    const uint16_t *q;
    const int64_t *pos;
    const float *cs, *w;
    int rows, H; /* T * H < 2^31 (qq_check): 32-bit index arithmetic */
    float ws_b, ss_a, hs_a;
};

template <bool VARIANT_A>
__global__ void __launch_bounds__(THREADS, 4) /* 64 registers: 1024 threads an SM, 64 KiB of q in flight */
    qquant_kernel(qq_args a, uint32_t *__restrict__ packed, uint16_t *__restrict__ scales, float *__restrict__ wout)
{
    /* half 0: NoPE, half 1: RoPE; THREADS / 2 is a multiple of both warp sizes, so a warp holds one half */
    const int half = (int)threadIdx.x / (THREADS / 2), t = (int)threadIdx.x % (THREADS / 2);
    const int lane = t % HALF_LANES, d0 = (D - ROPE) * half + 8 * lane;
    const int th0 = (int)blockIdx.x * (ROWS_PER_STEP * STEPS) + t / HALF_LANES;
    uint4 raw[STEPS];
    float4 c4[STEPS], s4[STEPS];
#pragma unroll
    for (int k = 0; k < STEPS; k++) { /* every q load first */
        const int th = th0 + k * ROWS_PER_STEP;
        raw[k] = th < a.rows ? *reinterpret_cast<const uint4 *>(a.q + ((long long)th * D + d0)) : make_uint4(0, 0, 0, 0);
    }
    if (half) { /* RoPE at the token's own position: the positions, then their cos / sin */
        int64_t p[STEPS];
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const int th = th0 + k * ROWS_PER_STEP;
            p[k] = th < a.rows ? a.pos[th / a.H] : 0;
        }
        const int k0 = 4 * lane; /* (d0 - (D - ROPE)) / 2 */
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            c4[k] = *reinterpret_cast<const float4 *>(a.cs + p[k] * ROPE + k0);
            s4[k] = *reinterpret_cast<const float4 *>(a.cs + p[k] * ROPE + ROPE / 2 + k0);
        }
    }
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int th = th0 + k * ROWS_PER_STEP;
        const bool active = th < a.rows;
        float x[8];
        unpack8_bf16(raw[k], x); /* NoPE lanes raw (docs/semantics/indexer.md Q4.2) */
        if (half)
            rope8_bf16(x, c4[k], s4[k]); /* bf16 out; an inactive row rotates zeros */
        uint8_t sb;
        /* all lanes: full-mask shuffles; A: ceil log2_f32 + threshold e2m1, B: the bit rule + RNE */
        const uint32_t w = VARIANT_A ? quant8<DSV4Q_FP4_CEIL_F32LOG2, DSV4Q_ELEM_THRESHOLD>(x, &sb)
                                     : quant8<DSV4Q_FP4_CEIL, DSV4Q_ELEM_RNE>(x, &sb);
        /* the half's two scale bytes (lanes 0, 4) to lane 0: [T, H, 4] is one little-endian int32 per head,
         * bytes 2 half, 2 half + 1 */
        const uint32_t s4b = (uint32_t)__shfl_xor((int)sb, 4);
        if (!active)
            continue;
        packed[(long long)th * (TB / 4) + HALF_LANES * half + lane] = w;
        if (lane == 0) {
            scales[2 * (long long)th + half] = (uint16_t)((uint32_t)sb | (s4b << 8));
            if (!half) {
                /* B: fl(w * fl32(softmax_scale * head_scale)); A: fl(fl(w * ss) * hs) (docs/semantics/indexer.md Q4.2) */
                const float wi = a.w[th];
                wout[th] = VARIANT_A ? __fmul_rn(__fmul_rn(wi, a.ss_a), a.hs_a) : __fmul_rn(wi, a.ws_b);
            }
        }
    }
}

struct qq_shape {
    int pos, q, cs, w, op, os, ow;
    double ss, hs;
};

int shape_of(const dsv4_hip_call *c, qq_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "positions:int64:1 index_q:bfloat16:3 index_q_cos_sin_cache:float32:2 "
                                  "index_weights:float32:2 -> q_packed:uint8:3 q_scale:int32:2 "
                                  "weights_out:float32:2",
                               {&s->pos, &s->q, &s->cs, &s->w, &s->op, &s->os, &s->ow}, err, errlen)) ||
        (rc = dsv4_hip_float(c, "softmax_scale", &s->ss, err, errlen)) ||
        (rc = dsv4_hip_float(c, "head_scale", &s->hs, err, errlen)))
        return rc;
    return DSV4_PLUGIN_OK;
}

/* Memory safety: shapes and every position inside cos_sin_cache. */
int check_shape(const dsv4_hip_call *c, const qq_shape &s, char *err, size_t errlen)
{
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

hipError_t launch_shape(const dsv4_hip_call *c, const qq_shape &s, hipStream_t stream)
{
    const long long T = c->in[s.q].shape[0], H = c->in[s.q].shape[1];
    if (T * H == 0)
        return hipSuccess;
    /* the Python floats reach the kernel as fp32 arguments (docs/semantics/indexer.md Q4.2; the
     * seeds pass the product softmax_scale * head_scale, [SEED1]) */
    const qq_args a = {(const uint16_t *)c->din[s.q], (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs],
                       (const float *)c->din[s.w], (int)(T * H), (int)H, (float)(s.ss * s.hs), (float)s.ss,
                       (float)s.hs};
    const unsigned grid = grid_for(T * H, ROWS_PER_STEP * STEPS);
    if (c->variant == 1)
        hipLaunchKernelGGL(qquant_kernel<true>, dim3(grid), dim3(THREADS), 0, stream, a, (uint32_t *)c->dout[s.op],
                           (uint16_t *)c->dout[s.os], (float *)c->dout[s.ow]);
    else
        hipLaunchKernelGGL(qquant_kernel<false>, dim3(grid), dim3(THREADS), 0, stream, a, (uint32_t *)c->dout[s.op],
                           (uint16_t *)c->dout[s.os], (float *)c->dout[s.ow]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_mxfp4_indexer_q_quant, idxr::quant_variants, qq_shape);
