/* mut_indexer.c - mutants of the paged MXFP4 indexer: the K store (cache
 * bytes), the Q quant (codes, scales, weights), the logits (fp32 against
 * the ideal with a derived bound; the faithful mode's bound is the model's
 * own rounding) and the top-k / candidate pool (index sets, ties forgiven).
 * Semantics: ref/indexer.h (docs/semantics/indexer.md Q4-Q6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/indexer/indexer.h"
#include "../../ref/mx.h"
#include "mutant.h"

/* ---- rocm_mxfp4_indexer_k_store ---- */

/* A negative slot taken as a Python index: the first skipped token that
 * passes the compress gate lands in the cache's last entry, which no other
 * token owns (a write into an untouched slot). */
int mut_kstore_slot_minus1_written(mut_call *m)
{
    dsv4_tensor *slots, *pos, *cache;
    int rc;
    if ((rc = mut_need(m, &m->in, "kv_slot_mapping", &slots)) || (rc = mut_need(m, &m->in, "positions", &pos)) ||
        (rc = mut_need(m, &m->in, "k_cache", &cache)))
        return rc;
    int64_t *s = slots->data;
    const int64_t *p = pos->data, c = mut_int(m, "compress_ratio");
    const int64_t last = cache->shape[0] * cache->shape[1] - 1;
    int owned = 0;
    for (int64_t t = 0; t < slots->shape[0]; t++)
        owned |= s[t] == last;
    for (int64_t t = 0; t < slots->shape[0] && !owned; t++)
        if (s[t] < 0 && (p[t] + 1) % c == 0) {
            s[t] = last;
            break;
        }
    return mut_run_reference(m);
}

/* The key rotated at its own position instead of the group start
 * (pos // c) * c: table row p + c - 1 copied into each group start p. */
int mut_kstore_rope_at_pos(mut_call *m) { return mut_run_reference_rope_at_pos(m); }

/* The preshuffled layout written in natural order. */
int mut_kstore_not_preshuffled(mut_call *m)
{
    return mut_run_reference_with_int(m, "shuffle", 0);
}

/* ---- rocm_mxfp4_indexer_q_quant ---- */

/* A head's 4 e8m0 bytes packed big-endian into its int32. */
int mut_qquant_scale_big_endian(mut_call *m)
{
    int rc = mut_run_reference(m);
    dsv4_tensor *qs;
    if (rc || (rc = mut_need(m, &m->out, "q_scale", &qs)))
        return rc;
    uint8_t *b = qs->data;
    for (size_t i = 0; i + 3 < qs->nbytes; i += 4) {
        uint8_t t0 = b[i], t1 = b[i + 1];
        b[i] = b[i + 3], b[i + 1] = b[i + 2], b[i + 2] = t1, b[i + 3] = t0;
    }
    return DSV4_OK;
}

/* The seeds' variant B asked for, variant A's quant and weights computed. */
int mut_qquant_variant_a_for_b(mut_call *m) { return mut_run_reference_as(m, "quant=cache_a"); }

/* RoPE at position pos - 1 (0 stays 0). */
int mut_qquant_positions_off1(mut_call *m) { return mut_run_reference_positions_off1(m); }

/* ---- paged_mxfp4_mqa_logits: an fp32 model of the kernel ---- */

typedef struct logits_model {
    int reverse_heads; /* the head fold from the last head to the first */
    int no_relu;       /* relu(q . k) dropped */
    int w_bf16;        /* the fp32 head weights loaded as bf16 */
} logits_model;

/* logits[r, j] = fold_h fl(relu(s_h) * w_h), s_h the exact per-head dot
 * rounded once to fp32, the fold an fp32 FMA chain; columns past the row
 * end -inf. */
