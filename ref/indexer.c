/* indexer.c - the paged MXFP4 indexer reference (see indexer.h): the page
 * layout, K store, Q quant, top-k and candidates (the logits are in
 * indexer_logits.c).  Semantics: docs/semantics/indexer.md Q4-Q6 (cited per
 * rule). */
#define _POSIX_C_SOURCE 200809L
#include "indexer.h"

#include "codec_inline.h"
#include "mx_avx2.h"
#include "parallel.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics.h"
#include "rope.h"

/* ---- page layout ---------------------------------------------------------- */

int dsv4_idx_layout_make(int num_heads, int head_dim, int64_t page_entries, int shuffled,
                         dsv4_idx_layout *L, dsv4_status *st)
{
    memset(L, 0, sizeof *L);
    if (head_dim <= 0 || head_dim % DSV4_MX_BLOCK != 0 || num_heads <= 0 || page_entries <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "layout: head_dim %d (a multiple of 32), num_heads %d and "
                         "page_entries %" PRId64 " must be positive", head_dim, num_heads, page_entries);
    L->page_entries = page_entries;
    L->head_dim = head_dim;
    L->shuffled = shuffled;
    /* aiter cache_format via rocm_paged_mxfp4_cache_layout (docs/semantics/indexer.md Q5.1). */
    L->n_per_tile = (head_dim <= 64 || num_heads >= 32) ? 32 : 16;
    L->d_per_tile = 16;
    L->scale_lanes = 64 / L->n_per_tile;
    const int nb = head_dim / DSV4_MX_BLOCK;
    if (!shuffled)
        return DSV4_OK;
    if (page_entries % L->n_per_tile || (head_dim / 2) % L->d_per_tile || nb % L->scale_lanes)
        return dsv4_fail(st, DSV4_EINPUT, "layout: page_entries %" PRId64 " %% n_per_tile %d, (head_dim/2) %% %d "
                         "and (head_dim/32) %% scale_lanes %d must be 0 (docs/semantics/indexer.md Q5.1)",
                         page_entries, L->n_per_tile, L->d_per_tile, L->scale_lanes);
    L->s_hi = nb / L->scale_lanes;
    return DSV4_OK;
}

int64_t dsv4_idx_entry_bytes(const dsv4_idx_layout *L) { return L->head_dim / 2 + L->head_dim / 32; }

int64_t dsv4_idx_page_bytes(const dsv4_idx_layout *L) { return L->page_entries * dsv4_idx_entry_bytes(L); }

/* docs/semantics/indexer.md Q4.1 step 5: natural p*D/2 + b; preshuffled
 * grp*N*(D/2) + (b/Dt)*N*Dt + lane*Dt + b%Dt. */
int64_t dsv4_idx_value_offset(const dsv4_idx_layout *L, int64_t p, int b)
{
    const int64_t tb = L->head_dim / 2;
    if (!L->shuffled)
        return p * tb + b;
    const int64_t N = L->n_per_tile, Dt = L->d_per_tile, grp = p / N, lane = p % N;
    return grp * N * tb + (b / Dt) * N * Dt + lane * Dt + b % Dt;
}

/* docs/semantics/indexer.md Q4.1 step 5: natural P*D/2 + p*NB + s; preshuffled
 * P*D/2 + grp*N*NB + (s%L)*N*S_HI + lane*S_HI + s/L. */
int64_t dsv4_idx_scale_offset(const dsv4_idx_layout *L, int64_t p, int s)
{
    const int64_t base = L->page_entries * (L->head_dim / 2), nb = L->head_dim / 32;
    if (!L->shuffled)
        return base + p * nb + s;
    const int64_t N = L->n_per_tile, grp = p / N, lane = p % N;
    return base + grp * N * nb + (s % L->scale_lanes) * N * L->s_hi + lane * L->s_hi + s / L->scale_lanes;
}

