/* fused_qnorm_rope_kv_insert.cpp - _fused_qnorm_rope_kv_insert
 * (docs/semantics/gemm.md A3 [S15, S16]; ref/compressor.c), both variants:
 * default (OCP e4m3fn, FP8MAX 448) and fp8=fnuz (clamp to +-448, then
 * e4m3fnuz codes, saturating: docs/semantics/kvcache.md A2.3, docs/semantics/README.md A15.3).
 *
 * Q branch (within the op's float policy): per (t, h) x = fp32(q), y = x *
 * 1/sqrt(mean(x^2) + eps) in fp32 (no weight, docs/semantics/gemm.md A3, Q steps 2-3), forward GPT-J
 * RoPE of lanes 448..511 at positions[t] in fp32 (Q 4), bf16 RNE store.
 * KV branch (bit-exact): y = fp32(kv[t]), forward RoPE of lanes 448..511 in
 * fp32 with unfused products (KV 2), RoPE lanes to bf16 (KV 3), the
 * 584-byte record at slot_mapping[t] (kv_encode.h, KV 4); slot -1 skipped.
 *
 * One launch of 64-thread blocks: blocks [0, ceil(T*H / 2)) take two q rows
 * each (Q_ROWS), the next Ts blocks one kv token each.  Lane l holds lanes 8l..8l+7 (one 16-byte
 * load); lanes 56..63 hold the 64 RoPE lanes (4 pairs each). */
#include "kv_encode.h"
#include "rope_device.h"

namespace {

const char *const variants[] = {"default", "fp8=fnuz", NULL};

constexpr int D = 512, RD = 64, NOPE_LANES = 56;
/* q rows per 64-thread block: both rows' loads in flight together (two
 * rows of 1 KiB a block instead of one) */
constexpr int Q_ROWS = 2;

__global__ void __launch_bounds__(64)
qi_kernel(const uint16_t *__restrict__ q, long long T, long long H, const uint16_t *__restrict__ kv,
          const int64_t *__restrict__ slots, const int64_t *__restrict__ positions,
          const float *__restrict__ cs, float eps, long long B, int fnuz, uint16_t *__restrict__ q_out,
          uint8_t *__restrict__ cache)
{
    const int l = (int)threadIdx.x;
    const long long rows = T * H, qblocks = (rows + Q_ROWS - 1) / Q_ROWS;
    float v[8];
    if (blockIdx.x < qblocks) {
        float x[Q_ROWS][8], ss[Q_ROWS];
#pragma unroll
        for (int j = 0; j < Q_ROWS; j++) { /* both rows' loads first */
            const long long b = (long long)blockIdx.x * Q_ROWS + j;
            ss[j] = 0.0f;
            if (b < rows)
                load8_bf16(q, b * D + 8 * l, x[j]);
        }
#pragma unroll
        for (int j = 0; j < Q_ROWS; j++) {
            const long long b = (long long)blockIdx.x * Q_ROWS + j;
            if (b < rows)
                for (int i = 0; i < 8; i++)
                    ss[j] = fmaf(x[j][i], x[j][i], ss[j]);
            ss[j] = block_sum(ss[j]); /* the 64 threads of the row; every thread calls it */
        }
#pragma unroll
        for (int j = 0; j < Q_ROWS; j++) {
            const long long b = (long long)blockIdx.x * Q_ROWS + j;
            if (b >= rows)
                break;
            long long h;
            const long long t = div_fast(b, H, &h);
            /* rsqrt(mean(x^2) + eps) (docs/semantics/gemm.md A3, Q steps 2-3) */
            const float r = 1.0f / sqrtf(ss[j] / (float)D + eps);
            for (int i = 0; i < 8; i++)
                x[j][i] *= r;
            if (l >= NOPE_LANES) /* forward GPT-J at positions[t] (Q 4) */
                rope4(x[j], cs + positions[t] * RD, RD / 2, 4 * (l - NOPE_LANES), 1);
            uint32_t w[4];
            for (int i = 0; i < 4; i++)
                w[i] = (uint32_t)dsv4q_bf16(x[j][2 * i]) | (uint32_t)dsv4q_bf16(x[j][2 * i + 1]) << 16;
            *reinterpret_cast<uint4 *>(q_out + b * D + 8 * l) = make_uint4(w[0], w[1], w[2], w[3]);
        }
        return;
    }
    const long long t = blockIdx.x - qblocks;
    const long long slot = slots[t];
    load8_bf16(kv, t * D + 8 * l, v); /* KV 1: fp32(kv), no norm; issued with the slot read */
    if (slot < 0)
        return; /* skipped: never encoded (docs/semantics/gemm.md A3, KV branch) */
    if (l >= NOPE_LANES) {
        rope4(v, cs + positions[t] * RD, RD / 2, 4 * (l - NOPE_LANES), 1); /* KV 2, fp32 */
        for (int i = 0; i < 8; i++)
            v[i] = kv_round_bf16(v[i]); /* KV 3: bf16 */
    }
    /* KV 4 (docs/semantics/kvcache.md A2.2): default OCP 448; fnuz: the encoder still clamps at
     * 448 (docs/semantics/kvcache.md A2.3 [S15]) */
    kv_enc_opts o = kv_enc_default(0);
    o.fnuz = fnuz;
    long long row;
    const long long page = div_fast(slot, B, &row);
    kv_encode_lane(cache + page * B * 584, B, row, l, v, o);
}

struct qi_shape {
    int q, kv, sm, pos, cs, qo, co;
    int64_t B;
    double eps;
    long long T, H, Ts, nb, P;
};

int shape_of(const dsv4_hip_call *c, qi_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "q:bfloat16:3 kv:bfloat16:2 slot_mapping:int64:1 positions:int64:1 "
                                  "cos_sin_cache:float32:2 -> q:bfloat16:3 swa_cache:uint8:3",
                               {&s->q, &s->kv, &s->sm, &s->pos, &s->cs, &s->qo, &s->co}, err, errlen)) ||
        (rc = dsv4_hip_int(c, "block_size", &s->B, err, errlen)) ||
        (rc = dsv4_hip_float(c, "eps", &s->eps, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->q], &s->T, &s->H);
    s->Ts = c->in[s->sm].shape[0];
    s->nb = c->out[s->co].shape[0];
    s->P = c->in[s->cs].shape[0];
    return DSV4_PLUGIN_OK;
}

