/* fp8quant.c - FP8 1x128 group quant and the RMSNorm of
 * fused_qk_rmsnorm_group_quant; see fp8quant.h.  Semantics:
 * docs/semantics/quant.md Q3 (tags below are its sections). */
#include "fp8quant.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "codec_avx2.h"
#include "codec_inline.h"
#include "parallel.h"

float dsv4_fp8q_default_max(dsv4_fp8q_impl impl, dsv4_fp8_kind kind)
{
    if (kind == DSV4_FP8_E4M3FN)
        return 448.0f; /* opus finfo / get_fp8_min_max on OCP fp8 (docs/semantics/quant.md Q3.1, Q3.2) */
    /* fnuz: aiter clamps at 240 (gfx942 finfo, docs/semantics/quant.md Q3.1 step 2); vLLM's
     * get_fp8_min_max gives 224 on fnuz platforms (docs/semantics/quant.md Q3.2 step 2). */
    return impl == DSV4_FP8Q_AITER_HIP ? 240.0f : 224.0f;
}

/* One lane of the group quant: clamp(q, -mx, mx) (NaN passes: the compares
 * are false) then the saturating RNE cvt, branch-free. */
DSV4_HOT_INLINE uint8_t clamp_cvt_lane(float q, float mx, int fnuz)
{
    const int32_t lo = -(int32_t)(q < -mx), hi = -(int32_t)(q > mx);
    int32_t b = dsv4_sel_i32(lo, (int32_t)dsv4_bits_f32(-mx), (int32_t)dsv4_bits_f32(q));
    b = dsv4_sel_i32(hi, (int32_t)dsv4_bits_f32(mx), b);
    return dsv4_e4m3_sat_lane(dsv4_f32_of_bits((uint32_t)b), fnuz);
}

/* max(1e-10, max |x_i|) over the non-NaN x_i (|x| as bits orders like the
 * values; NaN bits lie above Inf's): the same value as the compare loop. */
DSV4_HOT_INLINE float group_amax(const float *x, int n)
{
    int32_t m = 0;
    int i = 0;
    for (; i + DSV4_CODEC_BLOCK <= n; i += DSV4_CODEC_BLOCK) /* fixed-length blocks vectorize */
        for (int k = 0; k < DSV4_CODEC_BLOCK; k++) {
            const int32_t a = (int32_t)(dsv4_bits_f32(x[i + k]) & 0x7FFFFFFFu);
            const int32_t v = a & -(a <= 0x7F800000);
            m = v > m ? v : m;
        }
    for (; i < n; i++) {
        const int32_t a = (int32_t)(dsv4_bits_f32(x[i]) & 0x7FFFFFFFu);
        const int32_t v = a & -(a <= 0x7F800000);
        m = v > m ? v : m;
    }
    const float amax = dsv4_f32_of_bits((uint32_t)m);
    return amax > 1e-10f ? amax : 1e-10f; /* both floor amax at 1e-10 (docs/semantics/quant.md Q3.1 step 1, Q3.2 step 1) */
}

/* The codes of one group: clamp(x * inv) (mul) or clamp(x / scale) (div). */
DSV4_HOT_INLINE void group_codes(const float *x, int n, float f, int divide, float mx, int fnuz, uint8_t *codes)
{
    int i = 0;
    for (; i + DSV4_CODEC_BLOCK <= n; i += DSV4_CODEC_BLOCK) {
        uint8_t c[DSV4_CODEC_BLOCK];
        if (divide)
            for (int k = 0; k < DSV4_CODEC_BLOCK; k++)
                c[k] = clamp_cvt_lane(x[i + k] / f, mx, fnuz);
        else
            for (int k = 0; k < DSV4_CODEC_BLOCK; k++)
                c[k] = clamp_cvt_lane(x[i + k] * f, mx, fnuz);
        memcpy(codes + i, c, sizeof c);
    }
    for (; i < n; i++)
        codes[i] = clamp_cvt_lane(divide ? x[i] / f : x[i] * f, mx, fnuz);
}

/* The group's scale from its floored amax, and in *f what the codes use:
 * aiter's HIP form fl(amax * fl(1/MAX)) (a multiply, not a divide: 3.1 step
 * 2) with the IEEE fp32 1/scale to multiply by (3.1 step 3); the Triton form
 * amax / MAX (3.2 step 2), divided by (3.2 step 4). */
