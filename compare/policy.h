/* policy.h - every tolerance policy an op can declare, and the error terms
 * its bounds are built from.  Op files build their policies only through
 * these constructors, so that a policy kind means one thing everywhere and
 * a bound term (gamma_n, the bf16 store) is derived once
 * (docs/semantics/numerics.md, "Error bounds"). */
#ifndef DSV4_POLICY_H
#define DSV4_POLICY_H

#include "compare.h"

/* Bit-exact outputs: integers, indices, layouts, codes, cache bytes.
 * why is the reason shown in reports ("exact: <why>"). */
void dsv4_policy_exact(dsv4_policy *pol, const char *why);

/* Float outputs compared with a derived per-element bound: zeroed terms,
 * NaN must match, errors measured in ulps of out_dtype.  The caller sets the
 * atol/rtol/ulp terms it derived; rule is the formula, shown in reports. */
void dsv4_policy_float(dsv4_policy *pol, dsv4_dtype out_dtype, const char *rule);

/* Adds the sign test to a float policy (compare.h, docs/semantics/numerics.md
 * A17): only for an output whose last axis d has the symmetry it rests on
 * (flipping the signs of the inputs feeding lane d flips lane d of every
 * row, bit for bit, and the op's generator draws those signs fairly); a
 * one-sided error that every element's bound admits (a kernel rounding
 * up, a constant offset) then fails.  The rule text says so. */
void dsv4_policy_sign_test(dsv4_policy *pol);

/* MX quantization outputs: scales exact, codes within 0 steps unless the
 * caller loosens them.  companion is the other half of the pair (codes <->
 * scales), block the elements per scale; the rule reads "mx: <why>". */
void dsv4_policy_mx(dsv4_policy *pol, const char *companion, int block, const char *why);

/* Top-k index sets, order-free, -1 padding apart; a difference is forgiven
 * when the two scores lie within rtol x max|score| of the row (ties the
 * kernel may break either way).  scores names the companion tensor; what
 * names the compared tensor in the rule text. */
void dsv4_policy_index_set(dsv4_policy *pol, const char *scores, double rtol, const char *what);

/* gamma_n = n u / (1 - n u) with u = 2^-24 (Higham, Accuracy and Stability
 * of Numerical Algorithms, 3.1): the relative error of an fp32 sum or dot of
 * n + 1 terms in any order, as a multiple of the sum of absolute terms. */
double dsv4_gamma32(double n);

/* The bound of an fp32 value within delta of the ideal e, then stored as
 * bf16: 1 ulp_bf16(|e| + delta) + delta.  Rounding to nearest costs at most
 * half an ulp, and the golden's own rounding reaches it, so a bound of half
 * an ulp would put every correct kernel within a hair of a false alarm; one
 * ulp admits either bf16 neighbour of the kernel's value (a faithful
 * rounding) and still fails a kernel one ulp off wherever delta is below
 * half an ulp.  The ulp is taken at the larger magnitude so that a binade
 * crossing between e and the fp32 value is covered
 * (docs/semantics/numerics.md, "The bf16 store"). */
double dsv4_bf16_store_bound(double e, double delta);

#endif
