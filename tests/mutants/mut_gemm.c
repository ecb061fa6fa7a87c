/* mut_gemm.c - mutants of the GEMM family: the block-scaled fp8 GEMM and
 * its weight shuffle, the two wo_a projections, the fused q-norm / RoPE /
 * SWA insert and the compressor step.  Float outputs are bf16 against the
 * double ideal with a derived bound; layouts, codes and cache bytes exact.
 * Semantics: ref/gemm.h, ref/compressor.h (docs/semantics/gemm.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/compressor.h"
#include "../../ref/gemm.h"
#include "../../ref/mx.h"
#include "../../ref/rope.h"
#include "mutant.h"

/* ---- gemm_a8w8_blockscale ---- */

/* The GEMM's arguments as the op reads them, under the case's variant
 * (bpreshuffle: WQ shuffled and x_scale transposed; fp8=fnuz: FNUZ codes). */
static int gemm_args(mut_call *m, dsv4_gemm_args *a)
{
    dsv4_tensor *xq, *wq, *xs, *ws;
    int rc;
    if ((rc = mut_need(m, &m->in, "XQ", &xq)) || (rc = mut_need(m, &m->in, "WQ", &wq)) ||
        (rc = mut_need(m, &m->in, "x_scale", &xs)) || (rc = mut_need(m, &m->in, "w_scale", &ws)))
        return rc;
    memset(a, 0, sizeof *a);
    a->xq = xq->data, a->wq = wq->data, a->x_scale = xs->data, a->w_scale = ws->data;
    a->M = xq->shape[0], a->K = xq->shape[1], a->N = wq->shape[0];
    a->kind = mut_is_variant(m, "fp8=fnuz") ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
    a->x_scale_transposed = a->w_shuffled = mut_is_variant(m, "bpreshuffle");
    return DSV4_OK;
}

/* y [M, N] doubles -> the bf16 output Y. */
static int store_y(mut_call *m, const double *y, int64_t n)
{
    dsv4_tensor *Y;
    int rc = mut_need(m, &m->out, "Y", &Y);
    for (int64_t i = 0; !rc && i < n; i++)
        ((uint16_t *)Y->data)[i] = dsv4_bf16_from_f32((float)y[i]);
    return rc;
}

typedef enum gemm_bug { GEMM_NONE, GEMM_ACC_BF16, GEMM_REVERSED } gemm_bug;

/* The Triton kernel's fp32 loop written out (acc += fl(P_kb * xs) * ws,
 * P_kb the fp32 dot of one 128-block), with bug. */
static int gemm_fp32_loop(mut_call *m, const dsv4_gemm_args *a, gemm_bug bug)
{
    const int64_t M = a->M, N = a->N, K = a->K, KB = K / 128;
    double *y = malloc((size_t)(M * N + 1) * sizeof *y);
    float *w = malloc((size_t)(N * K + 1) * sizeof *w), *x = malloc((size_t)(M * K + 1) * sizeof *x);
    uint8_t *plain = a->w_shuffled ? malloc((size_t)(N * K + 1)) : NULL;
    int rc = (!y || !w || !x || (a->w_shuffled && !plain)) ? dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory") : 0;
    if (!rc && plain)
        rc = dsv4_ref_shuffle_weight(a->wq, plain, 1, N, K, 1, 1, m->st);
    const uint8_t *wq = plain ? plain : a->wq;
    for (int64_t i = 0; !rc && i < N * K; i++)
        w[i] = dsv4_fp8_to_f32(wq[i], a->kind);
    for (int64_t i = 0; !rc && i < M * K; i++)
        x[i] = dsv4_fp8_to_f32(a->xq[i], a->kind);
    for (int64_t mi = 0; !rc && mi < M; mi++)
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < KB; j++) {
                const int64_t kb = bug == GEMM_REVERSED ? KB - 1 - j : j;
                float p = 0.0f;
                for (int64_t k = kb * 128; k < kb * 128 + 128; k++)
                    p += x[mi * K + k] * w[n * K + k];
                const float xs = a->x_scale[a->x_scale_transposed ? kb * M + mi : mi * KB + kb];
                const float ws = a->w_scale[(n / 128) * KB + kb];
                acc += (p * xs) * ws;
                if (bug == GEMM_ACC_BF16)
                    acc = dsv4_round_bf16(acc);
            }
            y[mi * N + n] = acc;
        }
    if (!rc)
        rc = store_y(m, y, M * N);
    free(y), free(w), free(x), free(plain);
    return rc;
}

