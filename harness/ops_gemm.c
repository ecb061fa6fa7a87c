/* ops_gemm.c - registry entries of the GEMM family: gemm_a8w8_blockscale
 * (plain / bpreshuffle / fnuz), shuffle_weight, rocm_inv_rope_einsum,
 * rocm_mxfp8_wo_a_bmm.  Semantics: ref/gemm.c; spec quant_and_indexer.md 7,
 * sparse_attention.md 10.
 *
 * Tolerance of a bf16 GEMM output (all three GEMM ops), per element, e the
 * double ideal, G = sum_k |a_k||b_k| (the gauge: scales folded in), K the
 * reduction length and u = 2^-24:
 *  - the kernel accumulates in fp32: fp8 x fp8 products are exact in fp32,
 *    so each product reaches the result through at most K - 1 additions
 *    plus the per-block scale products (2 per block, spec 7: fl(P xs) ws)
 *    and the block accumulation (1 per block): n = K + 3 K/128 roundings,
 *    |y_f32 - e| <= delta = gamma_n G, gamma_n = n u / (1 - n u)
 *    (Higham, Accuracy and Stability, 3.1; ordering-free);
 *  - the bf16 store rounds y_f32 by <= 0.5 ulp_bf16(|y_f32|) <= 0.5
 *    ulp_bf16(|e| + delta) (the ulp at the larger magnitude covers a binade
 *    crossing).
 * bound = 0.5 ulp_bf16(|e| + delta) + delta.  The golden's own error (the
 * double rounding of KB scaled block sums) is below 2^-50 G and neglected.
 * G is computed from the inputs in the op's bound pass (dgemm on |A|, |B|:
 * a bound, never a golden, so its summation order does not matter), which
 * keeps the bound per element (a global max-row-norm bound would be
 * loose by orders of magnitude on rows of mixed scale). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compare/perm_hint.h"
#include "../ref/compressor.h"
#include "../ref/fp8quant.h"
#include "../ref/gemm.h"
#include "../ref/mx.h"
#include "../ref/numerics.h"
#include "../ops/ops.h"
#include "rng.h"

static const char *const default_only[] = {"default", NULL};

/* gamma_n of Higham with u = 2^-24 (fp32). */
static double gamma32(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

/* bound = 0.5 ulp_bf16(|e| + delta) + delta (derivation at the top). */
static double bf16_gemm_bound(double e, double delta)
{
    return 0.5 * dsv4_ulp(DSV4_BF16, fabs(e) + delta) + delta;
}

static void float_policy(dsv4_policy *pol, const char *rule)
{
    memset(pol, 0, sizeof *pol);
    pol->kind = DSV4_CMP_FLOAT;
    pol->output_dtype = DSV4_BF16;
    pol->nan = DSV4_NAN_MATCH;
    snprintf(pol->rule, sizeof pol->rule, "%s", rule);
}

static int oom(dsv4_status *st) { return dsv4_fail(st, DSV4_ERUNTIME, "out of memory"); }

/* ------------------------------------------------------------------ */
/* gemm_a8w8_blockscale                                                */

enum { GV_PLAIN = 0, GV_BPRESHUFFLE = 1, GV_FNUZ = 2 };

static const char *const gemm_variants[] = {"default", "bpreshuffle", "fp8=fnuz", NULL};
static const char *const gemm_variant_docs[] = {
    "gemm_a8w8_blockscale / apply_pre_quantized_block_scaled_mm: XQ [M, K] e4m3fn, WQ [N, K] e4m3fn "
    "(unshuffled), x_scale [M, K/128] row-major, w_scale [ceil(N/128), K/128], bf16 out "
    "(ROCm/aiter:aiter/ops/gemm_op_a8w8.py@e4048607, seed apply_pre_quantized_block_scaled_mm)",
    "gemm_a8w8_blockscale_bpreshuffle: WQ = shuffle_weight(W, (16,16)), x_scale stored transposed "
    "[K/128][M] (seed _bpre_attn_gemm / prepare_attn_preshuffle; spec 7 bpreshuffle)",
    "gfx942: XQ and WQ e4m3fnuz codes (spec 7: e4m3fnuz on gfx942), plain layout",
};

static const dsv4_param_spec gemm_params[] = {
    {"ref_accum", DSV4_P_STR, "f64",
     "reference path: f64 = the exact ideal (goldens); f32 = the kernel's fp32 block order via sgemm "
     "(bench / large cases; the bound's delta doubles)", 0},
    {"M", DSV4_P_INT, "16", "generator: rows (tokens)", 1},
    {"N", DSV4_P_INT, "256", "generator: output features", 1},
    {"K", DSV4_P_INT, "256", "generator: reduction length (multiple of 128)", 1},
    {"act_scale", DSV4_P_FLOAT, "1", "generator: RMS of the bf16 activations before group quant", 1},
    {"w_std", DSV4_P_FLOAT, "0.02", "generator: std of the weights before 128x128 block quant", 1},
    {"zero_rows", DSV4_P_INTLIST, "[]", "generator: activation rows that are all zero", 1},
    {"big_rows", DSV4_P_INTLIST, "[]",
     "generator: rows whose codes are all +-448 (+-240 fnuz) with x_scale 2^20: near the fp8 limit", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec gemm_inputs[] = {
    {"XQ", DSV4_F8E4M3FN, DSV4_DT_NONE, "[M, K] fp8 activations (e4m3fnuz in fp8=fnuz)"},
    {"WQ", DSV4_F8E4M3FN, DSV4_DT_NONE, "[N, K] fp8 weights; bpreshuffle: shuffle_weight(W, (16,16)) bytes"},
    {"x_scale", DSV4_F32, DSV4_DT_NONE, "[M, K/128] per 1x128 (bpreshuffle: [K/128, M], transposed)"},
    {"w_scale", DSV4_F32, DSV4_DT_NONE, "[ceil(N/128), K/128] per 128x128 block"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec gemm_outputs[] = {
    {"Y", DSV4_BF16, DSV4_F64, "[M, N] bf16 (golden: the double ideal)"},
    {NULL, 0, 0, NULL},
};

static dsv4_fp8_kind gemm_kind(int variant) { return variant == GV_FNUZ ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN; }

/* Activations: bf16 rows of RMS act_scale times a per-row factor 2^[-3, 3]
 * (mixed row magnitudes), quantized by aiter's per_group_quant_hip rule
 * (group_fp8_quant in _bpre_attn_gemm, spec 3.1); zero and big rows. */
static void gen_activations(const dsv4_opctx *c, int64_t M, int64_t K, dsv4_fp8_kind kind, uint8_t *xq,
                            float *xs_rowmajor)
{
    const dsv4_params *ps = c->params;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "XQ");
    float *x = malloc((size_t)(K ? K : 1) * sizeof *x);
    if (!x)
        return;
    const dsv4_fp8q_cfg cfg = {DSV4_FP8Q_AITER_HIP, kind, dsv4_fp8q_default_max(DSV4_FP8Q_AITER_HIP, kind), 128, 0};
    const double as = dsv4_params_float(ps, "act_scale");
    for (int64_t m = 0; m < M; m++) {
        double f = as * ldexp(1.0, (int)dsv4_rng_range(&rng, -3, 4));
        for (int64_t k = 0; k < K; k++)
            x[k] = dsv4_params_list_has(ps, "zero_rows", m) ? 0.0f : dsv4_round_bf16((float)(dsv4_rng_normal(&rng) * f));
        dsv4_fp8q_rows(x, 1, K, &cfg, xq + m * K, xs_rowmajor + m * (K / 128), NULL);
        if (dsv4_params_list_has(ps, "big_rows", m))
            for (int64_t k = 0; k < K; k++) {
                xq[m * K + k] = dsv4_fp8_from_f32((k & 1) ? -cfg.fp8_max : cfg.fp8_max, kind, 1);
                if (k % 128 == 0)
                    xs_rowmajor[m * (K / 128) + k / 128] = 0x1p20f;
            }
    }
    free(x);
}

/* Weights: N(0, w_std) in 128x128 blocks with a power-of-two scale
 * 2^ceil(log2(amax / MAX)) (the checkpoints' ue8m0 weight_scale_inv upcast
 * to fp32 by prepare_attn_preshuffle, seed). */
static void gen_weights(const dsv4_opctx *c, int64_t N, int64_t K, dsv4_fp8_kind kind, uint8_t *wq, float *ws)
{
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "WQ");
    const double std = dsv4_params_float(c->params, "w_std"), mx = dsv4_fp8_max(kind);
    const int64_t KB = K / 128, NB = (N + 127) / 128;
    double *w = malloc((size_t)(N * K + 1) * sizeof *w);
    if (!w)
        return;
    for (int64_t i = 0; i < N * K; i++)
        w[i] = dsv4_rng_normal(&rng) * std;
    for (int64_t nb = 0; nb < NB; nb++)
        for (int64_t kb = 0; kb < KB; kb++) {
            double amax = 0;
            for (int64_t n = nb * 128; n < N && n < nb * 128 + 128; n++)
                for (int64_t k = kb * 128; k < kb * 128 + 128; k++)
                    amax = fmax(amax, fabs(w[n * K + k]));
            int e = amax > 0 ? (int)ceil(log2(amax / mx)) : 0;
            ws[nb * KB + kb] = (float)ldexp(1.0, e);
            for (int64_t n = nb * 128; n < N && n < nb * 128 + 128; n++)
                for (int64_t k = kb * 128; k < kb * 128 + 128; k++)
                    wq[n * K + k] = dsv4_fp8_from_f32((float)ldexp(w[n * K + k], -e), kind, 1);
        }
    free(w);
}

static int gemm_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t M = dsv4_params_int(ps, "M"), N = dsv4_params_int(ps, "N"), K = dsv4_params_int(ps, "K");
    if (M < 0 || N < 1 || K < 0 || M > (1 << 16) || N > (1 << 16) || K > (1 << 16))
        return dsv4_fail(st, DSV4_EINPUT, "M in [0, 65536], N in [1, 65536], K in [0, 65536]");
    if (K % 128)
        return dsv4_fail(st, DSV4_EINPUT, "K = %" PRId64 " is not a multiple of 128 (block scales)", K);
    const dsv4_fp8_kind kind = gemm_kind(c->variant);
    const dsv4_dtype dt = kind == DSV4_FP8_E4M3FN ? DSV4_F8E4M3FN : DSV4_F8E4M3FNUZ;
    const int64_t KB = K / 128, NB = (N + 127) / 128;
    const int tr = c->variant == GV_BPRESHUFFLE;
    int64_t sx[2] = {M, K}, sw[2] = {N, K}, sxs[2] = {tr ? KB : M, tr ? M : KB}, sws[2] = {NB, KB};
    dsv4_tensor *xq, *wq, *xs, *ws;
    int rc;
    if ((rc = dsv4_tensors_add(in, "XQ", dt, 2, sx, &xq, st)) || (rc = dsv4_tensors_add(in, "WQ", dt, 2, sw, &wq, st)) ||
        (rc = dsv4_tensors_add(in, "x_scale", DSV4_F32, 2, sxs, &xs, st)) ||
        (rc = dsv4_tensors_add(in, "w_scale", DSV4_F32, 2, sws, &ws, st)))
        return rc;
    float *xs_rm = malloc((size_t)(M * KB + 1) * sizeof *xs_rm);
    uint8_t *w = malloc((size_t)(N * K + 1));
    if (!xs_rm || !w) {
        free(xs_rm), free(w);
        return oom(st);
    }
    gen_activations(c, M, K, kind, xq->data, xs_rm);
    gen_weights(c, N, K, kind, w, ws->data);
    float *xsd = xs->data;
    for (int64_t m = 0; m < M; m++) /* transpose_scale=True: [K/128][M] (spec 7) */
        for (int64_t kb = 0; kb < KB; kb++)
            xsd[tr ? kb * M + m : m * KB + kb] = xs_rm[m * KB + kb];
    if (tr)
        rc = dsv4_ref_shuffle_weight(w, wq->data, 1, N, K, 1, 0, st);
    else
        memcpy(wq->data, w, (size_t)(N * K));
    free(xs_rm), free(w);
    return rc;
}

static int gemm_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gemm_args *a, dsv4_status *st)
{
    const dsv4_fp8_kind kind = gemm_kind(c->variant);
    const dsv4_dtype dt = kind == DSV4_FP8_E4M3FN ? DSV4_F8E4M3FN : DSV4_F8E4M3FNUZ;
    const dsv4_tensor *xq, *wq, *xs, *ws;
    int rc;
    if ((rc = dsv4_input(in, "XQ", dt, 2, &xq, st)) || (rc = dsv4_input(in, "WQ", dt, 2, &wq, st)) ||
        (rc = dsv4_input(in, "x_scale", DSV4_F32, 2, &xs, st)) || (rc = dsv4_input(in, "w_scale", DSV4_F32, 2, &ws, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->M = xq->shape[0];
    a->K = xq->shape[1];
    a->N = wq->shape[0];
    a->kind = kind;
    a->x_scale_transposed = a->w_shuffled = c->variant == GV_BPRESHUFFLE;
    if (a->K % 128)
        return dsv4_fail(st, DSV4_EINPUT,
                         "XQ is [%" PRId64 ", K = %" PRId64 "]: K is not a multiple of 128 (1x128 / 128x128 "
                         "block scales)", a->M, a->K);
    if (wq->shape[1] != a->K)
        return dsv4_fail(st, DSV4_EINPUT, "WQ is [%" PRId64 ", %" PRId64 "], expected [N, K = %" PRId64 "]",
                         wq->shape[0], wq->shape[1], a->K);
    const int64_t KB = a->K / 128, NB = (a->N + 127) / 128;
    const int64_t ex0 = a->x_scale_transposed ? KB : a->M, ex1 = a->x_scale_transposed ? a->M : KB;
    if (xs->shape[0] != ex0 || xs->shape[1] != ex1)
        return dsv4_fail(st, DSV4_EINPUT, "x_scale is [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]%s",
                         xs->shape[0], xs->shape[1], ex0, ex1, a->x_scale_transposed ? " (transposed)" : "");
    if (ws->shape[0] != NB || ws->shape[1] != KB)
        return dsv4_fail(st, DSV4_EINPUT, "w_scale is [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]",
                         ws->shape[0], ws->shape[1], NB, KB);
    a->xq = xq->data;
    a->wq = wq->data;
    a->x_scale = xs->data;
    a->w_scale = ws->data;
    const char *acc = dsv4_params_str(c->params, "ref_accum");
    if (strcmp(acc, "f64") && strcmp(acc, "f32"))
        return dsv4_fail(st, DSV4_EINPUT, "ref_accum = '%s': f64 or f32", acc);
    return DSV4_OK;
}

static int gemm_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    return rc ? rc : dsv4_gemm_check(&a, st);
}

static int gemm_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.M, a.N};
    dsv4_tensor *y;
    if ((rc = dsv4_tensors_add(out, "Y", DSV4_BF16, 2, shape, &y, st)))
        return rc;
    dsv4_poison(y);
    return DSV4_OK;
}

static int use_f32(const dsv4_opctx *c) { return strcmp(dsv4_params_str(c->params, "ref_accum"), "f32") == 0; }

static int gemm_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    if (rc)
        return rc;
    dsv4_tensor *y = dsv4_tensors_find(out, "Y");
    const int64_t n = a.M * a.N;
    if (use_f32(c)) {
        float *f = malloc((size_t)(n + 1) * sizeof *f);
        if (!f)
            return oom(st);
        rc = dsv4_ref_gemm_a8w8_blockscale_f32(&a, f, st);
        for (int64_t i = 0; !rc && y->dtype == DSV4_F64 && i < n; i++)
            ((double *)y->data)[i] = f[i];
        for (int64_t i = 0; !rc && y->dtype != DSV4_F64 && i < n; i++)
            dsv4_tensor_set(y, i, f[i]);
        free(f);
        return rc;
    }
    if (y->dtype == DSV4_F64)
        return dsv4_ref_gemm_a8w8_blockscale_f64(&a, y->data, st);
    double *d = malloc((size_t)(n + 1) * sizeof *d);
    if (!d)
        return oom(st);
    rc = dsv4_ref_gemm_a8w8_blockscale_f64(&a, d, st);
    for (int64_t i = 0; !rc && i < n; i++)
        dsv4_tensor_set(y, i, d[i]);
    free(d);
    return rc;
}

