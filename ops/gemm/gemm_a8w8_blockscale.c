/* gemm_a8w8_blockscale.c - the block-scaled fp8 GEMM (plain / bpreshuffle /
 * fnuz).  Semantics: ref/gemm.c (docs/semantics/gemm.md Q7).
 *
 * Tolerance of the bf16 output, per element, e the double ideal, G =
 * sum_k |a_k||b_k| (the gauge: scales folded in), K the reduction length
 * and u = 2^-24:
 *  - the kernel accumulates in fp32: fp8 x fp8 products are exact in fp32,
 *    so each product reaches the result through at most K - 1 additions
 *    plus the per-block scale products (2 per block: fl(P xs) ws,
 *    docs/semantics/gemm.md Q7) and the block accumulation (1 per block):
 *    n = K + 3 K/128 roundings, |y_f32 - e| <= delta = gamma_n G,
 *    gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, 3.1;
 *    ordering-free);
 *  - the bf16 store: bound = 1 ulp_bf16(|e| + delta) + delta (gemm.h).
 * The golden's own error (the double rounding of K/128 scaled block sums)
 * is below 2^-50 G and neglected.  G is computed from the inputs in the
 * bound pass (dgemm on |A|, |B|: a bound, never a golden, so its summation
 * order does not matter), which keeps the bound per element (a global
 * max-row-norm bound would be loose by orders of magnitude on rows of mixed
 * scale). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compare/perm_hint.h"
#include "../../ref/fp8quant.h"
#include "../../ref/gemm.h"
#include "../../ref/numerics.h"
#include "gemm.h"

/* What a variant changes: the fp8 format of XQ and WQ, and the bpreshuffle
 * layout (WQ = shuffle_weight(W, (16,16)) bytes, x_scale stored transposed). */
typedef struct gemm_rule {
    dsv4_fp8_kind kind;
    int bpreshuffle;
} gemm_rule;

static const gemm_rule gemm_plain = {DSV4_FP8_E4M3FN, 0};
static const gemm_rule gemm_bpreshuffle = {DSV4_FP8_E4M3FN, 1};
static const gemm_rule gemm_fnuz = {DSV4_FP8_E4M3FNUZ, 0};

static const dsv4_variant gemm_variants[] = {
    {"default",
     "gemm_a8w8_blockscale / apply_pre_quantized_block_scaled_mm: XQ [M, K] e4m3fn, WQ [N, K] e4m3fn "
     "(unshuffled), x_scale [M, K/128] row-major, w_scale [ceil(N/128), K/128], bf16 out "
     "(ROCm/aiter:aiter/ops/gemm_op_a8w8.py@e4048607, seed apply_pre_quantized_block_scaled_mm)",
     &gemm_plain},
    {"bpreshuffle",
     "gemm_a8w8_blockscale_bpreshuffle: WQ = shuffle_weight(W, (16,16)), x_scale stored transposed "
     "[K/128][M] (seed _bpre_attn_gemm / prepare_attn_preshuffle; docs/semantics/gemm.md Q7 bpreshuffle)",
     &gemm_bpreshuffle},
    {"fp8=fnuz", "gfx942: XQ and WQ e4m3fnuz codes (docs/semantics/gemm.md Q7: e4m3fnuz on gfx942), plain "
                 "layout", &gemm_fnuz},
    {NULL, NULL, NULL},
};

static const char gemm_params[] =
    "    ref_accum str   = f64   reference path: f64 = the exact ideal (goldens); f32 = the kernel's fp32 block order "
        "via sgemm (bench / large cases; the bound's delta doubles)\n"
    "gen M         int   = 16    generator: rows (tokens)\n"
    "gen N         int   = 256   generator: output features\n"
    "gen K         int   = 256   generator: reduction length (multiple of 128)\n"
    "gen act_scale float = 1     generator: RMS of the bf16 activations before group quant\n"
    "gen w_std     float = 0.02  generator: std of the weights before 128x128 block quant\n"
    "gen zero_rows int[] = []    generator: activation rows that are all zero\n"
    "gen big_rows  int[] = []    generator: rows whose codes are all +-448 (+-240 fnuz) with x_scale 2^20: near the "
        "fp8 limit\n";

static const char gemm_inputs[] =
    "XQ      float8_e4m3fn  [M, K] fp8 activations (e4m3fnuz in fp8=fnuz)\n"
    "WQ      float8_e4m3fn  [N, K] fp8 weights; bpreshuffle: shuffle_weight(W, (16,16)) bytes\n"
    "x_scale float32        [M, K/128] per 1x128 (bpreshuffle: [K/128, M], transposed)\n"
    "w_scale float32        [ceil(N/128), K/128] per 128x128 block\n";

static const char gemm_outputs[] =
    "Y bfloat16 golden=float64  [M, N] bf16 (golden: the double ideal)\n";

static dsv4_dtype gemm_code_dtype(const gemm_rule *r)
{
    return r->kind == DSV4_FP8_E4M3FN ? DSV4_F8E4M3FN : DSV4_F8E4M3FNUZ;
}