static int gemm_with(mut_call *m, gemm_bug bug)
{
    dsv4_gemm_args a;
    int rc = gemm_args(m, &a);
    return rc ? rc : gemm_fp32_loop(m, &a, bug);
}

int mut_gemm_fp32_model(mut_call *m) { return gemm_with(m, GEMM_NONE); }
int mut_gemm_blocks_reversed(mut_call *m) { return gemm_with(m, GEMM_REVERSED); }
int mut_gemm_acc_bf16(mut_call *m) { return gemm_with(m, GEMM_ACC_BF16); }

/* bpreshuffle: WQ read as if it were the plain [N, K] weight. */
int mut_gemm_bpreshuffle_as_plain(mut_call *m)
{
    dsv4_gemm_args a;
    int rc = gemm_args(m, &a);
    a.w_shuffled = 0;
    return rc ? rc : gemm_fp32_loop(m, &a, GEMM_NONE);
}

/* The default's row-major x_scale [M, K/128] read as [K/128, M]. */
int mut_gemm_x_scale_transposed(mut_call *m)
{
    dsv4_gemm_args a;
    int rc = gemm_args(m, &a);
    a.x_scale_transposed = 1;
    return rc ? rc : gemm_fp32_loop(m, &a, GEMM_NONE);
}

/* fp8=fnuz codes decoded as OCP e4m3fn (every value 2x). */
int mut_gemm_fnuz_as_ocp(mut_call *m)
{
    dsv4_gemm_args a;
    int rc = gemm_args(m, &a);
    a.kind = DSV4_FP8_E4M3FN;
    return rc ? rc : gemm_fp32_loop(m, &a, GEMM_NONE);
}

/* The ideal, rounded to bf16, then one ulp more on every element (the
 * one-ulp bias), for each bf16 output of the family. */
int mut_gemm_bias_1ulp(mut_call *m) { return mut_run_reference_biased(m, "Y"); }
int mut_einsum_bias_1ulp(mut_call *m) { return mut_run_reference_biased(m, "out"); }
int mut_bmm_bias_1ulp(mut_call *m) { return mut_run_reference_biased(m, "out"); }
int mut_qnorm_bias_1ulp(mut_call *m) { return mut_run_reference_biased(m, "q"); }

/* ---- shuffle_weight ---- */

/* The forward shuffle computed with the inverse permutation. */
int mut_shuffle_inverse_for_forward(mut_call *m) { return mut_run_reference_as(m, "inverse"); }
/* The inverse (unshuffle) computed with the forward permutation. */
int mut_shuffle_forward_for_inverse(mut_call *m) { return mut_run_reference_as(m, "default"); }

/* fp8 bytes shuffled as bf16 pairs (Kp = 8 two-byte elements): the same
 * byte permutation, since a 16-byte K chunk is 8 bf16 (an equivalent
 * implementation, must pass). */
int mut_shuffle_bf16_layout(mut_call *m)
{
    dsv4_tensor *x, *out;
    int rc;
    if ((rc = mut_need(m, &m->in, "x", &x)) || (rc = mut_need(m, &m->out, "out", &out)))
        return rc;
    return dsv4_ref_shuffle_weight(x->data, out->data, 1, x->shape[0], x->shape[1] / 2, 2,
                                   mut_is_variant(m, "inverse"), m->st);
}

