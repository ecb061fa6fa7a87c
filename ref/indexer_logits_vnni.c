/* indexer_logits_vnni.c - the ideal indexer logits on AVX-512 VNNI integer
 * dots; see indexer_logits_vnni.h for why the bits are the scalar ideal's.
 * Semantics: docs/semantics/indexer.md Q6.2. */
#include "indexer_logits_vnni.h"

#include "simd.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = 16, BLOCKS = 4, DWORDS_PER_BLOCK = 8, CODE_DWORDS = 16 /* 64 code bytes a key */ };

#if DSV4_HAVE_AVX2_PATHS
#include <immintrin.h>

static int cpu_has_vnni;
static pthread_once_t vnni_once = PTHREAD_ONCE_INIT;

static void vnni_detect(void)
{
    __builtin_cpu_init();
    cpu_has_vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vnni");
}

int dsv4_idx_vnni_ready(void)
{
    pthread_once(&vnni_once, vnni_detect);
    return cpu_has_vnni && dsv4_simd_level() >= DSV4_SIMD_AVX512;
}
#else
int dsv4_idx_vnni_ready(void) { return 0; }
#endif

/* 2^(e - bias) for a scale byte, NaN for 0xFF (docs/semantics/indexer.md Q6.2
 * step 1): the factor of a block's integer sum. */
static double key_scale[256], q_scale[256];
static pthread_once_t scales_once = PTHREAD_ONCE_INIT;

static void scales_init(void)
{
    for (int e = 0; e < 255; e++) {
        key_scale[e] = ldexp(1.0, e - 127 - 2); /* the -2: both code sides are doubled */
        q_scale[e] = ldexp(1.0, e - 127);
    }
    key_scale[255] = q_scale[255] = NAN;
}

/* 2 * e2m1(code) as an integer: the -0 code (8) is 0. */
static const int8_t code_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

int dsv4_idx_vnni_keys_alloc(dsv4_idx_vnni_keys *k, int64_t max_keys)
{
    const int64_t groups = (max_keys + LANES - 1) / LANES;
    k->cap_groups = groups;
    k->codes = aligned_alloc(64, (size_t)groups * DSV4_IDX_VNNI_DWORDS * LANES * 4);
    k->scale = aligned_alloc(64, (size_t)groups * BLOCKS * LANES * sizeof(double));
    return k->codes && k->scale;
}

void dsv4_idx_vnni_keys_free(dsv4_idx_vnni_keys *k)
{
    free(k->codes);
    free(k->scale);
    memset(k, 0, sizeof *k);
}

int dsv4_idx_vnni_q_alloc(dsv4_idx_vnni_q *q, int64_t max_rows)
{
    q->cap_rows = max_rows;
    q->codes = malloc((size_t)max_rows * DSV4_IDX_VNNI_DWORDS * sizeof(int32_t));
    q->corr = malloc((size_t)max_rows * BLOCKS * sizeof(int32_t));
    q->scale = malloc((size_t)max_rows * BLOCKS * sizeof(double));
    return q->codes && q->corr && q->scale;
}

void dsv4_idx_vnni_q_free(dsv4_idx_vnni_q *q)
{
    free(q->codes);
    free(q->corr);
    free(q->scale);
    memset(q, 0, sizeof *q);
}

/* The q row-heads are few (H per row): plain C.  Expanded dword d = 2t + hi
 * holds the nibbles hi of code bytes 4t..4t+3 (the header's order). */
void dsv4_idx_vnni_pack_q(const uint8_t *v, const uint8_t *s, int64_t M, dsv4_idx_vnni_q *q)
{
    pthread_once(&scales_once, scales_init);
    for (int64_t rh = 0; rh < M; rh++) {
        const uint8_t *rv = v + rh * (DSV4_IDX_VNNI_DWORDS * 2);
        int32_t *codes = q->codes + rh * DSV4_IDX_VNNI_DWORDS;
        for (int b = 0; b < BLOCKS; b++) {
            int32_t sum = 0;
            for (int d = DWORDS_PER_BLOCK * b; d < DWORDS_PER_BLOCK * (b + 1); d++) {
                const int t = d / 2, shift = (d & 1) * 4;
                uint32_t word = 0;
                for (int i = 0; i < 4; i++) {
                    const int8_t c = code_x2[(rv[4 * t + i] >> shift) & 15];
                    sum += c;
                    word |= (uint32_t)(uint8_t)c << (8 * i);
                }
                memcpy(&codes[d], &word, sizeof word);
            }
            q->corr[rh * BLOCKS + b] = 12 * sum;
            q->scale[rh * BLOCKS + b] = q_scale[s[rh * BLOCKS + b]];
        }
    }
}

#if DSV4_HAVE_AVX2_PATHS
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2")))

/* 2k + 12 for each nibble, in every 128-bit lane (vpshufb looks up per lane). */
VNNI static __m512i offset_table(void)
{
    return _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

VNNI void dsv4_idx_vnni_pack_group(const uint8_t *v, const uint8_t *s, int n, dsv4_idx_vnni_keys *k, int64_t g)
{
    pthread_once(&scales_once, scales_init);
    const __m512i table = offset_table(), nibble = _mm512_set1_epi32(0x0F0F0F0F);
    /* lanes past n read the last key again: they are never stored */
    const __m512i key = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(n - 1));
    const __m512i first = _mm512_slli_epi32(key, 4); /* a key's first code dword */
    uint8_t *out = k->codes + g * DSV4_IDX_VNNI_DWORDS * LANES * 4;
    for (int t = 0; t < CODE_DWORDS; t++) {
        const __m512i w = _mm512_i32gather_epi32(_mm512_add_epi32(first, _mm512_set1_epi32(t)), v, 4);
        const __m512i lo = _mm512_and_si512(w, nibble), hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), nibble);
        _mm512_store_si512(out + (2 * t) * 64, _mm512_shuffle_epi8(table, lo));
        _mm512_store_si512(out + (2 * t + 1) * 64, _mm512_shuffle_epi8(table, hi));
    }
    const __m512i bytes = _mm512_i32gather_epi32(key, s, 4); /* the key's four scale bytes */
    double *scale = k->scale + g * BLOCKS * LANES;
    for (int b = 0; b < BLOCKS; b++) {
        const __m512i e = _mm512_and_si512(_mm512_srli_epi32(bytes, 8 * b), _mm512_set1_epi32(0xFF));
        _mm512_store_pd(scale + b * LANES, _mm512_i32gather_pd(_mm512_castsi512_si256(e), key_scale, 8));
        _mm512_store_pd(scale + b * LANES + 8, _mm512_i32gather_pd(_mm512_extracti64x4_epi64(e, 1), key_scale, 8));
    }
}