DSV4_HOT_INLINE float group_scale(float amax, float mx, int divide, float *f)
{
    const float scale = divide ? amax / mx : amax * (1.0f / mx);
    *f = divide ? scale : 1.0f / scale;
    return scale;
}

DSV4_HOT_INLINE float quant_group(const float *x, int n, const dsv4_fp8q_cfg *cfg, uint8_t *codes)
{
    const float mx = cfg->fp8_max, amax = group_amax(x, n);
    const int fnuz = cfg->kind == DSV4_FP8_E4M3FNUZ, divide = cfg->impl != DSV4_FP8Q_AITER_HIP;
    float f;
    const float scale = group_scale(amax, mx, divide, &f);
    group_codes(x, n, f, divide, mx, fnuz, codes); /* med3 clamp, RNE cvt (3.1 step 4, 3.2 step 4) */
    return scale;
}

float dsv4_fp8q_group(const float *x, int n, const dsv4_fp8q_cfg *cfg, uint8_t *codes)
{
    return quant_group(x, n, cfg, codes);
}

typedef struct rows_job {
    const float *x;
    const uint16_t *xh; /* bf16 input instead of x, or NULL */
    int64_t M, K;
    const dsv4_fp8q_cfg *cfg;
    uint8_t *y;
    float *scale;
} rows_job;

DSV4_VECTOR_CLONES static int rows_range(void *ctx, int64_t m0, int64_t m1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const rows_job *j = ctx;
    const int g = j->cfg->group;
    const int64_t K = j->K, M = j->M, G = K / g;
    float f[1024];
    for (int64_t m = m0; m < m1; m++)
        for (int64_t k = 0; k < G; k++) {
            const float *x = j->x + m * K + k * g;
            if (j->xh) { /* bf16 -> fp32 is a shift; groups over 1024 take the fp32 path */
                const uint16_t *h = j->xh + m * K + k * g;
                for (int i = 0; i < g; i++)
                    f[i] = dsv4_bf16_to_f32_inline(h[i]);
                x = f;
            }
            const float s = quant_group(x, g, j->cfg, j->y + m * K + k * g);
            /* transpose_scale: (m, g) at g*M + m (docs/semantics/quant.md Q3.1 "Out"). */
            j->scale[j->cfg->transpose_scale ? k * M + m : m * G + k] = s;
        }
    return DSV4_OK;
}

#if DSV4_HAVE_AVX2_PATHS
/* The AVX2 rows (groups a multiple of 32): quant_group's steps eight lanes
 * at a time (codec_avx2.h), the group's scale in scalar as there. */
DSV4_AVX2_INLINE __m256 load8(const rows_job *j, int64_t i)
{
    return j->xh ? dsv4_avx2_load_bf16(j->xh + i) : _mm256_loadu_ps(j->x + i);
}

/* clamp_cvt_lane on 8 lanes (NaN passes both compares). */
DSV4_AVX2_INLINE __m256i clamp_cvt_avx2(__m256 q, float mx, int fnuz)
{
    __m256 c = _mm256_blendv_ps(q, _mm256_set1_ps(-mx), _mm256_cmp_ps(q, _mm256_set1_ps(-mx), _CMP_LT_OQ));
    c = _mm256_blendv_ps(c, _mm256_set1_ps(mx), _mm256_cmp_ps(q, _mm256_set1_ps(mx), _CMP_GT_OQ));
    return dsv4_avx2_e4m3_sat(c, fnuz);
}

DSV4_AVX2_INLINE __m256 scaled_avx2(__m256 x, __m256 f, int divide)
{
    return divide ? _mm256_div_ps(x, f) : _mm256_mul_ps(x, f);
}