static int gemm_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    float_policy(pol, use_f32(c) ? "per element: 0.5 ulp_bf16(|e|+d) + d, d = 2 gamma_n G (ref_accum=f32: the "
                                   "reference is itself an fp32 model), G = sum_k |a xs||b ws|, n = K + 3K/128"
                                 : "per element: 0.5 ulp_bf16(|e|+d) + d, d = gamma_n G, G = sum_k |a xs||b ws|, "
                                   "n = K + 3K/128 fp32 roundings, u = 2^-24");
    return DSV4_OK;
}

static int gemm_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                      dsv4_status *st)
{
    (void)output;
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    if (rc)
        return rc;
    if (n != a.M * a.N)
        return dsv4_fail(st, DSV4_EINPUT, "gemm bound: element count");
    double *e = malloc((size_t)(n + 1) * sizeof *e);
    if (!e)
        return oom(st);
    if (!(rc = dsv4_ref_gemm_a8w8_blockscale_f64(&a, e, st)) && !(rc = dsv4_gemm_abs_gauge(&a, bound, st))) {
        const double g = gamma32((double)a.K + 3.0 * (double)(a.K / 128)) * (use_f32(c) ? 2 : 1);
        for (int64_t i = 0; i < n; i++)
            bound[i] = bf16_gemm_bound(e[i], g * bound[i]);
    }
    free(e);
    return rc;
}

static void gemm_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)output;
    dsv4_gemm_args a;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (gemm_args_of(c, in, &a, &st) || a.N < 1)
        return;
    const int64_t m = flat / a.N, n = flat % a.N;
    snprintf(buf, len, "row %" PRId64 ", column %" PRId64 " (weight block row %" PRId64 ", shuffle tile %" PRId64 ")",
             m, n, n / 128, n / 16);
}

/* After a failure: is one side the GEMM with WQ read through the other
 * layout?  actual = it: the implementation reads a plain weight as shuffled
 * (or the reverse); expected = it: the case's WQ holds the other layout's
 * bytes (e.g. bpreshuffled bytes under the plain variant), so the
 * implementation, reading them as declared, permutes the weight. */
static void gemm_hint(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, const dsv4_tensor *expected,
                      const dsv4_tensor *actual, dsv4_cmp_result *res)
{
    (void)output;
    dsv4_gemm_args a;
    dsv4_status st = {0};
    if (gemm_args_of(c, in, &a, &st) || a.N % 16 || a.K % 32 || dsv4_gemm_check(&a, &st))
        return;
    const int64_t n = a.M * a.N;
    double *alt = malloc((size_t)(n + 1) * sizeof *alt);
    double *g = malloc((size_t)(n + 1) * sizeof *g);
    const int declared_shuffled = a.w_shuffled;
    a.w_shuffled = !a.w_shuffled; /* the other reading of the same WQ bytes */
    if (alt && g && !dsv4_ref_gemm_a8w8_blockscale_f64(&a, alt, &st) && !dsv4_gemm_abs_gauge(&a, g, &st)) {
        const double gm = gamma32((double)a.K + 3.0 * (double)(a.K / 128)) * 2;
        for (int64_t i = 0; i < n; i++)
            g[i] = bf16_gemm_bound(alt[i], gm * g[i]);
        if (!dsv4_operand_perm_hint(actual, alt, g,
                                    declared_shuffled
                                        ? "the implementation read the shuffle_weight(16,16) bytes of WQ as a plain "
                                          "[N, K] weight (bpreshuffle layout ignored)"
                                        : "the implementation read the plain WQ as shuffle_weight(16,16) bytes "
                                          "(a bpreshuffle kernel on an unshuffled weight)",
                                    res))
            dsv4_operand_perm_hint(expected, alt, g,
                                   declared_shuffled
                                       ? "the expected output is WQ read as a plain weight: WQ is not bpreshuffled "
                                         "(use the default variant, or pass shuffle_weight(W, (16,16)))"
                                       : "the expected output is WQ read through shuffle_weight(16,16): WQ holds "
                                         "bpreshuffled bytes but the variant is unshuffled (use bpreshuffle)",
                                   res);
    }
    free(alt), free(g);
}