/* The 16x16 tile stored with n fastest instead of k (the tile transposed). */
int mut_shuffle_tile_transposed(mut_call *m)
{
    dsv4_tensor *x, *out;
    int rc;
    if ((rc = mut_need(m, &m->in, "x", &x)) || (rc = mut_need(m, &m->out, "out", &out)))
        return rc;
    const int64_t N = x->shape[0], K = x->shape[1];
    const int inverse = mut_is_variant(m, "inverse");
    const uint8_t *in = x->data;
    uint8_t *o = out->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t p = ((((n / 16) * (K / 32) + k / 32) * 2 + (k % 32) / 16) * 16 + k % 16) * 16 + n % 16;
            if (inverse)
                o[n * K + k] = in[p];
            else
                o[p] = in[n * K + k];
        }
    return DSV4_OK;
}

/* ---- rocm_inv_rope_einsum ---- */

/* inverse_rope = 1 ignored: o multiplied as given. */
int mut_einsum_inverse_rope_skipped(mut_call *m)
{
    return mut_run_reference_with_int(m, "inverse_rope", 0);
}

/* Each group's wo_a block [R, Dg] read as its transpose. */
static int plant_einsum_weight_transposed(mut_call *m, dsv4_tensor *w)
{
    const int64_t G = mut_int(m, "n_local_groups"), R = mut_int(m, "o_lora_rank"), Dg = w->shape[1];
    uint16_t *p = w->data, *tmp = malloc((size_t)(R * Dg + 1) * sizeof *tmp);
    if (!tmp)
        return dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
    for (int64_t g = 0; g < G; g++) {
        uint16_t *blk = p + g * R * Dg;
        for (int64_t r = 0; r < R; r++)
            for (int64_t d = 0; d < Dg; d++)
                tmp[d * R + r] = blk[r * Dg + d]; /* the kernel's w[g, r, d] is this buffer's [d][r] */
        memcpy(blk, tmp, (size_t)(R * Dg) * sizeof *tmp);
    }
    free(tmp);
    return DSV4_OK;
}
int mut_einsum_weight_transposed(mut_call *m)
{
    return mut_run_reference_on(m, "wo_a", plant_einsum_weight_transposed);
}

/* A correct kernel: bf16 inverse RoPE (fp32, rounded per lane), fp32 dots. */
int mut_einsum_fp32_model(mut_call *m)
{
    dsv4_tensor *o, *pos, *cs, *w, *out;
    int rc;
    if ((rc = mut_need(m, &m->in, "o", &o)) || (rc = mut_need(m, &m->in, "positions", &pos)) ||
        (rc = mut_need(m, &m->in, "cos_sin_cache", &cs)) || (rc = mut_need(m, &m->in, "wo_a", &w)) ||
        (rc = mut_need(m, &m->out, "out", &out)))
        return rc;
    const int64_t T = o->shape[0], H = o->shape[1], G = mut_int(m, "n_local_groups"), R = mut_int(m, "o_lora_rank");
    const int64_t Dg = H * 512 / G, rd = mut_int(m, "rope_head_dim");
    uint16_t *orot = o->data; /* the owned copy: rotated in place */
    for (int64_t t = 0; mut_int(m, "inverse_rope") && t < T; t++)
        dsv4_rope_rows_bf16(orot + t * H * 512, H, 512, (const float *)cs->data + ((int64_t *)pos->data)[t] * rd,
                            (int)rd, DSV4_ROPE_INVERSE);
    const uint16_t *wp = w->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                float acc = 0.0f;
                for (int64_t d = 0; d < Dg; d++)
                    acc += dsv4_bf16_to_f32(orot[t * H * 512 + g * Dg + d]) * dsv4_bf16_to_f32(wp[(g * R + r) * Dg + d]);
                ((uint16_t *)out->data)[t * G * R + g * R + r] = dsv4_bf16_from_f32(acc);
            }
    return DSV4_OK;
}

/* ---- rocm_mxfp8_wo_a_bmm ---- */

