/* kvcache.c - the V4 fp8_ds_mla cache (docs/semantics/kvcache.md A2, A4). */
#include "kvcache.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "codec_avx2.h"
#include "codec_inline.h"
#include "parallel.h"
#include "simd.h"

/* Code tables built once from the numerics codecs (not a second codec):
 * enc[kind][h] = dsv4_fp8_from_f32(bf16 h, kind, saturate) for the
 * magnitudes up to 511 the encoder can meet, dec[kind][b] =
 * dsv4_fp8_to_f32(b, kind).  The encoder's scaled values are bf16 values
 * times a power of two, hence bf16 values themselves (else it falls back
 * to the codec call). */
#define ENC_LUT_SIZE 0x4400 /* bf16 bits of 512.0 */
static once_flag lut_once = ONCE_FLAG_INIT;
static uint8_t enc_lut[2][ENC_LUT_SIZE];
static float dec_lut[2][256];

static void lut_init(void)
{
    for (int k = 0; k < 2; k++) {
        for (uint32_t h = 0; h < ENC_LUT_SIZE; h++)
            enc_lut[k][h] = dsv4_fp8_from_f32(dsv4_bf16_to_f32((uint16_t)h), (dsv4_fp8_kind)k, 1);
        for (int b = 0; b < 256; b++)
            dec_lut[k][b] = dsv4_fp8_to_f32((uint8_t)b, (dsv4_fp8_kind)k);
    }
}

static inline uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* dsv4_fp8_from_f32(q, kind, 1), through the table where q is a bf16 value
 * (its low 16 bits are zero). */
static uint8_t fp8_code(float q, dsv4_fp8_kind kind)
{
    const uint32_t b = f32_bits(q);
    const uint32_t h = b >> 16;
    if ((b & 0xFFFFu) || (h & 0x7FFFu) >= ENC_LUT_SIZE || (h & 0x7FFFu) == 0)
        return dsv4_fp8_from_f32(q, kind, 1); /* +-0 keep their sign rule there */
    uint8_t c = enc_lut[kind][h & 0x7FFFu];
    if (!(h & 0x8000u) || (kind == DSV4_FP8_E4M3FNUZ && c == 0))
        return c; /* fnuz has no -0 */
    return (uint8_t)(c | 0x80u);
}

dsv4_kv_encode_opts dsv4_kv_encode_opts_default(int use_fnuz)
{
    dsv4_kv_encode_opts o;
    /* FP8MAX = torch.finfo(e4m3fn).max = 448, or get_fp8_min_max()'s 224
     * for FNUZ (vllm cache_utils.py@03dc5649 quantize_and_insert_k_cache) [S1]. */
    o.kind = use_fnuz ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
    o.fp8_max = use_fnuz ? 224.0f : 448.0f;
    o.scale_max = 255; /* clamp(e + 127, 0, 255) [S1] */
    return o;
}

/* 2^k as fp32 for k in [-149, 127] (subnormal below -126). */
static inline float pow2_f32(int k)
{
    return dsv4_f32_of_bits(k >= -126 ? (uint32_t)(k + 127) << 23 : 1u << (k + 149));
}

/* The same smallest e from the fp32 fields where both are normal:
 * a = ma 2^Ea, M = mm 2^Em (ma, mm in [1, 2)): 2^e M >= a first holds at
 * e = Ea - Em when ma <= mm, else one higher. */
static inline int scale_exponent(float amax, float fp8_max)
{
    const float a = amax > DSV4_KV_AMAX_FLOOR ? amax : DSV4_KV_AMAX_FLOOR;
    const uint32_t ab = dsv4_bits_f32(a), mb = dsv4_bits_f32(fp8_max);
    const int Ea = (int)(ab >> 23), Em = (int)(mb >> 23);
    if (Ea == 0 || Ea == 255 || Em == 0 || Em == 255 || (mb >> 31))
        return dsv4_kv_scale_exponent(amax, fp8_max);
    return Ea - Em + ((ab & 0x7FFFFFu) > (mb & 0x7FFFFFu));
}

int dsv4_kv_scale_exponent(float amax, float fp8_max)
{
    /* a = max(amax, 1e-4) (docs/semantics/kvcache.md A2.2 [S1, S15]); smallest e with
     * 2^e * FP8MAX >= a, the exact form of ceil(log2(a / FP8MAX)) (docs/semantics/kvcache.md A2.2
     * log2 note).  All products below are exact in double. */
    double a = amax > DSV4_KV_AMAX_FLOOR ? (double)amax : (double)DSV4_KV_AMAX_FLOOR;
    int ea, em;
    frexp(a, &ea);
    frexp((double)fp8_max, &em);
    int e = ea - em; /* within one of the answer */
    while (ldexp((double)fp8_max, e) < a)
        e++;
    while (ldexp((double)fp8_max, e - 1) >= a)
        e--;
    return e;
}

uint8_t dsv4_kv_scale_byte(float amax, const dsv4_kv_encode_opts *o)
{
    int b = dsv4_kv_scale_exponent(amax, o->fp8_max) + 127;
    /* clamp(e + 127, 0, 255) [S1]; 254 cap of the gfx950 compressor [S19]. */
    return (uint8_t)(b < 0 ? 0 : b > o->scale_max ? o->scale_max : b);
}

/* The encoding of one token's bf16-valued, finite lanes v (the body of
 * dsv4_kv_encode_token). */
DSV4_HOT_INLINE void encode_values(uint8_t *page, int64_t B, int64_t row, const float *v,
                                   const dsv4_kv_encode_opts *o)
{
    uint8_t *vals = page + dsv4_kv_value_offset(row);
    uint8_t *scales = page + dsv4_kv_scale_offset(B, row);
    const int fnuz = o->kind == DSV4_FP8_E4M3FNUZ;
    const float mx = o->fp8_max;
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        const float *blk = v + k * DSV4_KV_QBLOCK;
        int32_t m = 0; /* max |v| of the finite lanes, as bits (orders like the values) */
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            const int32_t a = (int32_t)(dsv4_bits_f32(blk[i]) & 0x7FFFFFFFu);
            m = a > m ? a : m;
        }
        const float amax = dsv4_f32_of_bits((uint32_t)m);
        const int b = scale_exponent(amax, mx) + 127;
        /* clamp(e + 127, 0, 255) [S1]; 254 cap of the gfx950 compressor [S19]. */
        const uint8_t sb = (uint8_t)(b < 0 ? 0 : b > o->scale_max ? o->scale_max : b);
        scales[k] = sb;
        /* x * 2^-e: exact in fp32 but for underflow far below the fp8
         * range, the same single rounding as the kernel's x / 2^e; then
         * clamp to +-FP8MAX and RNE to e4m3 [S1]. */
        const float inv = pow2_f32(127 - (int)sb); /* 2^-e, exact in fp32 */
        uint8_t c[DSV4_KV_QBLOCK];
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            const float q = blk[i] * inv; /* one rounding at most (fp32 underflow), as x / 2^e */
            const int32_t lo = -(int32_t)(q < -mx), hi = -(int32_t)(q > mx);
            const int32_t qb = dsv4_sel_i32(hi, (int32_t)dsv4_bits_f32(mx),
                                            dsv4_sel_i32(lo, (int32_t)dsv4_bits_f32(-mx), (int32_t)dsv4_bits_f32(q)));
            c[i] = dsv4_e4m3_sat_lane(dsv4_f32_of_bits((uint32_t)qb), fnuz);
        }
        memcpy(vals + k * DSV4_KV_QBLOCK, c, sizeof c);
    }
    scales[7] = 0; /* pad byte [S1] */
    uint8_t *rope = page + dsv4_kv_rope_offset(row);
    for (int j = 0; j < DSV4_KV_ROPE_DIM; j++) { /* bf16 little-endian [S1] */
        uint16_t h = dsv4_bf16_from_f32_inline(v[DSV4_KV_NOPE_DIM + j]);
        rope[2 * j] = (uint8_t)(h & 0xFF);
        rope[2 * j + 1] = (uint8_t)(h >> 8);
    }
}

