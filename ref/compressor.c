/* compressor.c - fused q-norm/RoPE/SWA insert and the KV compressor; see
 * compressor.h.  Semantics: docs/semantics/gemm.md A3, A11. */
#define _POSIX_C_SOURCE 200809L
#include "compressor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_avx2.h"
#include "codec_inline.h"
#include "numerics.h"
#include "parallel.h"
#include "rope.h"

#define D DSV4_HEAD_DIM
#define RD DSV4_ROPE_DIM
#define NOPE DSV4_NOPE_DIM

/* ------------------------------------------------------------------ */
/* _fused_qnorm_rope_kv_insert (docs/semantics/gemm.md A3 [S15, S16])  */

static int rope_row_of(const dsv4_qnorm_insert_args *a, int64_t t, const float **row, dsv4_status *st)
{
    return dsv4_rope_row_of_token(a->cos_sin_cache, a->num_pos, RD, a->positions, t, row, st);
}

typedef struct qnorm_job {
    const dsv4_qnorm_insert_args *a;
    double *q_out, *mag;
    uint16_t *q_bf16; /* instead of q_out: bf16(fp32(y)), through scratch */
    double *scratch;  /* [workers, H, 512]: q_bf16's rows, or q_out's on the AVX-512 path */
} qnorm_job;

/* out[i] = dsv4_bf16_from_f32_inline((float)y[i]), branch-free so that
 * it vectorizes (the NaN case selected, not branched to). */
DSV4_VECTOR_CLONES DSV4_NOINLINE static void store_bf16(const double *restrict y, int64_t n, uint16_t *restrict out)
{
    for (int64_t i = 0; i < n; i++) {
        const uint32_t b = dsv4_bits_f32((float)y[i]);
        const int32_t nan = -(int32_t)((b & 0x7FFFFFFFu) > 0x7F800000u);
        out[i] = (uint16_t)((uint32_t)dsv4_sel_i32(nan, (int32_t)((b >> 16) | 0x0040u),
                                                   (int32_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16)));
    }
}

/* Head rows: y = x / sqrt(mean(x^2) + eps) (no weight, docs/semantics/gemm.md A3, Q steps 2-3), the
 * magnitudes, then forward GPT-J at positions[t] (Q 4).  The sums of
 * squares of four heads run side by side, each in its serial order. */
DSV4_VECTOR_CLONES static int qnorm_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    const qnorm_job *j = ctx;
    const dsv4_qnorm_insert_args *a = j->a;
    for (int64_t t = t0; t < t1; t++) {
        const float *row;
        int rc = rope_row_of(a, t, &row, st);
        if (rc)
            return rc;
        /* token t's rows: in q_out, or in this worker's scratch */
        double *yt = j->q_bf16 ? j->scratch + (size_t)worker * (size_t)(a->H * D) : j->q_out + t * a->H * D;
        for (int64_t h0 = 0; h0 < a->H; h0 += 4) {
            const int nh = a->H - h0 < 4 ? (int)(a->H - h0) : 4;
            double ss[4] = {0, 0, 0, 0};
            for (int k = 0; k < nh; k++) {
                const uint16_t *x = a->q + (t * a->H + h0 + k) * D;
                double *y = yt + (h0 + k) * D;
                int finite = 1;
                for (int d = 0; d < D; d++) {
                    y[d] = dsv4_bf16_to_f32_inline(x[d]);
                    finite &= (x[d] & 0x7F80u) != 0x7F80u; /* bf16 exponent all ones: Inf or NaN */
                }
                for (int d = 0; !finite && d < D; d++)
                    if (!isfinite(y[d]))
                        return dsv4_fail(st, DSV4_EINPUT, "q[%" PRId64 ", %" PRId64 ", %d] is not finite", t, h0 + k, d);
            }
            const double *y0 = yt + h0 * D;
            if (nh == 4)
                for (int d = 0; d < D; d++) {
                    ss[0] += y0[d] * y0[d];
                    ss[1] += y0[D + d] * y0[D + d];
                    ss[2] += y0[2 * D + d] * y0[2 * D + d];
                    ss[3] += y0[3 * D + d] * y0[3 * D + d];
                }
            else
                for (int k = 0; k < nh; k++)
                    for (int d = 0; d < D; d++)
                        ss[k] += y0[k * D + d] * y0[k * D + d];
            for (int k = 0; k < nh; k++) {
                double *y = yt + (h0 + k) * D;
                const double r = 1.0 / sqrt(ss[k] / D + a->eps);
                for (int d = 0; d < D; d++)
                    y[d] *= r;
                if (j->mag) {
                    double *m = j->mag + (t * a->H + h0 + k) * D;
                    for (int d = 0; d < NOPE; d++)
                        m[d] = fabs(y[d]);
                    for (int i = 0; i < RD / 2; i++) {
                        const double c = row[i], s = row[RD / 2 + i], e = y[NOPE + 2 * i], o = y[NOPE + 2 * i + 1];
                        m[NOPE + 2 * i] = fabs(e * c) + fabs(o * s);
                        m[NOPE + 2 * i + 1] = fabs(e * s) + fabs(o * c);
                    }
                }
                dsv4_rope_gptj_f64(y + NOPE, row, RD, DSV4_ROPE_FORWARD);
            }
        }
        if (j->q_bf16) /* as dsv4_tensor_set stores a bf16 element: via fp32 */
            store_bf16(yt, a->H * D, j->q_bf16 + t * a->H * D);
    }
    return DSV4_OK;
}

