/* indexer_logits.c - the paged MXFP4 indexer's logits reference (see
 * indexer.h; the page layout, K store, Q quant and top-k are in indexer.c).
 * Semantics: docs/semantics/indexer.md Q4-Q6 (cited per rule). */
#define _POSIX_C_SOURCE 200809L
#include "indexer.h"

#include "codec_inline.h"
#include "indexer_logits_vnni.h"
#include "simd.h"
#include "parallel.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "numerics.h"


int64_t dsv4_idx_row_end(const dsv4_idx_logits_args *a, int64_t r)
{
    for (int64_t b = 0; b < a->B; b++)
        if (r >= a->query_start_loc[b] && r < a->query_start_loc[b + 1]) {
            int64_t ctx = a->context_lens[b], e = a->row_ends[r];
            if (ctx <= 0) /* docs/semantics/indexer.md Q6.2: a sequence with context_len <= 0 writes nothing */
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

/* 2 * |e2m1| as an integer: 0, 1, 2, 3, 4, 6, 8, 12 (docs/semantics/numerics.md A1 notation). */
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
        if (qs[b] == 0xFF || ks[b] == 0xFF) /* e8m0 NaN propagates (docs/semantics/indexer.md Q6.2 step 1) */
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

/* 0.5f * (float)code_x2 of a nibble (the -0 code gives +0, as the integer
 * product does). */
static const float half_code[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                    0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* half_code of both nibbles of a byte (low first): one look-up per byte. */
typedef struct half_pair {
    float lo, hi;
} half_pair;

static half_pair half_pairs[256];
static pthread_once_t half_pairs_once = PTHREAD_ONCE_INIT;

static void half_pairs_init(void)
{
    for (int b = 0; b < 256; b++)
        half_pairs[b] = (half_pair){half_code[b & 15], half_code[b >> 4]};
}

/* 2^e as fp32 for e in [-127, 127] (2^-127 is a subnormal). */
static inline float pow2_f32(int e) { return dsv4_f32_of_bits(e >= -126 ? (uint32_t)(e + 127) << 23 : 0x00400000u); }

/* ldexpf(0.5 c, e) as (0.5 c) * 2^e: both are the correctly rounded value
 * of the exact product, 2^e being an fp32 for every scale byte here (0xFF
 * makes the operand wild: zeros). */
static void dequant_f32(const uint8_t *v, const uint8_t *s, int D, opstat o, float *out)
{
    if (o.wild) {
        memset(out, 0, (size_t)D * sizeof *out);
        return;
    }
    for (int b = 0; b < D / 32; b++) {
        const float m = pow2_f32((int)s[b] - 127);
        for (int i = b * 16; i < b * 16 + 16; i++) {
            const half_pair h = half_pairs[v[i]];
            out[2 * i] = h.lo * m;
            out[2 * i + 1] = h.hi * m;
        }
    }
}

static inline double relu_d(double x) { return x > 0 ? x : (isnan(x) ? x : 0.0); }
static inline float relu_f(float x) { return x > 0 ? x : (isnan(x) ? x : 0.0f); }

/* hr(i) of docs/semantics/indexer.md Q6.2 step 3: the MFMA lane order of the head fold. */
static int fold_head(int i)
{
    return (i & 1) + 2 * ((i >> 1) & 1) + 8 * ((i >> 2) & 1) + 16 * ((i >> 3) & 1);
}

/* docs/semantics/indexer.md Q6.2 step 3: A_L over chunk 0 (and chunk 1 for 64 heads) with FMA,
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
} req_keys;

static void req_keys_free(req_keys *k)
{
    free(k->v);
    free(k->s);
    free(k->kd);
    free(k->st);
}

typedef struct keys_job {
    const dsv4_idx_logits_args *a;
    int64_t b;
    req_keys *k;
} keys_job;

/* Keys [j0, j1) of request b into v, s, st, and their fp32 values into kd
 * unless kd is NULL (index 0 = key j0). */
static void decode_keys(const dsv4_idx_logits_args *a, int64_t b, int64_t j0, int64_t j1, uint8_t *v, uint8_t *s,
                        opstat *st, float *kd)
{
    const int D = a->D;
    const int64_t P = a->L->page_entries, pb = dsv4_idx_page_bytes(a->L);
    for (int64_t j = j0; j < j1; j++) {
        const int32_t pg = a->block_table[b * a->max_blocks + j / P];
        const int64_t i = j - j0;
#if defined(__GNUC__)
        /* pages lie anywhere (the block table): the next one is fetched
         * while this one is decoded, as no hardware prefetcher can guess it */
        if ((j == j0 || j % P == 0) && (j / P + 1) * P < j1)
            for (int64_t off = 0; off < pb; off += 64)
                __builtin_prefetch(a->cache + (int64_t)a->block_table[b * a->max_blocks + j / P + 1] * pb + off);
#endif
        dsv4_idx_read_entry(a->L, a->cache + (int64_t)pg * pb, j % P, v + i * (D / 2), s + i * (D / 32));
        st[i] = stat_of(v + i * (D / 2), s + i * (D / 32), D);
        if (kd)
            dequant_f32(v + i * (D / 2), s + i * (D / 32), D, st[i], kd + i * D);
    }
}

static int keys_range(void *ctx, int64_t j0, int64_t j1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const keys_job *kj = ctx;
    const int D = kj->a->D;
    req_keys *k = kj->k;
    decode_keys(kj->a, kj->b, j0, j1, k->v + j0 * (D / 2), k->s + j0 * (D / 32), k->st + j0,
                k->kd ? k->kd + j0 * D : NULL);
    return DSV4_OK;
}

/* with_fp32: whether the GEMM path needs the keys' fp32 values (kd). */
static int load_keys(const dsv4_idx_logits_args *a, int64_t b, int64_t nk, int with_fp32, req_keys *k,
                     dsv4_status *st)
{
    const int D = a->D;
    memset(k, 0, sizeof *k);
    k->nk = nk;
    size_t n = (size_t)(nk ? nk : 1);
    k->v = malloc(n * (size_t)(D / 2));
    k->s = malloc(n * (size_t)(D / 32));
    k->kd = with_fp32 ? malloc(n * (size_t)D * sizeof(float)) : NULL;
    k->st = malloc(n * sizeof *k->st);
    if (!k->v || !k->s || (with_fp32 && !k->kd) || !k->st)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory (keys of request %" PRId64 ")", b);
    keys_job kj = {a, b, k};
    return dsv4_parallel_for(nk, 256, 0, keys_range, &kj, st);
}

/* Row-block x key-chunk tiles of the GEMM (sized for the L2/L3 caches). */
#define ROWS_PER_TILE 512
#define KEYS_PER_TILE 1024

typedef struct tile_ctx {
    const dsv4_idx_logits_args *a;
    const uint8_t *kv, *ks; /* the tile's keys (index 0 = key j0): [nc, D/2], [nc, D/32] */
    const opstat *kst;
    const uint8_t *qv, *qs; /* this row block's q: [rb*H, D/2], [rb*H, D/32] */
    const opstat *qst;
    const int *row_exact;   /* per row-head: exact against every key of the tile */
    int64_t r0, rb, j0, nc;
    const int64_t *ends;
    float *C0, *C1;         /* GEMM tiles [rb*H, nc] */
    double *acc;            /* [KEYS_PER_TILE] */
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
                double s = pair_exact(t->qst[rh], t->kst[j])
                               ? (double)c[j]
                               : exact_dot(t->qv + rh * (D / 2), t->qs + rh * (D / 32), t->kv + j * (D / 2),
                                           t->ks + j * (D / 32), D, 0);
                acc[j] += relu_d(s) * w;
            }
        }
        memcpy(logits + r * a->width + t->j0, acc, (size_t)n * sizeof *acc);
    }
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
                if (pair_exact(t->qst[rh], t->kst[j])) { /* both halves exact in fp32 */
                    s[h] = t->C0[rh * t->nc + j] + t->C1[rh * t->nc + j];
                    continue;
                }
                const uint8_t *qv = t->qv + rh * (D / 2), *qs = t->qs + rh * (D / 32);
                const uint8_t *kv = t->kv + j * (D / 2), *ks = t->ks + j * (D / 32);
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
                double s = (!t->qst[rh].wild && !t->kst[j].wild)
                               ? (double)t->C1[rh * t->nc + j] * (1 + 0x1p-16)
                               : exact_dot(t->qv + rh * (D / 2), t->qs + rh * (D / 32), t->kv + j * (D / 2),
                                           t->ks + j * (D / 32), D, 1);
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

/* The q side of a row block: codes, stats, fp32 values (and |q| for the
 * bound). */
static void setup_rows(const dsv4_idx_logits_args *a, row_block *rbk, int want_bound)
{
    const int H = a->H, D = a->D;
    for (int64_t ri = 0; ri < rbk->rb; ri++)
        for (int h = 0; h < H; h++) {
            const int64_t rh = ri * H + h, src = (rbk->r0 + ri) * H + h;
            memcpy(rbk->qv + rh * (D / 2), a->q + src * (D / 2), (size_t)D / 2);
            memcpy(rbk->qs + rh * (D / 32), a->q_scale + src * (D / 32), (size_t)D / 32);
            opstat o = stat_of(rbk->qv + rh * (D / 2), rbk->qs + rh * (D / 32), D);
            rbk->qst[rh] = o;
            dequant_f32(rbk->qv + rh * (D / 2), rbk->qs + rh * (D / 32), D, o, rbk->qd + rh * D);
        }
    if (want_bound)
        abs_copy(rbk->qd, rbk->qa, rbk->rb * H * D);
}

/* Rows [r0, r0 + rb) as the row block: their ends and the largest. */
static void set_rows(const dsv4_idx_logits_args *a, row_block *rbk, int64_t r0, int64_t rb)
{
    rbk->r0 = r0;
    rbk->rb = rb;
    rbk->maxend = 0;
    for (int64_t ri = 0; ri < rb; ri++) {
        rbk->ends[ri] = dsv4_idx_row_end(a, r0 + ri);
        rbk->maxend = rbk->ends[ri] > rbk->maxend ? rbk->ends[ri] : rbk->maxend;
    }
}

/* One worker's buffers: the row block, the GEMM tiles, and one tile's keys
 * (decoded there when the request's keys are not decoded as a whole). */
typedef struct logits_buf {
    row_block rbk;
    float *C0, *C1;
    double *acc;
    uint8_t *kv, *ks;
    opstat *kst;
    float *kd;
#if DSV4_HAVE_AVX2_PATHS
    int vnni;               /* the ideal on integer dots (indexer_logits_vnni.h) */
    dsv4_idx_vnni_q vq;     /* the row block's q, packed */
    dsv4_idx_vnni_keys vk;  /* one tile's keys, packed */
#endif
} logits_buf;

static int buf_vnni(const logits_buf *w)
{
#if DSV4_HAVE_AVX2_PATHS
    return w->vnni;
#else
    (void)w;
    return 0;
#endif
}

#if DSV4_HAVE_AVX2_PATHS
/* Keys [j0, j0 + nc) of request b packed for the integer dots, 16 at a time:
 * from the per-request decode k, or read in place when the 16 lie in one
 * page of the natural layout, else read entry by entry. */
static void vnni_pack_tile(const dsv4_idx_logits_args *a, logits_buf *w, const req_keys *k, int64_t b, int64_t j0,
                           int64_t nc)
{
    const int D = a->D;
    const int64_t P = a->L->page_entries, pb = dsv4_idx_page_bytes(a->L);
    const int32_t *pages = a->block_table + b * a->max_blocks;
    for (int64_t g = 0; g * 16 < nc; g++) {
        const int64_t first = j0 + g * 16;
        const int n = nc - g * 16 < 16 ? (int)(nc - g * 16) : 16;
        const uint8_t *v = w->kv, *s = w->ks;
        if (k) {
            v = k->v + first * (D / 2), s = k->s + first * (D / 32);
        } else if (!a->L->shuffled && first / P == (first + n - 1) / P) {
            const uint8_t *page = a->cache + (int64_t)pages[first / P] * pb;
#if defined(__GNUC__)
            /* the block table scatters pages: fetch the next while this one is packed */
            if ((g == 0 || first % P < 16) && (first / P + 1) * P < j0 + nc)
                for (int64_t off = 0; off < pb; off += 64)
                    __builtin_prefetch(a->cache + (int64_t)pages[first / P + 1] * pb + off);
#endif
            v = page + first % P * (D / 2), s = page + P * (D / 2) + first % P * (D / 32);
        } else {
            for (int i = 0; i < n; i++)
                dsv4_idx_read_entry(a->L, a->cache + (int64_t)pages[(first + i) / P] * pb, (first + i) % P,
                                    w->kv + i * (D / 2), w->ks + i * (D / 32));
        }
        dsv4_idx_vnni_pack_group(v, s, n, &w->vk, g);
    }
}
#endif

/* The ideal of a tile on integer dots: every row's keys below its end. */
static void vnni_tile(const dsv4_idx_logits_args *a, logits_buf *w, const req_keys *k, int64_t b, int64_t j0,
                      int64_t nc, double *logits)
{
#if DSV4_HAVE_AVX2_PATHS
    const row_block *rbk = &w->rbk;
    vnni_pack_tile(a, w, k, b, j0, nc);
    for (int64_t ri = 0; ri < rbk->rb; ri++) {
        const int64_t r = rbk->r0 + ri;
        int64_t n = rbk->ends[ri] - j0;
        n = n < nc ? n : nc;
        if (n > 0)
            dsv4_idx_vnni_row(&w->vq, ri * a->H, a->H, a->weights + r * a->H, &w->vk, n, logits + r * a->width + j0);
    }
#else
    (void)a, (void)w, (void)k, (void)b, (void)j0, (void)nc, (void)logits;
#endif
}

/* The q side of a row block, and its packed form for the integer dots. */
static void prepare_rows(const dsv4_idx_logits_args *a, logits_buf *w, int want_bound)
{
    setup_rows(a, &w->rbk, want_bound);
#if DSV4_HAVE_AVX2_PATHS
    if (w->vnni)
        dsv4_idx_vnni_pack_q(w->rbk.qv, w->rbk.qs, w->rbk.rb * a->H, &w->vq);
#endif
}

/* Key tiles [tile0, tile1) of a set-up row block of request b: the keys
 * from k (decoded per request), or decoded here per tile when k is NULL.
 * row_exact is per tile (a fast path only: it holds just when every pair
 * of the row-head with the tile's keys is exact, which gives the same sums). */
static void run_tiles(const dsv4_idx_logits_args *a, dsv4_idx_mode mode, const req_keys *k, int64_t b,
                      logits_buf *w, double *logits, double *bound, int64_t tile0, int64_t tile1)
{
    const int H = a->H, D = a->D;
    row_block *rbk = &w->rbk;
    const int64_t M = rbk->rb * H;
    float *C0 = w->C0, *C1 = w->C1;
    for (int64_t tile = tile0; tile < tile1 && tile * KEYS_PER_TILE < rbk->maxend; tile++) {
        const int64_t j0 = tile * KEYS_PER_TILE;
        const int64_t nc = rbk->maxend - j0 < KEYS_PER_TILE ? rbk->maxend - j0 : KEYS_PER_TILE;
        const uint8_t *kv, *ks;
        const opstat *kst;
        const float *kd;
        if (buf_vnni(w)) {
            vnni_tile(a, w, k, b, j0, nc, logits);
            continue;
        }
        if (k) {
            kv = k->v + j0 * (D / 2), ks = k->s + j0 * (D / 32), kst = k->st + j0, kd = k->kd + j0 * D;
        } else {
            decode_keys(a, b, j0, j0 + nc, w->kv, w->ks, w->kst, w->kd);
            kv = w->kv, ks = w->ks, kst = w->kst, kd = w->kd;
        }
        opstat all = {1000, -1000, 1, 0}; /* the tile's keys: emin/emax of non-zero keys, wild if any */
        for (int64_t j = 0; j < nc; j++) {
            all.wild |= kst[j].wild;
            if (!kst[j].zero && !kst[j].wild) {
                all.zero = 0;
                all.emin = kst[j].emin < all.emin ? kst[j].emin : all.emin;
                all.emax = kst[j].emax > all.emax ? kst[j].emax : all.emax;
            }
        }
        for (int64_t rh = 0; rh < M; rh++) {
            const opstat o = rbk->qst[rh];
            rbk->row_exact[rh] = !o.wild && !all.wild && (o.zero || all.zero || pair_exact(o, all));
        }
        tile_ctx t = {a, kv, ks, kst, rbk->qv, rbk->qs, rbk->qst, rbk->row_exact, rbk->r0, rbk->rb, j0, nc,
                      rbk->ends, C0, C1, w->acc};
        if (mode == DSV4_IDX_IDEAL) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nc, D, 1.0f, rbk->qd, D, kd, D,
                        0.0f, C0, (int)nc);
            tile_ideal(&t, logits, 0, 1, w->acc);
        } else {
            /* The two K = 64 halves (docs/semantics/indexer.md Q6.2 step 1: two chained MFMAs). */
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

static void buf_free(logits_buf *w)
{
#if DSV4_HAVE_AVX2_PATHS
    dsv4_idx_vnni_q_free(&w->vq);
    dsv4_idx_vnni_keys_free(&w->vk);
#endif
    free(w->C0), free(w->C1), free(w->acc);
    free(w->rbk.qv), free(w->rbk.qs), free(w->rbk.qd), free(w->rbk.qa), free(w->rbk.ka), free(w->rbk.qst);
    free(w->rbk.row_exact);
    free(w->kv), free(w->ks), free(w->kst), free(w->kd);
}

/* vnni: the ideal runs on integer dots (no GEMM tiles, no bound). */
static int buf_alloc(logits_buf *w, int64_t M, int D, int vnni)
{
    memset(w, 0, sizeof *w);
#if DSV4_HAVE_AVX2_PATHS
    w->vnni = vnni;
    if (vnni && (!dsv4_idx_vnni_q_alloc(&w->vq, M) || !dsv4_idx_vnni_keys_alloc(&w->vk, KEYS_PER_TILE)))
        return 0;
#else
    (void)vnni;
#endif
    w->C0 = malloc((size_t)M * KEYS_PER_TILE * sizeof(float));
    w->C1 = malloc((size_t)M * KEYS_PER_TILE * sizeof(float));
    w->acc = malloc(KEYS_PER_TILE * sizeof(double));
    w->rbk.qv = malloc((size_t)M * (D / 2));
    w->rbk.qs = malloc((size_t)M * (D / 32));
    w->rbk.qd = malloc((size_t)M * D * sizeof(float));
    w->rbk.qa = malloc((size_t)M * D * sizeof(float));
    w->rbk.ka = malloc((size_t)KEYS_PER_TILE * D * sizeof(float));
    w->rbk.qst = malloc((size_t)M * sizeof *w->rbk.qst);
    w->rbk.row_exact = malloc((size_t)M * sizeof *w->rbk.row_exact);
    w->kv = malloc((size_t)KEYS_PER_TILE * (D / 2));
    w->ks = malloc((size_t)KEYS_PER_TILE * (D / 32));
    w->kst = malloc((size_t)KEYS_PER_TILE * sizeof *w->kst);
    w->kd = malloc((size_t)KEYS_PER_TILE * D * sizeof *w->kd);
    return w->C0 && w->C1 && w->acc && w->rbk.qv && w->rbk.qs && w->rbk.qd && w->rbk.qa && w->rbk.ka &&
           w->rbk.qst && w->rbk.row_exact && w->kv && w->ks && w->kst && w->kd;
}

typedef struct logits_job {
    const dsv4_idx_logits_args *a;
    dsv4_idx_mode mode;
    const req_keys *k;
    int64_t b, q0, q1, rpt, tiles_per_item, items_per_block;
    const int64_t *item_start; /* one-block requests: request b's items start at item_start[b] */
    logits_buf *bufs;
    double *logits, *bound;
} logits_job;

/* Item i: row block i / items_per_block, its key tiles (i % items_per_block)
 * * tiles_per_item onward.  Every (row, key) is written by one item. */
static int logits_range(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)st;
    const logits_job *j = ctx;
    logits_buf *w = &j->bufs[worker];
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r0 = j->q0 + i / j->items_per_block * j->rpt;
        const int64_t tile0 = i % j->items_per_block * j->tiles_per_item;
        set_rows(j->a, &w->rbk, r0, j->q1 - r0 < j->rpt ? j->q1 - r0 : j->rpt);
        if (tile0 * KEYS_PER_TILE >= w->rbk.maxend)
            continue;
        prepare_rows(j->a, w, j->bound != NULL);
        run_tiles(j->a, j->mode, j->k, j->b, w, j->logits, j->bound, tile0, tile0 + j->tiles_per_item);
    }
    return DSV4_OK;
}