int dsv4_kv_encode_token(uint8_t *page, int64_t B, int64_t row, const float *x,
                         const dsv4_kv_encode_opts *o, dsv4_status *st)
{
    float v[DSV4_KV_HEAD_DIM];
    for (int d = 0; d < DSV4_KV_HEAD_DIM; d++) {
        if (!isfinite(x[d]))
            return dsv4_fail(st, DSV4_EINPUT, "token value at dim %d is %g: must be finite", d,
                             (double)x[d]);
        /* bf16 input [S1] / bf16(n) [S19]; bf16 values pass unchanged */
        v[d] = (f32_bits(x[d]) & 0xFFFFu) ? dsv4_round_bf16(x[d]) : x[d];
    }
    encode_values(page, B, row, v, o);
    return DSV4_OK;
}

/* fp32 2^(b - 127) as Triton's exp2 builds it: 2^-127 is an fp32
 * subnormal, 2^128 overflows to +Inf (docs/semantics/numerics.md A1; docs/semantics/kvcache.md A4). */
static inline float scale_f32(uint8_t b)
{
    int e = (int)b - 127;
    return e > 127 ? INFINITY : pow2_f32(e);
}

void dsv4_kv_decode_token_f32(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind,
                              float *out)
{
    const uint8_t *vals = page + dsv4_kv_value_offset(row);
    const uint8_t *scales = page + dsv4_kv_scale_offset(B, row);
    call_once(&lut_once, lut_init);
    const float *tab = dec_lut[kind == DSV4_FP8_E4M3FNUZ];
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) { /* fp32 product, as the kernel [S1] */
        const float s = scale_f32(scales[k]);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++)
            out[k * DSV4_KV_QBLOCK + i] = tab[vals[k * DSV4_KV_QBLOCK + i]] * s;
    }
    const uint8_t *rope = page + dsv4_kv_rope_offset(row);
    for (int j = 0; j < DSV4_KV_ROPE_DIM; j++)
        out[DSV4_KV_NOPE_DIM + j] =
            dsv4_bf16_to_f32((uint16_t)(rope[2 * j] | (uint16_t)(rope[2 * j + 1] << 8)));
}

/* dsv4_kv_decode_token_bf16 once the tables exist. */
DSV4_HOT_INLINE void decode_bf16(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind, uint16_t *out)
{
    const uint8_t *vals = page + dsv4_kv_value_offset(row);
    const uint8_t *scales = page + dsv4_kv_scale_offset(B, row);
    const float *tab = dec_lut[kind == DSV4_FP8_E4M3FNUZ];
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) { /* fp32 product [S1], .to(tl.bfloat16): RNE [S1] */
        const float s = scale_f32(scales[k]);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++)
            out[k * DSV4_KV_QBLOCK + i] = dsv4_bf16_from_f32_inline(tab[vals[k * DSV4_KV_QBLOCK + i]] * s);
    }
    /* RoPE bits copied, NaN payloads too (little-endian bf16) [S1] */
    const uint8_t *rope = page + dsv4_kv_rope_offset(row);
    for (int j = 0; j < DSV4_KV_ROPE_DIM; j++)
        out[DSV4_KV_NOPE_DIM + j] = (uint16_t)(rope[2 * j] | (uint16_t)(rope[2 * j + 1] << 8));
}

void dsv4_kv_decode_token_bf16(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind,
                               uint16_t *out)
{
    call_once(&lut_once, lut_init);
    decode_bf16(page, B, row, kind, out);
}

/* The bf16 rounding of the fp32 product, then back: vectorizable. */
DSV4_VECTOR_CLONES DSV4_NOINLINE static void decode_f32_lanes(const uint8_t *restrict vals, const uint8_t *restrict scales,
                                                             const float *restrict tab, float *restrict out)
{
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        const float s = scale_f32(scales[k]);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++)
            out[k * DSV4_KV_QBLOCK + i] =
                dsv4_bf16_to_f32_inline(dsv4_bf16_from_f32_inline(tab[vals[k * DSV4_KV_QBLOCK + i]] * s));
    }
}

void dsv4_kv_decode_token_bf16_f32(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind, float *out)
{
    call_once(&lut_once, lut_init);
    decode_f32_lanes(page + dsv4_kv_value_offset(row), page + dsv4_kv_scale_offset(B, row),
                     dec_lut[kind == DSV4_FP8_E4M3FNUZ], out);
    const uint8_t *rope = page + dsv4_kv_rope_offset(row); /* RoPE bits as they are [S1] */
    for (int j = 0; j < DSV4_KV_ROPE_DIM; j++)
        out[DSV4_KV_NOPE_DIM + j] = dsv4_bf16_to_f32_inline((uint16_t)(rope[2 * j] | (uint16_t)(rope[2 * j + 1] << 8)));
}

int dsv4_kv_slot(int64_t slot, const dsv4_kv_layout *L, int64_t *page, int64_t *row)
{
    if (slot < 0)
        return 0;
    if (L->block_size <= 0 || slot / L->block_size >= L->num_blocks)
        return -1;
    *page = slot / L->block_size; /* slot // B, slot % B [S1] */
    *row = slot % L->block_size;
    return 1;
}

static int check_layout(const dsv4_kv_layout *L, dsv4_kv_format f, dsv4_status *st)
{
    const int64_t tb = dsv4_kv_format_token_bytes(f);
    if (L->block_size <= 0 || L->num_blocks < 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size %" PRId64 " / num_blocks %" PRId64 " invalid",
                         L->block_size, L->num_blocks);
    if (L->page_stride != 0 && L->page_stride < L->block_size * tb)
        return dsv4_fail(st, DSV4_EINPUT, "page stride %" PRId64 " < B*%" PRId64 " = %" PRId64, L->page_stride,
                         tb, L->block_size * tb);
    return DSV4_OK;
}

