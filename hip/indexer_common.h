/* indexer_common.h - what the paged MXFP4 indexer kernels share
 * (hip/rocm_mxfp4_indexer_*.cpp, paged_mxfp4_mqa_logits.cpp,
 * rocm_mxfp4_sparse_*_indexer.cpp): the page layout of ref/indexer.c
 * (docs/semantics/indexer.md Q4.1 step 5, Q5.1) for host and device, and the
 * row quantizer of the K store / Q quant (32 lanes per 128-dim row, 4 dims
 * per lane), bit-exact with ref/mx.c through quant_rules.h. */
#ifndef DSV4_HIP_INDEXER_COMMON_H
#define DSV4_HIP_INDEXER_COMMON_H

#include "quant_device.h"

namespace idxr {

enum { D = 128, ROPE = 64, NB = D / 32, TB = D / 2, ENTRY = TB + NB };

#define IFAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

/* 2 x the e2m1 value of a code (docs/semantics/quant.md Q1.2): 0 .5 1 1.5
 * 2 3 4 6, bit 3 the sign; as an int8 in the low byte (-0 gives 0). */
__device__ inline uint32_t e2m1_x2(uint32_t c)
{
    const uint32_t m = c & 7u;
    const uint32_t v = m < 4u ? m : m < 6u ? 2u * (m - 2u) : 4u * (m - 4u);
    return (c & 8u) ? (uint32_t)(-(int)v) & 0xFFu : v;
}

/* The four codes of the low 16 bits (code i at nibble i) as four int8
 * e2m1_x2 values (byte i), by the rule on every target. */
__device__ inline uint32_t decode4_x2_int(uint32_t w)
{
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        r |= e2m1_x2((w >> (4 * i)) & 15u) << (8 * i);
    return r;
}

/* The same by byte permutes on NVIDIA (the backend's device codec check
 * compares the two on all 65536 inputs): the magnitude and its negation
 * looked up from two 8-byte tables by each code's low three bits, and a
 * byte mask from each code's sign bit (bits 3, 7, 11, 15) as the selector
 * of a third permute picks one. */
__device__ inline uint32_t decode4_x2(uint32_t w)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    const uint32_t sel = w & 0x7777u;
    const uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, sel);
    const uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);
    const uint32_t mask = __byte_perm(0x0000FF00u, 0u, (w >> 3) & 0x1111u); /* sign i picks byte 1: 0xFF */
    return (pos & ~mask) | (neg & mask);
#else
    return decode4_x2_int(w);
#endif
}

/* 4 packed bytes (8 codes, even element low) -> 8 int8 values as 2 words. */
__device__ inline uint2 decode8(uint32_t w) { return make_uint2(decode4_x2(w), decode4_x2(w >> 16)); }

/* ref/indexer.c dsv4_idx_layout_make (docs/semantics/indexer.md Q5.1): n_per_tile 32 if
 * head_dim <= 64 or num_heads >= 32 else 16; d_per_tile 16; scale_lanes
 * 64 / n_per_tile; s_hi = (D/32) / scale_lanes. */
struct layout {
    long long P; /* page_entries */
    int shuffled, N, L, s_hi;
    int p_shift, n_shift, l_shift; /* log2 P (-1 unless a power of two), log2 N, log2 L */
};

/* log2 v for a power of two v > 0, else -1. */
static inline int log2_exact(long long v)
{
    int k = 0;
    while (k < 62 && (1LL << k) < v)
        k++;
    return v > 0 && (1LL << k) == v ? k : -1;
}

static inline int layout_make(int heads, long long P, int shuffled, layout *l, char *err, size_t errlen)
{
    l->P = P;
    l->shuffled = shuffled;
    l->N = heads >= 32 ? 32 : 16; /* head_dim 128 > 64 */
    l->L = 64 / l->N;
    l->s_hi = NB / l->L;
    l->p_shift = log2_exact(P);
    l->n_shift = log2_exact(l->N);
    l->l_shift = log2_exact(l->L);
    if (P <= 0 || heads <= 0)
        return IFAIL("indexer: page_entries %lld and heads %d must be positive", P, heads);
    if (shuffled && P % l->N)
        return IFAIL("indexer: page_entries %lld must be a multiple of n_per_tile %d (docs/semantics/indexer.md Q5.1)",
                     P, l->N);
    return DSV4_PLUGIN_OK;
}