const dsv4_op dsv4_op_gemm_a8w8_blockscale = {
    .name = "gemm_a8w8_blockscale",
    .summary = "block-scaled fp8 GEMM: per-1x128 activation and per-128x128 weight scales, fp32 accumulation, bf16 out",
    .source = "ROCm/aiter:aiter/ops/gemm_op_a8w8.py@e4048607, "
              "ROCm/aiter:aiter/ops/triton/_triton_kernels/gemm/basic/gemm_a8w8_blockscale.py@e4048607 "
              "(spec quant_and_indexer.md 7; seed _bpre_attn_gemm, apply_pre_quantized_block_scaled_mm)",
    .variants = gemm_variants,
    .variant_docs = gemm_variant_docs,
    .params = gemm_params,
    .inputs = gemm_inputs,
    .outputs = gemm_outputs,
    .generate = gemm_generate,
    .validate = gemm_validate,
    .alloc_outputs = gemm_alloc,
    .reference = gemm_reference,
    .policy = gemm_policy,
    .locate = gemm_locate,
    .bound = gemm_bound,
    .hint = gemm_hint,
};

/* ------------------------------------------------------------------ */
/* shuffle_weight(layout=(16,16)): a layout, bit-exact                 */

static const char *const shuffle_variants[] = {"default", "inverse", NULL};
static const char *const shuffle_variant_docs[] = {
    "shuffle_weight(x, layout=(16,16)) of fp8 [N, K]: IN = IK = 16, BK = 32, Kp = 16 "
    "(ROCm/aiter:aiter/ops/shuffle.py@e4048607, spec 7)",
    "the inverse permutation (reports: the unshuffled weight from bpreshuffled bytes)",
};

static const dsv4_param_spec shuffle_params[] = {
    {"N", DSV4_P_INT, "32", "generator: rows (multiple of 16)", 1},
    {"K", DSV4_P_INT, "128", "generator: columns (multiple of 32)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec shuffle_inputs[] = {
    {"x", DSV4_F8E4M3FN, DSV4_DT_NONE, "[N, K] fp8 weight (inverse: shuffled bytes)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec shuffle_outputs[] = {
    {"out", DSV4_F8E4M3FN, DSV4_DT_NONE, "[N, K] shuffled (inverse: unshuffled) bytes"},
    {NULL, 0, 0, NULL},
};

static int shuffle_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    int64_t shape[2] = {dsv4_params_int(c->params, "N"), dsv4_params_int(c->params, "K")};
    int rc = dsv4_shuffle_check(shape[0], shape[1], 1, st);
    dsv4_tensor *x;
    if (rc || (rc = dsv4_tensors_add(in, "x", DSV4_F8E4M3FN, 2, shape, &x, st)))
        return rc;
    dsv4_rng rng; /* random bytes: a misplaced byte shows; NaN codes 0x7F/0xFF avoided */
    dsv4_rng_init(&rng, c->seed, "x");
    uint8_t *p = x->data;
    for (int64_t i = 0; i < shape[0] * shape[1]; i++) {
        uint8_t b = (uint8_t)(dsv4_rng_next(&rng) >> 56);
        p[i] = (b & 0x7F) == 0x7F ? 0 : b;
    }
    return DSV4_OK;
}

static int shuffle_input(const dsv4_tensors *in, const dsv4_tensor **x, dsv4_status *st)
{
    int rc = dsv4_input(in, "x", DSV4_F8E4M3FN, 2, x, st);
    return rc ? rc : dsv4_shuffle_check((*x)->shape[0], (*x)->shape[1], 1, st);
}

static int shuffle_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    (void)c;
    const dsv4_tensor *x;
    return shuffle_input(in, &x, st);
}

static int shuffle_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    (void)c;
    const dsv4_tensor *x;
    dsv4_tensor *o;
    int rc = shuffle_input(in, &x, st);
    if (rc || (rc = dsv4_tensors_add(out, "out", DSV4_F8E4M3FN, 2, x->shape, &o, st)))
        return rc;
    dsv4_poison(o);
    return DSV4_OK;
}

static int shuffle_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = shuffle_input(in, &x, st);
    if (rc)
        return rc;
    return dsv4_ref_shuffle_weight(x->data, dsv4_tensors_find(out, "out")->data, 1, x->shape[0], x->shape[1], 1,
                                   c->variant == 1, st);
}

static int shuffle_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                          dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    dsv4_policy_exact(pol, "a byte permutation (layout)");
    return DSV4_OK;
}

/* "out flat i = source (n, k), tile (n/16, k/32)" */
static void shuffle_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                           size_t len)
{
    (void)output;
    const dsv4_tensor *x;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (shuffle_input(in, &x, &st))
        return;
    const int64_t K = x->shape[1];
    int64_t n = flat / K, k = flat % K;
    if (c->variant == 0) { /* flat is a shuffled position: invert by search in its 16x32 tile */
        const int64_t tile = flat / 512, nt = tile / (K / 32), kt = tile % (K / 32);
        for (int64_t i = 0; i < 512; i++)
            if (dsv4_shuffle_index(nt * 16 + i / 32, kt * 32 + i % 32, K, 1) == flat) {
                n = nt * 16 + i / 32, k = kt * 32 + i % 32;
                break;
            }
    }
    snprintf(buf, len, "holds W[%" PRId64 ", %" PRId64 "], 16x32 tile (%" PRId64 ", %" PRId64 ")", n, k, n / 16,
             k / 32);
}

const dsv4_op dsv4_op_shuffle_weight = {
    .name = "shuffle_weight",
    .summary = "aiter shuffle_weight(layout=(16,16)) of an fp8 [N, K] weight (and its inverse)",
    .source = "ROCm/aiter:aiter/ops/shuffle.py@e4048607 (spec quant_and_indexer.md 7; seed prepare_attn_preshuffle)",
    .variants = shuffle_variants,
    .variant_docs = shuffle_variant_docs,
    .params = shuffle_params,
    .inputs = shuffle_inputs,
    .outputs = shuffle_outputs,
    .generate = shuffle_generate,
    .validate = shuffle_validate,
    .alloc_outputs = shuffle_alloc,
    .reference = shuffle_reference,
    .policy = shuffle_policy,
    .locate = shuffle_locate,
};

/* ------------------------------------------------------------------ */
/* rocm_inv_rope_einsum (sparse_attention.md 10.2 [S9])                */
/*
 * Tolerance: bf16 x bf16 products are exact in fp32, so the fp32 einsum
 * over Dg terms is within gamma_Dg G of the sum of the products of its
 * inputs (G = sum_d |o_r||w|); with inverse_rope the kernel's o_r lanes are
 * bf16(fp32 rotation), each within err_d = 1 ulp_bf16 + 3 2^-24 (|a c| +
 * |b s| + |b c| + |a s|) of the exact rotation the ideal uses, adding
 * E = sum_{rope d} err_d |w|.  delta = gamma_Dg G + E; bound = 0.5
 * ulp_bf16(|e| + delta) + delta. */

static const char *const einsum_variant_docs[] = {
    "bf16 wo_a [G*R, Dg] viewed [G, R, Dg]; o_r = o (inverse_rope=0, the seed's _o_proj) or bf16 inverse "
    "GPT-J RoPE of the last 64 lanes per head; out = einsum('tgd,grd->tgr') with fp32 accumulation, bf16 "
    "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
};