/* 1 if no lane of the bf16 row has the Inf/NaN exponent, four lanes a
 * 64-bit word (vectorizes): each lane's exponent field e = h & 0x7F80 is
 * all ones iff e + 0x80 reaches bit 15, and no lane's sum carries into the
 * next lane (e + 0x80 <= 0x8000). */
DSV4_VECTOR_CLONES static int row_finite_bf16(const uint16_t *k)
{
    uint64_t bad = 0;
    for (int d = 0; d < DSV4_KV_HEAD_DIM; d += 4) {
        uint64_t w;
        memcpy(&w, k + d, sizeof w);
        bad |= (w & 0x7F807F807F807F80ull) + 0x0080008000800080ull;
    }
    return !(bad & 0x8000800080008000ull);
}

typedef struct insert_job {
    const uint16_t *k;
    const int64_t *slots64;
    const int32_t *slots32;
    uint8_t *k_cache;
    const dsv4_kv_layout *L;
    dsv4_kv_format f;
    const dsv4_kv_encode_opts *o;
    int64_t stride;
} insert_job;

/* The page and row of token t's slot: 0 for a skipped token (slots
 * validated before). */
static inline int insert_target(const insert_job *j, int64_t t, uint8_t **page, int64_t *row)
{
    int64_t s = j->slots64 ? j->slots64[t] : j->slots32[t], p;
    if (dsv4_kv_slot(s, j->L, &p, row) != 1)
        return 0; /* slot -1: padding token, skipped [S1, S15]; v41: any slot < 0 [S22] */
    *page = j->k_cache + p * j->stride;
    return 1;
}

/* The scale byte of a finite tile's amax bits, as encode_values forms it. */
static inline uint8_t tile_scale_byte(int32_t amax_bits, const dsv4_kv_encode_opts *o, int *clamped)
{
    const int b = scale_exponent(dsv4_f32_of_bits((uint32_t)amax_bits), o->fp8_max) + 127;
    *clamped = b < 0 || b > o->scale_max;
    /* clamp(e + 127, 0, 255) [S1]; 254 cap of the gfx950 compressor [S19]. */
    return (uint8_t)(b < 0 ? 0 : b > o->scale_max ? o->scale_max : b);
}

#if DSV4_HAVE_AVX2_PATHS
/* encode_values of a finite bf16 token in vectors (the insert validated
 * every lane finite, so the NaN rules of the lane codec never apply): the
 * tile amax as the integer max of the |x| bits, the scale byte by the
 * scalar rule above, q = x * 2^-e (the same single fp32 product), the clamp
 * to +-FP8MAX where the scale byte was clamped (else |q| <= FP8MAX already:
 * e4m3_codes_512), dsv4_e4m3_sat_lane on every lane (the same integer and
 * fp32 operations, no FMA), the pad byte, and the RoPE half copied (bf16 ->
 * fp32 -> bf16 of a finite value is the identity; x86 is little-endian).
 * A tile of fp32 subnormals and zeros only (amax < 2^-126) with 2^-e <=
 * 2^100 has every |q| < 2^-26, far under half the least e4m3 subnormal:
 * its codes are +-0, the sign of x (fnuz: 0), and skipping the product
 * skips the microcode assist a subnormal operand costs. */
#define KV_TINY_TILE(amax_bits, sb) ((amax_bits) < 0x00800000 && (sb) >= 27)
DSV4_AVX2 static void encode_token_avx2(uint8_t *page, int64_t B, int64_t row, const uint16_t *kt,
                                        const dsv4_kv_encode_opts *o)
{
    uint8_t *vals = page + dsv4_kv_value_offset(row);
    uint8_t sc[DSV4_KV_SCALE_BYTES] = {0}; /* sc[7]: the pad byte [S1] */
    const int fnuz = o->kind == DSV4_FP8_E4M3FNUZ;
    const __m256 mx = _mm256_set1_ps(o->fp8_max), neg_mx = _mm256_set1_ps(-o->fp8_max);
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        __m256 v[8];
        __m256i m = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            v[r] = dsv4_avx2_load_bf16(kt + k * DSV4_KV_QBLOCK + 8 * r);
            m = _mm256_max_epi32(m, dsv4_avx2_abs_bits(v[r]));
        }
        const int32_t amax_bits = dsv4_avx2_hmax_epi32(m);
        int clamped;
        sc[k] = tile_scale_byte(amax_bits, o, &clamped);
        const __m256 inv = _mm256_set1_ps(pow2_f32(127 - (int)sc[k]));
        const int tiny = KV_TINY_TILE(amax_bits, sc[k]);
        __m256i c[8];
        for (int r = 0; r < 8; r++) {
            if (tiny) {
                c[r] = fnuz ? _mm256_setzero_si256()
                            : _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v[r]), 24), _mm256_set1_epi32(0x80));
                continue;
            }
            __m256 q = _mm256_mul_ps(v[r], inv);
            if (clamped) {
                q = _mm256_blendv_ps(q, mx, _mm256_cmp_ps(q, mx, _CMP_GT_OQ));
                q = _mm256_blendv_ps(q, neg_mx, _mm256_cmp_ps(q, neg_mx, _CMP_LT_OQ));
            }
            c[r] = dsv4_avx2_e4m3_sat(q, fnuz);
        }
        _mm256_storeu_si256((__m256i *)(void *)(vals + k * DSV4_KV_QBLOCK), dsv4_avx2_pack_bytes(c[0], c[1], c[2], c[3]));
        _mm256_storeu_si256((__m256i *)(void *)(vals + k * DSV4_KV_QBLOCK + 32),
                            dsv4_avx2_pack_bytes(c[4], c[5], c[6], c[7]));
    }
    memcpy(page + dsv4_kv_scale_offset(B, row), sc, sizeof sc);
    memcpy(page + dsv4_kv_rope_offset(row), kt + DSV4_KV_NOPE_DIM, DSV4_KV_ROPE_DIM * sizeof *kt);
}

#define KV512 __attribute__((target("avx512f,avx2")))
#define KV512_INLINE static inline __attribute__((target("avx512f,avx2"), always_inline))

/* The e4m3 codes of 16 lanes q = x * 2^-e from |x| (bits ax) and x: the
 * fp32 product on |x| (the same |q|; its sign is x's, -0 on underflow
 * too), then dsv4_e4m3_sat_lane's operations on the finite |q| bits a:
 * the normal-range RNE (its rebias folded into the rounding constant,
 * exact for the lanes it selects: a >= 2^emin), below 2^emin the RNE
 * integer of the fp32 product |q| 2^(3 - emin) (the conversion, in the
 * rounding mode the portable sum with 2^23 uses), the saturation, the
 * sign (fnuz: none on a zero code).  No clamp to +-FP8MAX: the caller
 * has |q| <= FP8MAX (unclamped scale byte, so 2^-e exact and
 * |x| 2^-e <= amax 2^-e <= FP8MAX, which a monotone rounding keeps). */
