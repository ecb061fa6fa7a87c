/* fused_qk_rmsnorm_group_quant.cpp - RMSNorm of q and kv, then the aiter
 * 1x128 fp8 group quant of q; kv stays bf16 (docs/semantics/quant.md Q3.3).
 * Both variants of harness/ops_quant.c: the kernel computes y in fp32 as
 * the production kernel does (per-thread fmaf sum of squares, a tree across
 * the block, rcp = 1/sqrtf(ss/n + eps) with IEEE sqrt and division,
 * y = fl(fl(x*rcp)*w)), which the policies of both variants bound.
 *
 * One launch, 256-thread blocks of 8 rows: a team of 32 lanes per row
 * (a warp on NVIDIA, half a wave on AMD; the shuffles stay inside it, so no
 * block barrier) and 8 rows in flight per block instead of one; block
 * (b, 0) takes q rows 8b..8b+7, block (b, 1) the kv rows.  Lane l owns the
 * row's chunks l, l + 32, ... of 8 elements (16-byte loads); the first
 * HELD of them stay in registers between the passes (all of them up to
 * n = 1536, the production q_lora_rank), so the row is read once; pass 1
 * sums squares, a 5-step xor tree across the team; pass 2 writes codes with
 * 8-byte stores (groups of 128 = 16 aligned lanes, xor-shuffle amax) or
 * bf16 with 16-byte stores. */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "mode=faithful", NULL};

enum { TEAM = 32, ROWS_PER_BLOCK = 8, THREADS = TEAM * ROWS_PER_BLOCK, HELD = 6 };

struct fq_args {
    const uint16_t *q, *qw, *kv, *kvw;
    long long m, n1, n2;
    float qeps, kveps;
    int transpose;
};

/* Pass 2 of one chunk: y = fl(fl(x * rcp) * w) (step 4); q: the 1x128 fp8
 * group quant (steps 5-7), kv: bf16 (step 8).  Every lane of the team calls
 * it (the group amax shuffles); inactive lanes store nothing. */
__device__ inline void emit_chunk(const fq_args &a, bool is_q, long long r, long long ch, bool active,
                                  const float v[8], float rcp, uint2 *__restrict__ q_out,
                                  float *__restrict__ q_scale, int4 *__restrict__ kv_out)
{
    float y[8];
    float amax = 1e-10f;
    if (active) {
        float wv[8];
        load8_bf16(is_q ? a.qw : a.kvw, ch * 8, wv);
        for (int i = 0; i < 8; i++)
            y[i] = (v[i] * rcp) * wv[i];
        /* max(1e-10, the largest non-NaN |y|): dsv4q_amax_step's chain from
         * 1e-10 (never NaN), as one key fold (fold_amax_key) */
        if (is_q)
            amax = dsv4q_amax_of_key(fold_amax_key(y, dsv4q_amax_key(1e-10f)));
    }
    if (!is_q) { /* kv_out = bf16(y) (step 8) */
        if (active) {
            uint32_t u[4];
            for (int k = 0; k < 4; k++)
                u[k] = (uint32_t)dsv4q_bf16(y[2 * k]) | ((uint32_t)dsv4q_bf16(y[2 * k + 1]) << 16);
            kv_out[(r * a.n2) / 8 + ch] = make_int4((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
        }
        return;
    }
    amax = group_amax(amax, 16); /* 128-element groups (step 6) */
    if (!active)
        return;
    const float s = amax * (1.0f / 448.0f); /* fl(amax * fl(1/448)) */
    const float inv = 1.0f / s;
    float qv[8];
    for (int i = 0; i < 8; i++) {
        qv[i] = y[i] * inv;
#ifndef DSV4Q_HW_E4M3 /* the hardware conversion saturates to +-448 itself (satfinite; NaN passes both) */
        qv[i] = qv[i] < -448.0f ? -448.0f : qv[i] > 448.0f ? 448.0f : qv[i];
#endif
    }
    /* dsv4q_fp8 of each, four codes a word */
    q_out[(r * a.n1) / 8 + ch] = make_uint2(dsv4q_fp8x4(qv[0], qv[1], qv[2], qv[3], 0),
                                            dsv4q_fp8x4(qv[4], qv[5], qv[6], qv[7], 0));
    if ((ch & 15) == 0) {
        const long long g = ch / 16, G = a.n1 / 128;
        q_scale[a.transpose ? g * a.m + r : r * G + g] = s;
    }
}

__global__ void __launch_bounds__(THREADS)
    fused_kernel(fq_args a, uint2 *__restrict__ q_out, float *__restrict__ q_scale, int4 *__restrict__ kv_out)
{
    const int lane = (int)threadIdx.x % TEAM;
    const long long r = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / TEAM;
    if (r >= a.m)
        return; /* the whole team: no shuffle partner is lost */
    const bool is_q = blockIdx.y == 0;
    const long long n = is_q ? a.n1 : a.n2;
    const uint16_t *x = (is_q ? a.q : a.kv) + r * n;
    const long long nchunks = n / 8;
    /* pass 1: sum of squares, sequential fmaf per lane (docs/semantics/quant.md Q3.3 step 2); the held
     * chunks' loads all issue before the sum */
    uint4 held[HELD]; /* as bf16 bits: half the registers of fp32, so more rows in flight an SM */
#pragma unroll
    for (int k = 0; k < HELD; k++)
        if (lane + (long long)k * TEAM < nchunks)
            held[k] = *reinterpret_cast<const uint4 *>(x + (lane + (long long)k * TEAM) * 8);
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < HELD; k++)
        if (lane + (long long)k * TEAM < nchunks) {
            float v[8];
            unpack8_bf16(held[k], v);
            for (int i = 0; i < 8; i++)
                ss = fmaf(v[i], v[i], ss);
        }
    for (long long ch = lane + (long long)HELD * TEAM; ch < nchunks; ch += TEAM) { /* rows past HELD chunks */
        float v[8];
        load8_bf16(x, ch * 8, v);
        for (int i = 0; i < 8; i++)
            ss = fmaf(v[i], v[i], ss);
    }
    for (int off = TEAM / 2; off > 0; off >>= 1) /* xor offsets below 32 stay inside the team */
        ss += __shfl_xor(ss, off);
    const float rcp = 1.0f / sqrtf(ss / (float)n + (is_q ? a.qeps : a.kveps)); /* step 3 */
    /* pass 2: trip counts uniform over the team, so that every lane shuffles; held chunks by constant
     * index (registers, not a stack array) */
#pragma unroll
    for (int k = 0; k < HELD; k++)
        if ((long long)k * TEAM < nchunks) {
            float v[8];
            unpack8_bf16(held[k], v);
            emit_chunk(a, is_q, r, lane + (long long)k * TEAM, lane + (long long)k * TEAM < nchunks, v, rcp, q_out,
                       q_scale, kv_out);
        }
    for (long long base = (long long)HELD * TEAM; base < nchunks; base += TEAM) {
        const long long ch = base + lane;
        float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (ch < nchunks)
            load8_bf16(x, ch * 8, v); /* re-read (from cache) */
        emit_chunk(a, is_q, r, ch, ch < nchunks, v, rcp, q_out, q_scale, kv_out);
    }
}

struct fq_shape {
    int q, qw, kv, kvw, qo, qs, ko;
    int64_t g, tr;
    long long m, n1, n2;
};

int shape_of(const dsv4_hip_call *c, fq_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "q:bfloat16:2 q_weight:bfloat16:1 kv:bfloat16:2 kv_weight:bfloat16:1 -> "
                                  "q_out:float8_e4m3fn:2 q_scale:float32:2 kv_out:bfloat16:2",
                               {&s->q, &s->qw, &s->kv, &s->kvw, &s->qo, &s->qs, &s->ko}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "group_size transpose_scale", {&s->g, &s->tr}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->q], &s->m, &s->n1);
    s->n2 = c->in[s->kv].shape[1];
    return DSV4_PLUGIN_OK;
}

