/* mx.c - the `mx` comparison kind (README.md, "Tolerances"): MX-aware
 * comparison of block-quantized outputs.
 *
 * Two uses, told apart by the compared tensor's dtype:
 * - codes (float4_e2m1fn_x2, float8_e4m3fn, float8_e4m3fnuz) with the scales
 *   as companion (pol->companion, pol->block values per scale): every block's
 *   scale is compared first (e8m0 bytes in binades, fp32 scales in fp32
 *   ULPs; pol->scale_tol allowed); then every element is dequantized with its
 *   own side's scale (expected codes x expected scale, actual x actual) and
 *   the difference is measured in quantization steps: the spacing of the
 *   element grid at the expected code, times the expected scale; allowed:
 *   pol->ulp steps plus aux->elem_bound[element] where the op gives a
 *   per-element bound in steps (op->bound).  A "flip" is an element whose
 *   code differs.
 * - scales (float8_e8m0fnu, uint8 e8m0 bytes, float32): each scale is one
 *   block, compared as above and reported by block.
 * Verdict: FAIL if a scale differs by more than scale_tol, an element is more
 * than pol->ulp steps off, or flips (or scale differences) exceed
 * pol->budget as a fraction of elements (blocks); WARN if e8m0 scales differ
 * within scale_tol and budget; else PASS (flips within budget are the op's
 * expected rounding and are counted in the message). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ref/numerics.h"
#include "compare.h"

static int is_code_dtype(dsv4_dtype d)
{
    return d == DSV4_F4E2M1X2 || d == DSV4_F8E4M3FN || d == DSV4_F8E4M3FNUZ;
}

static int is_scale_dtype(dsv4_dtype d) { return d == DSV4_F8E8M0 || d == DSV4_U8 || d == DSV4_F32; }

static double scale_value(const dsv4_tensor *s, int64_t i)
{
    if (s->dtype == DSV4_F32)
        return (double)((const float *)s->data)[i];
    return dsv4_e8m0_to_f64(((const uint8_t *)s->data)[i]);
}

/* Distance of two scales: binades for e8m0 bytes, fp32 ULPs for fp32 (NaN
 * against a number: infinite). */
static double scale_dist(const dsv4_tensor *e, const dsv4_tensor *a, int64_t i)
{
    if (e->dtype != DSV4_F32) {
        int be = ((const uint8_t *)e->data)[i], ba = ((const uint8_t *)a->data)[i];
        if ((be == 0xFF) != (ba == 0xFF))
            return INFINITY;
        return fabs((double)(be - ba));
    }
    double ve = scale_value(e, i), va = scale_value(a, i);
    if (isnan(ve) || isnan(va))
        return isnan(ve) && isnan(va) ? 0 : INFINITY;
    return ve == va ? 0 : fabs(va - ve) / dsv4_ulp(DSV4_F32, ve);
}

static const char *scale_unit(const dsv4_tensor *s) { return s->dtype == DSV4_F32 ? "fp32 ulp" : "binade"; }

typedef struct mx_geom {
    int64_t rows, W, nb; /* rows, values per row, blocks per row */
    int block, transposed;
} mx_geom;

static int64_t scale_index(const mx_geom *g, int64_t r, int64_t j)
{
    return g->transposed ? j * g->rows + r : r * g->nb + j;
}

/* The blocks of codes e under scales se and sa (pol's block and layout);
 * -1 when the scales do not cover them. */
static int mx_geometry(const dsv4_tensor *e, const dsv4_tensor *se, const dsv4_tensor *sa, const dsv4_policy *pol,
                       mx_geom *g)
{
    const int fp4 = e->dtype == DSV4_F4E2M1X2;
    const int64_t last = e->ndim ? e->shape[e->ndim - 1] : 1;
    *g = (mx_geom){0, 0, 0, pol->block, pol->scale_transposed};
    if (pol->block <= 0)
        return -1;
    g->rows = last ? dsv4_tensor_numel(e) / last : 0;
    g->W = last * (fp4 ? 2 : 1);
    g->nb = g->W / g->block;
    if (g->W % g->block != 0 || dsv4_tensor_numel(se) != g->rows * g->nb ||
        dsv4_tensor_numel(sa) != g->rows * g->nb || se->dtype != sa->dtype)
        return -1;
    return 0;
}

