/* gemm_a8w8_blockscale.cpp - the block-scaled fp8 GEMM
 * (docs/semantics/gemm.md Q7; ref/gemm.c), all three registry variants:
 * default (e4m3fn, plain [N, K] weight, x_scale [M, K/128]), bpreshuffle
 * (WQ = shuffle_weight(W, (16,16)) bytes, x_scale stored [K/128][M]) and
 * fp8=fnuz (e4m3fnuz codes, plain layout).
 *
 * Y[m, n] = sum_kb fl(fl(P_kb[m, n] * xs[m, kb]) * ws[n/128, kb]), the
 * Triton kernel's order (docs/semantics/gemm.md Q7: acc += fl(P xs) ws, P the fp32 dot of one
 * 128-wide K block), fp32 accumulation, bf16 RNE store.  fp8 x fp8 products
 * are exact in fp32; the op's bound (gamma_n G, n = K + 3K/128) is
 * independent of the summation order inside a block.
 *
 * One launch: a 256-thread block computes a 128 x 128 tile of Y (8 x 8 per
 * thread, fp32 FMA on CUDA cores / VALU: no MFMA / mma path).  Each K block
 * of 128 is walked in 4 steps of 32: the block loads the 128 x 32 A and B
 * slices as 16-byte chunks (a shuffled weight's 16-byte chunk is also 16
 * consecutive k of one row n, so both layouts load the same way, only the
 * address differs), decodes them through a 256-entry shared LUT into
 * k-major shared tiles, and every thread accumulates its 8 x 8 P; at the
 * end of the K block the scales are applied (N tiles are aligned to the
 * 128-row weight blocks, so one ws per tile and K block). */
#include "quant_device.h"

namespace {

enum { V_PLAIN = 0, V_BPRESHUFFLE = 1, V_FNUZ = 2 };

const char *const variants[] = {"default", "bpreshuffle", "fp8=fnuz", NULL};

constexpr int BM = 128, BN = 128, BK = 32, KBLK = 128, THREADS = 256, PAD = 4;

/* Byte offset of the 16-byte chunk holding W[n, k0..k0+15] (k0 % 16 == 0):
 * plain n*K + k0; shuffled, aiter shuffle.py IN = IK = 16, BK = 32, Kp = 16
 * (ref/gemm.c dsv4_shuffle_index with k % 16 == 0). */
__device__ inline long long w_chunk(long long n, long long k0, long long K, int shuffled)
{
    if (!shuffled)
        return n * K + k0;
    return ((((n / 16) * (K / 32) + k0 / 32) * 2 + (k0 % 32) / 16) * 16 + n % 16) * 16;
}

/* 16 codes -> fp32 through the LUT, stored k-major: dst[(k0 + j) * ld + r]. */
__device__ inline void decode16(const uint4 q, const float *lut, float *dst, int ld, int r)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int i = 0; i < 16; i++)
        dst[i * ld + r] = lut[(w[i / 4] >> (8 * (i % 4))) & 0xFFu];
}

__global__ void __launch_bounds__(THREADS)
gemm_kernel(const uint8_t *__restrict__ xq, const uint8_t *__restrict__ wq, const float *__restrict__ xs,
            const float *__restrict__ ws, long long M, long long N, long long K, int fnuz, int shuffled,
            int xs_transposed, uint16_t *__restrict__ y)
{
    __shared__ float lut[256];
    __shared__ __align__(16) float As[BK][BM + PAD];
    __shared__ __align__(16) float Bs[BK][BN + PAD];
    const int tid = (int)threadIdx.x;
    for (int b = tid; b < 256; b += THREADS)
        lut[b] = dsv4q_fp8_decode((uint8_t)b, fnuz); /* NaN codes were rejected by the host check */
    const long long m0 = (long long)blockIdx.y * BM, n0 = (long long)blockIdx.x * BN;
    const long long KB = K / KBLK;
    const int tx = tid % 16, ty = tid / 16;
    /* loader: row lr of the tile, 16 k at ls */
    const int lr = tid / 2, ls = (tid % 2) * 16;
    const long long am = m0 + lr, bn = n0 + lr;
    float acc[8][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.0f;
    __syncthreads();
    for (long long kb = 0; kb < KB; kb++) {
        float p[8][8];
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++)
                p[i][j] = 0.0f;
        for (int ks = 0; ks < KBLK; ks += BK) {
            const long long k0 = kb * KBLK + ks + ls;
            const uint4 zero = make_uint4(0, 0, 0, 0);
            const uint4 qa = am < M ? *reinterpret_cast<const uint4 *>(xq + am * K + k0) : zero;
            const uint4 qb = bn < N ? *reinterpret_cast<const uint4 *>(wq + w_chunk(bn, k0, K, shuffled)) : zero;
            decode16(qa, lut, &As[ls][0], BM + PAD, lr);
            decode16(qb, lut, &Bs[ls][0], BN + PAD, lr);
            __syncthreads();
#pragma unroll 4
            for (int k = 0; k < BK; k++) {
                const float4 a0 = *reinterpret_cast<const float4 *>(&As[k][ty * 4]);
                const float4 a1 = *reinterpret_cast<const float4 *>(&As[k][64 + ty * 4]);
                const float4 b0 = *reinterpret_cast<const float4 *>(&Bs[k][tx * 4]);
                const float4 b1 = *reinterpret_cast<const float4 *>(&Bs[k][64 + tx * 4]);
                const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                for (int i = 0; i < 8; i++)
                    for (int j = 0; j < 8; j++)
                        p[i][j] = fmaf(a[i], b[j], p[i][j]); /* the product is exact; one rounding */
            }
            __syncthreads();
        }
        /* acc += fl(P * xs) * ws, unfused (docs/semantics/gemm.md Q7, Triton; ref/gemm.c f32 model) */
        const float wsc = ws[(n0 / KBLK) * KB + kb];
        for (int i = 0; i < 8; i++) {
            const long long m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
            const float xsc = m < M ? (xs_transposed ? xs[kb * M + m] : xs[m * KB + kb]) : 0.0f;
            for (int j = 0; j < 8; j++)
                acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(__fmul_rn(p[i][j], xsc), wsc));
        }
    }
    for (int i = 0; i < 8; i++) {
        const long long m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (m >= M)
            continue;
        for (int h = 0; h < 2; h++) {
            const long long n = n0 + h * 64 + tx * 4;
            uint16_t *row = y + m * N;
            if (n + 4 <= N && (N % 4) == 0) {
                const uint32_t lo = dsv4q_bf16(acc[i][4 * h]) | (uint32_t)dsv4q_bf16(acc[i][4 * h + 1]) << 16;
                const uint32_t hi = dsv4q_bf16(acc[i][4 * h + 2]) | (uint32_t)dsv4q_bf16(acc[i][4 * h + 3]) << 16;
                *reinterpret_cast<uint2 *>(row + n) = make_uint2(lo, hi); /* bf16 RNE */
            } else {
                for (int j = 0; j < 4; j++)
                    if (n + j < N)
                        row[n + j] = dsv4q_bf16(acc[i][4 * h + j]);
            }
        }
    }
}