int check_shape(const dsv4_hip_call *c, const fq_shape &s, char *err, size_t errlen)
{
    if (s.g != 128 || s.n1 % 128 != 0 || s.n1 <= 0)
        return QFAIL("fused_qk_rmsnorm_group_quant: group_size must be 128 and n1 a positive multiple of it");
    if (s.n2 % 8 != 0 || s.n2 <= 0)
        return QFAIL("fused_qk_rmsnorm_group_quant: the kernel needs n2 a positive multiple of 8 (n2 = %lld)",
                     s.n2);
    if (c->in[s.kv].shape[0] != s.m || c->in[s.qw].shape[0] != s.n1 || c->in[s.kvw].shape[0] != s.n2)
        return QFAIL("fused_qk_rmsnorm_group_quant: q [m, n1], q_weight [n1], kv [m, n2], kv_weight [n2]");
    const long long G = s.n1 / 128;
    if (c->out[s.qo].shape[0] != s.m || c->out[s.qo].shape[1] != s.n1 || c->out[s.ko].shape[0] != s.m ||
        c->out[s.ko].shape[1] != s.n2 || c->out[s.qs].shape[0] != (s.tr ? G : s.m) ||
        c->out[s.qs].shape[1] != (s.tr ? s.m : G))
        return QFAIL("fused_qk_rmsnorm_group_quant: output shapes do not match the inputs");
    if (s.m > 0x7fffffff)
        return QFAIL("fused_qk_rmsnorm_group_quant: m too large for the grid");
    const dsv4_plugin_param *qe = dsv4_hip_param(c, "q_epsilon"), *ke = dsv4_hip_param(c, "kv_epsilon");
    if (!qe || !ke || qe->kind != DSV4_PLUGIN_FLOAT || ke->kind != DSV4_PLUGIN_FLOAT)
        return QFAIL("fused_qk_rmsnorm_group_quant: float parameters q_epsilon, kv_epsilon missing");
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const fq_shape &s, hipStream_t stream)
{
    if (s.m == 0)
        return hipSuccess;
    const float qe = (float)dsv4_hip_param(c, "q_epsilon")->f, ke = (float)dsv4_hip_param(c, "kv_epsilon")->f;
    const fq_args a = {(const uint16_t *)c->din[s.q], (const uint16_t *)c->din[s.qw], (const uint16_t *)c->din[s.kv],
                       (const uint16_t *)c->din[s.kvw], s.m, s.n1, s.n2, qe, ke, (int)(s.tr != 0)};
    hipLaunchKernelGGL(fused_kernel, dim3(grid_for(s.m, ROWS_PER_BLOCK), 2), dim3(THREADS), 0, stream, a,
                       (uint2 *)c->dout[s.qo], (float *)c->dout[s.qs], (int4 *)c->dout[s.ko]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(fused_qk_rmsnorm_group_quant, variants, fq_shape);