/* Requests whose rows are one row block (decode): item i is request b's
 * tiles from (i - item_start[b]) * tiles_per_item on, their keys decoded
 * by the item itself (each key is read by that item alone), so the keys
 * stay in the cache and every request's tiles spread over the workers. */
static int block_items_range(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)
{
    (void)st;
    const logits_job *j = ctx;
    const dsv4_idx_logits_args *a = j->a;
    logits_buf *w = &j->bufs[worker];
    int64_t b = 0;
    for (int64_t i = i0; i < i1; i++) {
        while (j->item_start[b + 1] <= i)
            b++;
        const int64_t tile0 = (i - j->item_start[b]) * j->tiles_per_item;
        if (i == i0 || i == j->item_start[b]) { /* a new request: its rows */
            set_rows(a, &w->rbk, a->query_start_loc[b], a->query_start_loc[b + 1] - a->query_start_loc[b]);
            prepare_rows(a, w, j->bound != NULL);
        }
        run_tiles(a, j->mode, NULL, b, w, j->logits, j->bound, tile0, tile0 + j->tiles_per_item);
    }
    return DSV4_OK;
}

typedef struct init_job {
    int64_t width;
    double *logits, *bound;
} init_job;

static int init_range(void *ctx, int64_t r0, int64_t r1, int worker, dsv4_status *st)
{
    (void)worker, (void)st;
    const init_job *j = ctx;
    for (int64_t i = r0 * j->width; i < r1 * j->width; i++) {
        j->logits[i] = -INFINITY; /* past the row end: unspecified (the -inf of clean_logits) */
        if (j->bound)
            j->bound[i] = 0;
    }
    return DSV4_OK;
}

