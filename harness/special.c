/* special.c - the lanes touched by NaN/Inf inputs, found by the reference
 * itself, and the split of a comparison into finite and special lanes
 * (special.h; docs/semantics/numerics.md A16). */
#define _POSIX_C_SOURCE 200809L
#include "special.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

const char *dsv4_special_mode_name(dsv4_special_mode m)
{
    return m == DSV4_SPECIAL_SEPARATE ? "separate" : "strict";
}

int dsv4_special_mode_parse(const char *s, dsv4_special_mode *out)
{
    if (strcmp(s, "strict") == 0)
        *out = DSV4_SPECIAL_STRICT;
    else if (strcmp(s, "separate") == 0)
        *out = DSV4_SPECIAL_SEPARATE;
    else
        return -1;
    return 0;
}

/* fp4 codes have no NaN or Inf; integer and byte tensors are not values. */
static int may_hold_special(const dsv4_tensor *t)
{
    return dsv4_dtype_is_float(t->dtype) && t->dtype != DSV4_F4E2M1X2;
}

static int has_special_input(const dsv4_tensors *in)
{
    for (int k = 0; k < in->n; k++) {
        const dsv4_tensor *t = &in->t[k];
        if (!may_hold_special(t))
            continue;
        const int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(dsv4_tensor_get(t, i)))
                return 1;
    }
    return 0;
}

/* The largest finite value of a float dtype (e8m0: byte 0xFE). */
static double max_finite(dsv4_dtype dt)
{
    switch (dt) {
    case DSV4_F64: return DBL_MAX;
    case DSV4_F32: return FLT_MAX;
    case DSV4_BF16: return ldexp(2.0 - ldexp(1.0, -7), 127);
    case DSV4_F16: return 65504.0;
    case DSV4_F8E4M3FN: return 448.0;
    case DSV4_F8E4M3FNUZ: return 240.0;
    case DSV4_F8E8M0: return ldexp(1.0, 127);
    default: return 0;
    }
}

/* A copy of in with every non-finite element of a float input replaced:
 * NaN by nan_fill, +-Inf by the dtype's largest finite value of that sign
 * (so that an infinity used as a bound, a -inf "no sink" or a -inf mask,
 * marks nothing: only lanes where it acts unlike a huge number do). */
static int replaced_inputs(const dsv4_tensors *in, double nan_fill, dsv4_tensors *out, dsv4_status *st)
{
    for (int k = 0; k < in->n; k++) {
        const dsv4_tensor *t = &in->t[k];
        dsv4_tensor *c;
        int rc = dsv4_tensors_add(out, t->name, t->dtype, t->ndim, t->shape, &c, st);
        if (rc)
            return rc;
        c->output_dtype = t->output_dtype;
        memcpy(c->data, t->data, t->nbytes);
        if (!may_hold_special(t))
            continue;
        const int64_t n = dsv4_tensor_numel(t);
        const double big = max_finite(t->dtype);
        for (int64_t i = 0; i < n; i++) {
            const double v = dsv4_tensor_get(t, i);
            if (isnan(v))
                dsv4_tensor_set(c, i, nan_fill);
            else if (isinf(v))
                dsv4_tensor_set(c, i, v > 0 ? big : -big);
        }
    }
    return DSV4_OK;
}

void dsv4_special_free(dsv4_special_lanes *sl)
{
    for (int k = 0; k < sl->n; k++)
        free(sl->lane[k]);
    memset(sl, 0, sizeof *sl);
}

static int lanes_index(const dsv4_special_lanes *sl, const char *output)
{
    for (int k = 0; k < sl->n; k++)
        if (strcmp(sl->name[k], output) == 0)
            return k;
    return -1;
}

const uint8_t *dsv4_special_lanes_of(const dsv4_special_lanes *sl, const char *output, int64_t *count)
{
    const int k = lanes_index(sl, output);
    if (k >= 0 && count)
        *count = sl->count[k];
    return k >= 0 ? sl->lane[k] : NULL;
}

/* The lanes of an output while they are being found (NULL: none). */
static uint8_t *lanes_named(dsv4_special_lanes *sl, const char *output)
{
    const int k = lanes_index(sl, output);
    return k >= 0 ? sl->lane[k] : NULL;
}

/* Lanes whose element differs bit for bit between the two reference runs. */
static int diff_lanes(const dsv4_tensors *ref, const dsv4_tensors *alt, dsv4_special_lanes *sl, dsv4_status *st)
{
    for (int k = 0; k < ref->n; k++) {
        const dsv4_tensor *a = &ref->t[k], *b = dsv4_tensors_get(alt, a->name);
        const int64_t n = dsv4_tensor_numel(a);
        const size_t es = dsv4_dtype_size(a->dtype);
        uint8_t *lane = calloc(n > 0 ? (size_t)n : 1, 1);
        if (!lane)
            return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        snprintf(sl->name[sl->n], sizeof sl->name[sl->n], "%s", a->name);
        sl->lane[sl->n++] = lane;
        const uint8_t *pa = a->data, *pb = b ? b->data : NULL;
        for (int64_t i = 0; i < n; i++)
            lane[i] = !pb || memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) != 0;
    }
    return DSV4_OK;
}

/* index_set compares whole rows: a row with a special lane is special. */
static void widen_rows(const dsv4_tensor *t, uint8_t *lane)
{
    const int64_t k = t->ndim ? t->shape[t->ndim - 1] : 1, rows = k ? dsv4_tensor_numel(t) / k : 0;
    for (int64_t r = 0; r < rows; r++) {
        int any = 0;
        for (int64_t i = 0; i < k && !any; i++)
            any = lane[r * k + i] != 0;
        if (any)
            memset(lane + r * k, 1, (size_t)k);
    }
}

