/* ops.h - what every op definition (ops/<family>/<op>.c) shares: the op
 * externs, read from ops.def, and the helpers of ops/common.c. */
#ifndef DSV4_OPS_H
#define DSV4_OPS_H

#include "../compare/policy.h"
#include "../harness/op.h"
#include "../harness/rng.h"

#define DSV4_OP(name) extern const dsv4_op dsv4_op_##name;
#include "ops.def"
#undef DSV4_OP

/* Floating-point operations of paged_mxfp4_mqa_logits: 2 * H * 128 per
 * (row, key below the row end) (ops/indexer/paged_mxfp4_mqa_logits.c; bench). */
double dsv4_indexer_logits_flops(const dsv4_params *ps, const dsv4_tensors *in);

/* Shared helpers of the op files (ops/common.c). */

/* Fill every byte of an output with a poison pattern, so that an element a
 * backend forgets to write is caught (and named) by the comparator. */
void dsv4_poison(dsv4_tensor *t);
/* Per-request lengths of a generated batch, from the generator parameters
 * query_lens and prefix_lens (absent: every prefix 0). */
typedef struct dsv4_req_shape {
    int64_t R, T;
    const int64_t *qlen;
    int64_t prefix[DSV4_PARAM_LIST_MAX];
} dsv4_req_shape;

/* Reads query_lens / prefix_lens; each length must lie in [0, max_query] /
 * [0, max_prefix].  broadcast: a one-entry prefix_lens applies to every
 * request (otherwise it must have one entry per request). */
int dsv4_req_shape_of(const dsv4_params *ps, int64_t max_query, int64_t max_prefix, int broadcast,
                      dsv4_req_shape *rs, dsv4_status *st);
/* The two generator parameters dsv4_req_shape_of reads, declared once for
 * every op whose generator builds a batch of requests; _BCAST where the op
 * passes broadcast = 1. */
#define DSV4_REQ_SHAPE_PARAMS                                                                \
    "gen query_lens  int[] required  generator: query tokens of each request\n"              \
    "gen prefix_lens int[] = []      generator: cached prefix of each request (default 0)\n"
#define DSV4_REQ_SHAPE_BCAST_PARAMS                                                                          \
    "gen query_lens  int[] required  generator: query tokens of each request\n"                              \
    "gen prefix_lens int[] = []      generator: cached prefix of each request (default 0; one entry: all)\n"
/* One token's top-k row as the indexer writes it: min(n, Wk) distinct
 * compressed indices from [0, n) in random order (partial Fisher-Yates over
 * scratch[0..n)), then -1 (docs/semantics/indices.md A6.1:
 * topk_indices_buffer holds local compressed indices).  row may be scratch
 * itself. */
void dsv4_fill_topk_row(dsv4_rng *rng, int32_t *row, int64_t Wk, int64_t n, int32_t *scratch);

/* A plain RoPE table as the generators make it: row p = cos | sin of
 * p * theta^(-2k/rd), k < rd/2, rounded to fp32 (docs/semantics/numerics.md
 * A1, docs/semantics/gemm.md A11 [S21]: SWA-only layers use rope_theta with
 * factor 1).  The references never recompute it: it is an input, stored in
 * the golden. */
void dsv4_gen_cos_sin(float *cache, int64_t P, int rd, double theta);
/* Defines fn, an op's validate callback for an op whose inputs reduce to
 * one args struct: read_args(c, in, &a, st), then the reference's own
 * check(&a, st). */
#define DSV4_VALIDATE_VIA_ARGS(fn, args_type, read_args, check)                                 \
    static int fn(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)                \
    {                                                                                           \
        args_type a;                                                                            \
        int rc = read_args(c, in, &a, st);                                                      \
        return rc ? rc : check(&a, st);                                                         \
    }
/* Defines fn, the policy callback of an op whose every output has one float
 * policy: out_dtype with the derivation rule (compare/policy.h). */
#define DSV4_FLOAT_POLICY(fn, out_dtype, rule)                                                           \
    static int fn(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,    \
                  dsv4_status *st)                                                                       \
    {                                                                                                    \
        (void)c, (void)in, (void)output, (void)st;                                                       \
        dsv4_policy_float(pol, out_dtype, rule);                                                         \
        return DSV4_OK;                                                                                  \
    }
/* The same for an op whose every output is compared exactly. */
#define DSV4_EXACT_POLICY(fn, why)                                                                       \
    static int fn(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,    \
                  dsv4_status *st)                                                                       \
    {                                                                                                    \
        (void)c, (void)in, (void)output, (void)st;                                                       \
        dsv4_policy_exact(pol, why);                                                                     \
        return DSV4_OK;                                                                                  \
    }
/* Fetch an input of the given dtype and rank, or fail naming it. */
int dsv4_input(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int ndim,
               const dsv4_tensor **out, dsv4_status *st);

#endif
