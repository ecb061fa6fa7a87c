/* rocm_inverse_rope_rows.c - the in-place inverse GPT-J RoPE of attention
 * output rows past `rotated` (rocm_inverse_rope_rows_, bf16 path).
 * Semantics: ref/attention.c (docs/semantics/attention.md A9.1).
 *
 * Tolerance: NoPE lanes and rows < rotated are untouched: exact.  A RoPE
 * lane is bf16(fp32(a*c) +- fp32(b*s)) against the double a*c +- b*s of the
 * same fp32 c, s: the fp32 value is within delta = 3 * 2^-24 (|a c| + |b s|)
 * (two products and one sum, each rounded once; an FMA is closer still),
 * the bf16 store one ulp_bf16 of that value (either neighbour:
 * dsv4_bf16_store_bound), and the float32 golden 2^-24 |e|:
 * bound = 1 ulp_bf16(|e| + delta) + delta + 2^-24 |e|. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

#define D DSV4_HEAD_DIM

/* One variant: nothing to choose, so no rule. */
static const dsv4_variant rope_variants[] = {
    {"default",
     "in place on the bf16 output: inverse GPT-J rotation of lanes 448..511 in fp32 at the token's "
     "position, bf16 RNE store, NoPE lanes and rows < rotated untouched "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     NULL},
    {NULL, NULL, NULL},
};

static const char rope_params[] =
    "    rotated int = 0  leading rows the decode epilogue already rotated (left untouched)\n"
    DSV4_ROPE_ROWS_PARAMS("8");

static const char rope_inputs[] =
    "o bfloat16  [T, H, 512] attention output (bf16)\n"
    DSV4_ROPE_POSITION_INPUTS;

static const char rope_outputs[] =
    "o bfloat16 golden=float32  [T, H, 512] o after the in-place inverse RoPE (golden: the ideal)\n";

static void rope_fill_o(dsv4_rng *rng, uint16_t *o, int64_t T, int64_t H)
{
    dsv4_attn_gen_q(rng, o, T * H * D);
}

static int rope_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    return dsv4_rope_rows_generate(c, in, rope_fill_o, NULL, NULL, st);
}

/* The double-precision ideal of every lane (malloc'd; NULL: failed, st says why). */
static double *rope_ideal(const dsv4_rope_io *r, dsv4_status *st)
{
    double *ideal = malloc((size_t)(r->T * r->H * D + 1) * sizeof *ideal);
    if (!ideal) {
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    if (dsv4_ref_inverse_rope_rows_f64(r->o->data, r->T, r->H, r->pos->data, r->cs->data, r->cs->shape[0], r->rd,
                                       r->rotated, ideal, st)) {
        free(ideal);
        return NULL;
    }
    return ideal;
}

static int rope_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_rope_io r;
    int rc = dsv4_rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    if ((rc = dsv4_rope_cos_sin_finite(&r, st)))
        return rc;
    double *ideal = rope_ideal(&r, st); /* the reference's own checks of the inputs */
    free(ideal);
    return ideal ? DSV4_OK : st->code;
}

static int rope_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_rope_io r;
    int rc = dsv4_rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    dsv4_tensor *o;
    if ((rc = dsv4_tensors_add(out, "o", DSV4_BF16, 3, r.o->shape, &o, st)))
        return rc;
    memcpy(o->data, r.o->data, r.o->nbytes); /* in place: starts as the input */
    return DSV4_OK;
}

static int rope_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_rope_io r;
    int rc = dsv4_rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    dsv4_tensor *o = dsv4_tensors_find(out, "o");
    const int64_t n = r.T * r.H * D;
    if (o->dtype == DSV4_BF16) /* no ideal asked for: the kernel's own steps */
        return dsv4_ref_inverse_rope_rows(o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                          r.rotated, st);
    if (o->dtype == DSV4_F64) /* the golden dtype: the ideal in place */
        return dsv4_ref_inverse_rope_rows_f64(r.o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                              r.rotated, o->data, st);
    double *ideal = rope_ideal(&r, st);
    if (!ideal)
        return st->code;
    dsv4_tensor_set_all(o, ideal, n);
    free(ideal);
    return DSV4_OK;
}

DSV4_FLOAT_POLICY(rope_policy, DSV4_BF16,
                  "NoPE lanes and rows < rotated exact; RoPE lanes 1 ulp_bf16(|e|+delta) + delta + 2^-24|e|, "
                  "delta = 3*2^-24(|a c| + |b s|) (fp32 products and sum)")

/* The RoPE lanes' bound (derivation at the top); the others stay 0. */
static int rope_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                      dsv4_status *st)
{
    (void)output;
    dsv4_rope_io r;
    int rc = dsv4_rope_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    if (n != r.T * r.H * D)
        return dsv4_fail(st, DSV4_EINPUT, "inverse rope bound: element count");
    const uint16_t *o = r.o->data;
    const float *cs = r.cs->data;
    const int half = r.rd / 2;
    for (int64_t t = r.rotated; t < r.T; t++) {
        const float *row = cs + ((const int64_t *)r.pos->data)[t] * r.rd;
        for (int64_t h = 0; h < r.H; h++)
            for (int k = 0; k < half; k++) {
                const int64_t i = (t * r.H + h) * D + (D - r.rd) + 2 * k;
                const double a = dsv4_bf16_to_f32(o[i]), b = dsv4_bf16_to_f32(o[i + 1]);
                const double cc = row[k], s = row[half + k];
                const double delta = 3.0 * 0x1p-24 * (fabs(a * cc) + fabs(b * s));
                const double e0 = fabs(a * cc + b * s), e1 = fabs(b * cc - a * s);
                bound[i] = dsv4_bf16_store_bound(e0, delta) + 0x1p-24 * e0;
                bound[i + 1] = dsv4_bf16_store_bound(e1, delta) + 0x1p-24 * e1;
            }
    }
    return DSV4_OK;
}

static void rope_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)output;
    dsv4_rope_io r;
    dsv4_status st = {0};
    int64_t t, h, d;
    buf[0] = '\0';
    if (dsv4_rope_inputs_of(c, in, &r, &st) || !dsv4_attn_thd_of(flat, r.T, r.H, &t, &h, &d))
        return;
    snprintf(buf, len, "token %" PRId64 " (position %" PRId64 "), head %" PRId64 ", dim %" PRId64 " (%s)", t,
             ((const int64_t *)r.pos->data)[t], h, d,
             t < r.rotated ? "row already rotated: untouched" : d < D - r.rd ? "NoPE: untouched" : "RoPE pair");
}

const dsv4_op dsv4_op_rocm_inverse_rope_rows = {
    .name = "rocm_inverse_rope_rows",
    .summary = "in-place inverse GPT-J RoPE of attention output rows past `rotated` (bf16 path)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/attention.md A9.1)",
    DSV4_OP_TABLES(rope),
    .generate = rope_generate,
    .validate = rope_validate,
    .alloc_outputs = rope_alloc,
    .reference = rope_reference,
    .policy = rope_policy,
    .locate = rope_locate,
    .bound = rope_bound,
};