DSV4_AVX2_INLINE void rows_avx2(const rows_job *j, int divide, int fnuz, int64_t m0, int64_t m1)
{
    const int g = j->cfg->group;
    const int64_t K = j->K, M = j->M, G = K / g;
    const float mx = j->cfg->fp8_max;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t k = 0; k < G; k++) {
            const int64_t base = m * K + k * g;
            __m256i am = _mm256_setzero_si256();
            for (int i = 0; i < g; i += 8) { /* group_amax: the non-NaN |x| bits' max */
                const __m256i a = dsv4_avx2_abs_bits(load8(j, base + i));
                am = _mm256_max_epi32(am, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000)), a));
            }
            float amax = dsv4_f32_of_bits((uint32_t)dsv4_avx2_hmax_epi32(am));
            amax = amax > 1e-10f ? amax : 1e-10f;
            float fs;
            const float scale = group_scale(amax, mx, divide, &fs);
            const __m256 f = _mm256_set1_ps(fs);
            uint8_t *y = j->y + base;
            for (int i = 0; i < g; i += 32) {
                __m256i c[4];
                for (int r = 0; r < 4; r++)
                    c[r] = clamp_cvt_avx2(scaled_avx2(load8(j, base + i + 8 * r), f, divide), mx, fnuz);
                _mm256_storeu_si256((__m256i *)(void *)(y + i), dsv4_avx2_pack_bytes(c[0], c[1], c[2], c[3]));
            }
            j->scale[j->cfg->transpose_scale ? k * M + m : m * G + k] = scale;
        }
}

/* Defines name, a dsv4_par_fn (with attribute attr) that runs rows(j,
 * divide, fnuz, m0, m1) with divide and fnuz as constants, so each of the
 * four calls inlines its own specialization. */
#define FP8Q_ROWS_RANGE(attr, name, rows)                                                              \
    attr static int name(void *ctx, int64_t m0, int64_t m1, int worker, dsv4_status *st)               \
    {                                                                                                  \
        (void)worker, (void)st;                                                                        \
        const rows_job *j = ctx;                                                                       \
        const int divide = j->cfg->impl != DSV4_FP8Q_AITER_HIP, fnuz = j->cfg->kind == DSV4_FP8_E4M3FNUZ; \
        if (divide)                                                                                    \
            fnuz ? rows(j, 1, 1, m0, m1) : rows(j, 1, 0, m0, m1);                                      \
        else                                                                                           \
            fnuz ? rows(j, 0, 1, m0, m1) : rows(j, 0, 0, m0, m1);                                      \
        return DSV4_OK;                                                                                \
    }

FP8Q_ROWS_RANGE(DSV4_AVX2, rows_range_avx2, rows_avx2)
#endif

#if DSV4_HAVE_AVX2_PATHS
/* The same rows sixteen lanes at a time (AVX-512F): each lane the integer
 * and fp32 operations of dsv4_avx2_e4m3_sat and clamp_cvt_avx2 (no FMA),
 * the selects by mask registers, the group's scale in scalar as there. */
#define FQ512 __attribute__((target("avx512f,avx2,fma")))
#define FQ512_INLINE static inline __attribute__((target("avx512f,avx2,fma"), always_inline))

FQ512_INLINE __m512 load16(const rows_job *j, int64_t i)
{
    if (!j->xh)
        return _mm512_loadu_ps(j->x + i);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(j->xh + i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* dsv4_avx2_e4m3_sat after clamp_cvt_avx2's clamp, on 16 lanes. */
FQ512_INLINE __m512i clamp_cvt_512(__m512 q, float mx, int fnuz)
{
    __m512 c = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(q, _mm512_set1_ps(-mx), _CMP_LT_OQ), q, _mm512_set1_ps(-mx));
    c = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(q, _mm512_set1_ps(mx), _CMP_GT_OQ), c, _mm512_set1_ps(mx));
    const int32_t emin = fnuz ? -7 : -6, max_code = fnuz ? 0x7F : 0x7E;
    const __m512i b = _mm512_castps_si512(c), a = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF)), odd);
    const __m512i nrm = _mm512_sub_epi32(_mm512_srli_epi32(rounded, 20), _mm512_set1_epi32((127 + emin - 1) << 3));
    const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(fnuz ? 1024.0f : 512.0f));
    const __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(scaled, _mm512_set1_ps(8388608.0f))),
                                         _mm512_set1_epi32(0x4B000000));
    const __mmask16 small = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32((127 + emin) << 23), a);
    __m512i code = _mm512_min_epi32(_mm512_mask_blend_epi32(small, nrm, sub), _mm512_set1_epi32(max_code));
    const __m512i sign = _mm512_and_si512(_mm512_srai_epi32(b, 24), _mm512_set1_epi32(0x80));
    if (fnuz) /* no negative zero */
        code = _mm512_mask_or_epi32(code, _mm512_test_epi32_mask(code, code), code, sign);
    else
        code = _mm512_or_si512(code, sign);
    const __m512i nan_code = fnuz ? _mm512_set1_epi32(0x80) : _mm512_or_si512(sign, _mm512_set1_epi32(0x7F));
    return _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7F800000)), code, nan_code);
}

