/* indexer.c - the paged MXFP4 indexer reference (see indexer.h).
 * Spec: ../shared/spec/quant_and_indexer.md sections 4-6 (cited per rule). */
#define _POSIX_C_SOURCE 200809L
#include "indexer.h"

#include "codec_inline.h"
#include "parallel.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    /* aiter cache_format via rocm_paged_mxfp4_cache_layout (spec 5.1). */
    L->n_per_tile = (head_dim <= 64 || num_heads >= 32) ? 32 : 16;
    L->d_per_tile = 16;
    L->scale_lanes = 64 / L->n_per_tile;
    const int nb = head_dim / DSV4_MX_BLOCK;
    if (!shuffled)
        return DSV4_OK;
    if (page_entries % L->n_per_tile || (head_dim / 2) % L->d_per_tile || nb % L->scale_lanes)
        return dsv4_fail(st, DSV4_EINPUT, "layout: page_entries %" PRId64 " %% n_per_tile %d, (head_dim/2) %% %d "
                         "and (head_dim/32) %% scale_lanes %d must be 0 (spec 5.1)",
                         page_entries, L->n_per_tile, L->d_per_tile, L->scale_lanes);
    L->s_hi = nb / L->scale_lanes;
    return DSV4_OK;
}

int64_t dsv4_idx_entry_bytes(const dsv4_idx_layout *L) { return L->head_dim / 2 + L->head_dim / 32; }

int64_t dsv4_idx_page_bytes(const dsv4_idx_layout *L) { return L->page_entries * dsv4_idx_entry_bytes(L); }

/* Spec 4.1 step 5: natural p*D/2 + b; preshuffled
 * grp*N*(D/2) + (b/Dt)*N*Dt + lane*Dt + b%Dt. */
int64_t dsv4_idx_value_offset(const dsv4_idx_layout *L, int64_t p, int b)
{
    const int64_t tb = L->head_dim / 2;
    if (!L->shuffled)
        return p * tb + b;
    const int64_t N = L->n_per_tile, Dt = L->d_per_tile, grp = p / N, lane = p % N;
    return grp * N * tb + (b / Dt) * N * Dt + lane * Dt + b % Dt;
}

/* Spec 4.1 step 5: natural P*D/2 + p*NB + s; preshuffled
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
    for (int b = 0; b < L->head_dim / 2; b++)
        values[b] = page[dsv4_idx_value_offset(L, p, b)];
    for (int s = 0; s < L->head_dim / 32; s++)
        scales[s] = page[dsv4_idx_scale_offset(L, p, s)];
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
 * scale region tiles N entries x NB bytes (spec 4.1 step 5). */
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
    /* spec 4.1 step 4: A = ceil(log2_f32) + threshold; B = mode-1 bit rule + v_cvt RNE. */
    *rule = q == DSV4_IDX_QUANT_A ? DSV4_MX_FP4_CEIL_F32LOG2 : DSV4_MX_FP4_CEIL;
    *elem = q == DSV4_IDX_QUANT_A ? DSV4_MX_ELEM_THRESHOLD : DSV4_MX_ELEM_RNE;
}

/* RoPE of the last rope_dim lanes of x in fp32, each lane rounded to bf16
 * (spec 4.1 step 3: e' = bf16(e*c - o*s), o' = bf16(o*c + e*s)). */
static void rope_bf16(float *x, int D, const float *row, int rope_dim)
{
    dsv4_rope_gptj_f32(x + D - rope_dim, row, rope_dim, DSV4_ROPE_FORWARD);
    for (int d = D - rope_dim; d < D; d++)
        x[d] = dsv4_bf16_to_f32_inline(dsv4_bf16_from_f32_inline(x[d]));
}

typedef struct kstore_job {
    const dsv4_idx_kstore_args *a;
    dsv4_mx_rule rule;
    dsv4_mx_elem elem;
    uint8_t *cache;
} kstore_job;