/* The weight's e8m0 scales decoded as 2^(b - 126) (bias off by one). */
static int plant_bmm_scale_bias_126(mut_call *m, dsv4_tensor *ws)
{
    (void)m;
    uint8_t *s = ws->data;
    for (int64_t i = 0; i < mut_numel(ws); i++)
        s[i] = s[i] < 254 ? (uint8_t)(s[i] + 1) : s[i];
    return DSV4_OK;
}
int mut_bmm_scale_bias_126(mut_call *m) { return mut_run_reference_on(m, "wo_a_scale", plant_bmm_scale_bias_126); }

/* Every group reads group 0's activations (the group offset dropped). */
int mut_bmm_group_offset_dropped(mut_call *m)
{
    dsv4_tensor *a, *as;
    int rc;
    if ((rc = mut_need(m, &m->in, "a", &a)) || (rc = mut_need(m, &m->in, "a_scale", &as)))
        return rc;
    const int64_t T = a->shape[0], G = mut_int(m, "n_local_groups"), GK = a->shape[1], K = GK / G;
    uint8_t *ap = a->data, *sp = as->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 1; g < G; g++) {
            memcpy(ap + t * GK + g * K, ap + t * GK, (size_t)K);
            memcpy(sp + t * (GK / 32) + g * (K / 32), sp + t * (GK / 32), (size_t)(K / 32));
        }
    return mut_run_reference(m);
}

/* A correct kernel: dequantized products summed in fp32 per 32-block,
 * blocks accumulated in fp32. */
int mut_bmm_fp32_model(mut_call *m)
{
    dsv4_tensor *a, *as, *w, *ws, *out;
    int rc;
    if ((rc = mut_need(m, &m->in, "a", &a)) || (rc = mut_need(m, &m->in, "a_scale", &as)) ||
        (rc = mut_need(m, &m->in, "wo_a", &w)) || (rc = mut_need(m, &m->in, "wo_a_scale", &ws)) ||
        (rc = mut_need(m, &m->out, "out", &out)))
        return rc;
    const int64_t T = a->shape[0], G = mut_int(m, "n_local_groups"), R = mut_int(m, "o_lora_rank"), K = w->shape[1];
    const uint8_t *ap = a->data, *asp = as->data, *wp = w->data, *wsp = ws->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                float acc = 0.0f;
                for (int64_t kb = 0; kb < K / 32; kb++) {
                    float p = 0.0f;
                    for (int64_t k = kb * 32; k < kb * 32 + 32; k++)
                        p += dsv4_fp8_to_f32(ap[t * G * K + g * K + k], DSV4_FP8_E4M3FN) *
                             dsv4_fp8_to_f32(wp[(g * R + r) * K + k], DSV4_FP8_E4M3FN);
                    acc += p * (dsv4_e8m0_to_f32(asp[t * G * K / 32 + g * K / 32 + kb]) *
                                dsv4_e8m0_to_f32(wsp[(g * R + r) * (K / 32) + kb]));
                }
                ((uint16_t *)out->data)[t * G * R + g * R + r] = dsv4_bf16_from_f32(acc);
            }
    return DSV4_OK;
}

/* ---- fused_qnorm_rope_kv_insert ---- */

/* q from the reference on inputs whose cos/sin table has sin negated
 * (the inverse rotation), the cache from the correct run. */
static int qnorm_two_runs(mut_call *m, int q_from_mutated)
{
    dsv4_tensor *cs;
    dsv4_tensors good, bad;
    int rc = mut_need(m, &m->in, "cos_sin_cache", &cs);
    if (rc || (rc = mut_reference(m, m->variant, &good)))
        return rc;
    float *x = cs->data;
    for (int64_t p = 0; p < cs->shape[0]; p++)
        for (int64_t k = cs->shape[1] / 2; k < cs->shape[1]; k++)
            x[p * cs->shape[1] + k] = -x[p * cs->shape[1] + k];
    if ((rc = mut_reference(m, m->variant, &bad))) {
        dsv4_tensors_free(&good);
        return rc;
    }
    dsv4_tensor *gq = dsv4_tensors_find(&good, "q"), *bq = dsv4_tensors_find(&bad, "q");
    if (q_from_mutated && gq && bq) /* swap so that mut_store takes q from the mutated run */
        memcpy(gq->data, bq->data, gq->nbytes);
    else if (gq && bq) {
        dsv4_tensor *gc = dsv4_tensors_find(&good, "swa_cache"), *bc = dsv4_tensors_find(&bad, "swa_cache");
        if (gc && bc)
            memcpy(gc->data, bc->data, gc->nbytes);
    }
    mut_store(m, &good);
    dsv4_tensors_free(&good);
    dsv4_tensors_free(&bad);
    return DSV4_OK;
}