FQ512_INLINE void rows_512(const rows_job *j, int divide, int fnuz, int64_t m0, int64_t m1)
{
    const int g = j->cfg->group;
    const int64_t K = j->K, M = j->M, G = K / g;
    const float mx = j->cfg->fp8_max;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t k = 0; k < G; k++) {
            const int64_t base = m * K + k * g;
            __m512i am = _mm512_setzero_si512();
            for (int i = 0; i < g; i += 16) { /* group_amax: the non-NaN |x| bits' max */
                const __m512i a = _mm512_and_si512(_mm512_castps_si512(load16(j, base + i)), _mm512_set1_epi32(0x7FFFFFFF));
                am = _mm512_mask_max_epi32(am, _mm512_cmple_epi32_mask(a, _mm512_set1_epi32(0x7F800000)), am, a);
            }
            float amax = dsv4_f32_of_bits((uint32_t)_mm512_reduce_max_epi32(am));
            amax = amax > 1e-10f ? amax : 1e-10f;
            float fs;
            const float scale = group_scale(amax, mx, divide, &fs);
            const __m512 f = _mm512_set1_ps(fs);
            uint8_t *y = j->y + base;
            for (int i = 0; i < g; i += 16) {
                const __m512 x = load16(j, base + i);
                const __m512i c = clamp_cvt_512(divide ? _mm512_div_ps(x, f) : _mm512_mul_ps(x, f), mx, fnuz);
                _mm_storeu_si128((__m128i *)(void *)(y + i), _mm512_cvtepi32_epi8(c));
            }
            j->scale[j->cfg->transpose_scale ? k * M + m : m * G + k] = scale;
        }
}

FP8Q_ROWS_RANGE(FQ512, rows_range_512, rows_512)
#endif

/* The rows' function: the AVX-512 or AVX2 one where it runs (simd.h),
 * else the portable one. */
static dsv4_par_fn rows_fn(const dsv4_fp8q_cfg *cfg)
{
#if DSV4_HAVE_AVX2_PATHS
    if (cfg->group % 32 == 0 && dsv4_simd_level() >= DSV4_SIMD_AVX512)
        return rows_range_512;
    if (cfg->group % 32 == 0 && dsv4_simd_avx2())
        return rows_range_avx2;
#else
    (void)cfg;
#endif
    return rows_range;
}

static int rows_run(const float *x, const uint16_t *xh, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                    float *scale, dsv4_status *st)
{
    if (cfg->group <= 0 || M < 0 || K < 0 || K % cfg->group != 0 || (xh && cfg->group > 1024))
        return dsv4_fail(st, DSV4_EINPUT, "fp8 group quant: K = %" PRId64 " is not a multiple of group %d%s",
                         K, cfg->group, xh && cfg->group > 1024 ? " (bf16 rows: groups up to 1024)" : "");
    rows_job j = {x, xh, M, K, cfg, y, scale};
    return dsv4_parallel_for(M, K > 0 && K < 65536 ? 65536 / K : 1, 0, rows_fn(cfg), &j, st);
}

int dsv4_fp8q_rows(const float *x, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                   float *scale, dsv4_status *st)
{
    return rows_run(x, NULL, M, K, cfg, y, scale, st);
}

int dsv4_fp8q_rows_bf16(const uint16_t *x, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                        float *scale, dsv4_status *st)
{
    return rows_run(NULL, x, M, K, cfg, y, scale, st);
}

void dsv4_rmsnorm_row_ideal(const float *x, const float *w, int64_t n, double eps, double *y)
{
    dsv4_rmsnorm_rows_ideal(x, w, 1, n, eps, y);
}

#if DSV4_HAVE_AVX2_PATHS
/* scale_row and scale_row_f32 four and eight lanes at a time: the same
 * double products in the same order (no FMA), the fp32 rounding by the
 * RNE conversion that C's (float) is. */
DSV4_AVX2_INLINE __m256d scaled4_avx2(const float *x, const float *w, __m256d r)
{
    return _mm256_mul_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), r), _mm256_cvtps_pd(_mm_loadu_ps(w)));
}

DSV4_AVX2 static int64_t scale_row_avx2(const float *x, const float *w, double r, int64_t n, double *y)
{
    const __m256d rv = _mm256_set1_pd(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, scaled4_avx2(x + i, w + i, rv));
    return i;
}

