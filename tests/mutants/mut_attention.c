/* mut_attention.c - mutants of the attention family: the three sparse
 * attention ops (bf16 outputs against the double ideal with a derived
 * bound) and the inverse-RoPE epilogues.
 *
 * The attention mutants run one kernel model of their own, written the way
 * the ROCm Triton kernels compute (docs/semantics/attention.md A8.3): fp32
 * scores, an fp32 softmax from the keys' max, l summing the fp32 p, fp32
 * P.V, the sink merged at the end, bf16 store.  With no flag set it is a
 * correct kernel (the must-pass attn_model_fp32_p); each bug mutant sets
 * one flag.  Keys, sinks and queries come from the op's own inputs through
 * the same argument builders as the reference (ref/attention.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/attention/attention.h"
#include "../../ref/kvcache.h"
#include "mutant.h"

#define D DSV4_HEAD_DIM
#define KEY_BLOCK 64 /* BLOCK_N of the Triton kernels */

typedef enum sink_use { SINK_ONCE = 0, SINK_IGNORED, SINK_TWICE } sink_use;

typedef struct attn_model {
    int p_bf16;      /* p rounded to bf16 before P.V (what the ROCm kernels do) */
    int no_max;      /* softmax without subtracting the running max */
    int acc_bf16;    /* the P.V accumulator rounded to bf16 after every key */
    sink_use sink;
    int reverse;     /* keys visited last to first (another reduction order) */
    int skip_tail;   /* keys of the last partial block of 64 skipped */
    int keep_nan;    /* NaN lanes of K not scrubbed to 0 */
    int neg1_row0;   /* -1 entries read as row 0 (the mask dropped, the load clamped) */
    int q_stride;    /* head stride of q in elements (0: 512) */
    int one_segment; /* only the first (main) segment read */
} attn_model;

/* ---- the op's attention arguments, built as the op builds them ---- */

static const dsv4_paged_names decode_names = {"swa_k_cache", "swa_ragged_indices", "swa_ragged_indptr",
                                              "kv_cache", "topk_ragged_indices", "topk_ragged_indptr"};
static const dsv4_paged_names mla_names = {"kv_buffer", "kv_indices", "kv_indptr",
                                           "extra_kv_buffer", "extra_kv_indices", "extra_kv_indptr"};

/* The arguments of the case under variant v; pa holds the fetch contexts. */
static int attn_args(mut_call *m, int v, dsv4_paged_args *pa, dsv4_status *st)
{
    dsv4_opctx c = mut_ctx(m, v);
    if (strcmp(m->op->name, "rocm_sparse_attn_decode") == 0)
        return dsv4_paged_args_of(&decode_names, &c, &m->in, pa, st);
    if (strcmp(m->op->name, "sparse_mla_fwd") == 0)
        return dsv4_paged_args_of(&mla_names, &c, &m->in, pa, st);
    /* rocm_sparse_attn_prefill: one dense segment over the bf16 workspace. */
    memset(pa, 0, sizeof *pa);
    return dsv4_attn_args_prefill(&c, &m->in, &pa->a, st);
}

/* The entries of token t in segment s (dense rows: the first
 * clamp(lens[t], 0, width) columns). */
static const int32_t *entries(const dsv4_attn_segment *s, int64_t t, int64_t *n)
{
    if (s->indptr) {
        *n = (int64_t)s->indptr[t + 1] - s->indptr[t];
        return s->indices + s->indptr[t];
    }
    const int64_t len = s->lens[t];
    *n = len < 0 ? 0 : len > s->width ? s->width : len;
    return s->indices + t * s->width;
}

static void fetch(const dsv4_attn_segment *s, int64_t v, float *row)
{
    if (s->bf16_rows)
        for (int d = 0; d < D; d++)
            row[d] = dsv4_bf16_to_f32(s->bf16_rows[v * D + d]);
    else
        s->fetch(s->fetch_ctx, v, row, NULL);
}

/* Token t's key rows as the model reads them: *n rows into keys (grown). */
static int gather(const dsv4_attn_args *a, const attn_model *md, int64_t t, float **keys, int64_t *cap,
                  int64_t *n, dsv4_status *st)
{
    *n = 0;
    for (int k = 0; k < (md->one_segment ? 1 : a->nseg); k++) {
        const dsv4_attn_segment *s = &a->seg[k];
        int64_t ne;
        const int32_t *e = entries(s, t, &ne);
        for (int64_t j = 0; j < ne; j++) {
            int64_t v = e[j];
            if (md->neg1_row0 && v == -1)
                v = 0;
            if (v < 0 || v >= s->num_rows)
                continue;
            if (*n == *cap) {
                int64_t nc = *cap ? 2 * *cap : 64;
                float *p = realloc(*keys, (size_t)(nc * D) * sizeof *p);
                if (!p)
                    return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
                *keys = p, *cap = nc;
            }
            float *row = *keys + *n * D;
            fetch(s, v, row);
            if (s->scrub_nan && !md->keep_nan)
                for (int d = 0; d < D; d++)
                    row[d] = isnan(row[d]) ? 0.0f : row[d];
            (*n)++;
        }
    }
    return DSV4_OK;
}