void dsv4_idx_read_entry(const dsv4_idx_layout *L, const uint8_t *page, int64_t p, uint8_t *values,
                         uint8_t *scales)
{
    const int64_t tb = L->head_dim / 2, nb = L->head_dim / 32, base = L->page_entries * tb;
    if (!L->shuffled) {
        memcpy(values, page + p * tb, (size_t)tb);
        memcpy(scales, page + base + p * nb, (size_t)nb);
        return;
    }
    /* dsv4_idx_value_offset / dsv4_idx_scale_offset with the entry's terms
     * taken out: value runs of Dt bytes N*Dt apart, scale s at
     * (s % L) N S_HI + s / L (the hot path of the logits' key decode) */
    const int64_t N = L->n_per_tile, Dt = L->d_per_tile, grp = p / N, lane = p % N;
    const uint8_t *src = page + grp * N * tb + lane * Dt;
    if (Dt == 16) /* a fixed-size copy: no library call */
        for (int64_t b = 0; b < tb; b += 16, src += N * 16)
            memcpy(values + b, src, 16);
    else
        for (int64_t b = 0; b < tb; b += Dt, src += N * Dt)
            memcpy(values + b, src, (size_t)Dt);
    const uint8_t *sc = page + base + grp * N * nb + lane * L->s_hi;
    for (int hi = 0; hi < L->s_hi; hi++) /* s = hi * scale_lanes + lo, without a division */
        for (int lo = 0; lo < L->scale_lanes; lo++)
            scales[hi * L->scale_lanes + lo] = sc[(int64_t)lo * N * L->s_hi + hi];
}

void dsv4_idx_write_entry(const dsv4_idx_layout *L, uint8_t *page, int64_t p, const uint8_t *values,
                          const uint8_t *scales)
{
    for (int b = 0; b < L->head_dim / 2; b++)
        page[dsv4_idx_value_offset(L, p, b)] = values[b];
    for (int s = 0; s < L->head_dim / 32; s++)
        page[dsv4_idx_scale_offset(L, p, s)] = scales[s];
}

void dsv4_idx_unshuffle_page(const dsv4_idx_layout *L, const uint8_t *page, uint8_t *values,
                             uint8_t *scales)
{
    const int tb = L->head_dim / 2, nb = L->head_dim / 32;
    for (int64_t p = 0; p < L->page_entries; p++)
        dsv4_idx_read_entry(L, page, p, values + p * tb, scales + p * nb);
}

/* Inverts the offsets: the value region tiles are N entries x Dt bytes, the
 * scale region tiles N entries x NB bytes (docs/semantics/indexer.md Q4.1 step 5). */
void dsv4_idx_locate_byte(const dsv4_idx_layout *L, int64_t off, int64_t *entry, int *is_scale,
                          int *index)
{
    const int64_t tb = L->head_dim / 2, nb = L->head_dim / 32, base = L->page_entries * tb;
    if (off < base) {
        *is_scale = 0;
        if (!L->shuffled) {
            *entry = off / tb;
            *index = (int)(off % tb);
            return;
        }
        const int64_t N = L->n_per_tile, Dt = L->d_per_tile, grp = off / (N * tb), r = off % (N * tb);
        const int64_t chunk = r / (N * Dt), r2 = r % (N * Dt);
        *entry = grp * N + r2 / Dt;
        *index = (int)(chunk * Dt + r2 % Dt);
        return;
    }
    off -= base;
    *is_scale = 1;
    if (!L->shuffled) {
        *entry = off / nb;
        *index = (int)(off % nb);
        return;
    }
    const int64_t N = L->n_per_tile, grp = off / (N * nb), r = off % (N * nb);
    const int64_t sl = r / (N * L->s_hi), r2 = r % (N * L->s_hi);
    *entry = grp * N + r2 / L->s_hi;
    *index = (int)((r2 % L->s_hi) * L->scale_lanes + sl);
}

/* ---- K store and Q quant --------------------------------------------------- */