DSV4_AVX2 static int64_t scale_row_f32_avx2(const float *x, const float *w, double r, int64_t n, float *y)
{
    const __m256d rv = _mm256_set1_pd(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128 lo = _mm256_cvtpd_ps(scaled4_avx2(x + i, w + i, rv));
        const __m128 hi = _mm256_cvtpd_ps(scaled4_avx2(x + i + 4, w + i + 4, rv));
        _mm256_storeu_ps(y + i, _mm256_set_m128(hi, lo));
    }
    return i;
}

/* The same eight doubles a vector (AVX-512F): the same double products,
 * in the same order, no FMA. */
FQ512_INLINE __m512d scaled8_512(const float *x, const float *w, __m512d r)
{
    return _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x)), r), _mm512_cvtps_pd(_mm256_loadu_ps(w)));
}

FQ512 static int64_t scale_row_512(const float *x, const float *w, double r, int64_t n, double *y)
{
    const __m512d rv = _mm512_set1_pd(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(y + i, scaled8_512(x + i, w + i, rv));
    return i;
}

FQ512 static int64_t scale_row_f32_512(const float *x, const float *w, double r, int64_t n, float *y)
{
    const __m512d rv = _mm512_set1_pd(r);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(scaled8_512(x + i, w + i, rv)));
        _mm256_storeu_ps(y + i + 8, _mm512_cvtpd_ps(scaled8_512(x + i + 8, w + i + 8, rv)));
    }
    return i;
}
#endif

/* y = x * r * w for one row. */
static void scale_row(const float *restrict x, const float *restrict w, double r, int64_t n, double *restrict y)
{
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_level() >= DSV4_SIMD_AVX512)
        i = scale_row_512(x, w, r, n, y);
    else if (dsv4_simd_avx2())
        i = scale_row_avx2(x, w, r, n, y);
#endif
    for (; i < n; i++)
        y[i] = (double)x[i] * r * (double)w[i];
}

/* The same rounded to fp32 in the one pass: (float) of the same double. */
static void scale_row_f32(const float *restrict x, const float *restrict w, double r, int64_t n, float *restrict y)
{
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_level() >= DSV4_SIMD_AVX512)
        i = scale_row_f32_512(x, w, r, n, y);
    else if (dsv4_simd_avx2())
        i = scale_row_f32_avx2(x, w, r, n, y);
#endif
    for (; i < n; i++)
        y[i] = (float)((double)x[i] * r * (double)w[i]);
}

#if DSV4_HAVE_AVX2_PATHS
/* sumsq_rows of 4 G rows: G vectors of four rows' sums, each lane one
 * row's chain in the serial order (element i's square is added before
 * i + 1's), the rows' elements transposed four at a time into the lanes.
 * No FMA: each step is the double product then the double add, as the
 * scalar "ss += (double)x * x".  Each row's chain is serial, so more rows
 * side by side keep more adds in flight: G = 4 (16 rows) is what the fused
 * q/kv norm uses; G = 8 measured slower a row (16 ymm registers are too few
 * for eight sums and the transposes). */
DSV4_AVX2_INLINE void sumsq_groups_avx2(const float *x, int64_t n, double *ss, const int G)
{
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int h = 0; h < G; h++) {
            const float *xh = x + 4 * h * n + i;
            __m128 c0 = _mm_loadu_ps(xh), c1 = _mm_loadu_ps(xh + n), c2 = _mm_loadu_ps(xh + 2 * n);
            __m128 c3 = _mm_loadu_ps(xh + 3 * n);
            _MM_TRANSPOSE4_PS(c0, c1, c2, c3); /* c_e: element i + e of the four rows */
            const __m256d d0 = _mm256_cvtps_pd(c0), d1 = _mm256_cvtps_pd(c1), d2 = _mm256_cvtps_pd(c2),
                          d3 = _mm256_cvtps_pd(c3); /* named: an array of them is kept in memory by gcc -O2 */
            s[h] = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(_mm256_add_pd(s[h], _mm256_mul_pd(d0, d0)),
                                                             _mm256_mul_pd(d1, d1)),
                                               _mm256_mul_pd(d2, d2)),
                                 _mm256_mul_pd(d3, d3));
        }
    for (int h = 0; h < G; h++)
        _mm256_storeu_pd(ss + 4 * h, s[h]);
    for (int k = 0; k < 4 * G; k++)
        for (int64_t e = i; e < n; e++)
            ss[k] += (double)x[k * n + e] * x[k * n + e];
}

