/* compressor.c - fused q-norm/RoPE/SWA insert and the KV compressor; see
 * compressor.h.  Semantics: docs/semantics/gemm.md A3, A11. */
#define _POSIX_C_SOURCE 200809L
#include "compressor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    double *scratch;  /* [workers, H, 512] with q_bf16 */
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

int dsv4_ref_qnorm_rope(const dsv4_qnorm_insert_args *a, double *q_out, double *mag, dsv4_status *st)
{
    qnorm_job j = {a, q_out, mag, NULL, NULL};
    return dsv4_parallel_for(a->T, 8, 0, qnorm_range, &j, st);
}

int dsv4_ref_qnorm_rope_bf16(const dsv4_qnorm_insert_args *a, uint16_t *q_out, dsv4_status *st)
{
    const int grain = 8, nw = dsv4_parallel_workers(a->T, grain);
    double *scratch = malloc((size_t)nw * (size_t)(a->H * D + 1) * sizeof *scratch);
    if (!scratch)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    qnorm_job j = {a, NULL, NULL, q_out, scratch};
    int rc = dsv4_parallel_for(a->T, grain, 0, qnorm_range, &j, st);
    free(scratch);
    return rc;
}

int dsv4_ref_kv_rope_insert(const dsv4_qnorm_insert_args *a, uint8_t *cache, const dsv4_kv_layout *L,
                            const dsv4_kv_encode_opts *o, dsv4_status *st)
{
    uint16_t *k = malloc((size_t)(a->Ts * D + 1) * sizeof *k);
    if (!k)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    for (int64_t t = 0; t < a->Ts && !rc; t++) {
        memcpy(k + t * D, a->kv + t * D, D * sizeof *k);
        if (a->slot_mapping[t] < 0) /* skipped: its row is never encoded (docs/semantics/gemm.md A3, KV branch) */
            continue;
        const float *row;
        if ((rc = rope_row_of(a, t, &row, st)))
            break;
        float y[D];
        for (int d = 0; d < D; d++) /* y = fp32(kv[t]); no norm here (KV 1) */
            y[d] = dsv4_bf16_to_f32(a->kv[t * D + d]);
        dsv4_rope_gptj_f32(y + NOPE, row, RD, DSV4_ROPE_FORWARD); /* KV 2, fp32 */
        for (int d = NOPE; d < D; d++)
            k[t * D + d] = dsv4_bf16_from_f32(y[d]); /* KV 3: all 512 to bf16 (NoPE unchanged) */
    }
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
