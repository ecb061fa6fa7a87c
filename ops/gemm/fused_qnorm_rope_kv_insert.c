/* fused_qnorm_rope_kv_insert.c - vLLM's _fused_qnorm_rope_kv_insert: q
 * RMSNorm (no weight) and RoPE in place; kv RoPE, bf16 and the 584-byte fp8
 * insert into the SWA cache (docs/semantics/gemm.md A3).  Semantics:
 * ref/compressor.c.
 *
 * q output: the golden is the double ideal (docs/semantics/gemm.md A3, Q
 * branch 1-5).  The kernel's fp32 path: the sum of 512 squares (relative
 * error <= gamma_511), the mean (exact, /512), + eps and rsqrt (v_rsq is
 * approximate: taken as <= 2 ulp), halving the relative error of the sum
 * through the square root: <= 256u + 4u; x r: u; RoPE: 3u on |e c| + |o s|.
 * Relative to mag (|y| on NoPE lanes, |e c| + |o s| or |e s| + |o c| on
 * RoPE lanes) that is <= 264u; rho = 2^-15 = 512u keeps a factor 2 for the
 * rsqrt approximation.  bound = 1 ulp_bf16(|e| + rho mag) + rho mag (the
 * store: either bf16 neighbour, gemm.h).
 * swa_cache: bit-exact bytes (docs/semantics/gemm.md A3 KV branch 1-4,
 * docs/semantics/kvcache.md A2.2): RoPE lanes from unfused fp32 products
 * (an FMA-contracting kernel may differ by one bf16 ulp in a RoPE lane: an
 * open question, docs/semantics/README.md Q9). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/compressor.h"
#include "../../ref/numerics.h"
#include "gemm.h"

#define QNORM_RHO 0x1p-15

/* A variant's rule: the fp8 format of the cache's value codes (the encoder
 * clamps at 448 in both: docs/semantics/kvcache.md A2.3). */
static const dsv4_fp8_kind qi_ocp = DSV4_FP8_E4M3FN;
static const dsv4_fp8_kind qi_fnuz = DSV4_FP8_E4M3FNUZ;

static const dsv4_variant qi_variants[] = {
    {"default",
     "gfx950 / NVIDIA: the C++ encoder writes OCP e4m3fn, FP8MAX 448 (docs/semantics/kvcache.md A2.3 [S15]); eps as "
     "given; ROCm pads no heads "
     "(vllm-project/vllm:vllm/models/deepseek_v4/attention.py@0484480bc73081c4a5133b3cb53018323fce632d)",
     &qi_ocp},
    {"fp8=fnuz", "gfx942: clamp to +-448 then e4m3fnuz codes (saturating: docs/semantics/README.md A15.3)", &qi_fnuz},
    {NULL, NULL, NULL},
};

static const char qi_params[] =
    "    eps          float = 1e-06  q RMSNorm epsilon (rms_norm_eps)\n"
    "    block_size   int   = 64     SWA cache tokens per page (DeepseekV4SWACache.block_size = 64)\n"
    "gen num_tokens   int   = 6      generator: T (q and kv rows)\n"
    "gen num_slots    int   = -1     generator: len(slot_mapping) (DP padding: < T); -1 = T\n"
    "gen num_heads    int   = 4      generator: H\n"
    "gen num_blocks   int   = 2      generator: SWA cache pages\n"
    "gen max_position int   = 1024   generator: rows of cos_sin_cache\n"
    DSV4_GEMM_ROPE_THETA_PARAM
    "gen skip_tokens  int[] = []     generator: tokens with slot -1\n"
    "gen kv_scale     float = 1      generator: kv magnitude (large: near the fp8 block scale limits)\n";

static const char qi_inputs[] =
    "q             bfloat16  [T, H, 512] wq_b output\n"
    "kv            bfloat16  [T, 512] kv after kv_norm\n"
    "swa_cache     uint8     [num_blocks, B, 584] the SWA cache before\n"
    "slot_mapping  int64     [Ts] SWA slots (-1: skip)\n"
    "positions     int64     [T] token positions\n"
    DSV4_GEMM_COS_SIN_INPUT;

static const char qi_outputs[] =
    "q         bfloat16 golden=float64  [T, H, 512] q after RMSNorm and RoPE (golden: the double ideal)\n"
    "swa_cache uint8                    [num_blocks, B, 584] the SWA cache after the insert\n";

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
        return dsv4_gemmops_oom(st);
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

/* q's ideal into q_out, or stored as bf16 into q_bf16 (both NULL: computed
 * and dropped) with its magnitudes (mag, may be NULL, with q_out); cache
 * (may be NULL): the insert, in place. */