#if DSV4_HAVE_AVX2_PATHS
#define QN512 __attribute__((target("avx512f,avx2,fma")))
#define QN512_INLINE static inline __attribute__((target("avx512f,avx2,fma"), always_inline))

/* store_bf16 of 16 finite fp32 lanes (the non-NaN branch: RNE, an
 * overflow carries into Inf) to 16 bf16. */
QN512_INLINE void store_bf16_16(__m512 f, uint16_t *out)
{
    _mm256_storeu_si256((__m256i *)(void *)out, _mm512_cvtepi32_epi16(dsv4_avx512_bf16_rne(_mm512_castps_si512(f))));
}

/* 16 bf16 widened to fp32. */
QN512_INLINE __m512 load_bf16_16(const uint16_t *h)
{
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)h)), 16));
}

/* Whether a bf16 of x[0..n) (n a multiple of 16) has its exponent all ones. */
static inline __attribute__((target("avx2"))) int any_nonfinite_bf16(const uint16_t *x, int64_t n)
{
    const __m256i expo = _mm256_set1_epi16(0x7F80);
    __m256i bad = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += 16)
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), expo), expo));
    return !_mm256_testz_si256(bad, bad);
}

/* Sixteen lanes of y as two double vectors, into a head row of doubles
 * or, through fp32, as bf16. */
QN512_INLINE void emit_16(__m512d y0, __m512d y1, double *out, uint16_t *out16)
{
    if (out16) {
        const __m256 lo = _mm512_cvtpd_ps(y0), hi = _mm512_cvtpd_ps(y1);
        store_bf16_16(_mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                                                          _mm256_castps_pd(hi), 1)),
                      out16);
    } else {
        _mm512_storeu_pd(out, y0), _mm512_storeu_pd(out + 8, y1);
    }
}

/* n doubles from a cached row to dst with streaming stores from dst's first
 * 64-byte line on (q_out is written once and not read again here, so its
 * lines need not be read in first); the unaligned ends stored plainly. */
QN512_INLINE void stream_row(double *dst, const double *src, int n)
{
    int i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 63); i++)
        dst[i] = src[i];
    for (; i + 8 <= n; i += 8)
        _mm512_stream_pd(dst + i, _mm512_loadu_pd(src + i));
    for (; i < n; i++)
        dst[i] = src[i];
}

QN512_INLINE __m512d half_pd(__m512 f, int hi)
{
    return _mm512_cvtps_pd(hi ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))
                              : _mm512_castps512_ps256(f));
}

