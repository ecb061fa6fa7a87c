/* quant_device.h - device helpers shared by the quantization and KV-cache
 * kernels: 16-byte loads of 8 bf16 / fp32 elements, lane-group reductions. */
#ifndef DSV4_HIP_QUANT_DEVICE_H
#define DSV4_HIP_QUANT_DEVICE_H

#include <type_traits>

#include "kernels.h"
#include "quant_rules.h"

/* Eight bf16 (16 bytes, element 0 in the low half of w.x) as fp32: a shift
 * or a mask each. */
__device__ inline void unpack8_bf16(uint4 w, float v[8])
{
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
    for (int k = 0; k < 4; k++) {
        v[2 * k] = dsv4q_float(u[k] << 16);
        v[2 * k + 1] = dsv4q_float(u[k] & 0xFFFF0000u);
    }
}

/* dsv4q_bf16 of 8 values packed as 16 bytes (element 0 in the low half of
 * .x).  On NVIDIA sm_80+ the hardware conversion cvt.rn.bf16x2.f32 is IEEE
 * RNE, which is dsv4q_bf16's rounding for every non-NaN input (Inf, -0 and
 * subnormals included); only its NaN differs (dsv4q_bf16 keeps the sign and
 * quiets the payload).  A bf16 result is NaN exactly when its input was, and
 * one add tests both halves of a word for one ((h & 0x7FFF) + 0x7F carries
 * into bit 15 exactly when h & 0x7FFF > 0x7F80), so the integer rule runs
 * only for the (rare) 8 values that hold a NaN: 4 conversions and 6 integer
 * operations for 8 values, not 7 operations a value. */
