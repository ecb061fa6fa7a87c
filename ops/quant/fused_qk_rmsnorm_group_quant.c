/* fused_qk_rmsnorm_group_quant.c - RMSNorm of q and kv, then the fp8 1x128
 * group quant of q; kv stays bf16 (docs/semantics/quant.md Q3.3).
 * Reference: ref/fp8quant.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/fp8quant.h"
#include "../../ref/numerics.h"
#include "../../ref/parallel.h"
#include "quant.h"

/* What a variant changes: the ideal RMSNorm (double) or the kernel's fp32
 * order. */
typedef struct fq_rule {
    int faithful;
} fq_rule;

static const dsv4_variant fq_variants[] = {
    {"default",
     "ideal: RMSNorm of q and kv in double; q's y rounded once to fp32, then the aiter HIP 1x128 "
     "group quant (docs/semantics/quant.md Q3.3 step 6: fl(amax*fl(1/448)), reciprocal, clamp, RNE); kv_out = the "
     "double ideal",
     &(const fq_rule){0}},
    {"mode=faithful",
     "faithful: the kernel's fp32 order (sequential FMA sum of squares, 1/sqrtf, fl(fl(x*rcp)*w)); "
     "kv_out = bf16(y); v_rsq / v_rcp approximations and the reduction tree are not emulated "
     "(docs/semantics/quant.md Q3.3)",
     &(const fq_rule){1}},
    {NULL, NULL, NULL},
};

static const char fq_params[] =
    "    m               int   = 4     rows (tokens)\n"
    "    n1              int   = 1536  q width (q_lora_rank), a multiple of 128\n"
    "    n2              int   = 512   kv width (head_dim 512)\n"
    "    q_epsilon       float = 1e-6  q RMSNorm epsilon\n"
    "    kv_epsilon      float = 1e-6  kv RMSNorm epsilon\n"
    "    group_size      int   = 128   q quant group (the seeds pass 128)\n"
    "    transpose_scale int   = 0     1: q_scale stored [n1/128, m] (the seeds pass 0)\n"
    "gen scale           float = 1     generator: standard deviation of q and kv\n";

static const char fq_inputs[] =
    "q         bfloat16  [m, n1] bfloat16 (qr)\n"
    "q_weight  bfloat16  [n1] bfloat16 q_norm weight\n"
    "kv        bfloat16  [m, n2] bfloat16\n"
    "kv_weight bfloat16  [n2] bfloat16 kv_norm weight\n";

static const char fq_outputs[] =
    "q_out   float8_e4m3fn            [m, n1] e4m3fn codes of the normed q\n"
    "q_scale float32                  [m, n1/128] fp32 group scales\n"
    "kv_out  bfloat16 golden=float64  [m, n2] normed kv (golden: the double ideal)\n";

static int fq_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    int64_t m = dsv4_params_int(ps, "m"), n1 = dsv4_params_int(ps, "n1"), n2 = dsv4_params_int(ps, "n2");
    if (m < 0 || n1 <= 0 || n2 <= 0 || n1 % 128 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "m, n1, n2 = %" PRId64 ", %" PRId64 ", %" PRId64
                         ": n1 must be a positive multiple of 128", m, n1, n2);
    const double sd = dsv4_params_float(ps, "scale");
    int64_t s_q[2] = {m, n1}, s_kv[2] = {m, n2};
    const char *names[4] = {"q", "q_weight", "kv", "kv_weight"};
    const int64_t *shapes[4] = {s_q, &n1, s_kv, &n2};
    for (int k = 0; k < 4; k++) {
        dsv4_tensor *t;
        int rc = dsv4_tensors_add(in, names[k], DSV4_BF16, (k & 1) ? 1 : 2, shapes[k], &t, st);
        if (rc)
            return rc;
        dsv4_rng rng;
        dsv4_rng_init(&rng, c->seed, names[k]);
        int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) { /* weights near 1 (trained norm weights), data normal */
            double v = (k & 1) ? 1.0 + 0.25 * dsv4_rng_normal(&rng) : sd * dsv4_rng_normal(&rng);
            ((uint16_t *)t->data)[i] = dsv4_bf16_from_f32((float)v);
        }
    }
    return DSV4_OK;
}