/* qnorm_range without magnitudes where AVX-512F runs, with the same double
 * operations: each head's sum of squares in its serial order, sixteen
 * heads side by side (lane k = head k, the bf16 pairs of lane d gathered),
 * then y = x r and the RoPE products and sums eight lanes at a time,
 * written to q_out (through the worker's scratch, a token at a time,
 * streamed) or (via fp32) to q_bf16 with no double copy of the rows.
 * A token with a non-finite q lane, a non-finite cos/sin entry or a
 * non-finite r takes qnorm_range (its message, its NaN rules). */
QN512 static int qnorm_range_512(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    const qnorm_job *j = ctx;
    const dsv4_qnorm_insert_args *a = j->a;
    const int64_t H = a->H;
    double r[16], cd[RD], sd[RD];
    double *tok = j->q_out ? j->scratch + (size_t)worker * (size_t)(H * D) : NULL; /* q_out's token, then streamed */
    for (int64_t t = t0; t < t1; t++) {
        const float *row;
        int rc = rope_row_of(a, t, &row, st);
        if (rc)
            return rc;
        const uint16_t *xt = a->q + t * H * D;
        int scalar = any_nonfinite_bf16(xt, H * D);
        for (int i = 0; i < RD / 2 && !scalar; i++) { /* c, s per pair, each twice */
            scalar |= !isfinite(row[i]) || !isfinite(row[RD / 2 + i]);
            cd[2 * i] = cd[2 * i + 1] = row[i];
            sd[2 * i] = sd[2 * i + 1] = row[RD / 2 + i];
        }
        for (int64_t h0 = 0; h0 < H && !scalar; h0 += 16) {
            const int nh = H - h0 < 16 ? (int)(H - h0) : 16;
            const __mmask16 live = (__mmask16)((1u << nh) - 1u);
            const int *words = (const int *)(const void *)(xt + h0 * D); /* bf16 pairs (d, d + 1) */
            __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(D / 2));
            __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
            for (int d = 0; d < D; d += 2) {
                const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, words, 4);
                idx = _mm512_add_epi32(idx, _mm512_set1_epi32(1));
                const __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(g, 16));
                const __m512 od = _mm512_castsi512_ps(_mm512_and_si512(g, _mm512_set1_epi32((int)0xFFFF0000u)));
                __m512d y = half_pd(ev, 0);
                s0 = _mm512_add_pd(s0, _mm512_mul_pd(y, y));
                y = half_pd(ev, 1);
                s1 = _mm512_add_pd(s1, _mm512_mul_pd(y, y));
                y = half_pd(od, 0);
                s0 = _mm512_add_pd(s0, _mm512_mul_pd(y, y));
                y = half_pd(od, 1);
                s1 = _mm512_add_pd(s1, _mm512_mul_pd(y, y));
            }
            double ss[16];
            _mm512_storeu_pd(ss, s0), _mm512_storeu_pd(ss + 8, s1);
            for (int k = 0; k < nh && !scalar; k++) {
                r[k] = 1.0 / sqrt(ss[k] / D + a->eps);
                scalar |= !isfinite(r[k]);
            }
            for (int k = 0; k < nh && !scalar; k++) {
                const int64_t th = t * H + h0 + k;
                const uint16_t *x = xt + (h0 + k) * D;
                double *out = tok ? tok + (h0 + k) * D : NULL;
                uint16_t *out16 = j->q_bf16 ? j->q_bf16 + th * D : NULL;
                const __m512d rk = _mm512_set1_pd(r[k]);
                for (int d = 0; d < NOPE; d += 16) { /* y = x r */
                    const __m512 xf = load_bf16_16(x + d);
                    emit_16(_mm512_mul_pd(half_pd(xf, 0), rk), _mm512_mul_pd(half_pd(xf, 1), rk), out ? out + d : NULL,
                            out16 ? out16 + d : NULL);
                }
                for (int d = NOPE; d < D; d += 16) { /* dsv4_rope_gptj_f64 forward: e c - o s, e s + o c */
                    const __m512 xf = load_bf16_16(x + d);
                    __m512d f[2];
                    for (int hf = 0; hf < 2; hf++) {
                        const __m512d y = _mm512_mul_pd(half_pd(xf, hf), rk);
                        const __m512d sw = _mm512_permute_pd(y, 0x55); /* (o, e) pairs */
                        const __m512d p = _mm512_mul_pd(y, _mm512_loadu_pd(cd + d - NOPE + 8 * hf));
                        const __m512d q = _mm512_mul_pd(sw, _mm512_loadu_pd(sd + d - NOPE + 8 * hf));
                        f[hf] = _mm512_mask_add_pd(_mm512_sub_pd(p, q), 0xAA, q, p);
                    }
                    emit_16(f[0], f[1], out ? out + d : NULL, out16 ? out16 + d : NULL);
                }
            }
        }
        if (!scalar && tok)
            stream_row(j->q_out + t * H * D, tok, (int)(H * D));
        if (scalar && (rc = qnorm_range(ctx, t, t + 1, worker, st)))
            return rc;
    }
    _mm_sfence(); /* the streamed stores before the caller reads them */
    return DSV4_OK;
}

