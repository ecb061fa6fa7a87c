/* mx_rows.c - the MX row quantizers (dsv4_mx_quant_rows_*): the portable
 * rows and, where the CPU has them, the AVX2 and AVX-512F ones (the same
 * bytes); see mx.h.  Semantics: docs/semantics/quant.md Q1, Q2. */
#include "mx.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "codec_avx2.h"
#include "mx_avx2.h"
#include "mx_block.h"
#include "parallel.h"

static int check_rows(int64_t T, int64_t W, dsv4_mx_rule rule, int want_fp4, dsv4_status *st)
{
    dsv4_mx_prepare();
    if (T < 0 || W < 0 || W % DSV4_MX_BLOCK != 0)
        return dsv4_fail(st, DSV4_EINPUT,
                         "MX rows [%" PRId64 ", %" PRId64 "]: width must be a multiple of %d", T, W,
                         DSV4_MX_BLOCK);
    if ((unsigned)rule >= DSV4_MX_RULE_COUNT || dsv4_mx_rule_is_fp4(rule) != want_fp4)
        return dsv4_fail(st, DSV4_EINPUT, "scale rule %d is not an %s rule", (int)rule,
                         want_fp4 ? "MXFP4" : "MXFP8");
    return DSV4_OK;
}

typedef struct mx_rows_job {
    const float *x;
    const uint16_t *xh; /* bf16 input instead of x, or NULL */
    int64_t W;
    dsv4_mx_rule rule;
    dsv4_mx_elem elem;
    uint8_t *data, *scales;
} mx_rows_job;

/* The block at element offset i as fp32: in place, or bf16 decoded into f. */
DSV4_HOT_INLINE const float *block_f32(const mx_rows_job *j, int64_t i, float *f)
{
    if (!j->xh)
        return j->x + i;
    for (int k = 0; k < DSV4_MX_BLOCK; k++)
        f[k] = dsv4_bf16_to_f32_inline(j->xh[i + k]);
    return f;
}

/* Rows per parallel chunk: about 64K elements. */
static int64_t mx_row_grain(int64_t W) { return W > 0 && W < 65536 ? 65536 / W : 1; }

DSV4_VECTOR_CLONES static int fp4_rows_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
    const int64_t W = j->W, nb = W / DSV4_MX_BLOCK;
    uint8_t codes[DSV4_MX_BLOCK];
    float f[DSV4_MX_BLOCK];
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k < nb; k++) {
            const float *xb = block_f32(j, t * W + k * DSV4_MX_BLOCK, f);
            j->scales[t * nb + k] = quant_block_fp4(xb, DSV4_MX_BLOCK, j->rule, j->elem, codes);
            uint8_t *pb = j->data + t * (W / 2) + k * (DSV4_MX_BLOCK / 2);
            for (int i = 0; i < DSV4_MX_BLOCK / 2; i++) /* even element low (docs/semantics/quant.md Q1.2) */
                pb[i] = dsv4_e2m1_pack(codes[2 * i], codes[2 * i + 1]);
        }
    return DSV4_OK;
}

DSV4_VECTOR_CLONES static int fp8_rows_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
    const int64_t W = j->W, nb = W / DSV4_MX_BLOCK;
    float f[DSV4_MX_BLOCK];
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k < nb; k++)
            j->scales[t * nb + k] = quant_block_fp8(block_f32(j, t * W + k * DSV4_MX_BLOCK, f),
                                                            DSV4_MX_BLOCK, j->rule, j->data + t * W + k * DSV4_MX_BLOCK);
    return DSV4_OK;
}

#if DSV4_HAVE_AVX2_PATHS
/* The AVX2 rows: the block in four vectors, the amax and the codes eight
 * lanes at a time (codec_avx2.h), the scale byte and multiplier by the
 * scalar rules above.  A block whose amax or any q is NaN takes the
 * portable block function, which owns the NaN rules. */