/* The page of cache slot `slot` >= 0 and its entry in the page: shifts
 * where page_entries is a power of two (every production layout), so a
 * key's address costs no 64-bit division. */
__host__ __device__ inline long long page_of(const layout &l, long long slot)
{
    return l.p_shift >= 0 ? slot >> l.p_shift : slot / l.P;
}

__host__ __device__ inline long long entry_of(const layout &l, long long slot)
{
    return l.p_shift >= 0 ? slot & (l.P - 1) : slot % l.P;
}

/* Offset inside a page of value byte b (docs/semantics/indexer.md Q4.1 step 5): natural p*D/2 + b;
 * preshuffled grp*N*(D/2) + (b/16)*N*16 + lane*16 + b%16.  A 16-byte chunk
 * (one MX block) is contiguous in both.  N and L are powers of two, so
 * their divisions are shifts. */
__host__ __device__ inline long long value_off(const layout &l, long long p, int b)
{
    if (!l.shuffled)
        return p * TB + b;
    const long long grp = p >> l.n_shift, lane = p & (l.N - 1);
    return grp * l.N * TB + (long long)(b / 16) * l.N * 16 + lane * 16 + b % 16;
}

/* Scale s of entry p: natural P*D/2 + p*NB + s; preshuffled
 * P*D/2 + grp*N*NB + (s%L)*N*S_HI + lane*S_HI + s/L (docs/semantics/indexer.md Q4.1 step 5). */
__host__ __device__ inline long long scale_off(const layout &l, long long p, int s)
{
    const long long base = l.P * TB;
    if (!l.shuffled)
        return base + p * NB + s;
    const long long grp = p >> l.n_shift, lane = p & (l.N - 1);
    return base + grp * l.N * NB + (long long)(s & (l.L - 1)) * l.N * l.s_hi + lane * l.s_hi + (s >> l.l_shift);
}

__device__ inline float round_bf16(float x)
{
    return dsv4q_float((uint32_t)dsv4q_bf16(x) << 16);
}

/* GPT-J RoPE of a lane's eight lanes, the pairs k0..k0 + 3 of the cache
 * row (cos | sin, 64 wide), with its four cos (c4) and four sin (s4)
 * already loaded: products and the sum in fp32 without contraction
 * (ref/rope.c dsv4_rope_gptj_f32), each lane rounded to bf16 (ref/indexer.c
 * rope_bf16, docs/semantics/indexer.md Q4.1 step 3), the eight together by
 * pack8_bf16 (the hardware pair conversion where it is the rule), which is
 * round_bf16 of each. */
__device__ inline void rope8_bf16(float x[8], float4 c4, float4 s4)
{
    const float c[4] = {c4.x, c4.y, c4.z, c4.w}, s[4] = {s4.x, s4.y, s4.z, s4.w};
    float r[8];
    for (int i = 0; i < 4; i++) {
        const float e = x[2 * i], o = x[2 * i + 1];
        r[2 * i] = __fsub_rn(__fmul_rn(e, c[i]), __fmul_rn(o, s[i]));
        r[2 * i + 1] = __fadd_rn(__fmul_rn(e, s[i]), __fmul_rn(o, c[i]));
    }
    unpack8_bf16(pack8_bf16(r), x);
}

/* The MXFP4 codes of a lane's N dims (N <= 8) given the block's amax m:
 * the scale byte into *scale, the codes as a word (even dim low).  mx.c
 * dsv4_mx_quant_block_fp4: q = fl(x * m); a NaN block encodes NAN.  Where
 * the lane's values and m are finite and the scale is one of
 * dsv4q_fp4_fast_ok, the fast element path of quant_rules.h (one FMA onto
 * the e2m1 grid a value): exact for a finite x with |x| <= m (m is the
 * amax of the block's non-NaN values), and the values are bf16 numbers
 * (the K store and the Q quant round every lane to bf16 or read it). */
