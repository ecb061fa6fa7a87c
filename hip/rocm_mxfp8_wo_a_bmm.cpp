/* rocm_mxfp8_wo_a_bmm.cpp - wo_a on the MXFP8 path
 * (docs/semantics/gemm.md A10.3 [S9]; ref/gemm.c dsv4_ref_mxfp8_wo_a_bmm):
 * out[t, g*R + r] = sum_kb dot32(a, w) * 2^(sa-127) * 2^(sw-127) over the
 * 32-lane blocks of group g (tiles never cross groups), fp32 accumulation,
 * bf16 RNE store.  e4m3 x e4m3 products are exact in fp32.
 *
 * One launch on the matrix units, no shared staging (mma_compat.h, the
 * k-free products): a block computes a 16-token x 16-row tile of one group
 * with KSPLIT waves, wave w taking the contiguous 32-blocks
 * [w KB / KSPLIT, (w + 1) KB / KSPLIT).  Per block a lane reads its 8-code
 * chunks of a and of wo_a straight into registers (DEPTH blocks ahead),
 * decodes them (NVIDIA sm_89+: to f16 by the hardware conversion, two codes
 * an instruction; elsewhere to bf16; every e4m3 value is both), two
 * 16-term unit steps give the block dot P (exact products, fp32 sums in the
 * unit's order, the block's k in the unit's slots in another order than
 * the codes', which a block dot does not see), and
 * acc = fma(P, 2^(sa-127) 2^(sw-127), acc) per element.  The KSPLIT partial
 * sums of an element meet in shared memory, summed in wave order, so reruns
 * are bitwise equal.  The op's bound gamma_n G holds for this order
 * (docs/semantics/gemm.md, "Error bounds of the wo_a paths"). */
#include "mma_compat.h"
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", NULL};

/* 16 x 16 outputs a block, KSPLIT waves, DEPTH blocks of loads in flight a
 * wave: the 16-token bench line ran 0.026 ms at DEPTH 2 on an H100, 0.028
 * at 3, 0.031 at 4 (hip/README.md, 2026-12-07) */
enum { TILE = 16, KSPLIT = 8, DEPTH = 2, BMM_THREADS = KSPLIT * mma::WAVE };

#if defined(DSV4Q_HW_E4M3) && defined(DSV4_MMA_F16)
#define WO_A_F16 1
/* 8 e4m3fn codes (no NaN codes: the host check rejects them) as 8 f16, four
 * words, by the hardware conversion. */
__device__ inline void decode8(uint2 q, uint32_t *o)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        o[i] = dsv4q_fp8x2_f16x2_hw((uint16_t)((i < 2 ? q.x : q.y) >> (16 * (i & 1))));
}
#else
/* The bf16 bits of an e4m3fn code (no NaN codes).  The 7 magnitude bits
 * placed at fp32 bit 20 are the value times 2^-120 (an fp32 subnormal for
 * e4m3 subnormals), so one exact multiply by 2^120 gives the value, whose
 * low 16 bits are zero. */
__device__ inline uint32_t e4m3_bf16(uint32_t code)
{
    const float v = __uint_as_float((code & 0x7Fu) << 20) * 0x1p120f;
    return __float_as_uint(v) >> 16 | (code & 0x80u) << 8;
}

__device__ inline void decode8(uint2 q, uint32_t *o)
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t w = i < 2 ? q.x : q.y, sh = 16 * (i & 1);
        o[i] = e4m3_bf16(w >> sh & 0xFFu) | e4m3_bf16(w >> (sh + 8) & 0xFFu) << 16;
    }
}
#endif

/* One block's loads for a lane: its chunks of a and wo_a, and the scale
 * bytes of its accumulator elements' tokens (sa, a row slot each) and rows
 * (sw, a column slot each). */
struct stage {
    uint2 qa[mma::K32_CHUNKS], qw[mma::K32_CHUNKS];
    uint8_t sa[mma::ACC_ROWS], sw[mma::ACC_COLS];
};

