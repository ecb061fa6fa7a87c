/* perm_hint.h - "the output looks like a permutation" hints for float
 * comparisons: a layout bug (a shuffled weight read as plain, transposed
 * scales, swapped rows) moves values around instead of perturbing them. */
#ifndef DSV4_PERM_HINT_H
#define DSV4_PERM_HINT_H

#include <stdint.h>

#include "compare.h"

/* Generic (called from compare.c's float hint path when no other hint
 * fits): if the compared elements of actual, sorted, match those of
 * expected, sorted, within the policy's per-element bound (at least 1 ulp
 * of the output dtype), while elementwise they fail, writes a hint saying
 * actual is a permutation of expected.  Needs >= 2 mismatches. */
void dsv4_perm_hint(const dsv4_tensor *exp, const dsv4_tensor *act, const uint8_t *mask,
                    const dsv4_policy *pol, dsv4_cmp_result *res);

/* Op-assisted: alt[] is the output recomputed with one operand read through
 * a permutation (e.g. WQ through shuffle_weight's inverse); if every
 * element of actual is within bound[i] of alt[i], writes a hint naming the
 * permutation (why).  Returns 1 when it matched. */
int dsv4_operand_perm_hint(const dsv4_tensor *act, const double *alt, const double *bound, const char *why,
                           dsv4_cmp_result *res);

#endif