template <int N> __device__ inline uint32_t encode_fp4(const float x[N], float m, int rule, int elem, uint8_t *scale)
{
    float mult;
    const int nanfill = dsv4q_fp4_block(m, rule, scale, &mult);
    uint32_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0}, key = dsv4q_bits(m) & 0x7FFFFFFFu;
    for (int i = 0; i < N; i++) {
        b[i] = dsv4q_bits(x[i]);
        const uint32_t a = b[i] & 0x7FFFFFFFu;
        key = key > a ? key : a;
    }
    if (!nanfill && key < 0x7F800000u && dsv4q_fp4_fast_ok(*scale, elem, 1)) {
        /* the even and OCP rules reach |q| in [7, 8); the ceil rules stay below 7 */
        const dsv4q_fp4_fast f = dsv4q_fp4_fast_make(*scale, elem, rule == DSV4Q_FP4_EVEN || rule == DSV4Q_FP4_OCP);
        const uint32_t w = dsv4q_fp4_fast_f32x8(b, &f); /* dims past N are +0: code 0 */
        return w & (0xFFFFFFFFu >> (32 - 4 * N));
    }
    uint32_t w = 0;
    for (int i = 0; i < N; i++) {
        const float q = nanfill ? dsv4q_float(0x7FC00000u) : dsv4q_mul(x[i], mult);
        w |= (uint32_t)dsv4q_e2m1(q, elem) << (4 * i);
    }
    return w;
}

/* MXFP4 of 4 dims per lane, 8 lanes per 32-block (every lane of the warp
 * calls it: the amax is a full-mask xor shuffle).  rule / elem: quant_rules.h
 * numbering.  Returns the 4 codes as a 16-bit word (even dim low) and the
 * block's scale byte (all 8 lanes get it). */
__device__ inline uint32_t quant4(const float x[4], int rule, int elem, uint8_t *scale)
{
    float m = dsv4q_float(0x7FC00000u); /* "none seen" (dsv4q_amax_step) */
    for (int i = 0; i < 4; i++)
        m = dsv4q_amax_step(m, x[i]);
    return encode_fp4<4>(x, group_amax(m, 8), rule, elem, scale);
}

/* MXFP4 of 8 dims per lane, 4 lanes per 32-block (the Q quant's layout):
 * as quant4, the rule and encoder fixed at compile time.  The amax is the
 * integer max of the |x| bits over the block, which is the amax of the
 * non-NaN values unless the block holds a NaN (NaN patterns sort above
 * +Inf); only then, when some block of the warp does, the NaN-aware fold
 * (dsv4q_amax_key) and its shuffles run, on every lane of the warp.  Returns
 * the 8 codes as a 32-bit word (even dim low). */
template <int RULE, int ELEM> __device__ inline uint32_t quant8(const float x[8], uint8_t *scale)
{
    uint32_t key = 0;
    for (int i = 0; i < 8; i++) {
        const uint32_t a = dsv4q_bits(x[i]) & 0x7FFFFFFFu;
        key = key > a ? key : a;
    }
    key = (uint32_t)group_max_key((int32_t)key, 4); /* below 2^31: an int32 max */
    float m = dsv4q_float(key);
    if (gpu_any(key > 0x7F800000u)) {
        int32_t k = -1; /* "none seen" */
        for (int i = 0; i < 8; i++) {
            const int32_t e = dsv4q_amax_key(x[i]);
            k = e > k ? e : k;
        }
        m = dsv4q_amax_of_key(group_max_key(k, 4));
    }
    return encode_fp4<8>(x, m, RULE, ELEM, scale);
}

/* The two quantization variants of ops_indexer.c quant_variants (docs/semantics/indexer.md Q4):
 * default = B (SCALING_MODE 1 bit rule, RNE e2m1), 1 = A (ceil log2_f32,
 * threshold e2m1). */
static const char *const quant_variants[] = {"default", "quant=cache_a", NULL};
static inline int quant_rule(int variant) { return variant == 1 ? DSV4Q_FP4_CEIL_F32LOG2 : DSV4Q_FP4_CEIL; }
static inline int quant_elem(int variant) { return variant == 1 ? DSV4Q_ELEM_THRESHOLD : DSV4Q_ELEM_RNE; }

} // namespace idxr

#endif
