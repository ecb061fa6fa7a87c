/* shuffle_weight.c - aiter's shuffle_weight(layout=(16,16)) of an fp8
 * [N, K] weight and its inverse: a byte permutation, bit-exact
 * (docs/semantics/gemm.md Q7).  Semantics: ref/gemm.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>

#include "../../ref/gemm.h"
#include "gemm.h"

/* What a variant changes: the forward layout, or its inverse. */
typedef struct shuffle_rule {
    int inverse;
} shuffle_rule;

static const shuffle_rule shuffle_forward = {0};
static const shuffle_rule shuffle_inverse = {1};

static const dsv4_variant shuffle_variants[] = {
    {"default",
     "shuffle_weight(x, layout=(16,16)) of fp8 [N, K]: IN = IK = 16, BK = 32, Kp = 16 "
     "(ROCm/aiter:aiter/ops/shuffle.py@e4048607, docs/semantics/gemm.md Q7)",
     &shuffle_forward},
    {"inverse", "the inverse permutation (reports: the unshuffled weight from bpreshuffled bytes)", &shuffle_inverse},
    {NULL, NULL, NULL},
};

static const char shuffle_params[] =
    "gen N int = 32   generator: rows (multiple of 16)\n"
    "gen K int = 128  generator: columns (multiple of 32)\n";

static const char shuffle_inputs[] =
    "x float8_e4m3fn  [N, K] fp8 weight (inverse: shuffled bytes)\n";

static const char shuffle_outputs[] =
    "out float8_e4m3fn  [N, K] shuffled (inverse: unshuffled) bytes\n";

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
    int rc = shuffle_input(in, &x, st);
    return rc ? rc : dsv4_gemmops_add_poisoned(out, "out", DSV4_F8E4M3FN, 2, x->shape, st);
}

static int shuffle_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const shuffle_rule *r = c->rule;
    const dsv4_tensor *x;
    int rc = shuffle_input(in, &x, st);
    if (rc)
        return rc;
    return dsv4_ref_shuffle_weight(x->data, dsv4_tensors_find(out, "out")->data, 1, x->shape[0], x->shape[1], 1,
                                   r->inverse, st);
}

DSV4_EXACT_POLICY(shuffle_policy, "a byte permutation (layout)")

/* "out flat i = source (n, k), tile (n/16, k/32)" */
static void shuffle_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                           size_t len)
{
    (void)output;
    const shuffle_rule *r = c->rule;
    const dsv4_tensor *x;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (shuffle_input(in, &x, &st))
        return;
    const int64_t K = x->shape[1];
    int64_t n = flat / K, k = flat % K;
    if (!r->inverse) { /* flat is a shuffled position: invert by search in its 16x32 tile */
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
    .source = "ROCm/aiter:aiter/ops/shuffle.py@e4048607 (docs/semantics/gemm.md Q7; seed prepare_attn_preshuffle)",
    DSV4_OP_TABLES(shuffle),
    .generate = shuffle_generate,
    .validate = shuffle_validate,
    .alloc_outputs = shuffle_alloc,
    .reference = shuffle_reference,
    .policy = shuffle_policy,
    .locate = shuffle_locate,
};