/* q rotated by the inverse RoPE (sign of sin) where the forward is asked for. */
int mut_qnorm_q_rope_inverse(mut_call *m) { return qnorm_two_runs(m, 1); }
/* kv rotated by the inverse RoPE before the insert. */
int mut_qnorm_kv_rope_inverse(mut_call *m) { return qnorm_two_runs(m, 0); }

/* fp8=fnuz: the SWA cache written with OCP e4m3fn codes. */
int mut_qnorm_fnuz_as_ocp(mut_call *m) { return mut_run_reference_as(m, "default"); }

/* Slot -1 taken as a Python index: the skipped token's kv also lands in the
 * cache's last slot. */
static int plant_qnorm_slot_minus1_written(mut_call *m, dsv4_tensor *slots)
{
    dsv4_tensor *cache = mut_in(m, "swa_cache");
    if (!cache)
        return dsv4_fail(m->st, DSV4_EINPUT, "input 'swa_cache' is missing");
    const int64_t last = cache->shape[0] * cache->shape[1] - 1;
    int64_t *s = slots->data, taken = -1;
    for (int64_t t = 0; t < slots->shape[0]; t++)
        if (s[t] == last)
            taken = t;
    for (int64_t t = 0; t < slots->shape[0] && taken < 0; t++)
        if (s[t] == -1) {
            s[t] = last; /* the first skipped token; a second would repeat the slot */
            break;
        }
    return DSV4_OK;
}
int mut_qnorm_slot_minus1_written(mut_call *m)
{
    return mut_run_reference_on(m, "slot_mapping", plant_qnorm_slot_minus1_written);
}

/* ---- compressor ---- */

/* The compressed row's RoPE at the token's own position instead of the
 * group start (pos // c) * c: row p + c - 1 of the table is copied into
 * row p for every group start p the step reads. */
int mut_compressor_rope_at_pos(mut_call *m) { return mut_run_reference_rope_at_pos(m); }

/* The absolute position bias left out of the saved scores. */
static int plant_compressor_ape_ignored(mut_call *m, dsv4_tensor *ape)
{
    (void)m;
    memset(ape->data, 0, ape->nbytes);
    return DSV4_OK;
}
int mut_compressor_ape_ignored(mut_call *m) { return mut_run_reference_on(m, "ape", plant_compressor_ape_ignored); }

/* Only the emitting tokens' state rows written back (the others kept in
 * registers for this step's window and lost). */
int mut_compressor_state_not_saved(mut_call *m)
{
    int rc = mut_run_reference(m);
    dsv4_tensor *slots, *pos, *before, *after;
    if (rc || (rc = mut_need(m, &m->in, "state_slot_mapping", &slots)) || (rc = mut_need(m, &m->in, "positions", &pos)) ||
        (rc = mut_need(m, &m->in, "state_cache", &before)) || (rc = mut_need(m, &m->out, "state_cache", &after)))
        return rc;
    const int64_t c = mut_int(m, "compress_ratio"), W2 = before->shape[2];
    for (int64_t t = 0; t < slots->shape[0]; t++) {
        const int64_t s = ((const int64_t *)slots->data)[t], p = ((const int64_t *)pos->data)[t];
        if (s >= 0 && (p + 1) % c != 0)
            memcpy((float *)after->data + s * W2, (const float *)before->data + s * W2, (size_t)W2 * sizeof(float));
    }
    return DSV4_OK;
}