/* The rows' function: qnorm_range_512 where AVX-512F runs and no
 * magnitudes are asked for. */
static dsv4_par_fn qnorm_fn(const qnorm_job *j)
{
    return dsv4_simd_level() >= DSV4_SIMD_AVX512 && !j->mag ? qnorm_range_512 : qnorm_range;
}
#endif

int dsv4_ref_qnorm_rope(const dsv4_qnorm_insert_args *a, double *q_out, double *mag, dsv4_status *st)
{
    qnorm_job j = {a, q_out, mag, NULL, NULL};
    dsv4_par_fn fn = qnorm_range;
#if DSV4_HAVE_AVX2_PATHS
    fn = qnorm_fn(&j);
#endif
    if (fn == qnorm_range)
        return dsv4_parallel_for(a->T, 8, 0, fn, &j, st);
    /* a token's rows per worker, streamed from there */
    j.scratch = malloc((size_t)dsv4_parallel_workers(a->T, 8) * (size_t)(a->H * D + 1) * sizeof *j.scratch);
    if (!j.scratch)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = dsv4_parallel_for(a->T, 8, 0, fn, &j, st);
    free(j.scratch);
    return rc;
}

int dsv4_ref_qnorm_rope_bf16(const dsv4_qnorm_insert_args *a, uint16_t *q_out, dsv4_status *st)
{
    const int grain = 8, nw = dsv4_parallel_workers(a->T, grain);
    double *scratch = malloc((size_t)nw * (size_t)(a->H * D + 1) * sizeof *scratch);
    if (!scratch)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    qnorm_job j = {a, NULL, NULL, q_out, scratch};
    dsv4_par_fn fn = qnorm_range;
#if DSV4_HAVE_AVX2_PATHS
    fn = qnorm_fn(&j);
#endif
    int rc = dsv4_parallel_for(a->T, grain, 0, fn, &j, st);
    free(scratch);
    return rc;
}

typedef struct kv_rope_job {
    const dsv4_qnorm_insert_args *a;
    uint16_t *k; /* [Ts, 512] the rows to encode */
} kv_rope_job;

/* Tokens [t0, t1) of the KV branch, each one whole: KV 1-3 into k. */
static int kv_rope_range(void *ctx, int64_t t0, int64_t t1, int worker, dsv4_status *st)
{
    (void)worker;
    const kv_rope_job *j = ctx;
    const dsv4_qnorm_insert_args *a = j->a;
    for (int64_t t = t0; t < t1; t++) {
        uint16_t *k = j->k + t * D;
        memcpy(k, a->kv + t * D, D * sizeof *k);
        if (a->slot_mapping[t] < 0) /* skipped: its row is never encoded (docs/semantics/gemm.md A3, KV branch) */
            continue;
        const float *row;
        int rc = rope_row_of(a, t, &row, st);
        if (rc)
            return rc;
        float y[RD];
        for (int d = 0; d < RD; d++) /* y = fp32(kv[t]); no norm here (KV 1); the NoPE lanes stay as they are */
            y[d] = dsv4_bf16_to_f32_inline(k[NOPE + d]);
        dsv4_rope_gptj_f32(y, row, RD, DSV4_ROPE_FORWARD); /* KV 2, fp32 */
        for (int d = 0; d < RD; d++)
            k[NOPE + d] = dsv4_bf16_from_f32_inline(y[d]); /* KV 3: all 512 to bf16 (NoPE unchanged) */
    }
    return DSV4_OK;
}

