/* kv_encode.h - the 584-byte fp8_ds_mla record encoder
 * (docs/semantics/kvcache.md A2.1-A2.3), shared by quantize_and_insert_k_cache,
 * fused_qnorm_rope_kv_insert and compressor; bit-exact with
 * ref/kvcache.c dsv4_kv_encode_token.
 *
 * 64 threads per token: lane l holds dims 8l..8l+7 as fp32 values that are
 * already bf16 numbers (finite).  Lanes 0..55 quantize NoPE: a 64-block is
 * 8 aligned lanes (xor-shuffle amax), scale byte by the exact integer rule
 * (dsv4q_kv_scale_byte), 8 codes in one 8-byte store, lane 8k stores scale
 * byte k.  Lanes 56..63 store the 64 RoPE bf16 (16 bytes each, two 8-byte
 * stores: records are 8-byte aligned); lane 56 the pad byte.  Every lane of
 * the warp must call it (full-mask shuffle). */
#ifndef DSV4_HIP_KV_ENCODE_H
#define DSV4_HIP_KV_ENCODE_H

#include "quant_device.h"

/* Encoder options (kvcache.h dsv4_kv_encode_opts): scale exponent F with
 * FP8MAX = 1.75 * 2^F (448: 8, 224: 7), clamp mx, and the code kind. */
struct kv_enc_opts {
    int F;
    float mx;
    int fnuz;
};

/* OCP 448 (default), or vLLM's use_fnuz 224 (docs/semantics/kvcache.md A2.3 [S1]). */
__host__ __device__ inline kv_enc_opts kv_enc_default(int use_fnuz)
{
    kv_enc_opts o = {use_fnuz ? 7 : 8, use_fnuz ? 224.0f : 448.0f, use_fnuz};
    return o;
}

/* A bf16 number as fp32 (RNE; the values are finite). */
__device__ inline float kv_round_bf16(float x)
{
    return dsv4q_float((uint32_t)dsv4q_bf16(x) << 16);
}

/* Lane l's part of the record of `row` in page pg (B tokens per page). */
__device__ inline void kv_encode_lane(uint8_t *pg, long long B, long long row, int l, const float v[8],
                                      kv_enc_opts o)
{
    /* the amax fold from 0 on integer keys (dsv4q_amax_key): NaN ignored, as amax_step */
    const int32_t key = fold_amax_key(v, 0);
    const float m = dsv4q_amax_of_key(group_max_key(key, 8)); /* every lane, RoPE lanes included */
    if (l < 56) {
        /* smallest e with 2^e FP8MAX >= max(amax, 1e-4); byte clamp(e + 127, 0, 255) [S1] */
        const uint8_t sb = dsv4q_kv_scale_byte(m, o.F, 255);
        const float inv = dsv4q_pow2(127 - (int)sb);
#ifdef DSV4Q_HW_E4M3
        /* the hardware e4m3fn conversion saturates at 448 itself (satfinite) */
        const bool clamp = o.fnuz || o.mx != 448.0f;
#else
        const bool clamp = true;
#endif
        float q[8];
        for (int i = 0; i < 8; i++) {
            q[i] = v[i] * inv; /* one rounding at most, as x / 2^e (kvcache.c) */
            if (clamp)
                q[i] = q[i] > o.mx ? o.mx : q[i] < -o.mx ? -o.mx : q[i];
        }
        /* dsv4q_fp8 of each, four codes a word */
        *reinterpret_cast<uint2 *>(pg + row * 576 + 8 * l) =
            make_uint2(dsv4q_fp8x4(q[0], q[1], q[2], q[3], o.fnuz), dsv4q_fp8x4(q[4], q[5], q[6], q[7], o.fnuz));
        if ((l & 7) == 0)
            pg[B * 576 + row * 8 + l / 8] = sb;
    } else {
        const int j = l - 56; /* RoPE lanes: the bf16 bits, little-endian [S1] */
        const uint4 w = pack8_bf16(v); /* dsv4q_bf16 of each (quant_device.h) */
        uint2 *dst = reinterpret_cast<uint2 *>(pg + row * 576 + 448 + 16 * j);
        dst[0] = make_uint2(w.x, w.y);
        dst[1] = make_uint2(w.z, w.w);
        if (j == 0)
            pg[B * 576 + row * 8 + 7] = 0; /* pad byte [S1] */
    }
}

#endif