DSV4_AVX2_INLINE void load_block_avx2(const mx_rows_job *j, int64_t i, __m256 v[4])
{
    for (int r = 0; r < 4; r++)
        v[r] = j->xh ? dsv4_avx2_load_bf16(j->xh + i + 8 * r) : _mm256_loadu_ps(j->x + i + 8 * r);
}

DSV4_AVX2_INLINE float amax_avx2(const __m256 v[4])
{
    int seen;
    const int32_t m = dsv4_avx2_amax_bits(v, 4, &seen);
    return seen ? dsv4_f32_of_bits((uint32_t)m) : NAN;
}

/* The e2m1 codes of q = x * m as 16 packed bytes; 0 if some q is NaN. */
DSV4_AVX2_INLINE int fp4_codes_avx2(const __m256 v[4], float m, dsv4_mx_elem elem, uint8_t *packed)
{
    __m256i c[4], nan = _mm256_setzero_si256();
    for (int r = 0; r < 4; r++) {
        const __m256 q = _mm256_mul_ps(v[r], _mm256_set1_ps(m));
        const __m256i bits = _mm256_castps_si256(q);
        nan = _mm256_or_si256(nan, _mm256_cmpgt_epi32(dsv4_avx2_abs_bits(q), _mm256_set1_epi32(0x7F800000)));
        /* RNE and half-away keep the sign bit (-0 -> 0x8); threshold: q < 0 only */
        const __m256i sign = elem == DSV4_MX_ELEM_THRESHOLD
                                 ? _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(q, _mm256_setzero_ps(), _CMP_LT_OQ)),
                                                    _mm256_set1_epi32(8))
                                 : _mm256_and_si256(_mm256_srli_epi32(bits, 28), _mm256_set1_epi32(8));
        c[r] = _mm256_or_si256(dsv4_avx2_e2m1_magnitude(q, elem == DSV4_MX_ELEM_HALF_AWAY), sign);
    }
    if (!_mm256_testz_si256(nan, nan))
        return 0;
    _mm_storeu_si128((__m128i *)(void *)packed, dsv4_avx2_pack_nibbles(dsv4_avx2_pack_bytes(c[0], c[1], c[2], c[3])));
    return 1;
}

/* The rows with elem a constant at each call (the branches fold away). */
/* One block in four vectors: its scale byte, its 16 packed bytes; elem is
 * a constant at each call (the branches fold away). */
DSV4_AVX2_INLINE uint8_t fp4_block_avx2(const __m256 v[4], dsv4_mx_rule rule, dsv4_mx_elem elem,
                                        dsv4_mx_elem elem_arg, uint8_t *pb)
{
    const float amax = amax_avx2(v);
    const uint8_t b = scale_byte(rule, amax);
    if (!isnan(amax) && !(rule == DSV4_MX_FP4_OCP && b == 0xFF) &&
        fp4_codes_avx2(v, fp4_multiplier(rule, b, amax), elem, pb))
        return b;
    float f[DSV4_MX_BLOCK];
    uint8_t codes[DSV4_MX_BLOCK];
    for (int r = 0; r < 4; r++)
        _mm256_storeu_ps(f + 8 * r, v[r]);
    (void)quant_block_fp4(f, DSV4_MX_BLOCK, rule, elem_arg, codes);
    for (int i = 0; i < DSV4_MX_BLOCK / 2; i++)
        pb[i] = dsv4_e2m1_pack(codes[2 * i], codes[2 * i + 1]);
    return b;
}

DSV4_AVX2_INLINE void fp4_rows_avx2(const mx_rows_job *j, dsv4_mx_elem elem, int64_t t0, int64_t t1)
{
    const int64_t W = j->W, nb = W / DSV4_MX_BLOCK;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k < nb; k++) {
            __m256 v[4];
            load_block_avx2(j, t * W + k * DSV4_MX_BLOCK, v);
            j->scales[t * nb + k] =
                fp4_block_avx2(v, j->rule, elem, j->elem, j->data + t * (W / 2) + k * (DSV4_MX_BLOCK / 2));
        }
}

