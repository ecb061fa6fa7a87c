/* gemm.h - what the ops of the GEMM family share (ops/gemm/gemm_common.c):
 * gemm_a8w8_blockscale, shuffle_weight, rocm_inv_rope_einsum,
 * rocm_mxfp8_wo_a_bmm, fused_qnorm_rope_kv_insert and compressor
 * (docs/semantics/gemm.md Q7, A3, A10, A11).
 *
 * Their bf16 float outputs share one tolerance shape: per element, e the
 * double ideal and delta a bound on |y_f32 - e| of the kernel's fp32 value,
 * the bf16 store adds at most half an ulp of the fp32 value; the bound
 * grants a whole one (either bf16 neighbour, dsv4_bf16_store_bound: half an
 * ulp is reached by the golden's own rounding, so it would leave a correct
 * kernel no margin), so
 *   bound = 1 ulp_bf16(|e| + delta) + delta   (dsv4_bf16_store_bound),
 * with delta = gamma gauge + extra: gamma the op's relative term (gamma_n of
 * an fp32 accumulation, or a fixed rho), gauge the op's magnitude (G =
 * sum_k |a_k||b_k| for a product) and extra an absolute per-element term
 * (docs/semantics/numerics.md, "Error bounds"). */
#ifndef DSV4_OPS_GEMM_H
#define DSV4_OPS_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../ops.h"

/* Fails st with "out of memory" (DSV4_ERUNTIME). */
int dsv4_gemmops_oom(dsv4_status *st);

/* Adds output name [shape] of dtype dt, filled with the poison pattern (the
 * op writes every element). */
int dsv4_gemmops_add_poisoned(dsv4_tensors *out, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                              dsv4_status *st);

/* The output z of both wo_a ops (rocm_inv_rope_einsum, rocm_mxfp8_wo_a_bmm):
 * "out", bf16 [T, G*R], poisoned. */
int dsv4_gemmops_add_wo_a_out(dsv4_tensors *out, int64_t T, int64_t G, int64_t R, dsv4_status *st);

/* Adds output name as a copy of the input of that name: an op that updates
 * a cache or state in place leaves what it does not write as it was. */
int dsv4_gemmops_add_inplace(dsv4_tensors *out, const dsv4_tensors *in, const char *name, dsv4_status *st);

/* The double ideal of a bf16 output with the terms of its bound. */
typedef struct dsv4_bf16_ideal {
    int64_t n;
    double *e;     /* [n] the ideal */
    double *gauge; /* [n] the magnitude gamma multiplies */
    double *extra; /* [n] an absolute term of delta, or NULL: none */
    double gamma;
} dsv4_bf16_ideal;

/* Allocates e, gauge and (with_extra) extra of n elements, gamma 0. */
int dsv4_bf16_ideal_alloc(dsv4_bf16_ideal *id, int64_t n, int with_extra, dsv4_status *st);
void dsv4_bf16_ideal_free(dsv4_bf16_ideal *id);
/* bound[i] = dsv4_bf16_store_bound(e[i], gamma gauge[i] + extra[i]);
 * bound may be id->gauge itself. */
void dsv4_bf16_ideal_bounds(const dsv4_bf16_ideal *id, double *bound);

/* Computes an op's ideal and bound terms from its inputs, allocating id
 * (which the caller zeroes, and frees whatever the function returns). */
typedef int (*dsv4_bf16_ideal_fn)(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id,
                                  dsv4_status *st);
/* The reference callback of such an op: the ideal into y. */
int dsv4_bf16_ideal_reference(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in,
                              dsv4_tensor *y, dsv4_status *st);
/* The bound callback: the bounds of n elements (what names the op in the
 * message of a count mismatch). */
int dsv4_bf16_ideal_bound(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in, double *bound,
                          int64_t n, const char *what, dsv4_status *st);

/* The validate callback of such an op: the ideal computes (its args check
 * the inputs); finite_inputs non-NULL: every ideal element must be finite,
 * else fail naming those inputs. */
int dsv4_bf16_ideal_validate(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in,
                             const char *finite_inputs, dsv4_status *st);
/* Defines fn, the bound callback of an op whose bf16 outputs' bounds come
 * from ideal (what names the op in messages). */
#define DSV4_BF16_IDEAL_BOUND(fn, ideal, what)                                                              \
    static int fn(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n, \
                  dsv4_status *st)                                                                          \
    {                                                                                                       \
        (void)output;                                                                                       \
        return dsv4_bf16_ideal_bound(ideal, c, in, bound, n, what, st);                                     \
    }
/* Defines fn, the reference callback of an op whose one output is the
 * ideal (dsv4_bf16_ideal_reference). */
#define DSV4_BF16_IDEAL_REFERENCE(fn, ideal, output)                                                        \
    static int fn(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)        \
    {                                                                                                       \
        return dsv4_bf16_ideal_reference(ideal, c, in, dsv4_tensors_find(out, output), st);                 \
    }

/* The callbacks both wo_a ops (rocm_inv_rope_einsum, rocm_mxfp8_wo_a_bmm)
 * build the same way from their args reader and ideals: p_validate (ideal
 * computes; finite_inputs as dsv4_bf16_ideal_validate), p_alloc (the "out"
 * output of dsv4_gemmops_add_wo_a_out), p_reference (ref_ideal: the ideal,
 * gauge optional), p_policy (one bf16 policy, rule) and p_bound (what names
 * the op in messages). */
#define DSV4_WO_A_OP_CALLBACKS(p, args_type, args_of, ideal, ref_ideal, finite_inputs, rule, what)               \
    static int p##_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)                      \
    {                                                                                                           \
        return dsv4_bf16_ideal_validate(ideal, c, in, finite_inputs, st);                                       \
    }                                                                                                           \
    static int p##_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)      \
    {                                                                                                           \
        args_type a;                                                                                            \
        int rc = args_of(c, in, &a, st);                                                                        \
        return rc ? rc : dsv4_gemmops_add_wo_a_out(out, a.T, a.G, a.R, st);                                     \
    }                                                                                                           \
    DSV4_BF16_IDEAL_REFERENCE(p##_reference, ref_ideal, "out")                                                  \
    DSV4_FLOAT_POLICY(p##_policy, DSV4_BF16, rule)                                                              \
    DSV4_BF16_IDEAL_BOUND(p##_bound, ideal, what)
/* The dsv4_op fields those callbacks and p_generate fill. */
#define DSV4_WO_A_OP_FIELDS(p)                                                                                  \
    .generate = p##_generate, .validate = p##_validate, .alloc_outputs = p##_alloc, .reference = p##_reference, \
    .policy = p##_policy, .bound = p##_bound

/* Names flat byte `flat` of a 584-byte-per-token cache of B tokens a page:
 * page, token, slot and which part of the record (docs/semantics/kvcache.md
 * A2.1). */
void dsv4_gemmops_cache_locate(int64_t flat, int64_t B, char *buf, size_t len);

/* Rows several gemm ops declare alike (schema syntax: harness/op.h). */
#define DSV4_GEMM_ROPE_THETA_PARAM \
    "gen rope_theta         float = 10000  generator: base of the cos/sin table\n"
#define DSV4_GEMM_COS_SIN_INPUT \
    "cos_sin_cache        float32  [max_position, 64] rows cos | sin\n"
#define DSV4_WO_A_NUM_TOKENS_PARAM \
    "gen num_tokens         int   = 4    generator: T\n"
#define DSV4_WO_A_OUTPUTS \
    "out                  bfloat16 golden=float64  [T, G*R] bf16 (golden: the double ideal)\n"

#endif