KV512_INLINE __m512i e4m3_codes_512(__m512 ax, __m512 x, __m512 inv, int fnuz)
{
    const int32_t emin = fnuz ? -7 : -6, max_code = fnuz ? 0x7F : 0x7E;
    const __m512 aq = _mm512_mul_ps(ax, inv);
    const __m512i a = _mm512_castps_si512(aq);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF - ((127 + emin - 1) << 23))), odd), 20);
    const __mmask16 small = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32((127 + emin) << 23));
    const __m512 scaled = _mm512_mul_ps(aq, _mm512_set1_ps(fnuz ? 1024.0f : 512.0f));
    const __m512i code = _mm512_min_epi32(_mm512_mask_cvtps_epi32(nrm, small, scaled), _mm512_set1_epi32(max_code));
    const __m512i sign = _mm512_srli_epi32(_mm512_castps_si512(x), 24); /* bit 7: x's sign */
    if (fnuz) /* no negative zero */
        return _mm512_mask_ternarylogic_epi32(code, _mm512_test_epi32_mask(code, code), sign, _mm512_set1_epi32(0x80),
                                              0xF8); /* code | (sign & 0x80) */
    return _mm512_ternarylogic_epi32(code, sign, _mm512_set1_epi32(0x80), 0xF8);
}

/* dsv4_e4m3_sat_lane of 16 finite lanes (its NaN select dropped), for the
 * tiles whose scale byte was clamped (q may pass +-FP8MAX): the
 * normal-range rounding in integers, below 2^emin the fp32 product and
 * sum with 2^23 (two roundings, no FMA: the target has none), the
 * saturation, the sign (fnuz: none on a zero code). */
KV512_INLINE __m512i e4m3_sat_finite_512(__m512 q, int fnuz)
{
    const int32_t emin = fnuz ? -7 : -6, max_code = fnuz ? 0x7F : 0x7E;
    const __m512i b = _mm512_castps_si512(q), a = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_sub_epi32(
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF)), odd), 20),
        _mm512_set1_epi32((127 + emin - 1) << 3));
    const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(fnuz ? 1024.0f : 512.0f));
    const __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(scaled, _mm512_set1_ps(8388608.0f))),
                                         _mm512_set1_epi32(0x4B000000));
    const __mmask16 small = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32((127 + emin) << 23));
    const __m512i code = _mm512_min_epi32(_mm512_mask_mov_epi32(nrm, small, sub), _mm512_set1_epi32(max_code));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(b, 24), _mm512_set1_epi32(0x80));
    if (fnuz) /* no negative zero */
        return _mm512_mask_or_epi32(code, _mm512_test_epi32_mask(code, code), code, sign);
    return _mm512_or_si512(code, sign);
}

/* The seven tiles' |x| maxima as bits, tile k in lane k (lane 7: 0):
 * the bf16 pairs of each dword split into their high and low halves, the
 * maxima reduced across the tiles' vectors side by side. */
KV512_INLINE __m512i tile_amax_bits_512(const uint16_t *kt)
{
    __m512i m[8];
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        __m512i hi = _mm512_setzero_si512(), lo = _mm512_setzero_si512();
        for (int r = 0; r < 2; r++) {
            const __m512i w = _mm512_loadu_si512((const void *)(kt + k * DSV4_KV_QBLOCK + 32 * r));
            hi = _mm512_max_epi32(hi, _mm512_and_si512(w, _mm512_set1_epi32(0x7FFF0000)));
            lo = _mm512_max_epi32(lo, _mm512_and_si512(w, _mm512_set1_epi32(0x7FFF)));
        }
        m[k] = _mm512_max_epi32(_mm512_srli_epi32(hi, 16), lo);
    }
    m[7] = _mm512_setzero_si512();
    __m512i t[4], u[2];
    for (int i = 0; i < 4; i++) /* 128-bit chunks 0, 1: tile 2i; 2, 3: tile 2i + 1 */
        t[i] = _mm512_max_epi32(_mm512_shuffle_i32x4(m[2 * i], m[2 * i + 1], 0x44),
                                _mm512_shuffle_i32x4(m[2 * i], m[2 * i + 1], 0xEE));
    for (int i = 0; i < 2; i++) /* chunk c: tile 4i + c */
        u[i] = _mm512_max_epi32(_mm512_shuffle_i32x4(t[2 * i], t[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(t[2 * i], t[2 * i + 1], 0xDD));
    /* chunk c: lanes 0, 1 tile c, lanes 2, 3 tile 4 + c */
    __m512i v = _mm512_max_epi32(_mm512_unpacklo_epi64(u[0], u[1]), _mm512_unpackhi_epi64(u[0], u[1]));
    v = _mm512_max_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
    v = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), v);
    return _mm512_slli_epi32(v, 16); /* bf16 bits -> fp32 bits */
}

/* tile_scale_byte, pow2_f32(127 - b) and KV_TINY_TILE of the seven tiles
 * at once: scale_exponent's fast form (FP8MAX a positive normal fp32, as
 * the caller checked; a = max(amax, 1e-4) is normal for finite amax),
 * e = Ea - Em + (ma > mm), the clamp, 2^-e from the bits (2^-127 and
 * 2^-128 subnormal).  sc[0..7] gets the scale bytes and the pad byte,
 * inv[k] the multipliers; the masks say which tiles were clamped or are
 * tiny. */
KV512_INLINE void tile_scales_512(const uint16_t *kt, const dsv4_kv_encode_opts *o, uint8_t *sc, float *inv,
                                  __mmask16 *clamped, __mmask16 *tiny)
{
    const uint32_t mb = dsv4_bits_f32(o->fp8_max);
    const __m512i amax = tile_amax_bits_512(kt);
    const __m512i a = _mm512_max_epi32(amax, _mm512_set1_epi32((int32_t)dsv4_bits_f32(DSV4_KV_AMAX_FLOOR)));
    const __mmask16 up =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(a, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32((int32_t)(mb & 0x7FFFFFu)));
    const __m512i b0 = _mm512_add_epi32(_mm512_srli_epi32(a, 23), _mm512_set1_epi32(127 - (int32_t)(mb >> 23)));
    const __m512i b = _mm512_mask_add_epi32(b0, up, b0, _mm512_set1_epi32(1)); /* e + 127 */
    *clamped = _mm512_cmplt_epi32_mask(b, _mm512_setzero_si512()) | _mm512_cmpgt_epi32_mask(b, _mm512_set1_epi32(o->scale_max));
    const __m512i bc = _mm512_min_epi32(_mm512_max_epi32(b, _mm512_setzero_si512()), _mm512_set1_epi32(o->scale_max));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), bc), 23);
    const __m512i sub = _mm512_srlv_epi32(_mm512_set1_epi32(0x00400000), _mm512_sub_epi32(bc, _mm512_set1_epi32(254)));
    _mm512_storeu_ps(inv, _mm512_castsi512_ps(
                              _mm512_mask_mov_epi32(normal, _mm512_cmpgt_epi32_mask(bc, _mm512_set1_epi32(253)), sub)));
    *tiny = _mm512_cmplt_epi32_mask(amax, _mm512_set1_epi32(0x00800000)) &
            _mm512_cmpge_epi32_mask(bc, _mm512_set1_epi32(27));
    /* lane 7 is tile "7" of zeros: its byte replaced by the pad byte 0 [S1] */
    _mm_storel_epi64((__m128i *)(void *)sc, _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(0x7F, bc)));
}