/* elem as a constant for the block code: e2m1_encode's three cases. */
#define DSV4_FP4_BY_ELEM(elem, CALL)                                                                          \
    switch (elem) {                                                                                           \
    case DSV4_MX_ELEM_THRESHOLD: CALL(DSV4_MX_ELEM_THRESHOLD); break;                                         \
    case DSV4_MX_ELEM_RNE: CALL(DSV4_MX_ELEM_RNE); break;                                                     \
    default: CALL(DSV4_MX_ELEM_HALF_AWAY); break;                                                             \
    }

DSV4_AVX2 static int fp4_rows_range_avx2(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
#define ROWS(e) fp4_rows_avx2(j, e, t0, t1)
    DSV4_FP4_BY_ELEM(j->elem, ROWS)
#undef ROWS
    return DSV4_OK;
}

DSV4_AVX2 uint8_t dsv4_mx_fp4_block_avx2(const __m256 v[4], dsv4_mx_rule rule, dsv4_mx_elem elem, uint8_t *packed)
{
    uint8_t b = 0;
#define BLOCK(e) b = fp4_block_avx2(v, rule, e, elem, packed)
    DSV4_FP4_BY_ELEM(elem, BLOCK)
#undef BLOCK
    return b;
}

/* fp4_codes_avx2 sixteen lanes at a time (AVX-512F): the same fp32
 * products, the same magnitudes (RNE by rounding, e2m1_rne_magnitude_512;
 * half-away by the threshold counts, added under compare masks), the same
 * signs; 0 if some q is NaN. */
#define MX512_INLINE static inline __attribute__((target("avx512f,avx2,fma"), always_inline))

/* dsv4_e2m1_rne_magnitude of non-NaN |q| bits a, by rounding instead of
 * threshold counts: from 1.0 up, e2m1 is fp32 kept to one mantissa bit
 * (RNE through the integer add, a carry moving into the exponent, rebias
 * 127 -> 1), saturated at code 7; below 1.0 it is the RNE multiple of 0.5,
 * the low bits of fl(|q| + 2^22) (the ulp of 2^22 is 0.5).  The midpoint
 * rules (0.25 and 1.25 down, 0.75 and 1.75 up, ...) are RNE's ties to the
 * even code; every |q| bit pattern from 0 to Inf gives the count's code. */
MX512_INLINE __m512i e2m1_rne_magnitude_512(__m512i a)
{
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 22), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_sub_epi32(
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x1FFFFF)), odd), 22),
        _mm512_set1_epi32(252));
    const __m512i sub = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(4194304.0f))),
        _mm512_set1_epi32(0x4A800000));
    const __mmask16 small = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(0x3F800000));
    return _mm512_min_epi32(_mm512_mask_mov_epi32(nrm, small, sub), _mm512_set1_epi32(7));
}
MX512_INLINE int fp4_codes_512(const __m512 v[2], float m, dsv4_mx_elem elem, uint8_t *packed)
{
    __m512i c[2];
    __mmask16 nan = 0;
    const int half_away = elem == DSV4_MX_ELEM_HALF_AWAY;
    _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) { /* unrolled: c stays in registers */
        const __m512 q = _mm512_mul_ps(v[r], _mm512_set1_ps(m));
        const __m512i bits = _mm512_castps_si512(q), abits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
        nan |= _mm512_cmpgt_epi32_mask(abits, _mm512_set1_epi32(0x7F800000));
        const __m512 a = _mm512_castsi512_ps(abits);
        const __m512i one = _mm512_set1_epi32(1);
        __m512i n = _mm512_setzero_si512();
        if (!half_away) {
            n = e2m1_rne_magnitude_512(abits);
        } else {
        /* half away from zero: every midpoint 0.25 .. 5 goes up (>=); the
         * predicate is a constant, as clang's builtin requires */
#define MX512_UP(t) n = _mm512_mask_add_epi32(n, _mm512_cmp_ps_mask(a, _mm512_set1_ps(t), _CMP_GE_OQ), n, one)
        MX512_UP(0.25f), MX512_UP(0.75f), MX512_UP(1.25f), MX512_UP(1.75f);
        MX512_UP(2.5f), MX512_UP(3.5f), MX512_UP(5.0f);
#undef MX512_UP
        }
        /* RNE and half-away keep the sign bit (-0 -> 0x8); threshold: q < 0 only */
        const __m512i sign =
            elem == DSV4_MX_ELEM_THRESHOLD
                ? _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(q, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_epi32(8))
                : _mm512_and_si512(_mm512_srli_epi32(bits, 28), _mm512_set1_epi32(8));
        c[r] = _mm512_or_si512(n, sign);
    }
    if (nan)
        return 0;
    /* each 64-bit lane holds an (even, odd) pair of codes: even | odd << 4 in its low byte */
    const __m128i lo = _mm512_cvtepi64_epi8(_mm512_or_si512(c[0], _mm512_srli_epi64(c[0], 28)));
    const __m128i hi = _mm512_cvtepi64_epi8(_mm512_or_si512(c[1], _mm512_srli_epi64(c[1], 28)));
    _mm_storeu_si128((__m128i *)(void *)packed, _mm_unpacklo_epi64(lo, hi));
    return 1;
}