int dsv4_ref_kv_rope_insert(const dsv4_qnorm_insert_args *a, uint8_t *cache, const dsv4_kv_layout *L,
                            const dsv4_kv_encode_opts *o, dsv4_status *st)
{
    uint16_t *k = malloc((size_t)(a->Ts * D + 1) * sizeof *k);
    if (!k)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    kv_rope_job j = {a, k};
    int rc = dsv4_parallel_for(a->Ts, 64, 0, kv_rope_range, &j, st);
    /* KV 4: the 584-byte encode (docs/semantics/kvcache.md A2.2) at each slot, -1 skipped (kvcache.h) */
    if (!rc)
        rc = dsv4_ref_quantize_and_insert_k_cache(k, a->Ts, a->slot_mapping, NULL, cache, L, o, st);
    free(k);
    return rc;
}

/* ------------------------------------------------------------------ */
/* compressor (docs/semantics/gemm.md A11 [S17-S20])                   */

int dsv4_compressor_coff(int64_t ratio) { return ratio == 4 ? 2 : 1; }              /* overlap for C4 (A2.5) */
int64_t dsv4_compressor_state_block(int64_t ratio) { return ratio == 4 ? 4 : 8; } /* state page (A2.5 [S17]) */

static int64_t req_of(const dsv4_compressor_args *a, int64_t t)
{
    for (int64_t r = 0; r < a->R; r++)
        if (t >= a->query_start_loc[r] && t < a->query_start_loc[r + 1])
            return r;
    return -1;
}

static int finite_all(const float *x, int64_t n, const char *name, dsv4_status *st)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return dsv4_fail(st, DSV4_EINPUT, "%s flat element %" PRId64 " is not finite", name, i);
    return DSV4_OK;
}

/* Checks the state page of position p of request r; sets *row_index. */
static int state_row(const dsv4_compressor_args *a, int64_t r, int64_t p, int64_t *row_index, dsv4_status *st)
{
    const int64_t Bs = dsv4_compressor_state_block(a->ratio);
    if (p / Bs >= a->max_state_blocks)
        return dsv4_fail(st, DSV4_EINPUT, "state_block_table row %" PRId64 " has %" PRId64 " pages; position %" PRId64
                         " needs page %" PRId64, r, a->max_state_blocks, p, p / Bs);
    const int64_t page = a->state_block_table[r * a->max_state_blocks + p / Bs];
    if (page < 0 || page >= a->num_state_blocks)
        return dsv4_fail(st, DSV4_EINPUT, "state_block_table[%" PRId64 ", %" PRId64 "] = %" PRId64
                         " outside [0, %" PRId64 ")", r, p / Bs, page, a->num_state_blocks);
    *row_index = page * Bs + p % Bs; /* page = bt[r, p // Bs], row = p % Bs (docs/semantics/gemm.md A11 step 3) */
    return DSV4_OK;
}

/* Compressed slot of an emitting token (docs/semantics/indices.md A5.4 [S20]): cidx = pos // c,
 * slot = block_table[r, cidx // B] * B + cidx % B, B = 256 / c. */