DSV4_AVX2 static void sumsq8_avx2(const float *x, int64_t n, double *ss) { sumsq_groups_avx2(x, n, ss, 2); }
DSV4_AVX2 static void sumsq16_avx2(const float *x, int64_t n, double *ss) { sumsq_groups_avx2(x, n, ss, 4); }
#endif

/* ss[k] = the sum of x_k[i]^2 in double over i in order, for rows k <
 * rows of n: sixteen or eight rows side by side in vectors (AVX2), else four scalar
 * chains at a time; the same values, more adds in flight than one chain. */
static void sumsq_rows(const float *x, int64_t rows, int64_t n, double *ss)
{
    int64_t r = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2()) {
        for (; r + 16 <= rows; r += 16)
            sumsq16_avx2(x + r * n, n, ss + r);
        for (; r + 8 <= rows; r += 8)
            sumsq8_avx2(x + r * n, n, ss + r);
    }
#endif
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = x + r * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t i = 0; i < n; i++) {
            s0 += (double)x0[i] * x0[i];
            s1 += (double)x1[i] * x1[i];
            s2 += (double)x2[i] * x2[i];
            s3 += (double)x3[i] * x3[i];
        }
        ss[r] = s0, ss[r + 1] = s1, ss[r + 2] = s2, ss[r + 3] = s3;
    }
    for (; r < rows; r++) {
        const float *xr = x + r * n;
        double s0 = 0;
        for (int64_t i = 0; i < n; i++)
            s0 += (double)xr[i] * xr[i];
        ss[r] = s0;
    }
}

/* The rows in batches of RMS_BATCH (the sums' scratch on the stack). */
#define RMS_BATCH 32

void dsv4_rmsnorm_rows_ideal(const float *x, const float *w, int64_t rows, int64_t n, double eps, double *y)
{
    double ss[RMS_BATCH];
    for (int64_t r0 = 0; r0 < rows; r0 += RMS_BATCH) {
        const int64_t nr = rows - r0 < RMS_BATCH ? rows - r0 : RMS_BATCH;
        sumsq_rows(x + r0 * n, nr, n, ss);
        for (int64_t k = 0; k < nr; k++)
            scale_row(x + (r0 + k) * n, w, 1.0 / sqrt(ss[k] / (double)n + eps), n, y + (r0 + k) * n);
    }
}

void dsv4_rmsnorm_rows_ideal_f32(const float *x, const float *w, int64_t rows, int64_t n, double eps, float *y)
{
    double ss[RMS_BATCH];
    for (int64_t r0 = 0; r0 < rows; r0 += RMS_BATCH) {
        const int64_t nr = rows - r0 < RMS_BATCH ? rows - r0 : RMS_BATCH;
        sumsq_rows(x + r0 * n, nr, n, ss);
        for (int64_t k = 0; k < nr; k++)
            scale_row_f32(x + (r0 + k) * n, w, 1.0 / sqrt(ss[k] / (double)n + eps), n, y + (r0 + k) * n);
    }
}

/* The ideal RMSNorm of bf16 rows (fused_qk_rmsnorm_group_quant's inputs).
 *
 * Its sum of squares is the serial double sum of sumsq_rows, reached by a
 * shortcut where it is provably the same value (docs/semantics/quant.md
 * Q3.3 "How the reference evaluates the ideal"): a bf16 x is M 2^(e-7)
 * with an integer M < 2^8, so x^2 is an exact double and a multiple of
 * 2^L, L = 2 (e_min - 7), e_min the exponent of the row's smallest nonzero
 * |x|.  While every partial sum stays below 2^(L+53) it is a representable
 * multiple of 2^L, so every add is exact and any order gives the serial
 * sum's bits.  The shortcut sums in any order (sixteen partial sums in
 * vectors) and keeps the result when that total is below 2^(L+52): the
 * margin covers the shortcut's own roundings when the condition fails (n
 * terms lose less than n 2^-53 of the true sum).
 * Other rows (a tiny element beside large ones, Inf, NaN) take sumsq_rows. */

#if DSV4_HAVE_AVX2_PATHS
/* |x| bits minus 1 of sixteen bf16 (unsigned: a zero wraps to 0xFFFF and
 * never wins the minimum). */