/* One (token, head): out[512] in fp32. */
static void head(const dsv4_attn_args *a, const attn_model *md, const float *q, const float *keys, int64_t n,
                 float sink, float *p, float *out)
{
    const float scale = (float)a->scale;
    if (md->skip_tail && n % KEY_BLOCK)
        n -= n % KEY_BLOCK; /* num_blocks = n // BLOCK_N */
    float m = -3.4028234663852886e38f, l = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float *k = keys + (md->reverse ? n - 1 - i : i) * D;
        float s = 0.0f;
        for (int d = 0; d < D; d++)
            s += q[d] * k[d];
        p[i] = s * scale;
        m = p[i] > m ? p[i] : m;
    }
    if (md->no_max)
        m = 0.0f;
    float acc[D] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float *v = keys + (md->reverse ? n - 1 - i : i) * D;
        float w = expf(p[i] - m);
        l += w;
        if (md->p_bf16)
            w = dsv4_round_bf16(w);
        for (int d = 0; d < D; d++)
            acc[d] = md->acc_bf16 ? dsv4_round_bf16(acc[d] + w * v[d]) : acc[d] + w * v[d];
    }
    if (md->sink == SINK_IGNORED)
        sink = -INFINITY;
    else if (md->sink == SINK_TWICE)
        sink += logf(2.0f); /* e^sink added in the split merge and again at the end */
    const float mf = md->no_max ? 0.0f : (m > sink ? m : sink);
    const float alpha = expf(m - mf), lf = l * alpha + expf(sink - mf);
    for (int d = 0; d < D; d++)
        out[d] = lf > 0.0f ? acc[d] * alpha / (lf > 1e-30f ? lf : 1e-30f) : 0.0f;
}

/* The model over the case's inputs (variant v's rule), stored as bf16. */
static int run_model(mut_call *m, const attn_model *md, int v)
{
    dsv4_paged_args pa;
    dsv4_tensor *o;
    int rc;
    if ((rc = attn_args(m, v, &pa, m->st)) || (rc = mut_need(m, &m->out, "output", &o)))
        return rc;
    const dsv4_attn_args *a = &pa.a;
    const int64_t qs = md->q_stride ? md->q_stride : D;
    float *keys = NULL, *p = NULL, q[D], out[D];
    int64_t cap = 0, n = 0;
    for (int64_t t = 0; !rc && t < a->T; t++) {
        if ((rc = gather(a, md, t, &keys, &cap, &n, m->st)))
            break;
        float *np = realloc(p, (size_t)(n + 1) * sizeof *p);
        if (!np) {
            rc = dsv4_fail(m->st, DSV4_ERUNTIME, "out of memory");
            break;
        }
        p = np;
        for (int64_t h = 0; h < a->H; h++) {
            for (int d = 0; d < D; d++)
                q[d] = dsv4_bf16_to_f32(a->q[t * a->H * D + h * qs + d]);
            const float sink = a->attn_sink ? a->attn_sink[h] : -INFINITY;
            head(a, md, q, keys, n, sink, p, out);
            for (int d = 0; d < D; d++)
                ((uint16_t *)o->data)[(t * a->H + h) * D + d] = dsv4_bf16_from_f32(out[d]);
        }
    }
    free(keys), free(p);
    return rc;
}

static int model(mut_call *m, attn_model md)
{
    return run_model(m, &md, m->variant);
}

/* ---- the attention mutants ---- */

/* Correct kernels (must pass): p kept in fp32, p rounded to bf16 as the
 * ROCm kernels do, and the keys summed in another order. */
int mut_attn_model_fp32_p(mut_call *m) { return model(m, (attn_model){0}); }
int mut_mla_model_fp32_p(mut_call *m) { return model(m, (attn_model){0}); }
int mut_attn_model_bf16_p(mut_call *m) { return model(m, (attn_model){.p_bf16 = 1}); }
int mut_decode_model_bf16_p(mut_call *m) { return model(m, (attn_model){.p_bf16 = 1}); }
int mut_attn_model_reversed(mut_call *m) { return model(m, (attn_model){.reverse = 1}); }