/* One MXFP8 block in four vectors: its scale byte, its 32 codes. */
DSV4_AVX2_INLINE uint8_t fp8_block_avx2(const __m256 v[4], dsv4_mx_rule rule, uint8_t *out)
{
    const float amax = amax_avx2(v);
    const uint8_t b = scale_byte(rule, amax);
    if (isnan(amax)) {
        float f[DSV4_MX_BLOCK];
        for (int r = 0; r < 4; r++)
            _mm256_storeu_ps(f + 8 * r, v[r]);
        (void)quant_block_fp8(f, DSV4_MX_BLOCK, rule, out);
        return b;
    }
    __m256i c[4];
    if (rule == DSV4_MX_FP8_FLOOR) { /* x / 2^(byte-127), as quant_block_fp8 */
        const __m256 d = _mm256_set1_ps(pow2f((int)b - 127));
        for (int r = 0; r < 4; r++)
            c[r] = dsv4_avx2_e4m3_sat(_mm256_div_ps(v[r], d), 0);
    } else {
        const __m256 m = _mm256_set1_ps(pow2f(127 - (int)b));
        for (int r = 0; r < 4; r++)
            c[r] = dsv4_avx2_e4m3_sat(_mm256_mul_ps(v[r], m), 0);
    }
    _mm256_storeu_si256((__m256i *)(void *)out, dsv4_avx2_pack_bytes(c[0], c[1], c[2], c[3]));
    return b;
}

DSV4_AVX2 static int fp8_rows_range_avx2(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
    const int64_t W = j->W, nb = W / DSV4_MX_BLOCK;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t k = 0; k < nb; k++) {
            __m256 v[4];
            load_block_avx2(j, t * W + k * DSV4_MX_BLOCK, v);
            j->scales[t * nb + k] = fp8_block_avx2(v, j->rule, j->data + t * W + k * DSV4_MX_BLOCK);
        }
    return DSV4_OK;
}

DSV4_AVX2 uint8_t dsv4_mx_fp8_block_avx2(const __m256 v[4], dsv4_mx_rule rule, uint8_t *codes)
{
    return fp8_block_avx2(v, rule, codes);
}

/* ---- AVX-512F batches: up to 16 blocks at a time ------------------------
 * The amax of each block (integer max of |x| bits, as amax_block), then the
 * scale bytes and multipliers of all of them in one vector (the rules'
 * arithmetic lane by lane, the ceil_log2 table gathered), then each block's
 * codes sixteen lanes at a time.  A block whose amax bits are NaN or Inf
 * takes the portable block function, which owns those rules. */
#define MX_BATCH 16
#define MX512 __attribute__((target("avx512f,avx2,fma")))