static void quant_rule(dsv4_idx_quant q, dsv4_mx_rule *rule, dsv4_mx_elem *elem)
{
    /* docs/semantics/indexer.md Q4.1 step 4: A = ceil(log2_f32) + threshold; B = mode-1 bit rule + v_cvt RNE. */
    *rule = q == DSV4_IDX_QUANT_A ? DSV4_MX_FP4_CEIL_F32LOG2 : DSV4_MX_FP4_CEIL;
    *elem = q == DSV4_IDX_QUANT_A ? DSV4_MX_ELEM_THRESHOLD : DSV4_MX_ELEM_RNE;
}

/* RoPE of the last rope_dim lanes of x in fp32, each lane rounded to bf16
 * (docs/semantics/indexer.md Q4.1 step 3: e' = bf16(e*c - o*s), o' = bf16(o*c + e*s)). */
DSV4_HOT_INLINE void rope_bf16(float *x, int D, const float *row, int rope_dim)
{
    /* dsv4_rope_gptj_f32 forward (products rounded, then the sums), inline */
    float *restrict p = x + D - rope_dim;
    const int half = rope_dim / 2;
    for (int k = 0; k < half; k++) {
        const float c = row[k], s = row[half + k], e = p[2 * k], o = p[2 * k + 1];
        const float ec = e * c, os = o * s, es = e * s, oc = o * c;
        p[2 * k] = dsv4_bf16_to_f32_inline(dsv4_bf16_from_f32_inline(ec - os));
        p[2 * k + 1] = dsv4_bf16_to_f32_inline(dsv4_bf16_from_f32_inline(es + oc));
    }
}

typedef struct kstore_job {
    const dsv4_idx_kstore_args *a;
    dsv4_mx_rule rule;
    dsv4_mx_elem elem;
    uint8_t *cache;
} kstore_job;

DSV4_VECTOR_CLONES static int kstore_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const kstore_job *j = ctx;
    const dsv4_idx_kstore_args *a = j->a;
    const dsv4_idx_layout *L = a->L;
    const int D = L->head_dim;
    const int64_t pb = dsv4_idx_page_bytes(L), nslots = a->num_pages * L->page_entries;
    float x[1024];
    uint8_t vals[512], sc[32];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t slot = a->slots[t], pos = a->positions[t];
        /* docs/semantics/indexer.md Q4.1 step 1: slot < 0 skips; only (pos+1) % c == 0 writes. */
        if (slot < 0 || (pos + 1) % a->compress_ratio != 0)
            continue;
        if (slot >= nslots)
            return dsv4_fail(st, DSV4_EINPUT, "slot_mapping[%" PRId64 "] = %" PRId64 " >= num_pages*page_entries = %"
                             PRId64, t, slot, nslots);
        const int64_t g = (pos / a->compress_ratio) * a->compress_ratio; /* group's first position (step 3) */
        char what[48];
        snprintf(what, sizeof what, "positions[%" PRId64 "] (group start)", t);
        const float *row;
        int rc = dsv4_rope_row(a->cos_sin_cache, a->num_pos, a->rope_dim, g, what, &row, st);
        if (rc)
            return rc;
        /* docs/semantics/indexer.md Q4.1 step 2: var = sum k^2 / D (exact sum, rounded once: the
         * kernel's tl.sum order is not specified); rrms = rsqrt(var + eps);
         * kn = bf16(fl(fl(k * rrms) * w)). */
        double ss = 0;
        for (int d = 0; d < D; d++) {
            double v = dsv4_bf16_to_f32_inline(a->k[t * D + d]);
            ss += v * v;
        }
        float var = (float)(ss / D);
        float rrms = (float)(1.0 / sqrt((double)(var + a->eps)));
        for (int d = 0; d < D; d++) {
            float v = dsv4_bf16_to_f32_inline(a->k[t * D + d]) * rrms;
            x[d] = dsv4_bf16_to_f32_inline(dsv4_bf16_from_f32_inline(v * dsv4_bf16_to_f32_inline(a->norm_weight[d])));
        }
        rope_bf16(x, D, row, a->rope_dim);
        if ((rc = dsv4_mx_quant_rows_fp4(x, 1, D, j->rule, j->elem, vals, sc, st)))
            return rc;
        dsv4_idx_write_entry(L, j->cache + (slot / L->page_entries) * pb, slot % L->page_entries, vals, sc);
    }
    return DSV4_OK;
}