static int qi_run(const dsv4_opctx *c, const dsv4_tensors *in, double *q_out, uint16_t *q_bf16, double *mag,
                  uint8_t *cache, dsv4_status *st)
{
    dsv4_qnorm_insert_args a;
    dsv4_kv_layout L;
    int rc = qi_args_of(c, in, &a, &L, st);
    if (rc)
        return rc;
    double *tmp = q_out || q_bf16 ? NULL : malloc((size_t)(a.T * a.H * 512 + 1) * sizeof *tmp);
    if (!q_out && !q_bf16 && !tmp)
        return dsv4_gemmops_oom(st);
    rc = q_bf16 ? dsv4_ref_qnorm_rope_bf16(&a, q_bf16, st) : dsv4_ref_qnorm_rope(&a, q_out ? q_out : tmp, mag, st);
    free(tmp);
    if (!rc && cache) {
        dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(0);
        const dsv4_fp8_kind *codes = c->rule;
        o.kind = *codes; /* FP8MAX stays 448 */
        rc = dsv4_ref_kv_rope_insert(&a, cache, &L, &o, st);
    }
    return rc;
}

static int qi_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *cache = dsv4_tensors_get(in, "swa_cache");
    uint8_t *scratch = cache ? malloc(cache->nbytes + 1) : NULL;
    if (cache && !scratch)
        return dsv4_gemmops_oom(st);
    if (scratch)
        memcpy(scratch, cache->data, cache->nbytes);
    int rc = qi_run(c, in, NULL, NULL, NULL, scratch, st); /* slots, positions, finiteness */
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
    const int64_t sq[3] = {a.T, a.H, 512};
    if ((rc = dsv4_gemmops_add_poisoned(out, "q", DSV4_BF16, 3, sq, st)))
        return rc;
    return dsv4_gemmops_add_inplace(out, in, "swa_cache", st); /* untouched slots keep their bytes */
}

static int qi_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_tensor *q = dsv4_tensors_find(out, "q"), *cache = dsv4_tensors_find(out, "swa_cache");
    if (q->dtype == DSV4_F64) /* the golden dtype: the ideal in place */
        return qi_run(c, in, q->data, NULL, NULL, cache->data, st);
    if (q->dtype == DSV4_BF16) /* as dsv4_tensor_set would store the ideal, without its double copy */
        return qi_run(c, in, NULL, q->data, NULL, cache->data, st);
    const int64_t n = dsv4_tensor_numel(q);
    double *d = malloc((size_t)(n + 1) * sizeof *d);
    if (!d)
        return dsv4_gemmops_oom(st);
    int rc = qi_run(c, in, d, NULL, NULL, cache->data, st);
    if (!rc)
        dsv4_tensor_set_all(q, d, n);
    free(d);
    return rc;
}

static int qi_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                     dsv4_status *st)
{
    (void)c, (void)in, (void)st;
    if (!strcmp(output, "swa_cache")) {
        dsv4_policy_exact(pol, "584-byte fp8_ds_mla bytes (fp32 RoPE, bf16, UE8M0 per 64, e4m3 RNE; "
                               "docs/semantics/kvcache.md A2.2, docs/semantics/gemm.md A3)");
        return DSV4_OK;
    }
    dsv4_policy_float(pol, DSV4_BF16,
                      "per element: 1 ulp_bf16(|e|+d) + d, d = 2^-15 m, m = |y| (NoPE) or |e c|+|o s| (RoPE): "
                      "fp32 sum of 512 squares, rsqrt (approximate), products, rotation");
    return DSV4_OK;
}

/* q's ideal with its magnitudes m and rho (the derivation at the top). */
static int qi_ideal(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id, dsv4_status *st)
{
    const dsv4_tensor *q;
    int rc = dsv4_input(in, "q", DSV4_BF16, 3, &q, st);
    if (rc || (rc = dsv4_bf16_ideal_alloc(id, dsv4_tensor_numel(q), 0, st)))
        return rc;
    id->gamma = QNORM_RHO;
    return qi_run(c, in, id->e, NULL, id->gauge, NULL, st);
}

static int qi_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                    dsv4_status *st)
{
    if (strcmp(output, "q"))
        return DSV4_OK;
    return dsv4_bf16_ideal_bound(qi_ideal, c, in, bound, n, "qnorm", st);
}

static void qi_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                      size_t len)
{
    buf[0] = '\0';
    if (!strcmp(output, "swa_cache")) {
        dsv4_gemmops_cache_locate(flat, dsv4_params_int(c->params, "block_size"), buf, len);
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
              "@54cedc2fa48304e72794af12ceca35fa98a387e3 (docs/semantics/gemm.md A3, docs/semantics/kvcache.md A2.2)",
    DSV4_OP_TABLES(qi),
    .generate = qi_generate,
    .validate = qi_validate,
    .alloc_outputs = qi_alloc,
    .reference = qi_reference,
    .policy = qi_policy,
    .locate = qi_locate,
    .bound = qi_bound,
};