static const dsv4_param_spec einsum_params[] = {
    {"n_local_groups", DSV4_P_INT, "2", "G: o_groups / TP (spec 10.1)", 0},
    {"o_lora_rank", DSV4_P_INT, "64", "R: rows of each group's wo_a block (1024 in V4/V4.1)", 0},
    {"inverse_rope", DSV4_P_INT, "0", "1: apply the inverse RoPE first (the seed's _o_proj passes False)", 0},
    {"rope_head_dim", DSV4_P_INT, "64", "RoPE lanes at the end of each 512-lane head", 0},
    {"num_tokens", DSV4_P_INT, "4", "generator: T", 1},
    {"num_heads", DSV4_P_INT, "4", "generator: H (local heads)", 1},
    {"max_position", DSV4_P_INT, "256", "generator: rows of cos_sin_cache", 1},
    {"rope_theta", DSV4_P_FLOAT, "10000", "generator: base of the cos/sin table", 1},
    {"zero_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose o is all zero", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec einsum_inputs[] = {
    {"o", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] attention output (bf16)"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T] query positions (used when inverse_rope = 1)"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_position, 64] rows cos | sin"},
    {"wo_a", DSV4_BF16, DSV4_DT_NONE, "[G*R, Dg] bf16 weight (Dg = H*512/G)"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec wo_a_outputs[] = {
    {"out", DSV4_BF16, DSV4_F64, "[T, G*R] bf16 (golden: the double ideal)"},
    {NULL, 0, 0, NULL},
};

static int einsum_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "num_tokens"), H = dsv4_params_int(ps, "num_heads");
    const int64_t G = dsv4_params_int(ps, "n_local_groups"), R = dsv4_params_int(ps, "o_lora_rank");
    const int64_t P = dsv4_params_int(ps, "max_position"), rd = dsv4_params_int(ps, "rope_head_dim");
    if (T < 0 || H < 1 || H > 256 || G < 1 || (H * 512) % G || R < 0 || R > 4096 || P < 1 || rd != 64)
        return dsv4_fail(st, DSV4_EINPUT, "einsum generator: T >= 0, H in [1, 256], G divides H*512, R in [0, 4096], "
                                          "rope_head_dim 64");
    const int64_t Dg = H * 512 / G;
    int64_t so[3] = {T, H, 512}, scs[2] = {P, rd}, sw[2] = {G * R, Dg};
    dsv4_tensor *o, *pos, *cs, *w;
    int rc;
    if ((rc = dsv4_tensors_add(in, "o", DSV4_BF16, 3, so, &o, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)) ||
        (rc = dsv4_tensors_add(in, "wo_a", DSV4_BF16, 2, sw, &w, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "o");
    uint16_t *op = o->data;
    for (int64_t i = 0; i < T * H * 512; i++)
        op[i] = dsv4_params_list_has(ps, "zero_rows", i / (H * 512)) ? 0 : dsv4_bf16_from_f32((float)dsv4_rng_normal(&rng));
    dsv4_rng_init(&rng, c->seed, "positions");
    for (int64_t t = 0; t < T; t++)
        ((int64_t *)pos->data)[t] = dsv4_rng_range(&rng, 0, P);
    dsv4_gen_cos_sin(cs->data, P, (int)rd, dsv4_params_float(ps, "rope_theta"));
    dsv4_rng_init(&rng, c->seed, "wo_a");
    uint16_t *wp = w->data;
    for (int64_t i = 0; i < G * R * Dg; i++)
        wp[i] = dsv4_bf16_from_f32((float)(dsv4_rng_normal(&rng) * 0.02));
    return DSV4_OK;
}

static int einsum_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_einsum_args *a, dsv4_status *st)
{
    const dsv4_tensor *o, *pos, *cs, *w;
    int rc;
    if ((rc = dsv4_input(in, "o", DSV4_BF16, 3, &o, st)) || (rc = dsv4_input(in, "positions", DSV4_I64, 1, &pos, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &cs, st)) || (rc = dsv4_input(in, "wo_a", DSV4_BF16, 2, &w, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->T = o->shape[0];
    a->H = o->shape[1];
    a->G = dsv4_params_int(c->params, "n_local_groups");
    a->R = dsv4_params_int(c->params, "o_lora_rank");
    a->rope_dim = (int)dsv4_params_int(c->params, "rope_head_dim");
    a->inverse_rope = dsv4_params_int(c->params, "inverse_rope") != 0;
    if (o->shape[2] != 512 || pos->shape[0] != a->T || cs->shape[1] != a->rope_dim)
        return dsv4_fail(st, DSV4_EINPUT, "o must be [T, H, 512], positions [T], cos_sin_cache [P, rope_head_dim]");
    if (a->G < 1 || a->R < 0 || (a->H * 512) % a->G)
        return dsv4_fail(st, DSV4_EINPUT, "n_local_groups = %" PRId64 " must divide H*512 = %" PRId64, a->G, a->H * 512);
    const int64_t Dg = a->H * 512 / a->G;
    if (w->shape[0] != a->G * a->R || w->shape[1] != Dg)
        return dsv4_fail(st, DSV4_EINPUT, "wo_a is [%" PRId64 ", %" PRId64 "], expected [G*R = %" PRId64 ", Dg = %" PRId64 "]",
                         w->shape[0], w->shape[1], a->G * a->R, Dg);
    a->o = o->data;
    a->positions = pos->data;
    a->cos_sin_cache = cs->data;
    a->num_pos = cs->shape[0];
    a->w = w->data;
    return DSV4_OK;
}

/* Runs the einsum reference into freshly allocated arrays (any may be NULL). */
static int einsum_run(const dsv4_opctx *c, const dsv4_tensors *in, double **out, double **gauge, double **rerr,
                      int64_t *n, dsv4_status *st)
{
    dsv4_einsum_args a;
    int rc = einsum_args_of(c, in, &a, st);
    if (rc)
        return rc;
    *n = a.T * a.G * a.R;
    *out = malloc((size_t)(*n + 1) * sizeof(double));
    *gauge = malloc((size_t)(*n + 1) * sizeof(double));
    *rerr = malloc((size_t)(*n + 1) * sizeof(double));
    if (!*out || !*gauge || !*rerr)
        return oom(st);
    return dsv4_ref_inv_rope_einsum(&a, *out, *gauge, *rerr, st);
}

static int einsum_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    double *o = NULL, *g = NULL, *e = NULL;
    int64_t n;
    int rc = einsum_run(c, in, &o, &g, &e, &n, st);
    for (int64_t i = 0; !rc && i < n; i++)
        if (!isfinite(o[i]))
            rc = dsv4_fail(st, DSV4_EINPUT, "o or wo_a holds a non-finite value (output %" PRId64 ")", i);
    free(o), free(g), free(e);
    return rc;
}

static int einsum_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_einsum_args a;
    int rc = einsum_args_of(c, in, &a, st);
    if (rc)
        return rc;
    int64_t shape[2] = {a.T, a.G * a.R};
    dsv4_tensor *y;
    if ((rc = dsv4_tensors_add(out, "out", DSV4_BF16, 2, shape, &y, st)))
        return rc;
    dsv4_poison(y);
    return DSV4_OK;
}

static int einsum_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    double *o = NULL, *g = NULL, *e = NULL;
    int64_t n;
    int rc = einsum_run(c, in, &o, &g, &e, &n, st);
    dsv4_tensor *y = dsv4_tensors_find(out, "out");
    for (int64_t i = 0; !rc && i < n; i++)
        dsv4_tensor_set(y, i, o[i]);
    free(o), free(g), free(e);
    return rc;
}

static int einsum_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                         dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    float_policy(pol, "per element: 0.5 ulp_bf16(|e|+d) + d, d = gamma_Dg sum_d |o_r||w| + sum_{rope d} (1 ulp_bf16 + "
                      "3*2^-24 (|ac|+|bs|+|bc|+|as|)) |w| (bf16 fp32-rotated o_r), u = 2^-24");
    return DSV4_OK;
}

static int einsum_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t nb,
                        dsv4_status *st)
{
    (void)output;
    double *o = NULL, *g = NULL, *e = NULL;
    int64_t n;
    int rc = einsum_run(c, in, &o, &g, &e, &n, st);
    if (!rc && n != nb)
        rc = dsv4_fail(st, DSV4_EINPUT, "einsum bound: element count");
    if (!rc) {
        const int64_t H = dsv4_tensors_get(in, "o")->shape[1];
        const double gm = gamma32((double)(H * 512 / dsv4_params_int(c->params, "n_local_groups")));
        for (int64_t i = 0; i < n; i++)
            bound[i] = bf16_gemm_bound(o[i], gm * g[i] + e[i]);
    }
    free(o), free(g), free(e);
    return rc;
}

const dsv4_op dsv4_op_rocm_inv_rope_einsum = {
    .name = "rocm_inv_rope_einsum",
    .summary = "wo_a on the bf16 path: optional inverse RoPE, then out[t,g,r] = sum_d o[t,g,d] W[g,r,d] (fp32 acc, bf16)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 10.1-10.2; seed _o_proj)",
    .variants = default_only,
    .variant_docs = einsum_variant_docs,
    .params = einsum_params,
    .inputs = einsum_inputs,
    .outputs = wo_a_outputs,
    .generate = einsum_generate,
    .validate = einsum_validate,
    .alloc_outputs = einsum_alloc,
    .reference = einsum_reference,
    .policy = einsum_policy,
    .bound = einsum_bound,
};

/* ------------------------------------------------------------------ */
/* rocm_mxfp8_wo_a_bmm (sparse_attention.md 10.3 [S9])                  */
/*
 * Tolerance: deq(a) deq(w) = fp8 x fp8 x 2^(sa+sw-254) is exact in fp32
 * (for the scale range the generators and the epilogue produce), so the
 * fp32 dot over K lanes (tl.dot_scaled) is within gamma_n G of the ideal,
 * n = K + 2 K/32 (block scale products counted generously), G = sum_k |deq
 * a||deq w|; the bf16 store adds 0.5 ulp_bf16(|e| + delta). */

static const char *const bmm_variant_docs[] = {
    "a [T, G*K] e4m3fn with e8m0 scales per 1x32 (the MXFP8 epilogue), wo_a [G*R, K] e4m3fn with e8m0 scales "
    "[G*R, K/32] (the test's 1x32 weight granularity, spec 10.3 / quant 9 q.7); fp32 accumulation, bf16 "
    "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
};

static const dsv4_param_spec bmm_params[] = {
    {"n_local_groups", DSV4_P_INT, "1", "G: o_groups / TP", 0},
    {"o_lora_rank", DSV4_P_INT, "128", "R: output rows per group (1024 in V4/V4.1)", 0},
    {"num_tokens", DSV4_P_INT, "4", "generator: T", 1},
    {"K", DSV4_P_INT, "512", "generator: Dg = H*512/G, lanes per group", 1},
    {"zero_rows", DSV4_P_INTLIST, "[]", "generator: tokens whose activations are all zero", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec bmm_inputs[] = {
    {"a", DSV4_F8E4M3FN, DSV4_DT_NONE, "[T, G*K] MXFP8 activation codes"},
    {"a_scale", DSV4_U8, DSV4_DT_NONE, "[T, G*K/32] e8m0 scale bytes"},
    {"wo_a", DSV4_F8E4M3FN, DSV4_DT_NONE, "[G*R, K] MXFP8 weight codes"},
    {"wo_a_scale", DSV4_U8, DSV4_DT_NONE, "[G*R, K/32] e8m0 scale bytes"},
    {NULL, 0, 0, NULL},
};

/* fp32 rows of std `std` (row factor 2^[-2, 2]) quantized by the seeds'
 * MXFP8 rule (ceil(log2(amax/448)), spec 9.2) into codes and scales. */
static int gen_mxfp8_rows(dsv4_rng *rng, int64_t rows, int64_t W, double std, const dsv4_params *zp, uint8_t *codes,
                          uint8_t *scales, dsv4_status *st)
{
    float *x = malloc((size_t)(W + 1) * sizeof *x);
    if (!x)
        return oom(st);
    int rc = DSV4_OK;
    for (int64_t r = 0; r < rows && !rc; r++) {
        double f = std * ldexp(1.0, (int)dsv4_rng_range(rng, -2, 3));
        for (int64_t k = 0; k < W; k++)
            x[k] = (zp && dsv4_params_list_has(zp, "zero_rows", r)) ? 0.0f : (float)(dsv4_rng_normal(rng) * f);
        rc = dsv4_mx_quant_rows_fp8(x, 1, W, DSV4_MX_FP8_CEIL, codes + r * W, scales + r * (W / 32), st);
    }
    free(x);
    return rc;
}

static int bmm_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "num_tokens"), G = dsv4_params_int(ps, "n_local_groups");
    const int64_t R = dsv4_params_int(ps, "o_lora_rank"), K = dsv4_params_int(ps, "K");
    if (T < 0 || G < 1 || G > 64 || R < 0 || R > 4096 || K < 32 || K % 32 || K > 16384)
        return dsv4_fail(st, DSV4_EINPUT, "bmm generator: T >= 0, G in [1, 64], R in [0, 4096], K a multiple of 32");
    int64_t sa[2] = {T, G * K}, ssa[2] = {T, G * K / 32}, sw[2] = {G * R, K}, ssw[2] = {G * R, K / 32};
    dsv4_tensor *a, *as, *w, *ws;
    int rc;
    if ((rc = dsv4_tensors_add(in, "a", DSV4_F8E4M3FN, 2, sa, &a, st)) ||
        (rc = dsv4_tensors_add(in, "a_scale", DSV4_U8, 2, ssa, &as, st)) ||
        (rc = dsv4_tensors_add(in, "wo_a", DSV4_F8E4M3FN, 2, sw, &w, st)) ||
        (rc = dsv4_tensors_add(in, "wo_a_scale", DSV4_U8, 2, ssw, &ws, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "a");
    if ((rc = gen_mxfp8_rows(&rng, T, G * K, 1.0, ps, a->data, as->data, st)))
        return rc;
    dsv4_rng_init(&rng, c->seed, "wo_a");
    return gen_mxfp8_rows(&rng, G * R, K, 0.02, NULL, w->data, ws->data, st);
}

static int bmm_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_wo_a_bmm_args *b, dsv4_status *st)
{
    const dsv4_tensor *a, *as, *w, *ws;
    int rc;
    if ((rc = dsv4_input(in, "a", DSV4_F8E4M3FN, 2, &a, st)) || (rc = dsv4_input(in, "a_scale", DSV4_U8, 2, &as, st)) ||
        (rc = dsv4_input(in, "wo_a", DSV4_F8E4M3FN, 2, &w, st)) ||
        (rc = dsv4_input(in, "wo_a_scale", DSV4_U8, 2, &ws, st)))
        return rc;
    b->T = a->shape[0];
    b->G = dsv4_params_int(c->params, "n_local_groups");
    b->R = dsv4_params_int(c->params, "o_lora_rank");
    b->K = w->shape[1];
    if (b->G < 1 || b->R < 0 || b->K % 32 || a->shape[1] != b->G * b->K || w->shape[0] != b->G * b->R ||
        as->shape[0] != b->T || as->shape[1] != b->G * b->K / 32 || ws->shape[0] != b->G * b->R ||
        ws->shape[1] != b->K / 32)
        return dsv4_fail(st, DSV4_EINPUT,
                         "bmm shapes: a [T, G*K], a_scale [T, G*K/32], wo_a [G*R, K], wo_a_scale [G*R, K/32] with "
                         "G = %" PRId64 ", R = %" PRId64 ", K = %" PRId64 " (a multiple of 32)", b->G, b->R, b->K);
    b->a = a->data;
    b->a_scale = as->data;
    b->w = w->data;
    b->w_scale = ws->data;
    return DSV4_OK;
}

static int bmm_run(const dsv4_opctx *c, const dsv4_tensors *in, double **out, double **gauge, int64_t *n,
                   dsv4_status *st)
{
    dsv4_wo_a_bmm_args b;
    int rc = bmm_args_of(c, in, &b, st);
    if (rc)
        return rc;
    *n = b.T * b.G * b.R;
    *out = malloc((size_t)(*n + 1) * sizeof(double));
    *gauge = malloc((size_t)(*n + 1) * sizeof(double));
    if (!*out || !*gauge)
        return oom(st);
    return dsv4_ref_mxfp8_wo_a_bmm(&b, *out, *gauge, st);
}

static int bmm_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    double *o = NULL, *g = NULL;
    int64_t n;
    int rc = bmm_run(c, in, &o, &g, &n, st);
    free(o), free(g);
    return rc;
}