/* The four blocks' double values of one half (8 lanes) of a head's sums,
 * added as the scalar ideal adds them: (b0 + b1) + (b2 + b3). */
VNNI static inline __attribute__((always_inline)) __m512d head_score(const int32_t *isum, const double *ksc, const double *qsc, int half)
{
    __m512d blk[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        const __m512d x = _mm512_cvtepi32_pd(_mm256_load_si256((const __m256i *)(isum + b * LANES + half * 8)));
        blk[b] = _mm512_mul_pd(_mm512_mul_pd(x, _mm512_load_pd(ksc + b * LANES + half * 8)), _mm512_set1_pd(qsc[b]));
    }
    return _mm512_add_pd(_mm512_add_pd(blk[0], blk[1]), _mm512_add_pd(blk[2], blk[3]));
}

enum { MAX_HEADS = 128, HEADS_AT_ONCE = 4 };

/* Block b's integer sums of nh (<= HEADS_AT_ONCE) heads from row-head rh
 * into isum [nh][4][16]: nh independent vpdpbusd chains interleaved, their
 * latency hidden by one another. */
VNNI static inline __attribute__((always_inline)) void block_sums(const dsv4_idx_vnni_q *q, int64_t rh, int b,
                                                                 const __m512i kd[DWORDS_PER_BLOCK], int nh,
                                                                 int32_t *isum)
{
    __m512i acc[HEADS_AT_ONCE];
    /* unrolled, so that the accumulators and kd live in registers */
#pragma GCC unroll 4
    for (int i = 0; i < nh; i++)
        acc[i] = _mm512_set1_epi32(-q->corr[(rh + i) * BLOCKS + b]); /* removes the +12 of the key bytes */
#pragma GCC unroll 8
    for (int t = 0; t < DWORDS_PER_BLOCK; t++)
#pragma GCC unroll 4
        for (int i = 0; i < nh; i++)
            acc[i] = _mm512_dpbusd_epi32(
                acc[i], kd[t], _mm512_set1_epi32(q->codes[(rh + i) * DSV4_IDX_VNNI_DWORDS + DWORDS_PER_BLOCK * b + t]));
#pragma GCC unroll 4
    for (int i = 0; i < nh; i++)
        _mm512_store_si512(isum + (i * BLOCKS + b) * LANES, acc[i]);
}

VNNI void dsv4_idx_vnni_row(const dsv4_idx_vnni_q *q, int64_t rh0, int H, const float *w, const dsv4_idx_vnni_keys *k,
                            int64_t n, double *out)
{
    /* the integer sums of every head and block of one group, [H][4][16] */
    _Alignas(64) int32_t isum[MAX_HEADS * BLOCKS * LANES];
    const int64_t groups = (n + LANES - 1) / LANES;
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *kc = k->codes + g * DSV4_IDX_VNNI_DWORDS * LANES * 4;
        /* one block's 8 key dwords stay in registers across the heads */
        for (int b = 0; b < BLOCKS; b++) {
            __m512i kd[DWORDS_PER_BLOCK];
#pragma GCC unroll 8
            for (int t = 0; t < DWORDS_PER_BLOCK; t++)
                kd[t] = _mm512_load_si512(kc + (DWORDS_PER_BLOCK * b + t) * 64);
            int h = 0;
            for (; h + HEADS_AT_ONCE <= H; h += HEADS_AT_ONCE)
                block_sums(q, rh0 + h, b, kd, HEADS_AT_ONCE, isum + h * BLOCKS * LANES);
            for (; h < H; h++)
                block_sums(q, rh0 + h, b, kd, 1, isum + h * BLOCKS * LANES);
        }
        const double *ksc = k->scale + g * BLOCKS * LANES;
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        for (int h = 0; h < H; h++) {
            const __m512d wh = _mm512_set1_pd((double)w[h]);
            const double *qsc = q->scale + (rh0 + h) * BLOCKS;
            /* relu with NaN kept: max returns its second operand when one is NaN */
            const __m512d r_lo = _mm512_max_pd(_mm512_setzero_pd(), head_score(isum + h * BLOCKS * LANES, ksc, qsc, 0));
            const __m512d r_hi = _mm512_max_pd(_mm512_setzero_pd(), head_score(isum + h * BLOCKS * LANES, ksc, qsc, 1));
            lo = _mm512_add_pd(lo, _mm512_mul_pd(r_lo, wh));
            hi = _mm512_add_pd(hi, _mm512_mul_pd(r_hi, wh));
        }
        const int64_t left = n - g * LANES;
        const __mmask16 valid = left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        _mm512_mask_storeu_pd(out + g * LANES, (__mmask8)(valid & 0xFF), lo);
        _mm512_mask_storeu_pd(out + g * LANES + 8, (__mmask8)(valid >> 8), hi);
    }
}
#endif