/* qi_args_of's shapes; positions of all T rows inside the table; slots -1
 * or inside the cache. */
int check_shape(const dsv4_hip_call *c, const qi_shape &s, char *err, size_t errlen)
{
    const int64_t *cs = c->in[s.cs].shape, *kv = c->in[s.kv].shape, *co = c->out[s.co].shape, *qo = c->out[s.qo].shape;
    if (c->in[s.q].shape[2] != D || kv[1] != D || kv[0] != s.T || c->in[s.pos].shape[0] != s.T || s.Ts > s.T ||
        cs[1] != RD || s.B < 1 || co[1] != s.B || co[2] != 584 || qo[0] != s.T || qo[1] != s.H || qo[2] != D)
        return QFAIL("fused_qnorm_rope_kv_insert: q [T, H, 512], kv [T, 512], positions [T], slot_mapping [Ts <= T], "
                     "cos_sin_cache [P, 64], swa_cache [nb, block_size = %lld, 584]", (long long)s.B);
    if (s.T * s.H + s.Ts > 0x7fffffffLL)
        return QFAIL("fused_qnorm_rope_kv_insert: too many rows for the grid");
    const int64_t *p = (const int64_t *)c->in[s.pos].data, *sl = (const int64_t *)c->in[s.sm].data;
    for (long long t = 0; t < s.T; t++)
        if (p[t] < 0 || p[t] >= s.P)
            return QFAIL("fused_qnorm_rope_kv_insert: positions[%lld] = %lld outside [0, %lld)", t, (long long)p[t], s.P);
    for (long long t = 0; t < s.Ts; t++)
        if (sl[t] < -1 || sl[t] >= s.nb * s.B)
            return QFAIL("fused_qnorm_rope_kv_insert: slot_mapping[%lld] = %lld is neither -1 nor in [0, %lld)", t,
                         (long long)sl[t], s.nb * s.B);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const qi_shape &s, hipStream_t stream)
{
    const long long n = (s.T * s.H + Q_ROWS - 1) / Q_ROWS + s.Ts;
    if (n == 0)
        return hipSuccess;
    hipLaunchKernelGGL(qi_kernel, dim3((unsigned)n), dim3(64), 0, stream, (const uint16_t *)c->din[s.q], s.T, s.H,
                       (const uint16_t *)c->din[s.kv], (const int64_t *)c->din[s.sm],
                       (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs], (float)s.eps, (long long)s.B,
                       (int)(c->variant == 1), (uint16_t *)c->dout[s.qo], (uint8_t *)c->dout[s.co]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(fused_qnorm_rope_kv_insert, variants, qi_shape);