static int bmm_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_wo_a_bmm_args b;
    int rc = bmm_args_of(c, in, &b, st);
    if (rc)
        return rc;
    int64_t shape[2] = {b.T, b.G * b.R};
    dsv4_tensor *y;
    if ((rc = dsv4_tensors_add(out, "out", DSV4_BF16, 2, shape, &y, st)))
        return rc;
    dsv4_poison(y);
    return DSV4_OK;
}

static int bmm_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    double *o = NULL, *g = NULL;
    int64_t n;
    int rc = bmm_run(c, in, &o, &g, &n, st);
    dsv4_tensor *y = dsv4_tensors_find(out, "out");
    for (int64_t i = 0; !rc && i < n; i++)
        dsv4_tensor_set(y, i, o[i]);
    free(o), free(g);
    return rc;
}

static int bmm_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                      dsv4_status *st)
{
    (void)c, (void)in, (void)output, (void)st;
    float_policy(pol, "per element: 0.5 ulp_bf16(|e|+d) + d, d = gamma_n sum_k |deq a||deq w|, n = K + 2K/32, "
                      "u = 2^-24 (fp32 tl.dot_scaled accumulation)");
    return DSV4_OK;
}

static int bmm_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t nb,
                     dsv4_status *st)
{
    (void)output;
    double *o = NULL, *g = NULL;
    int64_t n;
    int rc = bmm_run(c, in, &o, &g, &n, st);
    if (!rc && n != nb)
        rc = dsv4_fail(st, DSV4_EINPUT, "bmm bound: element count");
    if (!rc) {
        const double K = (double)dsv4_tensors_get(in, "wo_a")->shape[1];
        for (int64_t i = 0; i < n; i++)
            bound[i] = bf16_gemm_bound(o[i], gamma32(K + 2 * K / 32) * g[i]);
    }
    free(o), free(g);
    return rc;
}

const dsv4_op dsv4_op_rocm_mxfp8_wo_a_bmm = {
    .name = "rocm_mxfp8_wo_a_bmm",
    .summary = "wo_a on the MXFP8 path: grouped MXFP8 x MXFP8 GEMM, fp32 accumulation, bf16 [T, G*R]",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(spec sparse_attention.md 10.3; seed _o_proj)",
    .variants = default_only,
    .variant_docs = bmm_variant_docs,
    .params = bmm_params,
    .inputs = bmm_inputs,
    .outputs = wo_a_outputs,
    .generate = bmm_generate,
    .validate = bmm_validate,
    .alloc_outputs = bmm_alloc,
    .reference = bmm_reference,
    .policy = bmm_policy,
    .bound = bmm_bound,
};

/* ------------------------------------------------------------------ */
/* fused_qnorm_rope_kv_insert (_fused_qnorm_rope_kv_insert, spec 3)    */
/*
 * q output: the golden is the double ideal (spec 3 Q 1-5).  The kernel's
 * fp32 path: the sum of 512 squares (relative error <= gamma_511), the
 * mean (exact, /512), + eps and rsqrt (v_rsq is approximate: taken as
 * <= 2 ulp), halving the relative error of the sum through the square root:
 * <= 256u + 4u; x r: u; RoPE: 3u on |e c| + |o s|.  Relative to mag (|y| on
 * NoPE lanes, |e c| + |o s| or |e s| + |o c| on RoPE lanes) that is
 * <= 264u; rho = 2^-15 = 512u keeps a factor 2 for the rsqrt approximation.
 * bound = 0.5 ulp_bf16(|e| + rho mag) + rho mag.
 * swa_cache: bit-exact bytes (spec 3 KV 1-4, 2.2): RoPE lanes from unfused
 * fp32 products (an FMA-contracting kernel may differ by one bf16 ulp in
 * a RoPE lane: spec quant 9 q.3, an open question). */

#define QNORM_RHO 0x1p-15

static const char *const qi_variants[] = {"default", "fp8=fnuz", NULL};
static const char *const qi_variant_docs[] = {
    "gfx950 / NVIDIA: the C++ encoder writes OCP e4m3fn, FP8MAX 448 (spec 2.3 [S15]); eps as given; ROCm pads no "
    "heads (vllm-project/vllm:vllm/models/deepseek_v4/attention.py@0484480bc73081c4a5133b3cb53018323fce632d)",
    "gfx942: clamp to +-448 then e4m3fnuz codes (saturating: spec 2.3 open question 3)",
};