/* encode_token_avx2 sixteen lanes at a time (AVX-512F), the seven scale
 * rules in one vector (vector_rule, a constant at each call: FP8MAX a
 * positive normal fp32) or one tile at a time by the scalar rule. */
KV512_INLINE void encode_tiles_512(uint8_t *page, int64_t B, int64_t row, const uint16_t *kt,
                                   const dsv4_kv_encode_opts *o, int vector_rule)
{
    uint8_t *vals = page + dsv4_kv_value_offset(row);
    uint8_t sc[DSV4_KV_SCALE_BYTES] = {0}; /* sc[7]: the pad byte [S1] */
    float inv[16];
    const int fnuz = o->kind == DSV4_FP8_E4M3FNUZ;
    __mmask16 clamped_tiles = 0, tiny_tiles = 0;
    if (vector_rule)
        tile_scales_512(kt, o, sc, inv, &clamped_tiles, &tiny_tiles);
    const __m512 mx = _mm512_set1_ps(o->fp8_max), neg_mx = _mm512_set1_ps(-o->fp8_max);
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        __m512 v[4], ax[4];
        __m512i m = _mm512_setzero_si512();
        for (int r = 0; r < 4; r++) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(kt + k * DSV4_KV_QBLOCK + 16 * r));
            v[r] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* bf16 -> fp32: exact */
            ax[r] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[r]), _mm512_set1_epi32(0x7FFFFFFF)));
            if (!vector_rule)
                m = _mm512_max_epi32(m, _mm512_castps_si512(ax[r]));
        }
        if (!vector_rule) {
            const int32_t amax_bits = _mm512_reduce_max_epi32(m);
            int clamped;
            sc[k] = tile_scale_byte(amax_bits, o, &clamped);
            inv[k] = pow2_f32(127 - (int)sc[k]);
            clamped_tiles |= (__mmask16)(clamped << k);
            tiny_tiles |= (__mmask16)(KV_TINY_TILE(amax_bits, sc[k]) << k);
        }
        const __m512 invk = _mm512_set1_ps(inv[k]);
        for (int r = 0; r < 4; r++) {
            __m512i c;
            if (tiny_tiles >> k & 1) {
                c = fnuz ? _mm512_setzero_si512()
                         : _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v[r]), 24), _mm512_set1_epi32(0x80));
            } else if (!(clamped_tiles >> k & 1)) {
                c = e4m3_codes_512(ax[r], v[r], invk, fnuz);
            } else {
                __m512 q = _mm512_mul_ps(v[r], invk);
                q = _mm512_mask_mov_ps(q, _mm512_cmp_ps_mask(q, mx, _CMP_GT_OQ), mx);
                q = _mm512_mask_mov_ps(q, _mm512_cmp_ps_mask(q, neg_mx, _CMP_LT_OQ), neg_mx);
                c = e4m3_sat_finite_512(q, fnuz);
            }
            _mm_storeu_si128((__m128i *)(void *)(vals + k * DSV4_KV_QBLOCK + 16 * r), _mm512_cvtepi32_epi8(c));
        }
    }
    memcpy(page + dsv4_kv_scale_offset(B, row), sc, sizeof sc);
    memcpy(page + dsv4_kv_rope_offset(row), kt + DSV4_KV_NOPE_DIM, DSV4_KV_ROPE_DIM * sizeof *kt);
}

KV512 static void encode_token_512(uint8_t *page, int64_t B, int64_t row, const uint16_t *kt,
                                   const dsv4_kv_encode_opts *o)
{
    const uint32_t mb = dsv4_bits_f32(o->fp8_max);
    if ((mb >> 23) != 0 && (mb >> 23) != 255 && !(mb >> 31))
        encode_tiles_512(page, B, row, kt, o, 1);
    else
        encode_tiles_512(page, B, row, kt, o, 0);
}

/* Defines name, insert_range for the fp8_ds_mla cache at one vector level
 * (attribute attr), each token through encode. */
#define KV_INSERT_RANGE(attr, name, encode)                                                            \
    attr static int name(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)               \
    {                                                                                                  \
        (void)worker, (void)st;                                                                        \
        const insert_job *j = ctx;                                                                     \
        uint8_t *page;                                                                                 \
        int64_t row;                                                                                   \
        for (int64_t t = t0; t < t1; t++)                                                              \
            if (insert_target(j, t, &page, &row))                                                      \
                encode(page, j->L->block_size, row, j->k + t * DSV4_KV_HEAD_DIM, j->o);                \
        return DSV4_OK;                                                                                \
    }

KV_INSERT_RANGE(DSV4_AVX2, insert_range_avx2, encode_token_avx2)
KV_INSERT_RANGE(KV512, insert_range_512, encode_token_512)

/* decode_bf16 sixteen lanes at a time (AVX-512F).  A code's value without
 * the table: its seven magnitude bits placed at fp32's exponent and
 * mantissa (c << 20) read as fp32 are 2^(e - 127) 1.mmm (a normal code) or
 * 0.mmm 2^-126 (a subnormal one), and the exact product with 2^(127 -
 * bias) (bias 7 for e4m3fn, 8 for fnuz) is the code's value in both cases;
 * the sign bit is bit 7 (fnuz's 0x80 is its NaN).  Then the same fp32
 * product with the scale and decode_bf16's RNE.  A NaN code (fn 0x7F /
 * 0xFF, fnuz 0x80) sends its 16 lanes to the table. */