static int fq_inputs_get(const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensor **t, dsv4_status *st)
{
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_BF16, 2, &t[0], st)) ||
        (rc = dsv4_input(in, "q_weight", DSV4_BF16, 1, &t[1], st)) ||
        (rc = dsv4_input(in, "kv", DSV4_BF16, 2, &t[2], st)) ||
        (rc = dsv4_input(in, "kv_weight", DSV4_BF16, 1, &t[3], st)))
        return rc;
    const dsv4_params *ps = c->params;
    if (t[0]->shape[0] != dsv4_params_int(ps, "m") || t[0]->shape[1] != dsv4_params_int(ps, "n1") ||
        t[2]->shape[0] != t[0]->shape[0] || t[2]->shape[1] != dsv4_params_int(ps, "n2") ||
        t[1]->shape[0] != t[0]->shape[1] || t[3]->shape[0] != t[2]->shape[1])
        return dsv4_fail(st, DSV4_EINPUT, "inputs q [m, n1], q_weight [n1], kv [m, n2], kv_weight [n2] "
                         "do not match the params");
    if (dsv4_params_int(ps, "group_size") != 128 || t[0]->shape[1] % 128 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "group_size must be 128 and n1 a multiple of it (fp8 path)");
    if (!(dsv4_params_float(ps, "q_epsilon") > 0) || !(dsv4_params_float(ps, "kv_epsilon") > 0))
        return dsv4_fail(st, DSV4_EINPUT, "q_epsilon and kv_epsilon must be > 0");
    return DSV4_OK;
}

static int fq_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    for (int k = 0; !rc && k < 4; k++) {
        int64_t n = dsv4_tensor_numel(t[k]);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(dsv4_tensor_get(t[k], i)))
                return dsv4_fail(st, DSV4_EINPUT, "input '%s' element %" PRId64 " is not finite",
                                 t[k]->name, i);
    }
    return rc;
}

static int fq_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    int64_t m = t[0]->shape[0], G = t[0]->shape[1] / 128;
    int tr = dsv4_params_int(c->params, "transpose_scale") != 0;
    int64_t ss[2] = {tr ? G : m, tr ? m : G};
    dsv4_tensor *k;
    if ((rc = dsv4_quant_add_pair(out, "q_out", DSV4_F8E4M3FN, t[0]->shape, "q_scale", DSV4_F32, ss, st)) ||
        (rc = dsv4_tensors_add(out, "kv_out", DSV4_BF16, 2, t[2]->shape, &k, st)))
        return rc;
    dsv4_poison(k);
    return DSV4_OK;
}

typedef struct fq_job {
    int faithful;
    int64_t n1, n2;
    const uint16_t *q, *kv;
    const float *qw, *kw;    /* the weights in fp32 (faithful) */
    const double *qwd, *kwd; /* the same widened (the ideal) */
    double qe, ke;
    double *kv_out;
    uint8_t *q_out;
    float *q_scale;
    dsv4_fp8q_cfg cfg;
    int64_t m;
    float *scratch; /* per worker: x_q, x_kv, y_q and the q scales of FQ_ROWS rows (the ideal:
                     * x_q and x_kv together hold its serial sums' 16 rows, y_q one row) */
} fq_job;

#define FQ_ROWS 16  /* rows a step of the faithful norm (its fp32 rows in scratch) */
#define FQ_BATCH 64 /* rows a step of the ideal's rcp (its serial sums side by side) */

/* The faithful rows: the kernel's fp32 order on each row. */
static void fq_faithful_rows(const fq_job *j, int64_t row0, int64_t nr, float *xq, float *xk, float *yq)
{
    const int64_t n1 = j->n1, n2 = j->n2;
    double *kv = j->kv_out + row0 * n2; /* golden dtype float64 */
    dsv4_bf16_row_to_f32(j->q + row0 * n1, nr * n1, xq);
    dsv4_bf16_row_to_f32(j->kv + row0 * n2, nr * n2, xk);
    for (int64_t k = 0; k < nr; k++) {
        float *xkk = xk + k * n2; /* normed in place: each element is read before it is written */
        dsv4_rmsnorm_row_f32(xkk, j->kw, n2, (float)j->ke, xkk);
        for (int64_t i = 0; i < n2; i++) /* k_out = bf16(y_k) (docs/semantics/quant.md Q3.3 step 8) */
            kv[k * n2 + i] = dsv4_round_bf16(xkk[i]);
        dsv4_rmsnorm_row_f32(xq + k * n1, j->qw, n1, (float)j->qe, yq + k * n1);
    }
}

/* The 1x128 quant of nr fp32 rows y; scale (row, g) at g*m + row when
 * transposed. */