/* 1 if the writing tokens' slots (slot >= 0, (pos + 1) % c == 0, below
 * nslots) are distinct: then their order does not matter. */
static int kstore_slots_distinct(const dsv4_idx_kstore_args *a, int64_t nslots, int *oom)
{
    uint8_t *seen = calloc((size_t)(nslots + 7) / 8 + 1, 1);
    int ok = seen != NULL;
    *oom = !seen;
    for (int64_t t = 0; ok && t < a->T; t++) {
        const int64_t s = a->slots[t];
        if (s < 0 || s >= nslots || (a->positions[t] + 1) % a->compress_ratio != 0)
            continue;
        ok = !(seen[s / 8] >> (s % 8) & 1);
        seen[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    free(seen);
    return ok;
}

int dsv4_ref_indexer_k_store(const dsv4_idx_kstore_args *a, uint8_t *cache, dsv4_status *st)
{
    const dsv4_idx_layout *L = a->L;
    const int D = L->head_dim;
    if (D > 1024 || a->rope_dim <= 0 || a->rope_dim % DSV4_MX_BLOCK || a->rope_dim > D || a->compress_ratio < 1)
        return dsv4_fail(st, DSV4_EINPUT, "k_store: head_dim %d, rope_dim %d (a multiple of 32 <= head_dim), "
                         "compress_ratio %" PRId64 " >= 1", D, a->rope_dim, a->compress_ratio);
    kstore_job j = {a, 0, 0, cache};
    quant_rule(a->quant, &j.rule, &j.elem);
    const int grain = 64;
    int oom = 0;
    /* Tokens to distinct slots in parallel; a slot written twice keeps the
     * last token's entry, so such a mapping runs in order. */
    if (dsv4_parallel_workers(a->T, grain) > 1 && !kstore_slots_distinct(a, a->num_pages * L->page_entries, &oom))
        return oom ? dsv4_fail(st, DSV4_ERUNTIME, "out of memory") : kstore_range(&j, 0, a->T, 0, st);
    return dsv4_parallel_for(a->T, grain, 0, kstore_range, &j, st);
}

typedef struct qquant_job {
    const dsv4_idx_qquant_args *a;
    dsv4_mx_rule rule;
    dsv4_mx_elem elem;
    uint8_t *q_packed, *q_scale;
    float *weights_out;
} qquant_job;

/* Tokens [t0, t1): each token's H head rows roped (its own position), then
 * MXFP4 of the [H, D] rows at once, then the weights. */
DSV4_VECTOR_CLONES static int qquant_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const qquant_job *j = ctx;
    const dsv4_idx_qquant_args *a = j->a;
    const int D = a->D, H = a->H;
    /* docs/semantics/indexer.md Q4.2: the Python floats reach the kernel as fp32 arguments. */
    const float ws_b = (float)(a->softmax_scale * a->head_scale); /* the seeds: one product [SEED1] */
    const float ss_a = (float)a->softmax_scale, hs_a = (float)a->head_scale;
    float *x = malloc((size_t)H * (size_t)D * sizeof *x);
    if (!x)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    for (int64_t t = t0; t < t1 && !rc; t++) {
        const float *row;
        if ((rc = dsv4_rope_row_of_token(a->cos_sin_cache, a->num_pos, a->rope_dim, a->positions, t, &row, st)))
            break;
        dsv4_bf16_row_to_f32(a->q + t * H * D, (int64_t)H * D, x); /* NoPE lanes raw, no rounding (docs/semantics/indexer.md Q4.2) */
        for (int h = 0; h < H; h++) {
            float *xh = x + (int64_t)h * D;
            rope_bf16(xh, D, row, a->rope_dim); /* token's own position */
        }
        rc = dsv4_mx_quant_rows_fp4(x, H, D, j->rule, j->elem, j->q_packed + t * H * (D / 2),
                                    j->q_scale + t * H * (D / 32), st);
        for (int h = 0; h < H && !rc; h++) {
            const int64_t th = t * H + h;
            const float w = a->weights[th];
            j->weights_out[th] = a->quant == DSV4_IDX_QUANT_A ? (w * ss_a) * hs_a : w * ws_b;
        }
    }
    free(x);
    return rc;
}

#if DSV4_HAVE_AVX2_PATHS
/* rope_bf16 of 8 lanes (pairs k..k+3 of the RoPE part) for a cos/sin row
 * without NaN: the products, then even lanes ec - os and odd lanes es + oc
 * (es's NaN when both are NaN, as the portable code gives), then bf16. */
DSV4_AVX2_INLINE __m256 rope_bf16_avx2(__m256 v, const float *row, int half, int k)
{
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(row + k)), dup);
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(row + half + k)), dup);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);
    const __m256 ec_oc = _mm256_mul_ps(v, c), os_es = _mm256_mul_ps(swapped, s); /* c, s not NaN here */
    const __m256 even = _mm256_sub_ps(ec_oc, os_es), odd = dsv4_avx2_first_nan(_mm256_add_ps(os_es, ec_oc), os_es);
    return dsv4_avx2_bf16_round(_mm256_blend_ps(even, odd, 0xAA));
}