static int kstore_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
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
        /* spec 4.1 step 1: slot < 0 skips; only (pos+1) % c == 0 writes. */
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
        /* spec 4.1 step 2: var = sum k^2 / D (exact sum, rounded once: the
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
static int qquant_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const qquant_job *j = ctx;
    const dsv4_idx_qquant_args *a = j->a;
    const int D = a->D, H = a->H;
    /* spec 4.2: the Python floats reach the kernel as fp32 arguments. */
    const float ws_b = (float)(a->softmax_scale * a->head_scale); /* seed 000: one product */
    const float ss_a = (float)a->softmax_scale, hs_a = (float)a->head_scale;
    float *x = malloc((size_t)H * (size_t)D * sizeof *x);
    if (!x)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    for (int64_t t = t0; t < t1 && !rc; t++) {
        const float *row;
        char what[32];
        snprintf(what, sizeof what, "positions[%" PRId64 "]", t);
        if ((rc = dsv4_rope_row(a->cos_sin_cache, a->num_pos, a->rope_dim, a->positions[t], what, &row, st)))
            break;
        for (int h = 0; h < H; h++) {
            const uint16_t *q = a->q + (t * H + h) * D;
            float *xh = x + (int64_t)h * D;
            for (int d = 0; d < D; d++) /* NoPE lanes raw, no rounding (spec 4.2) */
                xh[d] = dsv4_bf16_to_f32_inline(q[d]);
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

int dsv4_ref_indexer_q_quant(const dsv4_idx_qquant_args *a, uint8_t *q_packed, uint8_t *q_scale,
                             float *weights_out, dsv4_status *st)
{
    const int D = a->D, H = a->H;
    if (D <= 0 || D > 1024 || D % DSV4_MX_BLOCK || a->rope_dim <= 0 || a->rope_dim % DSV4_MX_BLOCK ||
        a->rope_dim > D || H <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "q_quant: head_dim %d and rope_dim %d must be multiples of 32 "
                         "(spec 4.2: R a multiple of 32), rope_dim <= head_dim", D, a->rope_dim);
    qquant_job j = {a, 0, 0, q_packed, q_scale, weights_out};
    quant_rule(a->quant, &j.rule, &j.elem);
    return dsv4_parallel_for(a->T, 16, 0, qquant_range, &j, st);
}

/* ---- logits ------------------------------------------------------------- */

int64_t dsv4_idx_row_end(const dsv4_idx_logits_args *a, int64_t r)
{
    for (int64_t b = 0; b < a->B; b++)
        if (r >= a->query_start_loc[b] && r < a->query_start_loc[b + 1]) {
            int64_t ctx = a->context_lens[b], e = a->row_ends[r];
            if (ctx <= 0) /* spec 6.2: a sequence with context_len <= 0 writes nothing */
                return 0;
            e = e < ctx ? e : ctx; /* effective end = min(e_r, context_len) */
            return e < 0 ? 0 : e;
        }
    return -1;
}

static int64_t request_of(const dsv4_idx_logits_args *a, int64_t r)
{
    for (int64_t b = 0; b < a->B; b++)
        if (r >= a->query_start_loc[b] && r < a->query_start_loc[b + 1])
            return b;
    return -1;
}

int dsv4_idx_logits_check(const dsv4_idx_logits_args *a, dsv4_status *st)
{
    if (a->query_start_loc[0] != 0 || a->query_start_loc[a->B] != a->rows)
        return dsv4_fail(st, DSV4_EINPUT, "query_start_loc must run from 0 to rows = %" PRId64, a->rows);
    for (int64_t b = 0; b < a->B; b++)
        if (a->query_start_loc[b + 1] < a->query_start_loc[b])
            return dsv4_fail(st, DSV4_EINPUT, "query_start_loc[%" PRId64 "] decreases", b + 1);
    for (int64_t r = 0; r < a->rows; r++) {
        int64_t e = dsv4_idx_row_end(a, r), b = request_of(a, r);
        if (a->row_ends[r] > a->width)
            return dsv4_fail(st, DSV4_EINPUT, "row_ends[%" PRId64 "] = %d > width %" PRId64, r, a->row_ends[r],
                             a->width);
        if ((e + a->L->page_entries - 1) / a->L->page_entries > a->max_blocks)
            return dsv4_fail(st, DSV4_EINPUT, "row %" PRId64 " ends at %" PRId64 ", past block_table's %" PRId64
                             " blocks", r, e, a->max_blocks);
        for (int64_t i = 0; i * a->L->page_entries < e; i++) {
            int32_t pg = a->block_table[b * a->max_blocks + i];
            if (pg < 0 || pg >= a->num_pages)
                return dsv4_fail(st, DSV4_EINPUT, "block_table[%" PRId64 ", %" PRId64 "] = %d: not a page in [0, %"
                                 PRId64 ") (row %" PRId64 " reads it)", b, i, pg, a->num_pages, r);
        }
    }
    return DSV4_OK;
}

/* 2 * |e2m1| as an integer: 0, 1, 2, 3, 4, 6, 8, 12 (spec notation). */
static const int e2m1_x2[8] = {0, 1, 2, 3, 4, 6, 8, 12};

static int code_x2(uint8_t packed_byte, int hi)
{
    uint8_t c = hi ? dsv4_e2m1_hi(packed_byte) : dsv4_e2m1_lo(packed_byte);
    return (c & 8) ? -e2m1_x2[c & 7] : e2m1_x2[c & 7];
}

/* Per operand (one head row of q, or one key): the exponents of its
 * non-zero blocks.  wild: a NaN scale (0xFF) or an exponent outside
 * [-100, 100] (then the fp32 GEMM operand is not used). */
typedef struct opstat {
    int emin, emax, zero, wild;
} opstat;

static opstat stat_of(const uint8_t *v, const uint8_t *s, int D)
{
    opstat o = {1000, -1000, 1, 0};
    for (int b = 0; b < D / 32; b++) {
        int nz = 0;
        for (int i = 0; i < 16; i++)
            nz |= (v[b * 16 + i] & 0x77) != 0;
        if (s[b] == 0xFF) {
            o.wild = 1;
            continue;
        }
        if (!nz)
            continue;
        int e = (int)s[b] - 127;
        o.zero = 0;
        o.emin = e < o.emin ? e : o.emin;
        o.emax = e > o.emax ? e : o.emax;
        if (e < -100 || e > 100)
            o.wild = 1;
    }
    return o;
}

/* Whether every partial sum of the fp32 dot of q and k is exact, whatever
 * the order (then the GEMM result is the exact dot, bit for bit, on any
 * BLAS kernel and thread count).  Each product is a multiple of
 * 2^(m-2) (e2m1 values are multiples of 1/2), m = emin_q + emin_k, and
 * |partial| <= 128*36*2^M < 2^(M+13), M = emax_q + emax_k: exact in fp32 if
 * (M + 13) - (m - 2) <= 24, and normal (no subnormal, no overflow) if
 * m - 2 >= -126 and M + 13 <= 127.  (D <= 128 keeps the 128*36 bound.) */
static int pair_exact(opstat q, opstat k)
{
    if (q.wild || k.wild)
        return 0;
    if (q.zero || k.zero)
        return 1;
    const int M = q.emax + k.emax, m = q.emin + k.emin;
    return M - m <= 9 && m - 2 >= -126 && M + 13 <= 127;
}

/* The exact dot of a 64-wide chunk (two blocks) in double: each block is an
 * integer sum times a power of two (exact); the two are added once.
 * absval: the same of |q|.|k| (the error-bound scale). */
static double chunk_dot(const uint8_t *qv, const uint8_t *qs, const uint8_t *kv, const uint8_t *ks, int b0,
                        int nblk, int absval)
{
    double sum = 0;
    for (int b = b0; b < b0 + nblk; b++) {
        if (qs[b] == 0xFF || ks[b] == 0xFF) /* e8m0 NaN propagates (spec 6.2 step 1) */
            return NAN;
        int64_t isum = 0;
        for (int i = 0; i < 16; i++) {
            uint8_t x = qv[b * 16 + i], y = kv[b * 16 + i];
            int a0 = code_x2(x, 0) * code_x2(y, 0), a1 = code_x2(x, 1) * code_x2(y, 1);
            isum += absval ? abs(a0) + abs(a1) : a0 + a1;
        }
        sum += ldexp((double)isum, (int)qs[b] + (int)ks[b] - 254 - 2);
    }
    return sum;
}

/* The ideal s = q.k: the 64-wide chunks added in order (each chunk exact). */
static double exact_dot(const uint8_t *qv, const uint8_t *qs, const uint8_t *kv, const uint8_t *ks, int D,
                        int absval)
{
    double s = 0;
    for (int b = 0; b < D / 32; b += 2)
        s += chunk_dot(qv, qs, kv, ks, b, D / 32 - b < 2 ? D / 32 - b : 2, absval);
    return s;
}

static void dequant_f32(const uint8_t *v, const uint8_t *s, int D, opstat o, float *out)
{
    for (int d = 0; d < D; d++) {
        int e = (int)s[d / 32] - 127;
        out[d] = o.wild ? 0.0f : ldexpf(0.5f * (float)code_x2(v[d / 2], d & 1), e);
    }
}

static inline double relu_d(double x) { return x > 0 ? x : (isnan(x) ? x : 0.0); }
static inline float relu_f(float x) { return x > 0 ? x : (isnan(x) ? x : 0.0f); }

/* hr(i) of spec 6.2 step 3: the MFMA lane order of the head fold. */
static int fold_head(int i)
{
    return (i & 1) + 2 * ((i >> 1) & 1) + 8 * ((i >> 2) & 1) + 16 * ((i >> 3) & 1);
}

/* Spec 6.2 step 3: A_L over chunk 0 (and chunk 1 for 64 heads) with FMA,
 * logits = fl(A_0 + A_1). */
static float faithful_fold(const float *s, const float *w, int H)
{
    float A[2];
    for (int L = 0; L < 2; L++) {
        int h = fold_head(0) + 4 * L;
        A[L] = relu_f(s[h]) * w[h];
        for (int c = 0; c < H / 32; c++)
            for (int i = (c == 0 ? 1 : 0); i < 16; i++) {
                h = 32 * c + fold_head(i) + 4 * L;
                A[L] = fmaf(relu_f(s[h]), w[h], A[L]);
            }
    }
    return A[0] + A[1];
}

typedef struct req_keys {
    int64_t nk;
    uint8_t *v, *s; /* [nk, D/2], [nk, D/32] natural order */
    float *kd;      /* [nk, D] */
    opstat *st;
    opstat all;     /* over all keys: emin/emax of non-zero keys, wild if any */
    int any_nonzero;
} req_keys;

static void req_keys_free(req_keys *k)
{
    free(k->v);
    free(k->s);
    free(k->kd);
    free(k->st);
}

static int load_keys(const dsv4_idx_logits_args *a, int64_t b, int64_t nk, req_keys *k, dsv4_status *st)
{
    const int D = a->D;
    const int64_t P = a->L->page_entries, pb = dsv4_idx_page_bytes(a->L);
    memset(k, 0, sizeof *k);
    k->nk = nk;
    size_t n = (size_t)(nk ? nk : 1);
    k->v = malloc(n * (size_t)(D / 2));
    k->s = malloc(n * (size_t)(D / 32));
    k->kd = malloc(n * (size_t)D * sizeof(float));
    k->st = malloc(n * sizeof *k->st);
    if (!k->v || !k->s || !k->kd || !k->st)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory (keys of request %" PRId64 ")", b);
    k->all = (opstat){1000, -1000, 1, 0};
    for (int64_t j = 0; j < nk; j++) {
        const int32_t pg = a->block_table[b * a->max_blocks + j / P];
        uint8_t *v = k->v + j * (D / 2), *s = k->s + j * (D / 32);
        dsv4_idx_read_entry(a->L, a->cache + (int64_t)pg * pb, j % P, v, s);
        opstat o = stat_of(v, s, D);
        k->st[j] = o;
        dequant_f32(v, s, D, o, k->kd + j * D);
        k->all.wild |= o.wild;
        if (!o.zero && !o.wild) {
            k->all.zero = 0;
            k->all.emin = o.emin < k->all.emin ? o.emin : k->all.emin;
            k->all.emax = o.emax > k->all.emax ? o.emax : k->all.emax;
        }
    }
    return DSV4_OK;
}

/* Row-block x key-chunk tiles of the GEMM (sized for the L2/L3 caches). */
#define ROWS_PER_TILE 512
#define KEYS_PER_TILE 1024

struct tile_ctx;
typedef struct tile_ctx {
    const dsv4_idx_logits_args *a;
    const req_keys *k;
    const uint8_t *qv, *qs; /* this row block's q: [rb*H, D/2], [rb*H, D/32] */
    const opstat *qst;
    const int *row_exact;   /* per row-head: exact against every key */
    int64_t r0, rb, j0, nc;
    const int64_t *ends;
    float *C0, *C1;         /* GEMM tiles [rb*H, nc] */
    double *acc;            /* [nthreads, KEYS_PER_TILE] */
    int nthreads;
} tile_ctx;

/* acc[j] += relu(c[j]) * w for an exact row-head (no NaN, no Inf): relu by
 * clearing negative bit patterns, branch-free so that GCC vectorizes it;
 * the order over heads stays fixed, so the result does not depend on it. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void accum_relu(double *restrict acc, const float *restrict c, double w, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        uint32_t b;
        float f;
        memcpy(&b, c + j, sizeof b);
        b &= ~(0u - (b >> 31)); /* negative (incl. -0) -> +0 */
        memcpy(&f, &b, sizeof f);
        acc[j] += (double)f * w;
    }
}