static int comp_slot(const dsv4_compressor_args *a, int64_t r, int64_t pos, int64_t *page, int64_t *row,
                     dsv4_status *st)
{
    const int64_t B = 256 / a->ratio, cidx = pos / a->ratio;
    if (cidx / B >= a->max_blocks)
        return dsv4_fail(st, DSV4_EINPUT, "block_table row %" PRId64 " too short for compressed index %" PRId64, r, cidx);
    *page = a->block_table[r * a->max_blocks + cidx / B];
    *row = cidx % B;
    if (*page < 0 || *page >= a->num_blocks)
        return dsv4_fail(st, DSV4_EINPUT, "block_table[%" PRId64 ", %" PRId64 "] = %" PRId64 " outside [0, %" PRId64 ")",
                         r, cidx / B, *page, a->num_blocks);
    return DSV4_OK;
}

static int emits(const dsv4_compressor_args *a, int64_t t)
{
    return a->state_slots[t] >= 0 && (a->positions[t] + 1) % a->ratio == 0; /* docs/semantics/gemm.md A11 step 3 */
}

int dsv4_compressor_check(const dsv4_compressor_args *a, dsv4_status *st)
{
    if (a->ratio != 4 && a->ratio != 128)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": 4 (C4) or 128 (C128)", a->ratio);
    const int coff = dsv4_compressor_coff(a->ratio);
    const int64_t Bs = dsv4_compressor_state_block(a->ratio), W2 = 2 * coff * DSV4_COMP_DIM;
    if (a->R < 0 || a->query_start_loc[0] != 0 || a->query_start_loc[a->R] != a->T)
        return dsv4_fail(st, DSV4_EINPUT, "query_start_loc must run from 0 to T = %" PRId64, a->T);
    for (int64_t r = 0; r < a->R; r++)
        if (a->query_start_loc[r + 1] < a->query_start_loc[r])
            return dsv4_fail(st, DSV4_EINPUT, "query_start_loc[%" PRId64 "] decreases", r + 1);
    int rc;
    if ((rc = finite_all(a->kv_score, a->T * W2, "kv_score", st)) ||
        (rc = finite_all(a->ape, a->ratio * coff * DSV4_COMP_DIM, "ape", st)) ||
        (rc = finite_all(a->norm_weight, DSV4_COMP_DIM, "norm_weight", st)))
        return rc;
    for (int64_t t = 0; t < a->T; t++) {
        const int64_t r = req_of(a, t), pos = a->positions[t], s = a->state_slots[t];
        if (pos < 0)
            return dsv4_fail(st, DSV4_EINPUT, "positions[%" PRId64 "] = %" PRId64 " is negative", t, pos);
        if (s >= a->num_state_blocks * Bs)
            return dsv4_fail(st, DSV4_EINPUT, "state_slot_mapping[%" PRId64 "] = %" PRId64 " outside the state cache",
                             t, s);
        if (!emits(a, t))
            continue;
        int64_t ri, page, row;
        for (int64_t p = pos - coff * a->ratio + 1; p <= pos; p++)
            if (p >= 0 && (rc = state_row(a, r, p, &ri, st)))
                return rc;
        if ((rc = comp_slot(a, r, pos, &page, &row, st)))
            return rc;
        const float *cs;
        char what[64];
        snprintf(what, sizeof what, "(positions[%" PRId64 "] // c) * c", t);
        if ((rc = dsv4_rope_row(a->cos_sin_cache, a->num_pos, RD, pos / a->ratio * a->ratio, what, &cs, st)))
            return rc;
    }
    return DSV4_OK;
}

/* y_d = sum_u softmax_u(score[u, d]) kv[u, d] over the window (docs/semantics/gemm.md A11
 * step 3), in double; masked rows (position < 0) drop out. */