KV512 static void decode_bf16_512(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind, uint16_t *out)
{
    const uint8_t *vals = page + dsv4_kv_value_offset(row);
    const uint8_t *scales = page + dsv4_kv_scale_offset(B, row);
    const int fnuz = kind == DSV4_FP8_E4M3FNUZ;
    const __m512 unbias = _mm512_set1_ps(fnuz ? 0x1p119f : 0x1p120f);
    const __m512i low7 = _mm512_set1_epi32(0x7F), b80 = _mm512_set1_epi32(0x80);
    for (int k = 0; k < DSV4_KV_NQBLOCKS; k++) {
        const float sk = scale_f32(scales[k]);
        const __m512 s = _mm512_set1_ps(sk);
        for (int i = 0; i < DSV4_KV_QBLOCK; i += 16) {
            const uint8_t *v = vals + k * DSV4_KV_QBLOCK + i;
            const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)v));
            const __mmask16 nan = fnuz ? _mm512_cmpeq_epi32_mask(c, b80)
                                       : _mm512_cmpeq_epi32_mask(_mm512_and_si512(c, low7), low7);
            if (nan) {
                const float *tab = dec_lut[fnuz];
                for (int l = 0; l < 16; l++)
                    out[k * DSV4_KV_QBLOCK + i + l] = dsv4_bf16_from_f32_inline(tab[v[l]] * sk);
                continue;
            }
            const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(c, low7), 20);
            const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, b80), 24);
            const __m512 x = _mm512_castsi512_ps(
                _mm512_or_si512(_mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(mag), unbias)), sign));
            const __m512i b = _mm512_castps_si512(_mm512_mul_ps(x, s));
            /* dsv4_bf16_from_f32_inline: NaN keeps its top bits, quieted; else RNE */
            const __m512i rne = dsv4_avx512_bf16_rne(b);
            const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)),
                                                             _mm512_set1_epi32(0x7F800000));
            const __m512i h = _mm512_mask_blend_epi32(
                is_nan, rne, _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
            _mm256_storeu_si256((__m256i *)(void *)(out + k * DSV4_KV_QBLOCK + i), _mm512_cvtepi32_epi16(h));
        }
    }
    /* RoPE bits copied, NaN payloads too (little-endian bf16, as x86) [S1] */
    memcpy(out + DSV4_KV_NOPE_DIM, page + dsv4_kv_rope_offset(row), DSV4_KV_ROPE_DIM * sizeof *out);
}
#endif

/* Tokens [t0, t1) into their slots (validated before). */
DSV4_VECTOR_CLONES static int insert_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const insert_job *j = ctx;
    uint8_t *page;
    int64_t row;
    for (int64_t t = t0; t < t1; t++) {
        if (!insert_target(j, t, &page, &row))
            continue;
        const uint16_t *kt = j->k + t * DSV4_KV_HEAD_DIM;
        if (j->f != DSV4_KV_FMT_DS_MLA) {
            dsv4_kv41_encode_token(page, j->L->block_size, row, kt, j->f);
            continue;
        }
        float x[DSV4_KV_HEAD_DIM];
        for (int d = 0; d < DSV4_KV_HEAD_DIM; d++) /* bf16 -> fp32 is a shift; finite (validated) */
            x[d] = dsv4_bf16_to_f32_inline(kt[d]);
        encode_values(page, j->L->block_size, row, x, j->o);
    }
    return DSV4_OK;
}

/* Tokens [t0, t1): every slot inside the cache (or skipped), every
 * written token finite. */
static int check_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const insert_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t s = j->slots64 ? j->slots64[t] : j->slots32[t], page, row;
        int r = dsv4_kv_slot(s, j->L, &page, &row);
        if (r < 0)
            return dsv4_fail(st, DSV4_EINPUT, "slot_mapping[%" PRId64 "] = %" PRId64
                             " is outside the cache (%" PRId64 " slots)", t, s, j->L->num_blocks * j->L->block_size);
        const uint16_t *kt = j->k + t * DSV4_KV_HEAD_DIM;
        if (r && !row_finite_bf16(kt))
            for (int d = 0; d < DSV4_KV_HEAD_DIM; d++)
                if ((kt[d] & 0x7F80u) == 0x7F80u) /* bf16 Inf/NaN exponent */
                    return dsv4_fail(st, DSV4_EINPUT, "k[%" PRId64 ", %d] is not finite", t, d);
    }
    return DSV4_OK;
}