static int fq_quant_rows(const fq_job *j, int64_t row0, int64_t nr, const float *y, float *sc, dsv4_status *st)
{
    const int64_t n1 = j->n1, G = n1 / 128;
    dsv4_fp8q_cfg rowcfg = j->cfg;
    rowcfg.transpose_scale = 0;
    int rc = dsv4_fp8q_rows(y, nr, n1, &rowcfg, j->q_out + row0 * n1, sc, st);
    for (int64_t k = 0; !rc && k < nr; k++)
        for (int64_t g = 0; g < G; g++)
            j->q_scale[j->cfg.transpose_scale ? g * j->m + row0 + k : (row0 + k) * G + g] = sc[k * G + g];
    return rc;
}

/* Rows [r0, r1): the faithful FQ_ROWS at a time; the ideal FQ_BATCH at a
 * time, the rows' rcp first, then row by row q's fp32 y (one row, in L1),
 * its quant, and kv's double y, straight from the bf16 inputs. */
static int fq_rows(void *ctx, int64_t r0, int64_t r1, int worker, dsv4_status *st)
{
    const fq_job *j = ctx;
    const int64_t n1 = j->n1, n2 = j->n2, G = n1 / 128;
    float *xq = j->scratch + (size_t)worker * (size_t)(FQ_ROWS * (2 * n1 + n2 + G)), *xk = xq + FQ_ROWS * n1;
    float *yq = xk + FQ_ROWS * n2, *sc = yq + FQ_ROWS * n1;
    int rc = DSV4_OK;
    if (j->faithful) {
        for (int64_t row0 = r0; !rc && row0 < r1; row0 += FQ_ROWS) {
            const int64_t nr = r1 - row0 < FQ_ROWS ? r1 - row0 : FQ_ROWS;
            fq_faithful_rows(j, row0, nr, xq, xk, yq);
            rc = fq_quant_rows(j, row0, nr, yq, sc, st);
        }
        return rc;
    }
    for (int64_t row0 = r0; !rc && row0 < r1; row0 += FQ_BATCH) {
        const int64_t nr = r1 - row0 < FQ_BATCH ? r1 - row0 : FQ_BATCH;
        double rq[FQ_BATCH], rk[FQ_BATCH];
        /* scratch for 16 rows of the serial sums: 16 n1 and 16 n2 <= 16 (n1 + n2), at xq */
        dsv4_rmsnorm_bf16_rcp(j->q + row0 * n1, nr, n1, j->qe, rq, xq);
        dsv4_rmsnorm_bf16_rcp(j->kv + row0 * n2, nr, n2, j->ke, rk, xq);
        for (int64_t k = 0; !rc && k < nr; k++) {
            /* the quant reads y in fp32 (docs/semantics/quant.md Q3.3 step 6) */
            dsv4_rmsnorm_bf16_row_f32(j->q + (row0 + k) * n1, j->qwd, rq[k], n1, yq);
            rc = fq_quant_rows(j, row0 + k, 1, yq, sc, st);
            dsv4_rmsnorm_bf16_row(j->kv + (row0 + k) * n2, j->kwd, rk[k], n2, j->kv_out + (row0 + k) * n2);
        }
    }
    return rc;
}

static int fq_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const fq_rule *r = c->rule;
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    const int64_t m = t[0]->shape[0], n1 = t[0]->shape[1], n2 = t[2]->shape[1];
    const int64_t grain = 64;
    const int nw = dsv4_parallel_workers(m, grain);
    float *qw = dsv4_quant_as_f32(t[1], st), *kw = qw ? dsv4_quant_as_f32(t[3], st) : NULL;
    double *wd = malloc((size_t)(n1 + n2) * sizeof *wd);
    float *scratch = malloc((size_t)nw * (size_t)(FQ_ROWS * (2 * n1 + n2 + n1 / 128)) * sizeof(float) + 8);
    if (!qw || !kw || !wd || !scratch) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    } else {
        for (int64_t i = 0; i < n1 + n2; i++)
            wd[i] = i < n1 ? qw[i] : kw[i - n1];
        fq_job j = {r->faithful, n1, n2, t[0]->data, t[2]->data, qw, kw, wd, wd + n1,
                    dsv4_params_float(c->params, "q_epsilon"), dsv4_params_float(c->params, "kv_epsilon"),
                    dsv4_tensors_find(out, "kv_out")->data, dsv4_tensors_find(out, "q_out")->data,
                    dsv4_tensors_find(out, "q_scale")->data,
                    {DSV4_FP8Q_AITER_HIP, DSV4_FP8_E4M3FN, 448.0f, 128, dsv4_params_int(c->params, "transpose_scale") != 0},
                    m, scratch};
        rc = dsv4_parallel_for(m, grain, 0, fq_rows, &j, st);
    }
    free(qw), free(kw), free(wd), free(scratch);
    return rc;
}