static __global__ void __launch_bounds__(BMM_THREADS)
bmm_kernel(const uint8_t *__restrict__ a, const uint8_t *__restrict__ as, const uint8_t *__restrict__ w,
           const uint8_t *__restrict__ ws, long long T, long long G, long long R, long long K,
           uint16_t *__restrict__ out)
{
    __shared__ float red[KSPLIT][TILE][TILE + 1];
    const int tid = (int)threadIdx.x, lane = tid % mma::WAVE, wave = tid / mma::WAVE;
    const long long g = blockIdx.x, r0 = (long long)blockIdx.y * TILE, t0 = (long long)blockIdx.z * TILE;
    const long long KB = K / 32, kb0 = wave * KB / KSPLIT, steps = (wave + 1) * KB / KSPLIT - kb0;
    /* a row of a (token t) is a[t, g*K ...], of wo_a (row r) wo_a[g*R + r, ...];
     * rows past T or R read as code 0 with scale 1 (never stored).  Each
     * lane's row pointers are set once, at its chunk's first code. */
    auto a_row = [&](int t) { return t0 + t < T ? (t0 + t) * G + g : -1LL; };
    auto w_row = [&](int r) { return r0 + r < R ? g * R + r0 + r : -1LL; };
    const int col = mma::k32_col(lane);
    const uint8_t *qa_ptr[mma::K32_CHUNKS], *qw_ptr[mma::K32_CHUNKS], *sa_ptr[mma::ACC_ROWS], *sw_ptr[mma::ACC_COLS];
#pragma unroll
    for (int i = 0; i < mma::K32_CHUNKS; i++) {
        const long long ra = a_row(mma::k32_row(lane, i)), rw = w_row(mma::k32_row(lane, i));
        qa_ptr[i] = ra < 0 ? nullptr : a + ra * K + col;
        qw_ptr[i] = rw < 0 ? nullptr : w + rw * K + col;
    }
#pragma unroll
    for (int i = 0; i < mma::ACC_ROWS; i++) {
        const long long ra = a_row(mma::acc_row(lane, mma::row_slot_elem(i)));
        sa_ptr[i] = ra < 0 ? nullptr : as + ra * KB;
    }
#pragma unroll
    for (int j = 0; j < mma::ACC_COLS; j++) {
        const long long rw = w_row(mma::acc_col(lane, mma::col_slot_elem(j)));
        sw_ptr[j] = rw < 0 ? nullptr : ws + rw * KB;
    }
    auto fetch = [&](stage &st, long long kb) {
#pragma unroll
        for (int i = 0; i < mma::K32_CHUNKS; i++) {
            st.qa[i] = qa_ptr[i] ? *reinterpret_cast<const uint2 *>(qa_ptr[i] + kb * 32) : make_uint2(0, 0);
            st.qw[i] = qw_ptr[i] ? *reinterpret_cast<const uint2 *>(qw_ptr[i] + kb * 32) : make_uint2(0, 0);
        }
#pragma unroll
        for (int i = 0; i < mma::ACC_ROWS; i++)
            st.sa[i] = sa_ptr[i] ? sa_ptr[i][kb] : 127;
#pragma unroll
        for (int j = 0; j < mma::ACC_COLS; j++)
            st.sw[j] = sw_ptr[j] ? sw_ptr[j][kb] : 127;
    };
    mma::acc16 acc;
    mma::zero(acc);
    stage st[DEPTH];
#pragma unroll
    for (int j = 0; j < DEPTH; j++)
        if (j < steps)
            fetch(st[j], kb0 + j);
    for (long long s = 0; s < steps; s += DEPTH) {
#pragma unroll
        for (int j = 0; j < DEPTH; j++) {
            if (s + j >= steps) /* uniform in the wave */
                break;
            mma::frag32 fa, fw;
#pragma unroll
            for (int i = 0; i < mma::K32_CHUNKS; i++) {
                decode8(st[j].qa[i], &fa.v[4 * i]);
                decode8(st[j].qw[i], &fw.v[4 * i]);
            }
            /* deq = code * 2^(byte - 127) per 1x32 block (e8m0, docs/semantics/gemm.md A10.3) */
            float pa[mma::ACC_ROWS], pw[mma::ACC_COLS], scale[mma::ACC];
#pragma unroll
            for (int i = 0; i < mma::ACC_ROWS; i++)
                pa[i] = dsv4q_pow2((int)st[j].sa[i] - 127);
#pragma unroll
            for (int c = 0; c < mma::ACC_COLS; c++)
                pw[c] = dsv4q_pow2((int)st[j].sw[c] - 127);
#pragma unroll
            for (int e = 0; e < mma::ACC; e++)
                scale[e] = __fmul_rn(pa[mma::acc_row_slot(e)], pw[mma::acc_col_slot(e)]);
            if (s + j + DEPTH < steps)
                fetch(st[j], kb0 + s + j + DEPTH);
            mma::acc16 p;
            mma::zero(p);
#ifdef WO_A_F16
            mma::mma32_f16(p, fa, fw); /* exact products, fp32 sums */
#else
            mma::mma32(p, fa, fw);
#endif
#pragma unroll
            for (int e = 0; e < mma::ACC; e++)
                acc.v[e] = fmaf(p.v[e], scale[e], acc.v[e]);
        }
    }
#pragma unroll
    for (int e = 0; e < mma::ACC; e++)
        red[wave][mma::acc_row(lane, e)][mma::acc_col(lane, e)] = acc.v[e];
    __syncthreads();
    for (int o = tid; o < TILE * TILE; o += BMM_THREADS) {
        const int t = o / TILE, rr = o % TILE;
        float sum = red[0][t][rr];
        for (int k = 1; k < KSPLIT; k++)
            sum += red[k][t][rr];
        if (t0 + t < T && r0 + rr < R)
            out[(t0 + t) * G * R + g * R + r0 + rr] = dsv4q_bf16(sum);
    }
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
    if (s.T == 0 || s.R == 0)
        return hipSuccess;
    const dim3 grid((unsigned)s.G, (unsigned)((s.R + TILE - 1) / TILE), (unsigned)((s.T + TILE - 1) / TILE));
    hipLaunchKernelGGL(bmm_kernel, grid, dim3(BMM_THREADS), 0, stream, (const uint8_t *)c->din[s.a],
                       (const uint8_t *)c->din[s.as], (const uint8_t *)c->din[s.w], (const uint8_t *)c->din[s.ws], s.T,
                       (long long)s.G, (long long)s.R, s.K, (uint16_t *)c->dout[s.out]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(rocm_mxfp8_wo_a_bmm, variants, bmm_shape);