/* Activations: bf16 rows of RMS act_scale times a per-row factor 2^[-3, 3]
 * (mixed row magnitudes), quantized by aiter's per_group_quant_hip rule
 * (group_fp8_quant in vLLM's _bpre_attn_gemm, docs/semantics/quant.md Q3.1);
 * zero and big rows. */
static int gen_activations(const dsv4_opctx *c, int64_t M, int64_t K, dsv4_fp8_kind kind, uint8_t *xq,
                           float *xs_rowmajor, dsv4_status *st)
{
    const dsv4_params *ps = c->params;
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "XQ");
    float *x = malloc((size_t)(K ? K : 1) * sizeof *x);
    if (!x)
        return dsv4_gemmops_oom(st);
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
    return DSV4_OK;
}

/* Weights: N(0, w_std) in 128x128 blocks with a power-of-two scale
 * 2^ceil(log2(amax / MAX)) (the checkpoints' ue8m0 weight_scale_inv upcast
 * to fp32 by vLLM's prepare_attn_preshuffle). */
static int gen_weights(const dsv4_opctx *c, int64_t N, int64_t K, dsv4_fp8_kind kind, uint8_t *wq, float *ws,
                       dsv4_status *st)
{
    dsv4_rng rng;
    dsv4_rng_init(&rng, c->seed, "WQ");
    const double std = dsv4_params_float(c->params, "w_std"), mx = dsv4_fp8_max(kind);
    const int64_t KB = K / 128, NB = (N + 127) / 128;
    double *w = malloc((size_t)(N * K + 1) * sizeof *w);
    if (!w)
        return dsv4_gemmops_oom(st);
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
    return DSV4_OK;
}

static int gemm_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const gemm_rule *r = c->rule;
    const dsv4_params *ps = c->params;
    const int64_t M = dsv4_params_int(ps, "M"), N = dsv4_params_int(ps, "N"), K = dsv4_params_int(ps, "K");
    if (M < 0 || N < 1 || K < 0 || M > (1 << 16) || N > (1 << 16) || K > (1 << 16))
        return dsv4_fail(st, DSV4_EINPUT, "M in [0, 65536], N in [1, 65536], K in [0, 65536]");
    if (K % 128)
        return dsv4_fail(st, DSV4_EINPUT, "K = %" PRId64 " is not a multiple of 128 (block scales)", K);
    const dsv4_dtype dt = gemm_code_dtype(r);
    const int64_t KB = K / 128, NB = (N + 127) / 128;
    const int tr = r->bpreshuffle;
    int64_t sx[2] = {M, K}, sw[2] = {N, K}, sxs[2] = {tr ? KB : M, tr ? M : KB}, sws[2] = {NB, KB};
    dsv4_tensor *xq, *wq, *xs, *ws;
    int rc;
    if ((rc = dsv4_tensors_add(in, "XQ", dt, 2, sx, &xq, st)) || (rc = dsv4_tensors_add(in, "WQ", dt, 2, sw, &wq, st)) ||
        (rc = dsv4_tensors_add(in, "x_scale", DSV4_F32, 2, sxs, &xs, st)) ||
        (rc = dsv4_tensors_add(in, "w_scale", DSV4_F32, 2, sws, &ws, st)))
        return rc;
    float *xs_rm = malloc((size_t)(M * KB + 1) * sizeof *xs_rm);
    uint8_t *w = malloc((size_t)(N * K + 1));
    if (!xs_rm || !w)
        rc = dsv4_gemmops_oom(st);
    if (!rc && !(rc = gen_activations(c, M, K, r->kind, xq->data, xs_rm, st)) &&
        !(rc = gen_weights(c, N, K, r->kind, w, ws->data, st))) {
        float *xsd = xs->data;
        for (int64_t m = 0; m < M; m++) /* transpose_scale=True: [K/128][M] (docs/semantics/gemm.md Q7) */
            for (int64_t kb = 0; kb < KB; kb++)
                xsd[tr ? kb * M + m : m * KB + kb] = xs_rm[m * KB + kb];
        if (tr)
            rc = dsv4_ref_shuffle_weight(w, wq->data, 1, N, K, 1, 0, st);
        else
            memcpy(wq->data, w, (size_t)(N * K));
    }
    free(xs_rm), free(w);
    return rc;
}