/* Error analysis (docs/semantics/quant.md Q3.3).  The kernel computes y in
 * fp32: a sum of n squares (relative error <= (n/2) 2^-24 after the square
 * root halves it), an rsqrt within 1 ulp (2^-23), two products (2 * 2^-24),
 * and the ideal's own rounding of y to fp32 (2^-24): r_y = (n/2 + 5) 2^-24.
 * - kv_out (bf16) against the double ideal: r_y |y| / ulp_bf16(y) <= r_y 2^8
 *   ulps, plus the final rounding: half an ulp of the fp32 value, which is
 *   a whole ulp of the ideal when the two lie either side of a power of
 *   two, and which the golden's own rounding already reaches; one ulp
 *   (either bf16 neighbour of the fp32 value, as dsv4_bf16_store_bound)
 *   keeps a correct kernel clear of the bound and still fails one that is
 *   a whole ulp off (tests/soundness.h).
 * - q_scale = fl(amax fl(1/448)) inherits amax's r_y plus its own rounding:
 *   |ds| <= r_y 2^24 + 1 fp32 ulps (ulp(s)/s > 2^-24).
 * - q codes: q = y / s has relative error r_q <= 2 r_y + 2^-23 (v_rcp), so
 *   a code can move to its neighbour (1 step) exactly when the golden's q
 *   lies within r_q |q| of an e4m3 rounding boundary: such a code is "at
 *   risk" (fq_risk, from the golden's own fp32 q), every other code must
 *   stay, and the flip budget is the count at risk.  (A fraction 2 r_q 2^4
 *   of the codes, the density of boundaries, is only what random data
 *   averages: a few groups of 128 with two codes near a boundary exceed
 *   it, and a correct kernel failed 15 of 1,000 cases of tests/soundness.h.) */
static double fq_r_y(int64_t n) { return ((double)n / 2.0 + 5.0) * ldexp(1.0, -24); }

/* The fp32 rows y of q that the golden quantizes, [m, n1] (malloc'd; NULL:
 * out of memory, said in st): the variant's RMSNorm, as fq_reference. */
