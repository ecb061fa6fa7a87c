/* compare.h - tolerance policies, metrics and verdicts (README.md, "Tolerances").
 *
 * One call compares one output tensor (actual, produced by the implementation
 * under test) with its expected value (the reference's, or a golden's) under
 * a policy, and fills a dsv4_cmp_result: verdict, metric bundle, census,
 * first and worst mismatches with multi-index, and a hint where a bug pattern
 * is recognisable. */
#ifndef DSV4_COMPARE_H
#define DSV4_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "../ref/status.h"
#include "../ref/tensor.h"

typedef enum dsv4_cmp_kind {
    DSV4_CMP_EXACT = 0, /* integers, indices, codes, cache bytes: bit-exact */
    DSV4_CMP_FLOAT,     /* |a - e| <= atol + rtol*|e| + ulp*ULP(e) per element */
    DSV4_CMP_INDEX_SET, /* per-row sets of indices (top-k), order-free */
    DSV4_CMP_MX         /* MX-aware: scales exact, codes in quantization steps */
} dsv4_cmp_kind;

typedef enum dsv4_nan_policy {
    DSV4_NAN_MATCH = 0, /* NaN must be expected where it occurs, and vice versa */
    DSV4_NAN_IGNORE     /* elements where the expected value is NaN are skipped */
} dsv4_nan_policy;

typedef enum dsv4_verdict { DSV4_PASS = 0, DSV4_WARN = 1, DSV4_FAIL = 2 } dsv4_verdict;

typedef struct dsv4_policy {
    dsv4_cmp_kind kind;
    double atol;        /* absolute term */
    double rtol;        /* relative term, times |expected| */
    double ulp;         /* ULPs of output_dtype at |expected| */
    double max_nmse;    /* 0 = not checked */
    double min_cosine;  /* 0 = not checked */
    double budget;      /* fraction of elements allowed to exceed (warn), 0 = none */
    dsv4_nan_policy nan;
    dsv4_dtype output_dtype; /* the dtype whose ULP and step define the error unit */
    /* The companion tensor some kinds read beside this output: mx, the
     * scales output of the same quantization (block = elements per scale);
     * index_set, the scores tensor (an output or input) for tie-awareness.
     * The runner looks it up by name in the expected and actual sets. */
    char companion[DSV4_NAME_MAX];
    int block;
    char rule[256];     /* provenance: the formula or override that gave this */
    /* mx: allowed scale difference (e8m0 scales: binades; fp32: ULPs of fp32),
     * 0 = exact; and the scale layout: 0 [rows, W/block] row-major,
     * 1 transposed [W/block, rows] (transpose_scale).  See compare/mx.c. */
    double scale_tol;
    int scale_transposed;
    /* float: 1 = the sign test over the last axis (dsv4_policy_sign_test):
     * the op and its generator flip the sign of output lane d, for every
     * other index at once, when the signs of the inputs feeding d flip. */
    int sign_test;
} dsv4_policy;

/* The sign test's threshold: a correct kernel exceeds it with probability
 * at most 2 exp(-t^2 / 2) = 1.4e-9 (docs/semantics/numerics.md A17). */
#define DSV4_SIGN_TEST_T 6.5

#define DSV4_CMP_FIRST_N 8

typedef struct dsv4_mismatch {
    int64_t flat;
    char index[96];     /* "[t, h, d]" */
    double expected, actual, abs_err, rel_err, ulp_err;
    double tol;         /* the bound this element had to meet */
    char where[160];    /* decoded location for layouts (page, token, field) */
} dsv4_mismatch;

/* The record of element flat of t: its index, expected e, actual a, abs_err
 * and the relative error from them; ulp_err, tol and where are the caller's. */
dsv4_mismatch dsv4_mismatch_at(const dsv4_tensor *t, int64_t flat, double e, double a, double abs_err);

typedef struct dsv4_cmp_result {
    char output[DSV4_NAME_MAX];
    dsv4_verdict verdict;
    int64_t count, compared, bad;
    int64_t nan_expected, nan_actual, inf_expected, inf_actual, zero_expected, zero_actual;
    /* float: mismatches where one side is NaN or Inf and the other is not
     * the same value (counted in bad; they make max_abs, max_rel, max_ulp
     * and worst_ratio infinite, while nmse and cosine are over the lanes
     * where both sides are finite). */
    int64_t nonfinite_bad;
    /* The part of compared / bad that the budget may forgive (see
     * dsv4_compare): where the mask is DSV4_MASK_BUDGET, or everything. */
    int64_t budget_compared, budget_bad;
    double max_abs, max_rel, max_ulp, worst_ratio; /* ratio = error / bound */
    int64_t worst_ratio_flat;  /* float: the element of worst_ratio (-1: none compared) */
    double nmse, cosine;
    /* The sign test (pol->sign_test): S = sum_d E_d / sqrt(sum_d E_d^2),
     * E_d the summed signed error of last-axis lane d; 0 when not run or
     * every error is 0.  sign_lanes: the lanes d with a nonzero E_d. */
    double sign_stat;
    int64_t sign_lanes;
    int n_first;
    dsv4_mismatch first[DSV4_CMP_FIRST_N];
    int has_worst;
    dsv4_mismatch worst;
    char hint[256];
    char message[512];  /* one line: why it failed (shape, dtype, count) */
} dsv4_cmp_result;