#define QQ_BATCH 16 /* blocks per dsv4_mx_fp4_blocks_512 call */
#define QQ512 __attribute__((target("avx512f,avx2,fma")))
#define QQ512_INLINE static inline __attribute__((target("avx512f,avx2,fma"), always_inline))

/* rope_bf16_avx2 on 16 lanes (pairs k..k+7), c and s already one a lane. */
QQ512_INLINE __m512 rope_bf16_512(__m512 v, __m512 c, __m512 s)
{
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    const __m512 ec_oc = _mm512_mul_ps(v, c), os_es = _mm512_mul_ps(swapped, s); /* c, s not NaN here */
    const __m512 even = _mm512_sub_ps(ec_oc, os_es);
    __m512 odd = _mm512_add_ps(os_es, ec_oc);
    odd = _mm512_mask_mov_ps(odd, _mm512_cmp_ps_mask(os_es, os_es, _CMP_UNORD_Q), /* os_es's NaN first */
                             _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(os_es), _mm512_set1_epi32(0x00400000))));
    const __m512i b = _mm512_castps_si512(_mm512_mask_mov_ps(even, 0xAAAA, odd)); /* dsv4_avx2_bf16_round */
    const __m512i rne = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)),
                                         _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    const __m512i r = _mm512_mask_mov_epi32(rne, nan, _mm512_or_si512(b, _mm512_set1_epi32(0x00400000)));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u)));
}

QQ512_INLINE __m512 load_bf16_512(const uint16_t *h)
{
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)h)), 16));
}

/* Token t's H x nb blocks in a row where AVX-512F runs (a cos/sin row
 * without NaN): built 16 at a time into an fp32 buffer of 2 KB (in L1),
 * the RoPE lanes sixteen at a time with each token's c and s laid out
 * once, then quantized by dsv4_mx_fp4_blocks_512. */