static float *fq_q_rows(const dsv4_opctx *c, const dsv4_tensor *const *t, dsv4_status *st)
{
    const fq_rule *r = c->rule;
    const int64_t m = t[0]->shape[0], n1 = t[0]->shape[1];
    float *q = dsv4_quant_as_f32(t[0], st), *w = dsv4_quant_as_f32(t[1], st);
    float *yq = malloc((size_t)(m * n1 + 1) * sizeof *yq);
    double *yd = malloc((size_t)(n1 + 1) * sizeof *yd);
    const double qe = dsv4_params_float(c->params, "q_epsilon");
    for (int64_t row = 0; q && w && yq && yd && row < m; row++) {
        if (r->faithful) {
            dsv4_rmsnorm_row_f32(q + row * n1, w, n1, (float)qe, yq + row * n1);
            continue;
        }
        dsv4_rmsnorm_row_ideal(q + row * n1, w, n1, qe, yd);
        for (int64_t i = 0; i < n1; i++)
            yq[row * n1 + i] = (float)yd[i];
    }
    if (!q || !w || !yq || !yd) {
        free(yq);
        yq = NULL;
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    free(q), free(w), free(yd);
    return yq;
}

/* The q codes at risk of one rounding flip (risk may be NULL: count only):
 * with the golden's scale and q = fl(y fl(1/s)) of the aiter HIP quant,
 * those whose e4m3 code differs between q (1 - r) and q (1 + r), r = r_q
 * widened by 2^-22 for the fp32 evaluation here (RNE and the clamp are
 * monotone, so a flip within r |q| changes one of the two ends). */
static int fq_risk(const dsv4_opctx *c, const dsv4_tensor *const *t, uint8_t *risk, int64_t *count, dsv4_status *st)
{
    const int64_t m = t[0]->shape[0], n1 = t[0]->shape[1];
    float *yq = fq_q_rows(c, t, st);
    if (!yq)
        return st->code;
    const double r = 2 * fq_r_y(n1) + ldexp(1.0, -23) + ldexp(1.0, -22);
    *count = 0;
    for (int64_t g0 = 0; g0 < m * n1; g0 += 128) {
        float amax = 1e-10f; /* the quant's floor (docs/semantics/quant.md Q3.1 step 1) */
        for (int i = 0; i < 128; i++)
            amax = fabsf(yq[g0 + i]) > amax ? fabsf(yq[g0 + i]) : amax;
        const float inv = 1.0f / (amax * (1.0f / 448.0f));
        for (int i = 0; i < 128; i++) {
            const double q = (double)(yq[g0 + i] * inv), lo = fmax(q - r * fabs(q), -448.0),
                         hi = fmin(q + r * fabs(q), 448.0);
            const int at = dsv4_fp8_from_f32((float)lo, DSV4_FP8_E4M3FN, 1) !=
                           dsv4_fp8_from_f32((float)hi, DSV4_FP8_E4M3FN, 1);
            *count += at;
            if (risk)
                risk[g0 + i] = (uint8_t)at;
        }
    }
    free(yq);
    return DSV4_OK;
}

static int fq_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    const fq_rule *r = c->rule;
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc)
        return rc;
    const double ry1 = fq_r_y(t[0]->shape[1]), ry2 = fq_r_y(t[2]->shape[1]);
    char rule[sizeof pol->rule];
    if (strcmp(output, "kv_out") == 0) {
        /* faithful: both sides are bf16 roundings of fp32 values within r_y: one flip. */
        const double ulp = r->faithful ? 1.0 : 1.0 + ry2 * 256.0;
        snprintf(rule, sizeof rule, "float: %.4g bf16 ulp = %s (r_y = (n2/2 + 5) 2^-24 = %.3g)", ulp,
                 r->faithful ? "one rounding flip of bf16(fp32 y)" : "1 (either neighbour of the fp32 y) + r_y 2^8",
                 ry2);
        dsv4_policy_float(pol, DSV4_BF16, rule);
        pol->ulp = ulp;
        return DSV4_OK;
    }
    /* Codes within their steps, measured with each side's own scale: a
     * scale off by scale_tol ulps (relative <= scale_tol 2^-23) moves a
     * value |q| < 17 ulp(q_expected) of e4m3 by < 17 scale_tol 2^-23 steps;
     * a code at risk may move one step more (fq_bound). */
    int64_t at_risk = 0;
    if ((rc = fq_risk(c, t, NULL, &at_risk, st)))
        return rc;
    const double n = (double)dsv4_tensor_numel(t[0]), scale_tol = ceil(ry1 * ldexp(1.0, 24)) + 1;
    const double ulp = 17.0 * scale_tol * ldexp(1.0, -23);
    snprintf(rule, sizeof rule,
             "fp32 y vs ideal (r_y = (n1/2 + 5) 2^-24 = %.3g): scales within %g fp32 ulp; a code within %.2g "
             "steps, 1 more if q +- (2 r_y + 2^-23)|q| straddles an e4m3 boundary: %" PRId64 " codes at risk = budget",
             ry1, scale_tol, ulp, at_risk);
    dsv4_policy_mx(pol, strcmp(output, "q_out") == 0 ? "q_scale" : "q_out", 128, rule);
    pol->scale_transposed = dsv4_params_int(c->params, "transpose_scale") != 0;
    pol->scale_tol = scale_tol;
    pol->ulp = ulp;
    pol->budget = n > 0 ? (double)at_risk / n : 0;
    return DSV4_OK;
}

/* q_out: one step more for each code at risk (compare/mx.c adds it to pol->ulp). */
static int fq_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    const dsv4_tensor *t[4];
    int rc = fq_inputs_get(c, in, t, st);
    if (rc || strcmp(output, "q_out"))
        return rc;
    if (n != dsv4_tensor_numel(t[0]))
        return dsv4_fail(st, DSV4_EINPUT, "fused_qk bound: %" PRId64 " elements for q_out", n);
    uint8_t *risk = malloc((size_t)(n + 1));
    int64_t count;
    rc = risk ? fq_risk(c, t, risk, &count, st) : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] = risk[i];
    free(risk);
    return rc;
}

const dsv4_op dsv4_op_fused_qk_rmsnorm_group_quant = {
    .name = "fused_qk_rmsnorm_group_quant",
    .summary = "RMSNorm of q and kv, then fp8 1x128 group quant of q; kv stays bf16",
    .source = "ROCm/aiter:csrc/kernels/fused_qk_rmsnorm_group_quant.cu@e4048607; seeds: "
              "vllm/models/deepseek_v41/amd/rocm.py _split_qkv_and_norm (docs/semantics/quant.md Q3.3)",
    DSV4_OP_TABLES(fq),
    .generate = fq_generate,
    .validate = fq_validate,
    .alloc_outputs = fq_alloc,
    .reference = fq_reference,
    .policy = fq_policy,
    .bound = fq_bound,
};