static int logits_model_run(mut_call *m, logits_model md)
{
    dsv4_opctx c = mut_ctx(m, m->variant);
    dsv4_indexer_lg g;
    dsv4_tensor *out;
    int rc;
    if ((rc = dsv4_indexer_lg_args(&c, &m->in, &g, m->st)) || (rc = mut_need(m, &m->out, "logits", &out)))
        return rc;
    const dsv4_idx_logits_args *a = &g.a;
    const int H = a->H, D = DSV4_IDX_HEAD_DIM;
    const int64_t P = g.L.page_entries, pb = dsv4_idx_page_bytes(&g.L);
    double *q = malloc((size_t)H * D * sizeof *q), k[DSV4_IDX_HEAD_DIM];
    if (!q)
        return dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
    float *lg = out->data;
    for (int64_t i = 0; i < a->rows * a->width; i++)
        lg[i] = -INFINITY;
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t r = a->query_start_loc[b]; r < a->query_start_loc[b + 1]; r++) {
            dsv4_mx_dequant_rows_fp4(a->q + r * H * (D / 2), a->q_scale + r * H * (D / 32), H, D, q);
            const int64_t end = dsv4_idx_row_end(a, r);
            for (int64_t j = 0; j < end; j++) {
                uint8_t v[DSV4_IDX_HEAD_DIM / 2], s[DSV4_IDX_HEAD_DIM / 32];
                dsv4_idx_read_entry(&g.L, a->cache + (int64_t)a->block_table[b * a->max_blocks + j / P] * pb, j % P,
                                    v, s);
                dsv4_mx_dequant_rows_fp4(v, s, 1, D, k);
                float acc = 0.0f;
                for (int i = 0; i < H; i++) {
                    const int h = md.reverse_heads ? H - 1 - i : i;
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += q[h * D + d] * k[d];
                    float sh = (float)dot;
                    if (!md.no_relu && !isnan(sh)) /* relu keeps NaN (a NaN scale poisons the logit) */
                        sh = sh > 0.0f ? sh : 0.0f;
                    const float w = a->weights[r * H + h];
                    acc = fmaf(sh, md.w_bf16 ? dsv4_round_bf16(w) : w, acc);
                }
                lg[r * a->width + j] = acc;
            }
        }
    free(q);
    return DSV4_OK;
}

int mut_logits_fp32_model(mut_call *m) { return logits_model_run(m, (logits_model){0}); }
int mut_logits_heads_reversed(mut_call *m) { return logits_model_run(m, (logits_model){.reverse_heads = 1}); }
int mut_logits_faithful_heads_reversed(mut_call *m) { return logits_model_run(m, (logits_model){.reverse_heads = 1}); }
int mut_logits_relu_missing(mut_call *m) { return logits_model_run(m, (logits_model){.no_relu = 1}); }
int mut_logits_weights_bf16(mut_call *m) { return logits_model_run(m, (logits_model){.w_bf16 = 1}); }

/* The newest key (column end - 1) of every row left unscored. */
int mut_logits_last_key_dropped(mut_call *m)
{
    int rc = mut_run_reference(m);
    dsv4_opctx c = mut_ctx(m, m->variant);
    dsv4_indexer_lg g;
    dsv4_tensor *out;
    if (rc || (rc = dsv4_indexer_lg_args(&c, &m->in, &g, m->st)) || (rc = mut_need(m, &m->out, "logits", &out)))
        return rc;
    for (int64_t r = 0; r < g.a.rows; r++) {
        const int64_t end = dsv4_idx_row_end(&g.a, r);
        if (end > 0)
            ((float *)out->data)[r * g.a.width + end - 1] = -INFINITY;
    }
    return DSV4_OK;
}

/* ---- rocm_mxfp4_sparse_attn_indexer: the top-k and the pool ---- */

/* The ideal logits (the golden's) and the case's arguments. */
static int ideal_logits(mut_call *m, dsv4_indexer_lg *g, double **lg)
{
    dsv4_opctx c = mut_ctx(m, m->variant);
    int rc = dsv4_indexer_lg_args(&c, &m->in, g, m->st);
    return rc ? rc : dsv4_indexer_run_logits(g, DSV4_IDX_IDEAL, lg, m->st);
}

/* Each row's top-k written last to first (the set is what counts). */
int mut_sa_topk_reversed(mut_call *m)
{
    int rc = mut_run_reference(m);
    dsv4_tensor *ti;
    if (rc || (rc = mut_need(m, &m->out, "topk_indices", &ti)))
        return rc;
    const int64_t rows = ti->shape[0], k = ti->shape[1];
    int32_t *x = ti->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t n = 0;
        while (n < k && x[r * k + n] >= 0)
            n++;
        for (int64_t i = 0; i < n / 2; i++) {
            int32_t t = x[r * k + i];
            x[r * k + i] = x[r * k + n - 1 - i];
            x[r * k + n - 1 - i] = t;
        }
    }
    return DSV4_OK;
}

/* The reference's topk_indices output and the ideal logits (lg, which the
 * caller frees) that a changed selection is taken over. */
typedef struct topk_view {
    dsv4_tensor *ti;
    dsv4_indexer_lg g;
    double *lg;
} topk_view;

/* The reference run, then its topk view. */
static int reference_topk_and_logits(mut_call *m, topk_view *v)
{
    v->lg = NULL;
    int rc = mut_run_reference(m);
    if (!rc)
        rc = mut_need(m, &m->out, "topk_indices", &v->ti);
    return rc ? rc : ideal_logits(m, &v->g, &v->lg);
}

/* Exact ties at the k-th score broken towards the higher index (torch
 * takes the lower): a legitimate kernel choice. */