/* Lanes compared together are special together: mx codes and their
 * scales are one block (a special code makes its scale special and the
 * reverse), an index_set row is one set. */
static int widen_lanes(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_case *cs,
                       const dsv4_tensors *ref, dsv4_special_lanes *sl, dsv4_status *st)
{
    for (int k = 0; k < ref->n; k++) {
        const dsv4_tensor *out = &ref->t[k];
        dsv4_policy pol;
        memset(&pol, 0, sizeof pol);
        int rc = op->policy(c, in, out->name, &pol, st);
        if (rc)
            return rc;
        if (cs)
            dsv4_case_apply_overrides(cs, out->name, &pol);
        if (pol.kind == DSV4_CMP_INDEX_SET)
            widen_rows(out, lanes_named(sl, out->name));
        const dsv4_tensor *scales = pol.companion[0] ? dsv4_tensors_get(ref, pol.companion) : NULL;
        if (pol.kind == DSV4_CMP_MX && scales &&
            (rc = dsv4_mx_widen_lanes(out, scales, &pol, lanes_named(sl, out->name), lanes_named(sl, scales->name),
                                      st)))
            return rc;
    }
    return DSV4_OK;
}

int dsv4_special_find(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_case *cs,
                      dsv4_special_lanes *sl, char *unknown, size_t unknown_len, dsv4_status *st)
{
    memset(sl, 0, sizeof *sl);
    if (unknown_len)
        unknown[0] = '\0';
    if (!has_special_input(in))
        return DSV4_OK;
    /* NaN as 0 first; as 1 where the validator refuses 0 (a scale input). */
    static const double fills[] = {0.0, 1.0};
    dsv4_tensors alt_in = {0};
    dsv4_status why = {0};
    int rc = DSV4_OK, valid = 0;
    for (int f = 0; !rc && !valid && f < 2; f++) {
        dsv4_tensors_free(&alt_in);
        memset(&why, 0, sizeof why);
        if (!(rc = replaced_inputs(in, fills[f], &alt_in, st)))
            valid = op->validate(c, &alt_in, &why) == DSV4_OK;
    }
    dsv4_tensors ref = {0}, alt = {0};
    dsv4_status run = {0};
    if (!rc && !valid) {
        snprintf(unknown, unknown_len, "NaN/Inf inputs replaced by finite values are refused: %s", why.msg);
    } else if (!rc) {
        int r1 = dsv4_reference_outputs(op, c, in, &ref, &run);
        int r2 = r1 ? r1 : dsv4_reference_outputs(op, c, &alt_in, &alt, &run);
        if (r1 == DSV4_ERUNTIME || r2 == DSV4_ERUNTIME) {
            rc = dsv4_fail(st, DSV4_ERUNTIME, "special lanes: %s", run.msg);
        } else if (r1 || r2) {
            snprintf(unknown, unknown_len, "the reference on NaN/Inf inputs replaced: %s", run.msg);
        } else if (!(rc = diff_lanes(&ref, &alt, sl, st)) && !(rc = widen_lanes(op, c, in, cs, &ref, sl, st))) {
            int any = 0;
            for (int k = 0; k < sl->n; k++) {
                const int64_t n = dsv4_tensor_numel(dsv4_tensors_get(&ref, sl->name[k]));
                for (int64_t i = 0; i < n; i++)
                    sl->count[k] += sl->lane[k][i] != 0;
                any |= sl->count[k] > 0;
            }
            if (!any) /* NaN/Inf inputs that no output depends on */
                dsv4_special_free(sl);
        }
    }
    if (rc)
        dsv4_special_free(sl);
    dsv4_tensors_free(&alt_in);
    dsv4_tensors_free(&ref);
    dsv4_tensors_free(&alt);
    return rc;
}

int dsv4_special_split_output(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                              const uint8_t *mask, dsv4_locate_fn locate, const void *locate_ctx,
                              const dsv4_cmp_aux *aux, const uint8_t *lanes, int64_t n_lanes,
                              dsv4_special_mode mode, dsv4_cmp_result *cmp, dsv4_special_split *split,
                              dsv4_status *st)
{
    memset(split, 0, sizeof *split);
    split->lanes = n_lanes;
    split->strict_verdict = cmp->verdict;
    const int64_t n = dsv4_tensor_numel(expected);
    uint8_t *finite = malloc(n > 0 ? (size_t)n : 1);
    dsv4_cmp_result *sides = malloc(2 * sizeof *sides);
    if (!finite || !sides) {
        free(finite);
        free(sides);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    for (int64_t i = 0; i < n; i++)
        finite[i] = !lanes[i];
    dsv4_cmp_aux side = *aux;
    side.lanes = finite;
    int rc = dsv4_compare(expected, actual, pol, mask, locate, locate_ctx, &side, &sides[0], st);
    side.lanes = lanes;
    if (!rc)
        rc = dsv4_compare(expected, actual, pol, mask, locate, locate_ctx, &side, &sides[1], st);
    if (!rc) {
        const dsv4_cmp_result *fin = &sides[0], *spe = &sides[1];
        split->finite_bad = fin->bad;
        split->special_bad = spe->bad;
        split->finite_verdict = fin->verdict;
        split->has_finite_first = fin->n_first > 0;
        if (fin->n_first)
            split->finite_first = fin->first[0];
        split->n_listed = spe->n_first < DSV4_SPECIAL_LISTED ? spe->n_first : DSV4_SPECIAL_LISTED;
        memcpy(split->listed, spe->first, (size_t)split->n_listed * sizeof *split->listed);
        if (mode == DSV4_SPECIAL_SEPARATE)
            *cmp = *fin;
    }
    free(finite);
    free(sides);
    return rc;
}
