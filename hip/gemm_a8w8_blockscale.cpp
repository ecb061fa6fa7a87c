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
 * One launch: a 256-thread block computes a 128 x 128 tile of Y on the
 * matrix units (mma_compat.h: mma.sync m16n8k16 on NVIDIA, MFMA
 * 16x16x16 on CDNA), each wave a register-blocked run of 16 x 16 products
 * whose operand fragments serve every product of their row or column.
 * Each K block of 128 is walked in 2 steps of 64: the block loads the
 * 128 x 64 A and B slices as 16-byte chunks (a shuffled weight's 16-byte
 * chunk is also 16 consecutive k of one row n, so both layouts load the
 * same way, only the address differs), the next step's loads in flight
 * while this one multiplies; a 256-entry shared LUT turns the codes into
 * bf16 (exact: e4m3 has 3 significand bits) in k-contiguous rows.  P is
 * the fp32 sum of exact products in the unit's order; at the end of the K
 * block the scales are applied (N tiles are aligned to the 128-row weight
 * blocks, so one ws per tile and K block). */
#include "mma_compat.h"
#include "quant_device.h"

namespace {

enum { V_PLAIN = 0, V_BPRESHUFFLE = 1, V_FNUZ = 2 };

const char *const variants[] = {"default", "bpreshuffle", "fp8=fnuz", NULL};

constexpr int BM = 128, BN = 128, BK = 64, KBLK = 128, THREADS = 256;

/* Byte offset of the 16-byte chunk holding W[n, k0..k0+15] (k0 % 16 == 0):
 * plain n*K + k0; shuffled, aiter shuffle.py IN = IK = 16, BK = 32, Kp = 16
 * (ref/gemm.c dsv4_shuffle_index with k % 16 == 0). */
__device__ inline long long w_chunk(long long n, long long k0, long long K, int shuffled)
{
    if (!shuffled)
        return n * K + k0;
    return ((((n / 16) * (K / 32) + k0 / 32) * 2 + (k0 % 32) / 16) * 16 + n % 16) * 16;
}

/* Tile geometry: a 256-thread block computes BM x BN of Y; each K block of
 * 128 is walked in steps of BK.  The waves split the tile into WM x WN
 * parts of TM x TN 16 x 16 products (WAVE = 32: 2 x 4 waves of 4 x 2; 64:
 * 2 x 2 of 4 x 4). */
constexpr int NWAVE = THREADS / mma::WAVE, WM = 2, WN = NWAVE / WM;
constexpr int TM = BM / WM / 16, TN = BN / WN / 16;
constexpr int LDS = BK + 8; /* shared row stride in bf16: 16-byte rows, 4 banks of skew */
constexpr int CHUNKS = BM * BK / 16 / THREADS; /* 16-byte loads per thread and operand */
static_assert(BM == BN && BN == KBLK, "one weight scale per tile and K block");
static_assert(KBLK % BK == 0 && BK % 16 == 0 && CHUNKS >= 1, "step and load split");
static_assert(WM * WN == NWAVE && TM * 16 * WM == BM && TN * 16 * WN == BN, "wave split");

/* 16 fp8 codes -> 16 bf16 (exact: e4m3 has 3 significand bits) through the LUT, into one shared row. */
__device__ inline void decode16(const uint4 q, const uint16_t *lut, uint16_t *dst)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    uint32_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = lut[(w[i / 2] >> (16 * (i % 2))) & 0xFFu] | (uint32_t)lut[(w[i / 2] >> (16 * (i % 2) + 8)) & 0xFFu] << 16;
    reinterpret_cast<uint4 *>(dst)[0] = make_uint4(h[0], h[1], h[2], h[3]);
    reinterpret_cast<uint4 *>(dst)[1] = make_uint4(h[4], h[5], h[6], h[7]);
}

#if defined(DSV4Q_HW_E4M3) && defined(DSV4_MMA_F16)
/* NVIDIA sm_89+: 16 e4m3fn codes -> 16 fp16 by the hardware conversion (two
 * codes an instruction; exact, every e4m3fn value is an fp16 and the host
 * check rejected NaN codes) in place of 16 LUT reads, for fp16 products. */
#define GEMM_HW_F16 1
__device__ inline void decode16_f16(const uint4 q, uint16_t *dst)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    uint32_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = dsv4q_fp8x2_f16x2_hw((uint16_t)(w[i / 2] >> (16 * (i % 2))));
    reinterpret_cast<uint4 *>(dst)[0] = make_uint4(h[0], h[1], h[2], h[3]);
    reinterpret_cast<uint4 *>(dst)[1] = make_uint4(h[4], h[5], h[6], h[7]);
}
#endif

/* F16 (the e4m3fn variants): the operands as fp16 through the hardware
 * conversion where the device pass has it (GEMM_HW_F16); else, and for
 * FNUZ, bf16 through the LUT. */