DSV4_AVX2_INLINE __m256i abs_m1_bf16x16(__m256i h)
{
    return _mm256_sub_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(1));
}

/* Eight bf16 as fp32 (the bits shifted up: exact). */
DSV4_AVX2_INLINE __m256 bf16x8_f32(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The least of sixteen unsigned 16-bit lanes. */
DSV4_AVX2_INLINE uint16_t hmin_u16x16(__m256i v)
{
    uint16_t m[16], least = 0xFFFF;
    _mm256_storeu_si256((__m256i *)(void *)m, v);
    for (int k = 0; k < 16; k++)
        least = m[k] < least ? m[k] : least;
    return least;
}

/* The row's sum of squares in any order (*min_m1: the smallest |x| bits
 * minus 1, as abs_m1_bf16x16); the vector part only, *done elements. */
DSV4_AVX2 static double sumsq_any_avx2(const uint16_t *x, int64_t n, uint16_t *min_m1, int64_t *done)
{
    /* four named sums (an array of them is kept in memory by gcc -O2) */
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256i mn = _mm256_set1_epi16(-1);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        mn = _mm256_min_epu16(mn, abs_m1_bf16x16(h));
        const __m256 lo = bf16x8_f32(_mm256_castsi256_si128(h)), hi = bf16x8_f32(_mm256_extracti128_si256(h, 1));
        const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(lo));
        const __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1));
        const __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(hi));
        const __m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1));
        s0 = _mm256_add_pd(s0, _mm256_mul_pd(d0, d0));
        s1 = _mm256_add_pd(s1, _mm256_mul_pd(d1, d1));
        s2 = _mm256_add_pd(s2, _mm256_mul_pd(d2, d2));
        s3 = _mm256_add_pd(s3, _mm256_mul_pd(d3, d3));
    }
    *min_m1 = hmin_u16x16(mn);
    double v[4];
    _mm256_storeu_pd(v, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    *done = i;
    return (v[0] + v[1]) + (v[2] + v[3]);
}

/* The same sixteen partial sums, eight lanes a vector (AVX-512F), by FMA:
 * d * d is exact, so fma(d, d, s) rounds the same sum as s + d * d. */
FQ512 static double sumsq_any_512(const uint16_t *x, int64_t n, uint16_t *min_m1, int64_t *done)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    __m256i mn = _mm256_set1_epi16(-1);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        mn = _mm256_min_epu16(mn, abs_m1_bf16x16(h));
        const __m512i f = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
        const __m512d d0 = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(f)));
        const __m512d d1 = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(f, 1)));
        s0 = _mm512_fmadd_pd(d0, d0, s0);
        s1 = _mm512_fmadd_pd(d1, d1, s1);
    }
    *min_m1 = hmin_u16x16(mn);
    *done = i;
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* y = x * r * w of a bf16 row, four lanes a step: scale_row's double
 * products in its order (no FMA); *_f32 rounds each to fp32 by RNE. */
DSV4_AVX2_INLINE __m256d scaled_bf16x4_avx2(const uint16_t *x, const double *w, __m256d r)
{
    const __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(const void *)x));
    const __m256d d = _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(h, 16)));
    return _mm256_mul_pd(_mm256_mul_pd(d, r), _mm256_loadu_pd(w));
}

DSV4_AVX2 static int64_t scale_bf16_avx2(const uint16_t *x, const double *w, double r, int64_t n, double *y)
{
    const __m256d rv = _mm256_set1_pd(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, scaled_bf16x4_avx2(x + i, w + i, rv));
    return i;
}

