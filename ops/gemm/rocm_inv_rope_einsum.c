/* rocm_inv_rope_einsum.c - wo_a on the bf16 path: optional inverse RoPE,
 * then a grouped einsum (docs/semantics/gemm.md A10.1, A10.2).  Semantics:
 * ref/gemm.c.
 *
 * Tolerance: bf16 x bf16 products are exact in fp32, so the fp32 einsum
 * over Dg terms is within gamma_Dg G of the sum of the products of its
 * inputs (G = sum_d |o_r||w|); with inverse_rope the kernel's o_r lanes are
 * bf16(fp32 rotation), each within err_d = 1 ulp_bf16 + 3 2^-24 (|a c| +
 * |b s| + |b c| + |a s|) of the exact rotation the ideal uses, adding
 * E = sum_{rope d} err_d |w|.  delta = gamma_Dg G + E; bound = 1
 * ulp_bf16(|e| + delta) + delta (gemm.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "../../ref/gemm.h"
#include "../../ref/numerics.h"
#include "gemm.h"

/* One reading: nothing varies, so the variant carries no rule. */
static const dsv4_variant einsum_variants[] = {
    {"default",
     "bf16 wo_a [G*R, Dg] viewed [G, R, Dg]; o_r = o (inverse_rope=0, the seed's _o_proj) or bf16 inverse "
     "GPT-J RoPE of the last 64 lanes per head; out = einsum('tgd,grd->tgr') with fp32 accumulation, bf16 "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     NULL},
    {NULL, NULL, NULL},
};

static const char einsum_params[] =
    "    n_local_groups int   = 2      G: o_groups / TP (docs/semantics/gemm.md A10.1)\n"
    "    o_lora_rank    int   = 64     R: rows of each group's wo_a block (1024 in V4/V4.1)\n"
    "    inverse_rope   int   = 0      1: apply the inverse RoPE first (the seed's _o_proj passes False)\n"
    "    rope_head_dim  int   = 64     RoPE lanes at the end of each 512-lane head\n"
    DSV4_WO_A_NUM_TOKENS_PARAM
    "gen num_heads      int   = 4      generator: H (local heads)\n"
    "gen max_position   int   = 256    generator: rows of cos_sin_cache\n"
    DSV4_GEMM_ROPE_THETA_PARAM
    "gen zero_rows      int[] = []     generator: tokens whose o is all zero\n";

static const char einsum_inputs[] =
    "o             bfloat16  [T, H, 512] attention output (bf16)\n"
    "positions     int64     [T] query positions (used when inverse_rope = 1)\n"
    DSV4_GEMM_COS_SIN_INPUT
    "wo_a          bfloat16  [G*R, Dg] bf16 weight (Dg = H*512/G)\n";

static const char einsum_outputs[] =
    DSV4_WO_A_OUTPUTS;

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

/* The ideal, G = sum_d |o_r||w| with gamma_Dg, and the rotation error E. */
static int einsum_ideal(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_bf16_ideal *id, dsv4_status *st)
{
    dsv4_einsum_args a;
    int rc = einsum_args_of(c, in, &a, st);
    if (rc || (rc = dsv4_bf16_ideal_alloc(id, a.T * a.G * a.R, 1, st)))
        return rc;
    id->gamma = dsv4_gamma32((double)(a.H * 512 / a.G));
    return dsv4_ref_inv_rope_einsum(&a, id->e, id->gauge, id->extra, st);
}

DSV4_WO_A_OP_CALLBACKS(einsum, dsv4_einsum_args, einsum_args_of, einsum_ideal, einsum_ideal, "o or wo_a",
                       "per element: 1 ulp_bf16(|e|+d) + d, d = gamma_Dg sum_d |o_r||w| + sum_{rope d} (1 ulp_bf16 + "
                       "3*2^-24 (|ac|+|bs|+|bc|+|as|)) |w| (bf16 fp32-rotated o_r), u = 2^-24",
                       "einsum")

const dsv4_op dsv4_op_rocm_inv_rope_einsum = {
    .name = "rocm_inv_rope_einsum",
    .summary = "wo_a on the bf16 path: optional inverse RoPE, then out[t,g,r] = sum_d o[t,g,d] W[g,r,d] (fp32 acc, bf16)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/gemm.md A10.1-A10.2; seed _o_proj)",
    DSV4_OP_TABLES(einsum),
    DSV4_WO_A_OP_FIELDS(einsum),
};