__device__ inline uint4 pack8_bf16(const float x[8])
{
    uint32_t w[4];
#ifdef DSV4Q_HW_BF16
    for (int i = 0; i < 4; i++)
        w[i] = dsv4q_bf16x2_hw(x[2 * i], x[2 * i + 1]);
    const uint32_t nan = (((w[0] & 0x7FFF7FFFu) + 0x007F007Fu) | ((w[1] & 0x7FFF7FFFu) + 0x007F007Fu) |
                          ((w[2] & 0x7FFF7FFFu) + 0x007F007Fu) | ((w[3] & 0x7FFF7FFFu) + 0x007F007Fu)) &
                         0x80008000u;
    if (nan)
#endif
        for (int i = 0; i < 4; i++)
            w[i] = (uint32_t)dsv4q_bf16(x[2 * i]) | (uint32_t)dsv4q_bf16(x[2 * i + 1]) << 16;
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Eight consecutive elements from element index i (a multiple of 8): one
 * 16-byte load for bf16, two for fp32. */

__device__ inline void load8(const void *x, int is_bf16, long long i, float v[8])
{
    if (is_bf16) {
        unpack8_bf16(*reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(x) + i), v);
    } else {
        const float4 a = *reinterpret_cast<const float4 *>(static_cast<const float *>(x) + i);
        const float4 b = *reinterpret_cast<const float4 *>(static_cast<const float *>(x) + i + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
        v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
}

/* 8 bf16 elements from a bf16 pointer at element i (16-byte aligned). */
__device__ inline void load8_bf16(const uint16_t *x, long long i, float v[8])
{
    load8(x, 1, i, v);
}

/* amax over a group of g consecutive lanes (g a power of two <= 32, groups
 * aligned in the warp); every lane of the warp must call it (CUDA's full-mask
 * shuffle).  NaN-aware combine (dsv4q_amax_step). */
__device__ inline float group_amax(float m, int g)
{
    for (int off = 1; off < g; off <<= 1)
        m = dsv4q_amax_step(m, __shfl_xor(m, off));
    return m;
}

/* The same over int32 amax keys (dsv4q_amax_key): an integer max a step. */
__device__ inline int32_t group_max_key(int32_t k, int g)
{
    for (int off = 1; off < g; off <<= 1) {
        const int32_t o = __shfl_xor(k, off);
        k = o > k ? o : k;
    }
    return k;
}

#if defined(__CUDA_ARCH__)
/* m folded with |x| of a chunk's 8 values.  NVIDIA's max returns the other
 * operand when one is NaN (any NaN), so m = NaN means "none seen" and the
 * result is NaN only when every value was: one instruction a value. */
__device__ inline float fold_abs_max(float m, const float v[8])
{
    for (int i = 0; i < 8; i++)
        m = fmaxf(m, fabsf(v[i]));
    return m;
}
#endif

/* key folded with the amax keys of a chunk's 8 values (dsv4q_amax_key).
 * On NVIDIA the fold runs on |x| as floats (fold_abs_max) from the key's
 * float and goes back to a key: non-negative floats order as their bits,
 * so it is the same key.  Elsewhere (an IEEE-mode max may quiet a
 * signalling NaN instead) the integer keys. */
__device__ inline int32_t fold_amax_key(const float v[8], int32_t key)
{
#if defined(__CUDA_ARCH__)
    return dsv4q_amax_key(fold_abs_max(dsv4q_amax_of_key(key), v));
#else
    for (int i = 0; i < 8; i++) {
        const int32_t e = dsv4q_amax_key(v[i]);
        key = e > key ? e : key;
    }
    return key;
#endif
}

/* The flat MX / group quant kernels give each thread CHUNKS_PER_THREAD
 * chunks of 8 elements, a block's chunks [b * 256 * CPT, (b + 1) * 256 * CPT)
 * with chunk k of thread t at t + 256 k: both 16-byte loads are issued before
 * any arithmetic (twice the bytes in flight of one chunk a thread), each
 * warp's accesses stay contiguous, and lane groups stay aligned. */
enum { QUANT_THREADS = 256, CHUNKS_PER_THREAD = 2 };

__device__ inline long long quant_chunk(int k)
{
    return ((long long)blockIdx.x * CHUNKS_PER_THREAD + k) * QUANT_THREADS + threadIdx.x;
}

/* Every chunk of this thread loaded into v (all loads first) with its amax
 * key folded from key0; chunks past nchunks keep key0 and are not read. */
__device__ inline void load_chunks_amax(const void *x, int is_bf16, long long nchunks, int32_t key0,
                                        float v[CHUNKS_PER_THREAD][8], int32_t key[CHUNKS_PER_THREAD])
{
#pragma unroll
    for (int k = 0; k < CHUNKS_PER_THREAD; k++) {
        const long long c = quant_chunk(k);
        key[k] = key0;
        if (c < nchunks) {
            load8(x, is_bf16, c * 8, v[k]);
            key[k] = fold_amax_key(v[k], key0);
        }
    }
}

/* a / b and a % b for a >= 0, b > 0: the 32-bit division where both fit
 * (a 64-bit one is a long subroutine on both vendors). */
__device__ inline long long div_fast(long long a, long long b, long long *rem)
{
    if (((a | b) >> 31) == 0) {
        const uint32_t q = (uint32_t)a / (uint32_t)b;
        *rem = (long long)((uint32_t)a - q * (uint32_t)b);
        return q;
    }
    *rem = a % b;
    return a / b;
}

/* MXFP8 (e4m3fn) of one 32-block held whole by one thread (docs/semantics/quant.md Q2), the
 * rule fixed at compile time: 0 = fl(a/448) with the correctly rounded fp32
 * log2, 1 = the exact ceil rule, 2 = floor (x / 2^(byte-127)); mx.c rules
 * through quant_rules.h.  One thread a block: the amax and the scale rule
 * once a block and no lane exchange (with 4 lanes a block, each lane ran the
 * scale rule for its block).  NAN_FILL: an all-NaN block gives every code
 * fp8(NAN) (mx.c mxfp8_quant); without it (the inverse-RoPE op, whose
 * reference has no such rule) the elements are scaled as they are. */
enum { MXFP8_CEIL_F32LOG2 = 0, MXFP8_CEIL = 1, MXFP8_FLOOR = 2, MX_BLOCK_CHUNKS = 4 };

/* The amax of a block, NaN only when every element is NaN (dsv4q_amax_key's
 * fold; on NVIDIA straight on the floats, fold_abs_max). */
__device__ inline float block_amax32(const float (&v)[MX_BLOCK_CHUNKS][8])
{
#if defined(__CUDA_ARCH__)
    float m = dsv4q_float(0x7FC00000u);
    #pragma unroll
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
        m = fold_abs_max(m, v[k]);
    return m;
#else
    int32_t key = -1; /* "none seen" */
    #pragma unroll
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
        key = fold_amax_key(v[k], key);
    return dsv4q_amax_of_key(key);
#endif
}

/* Block g's 32 values of a contiguous bf16 or fp32 input, every load
 * issued before any arithmetic. */
__device__ inline void load_mx_block(const void *x, int is_bf16, long long g, float (&v)[MX_BLOCK_CHUNKS][8])
{
    #pragma unroll
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
        load8(x, is_bf16, g * 32 + 8 * k, v[k]);
}

/* Codes of the block into codes[0..1] (element 0 lowest), its scale byte
 * into *scale. */
template <int RULE, bool NAN_FILL>
__device__ inline void store_mxfp8_block(const float (&v)[MX_BLOCK_CHUNKS][8], uint4 *__restrict__ codes,
                                         uint8_t *__restrict__ scale)
{
    const float m = block_amax32(v);
    const uint8_t b = RULE == MXFP8_FLOOR          ? dsv4q_fp8_scale_floor(m)
                      : RULE == MXFP8_CEIL_F32LOG2 ? dsv4q_fp8_scale_ceil_f32log2(m)
                                                   : dsv4q_fp8_scale_ceil(m);
    /* x * 2^(127-byte); for floor x / 2^(byte-127) (@00134422) is the same
     * number: both are the rounding of the exact x 2^(127-byte)
     * (docs/semantics/quant.md Q2 step 3) */
    const float f = dsv4q_pow2(127 - (int)b);
    uint32_t w[2 * MX_BLOCK_CHUNKS];
    #pragma unroll
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++) {
        w[2 * k] = dsv4q_fp8x4_scaled(v[k], f, 0);
        w[2 * k + 1] = dsv4q_fp8x4_scaled(v[k] + 4, f, 0);
    }
    if (NAN_FILL && dsv4q_isnan(m))
        for (int i = 0; i < 2 * MX_BLOCK_CHUNKS; i++)
            w[i] = 0x7F7F7F7Fu; /* fp8(NAN), NAN positive */
    codes[0] = make_uint4(w[0], w[1], w[2], w[3]);
    codes[1] = make_uint4(w[4], w[5], w[6], w[7]);
    *scale = b;
}

/* The MX kernels' blocks: one 32-block a thread, MX_THREADS threads a block. */
enum { MX_THREADS = 256 };

__device__ inline long long mx_block_index() { return (long long)blockIdx.x * MX_THREADS + threadIdx.x; }

/* Sum over the whole block (blockDim a multiple of warpSize); every thread
 * gets the result.  The fp32 tree order differs from a sequential sum; the
 * fused op's policy bounds the sequential error, which is the larger one. */
__device__ inline float block_sum(float s)
{
    __shared__ float part[GPU_MAX_WARPS];
    const int lane = (int)threadIdx.x % warpSize, warp = (int)threadIdx.x / warpSize;
    const int nwarps = ((int)blockDim.x + warpSize - 1) / warpSize;
    for (int off = warpSize / 2; off > 0; off >>= 1)
        s += __shfl_xor(s, off);
    __syncthreads(); /* part[] may still be read by an earlier call */
    if (lane == 0)
        part[warp] = s;
    __syncthreads();
    float t = lane < nwarps ? part[lane] : 0.0f;
    for (int off = warpSize / 2; off > 0; off >>= 1)
        t += __shfl_xor(t, off);
    return t;
}

#define QFAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

/* The 2-D bf16 / fp32 input "x" of the quant ops: index, element size. */
static inline int quant_input_x(const dsv4_hip_call *c, int *xi, int *is_bf16, char *err, size_t errlen)
{
    *xi = dsv4_hip_input(c, "x");
    if (*xi < 0)
        return QFAIL("%s: input 'x' missing", c->op);
    const dsv4_plugin_tensor *x = &c->in[*xi];
    if ((x->dtype != DSV4_PLUGIN_BFLOAT16 && x->dtype != DSV4_PLUGIN_FLOAT32) || x->ndim != 2)
        return QFAIL("%s: 'x' must be a 2-D bfloat16 or float32 tensor", c->op);
    *is_bf16 = x->dtype == DSV4_PLUGIN_BFLOAT16;
    return DSV4_PLUGIN_OK;
}

/* The MX row ops (mxfp4_quant, mxfp8_quant): input x [T, W], W a multiple
 * of 32, and their two 2-D outputs, the codes and the e8m0 scales (each
 * op checks the outputs' shapes). */
struct mx_rows {
    int x, d, s, is_bf16;
    long long T, W;
};

static inline int mx_rows_of(const dsv4_hip_call *c, const char *codes, int codes_dtype, const char *scales,
                             int scales_dtype, mx_rows *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = quant_input_x(c, &s->x, &s->is_bf16, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, codes, codes_dtype, 2, &s->d, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, scales, scales_dtype, 2, &s->s, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->x], &s->T, &s->W);
    if (s->W % 32 != 0)
        return QFAIL("%s: W = %lld is not a multiple of 32", c->op, s->W);
    if (s->T * s->W / 8 > (long long)0x7fffffff * 256)
        return QFAIL("%s: tensor too large for the grid", c->op);
    return DSV4_PLUGIN_OK;
}

/* The quant kernels take the input dtype as a template argument: launch is
 * called with std::true_type for a bf16 input, std::false_type for fp32. */
template <class Launch> static inline void launch_by_input_dtype(int is_bf16, Launch launch)
{
    if (is_bf16)
        launch(std::true_type{});
    else
        launch(std::false_type{});
}

/* Blocks of `threads` covering n work items (host side). */
static inline unsigned grid_for(long long n, int threads)
{
    return (unsigned)((n + threads - 1) / threads);
}

#endif