/* Whether block (r, j) has a code lane in lanes (dsv4_cmp_aux.lanes). */
static int block_in_lanes(const mx_geom *g, int fp4, const uint8_t *lanes, int64_t r, int64_t j)
{
    const int64_t v0 = r * g->W + j * g->block;
    for (int i = 0; i < g->block; i++)
        if (lanes[fp4 ? (v0 + i) / 2 : v0 + i])
            return 1;
    return 0;
}

static void add_mismatch(dsv4_cmp_result *res, const dsv4_tensor *t, int64_t flat, double e,
                         double a, double err, double unit, double tol, const char *where)
{
    dsv4_mismatch m = dsv4_mismatch_at(t, flat, e, a, isnan(e - a) ? INFINITY : fabs(a - e));
    m.ulp_err = err;
    m.tol = tol * unit;
    snprintf(m.where, sizeof m.where, "%s", where);
    if (res->n_first < DSV4_CMP_FIRST_N)
        res->first[res->n_first++] = m;
    if (!res->has_worst || err > res->worst.ulp_err) {
        res->worst = m;
        res->has_worst = 1;
    }
}

/* Verdict, bad count and message.  scale_diff counts every block whose
 * scale differs, scale_bad those beyond scale_tol; codes is 0 for a
 * scales-only tensor (no flips or elements to report). */
static void finish(dsv4_cmp_result *res, const dsv4_policy *pol, int64_t scale_bad, int64_t scale_diff,
                   int64_t blocks, int64_t flips, int64_t elem_bad, int e8m0, int codes)
{
    const double budget = pol->budget;
    const int64_t scale_within = scale_diff - scale_bad;
    /* e8m0 scale differences are binade changes and count against the
     * budget; fp32 scales within scale_tol are the policy's tolerance itself
     * (an fp32 kernel differs from the double ideal by an ulp in most blocks). */
    const int flips_over = (double)flips > budget * (double)res->compared;
    const int scales_over = e8m0 && (double)scale_within > budget * (double)blocks;
    const int fail = scale_bad > 0 || elem_bad > 0 || flips_over || scales_over;
    res->verdict = fail ? DSV4_FAIL : (scale_within > 0 && e8m0) ? DSV4_WARN : DSV4_PASS;
    /* bad = what makes the verdict: scales beyond tolerance, elements beyond
     * their steps, and the forgivable differences once they exceed the budget. */
    res->bad = scale_bad + elem_bad + (flips_over ? flips : 0) + (scales_over ? scale_within : 0);
    /* what the budget forgives, of what: code flips of the elements (codes),
     * e8m0 scale changes within scale_tol of the blocks (scales) */
    res->budget_compared = codes ? res->compared : blocks;
    res->budget_bad = codes ? flips : e8m0 ? scale_within : 0;
    char part[256] = "";
    if (scale_diff) {
        size_t n = (size_t)snprintf(part, sizeof part, "%" PRId64 " of %" PRId64 " blocks' scales differ",
                                    scale_diff, blocks);
        if (pol->scale_tol > 0 && n < sizeof part)
            snprintf(part + n, sizeof part - n, " (%" PRId64 " beyond %g %s)", scale_bad, pol->scale_tol,
                     e8m0 ? "binades" : "fp32 ulps");
    }
    if (codes && (flips || elem_bad))
        snprintf(res->message, sizeof res->message,
                 "%s%s%" PRId64 " of %" PRId64 " codes flip (budget %.3g), %" PRId64 " elements beyond %g steps",
                 part, part[0] ? "; " : "", flips, res->compared, budget * (double)res->compared, elem_bad,
                 pol->ulp);
    else if (part[0])
        snprintf(res->message, sizeof res->message, "%s", part);
    if (scale_diff && !res->hint[0])
        snprintf(res->hint, sizeof res->hint,
                 "scales differ by whole binades: a different scale rule (ceil / floor / even, "
                 "fp32 log2 near a power of two) or an off-by-one exponent");
}