int dsv4_ref_mqa_logits(const dsv4_idx_logits_args *a, dsv4_idx_mode mode, double *logits, double *bound,
                        dsv4_status *st)
{
    const int H = a->H, D = a->D;
    if (D != 128 || H <= 0 || H > 128 || (mode == DSV4_IDX_FAITHFUL && H != 32 && H != 64))
        return dsv4_fail(st, DSV4_EINPUT, "mqa_logits: head_dim %d (128), heads %d (<= 128; 32 or 64 in the "
                         "faithful mode: the 32x32 MFMA fold of docs/semantics/indexer.md Q6.2)", D, H);
    int rc = dsv4_idx_logits_check(a, st);
    if (rc)
        return rc;
    pthread_once(&half_pairs_once, half_pairs_init);
    init_job ij = {a->width, logits, bound};
    if ((rc = dsv4_parallel_for(a->rows, 64, 0, init_range, &ij, st)))
        return rc;
    const int64_t rpt = ROWS_PER_TILE / H > 0 ? ROWS_PER_TILE / H : 1;
    const int nthreads = dsv4_threads();
    logits_buf *bufs = calloc((size_t)nthreads, sizeof *bufs);
    int made = 0;
    if (!bufs)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory (logits tiles)");
    /* the ideal without a bound runs on integer dots where the CPU has them
     * (the same bits, indexer_logits_vnni.h) */
    const int vnni = mode == DSV4_IDX_IDEAL && !bound && dsv4_idx_vnni_ready();
    for (; !rc && made < nthreads; made++)
        if (!buf_alloc(&bufs[made], rpt * H, D, vnni)) {
            buf_free(&bufs[made]);
            rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory (logits tiles)");
        }
    /* Per request: its key count (the largest row end) and tiles; requests
     * whose rows are one row block go together as one parallel loop over
     * their tiles (item_start), the others one by one. */
    int64_t *nkeys = malloc((size_t)(a->B + 1) * sizeof *nkeys), *item_start = malloc((size_t)(a->B + 1) * sizeof *item_start);
    if (!rc && (!nkeys || !item_start))
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory (logits tiles)");
    int64_t block_tiles = 0;
    for (int64_t b = 0; b < a->B && !rc; b++) {
        const int64_t q0 = a->query_start_loc[b], q1 = a->query_start_loc[b + 1];
        nkeys[b] = 0;
        for (int64_t r = q0; r < q1; r++) {
            int64_t e = dsv4_idx_row_end(a, r);
            nkeys[b] = e > nkeys[b] ? e : nkeys[b];
        }
        if (q1 - q0 <= rpt)
            block_tiles += (nkeys[b] + KEYS_PER_TILE - 1) / KEYS_PER_TILE;
    }
    if (!rc && block_tiles > 0) {
        const int64_t tiles_per_item = block_tiles >= 8 * nthreads ? 2 : 1; /* 2: half the q set-ups */
        item_start[0] = 0;
        for (int64_t b = 0; b < a->B; b++) {
            const int64_t one_block = a->query_start_loc[b + 1] - a->query_start_loc[b] <= rpt;
            const int64_t ntiles = (nkeys[b] + KEYS_PER_TILE - 1) / KEYS_PER_TILE;
            item_start[b + 1] = item_start[b] + (one_block ? (ntiles + tiles_per_item - 1) / tiles_per_item : 0);
        }
        logits_job j = {a, mode, NULL, 0, 0, 0, rpt, tiles_per_item, 1, item_start, bufs, logits, bound};
        rc = dsv4_parallel_for(item_start[a->B], 1, DSV4_PAR_BLAS, block_items_range, &j, st);
    }
    for (int64_t b = 0; b < a->B && !rc; b++) {
        const int64_t q0 = a->query_start_loc[b], q1 = a->query_start_loc[b + 1], nk = nkeys[b];
        if (nk == 0 || q1 - q0 <= rpt)
            continue;
        req_keys k;
        if ((rc = load_keys(a, b, nk, !vnni, &k, st))) {
            req_keys_free(&k);
            break;
        }
        /* Work items: whole row blocks when there are enough of them, else
         * a row block's key tiles split into groups. */
        const int64_t nrb = (q1 - q0 + rpt - 1) / rpt, ntiles = (nk + KEYS_PER_TILE - 1) / KEYS_PER_TILE;
        int64_t per_block = 1;
        if (nrb < 2 * nthreads)
            per_block = ntiles < 2 * nthreads ? ntiles : 2 * nthreads;
        const int64_t tiles_per_item = (ntiles + per_block - 1) / per_block;
        per_block = (ntiles + tiles_per_item - 1) / tiles_per_item;
        logits_job j = {a, mode, &k, b, q0, q1, rpt, tiles_per_item, per_block, NULL, bufs, logits, bound};
        rc = dsv4_parallel_for(nrb * per_block, 1, DSV4_PAR_BLAS, logits_range, &j, st);
        req_keys_free(&k);
    }
    free(nkeys), free(item_start);
    for (int w = 0; w < made; w++)
        buf_free(&bufs[w]);
    free(bufs);
    return rc;
}