QQ512 static void qq_token_512(const qquant_job *j, int64_t t, const float *row)
{
    const dsv4_idx_qquant_args *a = j->a;
    const int D = a->D, H = a->H, nope = a->D - a->rope_dim, half = a->rope_dim / 2, nb = D / DSV4_MX_BLOCK;
    float buf[QQ_BATCH * DSV4_MX_BLOCK], cd[1024], sd[1024];
    for (int k = 0; k < half; k++) /* pair k's c and s on its two lanes */
        cd[2 * k] = cd[2 * k + 1] = row[k], sd[2 * k] = sd[2 * k + 1] = row[half + k];
    const int64_t nblk = (int64_t)H * nb;
    const uint16_t *src = a->q + t * H * D; /* the token's blocks in a row */
    int e0 = 0;                             /* the lane of src's block in its head */
    for (int64_t i0 = 0; i0 < nblk; i0 += QQ_BATCH) {
        const int nk = nblk - i0 < QQ_BATCH ? (int)(nblk - i0) : QQ_BATCH;
        for (int k = 0; k < nk; k++, src += DSV4_MX_BLOCK, e0 = e0 + DSV4_MX_BLOCK == D ? 0 : e0 + DSV4_MX_BLOCK) {
            for (int r = 0; r < 2; r++) {
                __m512 v = load_bf16_512(src + 16 * r);
                if (e0 >= nope)
                    v = rope_bf16_512(v, _mm512_loadu_ps(cd + e0 - nope + 16 * r), _mm512_loadu_ps(sd + e0 - nope + 16 * r));
                _mm512_storeu_ps(buf + k * DSV4_MX_BLOCK + 16 * r, v);
            }
        }
        dsv4_mx_fp4_blocks_512(buf, nk, j->rule, j->elem, j->q_packed + (t * nblk + i0) * (DSV4_MX_BLOCK / 2),
                               j->q_scale + t * nblk + i0);
    }
}

/* qquant_range with the head rows built in registers block by block (a
 * block lies wholly in the NoPE or the RoPE part: both are multiples of
 * 32) and quantized there, no fp32 copy of the token; where AVX-512F runs,
 * sixteen blocks at a time through an fp32 buffer of 2 KB (in L1). */
DSV4_AVX2 static int qquant_range_avx2(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const qquant_job *j = ctx;
    const dsv4_idx_qquant_args *a = j->a;
    const int D = a->D, H = a->H, nope = a->D - a->rope_dim, half = a->rope_dim / 2;
    const float ws_b = (float)(a->softmax_scale * a->head_scale); /* as qquant_range */
    const float ss_a = (float)a->softmax_scale, hs_a = (float)a->head_scale;
    const int wide = dsv4_simd_level() >= DSV4_SIMD_AVX512; /* 16 blocks at a time, 16 lanes at a time */
    const int nb = D / DSV4_MX_BLOCK;
    dsv4_mx_prepare();
    for (int64_t t = t0; t < t1; t++) {
        const float *row;
        int rc = dsv4_rope_row_of_token(a->cos_sin_cache, a->num_pos, a->rope_dim, a->positions, t, &row, st);
        if (rc)
            return rc;
        if (dsv4_avx2_any_nan(row, a->rope_dim)) { /* NaN beside a NaN q lane: the portable code's payload */
            if ((rc = qquant_range(ctx, t, t + 1, worker, st)))
                return rc;
            continue;
        }
        if (wide)
            qq_token_512(j, t, row);
        for (int h = 0; h < H; h++) {
            const int64_t th = t * H + h;
            const uint16_t *src = a->q + th * D;
            for (int b = 0; !wide && b < nb; b++) {
                const int i0 = b * DSV4_MX_BLOCK;
                __m256 v[4];
                for (int r = 0; r < 4; r++)
                    v[r] = dsv4_avx2_load_bf16(src + i0 + 8 * r);
                if (i0 >= nope)
                    for (int r = 0; r < 4; r++)
                        v[r] = rope_bf16_avx2(v[r], row, half, (i0 + 8 * r - nope) / 2);
                j->q_scale[th * nb + b] =
                    dsv4_mx_fp4_block_avx2(v, j->rule, j->elem, j->q_packed + th * (D / 2) + b * (DSV4_MX_BLOCK / 2));
            }
            const float w = a->weights[th];
            j->weights_out[th] = a->quant == DSV4_IDX_QUANT_A ? (w * ss_a) * hs_a : w * ws_b;
        }
    }
    return DSV4_OK;
}
#endif