/* pow2f(127 - b) of scale bytes b in 0..254, lane by lane. */
MX512_INLINE __m512 pow2_neg_512(__m512i b)
{
    const __m512i bits = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), b), 23);
    return _mm512_castsi512_ps(
        _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(254)), _mm512_set1_epi32(0x00400000)));
}

/* ceil_log2_f32 of positive normal r (exponent field 1..254) lane by lane;
 * *sub gets the lanes whose r is subnormal (the caller takes the scalar
 * function there). */
MX512_INLINE __m512i ceil_log2_512(__m512 r, __mmask16 *sub)
{
    const __m512i b = _mm512_castps_si512(r), E = _mm512_srli_epi32(b, 23);
    *sub = _mm512_cmpeq_epi32_mask(E, _mm512_setzero_si512());
    const __m512i thr = _mm512_i32gather_epi32(E, (const void *)dsv4_mx_ceil_log2_thr, 4);
    const __m512i up = _mm512_maskz_mov_epi32(
        _mm512_cmpge_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFF)), thr), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_sub_epi32(E, _mm512_set1_epi32(127)), up);
}

MX512_INLINE __m512i clamp_512(__m512i v, int lo, int hi)
{
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

/* The scale bytes of n <= 16 blocks of finite amax bits a, and each one's
 * factor: the multiplier (fp4_multiplier, or pow2f(127 - b) for MXFP8),
 * the divisor pow2f(b - 127) for DSV4_MX_FP8_FLOOR.  Lanes of non-finite
 * amax get any value (their blocks take the portable code).  The rules
 * without a vector form here run scale_byte lane by lane. */
MX512_INLINE void scales_512(dsv4_mx_rule rule, __m512i a, uint8_t *bytes, float *fac)
{
    __m512i b;
    __m512 m;
    __mmask16 scalar = 0;
    switch (rule) {
    case DSV4_MX_FP4_CEIL: { /* fp4_scale_ceil; f32((254 - byte) << 23), wrapping */
        const __m512 ratio = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_max_epi32(a, _mm512_set1_epi32(SIX_MIN_NORMAL))),
                                           _mm512_set1_ps(dsv4_f32_of_bits(INV6_BITS)));
        b = _mm512_and_si512(_mm512_srli_epi32(_mm512_add_epi32(_mm512_castps_si512(ratio), _mm512_set1_epi32(0x7FFFFF)), 23),
                             _mm512_set1_epi32(0xFF));
        m = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), b), 23));
        break;
    }
    case DSV4_MX_FP4_CEIL_F32LOG2: { /* fp4_scale_ceil_f32log2; ratio is >= 2^-126 and finite here */
        const __m512 ratio = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_max_epi32(a, _mm512_set1_epi32(SIX_MIN_NORMAL))),
                                           _mm512_set1_ps(dsv4_f32_of_bits(INV6_BITS)));
        b = _mm512_add_epi32(clamp_512(ceil_log2_512(ratio, &scalar), -127, 127), _mm512_set1_epi32(127));
        scalar |= _mm512_cmpge_epi32_mask(_mm512_castps_si512(ratio), _mm512_set1_epi32(0x7F800000));
        m = pow2_neg_512(b);
        break;
    }
    case DSV4_MX_FP8_CEIL: { /* fp8_scale_ceil from the fields */
        const __m512i f = _mm512_max_epi32(a, _mm512_set1_epi32(0x00800000)); /* FLT_MIN */
        const __m512i up = _mm512_maskz_mov_epi32(
            _mm512_cmpgt_epi32_mask(_mm512_and_si512(f, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(0x600000)),
            _mm512_set1_epi32(1));
        b = clamp_512(_mm512_add_epi32(_mm512_sub_epi32(_mm512_srli_epi32(f, 23), _mm512_set1_epi32(8)), up), 0, 254);
        m = pow2_neg_512(b);
        break;
    }
    case DSV4_MX_FP8_CEIL_F32LOG2: { /* fp8_scale_ceil_f32log2: fl(max(amax, FLT_MIN) / 448) */
        const __m512 r = _mm512_div_ps(_mm512_castsi512_ps(_mm512_max_epi32(a, _mm512_set1_epi32(0x00800000))),
                                       _mm512_set1_ps(448.0f));
        b = clamp_512(_mm512_add_epi32(ceil_log2_512(r, &scalar), _mm512_set1_epi32(127)), 0, 254);
        m = pow2_neg_512(b);
        break;
    }
    default:
        b = _mm512_setzero_si512();
        m = _mm512_setzero_ps();
        scalar = 0xFFFF;
        break;
    }
    _mm_storeu_si128((__m128i *)(void *)bytes, _mm512_cvtepi32_epi8(b));
    _mm512_storeu_ps(fac, m);
    if (!scalar)
        return;
    uint32_t ab[MX_BATCH];
    _mm512_storeu_si512((void *)ab, a);
    for (int k = 0; k < MX_BATCH; k++)
        if (scalar >> k & 1) {
            const float amax = dsv4_f32_of_bits(ab[k]);
            const uint8_t sb = scale_byte(rule, amax);
            bytes[k] = sb;
            fac[k] = rule == DSV4_MX_FP8_FLOOR ? pow2f((int)sb - 127)
                     : dsv4_mx_rule_is_fp4(rule) ? fp4_multiplier(rule, sb, amax)
                                                 : pow2f(127 - (int)sb);
        }
}