static const dsv4_param_spec qi_params[] = {
    {"eps", DSV4_P_FLOAT, "1e-06", "q RMSNorm epsilon (rms_norm_eps)", 0},
    {"block_size", DSV4_P_INT, "64", "SWA cache tokens per page (DeepseekV4SWACache.block_size = 64)", 0},
    {"num_tokens", DSV4_P_INT, "6", "generator: T (q and kv rows)", 1},
    {"num_slots", DSV4_P_INT, "-1", "generator: len(slot_mapping) (DP padding: < T); -1 = T", 1},
    {"num_heads", DSV4_P_INT, "4", "generator: H", 1},
    {"num_blocks", DSV4_P_INT, "2", "generator: SWA cache pages", 1},
    {"max_position", DSV4_P_INT, "1024", "generator: rows of cos_sin_cache", 1},
    {"rope_theta", DSV4_P_FLOAT, "10000", "generator: base of the cos/sin table", 1},
    {"skip_tokens", DSV4_P_INTLIST, "[]", "generator: tokens with slot -1", 1},
    {"kv_scale", DSV4_P_FLOAT, "1", "generator: kv magnitude (large: near the fp8 block scale limits)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec qi_inputs[] = {
    {"q", DSV4_BF16, DSV4_DT_NONE, "[T, H, 512] wq_b output"},
    {"kv", DSV4_BF16, DSV4_DT_NONE, "[T, 512] kv after kv_norm"},
    {"swa_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, B, 584] the SWA cache before"},
    {"slot_mapping", DSV4_I64, DSV4_DT_NONE, "[Ts] SWA slots (-1: skip)"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T] token positions"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[max_position, 64] rows cos | sin"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec qi_outputs[] = {
    {"q", DSV4_BF16, DSV4_F64, "[T, H, 512] q after RMSNorm and RoPE (golden: the double ideal)"},
    {"swa_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, B, 584] the SWA cache after the insert"},
    {NULL, 0, 0, NULL},
};

static int qi_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    const int64_t T = dsv4_params_int(ps, "num_tokens"), H = dsv4_params_int(ps, "num_heads");
    const int64_t nb = dsv4_params_int(ps, "num_blocks"), B = dsv4_params_int(ps, "block_size");
    const int64_t P = dsv4_params_int(ps, "max_position");
    int64_t Ts = dsv4_params_int(ps, "num_slots");
    Ts = Ts < 0 ? T : Ts;
    if (T < 0 || Ts > T || H < 1 || H > 256 || nb < 1 || B < 1 || P < 1 || Ts > nb * B)
        return dsv4_fail(st, DSV4_EINPUT, "qnorm insert generator: 0 <= num_slots <= T <= num_blocks*block_size, H in [1, 256]");
    int64_t sq[3] = {T, H, 512}, skv[2] = {T, 512}, sc[3] = {nb, B, DSV4_KV_TOKEN_BYTES}, scs[2] = {P, 64};
    dsv4_tensor *q, *kv, *cache, *slots, *pos, *cs;
    int rc;
    if ((rc = dsv4_tensors_add(in, "q", DSV4_BF16, 3, sq, &q, st)) || (rc = dsv4_tensors_add(in, "kv", DSV4_BF16, 2, skv, &kv, st)) ||
        (rc = dsv4_tensors_add(in, "swa_cache", DSV4_U8, 3, sc, &cache, st)) ||
        (rc = dsv4_tensors_add(in, "slot_mapping", DSV4_I64, 1, &Ts, &slots, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "q");
    for (int64_t i = 0; i < T * H * 512; i++) /* wq_b output scale varies per head */
        ((uint16_t *)q->data)[i] = dsv4_bf16_from_f32((float)(dsv4_rng_normal(&rng) * (1 + (i / 512) % 5)));
    dsv4_rng_init(&rng, c->seed, "kv");
    const double ks = dsv4_params_float(ps, "kv_scale");
    for (int64_t i = 0; i < T * 512; i++)
        ((uint16_t *)kv->data)[i] = dsv4_bf16_from_f32((float)(dsv4_rng_normal(&rng) * ks));
    dsv4_rng_init(&rng, c->seed, "swa_cache"); /* stale bytes that untouched slots must keep */
    for (size_t i = 0; i < cache->nbytes; i++)
        ((uint8_t *)cache->data)[i] = (uint8_t)(dsv4_rng_next(&rng) >> 56);
    int32_t *perm = malloc((size_t)(nb * B) * sizeof *perm);
    if (!perm)
        return oom(st);
    for (int64_t i = 0; i < nb * B; i++)
        perm[i] = (int32_t)i;
    dsv4_rng_init(&rng, c->seed, "slot_mapping");
    dsv4_rng_shuffle_i32(&rng, perm, nb * B);
    for (int64_t t = 0; t < Ts; t++)
        ((int64_t *)slots->data)[t] = dsv4_params_list_has(ps, "skip_tokens", t) ? -1 : perm[t];
    free(perm);
    dsv4_rng_init(&rng, c->seed, "positions");
    for (int64_t t = 0; t < T; t++)
        ((int64_t *)pos->data)[t] = dsv4_rng_range(&rng, 0, P);
    dsv4_gen_cos_sin(cs->data, P, 64, dsv4_params_float(ps, "rope_theta"));
    return DSV4_OK;
}

static int qi_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_qnorm_insert_args *a, dsv4_kv_layout *L,
                      dsv4_status *st)
{
    const dsv4_tensor *q, *kv, *cache, *slots, *pos, *cs;
    int rc;
    if ((rc = dsv4_input(in, "q", DSV4_BF16, 3, &q, st)) || (rc = dsv4_input(in, "kv", DSV4_BF16, 2, &kv, st)) ||
        (rc = dsv4_input(in, "swa_cache", DSV4_U8, 3, &cache, st)) ||
        (rc = dsv4_input(in, "slot_mapping", DSV4_I64, 1, &slots, st)) ||
        (rc = dsv4_input(in, "positions", DSV4_I64, 1, &pos, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &cs, st)))
        return rc;
    const int64_t B = dsv4_params_int(c->params, "block_size");
    if (q->shape[2] != 512 || kv->shape[1] != 512 || kv->shape[0] != q->shape[0] || pos->shape[0] != q->shape[0] ||
        slots->shape[0] > q->shape[0] || cs->shape[1] != 64 || cache->shape[1] != B ||
        cache->shape[2] != DSV4_KV_TOKEN_BYTES)
        return dsv4_fail(st, DSV4_EINPUT, "shapes: q [T, H, 512], kv [T, 512], positions [T], slot_mapping [Ts <= T], "
                                          "cos_sin_cache [P, 64], swa_cache [nb, block_size = %" PRId64 ", 584]", B);
    memset(a, 0, sizeof *a);
    a->q = q->data;
    a->T = q->shape[0];
    a->H = q->shape[1];
    a->kv = kv->data;
    a->slot_mapping = slots->data;
    a->Ts = slots->shape[0];
    a->positions = pos->data;
    a->cos_sin_cache = cs->data;
    a->num_pos = cs->shape[0];
    a->eps = dsv4_params_float(c->params, "eps");
    L->block_size = B;
    L->num_blocks = cache->shape[0];
    L->page_stride = 0;
    return DSV4_OK;
}

static dsv4_kv_encode_opts qi_opts(int variant)
{
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
    if (variant == 1) /* gfx942: FNUZ codes, the encoder still clamps at 448 (spec 2.3 [S15]) */
        o.kind = DSV4_FP8_E4M3FNUZ;
    return o;
}

static int qi_run(const dsv4_opctx *c, const dsv4_tensors *in, double *q_out, double *mag, uint8_t *cache,
                  dsv4_status *st)
{
    dsv4_qnorm_insert_args a;
    dsv4_kv_layout L;
    int rc = qi_args_of(c, in, &a, &L, st);
    if (rc)
        return rc;
    double *tmp = q_out ? NULL : malloc((size_t)(a.T * a.H * 512 + 1) * sizeof *tmp);
    if (!q_out && !tmp)
        return oom(st);
    rc = dsv4_ref_qnorm_rope(&a, q_out ? q_out : tmp, mag, st);
    free(tmp);
    if (!rc && cache) {
        const dsv4_kv_encode_opts o = qi_opts(c->variant);
        rc = dsv4_ref_kv_rope_insert(&a, cache, &L, &o, st);
    }
    return rc;
}

static int qi_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *cache = dsv4_tensors_get(in, "swa_cache");
    uint8_t *scratch = cache ? malloc(cache->nbytes + 1) : NULL;
    if (cache && !scratch)
        return oom(st);
    if (scratch)
        memcpy(scratch, cache->data, cache->nbytes);
    int rc = qi_run(c, in, NULL, NULL, scratch, st); /* slots, positions, finiteness */
    free(scratch);
    return rc;
}

static int qi_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_qnorm_insert_args a;
    dsv4_kv_layout L;
    int rc = qi_args_of(c, in, &a, &L, st);
    if (rc)
        return rc;
    int64_t sq[3] = {a.T, a.H, 512};
    const dsv4_tensor *cin = dsv4_tensors_get(in, "swa_cache");
    dsv4_tensor *q, *cache;
    if ((rc = dsv4_tensors_add(out, "q", DSV4_BF16, 3, sq, &q, st)) ||
        (rc = dsv4_tensors_add(out, "swa_cache", DSV4_U8, 3, cin->shape, &cache, st)))
        return rc;
    dsv4_poison(q);
    memcpy(cache->data, cin->data, cin->nbytes); /* in place: untouched slots keep their bytes */
    return DSV4_OK;
}

static int qi_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_tensor *q = dsv4_tensors_find(out, "q"), *cache = dsv4_tensors_find(out, "swa_cache");
    const int64_t n = dsv4_tensor_numel(q);
    double *d = malloc((size_t)(n + 1) * sizeof *d);
    if (!d)
        return oom(st);
    int rc = qi_run(c, in, d, NULL, cache->data, st);
    for (int64_t i = 0; !rc && i < n; i++)
        dsv4_tensor_set(q, i, d[i]);
    free(d);
    return rc;
}

static int qi_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    if (!strcmp(output, "swa_cache")) {
        dsv4_policy_exact(pol, "584-byte fp8_ds_mla bytes (fp32 RoPE, bf16, UE8M0 per 64, e4m3 RNE; spec 2.2, 3)");
        return DSV4_OK;
    }
    float_policy(pol, "per element: 0.5 ulp_bf16(|e|+d) + d, d = 2^-15 m, m = |y| (NoPE) or |e c|+|o s| (RoPE): "
                      "fp32 sum of 512 squares, rsqrt (approximate), products, rotation");
    return DSV4_OK;
}

static int qi_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    if (strcmp(output, "q"))
        return DSV4_OK;
    double *e = malloc((size_t)(n + 1) * sizeof *e);
    if (!e)
        return oom(st);
    int rc = qi_run(c, in, e, bound, NULL, st);
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] = bf16_gemm_bound(e[i], QNORM_RHO * bound[i]);
    free(e);
    return rc;
}

/* page, token, and which part of the 584-byte record (spec 2.1). */
static void cache_locate(int64_t flat, int64_t B, char *buf, size_t len)
{
    const int64_t page = flat / (B * DSV4_KV_TOKEN_BYTES), off = flat % (B * DSV4_KV_TOKEN_BYTES);
    if (off < B * DSV4_KV_DATA_BYTES) {
        const int64_t tok = off / DSV4_KV_DATA_BYTES, b = off % DSV4_KV_DATA_BYTES;
        snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), %s %" PRId64, page, tok,
                 page * B + tok, b < DSV4_KV_NOPE_DIM ? "fp8 value of dim" : "bf16 RoPE byte", b);
    } else {
        const int64_t s = off - B * DSV4_KV_DATA_BYTES;
        snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), scale byte %" PRId64, page,
                 s / DSV4_KV_SCALE_BYTES, page * B + s / DSV4_KV_SCALE_BYTES, s % DSV4_KV_SCALE_BYTES);
    }
}

static void qi_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                      size_t len)
{
    buf[0] = '\0';
    if (!strcmp(output, "swa_cache")) {
        cache_locate(flat, dsv4_params_int(c->params, "block_size"), buf, len);
        return;
    }
    const dsv4_tensor *q = dsv4_tensors_get(in, "q");
    if (q && q->ndim == 3 && q->shape[1] > 0)
        snprintf(buf, len, "token %" PRId64 ", head %" PRId64 ", dim %" PRId64 " (%s)", flat / (q->shape[1] * 512),
                 flat / 512 % q->shape[1], flat % 512, flat % 512 < 448 ? "NoPE" : "RoPE");
}

const dsv4_op dsv4_op_fused_qnorm_rope_kv_insert = {
    .name = "fused_qnorm_rope_kv_insert",
    .summary = "q RMSNorm (no weight) + RoPE in place; kv RoPE, bf16 and 584-byte fp8 insert into the SWA cache",
    .source = "id 54692747001 fused_deepseek_v4_qnorm_rope_kv_rope_quant_insert [S15]; "
              "vllm-project/vllm:vllm/models/deepseek_v4/hw_agnostic/attention/kernels/triton_qnorm_rope_kv_fp8_insert.py"
              "@54cedc2fa48304e72794af12ceca35fa98a387e3 (spec sparse_attention.md 3, 2.2)",
    .variants = qi_variants,
    .variant_docs = qi_variant_docs,
    .params = qi_params,
    .inputs = qi_inputs,
    .outputs = qi_outputs,
    .generate = qi_generate,
    .validate = qi_validate,
    .alloc_outputs = qi_alloc,
    .reference = qi_reference,
    .policy = qi_policy,
    .locate = qi_locate,
    .bound = qi_bound,
};