/* Rows ri0, ri0 + step, ... of a tile; acc is this thread's [nc]. */
static void tile_ideal(const tile_ctx *t, double *logits, int64_t ri0, int64_t step, double *acc)
{
    const dsv4_idx_logits_args *a = t->a;
    const int H = a->H, D = a->D;
    for (int64_t ri = ri0; ri < t->rb; ri += step) {
        const int64_t r = t->r0 + ri;
        int64_t n = t->ends[ri] - t->j0;
        if (n <= 0)
            continue;
        n = n < t->nc ? n : t->nc;
        memset(acc, 0, (size_t)n * sizeof *acc);
        for (int h = 0; h < H; h++) {
            const int64_t rh = ri * H + h;
            const double w = a->weights[r * H + h];
            const float *c = t->C0 + rh * t->nc;
            if (t->row_exact[rh]) {
                accum_relu(acc, c, w, n);
                continue;
            }
            for (int64_t j = 0; j < n; j++) {
                const int64_t key = t->j0 + j;
                double s = pair_exact(t->qst[rh], t->k->st[key])
                               ? (double)c[j]
                               : exact_dot(t->qv + rh * (D / 2), t->qs + rh * (D / 32), t->k->v + key * (D / 2),
                                           t->k->s + key * (D / 32), D, 0);
                acc[j] += relu_d(s) * w;
            }
        }
        memcpy(logits + r * a->width + t->j0, acc, (size_t)n * sizeof *acc);
    }
}