/* A layout decoder names the location of a flat byte index for reports
 * (e.g. "page 3, token 17, scale byte 2").  ctx is the op's. */
typedef void (*dsv4_locate_fn)(const void *ctx, int64_t flat, char *buf, size_t len);

/* Companion tensors (see dsv4_policy.companion); NULL members when absent. */
typedef struct dsv4_cmp_aux {
    const dsv4_tensor *expected; /* the companion on the expected side (golden / reference) */
    const dsv4_tensor *actual;   /* the companion the implementation produced, if an output */
    const double *elem_bound;    /* float: per-element absolute term added to the bound;
                                    mx: extra steps per code element; or NULL */
    /* Lanes the comparison is restricted to (one byte per element of
     * expected, nonzero = compared), on top of the mask; NULL = all.  The
     * split of mismatches into finite and special lanes (harness/special.h)
     * compares once per side.  index_set: a row counts when any of its
     * lanes does; mx codes: a block (its scale too) when any of its lanes
     * does; mx scales: per scale. */
    const uint8_t *lanes;
} dsv4_cmp_aux;

/* The values of a comparison mask (one byte per element of expected). */
enum {
    DSV4_MASK_SKIP = 0,   /* unspecified: not compared */
    DSV4_MASK_EXACT = 1,  /* compared; a mismatch always counts */
    DSV4_MASK_BUDGET = 2  /* compared, and a mismatch may be forgiven within
                             pol->budget: bytes the op writes, where a correct
                             kernel's rounding may flip a code; bytes it never
                             writes are DSV4_MASK_EXACT */
};

/* Compare actual against expected.  mask (may be NULL) has one byte per
 * element of expected (DSV4_MASK_*).  The budget (exact and float kinds)
 * counts the mismatches, and is a fraction of the elements, where the mask
 * is DSV4_MASK_BUDGET, or of all elements when there is no mask; any other
 * mismatch fails.  Returns DSV4_OK; a
 * verdict of FAIL is a result, not an error.  Errors (DSV4_EINPUT) are only
 * for unusable arguments. */
int dsv4_compare(const dsv4_tensor *expected, const dsv4_tensor *actual,
                 const dsv4_policy *pol, const uint8_t *mask,
                 dsv4_locate_fn locate, const void *locate_ctx, const dsv4_cmp_aux *aux,
                 dsv4_cmp_result *res, dsv4_status *st);

/* The mx kind (compare/mx.c); dsv4_compare dispatches to it. */
int dsv4_compare_mx(const dsv4_tensor *expected, const dsv4_tensor *actual,
                    const dsv4_policy *pol, const uint8_t *mask, const dsv4_cmp_aux *aux,
                    dsv4_cmp_result *res, dsv4_status *st);
/* Widens lanes marked in an mx codes output and its scales to whole
 * blocks: a block is marked (every code lane and its scale) when any of
 * its code lanes or its scale is.  codes and scales as pol (an mx policy
 * of the codes output) pairs them; DSV4_EINPUT when they do not fit.
 * Nothing is done when codes is not a codes dtype (the scales' policy). */
int dsv4_mx_widen_lanes(const dsv4_tensor *codes, const dsv4_tensor *scales, const dsv4_policy *pol,
                        uint8_t *code_lanes, uint8_t *scale_lanes, dsv4_status *st);

/* The index_set kind (compare/index_set.c); dsv4_compare dispatches to it. */
int dsv4_compare_index_set(const dsv4_tensor *expected, const dsv4_tensor *actual,
                           const dsv4_policy *pol, const uint8_t *mask, const dsv4_cmp_aux *aux,
                           dsv4_cmp_result *res, dsv4_status *st);

const char *dsv4_verdict_name(dsv4_verdict v);
const char *dsv4_cmp_kind_name(dsv4_cmp_kind k);

/* Human-readable report of one result (several lines) to f. */
void dsv4_cmp_print(FILE *f, const dsv4_cmp_result *res, const dsv4_policy *pol);

#endif