/* Block k's 32 lanes as two vectors, from fp32 x or bf16 xh. */
MX512_INLINE void load_512(const float *x, const uint16_t *xh, int64_t k, __m512 v[2])
{
    if (xh) {
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(xh + 32 * k)));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(xh + 32 * k + 16)));
        v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(lo, 16));
        v[1] = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16));
    } else {
        v[0] = _mm512_loadu_ps(x + 32 * k);
        v[1] = _mm512_loadu_ps(x + 32 * k + 16);
    }
}

/* The largest |x| bits of block k, NaN bits included (so that a block with
 * a NaN or an Inf reads >= 0x7F800000).  bf16: eight 16-bit lanes, the
 * maximum as the complement of phminposuw's minimum. */
MX512_INLINE uint32_t amax_bits_512(const float *x, const uint16_t *xh, int64_t k)
{
    if (xh) {
        const __m256i mask = _mm256_set1_epi16(0x7FFF);
        const __m256i m = _mm256_max_epu16(
            _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(xh + 32 * k)), mask),
            _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(xh + 32 * k + 16)), mask));
        const __m128i h = _mm_max_epu16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        const __m128i mn = _mm_minpos_epu16(_mm_xor_si128(h, _mm_set1_epi16(-1)));
        return (uint32_t)(~_mm_cvtsi128_si32(mn) & 0xFFFF) << 16;
    }
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + 32 * k)), abs),
                                       _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + 32 * k + 16)), abs));
    return (uint32_t)_mm512_reduce_max_epu32(m);
}

/* dsv4_e4m3_sat_lane(q, e4m3fn) of non-NaN lanes, sixteen at a time (the
 * operations of dsv4_avx2_e4m3_sat). */
MX512_INLINE __m512i e4m3fn_sat_512(__m512 q)
{
    const int32_t emin = -6, max_code = 0x7E;
    const __m512i b = _mm512_castps_si512(q), a = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF)), odd);
    const __m512i nrm = _mm512_sub_epi32(_mm512_srli_epi32(rounded, 20), _mm512_set1_epi32((127 + emin - 1) << 3));
    const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f));
    const __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(scaled, _mm512_set1_ps(8388608.0f))),
                                         _mm512_set1_epi32(0x4B000000));
    const __mmask16 small = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32((127 + emin) << 23));
    const __m512i code = _mm512_min_epi32(_mm512_mask_mov_epi32(nrm, small, sub), _mm512_set1_epi32(max_code));
    return _mm512_or_si512(code, _mm512_and_si512(_mm512_srai_epi32(b, 24), _mm512_set1_epi32(0x80)));
}