/* Scales only: one element per block. */
static int compare_scales(const dsv4_tensor *e, const dsv4_tensor *a, const dsv4_policy *pol,
                          const uint8_t *lanes, dsv4_cmp_result *res, dsv4_status *st)
{
    if (e->dtype != a->dtype && !(e->dtype != DSV4_F32 && a->dtype != DSV4_F32))
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': scale dtype %s, expected %s", e->name,
                         dsv4_dtype_name(a->dtype), dsv4_dtype_name(e->dtype));
    const int64_t n = dsv4_tensor_numel(e);
    const int64_t last = e->ndim ? e->shape[e->ndim - 1] : 1;
    int64_t bad = 0, diff = 0, blocks = 0;
    for (int64_t i = 0; i < n; i++) {
        if (lanes && !lanes[i])
            continue;
        blocks++;
        double d = scale_dist(e, a, i);
        res->compared++;
        res->nonfinite_bad += isinf(d) != 0; /* a NaN scale against a number */
        if (d > res->max_ulp)
            res->max_ulp = d;
        if (d == 0)
            continue;
        diff++;
        bad += d > pol->scale_tol;
        /* Row-major [rows, nb]: block (i / nb, i % nb); transposed [nb, rows]: swapped. */
        int64_t r = pol->scale_transposed ? i % last : i / last;
        int64_t j = pol->scale_transposed ? i / last : i % last;
        char where[160];
        snprintf(where, sizeof where, "block [%" PRId64 ", %" PRId64 "]: values [%" PRId64 ", %" PRId64
                 ") of row %" PRId64 "; %g %s", r, j, j * pol->block, (j + 1) * pol->block, r, d,
                 scale_unit(e));
        add_mismatch(res, e, i, scale_value(e, i), scale_value(a, i), d, 1.0, pol->scale_tol, where);
    }
    res->count = n;
    finish(res, pol, bad, diff, blocks, 0, 0, e->dtype != DSV4_F32, 0);
    return DSV4_OK;
}

static uint8_t code_at(const dsv4_tensor *t, int64_t v)
{
    const uint8_t *p = t->data;
    if (t->dtype != DSV4_F4E2M1X2)
        return p[v];
    return (v & 1) ? dsv4_e2m1_hi(p[v / 2]) : dsv4_e2m1_lo(p[v / 2]);
}

static double code_value(dsv4_dtype dt, uint8_t c)
{
    if (dt == DSV4_F4E2M1X2)
        return dsv4_e2m1_to_f32(c);
    return dsv4_fp8_to_f32(c, dt == DSV4_F8E4M3FN ? DSV4_FP8_E4M3FN : DSV4_FP8_E4M3FNUZ);
}