int mut_sa_topk_ties_other_way(mut_call *m)
{
    topk_view v;
    int rc = reference_topk_and_logits(m, &v);
    if (rc)
        return rc;
    const int64_t k = v.ti->shape[1], W = v.g.a.width;
    int32_t *x = v.ti->data;
    uint8_t *chosen = malloc((size_t)(W + 1));
    for (int64_t r = 0; chosen && r < v.g.a.rows; r++) {
        const int64_t end = dsv4_idx_row_end(&v.g.a, r);
        const double *s = v.lg + r * W;
        double kth = INFINITY;
        memset(chosen, 0, (size_t)W);
        for (int64_t i = 0; i < k && x[r * k + i] >= 0; i++) {
            chosen[x[r * k + i]] = 1;
            kth = s[x[r * k + i]] < kth ? s[x[r * k + i]] : kth;
        }
        /* Swap the lowest-index chosen tie for the highest-index unchosen one, repeatedly. */
        int64_t lo = 0, hi = end - 1;
        for (;;) {
            while (lo < end && !(chosen[lo] && s[lo] == kth))
                lo++;
            while (hi >= 0 && !(!chosen[hi] && s[hi] == kth))
                hi--;
            if (lo >= end || hi < 0 || hi < lo)
                break;
            for (int64_t i = 0; i < k; i++)
                if (x[r * k + i] == lo)
                    x[r * k + i] = (int32_t)hi;
            chosen[lo] = 0, chosen[hi] = 1;
        }
    }
    rc = chosen ? DSV4_OK : dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
    free(chosen);
    free(v.lg);
    return rc;
}

/* The reference, then topk_indices retaken over the ideal logits of every
 * column in [0, row end - drop) of each row. */
static int topk_over_columns_before_end(mut_call *m, int64_t drop)
{
    topk_view v;
    int rc = reference_topk_and_logits(m, &v);
    if (rc)
        return rc;
    const int64_t k = v.ti->shape[1];
    for (int64_t r = 0; r < v.g.a.rows; r++) {
        const int64_t end = dsv4_idx_row_end(&v.g.a, r) - drop;
        dsv4_idx_topk_row(v.lg + r * v.g.a.width, end > 0 ? end : 0, k, 0, (int32_t *)v.ti->data + r * k);
    }
    free(v.lg);
    return DSV4_OK;
}

/* The top-k taken over [0, end - 1): the newest key is never a candidate. */
int mut_sa_topk_last_key_dropped(mut_call *m) { return topk_over_columns_before_end(m, 1); }

/* The block holding the newest key scored by its max like the others
 * instead of +inf, so the newest block can fall out of the pool. */
int mut_sa_newest_block_not_forced(mut_call *m)
{
    int rc = mut_run_reference(m);
    dsv4_indexer_lg g;
    double *lg = NULL;
    dsv4_tensor *bs, *cb;
    if (rc || mut_int(m, "candidate_block_size") == 0) /* no pool asked for: nothing to get wrong */
        return rc;
    if ( (rc = mut_need(m, &m->out, "block_scores", &bs)) || (rc = mut_need(m, &m->out, "candidate_blocks", &cb)) ||
        (rc = ideal_logits(m, &g, &lg)))
        return rc;
    const int64_t C = mut_int(m, "candidate_block_size"), nblocks = bs->shape[1], nb = cb->shape[1];
    double *row = malloc((size_t)(nblocks + 1) * sizeof *row);
    for (int64_t r = 0; row && r < g.a.rows; r++) {
        const int64_t end = dsv4_idx_row_end(&g.a, r);
        dsv4_idx_block_scores_row(lg + r * g.a.width, end, C, nblocks, row);
        if (end > 0) { /* the newest block: its plain max */
            const int64_t blk = (end - 1) / C;
            double mx = -INFINITY;
            for (int64_t j = blk * C; j < end; j++)
                mx = lg[r * g.a.width + j] > mx ? lg[r * g.a.width + j] : mx;
            row[blk] = mx;
        }
        for (int64_t i = 0; i < nblocks; i++)
            ((float *)bs->data)[r * nblocks + i] = (float)row[i];
        dsv4_idx_topk_row(row, nblocks, nb, 1, (int32_t *)cb->data + r * nb);
    }
    rc = row ? DSV4_OK : dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
    free(row);
    free(lg);
    return rc;
}

/* ---- rocm_mxfp4_sparse_mqa_indexer ---- */

/* The candidate mask not applied: the top-k ranges over every column
 * below the row end, not only the published pool. */
int mut_mqa_pool_mask_dropped(mut_call *m) { return topk_over_columns_before_end(m, 0); }