/* n <= 16 blocks (fp32 x or bf16 xh, 32 lanes each, in a row): MXFP4 codes
 * (16 bytes a block) or MXFP8 codes (32) into out, the scale bytes into
 * scales; elem is a constant at each call (the branches fold away). */
MX512_INLINE void batch_512(int fp4, const float *x, const uint16_t *xh, int n, dsv4_mx_rule rule, dsv4_mx_elem elem,
                            dsv4_mx_elem elem_arg, uint8_t *out, uint8_t *scales)
{
    uint32_t ab[MX_BATCH] = {0};
    for (int k = 0; k < n; k++)
        ab[k] = amax_bits_512(x, xh, k);
    const __m512i a = _mm512_loadu_si512((const void *)ab);
    const __mmask16 special = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
    uint8_t bytes[MX_BATCH];
    float fac[MX_BATCH];
    scales_512(rule, a, bytes, fac);
    memcpy(scales, bytes, (size_t)n);
    for (int k = 0; k < n; k++) {
        __m512 v[2];
        load_512(x, xh, k, v);
        if (special >> k & 1) { /* NaN or Inf: the portable block */
            float f[DSV4_MX_BLOCK];
            uint8_t codes[DSV4_MX_BLOCK];
            _mm512_storeu_ps(f, v[0]), _mm512_storeu_ps(f + 16, v[1]);
            if (fp4) {
                scales[k] = quant_block_fp4(f, DSV4_MX_BLOCK, rule, elem_arg, codes);
                for (int i = 0; i < DSV4_MX_BLOCK / 2; i++)
                    out[16 * k + i] = dsv4_e2m1_pack(codes[2 * i], codes[2 * i + 1]);
            } else {
                scales[k] = quant_block_fp8(f, DSV4_MX_BLOCK, rule, out + 32 * k);
            }
            continue;
        }
        if (fp4) {
            (void)fp4_codes_512(v, fac[k], elem, out + 16 * k); /* finite lanes: no NaN q */
        } else {
            const __m512 m = _mm512_set1_ps(fac[k]);
            for (int r = 0; r < 2; r++) {
                const __m512 q = rule == DSV4_MX_FP8_FLOOR ? _mm512_div_ps(v[r], m) : _mm512_mul_ps(v[r], m);
                _mm_storeu_si128((__m128i *)(void *)(out + 32 * k + 16 * r), _mm512_cvtepi32_epi8(e4m3fn_sat_512(q)));
            }
        }
    }
}

/* n blocks in 16-block batches. */
MX512_INLINE void blocks_512(int fp4, const float *x, const uint16_t *xh, int64_t n, dsv4_mx_rule rule,
                             dsv4_mx_elem elem, dsv4_mx_elem elem_arg, uint8_t *out, uint8_t *scales)
{
    const int64_t per = fp4 ? DSV4_MX_BLOCK / 2 : DSV4_MX_BLOCK;
    for (int64_t k = 0; k < n; k += MX_BATCH) {
        const int nk = n - k < MX_BATCH ? (int)(n - k) : MX_BATCH;
        batch_512(fp4, x ? x + k * DSV4_MX_BLOCK : NULL, xh ? xh + k * DSV4_MX_BLOCK : NULL, nk, rule, elem, elem_arg,
                  out + k * per, scales + k);
    }
}

MX512 void dsv4_mx_fp4_blocks_512(const float *x, int64_t n, dsv4_mx_rule rule, dsv4_mx_elem elem, uint8_t *packed,
                                  uint8_t *scales)
{
#define BLOCKS(e) blocks_512(1, x, NULL, n, rule, e, elem, packed, scales)
    DSV4_FP4_BY_ELEM(elem, BLOCKS)
#undef BLOCKS
}