static int gemm_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gemm_args *a, dsv4_status *st)
{
    const gemm_rule *r = c->rule;
    const dsv4_dtype dt = gemm_code_dtype(r);
    const dsv4_tensor *xq, *wq, *xs, *ws;
    int rc;
    if ((rc = dsv4_input(in, "XQ", dt, 2, &xq, st)) || (rc = dsv4_input(in, "WQ", dt, 2, &wq, st)) ||
        (rc = dsv4_input(in, "x_scale", DSV4_F32, 2, &xs, st)) || (rc = dsv4_input(in, "w_scale", DSV4_F32, 2, &ws, st)))
        return rc;
    memset(a, 0, sizeof *a);
    a->M = xq->shape[0];
    a->K = xq->shape[1];
    a->N = wq->shape[0];
    a->kind = r->kind;
    a->x_scale_transposed = a->w_shuffled = r->bpreshuffle;
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

DSV4_VALIDATE_VIA_ARGS(gemm_validate, dsv4_gemm_args, gemm_args_of, dsv4_gemm_check)

static int gemm_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    if (rc)
        return rc;
    const int64_t shape[2] = {a.M, a.N};
    return dsv4_gemmops_add_poisoned(out, "Y", DSV4_BF16, 2, shape, st);
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
    /* A float64 Y (the golden's dtype) takes the values in place. */
    double *e = y->dtype == DSV4_F64 ? y->data : malloc((size_t)(n + 1) * sizeof *e);
    if (!e)
        return dsv4_gemmops_oom(st);
    rc = use_f32(c) ? dsv4_ref_gemm_a8w8_blockscale_f32_wide(&a, e, st) : dsv4_ref_gemm_a8w8_blockscale_f64(&a, e, st);
    if (!rc && e != y->data)
        dsv4_tensor_set_all(y, e, n);
    if (e != y->data)
        free(e);
    return rc;
}

static int gemm_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                       dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    dsv4_policy_float(pol, DSV4_BF16,
                      use_f32(c) ? "per element: 1 ulp_bf16(|e|+d) + d, d = 2 gamma_n G (ref_accum=f32: the "
                                   "reference is itself an fp32 model), G = sum_k |a xs||b ws|, n = K + 3K/128"
                                 : "per element: 1 ulp_bf16(|e|+d) + d, d = gamma_n G, G = sum_k |a xs||b ws|, "
                                   "n = K + 3K/128 fp32 roundings, u = 2^-24");
    return DSV4_OK;
}

/* The ideal of a, its gauge G and gamma_n (n = K + 3K/128) times factor. */
static int gemm_ideal_of(const dsv4_gemm_args *a, double factor, dsv4_bf16_ideal *id, dsv4_status *st)
{
    int rc = dsv4_bf16_ideal_alloc(id, a->M * a->N, 0, st);
    if (rc)
        return rc;
    id->gamma = dsv4_gamma32((double)a->K + 3.0 * (double)(a->K / 128)) * factor;
    if ((rc = dsv4_ref_gemm_a8w8_blockscale_f64(a, id->e, st)))
        return rc;
    return dsv4_gemm_abs_gauge(a, id->gauge, st);
}

/* ref_accum=f32 doubles delta: the reference is itself an fp32 model. */
static int gemm_ideal(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id, dsv4_status *st)
{
    dsv4_gemm_args a;
    int rc = gemm_args_of(c, in, &a, st);
    return rc ? rc : gemm_ideal_of(&a, use_f32(c) ? 2 : 1, id, st);
}

DSV4_BF16_IDEAL_BOUND(gemm_bound, gemm_ideal, "gemm")

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
    const int declared_shuffled = a.w_shuffled;
    a.w_shuffled = !a.w_shuffled; /* the other reading of the same WQ bytes */
    dsv4_bf16_ideal alt;
    if (!gemm_ideal_of(&a, 2, &alt, &st)) {
        dsv4_bf16_ideal_bounds(&alt, alt.gauge);
        if (!dsv4_operand_perm_hint(actual, alt.e, alt.gauge,
                                    declared_shuffled
                                        ? "the implementation read the shuffle_weight(16,16) bytes of WQ as a plain "
                                          "[N, K] weight (bpreshuffle layout ignored)"
                                        : "the implementation read the plain WQ as shuffle_weight(16,16) bytes "
                                          "(a bpreshuffle kernel on an unshuffled weight)",
                                    res))
            dsv4_operand_perm_hint(expected, alt.e, alt.gauge,
                                   declared_shuffled
                                       ? "the expected output is WQ read as a plain weight: WQ is not bpreshuffled "
                                         "(use the default variant, or pass shuffle_weight(W, (16,16)))"
                                       : "the expected output is WQ read through shuffle_weight(16,16): WQ holds "
                                         "bpreshuffled bytes but the variant is unshuffled (use bpreshuffle)",
                                   res);
    }
    dsv4_bf16_ideal_free(&alt);
}

const dsv4_op dsv4_op_gemm_a8w8_blockscale = {
    .name = "gemm_a8w8_blockscale",
    .summary = "block-scaled fp8 GEMM: per-1x128 activation and per-128x128 weight scales, fp32 accumulation, bf16 out",
    .source = "ROCm/aiter:aiter/ops/gemm_op_a8w8.py@e4048607, "
              "ROCm/aiter:aiter/ops/triton/_triton_kernels/gemm/basic/gemm_a8w8_blockscale.py@e4048607 "
              "(docs/semantics/gemm.md Q7; seed _bpre_attn_gemm, apply_pre_quantized_block_scaled_mm)",
    DSV4_OP_TABLES(gemm),
    .generate = gemm_generate,
    .validate = gemm_validate,
    .alloc_outputs = gemm_alloc,
    .reference = gemm_reference,
    .policy = gemm_policy,
    .locate = gemm_locate,
    .bound = gemm_bound,
    .hint = gemm_hint,
};
