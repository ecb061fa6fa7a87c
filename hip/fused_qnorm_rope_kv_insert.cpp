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
 * One launch of 256-thread blocks: blocks [0, qblocks) take 16 q rows each,
 * a 32-lane team per 2 rows (lane l holds chunks l and l + 32 of 8 lanes
 * each, two 16-byte loads a row, every load of both rows issued first); the
 * row's sum is a xor tree inside the team: no barrier, no shared memory, and
 * a team is half an AMD wave64 (xor offsets below 32 stay inside it).  The
 * next blocks take 4 kv tokens each, 64 lanes a token: lane l holds lanes
 * 8l..8l+7 (one 16-byte load), lanes 56..63 the 64 RoPE lanes (4 pairs
 * each).  Every read a row needs goes out before any waits: positions[t]
 * with the row reads and the cos/sin rows as soon as it returns (before,
 * those two loads followed the sum, in series). */
#include "kv_encode.h"
#include "rope_device.h"

namespace {

const char *const variants[] = {"default", "fp8=fnuz", NULL};

constexpr int D = 512, RD = 64, NOPE_LANES = 56;
constexpr int THREADS = 256, TEAM = 32, TEAMS = THREADS / TEAM;
/* q rows per team: four 16-byte loads in flight a lane */
constexpr int Q_ROWS = 2, Q_ROWS_PER_BLOCK = TEAMS * Q_ROWS;
/* kv tokens per block: 64 lanes each */
constexpr int KV_TOKENS = THREADS / 64;
/* a team's chunks: lane l holds chunks l and l + 32; the RoPE chunks 56..63
 * are the second chunk of lanes 24..31 */
constexpr int ROPE_LANE0 = NOPE_LANES - TEAM;

/* The fp32 sum over a row's 64 chunk partials in the order block_sum gave
 * the 64-thread row before (the op's float policy bounds any order; this
 * one keeps the bits): on a 32-lane warp the xor tree of each warp's 32
 * chunks, then their sum; on a wave64 the xor tree of the 64 chunks, whose
 * first step (offset 32) is s0 + s1 on every lane.  Every lane of the warp
 * calls it (warp-uniform branch, full-mask shuffles). */
__device__ inline float team_row_sum(float s0, float s1)
{
    if (warpSize >= 64) {
        float s = s0 + s1;
        for (int off = TEAM / 2; off > 0; off >>= 1)
            s += __shfl_xor(s, off);
        return s;
    }
    for (int off = TEAM / 2; off > 0; off >>= 1) {
        s0 += __shfl_xor(s0, off);
        s1 += __shfl_xor(s1, off);
    }
    return s0 + s1;
}

/* The cos | sin quads of RoPE chunk 56 + k (k = l - ROPE_LANE0) at position pos. */
__device__ inline void load_cs(const float *__restrict__ cs, long long pos, int k, float4 *c4, float4 *s4)
{
    const float *row = cs + pos * RD + 4 * k;
    *c4 = *reinterpret_cast<const float4 *>(row);
    *s4 = *reinterpret_cast<const float4 *>(row + RD / 2);
}

/* Q branch: a team's Q_ROWS consecutive rows from b0 (docs/semantics/gemm.md A3, Q steps 1-4).
 * One cos/sin read for the team, at the first row's token: the rows share it unless they
 * cross a token (H not a multiple of Q_ROWS, or the last rows), when such a row reads its own
 * after the first row is done (registers: one set of cos/sin, not one a row). */
__device__ inline void q_rows(const uint16_t *__restrict__ q, int rows, int H, const int64_t *__restrict__ positions,
                              const float *__restrict__ cs, float eps, uint16_t *__restrict__ q_out, int b0, int l)
{
    /* row and token indices in 32 bits (T * H < 2^31, checked): one 32-bit division a team */
    const bool rope = l >= ROPE_LANE0;
    const int t0 = b0 < rows ? (int)((uint32_t)b0 / (uint32_t)H) : 0, h = b0 - t0 * H;
    long long pos = 0;
    if (b0 < rows && rope)
        pos = positions[t0]; /* first: the cos/sin reads wait on it */
    const uint4 *src = reinterpret_cast<const uint4 *>(q + (long long)b0 * D) + l;
    uint4 *dst = reinterpret_cast<uint4 *>(q_out + (long long)b0 * D) + l;
    uint4 raw[Q_ROWS][2];
#pragma unroll
    for (int j = 0; j < Q_ROWS; j++) {
        raw[j][0] = raw[j][1] = make_uint4(0, 0, 0, 0);
        if (b0 + j < rows) { /* chunks l and l + 32 of row b0 + j: 64 chunks a row */
            raw[j][0] = src[j * 64];
            raw[j][1] = src[j * 64 + TEAM];
        }
    }
    float4 c4 = make_float4(0, 0, 0, 0), s4 = c4;
    if (b0 < rows && rope)
        load_cs(cs, pos, l - ROPE_LANE0, &c4, &s4);
#pragma unroll
    for (int j = 0; j < Q_ROWS; j++) {
        float x0[8], x1[8];
        unpack8_bf16(raw[j][0], x0);
        unpack8_bf16(raw[j][1], x1);
        float s0 = 0.0f, s1 = 0.0f; /* each chunk's fmaf sum in element order, as before */
        for (int i = 0; i < 8; i++) {
            s0 = fmaf(x0[i], x0[i], s0);
            s1 = fmaf(x1[i], x1[i], s1);
        }
        const float ss = team_row_sum(s0, s1); /* the whole team: rows past the end add zeros */
        if (b0 + j >= rows)
            continue;
        /* rsqrt(mean(x^2) + eps) (docs/semantics/gemm.md A3, Q steps 2-3) */
        const float r = 1.0f / sqrtf(ss / (float)D + eps);
        for (int i = 0; i < 8; i++) {
            x0[i] *= r;
            x1[i] *= r;
        }
        if (rope) { /* forward GPT-J at positions[t] (Q 4) */
            if (h + j >= H) /* row b0 + j is of token t0 + (h + j) / H: its own cos/sin */
                load_cs(cs, positions[t0 + (h + j) / H], l - ROPE_LANE0, &c4, &s4);
            rope4_cs(x1, c4, s4, 1);
        }
        dst[j * 64] = pack8_bf16(x0); /* bf16 RNE (quant_device.h), 16-byte stores */
        dst[j * 64 + TEAM] = pack8_bf16(x1);
    }
}

/* KV branch: one token, 64 lanes (bit-exact, docs/semantics/gemm.md A3, KV steps 1-4). */
__device__ inline void kv_token(const uint16_t *__restrict__ kv, const int64_t *__restrict__ slots,
                                const int64_t *__restrict__ positions, const float *__restrict__ cs, long long B,
                                int fnuz, uint8_t *__restrict__ cache, long long t, int l)
{
    const bool rope = l >= NOPE_LANES;
    long long pos = 0;
    if (rope)
        pos = positions[t]; /* valid for every t < T (checked), so read before the slot is known */
    const long long slot = slots[t];
    const uint4 raw = *reinterpret_cast<const uint4 *>(kv + t * D + 8 * l); /* KV 1: fp32(kv), no norm */
    float4 c4 = make_float4(0, 0, 0, 0), s4 = c4;
    if (rope) {
        const float *row = cs + pos * RD + 4 * (l - NOPE_LANES);
        c4 = *reinterpret_cast<const float4 *>(row);
        s4 = *reinterpret_cast<const float4 *>(row + RD / 2);
    }
    if (slot < 0)
        return; /* skipped: never encoded (docs/semantics/gemm.md A3, KV branch); the whole token */
    float v[8];
    unpack8_bf16(raw, v);
    if (rope) {
        rope4_cs(v, c4, s4, 1); /* KV 2, fp32 */
        unpack8_bf16(pack8_bf16(v), v); /* KV 3: bf16 (kv_round_bf16 of each) */
    }
    /* KV 4 (docs/semantics/kvcache.md A2.2): default OCP 448; fnuz: the encoder still clamps at
     * 448 (docs/semantics/kvcache.md A2.3 [S15]) */
    kv_enc_opts o = kv_enc_default(0);
    o.fnuz = fnuz;
    long long row;
    const long long page = div_fast(slot, B, &row);
    kv_encode_lane(cache + page * B * 584, B, row, l, v, o);
}

__global__ void __launch_bounds__(THREADS)
qi_kernel(const uint16_t *__restrict__ q, long long T, long long H, const uint16_t *__restrict__ kv,
          const int64_t *__restrict__ slots, long long Ts, const int64_t *__restrict__ positions,
          const float *__restrict__ cs, float eps, long long B, int fnuz, uint16_t *__restrict__ q_out,
          uint8_t *__restrict__ cache)
{
    const int rows = (int)(T * H), qblocks = (rows + Q_ROWS_PER_BLOCK - 1) / Q_ROWS_PER_BLOCK;
    if ((int)blockIdx.x < qblocks) {
        const int team = (int)threadIdx.x / TEAM, l = (int)threadIdx.x % TEAM;
        q_rows(q, rows, (int)H, positions, cs, eps, q_out, ((int)blockIdx.x * TEAMS + team) * Q_ROWS, l);
        return;
    }
    const long long t = (long long)((int)blockIdx.x - qblocks) * KV_TOKENS + threadIdx.x / 64;
    if (t < Ts) /* a whole token: whole warps / one wave64 */
        kv_token(kv, slots, positions, cs, B, fnuz, cache, t, (int)threadIdx.x % 64);
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
    if (s.T * s.H + Q_ROWS_PER_BLOCK + s.Ts > 0x7fffffffLL) /* 32-bit row indices, the grid */
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
    const long long n = (s.T * s.H + Q_ROWS_PER_BLOCK - 1) / Q_ROWS_PER_BLOCK + (s.Ts + KV_TOKENS - 1) / KV_TOKENS;
    if (n == 0)
        return hipSuccess;
    hipLaunchKernelGGL(qi_kernel, dim3((unsigned)n), dim3(THREADS), 0, stream, (const uint16_t *)c->din[s.q], s.T,
                       s.H, (const uint16_t *)c->din[s.kv], (const int64_t *)c->din[s.sm], s.Ts,
                       (const int64_t *)c->din[s.pos], (const float *)c->din[s.cs], (float)s.eps, (long long)s.B,
                       (int)(c->variant == 1), (uint16_t *)c->dout[s.qo], (uint8_t *)c->dout[s.co]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(fused_qnorm_rope_kv_insert, variants, qi_shape);
