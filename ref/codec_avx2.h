/* codec_avx2.h - the lane codecs of codec_inline.h, eight lanes at a time
 * in AVX2 intrinsics, for the AVX2 paths (simd.h).  Each function does the
 * integer and IEEE fp32 operations of its lane form in the same order (no
 * FMA: the target is avx2 alone), so a lane gives the same code as the
 * portable function named beside it.  Private to ref/ and ops/. */
#ifndef DSV4_CODEC_AVX2_H
#define DSV4_CODEC_AVX2_H

#include "simd.h"

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>
#include <stdint.h>

#define DSV4_AVX2 __attribute__((target("avx2")))
#define DSV4_AVX2_INLINE static inline __attribute__((target("avx2"), always_inline))

/* 8 bf16 widened to fp32 (a shift, exact). */
DSV4_AVX2_INLINE __m256 dsv4_avx2_load_bf16(const uint16_t *h)
{
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

DSV4_AVX2_INLINE __m256i dsv4_avx2_abs_bits(__m256 x)
{
    return _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF));
}

DSV4_AVX2_INLINE int32_t dsv4_avx2_hmax_epi32(__m256i m)
{
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

/* The largest non-NaN |x| bits over n vectors (0 if none) and whether any
 * lane was not NaN (the integer max of amax_block / group_amax). */
DSV4_AVX2_INLINE int32_t dsv4_avx2_amax_bits(const __m256 *v, int n, int *seen)
{
    __m256i m = _mm256_setzero_si256(), ok_any = _mm256_setzero_si256();
    for (int k = 0; k < n; k++) {
        const __m256i a = dsv4_avx2_abs_bits(v[k]);
        const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
        m = _mm256_max_epi32(m, _mm256_andnot_si256(nan, a));
        ok_any = _mm256_or_si256(ok_any, _mm256_andnot_si256(nan, _mm256_set1_epi32(-1)));
    }
    *seen = !_mm256_testz_si256(ok_any, ok_any);
    return dsv4_avx2_hmax_epi32(m);
}

/* r = a + b or a * b with the NaN lanes C gives: x86 returns the first
 * operand's NaN (quieted) when it is NaN, but a compiler may swap the
 * operands of a commutative intrinsic, so those lanes are set here. */
DSV4_AVX2_INLINE __m256 dsv4_avx2_first_nan(__m256 r, __m256 a)
{
    const __m256 quiet_a = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x00400000)));
    return _mm256_blendv_ps(r, quiet_a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

/* Whether any of x[0..n) is NaN (n a multiple of 8).  A NaN operand on
 * both sides of a product or sum leaves C free to return either payload
 * (the compiler may swap the operands), so the paths that meet such
 * inputs from a table take the portable code for them. */
DSV4_AVX2_INLINE int dsv4_avx2_any_nan(const float *x, int n)
{
    __m256 u = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        u = _mm256_or_ps(u, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    return !_mm256_testz_ps(u, u);
}

/* dsv4_bf16_from_f32_inline then back to fp32, on 8 lanes: RNE (overflow
 * carries into Inf), NaN quiet with its sign. */
DSV4_AVX2_INLINE __m256 dsv4_avx2_bf16_round(__m256 x)
{
    const __m256i b = _mm256_castps_si256(x), hi = _mm256_set1_epi32((int32_t)0xFFFF0000u);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    const __m256i rne = _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), odd);
    const __m256i quiet = _mm256_or_si256(b, _mm256_set1_epi32(0x00400000));
    const __m256i nan = _mm256_cmpgt_epi32(dsv4_avx2_abs_bits(x), _mm256_set1_epi32(0x7F800000));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_blendv_epi8(rne, quiet, nan), hi));
}

/* dsv4_bf16_from_f32_inline's RNE branch on 16 lanes of fp32 bits b (for
 * non-NaN lanes: an overflow carries into Inf): the bf16 bits, in the low
 * half of each lane.  AVX-512F; the callers' NaN rules stay theirs. */
#define DSV4_AVX512_INLINE static inline __attribute__((target("avx512f,avx2"), always_inline))
DSV4_AVX512_INLINE __m512i dsv4_avx512_bf16_rne(__m512i b)
{
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)), odd), 16);
}