static void window_softmax(const dsv4_compressor_args *a, int64_t r, int64_t pos, double *y)
{
    const int coff = dsv4_compressor_coff(a->ratio);
    const int64_t half = coff * DSV4_COMP_DIM, W2 = 2 * half, nu = coff * a->ratio;
    const float *kv[2 * 128], *sc[2 * 128]; /* nu <= coff * c = 256 */
    int64_t ri;
    for (int64_t u = 0; u < nu; u++) {
        const int64_t p = pos - nu + 1 + u;
        kv[u] = sc[u] = NULL;
        if (p < 0 || state_row(a, r, p, &ri, NULL)) /* masked: score -inf, kv 0 */
            continue;
        const int64_t off = (coff == 2 && u >= a->ratio) ? DSV4_COMP_DIM : 0; /* newer c rows: dims [512, 1024) */
        kv[u] = a->state + ri * W2 + off;
        sc[u] = a->state + ri * W2 + half + off;
    }
    for (int d = 0; d < DSV4_COMP_DIM; d++) {
        double m = -INFINITY, z = 0, s = 0;
        for (int64_t u = 0; u < nu; u++)
            if (sc[u] && sc[u][d] > m)
                m = sc[u][d];
        for (int64_t u = 0; u < nu; u++)
            if (sc[u]) {
                const double w = exp((double)sc[u][d] - m);
                z += w;
                s += w * kv[u][d];
            }
        y[d] = s / z;
    }
}

int dsv4_ref_compressor_step(const dsv4_compressor_args *a, double *latent, dsv4_status *st)
{
    int rc = dsv4_compressor_check(a, st);
    if (rc)
        return rc;
    const int coff = dsv4_compressor_coff(a->ratio);
    const int64_t half = coff * DSV4_COMP_DIM, W2 = 2 * half, B = 256 / a->ratio;
    /* save_partial_states: [kv | score + ape[pos % c]] with one fp32 add (docs/semantics/gemm.md A11 step 2 [S18]) */
    for (int64_t t = 0; t < a->T; t++) {
        if (a->state_slots[t] < 0)
            continue;
        float *row = a->state + a->state_slots[t] * W2;
        const float *ks = a->kv_score + t * W2, *ape = a->ape + (a->positions[t] % a->ratio) * half;
        memcpy(row, ks, (size_t)half * sizeof *row);
        for (int64_t j = 0; j < half; j++)
            row[half + j] = ks[half + j] + ape[j];
    }
    /* compressed cache: OCP, 448 (docs/semantics/kvcache.md A2.3 [S1, S19]) */
    const dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    for (int64_t t = 0; t < a->T && !rc; t++) {
        if (latent)
            for (int d = 0; d < DSV4_COMP_DIM; d++)
                latent[t * DSV4_COMP_DIM + d] = NAN;
        if (!emits(a, t))
            continue;
        const int64_t r = req_of(a, t), pos = a->positions[t];
        double y[DSV4_COMP_DIM], ss = 0;
        window_softmax(a, r, pos, y);
        for (int d = 0; d < DSV4_COMP_DIM; d++)
            ss += y[d] * y[d];
        const double inv = 1.0 / sqrt(ss / DSV4_COMP_DIM + a->eps); /* RMSNorm with weight (step 3) */
        for (int d = 0; d < DSV4_COMP_DIM; d++)
            y[d] = y[d] * inv * a->norm_weight[d];
        if (latent)
            memcpy(latent + t * DSV4_COMP_DIM, y, sizeof y);
        const float *cs;
        dsv4_rope_row(a->cos_sin_cache, a->num_pos, RD, pos / a->ratio * a->ratio, "rope", &cs, NULL);
        dsv4_rope_gptj_f64(y + NOPE, cs, RD, DSV4_ROPE_FORWARD); /* RoPE on the unrounded n at (pos//c)*c */
        float x[DSV4_COMP_DIM];
        for (int d = 0; d < DSV4_COMP_DIM; d++) /* to fp32 as the kernel holds n; encode rounds to bf16 */
            x[d] = (float)y[d];
        int64_t page, row;
        comp_slot(a, r, pos, &page, &row, NULL);
        rc = dsv4_kv_encode_token(a->kv_cache + page * B * DSV4_KV_TOKEN_BYTES, B, row, x, &o, st);
    }
    return rc;
}

int dsv4_compressor_emit_row(const dsv4_compressor_args *a, int64_t t, int64_t *page, int64_t *row)
{
    if (t < 0 || t >= a->T || !emits(a, t))
        return 0;
    const int64_t r = req_of(a, t);
    return r >= 0 && comp_slot(a, r, a->positions[t], page, row, NULL) == DSV4_OK;
}