MX512 void dsv4_mx_fp8_blocks_512(const float *x, int64_t n, dsv4_mx_rule rule, uint8_t *codes, uint8_t *scales)
{
    blocks_512(0, x, NULL, n, rule, DSV4_MX_ELEM_RNE, DSV4_MX_ELEM_RNE, codes, scales);
}

/* The rows [t0, t1) are blocks t0 nb .. t1 nb - 1 in a row, in the input,
 * the codes and the scales alike. */
MX512 static int fp4_rows_range_512(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
    const int64_t nb = j->W / DSV4_MX_BLOCK, i0 = t0 * nb, n = (t1 - t0) * nb;
    const float *x = j->x ? j->x + i0 * DSV4_MX_BLOCK : NULL;
    const uint16_t *xh = j->xh ? j->xh + i0 * DSV4_MX_BLOCK : NULL;
#define BLOCKS(e) blocks_512(1, x, xh, n, j->rule, e, j->elem, j->data + i0 * (DSV4_MX_BLOCK / 2), j->scales + i0)
    DSV4_FP4_BY_ELEM(j->elem, BLOCKS)
#undef BLOCKS
    return DSV4_OK;
}

MX512 static int fp8_rows_range_512(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const mx_rows_job *j = ctx;
    const int64_t nb = j->W / DSV4_MX_BLOCK, i0 = t0 * nb, n = (t1 - t0) * nb;
    blocks_512(0, j->x ? j->x + i0 * DSV4_MX_BLOCK : NULL, j->xh ? j->xh + i0 * DSV4_MX_BLOCK : NULL, n, j->rule,
               DSV4_MX_ELEM_RNE, DSV4_MX_ELEM_RNE, j->data + i0 * DSV4_MX_BLOCK, j->scales + i0);
    return DSV4_OK;
}
#endif

/* The rows' function: the AVX-512 or AVX2 one where it runs (simd.h),
 * else the portable one. */
static dsv4_par_fn rows_fn(int fp4)
{
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_level() >= DSV4_SIMD_AVX512)
        return fp4 ? fp4_rows_range_512 : fp8_rows_range_512;
    if (dsv4_simd_avx2())
        return fp4 ? fp4_rows_range_avx2 : fp8_rows_range_avx2;
#endif
    return fp4 ? fp4_rows_range : fp8_rows_range;
}

/* What the four row entry points share: the check, then the rows on the
 * workers. */
static int quant_rows(mx_rows_job j, int64_t T, int fp4, dsv4_status *st)
{
    int rc = check_rows(T, j.W, j.rule, fp4, st);
    return rc ? rc : dsv4_parallel_for(T, mx_row_grain(j.W), 0, rows_fn(fp4), &j, st);
}

int dsv4_mx_quant_rows_fp4(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           dsv4_mx_elem elem, uint8_t *packed, uint8_t *scales, dsv4_status *st)
{
    return quant_rows((mx_rows_job){x, NULL, W, rule, elem, packed, scales}, T, 1, st);
}

int dsv4_mx_quant_rows_fp4_bf16(const uint16_t *x, int64_t T, int64_t W, dsv4_mx_rule rule, dsv4_mx_elem elem,
                                uint8_t *packed, uint8_t *scales, dsv4_status *st)
{
    return quant_rows((mx_rows_job){NULL, x, W, rule, elem, packed, scales}, T, 1, st);
}

int dsv4_mx_quant_rows_fp8(const float *x, int64_t T, int64_t W, dsv4_mx_rule rule,
                           uint8_t *data, uint8_t *scales, dsv4_status *st)
{
    return quant_rows((mx_rows_job){x, NULL, W, rule, DSV4_MX_ELEM_RNE, data, scales}, T, 0, st);
}

int dsv4_mx_quant_rows_fp8_bf16(const uint16_t *x, int64_t T, int64_t W, dsv4_mx_rule rule, uint8_t *data,
                                uint8_t *scales, dsv4_status *st)
{
    return quant_rows((mx_rows_job){NULL, x, W, rule, DSV4_MX_ELEM_RNE, data, scales}, T, 0, st);
}