/* ------------------------------------------------------------------ */
/* compressor (compressor_chain: save_partial_states, compress,        */
/* insert_cache; spec 11, 2.5, 5.4 [S17-S20])                           */
/*
 * state_cache: [kv | score + ape] rows, one fp32 add each: bit-exact.
 * kv_cache: the 584-byte bytes of the compressed rows, computed from the
 * double ideal (softmax with exp, RMSNorm) rounded to fp32 and bf16 as the
 * kernel stores them.  The kernel's fp32 exp/rsqrt move n by a few fp32
 * ulps, which flips a bf16 (hence fp8 code) rounding only when n lies
 * within those ulps of a rounding boundary (spec 14: "FP8 codes may differ
 * by 1 near rounding ties"): compared exactly, with a budget of 1/256 of
 * the compressed bytes before the verdict turns from warn to fail. */

static const char *const comp_variant_docs[] = {
    "C4 (overlapping 2c window, coff 2, state page 4) and C128 (coff 1, state page 8) by compress_ratio; OCP "
    "e4m3fn, FP8MAX 448; RoPE at (pos // c) * c on the unrounded n "
    "(vllm-project/vllm:vllm/models/deepseek_v4/compressor.py@01cc1d3e7640a8ada37f99ca60cc3ee66490cf38, "
    "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/fused_compress_quant_cache.py@045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0)",
};

static const dsv4_param_spec comp_params[] = {
    {"compress_ratio", DSV4_P_INT, "4", "c: 4 (CSA) or 128 (HCA)", 0},
    {"eps", DSV4_P_FLOAT, "1e-06", "RMSNorm epsilon", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: tokens of this step per request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: tokens of earlier steps per request (default 0)", 1},
    {"prefix_steps", DSV4_P_INT, "1", "generator: the prefix runs through the reference in this many steps", 1},
    {"rope_theta", DSV4_P_FLOAT, "160000", "generator: compress_rope_theta of the cos/sin table", 1},
    {"score_scale", DSV4_P_FLOAT, "2", "generator: std of the gate scores", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec comp_inputs[] = {
    {"kv_score", DSV4_F32, DSV4_DT_NONE, "[T, 2*coff*512] hidden @ fused_wkv_wgate^T (fp32): kv | score"},
    {"positions", DSV4_I64, DSV4_DT_NONE, "[T]"},
    {"query_start_loc", DSV4_I32, DSV4_DT_NONE, "[R+1] token ranges of the requests"},
    {"ape", DSV4_F32, DSV4_DT_NONE, "[c, coff*512] absolute position bias of the scores"},
    {"state_cache", DSV4_F32, DSV4_DT_NONE, "[num_state_blocks, Bs, 2*coff*512] state before this step"},
    {"state_slot_mapping", DSV4_I64, DSV4_DT_NONE, "[T] state slots (-1: none)"},
    {"state_block_table", DSV4_I32, DSV4_DT_NONE, "[R, max_state_blocks] state pages"},
    {"norm_weight", DSV4_F32, DSV4_DT_NONE, "[512] RMSNorm weight"},
    {"cos_sin_cache", DSV4_F32, DSV4_DT_NONE, "[P, 64] rows cos | sin (compressed-layer table)"},
    {"kv_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, 256/c, 584] compressed cache before"},
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[R, max_blocks] compressed-cache pages"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec comp_outputs[] = {
    {"state_cache", DSV4_F32, DSV4_DT_NONE, "state after save_partial_states"},
    {"kv_cache", DSV4_U8, DSV4_DT_NONE, "compressed cache after insert_cache"},
    {NULL, 0, 0, NULL},
};

static int comp_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_compressor_args *a, dsv4_status *st)
{
    const dsv4_tensor *ks, *pos, *qsl, *ape, *sc, *ssm, *sbt, *nw, *cs, *kc, *bt;
    int rc;
    if ((rc = dsv4_input(in, "kv_score", DSV4_F32, 2, &ks, st)) || (rc = dsv4_input(in, "positions", DSV4_I64, 1, &pos, st)) ||
        (rc = dsv4_input(in, "query_start_loc", DSV4_I32, 1, &qsl, st)) || (rc = dsv4_input(in, "ape", DSV4_F32, 2, &ape, st)) ||
        (rc = dsv4_input(in, "state_cache", DSV4_F32, 3, &sc, st)) ||
        (rc = dsv4_input(in, "state_slot_mapping", DSV4_I64, 1, &ssm, st)) ||
        (rc = dsv4_input(in, "state_block_table", DSV4_I32, 2, &sbt, st)) ||
        (rc = dsv4_input(in, "norm_weight", DSV4_F32, 1, &nw, st)) ||
        (rc = dsv4_input(in, "cos_sin_cache", DSV4_F32, 2, &cs, st)) || (rc = dsv4_input(in, "kv_cache", DSV4_U8, 3, &kc, st)) ||
        (rc = dsv4_input(in, "block_table", DSV4_I32, 2, &bt, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->ratio = dsv4_params_int(c->params, "compress_ratio");
    if (a->ratio != 4 && a->ratio != 128)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio = %" PRId64 ": 4 or 128", a->ratio);
    const int coff = dsv4_compressor_coff(a->ratio);
    const int64_t W2 = 2 * coff * 512, Bs = dsv4_compressor_state_block(a->ratio);
    a->T = ks->shape[0];
    a->R = qsl->shape[0] - 1;
    if (ks->shape[1] != W2 || pos->shape[0] != a->T || a->R < 0 || ape->shape[0] != a->ratio ||
        ape->shape[1] != coff * 512 || sc->shape[1] != Bs || sc->shape[2] != W2 || ssm->shape[0] != a->T ||
        sbt->shape[0] != a->R || nw->shape[0] != 512 || cs->shape[1] != 64 || kc->shape[1] != 256 / a->ratio ||
        kc->shape[2] != DSV4_KV_TOKEN_BYTES || bt->shape[0] != a->R)
        return dsv4_fail(st, DSV4_EINPUT,
                         "compressor shapes (c = %" PRId64 "): kv_score [T, %" PRId64 "], ape [c, %d], state_cache [n, %" PRId64
                         ", %" PRId64 "], kv_cache [n, %" PRId64 ", 584], block tables [R, .], query_start_loc [R+1]",
                         a->ratio, W2, coff * 512, Bs, W2, 256 / a->ratio);
    a->kv_score = ks->data;
    a->positions = pos->data;
    a->query_start_loc = qsl->data;
    a->ape = ape->data;
    a->state = sc->data; /* replaced by the output copy before a step runs */
    a->num_state_blocks = sc->shape[0];
    a->state_slots = ssm->data;
    a->state_block_table = sbt->data;
    a->max_state_blocks = sbt->shape[1];
    a->norm_weight = nw->data;
    a->eps = dsv4_params_float(c->params, "eps");
    a->cos_sin_cache = cs->data;
    a->num_pos = cs->shape[0];
    a->kv_cache = kc->data;
    a->num_blocks = kc->shape[0];
    a->block_table = bt->data;
    a->max_blocks = bt->shape[1];
    return DSV4_OK;
}

/* Page tables: request r gets n[r] pages from a shuffled [0, total). */
static void gen_pages(dsv4_rng *rng, const int64_t *n, int64_t R, int64_t maxp, int64_t total, int32_t *table)
{
    int32_t *perm = malloc((size_t)(total + 1) * sizeof *perm);
    if (!perm)
        return;
    for (int64_t i = 0; i < total; i++)
        perm[i] = (int32_t)i;
    dsv4_rng_shuffle_i32(rng, perm, total);
    int64_t k = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < maxp; j++)
            table[r * maxp + j] = j < n[r] ? perm[k++] : -1;
    free(perm);
}

typedef struct comp_gen {
    int64_t R, ratio, coff, W2, Bs, B, qlen[DSV4_PARAM_LIST_MAX], pre[DSV4_PARAM_LIST_MAX];
    float *ks_all[DSV4_PARAM_LIST_MAX]; /* per request: kv_score of positions [0, S) */
} comp_gen;

/* One step over positions [lo[r], hi[r]) of every request into a (its
 * tensors' buffers reused: T rows at most max_T). */
static int comp_gen_step(const comp_gen *g, const int64_t *lo, const int64_t *hi, dsv4_compressor_args *a,
                         float *ks, int64_t *pos, int32_t *qsl, int64_t *ssm, dsv4_status *st)
{
    int64_t t = 0;
    qsl[0] = 0;
    for (int64_t r = 0; r < g->R; r++) {
        for (int64_t p = lo[r]; p < hi[r]; p++, t++) {
            memcpy(ks + t * g->W2, g->ks_all[r] + p * g->W2, (size_t)g->W2 * sizeof *ks);
            pos[t] = p;
            const int32_t page = a->state_block_table[r * a->max_state_blocks + p / g->Bs];
            ssm[t] = (int64_t)page * g->Bs + p % g->Bs; /* the state group's per-token slot (spec 2.5) */
        }
        qsl[r + 1] = (int32_t)t;
    }
    a->T = t;
    a->kv_score = ks;
    a->positions = pos;
    a->query_start_loc = qsl;
    a->state_slots = ssm;
    return dsv4_ref_compressor_step(a, NULL, st);
}

static int comp_generate_inner(const dsv4_opctx *c, comp_gen *g, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    int64_t T = 0, maxS = 1, nsp[DSV4_PARAM_LIST_MAX], ncp[DSV4_PARAM_LIST_MAX], tot_s = 1, tot_c = 1, msp = 1, mcp = 1;
    for (int64_t r = 0; r < g->R; r++) {
        const int64_t S = g->pre[r] + g->qlen[r];
        T += g->qlen[r];
        maxS = S > maxS ? S : maxS;
        nsp[r] = (S + g->Bs - 1) / g->Bs;
        ncp[r] = ((S + g->ratio - 1) / g->ratio + g->B - 1) / g->B;
        tot_s += nsp[r], tot_c += ncp[r];
        msp = nsp[r] > msp ? nsp[r] : msp;
        mcp = ncp[r] > mcp ? ncp[r] : mcp;
    }
    const int64_t R1 = g->R + 1, half = g->coff * 512;
    int64_t sks[2] = {T, g->W2}, sape[2] = {g->ratio, half}, ssc[3] = {tot_s, g->Bs, g->W2}, ssbt[2] = {g->R, msp},
            snw = 512, scs[2] = {maxS + 1, 64}, skc[3] = {tot_c, g->B, DSV4_KV_TOKEN_BYTES}, sbt[2] = {g->R, mcp};
    dsv4_tensor *ks, *pos, *qsl, *ape, *sc, *ssm, *sbtt, *nw, *cs, *kc, *bt;
    int rc;
    if ((rc = dsv4_tensors_add(in, "kv_score", DSV4_F32, 2, sks, &ks, st)) ||
        (rc = dsv4_tensors_add(in, "positions", DSV4_I64, 1, &T, &pos, st)) ||
        (rc = dsv4_tensors_add(in, "query_start_loc", DSV4_I32, 1, &R1, &qsl, st)) ||
        (rc = dsv4_tensors_add(in, "ape", DSV4_F32, 2, sape, &ape, st)) ||
        (rc = dsv4_tensors_add(in, "state_cache", DSV4_F32, 3, ssc, &sc, st)) ||
        (rc = dsv4_tensors_add(in, "state_slot_mapping", DSV4_I64, 1, &T, &ssm, st)) ||
        (rc = dsv4_tensors_add(in, "state_block_table", DSV4_I32, 2, ssbt, &sbtt, st)) ||
        (rc = dsv4_tensors_add(in, "norm_weight", DSV4_F32, 1, &snw, &nw, st)) ||
        (rc = dsv4_tensors_add(in, "cos_sin_cache", DSV4_F32, 2, scs, &cs, st)) ||
        (rc = dsv4_tensors_add(in, "kv_cache", DSV4_U8, 3, skc, &kc, st)) ||
        (rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, sbt, &bt, st)))
        return rc;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "pages");
    gen_pages(&rng, nsp, g->R, msp, tot_s, sbtt->data);
    gen_pages(&rng, ncp, g->R, mcp, tot_c, bt->data);
    dsv4_rng_init(&rng, c->seed, "kv_score");
    const double sscale = dsv4_params_float(ps, "score_scale");
    for (int64_t r = 0; r < g->R; r++) {
        const int64_t S = g->pre[r] + g->qlen[r];
        g->ks_all[r] = malloc((size_t)(S * g->W2 + 1) * sizeof(float));
        if (!g->ks_all[r])
            return oom(st);
        for (int64_t i = 0; i < S * g->W2; i++)
            g->ks_all[r][i] = (float)(dsv4_rng_normal(&rng) * (i % g->W2 < half ? 1.0 : sscale));
    }
    dsv4_rng_init(&rng, c->seed, "ape");
    for (int64_t i = 0; i < g->ratio * half; i++)
        ((float *)ape->data)[i] = (float)(dsv4_rng_normal(&rng) * 0.5);
    dsv4_rng_init(&rng, c->seed, "norm_weight");
    for (int64_t i = 0; i < 512; i++) /* bf16 checkpoint weights held as fp32 */
        ((float *)nw->data)[i] = dsv4_round_bf16((float)(1.0 + 0.1 * dsv4_rng_normal(&rng)));
    dsv4_gen_cos_sin(cs->data, maxS + 1, 64, dsv4_params_float(ps, "rope_theta"));
    dsv4_compressor_args a;
    if ((rc = comp_args_of(c, in, &a, st)))
        return rc;
    /* Earlier steps: the prefix through the reference, in prefix_steps chunks. */
    const int64_t steps = dsv4_params_int(ps, "prefix_steps");
    int64_t lo[DSV4_PARAM_LIST_MAX], hi[DSV4_PARAM_LIST_MAX], maxpre = 0;
    for (int64_t r = 0; r < g->R; r++)
        maxpre = g->pre[r] > maxpre ? g->pre[r] : maxpre;
    float *tks = malloc((size_t)((maxpre * g->R + 1) * g->W2) * sizeof *tks);
    int64_t *tpos = malloc((size_t)(maxpre * g->R + 1) * sizeof *tpos), *tssm = malloc((size_t)(maxpre * g->R + 1) * sizeof *tssm);
    int32_t tqsl[DSV4_PARAM_LIST_MAX + 1];
    if (!tks || !tpos || !tssm)
        rc = oom(st);
    for (int64_t s = 0; !rc && s < steps; s++) {
        for (int64_t r = 0; r < g->R; r++)
            lo[r] = g->pre[r] * s / steps, hi[r] = g->pre[r] * (s + 1) / steps;
        rc = comp_gen_step(g, lo, hi, &a, tks, tpos, tqsl, tssm, st);
    }
    free(tks), free(tpos), free(tssm);
    if (rc)
        return rc;
    /* This step: the query tokens. */
    int64_t t = 0;
    int32_t *q = qsl->data;
    q[0] = 0;
    for (int64_t r = 0; r < g->R; r++) {
        for (int64_t p = g->pre[r]; p < g->pre[r] + g->qlen[r]; p++, t++) {
            memcpy((float *)ks->data + t * g->W2, g->ks_all[r] + p * g->W2, (size_t)g->W2 * sizeof(float));
            ((int64_t *)pos->data)[t] = p;
            ((int64_t *)ssm->data)[t] = (int64_t)((int32_t *)sbtt->data)[r * msp + p / g->Bs] * g->Bs + p % g->Bs;
        }
        q[r + 1] = (int32_t)t;
    }
    return DSV4_OK;
}

static int comp_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    comp_gen g;
    memset(&g, 0, sizeof g);
    const int64_t *ql, *pl;
    g.R = dsv4_params_list(ps, "query_lens", &ql);
    int np = dsv4_params_list(ps, "prefix_lens", &pl);
    g.ratio = dsv4_params_int(ps, "compress_ratio");
    if ((g.ratio != 4 && g.ratio != 128) || (np && np != g.R) || dsv4_params_int(ps, "prefix_steps") < 1)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio 4 or 128; prefix_lens as long as query_lens; prefix_steps >= 1");
    for (int64_t r = 0; r < g.R; r++) {
        g.qlen[r] = ql[r], g.pre[r] = np ? pl[r] : 0;
        if (g.qlen[r] < 0 || g.pre[r] < 0 || g.qlen[r] + g.pre[r] > 100000)
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": lengths out of range", r);
    }
    g.coff = dsv4_compressor_coff(g.ratio);
    g.W2 = 2 * g.coff * 512;
    g.Bs = dsv4_compressor_state_block(g.ratio);
    g.B = 256 / g.ratio;
    int rc = comp_generate_inner(c, &g, in, st);
    for (int64_t r = 0; r < g.R; r++)
        free(g.ks_all[r]);
    return rc;
}