int dsv4_ref_indexer_q_quant(const dsv4_idx_qquant_args *a, uint8_t *q_packed, uint8_t *q_scale,
                             float *weights_out, dsv4_status *st)
{
    const int D = a->D, H = a->H;
    if (D <= 0 || D > 1024 || D % DSV4_MX_BLOCK || a->rope_dim <= 0 || a->rope_dim % DSV4_MX_BLOCK ||
        a->rope_dim > D || H <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "q_quant: head_dim %d and rope_dim %d must be multiples of 32 "
                         "(docs/semantics/indexer.md Q4.2: R a multiple of 32), rope_dim <= head_dim", D, a->rope_dim);
    qquant_job j = {a, 0, 0, q_packed, q_scale, weights_out};
    quant_rule(a->quant, &j.rule, &j.elem);
    dsv4_par_fn fn = qquant_range;
#if DSV4_HAVE_AVX2_PATHS
    if (dsv4_simd_avx2())
        fn = qquant_range_avx2;
#endif
    return dsv4_parallel_for(a->T, 16, 0, fn, &j, st);
}

/* ---- top-k and candidates ---------------------------------------------------- */

typedef struct scored {
    double v;
    int32_t i;
} scored;

/* Higher first; NaN above everything (torch.topk); ties to the lower index. */
static int cmp_scored(const void *pa, const void *pb)
{
    const scored *x = pa, *y = pb;
    int nx = isnan(x->v) != 0, ny = isnan(y->v) != 0;
    if (nx != ny)
        return ny - nx;
    if (!nx && x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

void dsv4_idx_topk_row(const double *scores, int64_t n, int64_t k, int drop_neg_inf, int32_t *out)
{
    scored *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int64_t m = 0;
    if (v) {
        for (int64_t j = 0; j < n; j++)
            v[j] = (scored){scores[j], (int32_t)j};
        qsort(v, (size_t)n, sizeof *v, cmp_scored);
        for (; m < k && m < n; m++) {
            if (drop_neg_inf && v[m].v == -INFINITY)
                break;
            out[m] = v[m].i;
        }
    }
    for (; m < k; m++)
        out[m] = -1;
    free(v);
}

void dsv4_idx_block_scores_row(const double *logits, int64_t end, int64_t C, int64_t nblocks, double *out)
{
    for (int64_t i = 0; i < nblocks; i++) {
        double m = -INFINITY;
        for (int64_t j = i * C; j < (i + 1) * C && j < end && !isnan(m); j++) /* NaN propagates */
            if (isnan(logits[j]) || logits[j] > m)
                m = logits[j];
        out[i] = m;
    }
    if (end > 0 && (end - 1) / C < nblocks) /* the newest block is pinned (docs/semantics/indexer.md Q6.2 step 4) */
        out[(end - 1) / C] = INFINITY;
}

static int cmp_i32(const void *pa, const void *pb)
{
    int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
    return (x > y) - (x < y);
}

int dsv4_idx_candidate_ids(const int32_t *cand, int64_t ncand, int64_t end, int64_t C, int32_t *ids_out,
                           int64_t *nids, int64_t *ncols, dsv4_status *st)
{
    const int64_t nb = (end + C - 1) / C;
    int64_t n = 0;
    for (int64_t i = 0; i < ncand; i++)
        if (cand[i] >= 0 && cand[i] < nb) /* docs/semantics/indexer.md Q6.3: keep 0 <= id < ceil(end/C) */
            ids_out[n++] = cand[i];
    qsort(ids_out, (size_t)n, sizeof *ids_out, cmp_i32);
    for (int64_t i = 1; i < n; i++)
        if (ids_out[i] == ids_out[i - 1])
            return dsv4_fail(st, DSV4_EINPUT, "candidate block %d appears twice", ids_out[i]);
    *nids = n;
    /* cu = (n-1)*C + min(C, end - max_id*C) */
    *ncols = n == 0 ? 0 : (n - 1) * C + (C < end - (int64_t)ids_out[n - 1] * C ? C : end - (int64_t)ids_out[n - 1] * C);
    return DSV4_OK;
}