/* 1 if no two tokens share a slot >= 0 (all slots validated in range). */
static int slots_distinct(const int64_t *slots64, const int32_t *slots32, int64_t T, int64_t nslots, int *rc,
                          dsv4_status *st)
{
    uint8_t *seen = calloc((size_t)(nslots + 7) / 8 + 1, 1);
    int ok = 1;
    *rc = DSV4_OK;
    if (!seen) {
        *rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return 0;
    }
    for (int64_t t = 0; t < T && ok; t++) {
        const int64_t s = slots64 ? slots64[t] : slots32[t];
        if (s < 0)
            continue;
        ok = !(seen[s / 8] >> (s % 8) & 1);
        seen[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    free(seen);
    return ok;
}

int dsv4_ref_quantize_and_insert_k_cache(const uint16_t *k, int64_t T, const int64_t *slots64,
                                         const int32_t *slots32, uint8_t *k_cache,
                                         const dsv4_kv_layout *L, const dsv4_kv_encode_opts *o,
                                         dsv4_status *st)
{
    return dsv4_ref_quantize_and_insert_k_cache_fmt(k, T, slots64, slots32, k_cache, L, DSV4_KV_FMT_DS_MLA, o,
                                                    st);
}

int dsv4_ref_quantize_and_insert_k_cache_fmt(const uint16_t *k, int64_t T, const int64_t *slots64,
                                             const int32_t *slots32, uint8_t *k_cache,
                                             const dsv4_kv_layout *L, dsv4_kv_format f,
                                             const dsv4_kv_encode_opts *o, dsv4_status *st)
{
    int rc = check_layout(L, f, st);
    if (rc)
        return rc;
    const int64_t stride = dsv4_kv_format_page_stride(L, f), nslots = L->num_blocks * L->block_size;
    insert_job j = {k, slots64, slots32, k_cache, L, f, o, stride};
    /* Validate everything first so that bad input never half-writes (in
     * parallel: the error is the first bad token's, as a serial loop's). */
    if ((rc = dsv4_parallel_for(T, 512, 0, check_range, &j, st)))
        return rc;
    dsv4_par_fn range = insert_range;
#if DSV4_HAVE_AVX2_PATHS
    /* The vector rows give the portable bytes (tests/test_simd.c). */
    const int level = f == DSV4_KV_FMT_DS_MLA ? dsv4_simd_level() : DSV4_SIMD_PORTABLE;
    range = level >= DSV4_SIMD_AVX512 ? insert_range_512 : level >= DSV4_SIMD_AVX2 ? insert_range_avx2 : insert_range;
#endif
    /* Tokens go to their own slots in parallel; a slot written twice keeps
     * the last token's bytes, so such a mapping runs in order. */
    const int grain = 64;
    if (dsv4_parallel_workers(T, grain) > 1 && !slots_distinct(slots64, slots32, T, nslots, &rc, st))
        return rc ? rc : range(&j, 0, T, 0, st);
    return dsv4_parallel_for(T, grain, 0, range, &j, st);
}

/* The physical page gathered row i of request r reads, via its block table. */
static int64_t gather_page(const dsv4_gather_args *a, int64_t r, int64_t pos)
{
    return a->block_table[r * a->maxb + pos / a->L.block_size];
}

int dsv4_gather_check(const dsv4_gather_args *a, dsv4_gather_invalid inv, dsv4_status *st)
{
    return dsv4_gather_check_fmt(a, inv, DSV4_KV_FMT_DS_MLA, st);
}

int dsv4_gather_check_fmt(const dsv4_gather_args *a, dsv4_gather_invalid inv, dsv4_kv_format f,
                          dsv4_status *st)
{
    int rc = check_layout(&a->L, f, st);
    if (rc)
        return rc;
    /* gather_dequant_v41 [S22]: Triton, unchecked block table, OCP only */
    if (f != DSV4_KV_FMT_DS_MLA && (inv != DSV4_GATHER_INVALID_ERROR || a->use_fnuz))
        return dsv4_fail(st, DSV4_EINPUT, "the V4.1 gather has no invalid-block mode and no FNUZ decode [S22]");
    if (a->offset < 0)
        return dsv4_fail(st, DSV4_EINPUT, "offset %" PRId64 " < 0", a->offset);
    for (int64_t r = 0; r < a->R; r++) {
        int64_t S = a->seq_lens[r], G = a->gather_lens ? a->gather_lens[r] : S;
        if (S < 0 || G < 0 || G > S)
            return dsv4_fail(st, DSV4_EINPUT,
                             "request %" PRId64 ": seq_lens %" PRId64 ", gather_lens %" PRId64
                             ": need 0 <= gather_lens <= seq_lens",
                             r, S, G);
        if (a->offset + G > a->Wout)
            return dsv4_fail(st, DSV4_EINPUT,
                             "request %" PRId64 ": offset %" PRId64 " + gather_lens %" PRId64
                             " exceeds out's %" PRId64 " rows",
                             r, a->offset, G, a->Wout);
        if (G > 0 && (S - 1) / a->L.block_size >= a->maxb)
            return dsv4_fail(st, DSV4_EINPUT,
                             "request %" PRId64 ": position %" PRId64 " needs block_table column %" PRId64
                             ", table has %" PRId64,
                             r, S - 1, (S - 1) / a->L.block_size, a->maxb);
        for (int64_t pos = S - G; inv == DSV4_GATHER_INVALID_ERROR && pos < S; pos++) {
            int64_t p = gather_page(a, r, pos);
            /* The Triton kernel reads any page id unchecked [S1]: outside
             * the cache it is undefined, so such input is bad here. */
            if (p < 0 || p >= a->L.num_blocks)
                return dsv4_fail(st, DSV4_EINPUT,
                                 "block_table[%" PRId64 ", %" PRId64 "] = %" PRId64
                                 " is outside the cache (%" PRId64 " pages) and position %" PRId64
                                 " reads it (the Triton gather does not check)",
                                 r, pos / a->L.block_size, p, a->L.num_blocks, pos);
        }
    }
    return DSV4_OK;
}

typedef struct gather_job {
    const dsv4_gather_args *a;
    dsv4_gather_invalid inv;
    dsv4_kv_format f;
    const int64_t *first;
    int use512; /* decode_bf16_512 (the same bytes: tests/test_simd.c) */
} gather_job;

/* Gathered rows [g0, g1) over all requests (row i of request r is
 * first[r] + i); every row is its own output row. */
DSV4_VECTOR_CLONES static int gather_range(void *ctx, int64_t g0, int64_t g1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const gather_job *j = ctx;
    const dsv4_gather_args *a = j->a;
    const int64_t B = a->L.block_size, stride = dsv4_kv_format_page_stride(&a->L, j->f);
    const dsv4_fp8_kind kind = a->use_fnuz ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
    int64_t r = 0;
    while (j->first[r + 1] <= g0)
        r++;
    for (int64_t g = g0; g < g1; g++) {
        while (j->first[r + 1] <= g)
            r++;
        const int64_t S = a->seq_lens[r], G = a->gather_lens ? a->gather_lens[r] : S, i = g - j->first[r];
        int64_t pos = S - G + i, page = gather_page(a, r, pos); /* start = S - G [S1, S22] */
        uint16_t *dst = a->out + (r * a->Wout + a->offset + i) * DSV4_KV_HEAD_DIM;
        if (page < 0 || page >= a->L.num_blocks) {
            if (j->inv == DSV4_GATHER_INVALID_ZERO) /* zeros [S8] */
                memset(dst, 0, DSV4_KV_HEAD_DIM * sizeof *dst);
            continue; /* SKIP: untouched [S7] */
        }
        if (j->f == DSV4_KV_FMT_DS_MLA && j->use512)
            decode_bf16_512(a->k_cache + page * stride, B, pos % B, kind, dst);
        else if (j->f == DSV4_KV_FMT_DS_MLA)
            decode_bf16(a->k_cache + page * stride, B, pos % B, kind, dst);
        else
            dsv4_kv41_decode_token_bf16(a->k_cache + page * stride, B, pos % B, j->f, dst);
    }
    return DSV4_OK;
}

int dsv4_ref_dequantize_and_gather_k_cache(const dsv4_gather_args *a, dsv4_gather_invalid inv,
                                           dsv4_status *st)
{
    return dsv4_ref_dequantize_and_gather_k_cache_fmt(a, inv, DSV4_KV_FMT_DS_MLA, st);
}

int dsv4_ref_dequantize_and_gather_k_cache_fmt(const dsv4_gather_args *a, dsv4_gather_invalid inv,
                                               dsv4_kv_format f, dsv4_status *st)
{
    int rc = dsv4_gather_check_fmt(a, inv, f, st);
    if (rc)
        return rc;
    int64_t *first = malloc((size_t)(a->R + 1) * sizeof *first); /* first gathered row of each request */
    if (!first)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    first[0] = 0;
    for (int64_t r = 0; r < a->R; r++)
        first[r + 1] = first[r] + (a->gather_lens ? a->gather_lens[r] : a->seq_lens[r]);
    call_once(&lut_once, lut_init);
    gather_job j = {a, inv, f, first, 0};
#if DSV4_HAVE_AVX2_PATHS
    j.use512 = dsv4_simd_level() >= DSV4_SIMD_AVX512;
#endif
    rc = dsv4_parallel_for(first[a->R], 256, 0, gather_range, &j, st);
    free(first);
    return rc;
}

/* ------------------------------------------------------------------ */
/* V4.1 formats (docs/semantics/kvcache.md A2.4 [S22])                 */

int64_t dsv4_kv_format_token_bytes(dsv4_kv_format f)
{
    return f == DSV4_KV_FMT_V41_FP8   ? DSV4_KV41_FP8_TOKEN_BYTES
           : f == DSV4_KV_FMT_V41_FP4 ? DSV4_KV41_FP4_TOKEN_BYTES
                                      : DSV4_KV_TOKEN_BYTES;
}

int64_t dsv4_kv_format_data_bytes(dsv4_kv_format f)
{
    return f == DSV4_KV_FMT_V41_FP8 ? 512 : f == DSV4_KV_FMT_V41_FP4 ? 256 : DSV4_KV_DATA_BYTES;
}

int64_t dsv4_kv_format_scale_bytes(dsv4_kv_format f)
{
    return f == DSV4_KV_FMT_V41_FP8 ? 16 : f == DSV4_KV_FMT_V41_FP4 ? 32 : DSV4_KV_SCALE_BYTES;
}

int dsv4_kv_format_tile(dsv4_kv_format f)
{
    return f == DSV4_KV_FMT_V41_FP8 ? DSV4_KV41_FP8_TILE : f == DSV4_KV_FMT_V41_FP4 ? DSV4_KV41_FP4_TILE
                                                                                    : DSV4_KV_QBLOCK;
}

int64_t dsv4_kv_format_page_stride(const dsv4_kv_layout *L, dsv4_kv_format f)
{
    return L->page_stride > 0 ? L->page_stride : L->block_size * dsv4_kv_format_token_bytes(f);
}

uint8_t dsv4_kv41_fp8_scale_byte(float amax)
{
    /* tl.maximum(amax * (1.0 / 448.0), 1e-4) in fp32 [S22] */
    float s = amax * (1.0f / 448.0f);
    s = s > 1e-4f ? s : 1e-4f;
    const uint32_t b = f32_bits(s);
    /* ceil(log2 s) from the bits: exponent - 127 + (mantissa != 0) [S22] */
    const int e = (int)((b >> 23) & 0xFFu) - 127 + ((b & 0x7FFFFFu) != 0);
    return (uint8_t)(e + 127);
}

uint8_t dsv4_kv41_fp4_scale_byte(float amax)
{
    /* tl.clamp(amax / 6.0, 0.001953125, 448.0).to(float8e4nv) [S22]; the
     * clamp makes the cast's saturation moot */
    float s = amax / 6.0f;
    s = s < 0.001953125f ? 0.001953125f : s > 448.0f ? 448.0f : s;
    return dsv4_fp8_from_f32(s, DSV4_FP8_E4M3FN, 1);
}

/* max |v[i]| of one V4.1 quant tile (a NaN element never wins the
 * comparison, so it does not become the amax). */
static float tile_amax(const float *v, int n)
{
    float amax = 0;
    for (int i = 0; i < n; i++)
        amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    return amax;
}

static void encode41_fp8(uint8_t *data, uint8_t *scales, const float *x)
{
    for (int t = 0; t < DSV4_KV_HEAD_DIM / DSV4_KV41_FP8_TILE; t++) {
        const float *v = x + t * DSV4_KV41_FP8_TILE;
        const uint8_t sb = dsv4_kv41_fp8_scale_byte(tile_amax(v, DSV4_KV41_FP8_TILE));
        scales[t] = sb;
        const float inv = (float)ldexp(1.0, 127 - (int)sb); /* ((127 - e) << 23) as fp32 [S22] */
        for (int i = 0; i < DSV4_KV41_FP8_TILE; i++) {
            float q = v[i] * inv; /* exact, or an fp32 underflow far below e4m3 min */
            q = q > 448.0f ? 448.0f : q < -448.0f ? -448.0f : q; /* tl.clamp(., -448, 448) [S22] */
            data[t * DSV4_KV41_FP8_TILE + i] = fp8_code(q, DSV4_FP8_E4M3FN); /* float8e4nv RNE */
        }
    }
}

static void encode41_fp4(uint8_t *data, uint8_t *scales, const float *x)
{
    uint8_t codes[DSV4_KV_HEAD_DIM];
    for (int t = 0; t < DSV4_KV_HEAD_DIM / DSV4_KV41_FP4_TILE; t++) {
        const float *v = x + t * DSV4_KV41_FP4_TILE;
        const uint8_t sb = dsv4_kv41_fp4_scale_byte(tile_amax(v, DSV4_KV41_FP4_TILE));
        scales[t] = sb;
        const float sf = dsv4_fp8_to_f32(sb, DSV4_FP8_E4M3FN); /* >= 2^-9, never 0 */
        for (int i = 0; i < DSV4_KV41_FP4_TILE; i++) /* tl.math.div_rn: IEEE RNE [S22] */
            codes[t * DSV4_KV41_FP4_TILE + i] = dsv4_e2m1_from_f32(v[i] / sf);
    }
    for (int j = 0; j < DSV4_KV_HEAD_DIM / 2; j++) /* even element in the low nibble [S22] */
        data[j] = dsv4_e2m1_pack(codes[2 * j], codes[2 * j + 1]);
}

void dsv4_kv41_encode_token(uint8_t *page, int64_t B, int64_t row, const uint16_t *k, dsv4_kv_format f)
{
    float x[DSV4_KV_HEAD_DIM];
    call_once(&lut_once, lut_init);
    for (int d = 0; d < DSV4_KV_HEAD_DIM; d++)
        x[d] = dsv4_bf16_to_f32(k[d]);
    const int64_t D = dsv4_kv_format_data_bytes(f), S = dsv4_kv_format_scale_bytes(f);
    uint8_t *data = page + row * D, *scales = page + B * D + row * S; /* [S22] page layout */
    if (f == DSV4_KV_FMT_V41_FP8)
        encode41_fp8(data, scales, x);
    else
        encode41_fp4(data, scales, x);
}

void dsv4_kv41_decode_token_bf16(const uint8_t *page, int64_t B, int64_t row, dsv4_kv_format f,
                                 uint16_t *out)
{
    const int64_t D = dsv4_kv_format_data_bytes(f), S = dsv4_kv_format_scale_bytes(f);
    const uint8_t *data = page + row * D, *scales = page + B * D + row * S;
    call_once(&lut_once, lut_init);
    for (int d = 0; d < DSV4_KV_HEAD_DIM; d++) {
        float v, s;
        if (f == DSV4_KV_FMT_V41_FP8) { /* fp8 * exp2(e8m0 - 127) in fp32 [S22] */
            v = dec_lut[0][data[d]];
            s = scale_f32(scales[d / DSV4_KV41_FP8_TILE]);
        } else { /* e2m1 (even dim = low nibble) * e4m3 scale in fp32 [S22] */
            const uint8_t byte = data[d / 2];
            v = dsv4_e2m1_to_f32((d & 1) ? dsv4_e2m1_hi(byte) : dsv4_e2m1_lo(byte));
            s = dec_lut[0][scales[d / DSV4_KV41_FP4_TILE]];
        }
        out[d] = dsv4_bf16_from_f32(v * s); /* row.to(tl.bfloat16): RNE [S22] */
    }
}