typedef struct ideal_job {
    const struct tile_ctx *t;
    double *logits, *acc;
    int64_t ri0, step;
} ideal_job;

static void *ideal_thread(void *p)
{
    ideal_job *j = p;
    tile_ideal(j->t, j->logits, j->ri0, j->step, j->acc);
    return NULL;
}

#define MAX_THREADS 16

/* The head reduction of a tile, rows split over threads (each row is
 * reduced by one thread in the fixed order: thread-count independent). */
static void tile_ideal_parallel(const tile_ctx *t, double *logits, double *accs, int nthreads)
{
    pthread_t th[MAX_THREADS];
    ideal_job jobs[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    const int n = (int)(t->rb < nthreads ? t->rb : nthreads);
    for (int i = 0; i < n; i++) {
        jobs[i] = (ideal_job){t, logits, accs + (int64_t)i * t->nc, i, n};
        started[i] = i > 0 && pthread_create(&th[i], NULL, ideal_thread, &jobs[i]) == 0;
        if (i > 0 && !started[i]) /* no thread: do its rows here */
            tile_ideal(t, logits, i, n, jobs[i].acc);
    }
    if (n > 0)
        tile_ideal(t, logits, 0, n, accs);
    for (int i = 1; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

static void tile_faithful(const tile_ctx *t, double *logits)
{
    const dsv4_idx_logits_args *a = t->a;
    const int H = a->H, D = a->D;
    float s[64], w[64];
    for (int64_t ri = 0; ri < t->rb; ri++) {
        const int64_t r = t->r0 + ri;
        int64_t n = t->ends[ri] - t->j0;
        n = n < t->nc ? n : t->nc;
        for (int h = 0; h < H; h++)
            w[h] = a->weights[r * H + h];
        for (int64_t j = 0; j < n; j++) {
            const int64_t key = t->j0 + j;
            for (int h = 0; h < H; h++) {
                const int64_t rh = ri * H + h;
                if (pair_exact(t->qst[rh], t->k->st[key])) { /* both halves exact in fp32 */
                    s[h] = t->C0[rh * t->nc + j] + t->C1[rh * t->nc + j];
                    continue;
                }
                const uint8_t *qv = t->qv + rh * (D / 2), *qs = t->qs + rh * (D / 32);
                const uint8_t *kv = t->k->v + key * (D / 2), *ks = t->k->s + key * (D / 32);
                /* first MFMA rounds the exact chunk once; the second adds its
                 * exact chunk to the fp32 accumulator, rounded once (computed
                 * in double: a double rounding only for spans > 2^29). */
                float acc = (float)chunk_dot(qv, qs, kv, ks, 0, 2, 0);
                s[h] = (float)((double)acc + chunk_dot(qv, qs, kv, ks, 2, 2, 0));
            }
            logits[r * a->width + key] = faithful_fold(s, w, H);
        }
    }
}

static void tile_bound(const tile_ctx *t, double *bound)
{
    const dsv4_idx_logits_args *a = t->a;
    const int H = a->H, D = a->D;
    for (int64_t ri = 0; ri < t->rb; ri++) {
        const int64_t r = t->r0 + ri;
        int64_t n = t->ends[ri] - t->j0;
        n = n < t->nc ? n : t->nc;
        for (int64_t j = 0; j < n; j++) {
            const int64_t key = t->j0 + j;
            double b = 0;
            for (int h = 0; h < H; h++) {
                const int64_t rh = ri * H + h;
                double s = (!t->qst[rh].wild && !t->k->st[key].wild)
                               ? (double)t->C1[rh * t->nc + j] * (1 + 0x1p-16)
                               : exact_dot(t->qv + rh * (D / 2), t->qs + rh * (D / 32), t->k->v + key * (D / 2),
                                           t->k->s + key * (D / 32), D, 1);
                b += fabs((double)a->weights[r * H + h]) * s;
            }
            bound[r * a->width + key] = isfinite(b) ? b : INFINITY;
        }
    }
}

typedef struct row_block {
    int64_t r0, rb, maxend;
    uint8_t *qv, *qs;
    float *qd, *qa, *ka;
    opstat *qst;
    int *row_exact;
    int64_t ends[ROWS_PER_TILE];
} row_block;

static void abs_copy(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fabsf(x[i]);
}

/* One block of rows of request b against its keys. */
static void run_rows(const dsv4_idx_logits_args *a, dsv4_idx_mode mode, const req_keys *k, row_block *rbk,
                     float *C0, float *C1, double *acc, int nthreads, double *logits, double *bound)
{
    const int H = a->H, D = a->D;
    const int64_t M = rbk->rb * H;
    for (int64_t ri = 0; ri < rbk->rb; ri++)
        for (int h = 0; h < H; h++) {
            const int64_t rh = ri * H + h, src = (rbk->r0 + ri) * H + h;
            memcpy(rbk->qv + rh * (D / 2), a->q + src * (D / 2), (size_t)D / 2);
            memcpy(rbk->qs + rh * (D / 32), a->q_scale + src * (D / 32), (size_t)D / 32);
            opstat o = stat_of(rbk->qv + rh * (D / 2), rbk->qs + rh * (D / 32), D);
            rbk->qst[rh] = o;
            dequant_f32(rbk->qv + rh * (D / 2), rbk->qs + rh * (D / 32), D, o, rbk->qd + rh * D);
            rbk->row_exact[rh] = !o.wild && !k->all.wild &&
                                 (o.zero || k->all.zero || pair_exact(o, k->all));
        }
    if (bound)
        abs_copy(rbk->qd, rbk->qa, M * D);
    for (int64_t j0 = 0; j0 < rbk->maxend; j0 += KEYS_PER_TILE) {
        const int64_t nc = rbk->maxend - j0 < KEYS_PER_TILE ? rbk->maxend - j0 : KEYS_PER_TILE;
        tile_ctx t = {a, k, rbk->qv, rbk->qs, rbk->qst, rbk->row_exact, rbk->r0, rbk->rb, j0, nc, rbk->ends,
                      C0, C1, acc, nthreads};
        const float *kd = k->kd + j0 * D;
        if (mode == DSV4_IDX_IDEAL) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, D, 1.0f, rbk->qd, D, kd, D,
                        0.0f, C0, (int)nc);
            tile_ideal_parallel(&t, logits, acc, nthreads);
        } else {
            /* The two K = 64 halves (spec 6.2 step 1: two chained MFMAs). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, D / 2, 1.0f, rbk->qd, D, kd,
                        D, 0.0f, C0, (int)nc);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, D / 2, 1.0f, rbk->qd + D / 2,
                        D, kd + D / 2, D, 0.0f, C1, (int)nc);
            tile_faithful(&t, logits);
        }
        if (bound) {
            abs_copy(kd, rbk->ka, nc * D);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, D, 1.0f, rbk->qa, D, rbk->ka,
                        D, 0.0f, C1, (int)nc);
            tile_bound(&t, bound);
        }
    }
}

int dsv4_ref_mqa_logits(const dsv4_idx_logits_args *a, dsv4_idx_mode mode, double *logits, double *bound,
                        dsv4_status *st)
{
    const int H = a->H, D = a->D;
    if (D != 128 || H <= 0 || H > 128 || (mode == DSV4_IDX_FAITHFUL && H != 32 && H != 64))
        return dsv4_fail(st, DSV4_EINPUT, "mqa_logits: head_dim %d (128), heads %d (<= 128; 32 or 64 in the "
                         "faithful mode: the 32x32 MFMA fold of spec 6.2)", D, H);
    int rc = dsv4_idx_logits_check(a, st);
    if (rc)
        return rc;
    for (int64_t i = 0; i < a->rows * a->width; i++) {
        logits[i] = -INFINITY; /* past the row end: unspecified (the -inf of clean_logits) */
        if (bound)
            bound[i] = 0;
    }
    const int64_t rpt = ROWS_PER_TILE / H > 0 ? ROWS_PER_TILE / H : 1;
    const int64_t M = rpt * H;
    row_block rbk = {0};
    float *C0 = malloc((size_t)M * KEYS_PER_TILE * sizeof(float));
    float *C1 = malloc((size_t)M * KEYS_PER_TILE * sizeof(float));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const int nthreads = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
    double *acc = malloc((size_t)nthreads * KEYS_PER_TILE * sizeof(double));
    rbk.qv = malloc((size_t)M * (D / 2));
    rbk.qs = malloc((size_t)M * (D / 32));
    rbk.qd = malloc((size_t)M * D * sizeof(float));
    rbk.qa = malloc((size_t)M * D * sizeof(float));
    rbk.ka = malloc((size_t)KEYS_PER_TILE * D * sizeof(float));
    rbk.qst = malloc((size_t)M * sizeof *rbk.qst);
    rbk.row_exact = malloc((size_t)M * sizeof *rbk.row_exact);
    if (!C0 || !C1 || !acc || !rbk.qv || !rbk.qs || !rbk.qd || !rbk.qa || !rbk.ka || !rbk.qst || !rbk.row_exact)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory (logits tiles)");
    for (int64_t b = 0; b < a->B && !rc; b++) {
        const int64_t q0 = a->query_start_loc[b], q1 = a->query_start_loc[b + 1];
        int64_t nk = 0;
        for (int64_t r = q0; r < q1; r++) {
            int64_t e = dsv4_idx_row_end(a, r);
            nk = e > nk ? e : nk;
        }
        if (nk == 0)
            continue;
        req_keys k;
        if ((rc = load_keys(a, b, nk, &k, st))) {
            req_keys_free(&k);
            break;
        }
        for (int64_t r0 = q0; r0 < q1; r0 += rpt) {
            rbk.r0 = r0;
            rbk.rb = q1 - r0 < rpt ? q1 - r0 : rpt;
            rbk.maxend = 0;
            for (int64_t ri = 0; ri < rbk.rb; ri++) {
                rbk.ends[ri] = dsv4_idx_row_end(a, r0 + ri);
                rbk.maxend = rbk.ends[ri] > rbk.maxend ? rbk.ends[ri] : rbk.maxend;
            }
            run_rows(a, mode, &k, &rbk, C0, C1, acc, nthreads, logits, bound);
        }
        req_keys_free(&k);
    }
    free(C0);
    free(C1);
    free(acc);
    free(rbk.qv);
    free(rbk.qs);
    free(rbk.qd);
    free(rbk.qa);
    free(rbk.ka);
    free(rbk.qst);
    free(rbk.row_exact);
    return rc;
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
    if (end > 0 && (end - 1) / C < nblocks) /* the newest block is pinned (spec 6.2 step 4) */
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
        if (cand[i] >= 0 && cand[i] < nb) /* spec 6.3: keep 0 <= id < ceil(end/C) */
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