/* dsv4_e4m3_sat_lane (codec_inline.h) on 8 lanes: the codes as int32. */
DSV4_AVX2_INLINE __m256i dsv4_avx2_e4m3_sat(__m256 q, int fnuz)
{
    const int32_t emin = fnuz ? -7 : -6, max_code = fnuz ? 0x7F : 0x7E;
    const __m256i b = _mm256_castps_si256(q), a = dsv4_avx2_abs_bits(q);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, 20), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32(0x7FFFF)), odd);
    const __m256i nrm = _mm256_sub_epi32(_mm256_srli_epi32(rounded, 20), _mm256_set1_epi32((127 + emin - 1) << 3));
    const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(fnuz ? 1024.0f : 512.0f));
    const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(scaled, _mm256_set1_ps(8388608.0f))),
                                         _mm256_set1_epi32(0x4B000000));
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32((127 + emin) << 23), a);
    __m256i code = _mm256_min_epi32(_mm256_blendv_epi8(nrm, sub, small), _mm256_set1_epi32(max_code));
    const __m256i sign = _mm256_and_si256(_mm256_srai_epi32(b, 24), _mm256_set1_epi32(0x80));
    if (fnuz) /* no negative zero */
        code = _mm256_or_si256(code, _mm256_andnot_si256(_mm256_cmpeq_epi32(code, _mm256_setzero_si256()), sign));
    else
        code = _mm256_or_si256(code, sign);
    const __m256i nan_code = fnuz ? _mm256_set1_epi32(0x80) : _mm256_or_si256(sign, _mm256_set1_epi32(0x7F));
    return _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000)));
}

/* The e2m1 magnitude of non-NaN lanes (dsv4_e2m1_rne_magnitude, or with
 * half_away the ties-up variant of mx.c): the count of thresholds passed. */
DSV4_AVX2_INLINE __m256i dsv4_avx2_e2m1_magnitude(__m256 q, int half_away)
{
    const __m256 a = _mm256_castsi256_ps(dsv4_avx2_abs_bits(q));
#define DSV4_E2M1_UP(t) _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(t), _CMP_GE_OQ))
#define DSV4_E2M1_TIE(t)                                                                                    \
    _mm256_castps_si256(half_away ? _mm256_cmp_ps(a, _mm256_set1_ps(t), _CMP_GE_OQ)                         \
                                  : _mm256_cmp_ps(a, _mm256_set1_ps(t), _CMP_GT_OQ))
    /* RNE: the ties at 0.25, 1.25, 2.5, 5 stay down (>), the others go up (>=) */
    const __m256i n0 = _mm256_add_epi32(DSV4_E2M1_TIE(0.25f), DSV4_E2M1_UP(0.75f));
    const __m256i n1 = _mm256_add_epi32(DSV4_E2M1_TIE(1.25f), DSV4_E2M1_UP(1.75f));
    const __m256i n2 = _mm256_add_epi32(DSV4_E2M1_TIE(2.5f), DSV4_E2M1_UP(3.5f));
    const __m256i n = _mm256_add_epi32(_mm256_add_epi32(n0, n1), _mm256_add_epi32(n2, DSV4_E2M1_TIE(5.0f)));
#undef DSV4_E2M1_UP
#undef DSV4_E2M1_TIE
    return _mm256_sub_epi32(_mm256_setzero_si256(), n);
}

/* Four vectors of int32 codes (each 0..255) as 32 bytes in element order. */
DSV4_AVX2_INLINE __m256i dsv4_avx2_pack_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    /* per 128-bit half: c0 c1 c2 c3 four lanes each; then the halves interleaved back */
    const __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 nibble codes (one a byte) as 16 bytes, the even element in the low
 * nibble (dsv4_e2m1_pack). */
DSV4_AVX2_INLINE __m128i dsv4_avx2_pack_nibbles(__m256i bytes)
{
    const __m256i w = _mm256_or_si256(_mm256_and_si256(bytes, _mm256_set1_epi16(0x000F)),
                                      _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi16(0x00F0)));
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0x08));
}

#endif
#endif
