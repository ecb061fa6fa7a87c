/* rocm_mxfp8_wo_a_bmm.cpp - wo_a on the MXFP8 path
 * (docs/semantics/gemm.md A10.3 [S9]; ref/gemm.c dsv4_ref_mxfp8_wo_a_bmm):
 * out[t, g*R + r] = sum_kb dot32(a, w) * 2^(sa-127) * 2^(sw-127) over the
 * 32-lane blocks of group g (tiles never cross groups), fp32 accumulation,
 * bf16 RNE store.  e4m3 x e4m3 products are exact in fp32.
 *
 * One launch on the matrix units (mma_compat.h: mma.sync m16n8k16 on
 * NVIDIA, MFMA 16x16x16 on CDNA): a block computes a 16-token x 16-row
 * tile of one group with KSPLIT waves, wave w taking the 32-blocks w,
 * w + KSPLIT, ... .  Per block a wave stages the tile's 16 x 32 codes of a
 * and of wo_a as bf16 in its own shared rows (every e4m3 value is a bf16),
 * two 16 x 16 x 16 products give the block dot P (exact products, fp32 sums
 * in the unit's order), and acc = fma(P, 2^(sa-127) 2^(sw-127), acc) per
 * element; the next block's loads are in flight meanwhile.  A wave reads
 * only the rows it staged, so the waves meet once, at the end.  The KSPLIT
 * partial sums of an element meet in shared memory, summed in wave order,
 * so reruns are bitwise equal.  The op's bound gamma_n G holds for this
 * order (docs/semantics/gemm.md, "Error bounds of the wo_a paths"). */
#include "mma_compat.h"
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", NULL};

/* 16 x 16 outputs a block, KSPLIT waves; a staged row holds one block's 32
 * codes plus 8 of padding (80 bytes: the 8 rows an ldmatrix reads fall in
 * distinct banks, and 16-byte alignment holds). */
enum { TILE = 16, KSPLIT = 8, BMM_THREADS = KSPLIT * mma::WAVE, LDS_ROW = 40 };

/* The bf16 bits of 8 e4m3fn codes (no NaN codes: the host check rejects
 * them), two a word.  The 7 magnitude bits placed at fp32 bit 20 are the
 * value times 2^-120 (an fp32 subnormal for e4m3 subnormals), so one exact
 * multiply by 2^120 gives the value, whose low 16 bits are zero. */
__device__ inline uint32_t e4m3_bf16(uint32_t code)
{
    const float v = __uint_as_float((code & 0x7Fu) << 20) * 0x1p120f;
    return __float_as_uint(v) >> 16 | (code & 0x80u) << 8;
}

__device__ inline uint4 decode8_bf16(uint2 q)
{
    uint32_t o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t w = i < 2 ? q.x : q.y, sh = 16 * (i & 1);
        o[i] = e4m3_bf16(w >> sh & 0xFFu) | e4m3_bf16(w >> (sh + 8) & 0xFFu) << 16;
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
}

static __global__ void __launch_bounds__(KSPLIT * 64)
bmm_kernel(const uint8_t *__restrict__ a, const uint8_t *__restrict__ as, const uint8_t *__restrict__ w,
           const uint8_t *__restrict__ ws, long long T, long long G, long long R, long long K,
           uint16_t *__restrict__ out)
{
    __shared__ __align__(16) uint16_t sa[KSPLIT][TILE][LDS_ROW], sw[KSPLIT][TILE][LDS_ROW];
    __shared__ float ssa[KSPLIT][TILE], ssw[KSPLIT][TILE];
    __shared__ float red[KSPLIT][TILE][TILE + 1];
    const int tid = (int)threadIdx.x, lane = tid % mma::WAVE, wave = tid / mma::WAVE;
    const long long g = blockIdx.x, r0 = (long long)blockIdx.y * TILE, t0 = (long long)blockIdx.z * TILE;
    const long long KB = K / 32;
    /* the 64 16-byte chunks of a block step: 0-31 the a tile (token c / 2,
     * half c % 2), 32-63 the wo_a tile; a lane takes c = lane, lane + WAVE */
    constexpr int PER_LANE = 64 / mma::WAVE;
    uint4 q[PER_LANE];
    uint8_t qs[PER_LANE];
    auto fetch = [&](long long kb) {
#pragma unroll
        for (int i = 0; i < PER_LANE; i++) {
            const int c = lane + i * mma::WAVE, row = (c % 32) / 2, half = c % 2;
            const bool is_w = c >= 32;
            const long long idx = is_w ? r0 + row : t0 + row;
            q[i] = make_uint4(0, 0, 0, 0);
            qs[i] = 127;
            if (idx < (is_w ? R : T)) {
                const long long base = is_w ? (g * R + idx) : (idx * G + g); /* the operand's row */
                q[i] = *reinterpret_cast<const uint4 *>((is_w ? w : a) + base * K + kb * 32 + half * 16);
                qs[i] = (is_w ? ws : as)[base * KB + kb];
            }
        }
    };
    mma::acc16 acc;
    mma::zero(acc);
    const long long steps = (KB + KSPLIT - 1) / KSPLIT;
    if (wave < KB)
        fetch(wave);
    for (long long s = 0; s < steps; s++) {
        const long long kb = s * KSPLIT + wave;
        const bool live = kb < KB; /* uniform in the wave */
        if (live) {
#pragma unroll
            for (int i = 0; i < PER_LANE; i++) {
                const int c = lane + i * mma::WAVE, row = (c % 32) / 2, half = c % 2;
                uint16_t *dst = (c >= 32 ? &sw[wave][row][0] : &sa[wave][row][0]) + half * 16;
                reinterpret_cast<uint4 *>(dst)[0] = decode8_bf16(make_uint2(q[i].x, q[i].y));
                reinterpret_cast<uint4 *>(dst)[1] = decode8_bf16(make_uint2(q[i].z, q[i].w));
                /* deq = code * 2^(byte - 127) per 1x32 block (e8m0, docs/semantics/gemm.md A10.3) */
                if (half == 0)
                    (c >= 32 ? ssw : ssa)[wave][row] = dsv4q_pow2((int)qs[i] - 127);
            }
        }
        gpu_wave_sync(); /* a wave reads only the rows it staged */
        if (live) {
            if (kb + KSPLIT < KB)
                fetch(kb + KSPLIT);
            mma::acc16 p;
            mma::zero(p);
#pragma unroll
            for (int k = 0; k < 32; k += 16) {
                mma::frag_a fa;
                mma::frag_b fb;
                mma::load_frag_a(fa, &sa[wave][0][k], LDS_ROW);
                mma::load_frag_b(fb, &sw[wave][0][k], LDS_ROW);
                mma::mma_frag(p, fa, fb); /* exact products, fp32 sums */
            }
#pragma unroll
            for (int e = 0; e < mma::ACC; e++) {
                const int t = mma::acc_row(lane, e), rr = mma::acc_col(lane, e);
                acc.v[e] = fmaf(p.v[e], __fmul_rn(ssa[wave][t], ssw[wave][rr]), acc.v[e]);
            }
        }
        gpu_wave_sync(); /* the staged rows are rewritten next step */
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