struct gemm_shape {
    int xq, wq, xs, ws, y;
    long long M, N, K;
};

int shape_of(const dsv4_hip_call *c, gemm_shape *s, char *err, size_t errlen)
{
    const int dt = c->variant == V_FNUZ ? DSV4_PLUGIN_FLOAT8_E4M3FNUZ : DSV4_PLUGIN_FLOAT8_E4M3FN;
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "XQ", dt, 2, &s->xq, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "WQ", dt, 2, &s->wq, err, errlen)) ||
        (rc = dsv4_hip_tensors(c, "x_scale:float32:2 w_scale:float32:2 -> Y:bfloat16:2",
                               {&s->xs, &s->ws, &s->y}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->xq], &s->M, &s->K);
    s->N = c->in[s->wq].shape[0];
    return DSV4_PLUGIN_OK;
}

/* The contract of dsv4_gemm_check (ref/gemm.c): shapes, K % 128, N % 16 for
 * a shuffled weight, no NaN code (the LUT would carry it). */
int check_shape(const dsv4_hip_call *c, const gemm_shape &s, char *err, size_t errlen)
{
    const int tr = c->variant == V_BPRESHUFFLE;
    const long long KB = s.K / KBLK, NB = (s.N + KBLK - 1) / KBLK;
    if (s.K % KBLK)
        return QFAIL("gemm_a8w8_blockscale: K = %lld is not a multiple of 128", s.K);
    if (c->in[s.wq].shape[1] != s.K)
        return QFAIL("gemm_a8w8_blockscale: WQ must be [N, K = %lld]", s.K);
    if (tr && s.N % 16)
        return QFAIL("gemm_a8w8_blockscale: N = %lld is not a multiple of 16 (shuffle_weight)", s.N);
    const dsv4_plugin_tensor *xs = &c->in[s.xs], *ws = &c->in[s.ws], *y = &c->out[s.y];
    if (xs->shape[0] != (tr ? KB : s.M) || xs->shape[1] != (tr ? s.M : KB))
        return QFAIL("gemm_a8w8_blockscale: x_scale must be [%lld, %lld]", tr ? KB : s.M, tr ? s.M : KB);
    if (ws->shape[0] != NB || ws->shape[1] != KB)
        return QFAIL("gemm_a8w8_blockscale: w_scale must be [%lld, %lld]", NB, KB);
    if (y->shape[0] != s.M || y->shape[1] != s.N)
        return QFAIL("gemm_a8w8_blockscale: Y must be [%lld, %lld]", s.M, s.N);
    if ((s.M + BM - 1) / BM > 65535)
        return QFAIL("gemm_a8w8_blockscale: M = %lld exceeds the grid", s.M);
    const int fnuz = c->variant == V_FNUZ;
    const uint8_t *q[2] = {(const uint8_t *)c->in[s.xq].data, (const uint8_t *)c->in[s.wq].data};
    const long long n[2] = {s.M * s.K, s.N * s.K};
    for (int t = 0; t < 2; t++)
        for (long long i = 0; i < n[t]; i++)
            if (fnuz ? q[t][i] == 0x80 : (q[t][i] & 0x7F) == 0x7F)
                return QFAIL("gemm_a8w8_blockscale: %s flat element %lld is a NaN code 0x%02X", t ? "WQ" : "XQ", i,
                             q[t][i]);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const gemm_shape &s, hipStream_t stream)
{
    if (s.M == 0 || s.N == 0)
        return hipSuccess;
    const dim3 grid((unsigned)((s.N + BN - 1) / BN), (unsigned)((s.M + BM - 1) / BM));
    hipLaunchKernelGGL(gemm_kernel, grid, dim3(THREADS), 0, stream, (const uint8_t *)c->din[s.xq],
                       (const uint8_t *)c->din[s.wq], (const float *)c->din[s.xs], (const float *)c->din[s.ws], s.M,
                       s.N, s.K, (int)(c->variant == V_FNUZ), (int)(c->variant == V_BPRESHUFFLE),
                       (int)(c->variant == V_BPRESHUFFLE), (uint16_t *)c->dout[s.y]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(gemm_a8w8_blockscale, variants, gemm_shape);