int dsv4_compare_mx(const dsv4_tensor *e, const dsv4_tensor *a, const dsv4_policy *pol,
                    const uint8_t *mask, const dsv4_cmp_aux *aux, dsv4_cmp_result *res,
                    dsv4_status *st)
{
    if (pol->block <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': mx policy needs block > 0", e->name);
    if (is_scale_dtype(e->dtype))
        return compare_scales(e, a, pol, aux ? aux->lanes : NULL, res, st);
    if (!is_code_dtype(e->dtype) || a->dtype != e->dtype)
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': mx comparison of %s against %s", e->name,
                         dsv4_dtype_name(a->dtype), dsv4_dtype_name(e->dtype));
    const dsv4_tensor *se = aux ? aux->expected : NULL, *sa = aux ? aux->actual : NULL;
    if (!se || !sa)
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': mx comparison needs scales '%s' on both sides",
                         e->name, pol->companion);
    const int fp4 = e->dtype == DSV4_F4E2M1X2;
    mx_geom g;
    if (mx_geometry(e, se, sa, pol, &g))
        return dsv4_fail(st, DSV4_EINPUT,
                         "output '%s': scales '%s' (%" PRId64 " and %" PRId64 " elements, %s/%s) do not "
                         "cover %" PRId64 " rows x %" PRId64 " blocks of %d",
                         e->name, pol->companion, dsv4_tensor_numel(se), dsv4_tensor_numel(sa),
                         dsv4_dtype_name(se->dtype), dsv4_dtype_name(sa->dtype), g.rows, g.nb, g.block);
    int64_t scale_bad = 0, scale_diff = 0, flips = 0, elem_bad = 0, blocks = 0;
    const uint8_t *lanes = aux->lanes;
    for (int64_t r = 0; r < g.rows; r++)
        for (int64_t j = 0; j < g.nb; j++) {
            if (lanes && !block_in_lanes(&g, fp4, lanes, r, j))
                continue;
            blocks++;
            int64_t si = scale_index(&g, r, j);
            double sd = scale_dist(se, sa, si), sve = scale_value(se, si), sva = scale_value(sa, si);
            char where[160];
            if (sd > 0) {
                scale_diff++;
                if (sd > pol->scale_tol) {
                    scale_bad++;
                    res->max_ulp = sd > res->max_ulp ? sd : res->max_ulp;
                    res->nonfinite_bad += isinf(sd) != 0;
                    snprintf(where, sizeof where, "block [%" PRId64 ", %" PRId64 "] scale %.9g, expected %.9g (%g %s)",
                             r, j, sva, sve, sd, scale_unit(se));
                    int64_t v0 = r * g.W + j * g.block;
                    add_mismatch(res, e, fp4 ? v0 / 2 : v0, sve, sva, INFINITY, 1.0, pol->scale_tol, where);
                }
            }
            /* A block whose scale is already a mismatch has its codes counted
             * (flips) but not measured in steps: under different scales every
             * element would differ, which says nothing more. */
            const int scale_off = sd > pol->scale_tol;
            for (int i = 0; i < g.block; i++) {
                int64_t v = r * g.W + j * g.block + i, flat = fp4 ? v / 2 : v;
                if (mask && !mask[flat])
                    continue;
                res->compared++;
                uint8_t ce = code_at(e, v), ca = code_at(a, v);
                double qe = code_value(e->dtype, ce), qa = code_value(e->dtype, ca);
                double de = qe * sve, da = qa * sva;
                if ((ce != ca) && !(isnan(qe) && isnan(qa)))
                    flips++;
                res->nan_expected += isnan(de) != 0;
                res->nan_actual += isnan(da) != 0;
                res->zero_expected += de == 0;
                res->zero_actual += da == 0;
                if (scale_off || (isnan(de) && isnan(da)) || de == da)
                    continue;
                double step = dsv4_ulp(e->dtype, qe) * sve;
                double err = isnan(de) || isnan(da) ? INFINITY : fabs(da - de) / step;
                res->nonfinite_bad += isnan(de) != isnan(da);
                if (err > res->max_ulp)
                    res->max_ulp = err;
                if (fabs(da - de) > res->max_abs || isnan(err))
                    res->max_abs = isinf(err) ? INFINITY : fabs(da - de);
                const double tol = pol->ulp + (aux->elem_bound ? aux->elem_bound[flat] : 0);
                if (!(err > tol))
                    continue;
                elem_bad++;
                snprintf(where, sizeof where,
                         "block [%" PRId64 ", %" PRId64 "] element %d (value %" PRId64 " of row %" PRId64
                         "): code 0x%02X, expected 0x%02X; %.3g steps",
                         r, j, i, j * g.block + i, r, ca, ce, err);
                add_mismatch(res, e, flat, de, da, err, step, tol, where);
            }
        }
    finish(res, pol, scale_bad, scale_diff, blocks, flips, elem_bad, se->dtype != DSV4_F32, 1);
    return DSV4_OK;
}

int dsv4_mx_widen_lanes(const dsv4_tensor *codes, const dsv4_tensor *scales, const dsv4_policy *pol,
                        uint8_t *code_lanes, uint8_t *scale_lanes, dsv4_status *st)
{
    mx_geom g;
    const int fp4 = codes->dtype == DSV4_F4E2M1X2;
    if (!is_code_dtype(codes->dtype)) /* the scales' own policy: widened from the codes' */
        return DSV4_OK;
    if (mx_geometry(codes, scales, scales, pol, &g))
        return dsv4_fail(st, DSV4_EINPUT, "output '%s': scales '%s' do not cover its blocks of %d", codes->name,
                         scales->name, pol->block);
    for (int64_t r = 0; r < g.rows; r++)
        for (int64_t j = 0; j < g.nb; j++) {
            const int64_t si = scale_index(&g, r, j), v0 = r * g.W + j * g.block;
            if (!scale_lanes[si] && !block_in_lanes(&g, fp4, code_lanes, r, j))
                continue;
            scale_lanes[si] = 1;
            for (int i = 0; i < g.block; i++)
                code_lanes[fp4 ? (v0 + i) / 2 : v0 + i] = 1;
        }
    return DSV4_OK;
}
