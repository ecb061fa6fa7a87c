/* soundness.h - are the float bounds sound, with margin, and still tight?
 *
 * For every op with a derived float bound, a model of a correct kernel
 * (a second formulation written here: fp32 arithmetic in an order the
 * reference does not use, with the rounding points the ROCm kernels have;
 * or the op's own faithful variant where one exists) runs on many seeded
 * inputs of random shapes, and its outputs go through the op's policy,
 * mask and bound exactly as `dsv4check run` compares them.  Per op:
 *  - worst: the largest err/bound over every element of every case (float
 *    outputs; for outputs with a flip budget, used / allowed), which must
 *    stay <= SND_MARGIN: a correct kernel never comes near a false alarm;
 *  - bias: the reference output moved up by one bf16 ulp (for MX and byte
 *    outputs: the model's fp32 values moved up one bf16 ulp before they
 *    are quantized), which must fail in at least one case: the bound is not
 *    so loose that a systematic one-ulp error slips through.
 * Used by tests/soundness.c (`make soundness`, the full table) and
 * tests/test_soundness.c (a slice in the unit tests).  Derivations of the
 * bounds: docs/semantics/ (each op's page). */
#ifndef DSV4_TESTS_SOUNDNESS_H
#define DSV4_TESTS_SOUNDNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compare/compare.h"
#include "../harness/runner.h"
#include "../ops/attention/attention.h"
#include "../ops/ops.h"
#include "../ref/numerics.h"

#define SND_MARGIN 0.8
#define SND_MAX_PARAMS 16

/* ---- the case parameters a shape function picks ------------------------ */

typedef struct snd_params {
    int n;
    char name[SND_MAX_PARAMS][DSV4_NAME_MAX];
    char value[SND_MAX_PARAMS][256];
} snd_params;