static int comp_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    return rc ? rc : dsv4_compressor_check(&a, st);
}

static int comp_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    if (rc)
        return rc;
    const dsv4_tensor *sc = dsv4_tensors_get(in, "state_cache"), *kc = dsv4_tensors_get(in, "kv_cache");
    dsv4_tensor *osc, *okc;
    if ((rc = dsv4_tensors_add(out, "state_cache", DSV4_F32, 3, sc->shape, &osc, st)) ||
        (rc = dsv4_tensors_add(out, "kv_cache", DSV4_U8, 3, kc->shape, &okc, st)))
        return rc;
    memcpy(osc->data, sc->data, sc->nbytes); /* in place: what the step does not write stays */
    memcpy(okc->data, kc->data, kc->nbytes);
    return DSV4_OK;
}

static int comp_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_compressor_args a;
    int rc = comp_args_of(c, in, &a, st);
    if (rc)
        return rc;
    a.state = dsv4_tensors_find(out, "state_cache")->data;
    a.kv_cache = dsv4_tensors_find(out, "kv_cache")->data;
    return dsv4_ref_compressor_step(&a, NULL, st);
}

static int comp_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    if (!strcmp(output, "state_cache")) {
        dsv4_policy_exact(pol, "state rows [kv | score + ape] (one fp32 add)");
        return DSV4_OK;
    }
    dsv4_policy_exact(pol, "584-byte compressed rows from the ideal n; budget 1/256 of the bytes (warn): fp32 "
                           "exp/rsqrt flip codes only near bf16/fp8 rounding boundaries (spec 14)");
    pol->budget = 1.0 / 256;
    return DSV4_OK;
}

static void comp_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                        size_t len)
{
    (void)in;
    buf[0] = '\0';
    const int64_t ratio = dsv4_params_int(c->params, "compress_ratio");
    if (ratio != 4 && ratio != 128)
        return;
    if (!strcmp(output, "kv_cache")) {
        cache_locate(flat, 256 / ratio, buf, len);
        return;
    }
    const int64_t W2 = 2 * dsv4_compressor_coff(ratio) * 512, Bs = dsv4_compressor_state_block(ratio);
    snprintf(buf, len, "state page %" PRId64 ", row %" PRId64 ", %s lane %" PRId64, flat / (Bs * W2), flat / W2 % Bs,
             flat % W2 < W2 / 2 ? "kv" : "score", flat % (W2 / 2));
}

const dsv4_op dsv4_op_compressor = {
    .name = "compressor",
    .summary = "KV compressor step: save partial states, softmax-gated window, RMSNorm, RoPE, 584-byte insert",
    .source = "vllm-project/vllm:vllm/models/deepseek_v4/compressor.py@01cc1d3e7640a8ada37f99ca60cc3ee66490cf38, "
              "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/save_partial_states.py@0487d5c235baf6fdfb5ad1e0d97449ba548c68a0, "
              "vllm-project/vllm:vllm/v1/attention/backends/mla/compressor_utils.py@0ff8df7bef328b26f94c678c5e7bffb1d2cbc213 "
              "(spec sparse_attention.md 11, 2.5, 5.4; seed _forward_csa2_full compressor_chain)",
    .variants = default_only,
    .variant_docs = comp_variant_docs,
    .params = comp_params,
    .inputs = comp_inputs,
    .outputs = comp_outputs,
    .generate = comp_generate,
    .validate = comp_validate,
    .alloc_outputs = comp_alloc,
    .reference = comp_reference,
    .policy = comp_policy,
    .locate = comp_locate,
};