template <bool F16>
__global__ void __launch_bounds__(THREADS)
gemm_kernel(const uint8_t *__restrict__ xq, const uint8_t *__restrict__ wq, const float *__restrict__ xs,
            const float *__restrict__ ws, long long M, long long N, long long K, int fnuz, int shuffled,
            int xs_transposed, uint16_t *__restrict__ y)
{
    __shared__ uint16_t lut[256];
    __shared__ __align__(16) uint16_t As[BM][LDS];
    __shared__ __align__(16) uint16_t Bs[BN][LDS];
    const int tid = (int)threadIdx.x, lane = tid % mma::WAVE, wave = tid / mma::WAVE;
#ifdef GEMM_HW_F16
    constexpr bool HWF16 = F16;
#else
    constexpr bool HWF16 = false; /* no hardware conversion in this device pass: the LUT */
#endif
    if (!HWF16)
        for (int b = tid; b < 256; b += THREADS) /* NaN codes were rejected by the host check */
            lut[b] = (uint16_t)(__float_as_uint(dsv4q_fp8_decode((uint8_t)b, fnuz)) >> 16);
    const long long m0 = (long long)blockIdx.y * BM, n0 = (long long)blockIdx.x * BN;
    const long long KB = K / KBLK, steps = K / BK;
    const int wm = wave / WN, wn = wave % WN;
    /* loader: chunk i of this thread is row (tid + i THREADS) / (BK / 16), 16 k at its remainder */
    auto load_step = [&](long long step, uint4 (&qa)[CHUNKS], uint4 (&qb)[CHUNKS]) {
        const uint4 zero = make_uint4(0, 0, 0, 0);
        #pragma unroll
        for (int i = 0; i < CHUNKS; i++) {
            const int c = tid + i * THREADS, r = c / (BK / 16);
            const long long k0 = step * BK + 16 * (c % (BK / 16));
            qa[i] = m0 + r < M ? *reinterpret_cast<const uint4 *>(xq + (m0 + r) * K + k0) : zero;
            qb[i] = n0 + r < N ? *reinterpret_cast<const uint4 *>(wq + w_chunk(n0 + r, k0, K, shuffled)) : zero;
        }
    };
    mma::acc16 acc[TM][TN], p[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) {
            mma::zero(acc[i][j]);
            mma::zero(p[i][j]);
        }
    uint4 qa[CHUNKS], qb[CHUNKS];
    load_step(0, qa, qb);
    __syncthreads(); /* the LUT */
    for (long long step = 0; step < steps; step++) {
        #pragma unroll
        for (int i = 0; i < CHUNKS; i++) {
            const int c = tid + i * THREADS, r = c / (BK / 16), k = 16 * (c % (BK / 16));
#ifdef GEMM_HW_F16
            if (HWF16) {
                decode16_f16(qa[i], &As[r][k]);
                decode16_f16(qb[i], &Bs[r][k]);
                continue;
            }
#endif
            decode16(qa[i], lut, &As[r][k]);
            decode16(qb[i], lut, &Bs[r][k]);
        }
        __syncthreads();
        if (step + 1 < steps) /* the next step's loads fly while this one multiplies */
            load_step(step + 1, qa, qb);
#pragma unroll
        for (int k = 0; k < BK; k += 16) {
            mma::frag_a fa[TM];
            mma::frag_b fb[TN];
            #pragma unroll
            for (int i = 0; i < TM; i++)
                mma::load_frag_a(fa[i], &As[(wm * TM + i) * 16][k], LDS);
            #pragma unroll
            for (int j = 0; j < TN; j++)
                mma::load_frag_b(fb[j], &Bs[(wn * TN + j) * 16][k], LDS);
            #pragma unroll
            for (int i = 0; i < TM; i++)
                #pragma unroll
                for (int j = 0; j < TN; j++)
#ifdef GEMM_HW_F16
                    if (HWF16)
                        mma::mma_frag_f16(p[i][j], fa[i], fb[j]); /* exact products, fp32 sums */
                    else
#endif
                        mma::mma_frag(p[i][j], fa[i], fb[j]);
        }
        __syncthreads();
        if ((step + 1) % (KBLK / BK))
            continue;
        /* end of K block kb: acc += fl(P * xs) * ws, unfused (docs/semantics/gemm.md Q7, Triton; ref/gemm.c f32 model) */
        const long long kb = step / (KBLK / BK);
        const float wsc = ws[(n0 / KBLK) * KB + kb];
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int e = 0; e < mma::ACC; e++) {
                const long long m = m0 + (wm * TM + i) * 16 + mma::acc_row(lane, e);
                const float xsc = m < M ? (xs_transposed ? xs[kb * M + m] : xs[m * KB + kb]) : 0.0f;
                #pragma unroll
                for (int j = 0; j < TN; j++) {
                    acc[i][j].v[e] = __fadd_rn(acc[i][j].v[e], __fmul_rn(__fmul_rn(p[i][j].v[e], xsc), wsc));
                    p[i][j].v[e] = 0.0f;
                }
            }
    }
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++)
            #pragma unroll
            for (int e = 0; e < mma::ACC; e++) {
                const long long m = m0 + (wm * TM + i) * 16 + mma::acc_row(lane, e);
                const long long n = n0 + (wn * TN + j) * 16 + mma::acc_col(lane, e);
                if (m < M && n < N)
                    y[m * N + n] = dsv4q_bf16(acc[i][j].v[e]); /* bf16 RNE */
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
    const int fnuz = c->variant == V_FNUZ, shuffled = c->variant == V_BPRESHUFFLE;
    const uint8_t *xq = (const uint8_t *)c->din[s.xq], *wq = (const uint8_t *)c->din[s.wq];
    const float *xs = (const float *)c->din[s.xs], *ws = (const float *)c->din[s.ws];
    if (fnuz)
        hipLaunchKernelGGL(gemm_kernel<false>, grid, dim3(THREADS), 0, stream, xq, wq, xs, ws, s.M, s.N, s.K, fnuz,
                           shuffled, shuffled, (uint16_t *)c->dout[s.y]);
    else
        hipLaunchKernelGGL(gemm_kernel<true>, grid, dim3(THREADS), 0, stream, xq, wq, xs, ws, s.M, s.N, s.K, fnuz,
                           shuffled, shuffled, (uint16_t *)c->dout[s.y]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(gemm_a8w8_blockscale, variants, gemm_shape);
