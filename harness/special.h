/* special.h - mismatches in lanes touched by NaN/Inf inputs, reported
 * apart from those in finite lanes (docs/semantics/numerics.md A16).
 *
 * A lane (an output element; mx: a whole block, codes and scale) is
 * "special" when the reference's value there changes once every
 * non-finite input element is replaced by a finite one.  A case whose
 * inputs are all finite has none and costs nothing extra.  Under
 * --special=strict (the default) the verdict is as if nothing were split;
 * under --special=separate it is the finite lanes' verdict, and the
 * special lanes' mismatches are listed, not counted. */
#ifndef DSV4_SPECIAL_H
#define DSV4_SPECIAL_H

#include <stdint.h>

#include "../compare/compare.h"
#include "cases.h"
#include "op.h"

typedef enum dsv4_special_mode {
    DSV4_SPECIAL_STRICT = 0,  /* every lane counts (production AMD behaviour) */
    DSV4_SPECIAL_SEPARATE = 1 /* the finite lanes make the verdict */
} dsv4_special_mode;

/* "strict" / "separate"; parse returns 0, or -1 for another word. */
const char *dsv4_special_mode_name(dsv4_special_mode m);
int dsv4_special_mode_parse(const char *s, dsv4_special_mode *out);

#define DSV4_SPECIAL_LISTED 4

/* One output's mismatches split by lane (set only when the case has
 * special lanes). */
typedef struct dsv4_special_split {
    int64_t lanes;                  /* this output's lanes touched by NaN/Inf inputs */
    int64_t finite_bad, special_bad; /* mismatches (dsv4_cmp_result.bad) on each side */
    dsv4_verdict strict_verdict;    /* every lane's verdict */
    dsv4_verdict finite_verdict;    /* the finite lanes' verdict */
    int has_finite_first;
    dsv4_mismatch finite_first;     /* the first mismatch in a finite lane */
    int n_listed;
    dsv4_mismatch listed[DSV4_SPECIAL_LISTED]; /* the first special-lane mismatches */
} dsv4_special_split;

/* What a case's judgement says about special lanes. */
typedef struct dsv4_case_special {
    dsv4_special_mode mode;
    int has_lanes;   /* some output has a special lane: the splits are set */
    int relied;      /* separate: the case passes only because special lanes are not counted */
    char unknown[256]; /* non-finite inputs whose lanes could not be found: why ("" = found) */
} dsv4_case_special;

/* The special lanes of every output of a case: one byte per element
 * (nonzero = special) of each output as alloc_outputs shapes it. */
typedef struct dsv4_special_lanes {
    int n;                              /* outputs with a lane array; 0 = nothing special */
    char name[DSV4_MAX_TENSORS][DSV4_NAME_MAX];
    uint8_t *lane[DSV4_MAX_TENSORS];
    int64_t count[DSV4_MAX_TENSORS];    /* special lanes of each */
} dsv4_special_lanes;

/* Finds the special lanes of op's outputs on inputs in (cs: the case's
 * tolerance overrides, or NULL: they pair mx codes with their scales).
 * Inputs all finite: sl->n = 0.  When the reference cannot be run on the
 * replaced inputs (the validator refuses 0 and 1 alike, or it fails),
 * sl->n = 0 and why is written to unknown; an error (out of memory) is
 * returned. */
int dsv4_special_find(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_case *cs,
                      dsv4_special_lanes *sl, char *unknown, size_t unknown_len, dsv4_status *st);
/* An output's lanes, or NULL. */
const uint8_t *dsv4_special_lanes_of(const dsv4_special_lanes *sl, const char *output, int64_t *count);
void dsv4_special_free(dsv4_special_lanes *sl);

/* Splits one output's comparison: *cmp holds the comparison of every lane
 * (made with pol, mask, locate and aux, which are reused); the finite and
 * the special lanes are compared apart into split.  separate: *cmp is
 * replaced by the finite lanes' comparison (its verdict is the output's). */
int dsv4_special_split_output(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_policy *pol,
                              const uint8_t *mask, dsv4_locate_fn locate, const void *locate_ctx,
                              const dsv4_cmp_aux *aux, const uint8_t *lanes, int64_t n_lanes,
                              dsv4_special_mode mode, dsv4_cmp_result *cmp, dsv4_special_split *split,
                              dsv4_status *st);

#endif