DSV4_AVX2 static int64_t scale_bf16_f32_avx2(const uint16_t *x, const double *w, double r, int64_t n, float *y)
{
    const __m256d rv = _mm256_set1_pd(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(y + i, _mm256_cvtpd_ps(scaled_bf16x4_avx2(x + i, w + i, rv)));
    return i;
}

/* The same eight lanes a step (AVX-512F). */
FQ512_INLINE __m512d scaled_bf16x8_512(const uint16_t *x, const double *w, __m512d r)
{
    const __m512d d = _mm512_cvtps_pd(bf16x8_f32(_mm_loadu_si128((const __m128i *)(const void *)x)));
    return _mm512_mul_pd(_mm512_mul_pd(d, r), _mm512_loadu_pd(w));
}

FQ512 static int64_t scale_bf16_512(const uint16_t *x, const double *w, double r, int64_t n, double *y)
{
    const __m512d rv = _mm512_set1_pd(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(y + i, scaled_bf16x8_512(x + i, w + i, rv));
    return i;
}

FQ512 static int64_t scale_bf16_f32_512(const uint16_t *x, const double *w, double r, int64_t n, float *y)
{
    const __m512d rv = _mm512_set1_pd(r);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(scaled_bf16x8_512(x + i, w + i, rv)));
    return i;
}
#endif

/* The row's sum of squares by the shortcut, or -1 where it is not proven
 * to be the serial sum (or no vector path runs). */
static double sumsq_bf16_exact(const uint16_t *x, int64_t n)
{
#if DSV4_HAVE_AVX2_PATHS
    if (!dsv4_simd_avx2())
        return -1;
    uint16_t min_m1;
    int64_t i;
    double t = dsv4_simd_level() >= DSV4_SIMD_AVX512 ? sumsq_any_512(x, n, &min_m1, &i)
                                                     : sumsq_any_avx2(x, n, &min_m1, &i);
    for (; i < n; i++) {
        const double d = dsv4_bf16_to_f32_inline(x[i]);
        t += d * d;
        const uint16_t a = (uint16_t)((x[i] & 0x7FFF) - 1);
        min_m1 = a < min_m1 ? a : min_m1;
    }
    if (t == 0)
        return 0; /* every element a zero */
    if (!(t < INFINITY))
        return -1; /* Inf or NaN in the row */
    const int e_field = ((uint16_t)(min_m1 + 1)) >> 7, e_min = (e_field ? e_field : 1) - 127;
    return t < ldexp(1.0, 2 * (e_min - 7) + 52) ? t : -1;
#else
    (void)x, (void)n;
    return -1;
#endif
}

void dsv4_rmsnorm_bf16_rcp(const uint16_t *x, int64_t rows, int64_t n, double eps, double *rcp, float *scratch)
{
    int64_t serial[16]; /* rows for sumsq_rows, sixteen side by side where they come */
    int ns = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double t = sumsq_bf16_exact(x + r * n, n);
        if (t >= 0) {
            rcp[r] = 1.0 / sqrt(t / (double)n + eps);
        } else {
            dsv4_bf16_row_to_f32(x + r * n, n, scratch + ns * n);
            serial[ns++] = r;
        }
        if (ns == 16 || (r == rows - 1 && ns > 0)) {
            double ss[16];
            sumsq_rows(scratch, ns, n, ss);
            for (int k = 0; k < ns; k++)
                rcp[serial[k]] = 1.0 / sqrt(ss[k] / (double)n + eps);
            ns = 0;
        }
    }
}

void dsv4_rmsnorm_bf16_row(const uint16_t *x, const double *w, double rcp, int64_t n, double *y)
{
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_level() >= DSV4_SIMD_AVX512)
        i = scale_bf16_512(x, w, rcp, n, y);
    else if (dsv4_simd_avx2())
        i = scale_bf16_avx2(x, w, rcp, n, y);
#endif
    for (; i < n; i++)
        y[i] = (double)dsv4_bf16_to_f32_inline(x[i]) * rcp * w[i];
}

void dsv4_rmsnorm_bf16_row_f32(const uint16_t *x, const double *w, double rcp, int64_t n, float *y)
{
    int64_t i = 0;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_level() >= DSV4_SIMD_AVX512)
        i = scale_bf16_f32_512(x, w, rcp, n, y);
    else if (dsv4_simd_avx2())
        i = scale_bf16_f32_avx2(x, w, rcp, n, y);
#endif
    for (; i < n; i++)
        y[i] = (float)((double)dsv4_bf16_to_f32_inline(x[i]) * rcp * w[i]);
}

void dsv4_rmsnorm_row_f32(const float *x, const float *w, int64_t n, float eps, float *y)
{
    float ss = 0; /* each thread sums sequentially, clang contracts to FMA (docs/semantics/quant.md Q3.3 step 2) */
    for (int64_t i = 0; i < n; i++)
        ss = fmaf(x[i], x[i], ss);
    float rcp = 1.0f / sqrtf(ss / (float)n + eps); /* rsqrtf (Q3.3 step 3) */
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * rcp) * w[i]; /* fl(fl(x * rcp) * w) (Q3.3 step 4) */
}
