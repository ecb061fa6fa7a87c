/* policy.c - the policy constructors and bound terms (policy.h). */
#define _POSIX_C_SOURCE 200809L
#include "policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ref/numerics.h"

/* Every constructor starts from a zeroed policy of its kind. */
static void policy_start(dsv4_policy *pol, dsv4_cmp_kind kind, dsv4_dtype out_dtype)
{
    memset(pol, 0, sizeof *pol);
    pol->kind = kind;
    pol->output_dtype = out_dtype;
}

void dsv4_policy_exact(dsv4_policy *pol, const char *why)
{
    policy_start(pol, DSV4_CMP_EXACT, DSV4_DT_NONE);
    snprintf(pol->rule, sizeof pol->rule, "exact: %s", why);
}

void dsv4_policy_float(dsv4_policy *pol, dsv4_dtype out_dtype, const char *rule)
{
    policy_start(pol, DSV4_CMP_FLOAT, out_dtype);
    pol->nan = DSV4_NAN_MATCH;
    snprintf(pol->rule, sizeof pol->rule, "%s", rule);
}

void dsv4_policy_sign_test(dsv4_policy *pol)
{
    pol->sign_test = 1;
    const size_t len = strlen(pol->rule);
    snprintf(pol->rule + len, sizeof pol->rule - len, "; sign test over the last axis, |S| <= %.1f",
             DSV4_SIGN_TEST_T);
}

void dsv4_policy_mx(dsv4_policy *pol, const char *companion, int block, const char *why)
{
    policy_start(pol, DSV4_CMP_MX, DSV4_DT_NONE);
    pol->block = block;
    snprintf(pol->companion, sizeof pol->companion, "%s", companion);
    snprintf(pol->rule, sizeof pol->rule, "mx: %s", why);
}

void dsv4_policy_index_set(dsv4_policy *pol, const char *scores, double rtol, const char *what)
{
    policy_start(pol, DSV4_CMP_INDEX_SET, DSV4_DT_NONE);
    pol->rtol = rtol;
    snprintf(pol->companion, sizeof pol->companion, "%s", scores);
    snprintf(pol->rule, sizeof pol->rule,
             "index_set: %s as sets, -1 padding apart; a difference is forgiven within %.3g x max|%s| of the row "
             "of its k-th score (the logits error bound: the kernel may order such scores either way)",
             what, rtol, scores);
}

double dsv4_gamma32(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

double dsv4_bf16_store_bound(double e, double delta)
{
    return dsv4_ulp(DSV4_BF16, fabs(e) + delta) + delta;
}