/* One planted bug each. */
int mut_attn_sink_ignored(mut_call *m) { return model(m, (attn_model){.sink = SINK_IGNORED}); }
int mut_decode_sink_twice(mut_call *m) { return model(m, (attn_model){.sink = SINK_TWICE}); }
int mut_attn_no_max_subtraction(mut_call *m) { return model(m, (attn_model){.no_max = 1}); }
int mut_attn_acc_bf16(mut_call *m) { return model(m, (attn_model){.acc_bf16 = 1}); }
int mut_attn_last_block_skipped(mut_call *m) { return model(m, (attn_model){.skip_tail = 1}); }
int mut_decode_nan_not_scrubbed(mut_call *m) { return model(m, (attn_model){.keep_nan = 1}); }
int mut_attn_neg1_reads_row0(mut_call *m) { return model(m, (attn_model){.neg1_row0 = 1}); }
int mut_attn_head_stride_448(mut_call *m) { return model(m, (attn_model){.q_stride = DSV4_NOPE_DIM}); }
int mut_mla_extra_segment_dropped(mut_call *m) { return model(m, (attn_model){.one_segment = 1}); }

/* fp8=fnuz: the SWA cache read as OCP e4m3fn (every value off by 2x). */
int mut_decode_fnuz_read_as_ocp(mut_call *m)
{
    attn_model md = {0};
    return run_model(m, &md, mut_variant(m, "default"));
}

/* The ideal, rounded to bf16, then one ulp up (toward +inf) on every
 * element: a one-sided bias, which the sign test sees. */
int mut_attn_bias_1ulp(mut_call *m) { return mut_run_reference_shifted_up(m, "output"); }
int mut_decode_bias_1ulp(mut_call *m) { return mut_run_reference_shifted_up(m, "output"); }
/* The same one ulp away from zero: every magnitude up, a row scale error. */
int mut_attn_magnitude_1ulp(mut_call *m) { return mut_run_reference_biased(m, "output"); }
int mut_decode_magnitude_1ulp(mut_call *m) { return mut_run_reference_biased(m, "output"); }

/* ---- the inverse-RoPE epilogues ---- */

/* NeoX pairs (k, k + 32) instead of GPT-J's (2k, 2k + 1), same fp32
 * inverse rotation and bf16 store. */
int mut_rope_neox_pairs(mut_call *m)
{
    dsv4_tensor *pos, *cs, *o;
    int rc = mut_run_reference(m);
    if (rc || (rc = mut_need(m, &m->in, "positions", &pos)) || (rc = mut_need(m, &m->in, "cos_sin_cache", &cs)) ||
        (rc = mut_need(m, &m->out, "o", &o)))
        return rc;
    dsv4_tensor *oin = mut_in(m, "o");
    const int64_t T = o->shape[0], H = o->shape[1], rotated = mut_int(m, "rotated");
    const int rd = (int)mut_int(m, "rope_head_dim"), half = rd / 2;
    for (int64_t t = rotated; t < T; t++) {
        const float *row = (const float *)cs->data + ((const int64_t *)pos->data)[t] * rd;
        for (int64_t h = 0; h < H; h++) {
            const uint16_t *x = (const uint16_t *)oin->data + (t * H + h) * D + (D - rd);
            uint16_t *y = (uint16_t *)o->data + (t * H + h) * D + (D - rd);
            for (int k = 0; k < half; k++) {
                const float c = row[k], s = row[half + k];
                const float e = dsv4_bf16_to_f32(x[k]), od = dsv4_bf16_to_f32(x[k + half]);
                y[k] = dsv4_bf16_from_f32(e * c + od * s);
                y[k + half] = dsv4_bf16_from_f32(od * c - e * s);
            }
        }
    }
    return DSV4_OK;
}

/* Positions off by one: row pos - 1 of the cos/sin table (0 stays 0). */
int mut_rope_positions_off1(mut_call *m) { return mut_run_reference_positions_off1(m); }

/* The rows the decode epilogue already rotated are rotated again. */
int mut_rope_rotated_ignored(mut_call *m)
{
    return mut_run_reference_with_int(m, "rotated", 0);
}

/* The forward rotation where the inverse is asked for (sin's sign). */
static int plant_rope_mxfp8_forward_rotation(mut_call *m, dsv4_tensor *cs)
{
    (void)m;
    const int64_t P = cs->shape[0], rd = cs->shape[1];
    float *x = cs->data;
    for (int64_t p = 0; p < P; p++)
        for (int64_t k = rd / 2; k < rd; k++)
            x[p * rd + k] = -x[p * rd + k];
    return DSV4_OK;
}
int mut_rope_mxfp8_forward_rotation(mut_call *m)
{
    return mut_run_reference_on(m, "cos_sin_cache", plant_rope_mxfp8_forward_rotation);
}

/* The default's fp32-log2 scale rule computed exactly (log2=exact). */
int mut_rope_mxfp8_log2_exact(mut_call *m) { return mut_run_reference_as(m, "log2=exact"); }
/* The default's ceil scale rule replaced by the older floor rule. */
int mut_rope_mxfp8_scale_floor(mut_call *m) { return mut_run_reference_as(m, "scale_rule=floor"); }
