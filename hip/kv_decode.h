/* kv_decode.h - the NoPE lanes of a 584-byte fp8_ds_mla record as the
 * paged attention's key rows hold them (docs/semantics/kvcache.md A2.3, A4;
 * docs/semantics/attention.md A8.4): lane = bf16(fp32(fp8) * 2^(b-127)),
 * NaN lanes 0.  decode8_int is the integer rule on every target;
 * decode8_hw the same bits through the NVIDIA hardware conversion, which the
 * bench's device codec check (backend.cpp) compares with decode8_int on
 * every code pair, scale byte and fp8 form. */
#ifndef DSV4_HIP_KV_DECODE_H
#define DSV4_HIP_KV_DECODE_H

#include "quant_rules.h"

namespace sattn {

/* fp32 -> bf16 round to nearest even (ref/numerics.h dsv4_bf16_from_f32),
 * NaN -> the quiet NaN 0x7FC0. */
__device__ inline uint32_t bf16_rne(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

/* One fp8 byte as fp32: e4m3fn (bias 7, 0x7F/0xFF NaN) or e4m3fnuz
 * (bias 8, 0x80 NaN, no -0) (docs/semantics/kvcache.md A2.3; the codecs of ref/numerics.c). */
__device__ inline float fp8_to_f32(uint32_t b, int fnuz)
{
    const uint32_t sign = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    if (fnuz ? b == 0x80u : (b & 0x7Fu) == 0x7Fu)
        return __uint_as_float(0x7FC00000u);
    const int bias = fnuz ? 8 : 7;
    float mag = e ? __uint_as_float((e + 127u - bias) << 23 | m << 20) /* (1 + m/8) 2^(e-bias) */
                  : (float)m * __uint_as_float((uint32_t)(127 - bias - 2) << 23); /* m/8 2^(1-bias) */
    return __uint_as_float(__float_as_uint(mag) | sign);
}

/* 2^(b - 127) in fp32 as Triton's exp2 builds it: b = 0 is the subnormal
 * 2^-127, b = 255 is +Inf (ref/kvcache.c scale_f32, docs/semantics/kvcache.md A4). */
__device__ inline float e8m0_to_f32(uint32_t b)
{
    return b == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(b << 23);
}

/* A decoded lane as the key row holds it: NaN -> 0 ("NaNs in K become 0",
 * docs/semantics/attention.md A8.4 [S9]); other values are bf16 already. */
__device__ inline uint32_t scrub(uint32_t h) { return (h & 0x7FFFu) > 0x7F80u ? 0u : h; }

/* Eight fp8 codes (w, low byte first) of one 64-lane scale block (sc =
 * e8m0_to_f32 of its byte) as bf16 key lanes. */
__device__ inline void decode8_int(uint2 w, float sc, int fz, uint32_t h[8])
{
    for (int i = 0; i < 8; i++) {
        const uint32_t byte = ((i < 4 ? w.x : w.y) >> (8 * (i & 3))) & 0xFFu;
        h[i] = scrub(bf16_rne(fp8_to_f32(byte, fz) * sc));
    }
}

#ifdef DSV4Q_HW_E4M3
/* decode8_int on NVIDIA sm_89+, the same bits with the hardware e4m3fn -> f16
 * conversion (quant_rules.h dsv4q_fp8x2_decode_hw; exact, and checked on all
 * code pairs by the bench's device codec check).  FNUZ is e4m3fn with bias 8
 * in place of 7, so for every code but three its value is the fn value / 2,
 * and fn(b) * (sc / 2) is the same single rounding of the same exact product
 * as fnuz(b) * sc (sc / 2 is a power of two >= 2^-128: exact).  The three:
 * 0x80 is NaN in FNUZ (-0 in fn) and 0x7F / 0xFF are +-240 in FNUZ (NaN in
 * fn), i.e. +-480 * (sc / 2).  fn's own NaN codes (0x7F / 0xFF) and FNUZ's
 * 0x80 become NaN, which scrub turns into 0 as the reference's path does;
 * each lane pair is rounded by dsv4q_bf16x2_hw (its NaN 0x7FFF is scrubbed
 * to 0 as bf16_rne's 0x7FC0 is). */
__device__ inline void decode8_hw(uint2 w, float sc, int fz, uint32_t h[8])
{
    const float f = fz ? sc * 0.5f : sc;
    const float nan = __uint_as_float(0x7FC00000u);
    for (int p = 0; p < 4; p++) {
        const uint32_t word = p < 2 ? w.x : w.y, two = (word >> (16 * (p & 1))) & 0xFFFFu;
        float v[2];
        dsv4q_fp8x2_decode_hw((uint16_t)two, &v[0], &v[1]);
        for (int i = 0; i < 2; i++) {
            const uint32_t b = (two >> (8 * i)) & 0xFFu;
            const bool sat = (b & 0x7Fu) == 0x7Fu; /* fn NaN, FNUZ +-240 */
            float x = sat ? (fz ? ((b & 0x80u) ? -480.0f : 480.0f) : nan) : v[i];
            v[i] = fz && b == 0x80u ? nan : x;
        }
        const uint32_t r = dsv4q_bf16x2_hw(v[0] * f, v[1] * f); /* the products rounded once each, as before */
        h[2 * p] = scrub(r & 0xFFFFu);
        h[2 * p + 1] = scrub(r >> 16);
    }
}
#endif

/* Eight NoPE lanes as the key row holds them, packed (lane 0 in the low half
 * of .x): codes w of one 64-lane block and its scale byte; decode8_hw where
 * the device has the conversion, else decode8_int. */
__device__ inline uint4 decode8_packed(uint2 w, uint32_t scale_byte, int fz)
{
    const float sc = e8m0_to_f32(scale_byte);
    uint32_t h[8];
#ifdef DSV4Q_HW_E4M3
    decode8_hw(w, sc, fz, h);
#else
    decode8_int(w, sc, fz, h);
#endif
    return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

/* Two stored RoPE bf16 lanes with NaN lanes made 0 (scrub). */
__device__ inline uint32_t scrub2(uint32_t two) { return scrub(two & 0xFFFFu) | scrub(two >> 16) << 16; }

} /* namespace sattn */

#endif