static void snd_set(snd_params *p, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void snd_set(snd_params *p, const char *name, const char *fmt, ...)
{
    if (p->n >= SND_MAX_PARAMS)
        return;
    snprintf(p->name[p->n], sizeof p->name[p->n], "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->value[p->n], sizeof p->value[p->n], fmt, ap);
    va_end(ap);
    p->n++;
}

/* An integer in [lo, hi] and a pick from a list. */
static int64_t snd_int(dsv4_rng *r, int64_t lo, int64_t hi) { return dsv4_rng_range(r, lo, hi + 1); }
#define SND_PICK(r, arr) ((arr)[snd_int((r), 0, (int64_t)(sizeof(arr) / sizeof((arr)[0])) - 1)])

/* A log-uniform float in [lo, hi]. */
static double snd_log_uniform(dsv4_rng *r, double lo, double hi)
{
    return exp(log(lo) + (log(hi) - log(lo)) * dsv4_rng_uniform(r));
}

/* "[a, b, c]" of n random integers in [lo, hi]. */
static void snd_list(dsv4_rng *r, snd_params *p, const char *name, int n, int64_t lo, int64_t hi)
{
    char buf[256] = "[";
    for (int i = 0; i < n; i++) {
        size_t k = strlen(buf);
        snprintf(buf + k, sizeof buf - k, "%s%" PRId64, i ? ", " : "", snd_int(r, lo, hi));
    }
    strncat(buf, "]", sizeof buf - strlen(buf) - 1);
    snd_set(p, name, "%s", buf);
}

/* ---- the model interface ----------------------------------------------- */

/* What a model may vary per case (block sizes, summation orders, FMA
 * contraction, split counts), drawn from var; bias: add one bf16 ulp to
 * every value the kernel computes (before the quantization of MX and byte
 * outputs).  out is allocated by the op (alloc_outputs: in/out buffers
 * hold their inputs); exp is the reference, for the outputs a model does
 * not recompute (exact ones, outside the bound under test). */
typedef int (*snd_model_fn)(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                            const dsv4_tensors *exp, dsv4_tensors *out, dsv4_rng *var, int bias, dsv4_status *st);
/* The parameters of case k (held_out: the entry's special class). */
typedef void (*snd_shape_fn)(dsv4_rng *r, snd_params *p);

typedef struct snd_entry {
    const char *label;   /* table row: the op, or the op and a class of cases */
    const char *op;
    const char *variant;
    snd_shape_fn shape;
    snd_model_fn model;
    const char *model_doc;
    int cases;           /* make soundness */
    int bias_by_model;   /* 1: the bias mutant is the model with bias (MX / byte outputs) */
    const char *bias_only; /* else the reference moved up: this output only (NULL: every float output) */
} snd_entry;

typedef struct snd_result {
    int cases, failed, errors, bias_killed;
    double worst;
    double risk_use; /* the largest flips / codes at risk (snd_ratio) */
    double sign_worst; /* the largest |S| of the sign test (outputs whose policy runs it) */
    char worst_at[256];
    char error[512];
} snd_result;

/* ---- small numeric helpers of the models --------------------------------- */

/* The bf16 value one ulp above bf16(x) (toward +inf), as a float. */
static float snd_bf16_up(float x)
{
    uint16_t h = dsv4_bf16_from_f32(x);
    if (isnan(x) || h == 0x7F80u)
        return dsv4_bf16_to_f32(h);
    if (h == 0x8000u)
        h = 0x0001u; /* -0 -> the smallest positive subnormal */
    else if (h & 0x8000u)
        h--;
    else
        h++;
    return dsv4_bf16_to_f32(h);
}


/* fp32 dot product of n terms in one of several orders a kernel might use:
 * 0 sequential FMA, 1 sequential multiply-then-add, 2 four interleaved
 * FMA lanes added pairwise, 3 blocks of 32 summed separately then added
 * (a tiled reduction), 4 reversed sequential FMA. */
static float snd_dot(const float *a, const float *b, int64_t n, int64_t stride_b, int order)
{
    float s = 0.0f;
    switch (order) {
    case 1:
        for (int64_t i = 0; i < n; i++) {
            volatile float p = a[i] * b[i * stride_b]; /* no contraction */
            s = s + p;
        }
        return s;
    case 2: {
        float l[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < n; i++)
            l[i % 4] = fmaf(a[i], b[i * stride_b], l[i % 4]);
        return (l[0] + l[1]) + (l[2] + l[3]);
    }
    case 3:
        for (int64_t i0 = 0; i0 < n; i0 += 32) {
            float t = 0.0f;
            for (int64_t i = i0; i < n && i < i0 + 32; i++)
                t = fmaf(a[i], b[i * stride_b], t);
            s += t;
        }
        return s;
    case 4:
        for (int64_t i = n - 1; i >= 0; i--)
            s = fmaf(a[i], b[i * stride_b], s);
        return s;
    default:
        for (int64_t i = 0; i < n; i++)
            s = fmaf(a[i], b[i * stride_b], s);
        return s;
    }
}
#define SND_DOT_ORDERS 5

/* ---- the driver ------------------------------------------------------------- */

/* The parameters of p completed for op (unknown names or bad values: an
 * error, the shape function is wrong). */
static int snd_make_params(const dsv4_op *op, const snd_params *p, dsv4_params *ps, dsv4_status *st)
{
    memset(ps, 0, sizeof *ps);
    for (int k = 0; k < p->n; k++) {
        const dsv4_param_spec *spec = dsv4_op_param(op, p->name[k]);
        dsv4_param v;
        if (!spec)
            return dsv4_fail(st, DSV4_EINPUT, "%s has no parameter %s", op->name, p->name[k]);
        int rc = dsv4_param_parse(spec, p->value[k], &v, st);
        if (rc || (rc = dsv4_params_set(ps, &v, st)))
            return rc;
    }
    int rc = dsv4_op_complete_params(op, ps, "soundness", st);
    if (!rc && op->resolve)
        rc = op->resolve(ps, st);
    return rc;
}

/* How close output k of a model run came to failing: err/bound (float),
 * used / allowed of a budget (exact, mx), 0 or inf for an exact output
 * without one; a FAIL verdict is inf whatever the ratio.  A budget counted
 * code by code from the inputs (an MX output of an op with a bound
 * callback: the codes "at risk" of one rounding flip) is reported apart
 * (risk_use): a correct kernel may flip every code at risk, so its margin
 * lies in the risk radius (a worst case of the kernel's error), not in the
 * count. */
static double snd_ratio(const dsv4_policy *pol, const dsv4_cmp_result *r)
{
    if (r->verdict == DSV4_FAIL)
        return INFINITY;
    if (pol->kind == DSV4_CMP_FLOAT)
        return r->worst_ratio;
    if (pol->budget > 0 && r->budget_compared > 0)
        return (double)r->budget_bad / (pol->budget * (double)r->budget_compared);
    return r->bad ? INFINITY : 0.0;
}

/* Compares every output of act with exp as the runner does (policy, mask,
 * bound, companion); *worst gets the largest snd_ratio, where names it.
 * Returns DSV4_OK and *fails = the count of failing outputs. */
static int snd_compare(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensors *exp,
                       const dsv4_tensors *act, double *worst, double *risk_use, double *sign, char *where, size_t wlen,
                       int *fails, dsv4_status *st)
{
    *worst = 0;
    *sign = 0;
    *risk_use = 0;
    where[0] = '\0';
    *fails = 0;
    for (int k = 0; k < act->n; k++) {
        const dsv4_tensor *a = &act->t[k], *e = dsv4_tensors_get(exp, a->name);
        const int64_t n = dsv4_tensor_numel(a);
        dsv4_policy pol;
        dsv4_cmp_result res;
        uint8_t *mask = NULL;
        double *bound = NULL;
        int rc = e ? op->policy(c, in, a->name, &pol, st) : dsv4_fail(st, DSV4_EINPUT, "no expected %s", a->name);
        if (!rc && op->mask) {
            mask = malloc((size_t)(n + 1));
            rc = mask ? op->mask(c, in, a->name, mask, n, st) : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        }
        if (!rc && op->bound && (pol.kind == DSV4_CMP_FLOAT || pol.kind == DSV4_CMP_MX)) {
            bound = calloc((size_t)(n + 1), sizeof *bound);
            rc = bound ? op->bound(c, in, a->name, bound, n, st) : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        }
        dsv4_cmp_aux aux = {NULL, NULL, bound, NULL};
        if (!rc && pol.companion[0]) {
            aux.expected = dsv4_tensors_get(exp, pol.companion);
            aux.actual = dsv4_tensors_get(act, pol.companion);
            if (!aux.expected)
                aux.expected = dsv4_tensors_get(in, pol.companion);
        }
        if (!rc)
            rc = dsv4_compare(e, a, &pol, mask, NULL, NULL, &aux, &res, st);
        free(mask), free(bound);
        if (rc)
            return rc;
        const double ratio = snd_ratio(&pol, &res);
        *fails += res.verdict == DSV4_FAIL;
        if (pol.sign_test && fabs(res.sign_stat) > *sign)
            *sign = fabs(res.sign_stat);
        if (op->bound && pol.kind == DSV4_CMP_MX && pol.budget > 0 && res.verdict != DSV4_FAIL) {
            *risk_use = ratio > *risk_use ? ratio : *risk_use;
            if (!where[0])
                snprintf(where, wlen, "codes only (see the risk flips)");
            continue;
        }
        if (ratio > *worst || (k == 0 && ratio == 0)) {
            *worst = ratio;
            char idx[96] = "", loc[160] = "";
            const int64_t flat = res.has_worst ? res.worst.flat : res.worst_ratio_flat;
            if (flat >= 0) {
                dsv4_index_str(e, flat, idx, sizeof idx);
                if (op->locate)
                    op->locate(c, in, a->name, flat, loc, sizeof loc);
            }
            snprintf(where, wlen, "%s%s%s%s%s%s%s", a->name, idx, loc[0] ? " (" : "", loc, loc[0] ? ")" : "",
                     res.message[0] ? ": " : "", res.message);
        }
    }
    return DSV4_OK;
}

/* The expected outputs moved up one bf16 ulp, in the kernel's dtypes (the
 * bias mutant of float outputs; only: the one output to move, NULL: every
 * float output; the others as the reference has them). */
static int snd_bias_of_reference(const dsv4_tensors *exp, dsv4_tensors *act, const char *only, dsv4_status *st)
{
    (void)st;
    for (int k = 0; k < act->n; k++) {
        dsv4_tensor *a = &act->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(exp, a->name);
        const int64_t n = dsv4_tensor_numel(a);
        const int is_float = (a->dtype == DSV4_BF16 || a->dtype == DSV4_F32 || a->dtype == DSV4_F64) &&
                             (!only || !strcmp(only, a->name));
        if (!is_float) { /* codes, bytes, indices: as the reference has them */
            memcpy(a->data, e->data, a->nbytes);
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            const double v = dsv4_tensor_get(e, i);
            dsv4_tensor_set(a, i, a->dtype == DSV4_BF16 ? (double)snd_bf16_up((float)v)
                                                        : v + dsv4_ulp(DSV4_BF16, v));
        }
    }
    return DSV4_OK;
}

/* Case `k` of entry en: its inputs, the reference, the model and the bias
 * mutant; folds the outcome into res. */
static void snd_run_case(const snd_entry *en, uint64_t k, snd_result *res)
{
    const dsv4_op *op = dsv4_op_find(en->op);
    const int v = op ? dsv4_op_variant(op, en->variant) : -1;
    dsv4_status st = {0};
    dsv4_params ps;
    snd_params p = {0};
    dsv4_tensors in = {0}, exp = {0}, act = {0}, mut = {0};
    dsv4_rng shape_rng, var;
    const uint64_t seed = 1000003u * (k + 1);
    dsv4_rng_init(&shape_rng, seed, en->label);
    dsv4_rng_init(&var, seed, "model variation");
    int rc = op && v >= 0 ? DSV4_OK : dsv4_fail(&st, DSV4_EINPUT, "unknown op or variant %s [%s]", en->op, en->variant);
    if (!rc) {
        en->shape(&shape_rng, &p);
        rc = snd_make_params(op, &p, &ps, &st);
    }
    const dsv4_opctx c = dsv4_opctx_make(op, &ps, v, seed);
    if (!rc && !(rc = op->generate(&c, &in, &st)) && !(rc = op->validate(&c, &in, &st)))
        rc = dsv4_reference_outputs(op, &c, &in, &exp, &st);
    if (!rc && !(rc = op->alloc_outputs(&c, &in, &act, &st)))
        rc = en->model(op, &c, &in, &exp, &act, &var, 0, &st);
    double worst = 0, risk_use = 0, sign = 0;
    int fails = 0;
    char where[256] = "";
    if (!rc)
        rc = snd_compare(op, &c, &in, &exp, &act, &worst, &risk_use, &sign, where, sizeof where, &fails, &st);
    if (!rc && !(rc = op->alloc_outputs(&c, &in, &mut, &st))) {
        dsv4_rng_init(&var, seed, "model variation");
        rc = en->bias_by_model ? en->model(op, &c, &in, &exp, &mut, &var, 1, &st) : snd_bias_of_reference(&exp, &mut, en->bias_only, &st);
    }
    double mworst = 0, mrisk = 0, msign = 0;
    int mfails = 0;
    char mwhere[256];
    if (!rc)
        rc = snd_compare(op, &c, &in, &exp, &mut, &mworst, &mrisk, &msign, mwhere, sizeof mwhere, &mfails, &st);
    res->cases++;
    if (rc) {
        res->errors++;
        if (!res->error[0])
            snprintf(res->error, sizeof res->error, "case %" PRIu64 ": %s", k, st.msg);
    } else {
        res->failed += fails > 0;
        res->risk_use = risk_use > res->risk_use ? risk_use : res->risk_use;
        res->sign_worst = sign > res->sign_worst ? sign : res->sign_worst;
        res->bias_killed += mfails > 0;
        if (worst > res->worst || res->cases == 1) {
            res->worst = worst > res->worst ? worst : res->worst;
            char pv[160] = "";
            for (int i = 0; i < p.n; i++) {
                size_t len = strlen(pv);
                snprintf(pv + len, sizeof pv - len, "%s%s=%s", i ? " " : "", p.name[i], p.value[i]);
            }
            snprintf(res->worst_at, sizeof res->worst_at, "case %" PRIu64 " (seed %" PRIu64 "): %s; %s", k, seed,
                     where, pv);
        }
    }
    dsv4_tensors_free(&in), dsv4_tensors_free(&exp), dsv4_tensors_free(&act), dsv4_tensors_free(&mut);
}

static snd_result snd_run(const snd_entry *en, int cases)
{
    snd_result r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < cases; k++)
        snd_run_case(en, (uint64_t)k, &r);
    return r;
}

/* The entry passes: no error, no failing case, worst <= SND_MARGIN (and
 * the sign test's largest |S| within SND_MARGIN of its threshold), and the
 * bias mutant failed somewhere. */
static int snd_ok(const snd_result *r)
{
    return r->errors == 0 && r->failed == 0 && r->worst <= SND_MARGIN &&
           r->sign_worst <= SND_MARGIN * DSV4_SIGN_TEST_T && r->bias_killed > 0;
}

#endif
