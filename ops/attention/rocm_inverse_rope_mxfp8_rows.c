/* rocm_inverse_rope_mxfp8_rows.c - inverse GPT-J RoPE of bf16 attention
 * rows in fp32, then MXFP8 (wo_a's input, prefill rows).  Semantics:
 * ref/attention.c (docs/semantics/attention.md A9.3; docs/semantics/quant.md
 * Q2 "Inverse RoPE").
 *
 * Outputs are MXFP8 bytes compared with the `mx` kind (scales in binades,
 * codes in e4m3 steps of the expected code times the expected scale).
 * Tolerance, derived per element from the inputs (rmx_risk):
 *  - NoPE lanes are bf16 values copied to fp32 exactly, so their blocks
 *    (0..13 of every head: 448 = 14 * 32) quantize identically on any
 *    correct kernel: 0 steps, scale exact.
 *  - A RoPE lane is fl(fl(a c) +- fl(b s)) here; a kernel may contract to
 *    an FMA or order the sum differently.  With r the exact a c +- b s and
 *    E_p the two products' rounding errors, any such fp32 formulation is
 *    within E_p + 2^-24 (|a c| + |b s| + E_p) of r (E_p <= 2^-24 (|a c| +
 *    |b s|)), and exactly r when the products and r are fp32 numbers (cos 1,
 *    sin 0); so kernel and golden x differ by at most Delta = |x - r| + that
 *    (rmx_delta), <= 4 * 2^-24 (|a c| + |b s|).  Scaled by the block's
 *    2^(127-code), Delta <= 4 * 2^-24 * sqrt(2) * 448 ~ 1.5e-4, far below
 *    the smallest e4m3 step (2^-9), so a lane moves by at most one code, and
 *    only when [x - Delta, x + Delta] * 2^(127-code) straddles an e4m3
 *    rounding boundary: such a lane is "at risk" and may be 1 step off;
 *    every other lane must be exact.  Likewise a block whose
 *    [amax - Delta, amax + Delta] straddles a scale boundary may come back
 *    one binade off, and then all its 32 lanes are at risk.
 *  - The flip budget is the count of lanes at risk (scale tolerance 1 only
 *    when some block is at risk), so a kernel that rounds the rotated
 *    values to bf16 before quantizing (about 3-6% of RoPE lanes flip) or
 *    flips a NoPE lane fails.  vLLM's own test allows half an e4m3 step at
 *    the top of the block (16 * 2^(code-127)) on every lane
 *    (docs/semantics/attention.md A9.3 [S11]); ours is much tighter and
 *    still admits every correct fp32 rotation. */

#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

#define D DSV4_HEAD_DIM

/* Each variant's rule: how the scale byte of a block is chosen (ref/mx.h). */
static const dsv4_mx_rule rule_ceil_f32log2 = DSV4_MX_FP8_CEIL_F32LOG2, rule_ceil = DSV4_MX_FP8_CEIL,
                          rule_floor = DSV4_MX_FP8_FLOOR;

static const dsv4_variant rmx_variants[] = {
    {"default",
     "fp32 inverse GPT-J rotation of lanes 448..511 (NoPE lanes bit-unchanged), then the vLLM ROCm "
     "_mxfp8_scale_bits rule clamp(ceil(log2_f32(fl(max(amax, FLT_MIN)/448))) + 127, 0, 254) with the kernel's fp32 "
     "division and fp32 log2 (the default for bit-exactness with the kernels, "
     "docs/semantics/quant.md Q2 'Edge cases', Q10), q = x * 2^(127-code), RNE e4m3fn "
     "(vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98)",
     &rule_ceil_f32log2},
    {"log2=exact",
     "the exact rule ceil(log2(max(amax, FLT_MIN)/448)) (docs/semantics/quant.md Q2, Q10): one binade higher where "
     "amax/448 is a few ulps above 2^k",
     &rule_ceil},
    {"scale_rule=floor",
     "the older _mxfp8_e4m3_quantize_torch helper (vllm mxfp8_utils.py@00134422, "
     "docs/semantics/attention.md A9.2 [S30]): clamp(floor(log2 amax) + 127, 0, 254), x / 2^(code-127)",
     &rule_floor},
    {NULL, NULL, NULL},
};

static const char rmx_params[] =
    DSV4_ROPE_ROWS_PARAMS("6")
    "gen specials int = 1  generator: 1 = token 0 at position 0 (cos 1, sin 0), -0 / all-zero blocks, a RoPE block "
        "with scale byte 0 and one near the top of bf16; 2 = those and a RoPE block (token 1, head 0, lanes 448..479) "
        "whose amax is 448*2^-32 + 1 or 2 fp32 ulps (fp32 and exact log2 pick binades one apart)\n";

static const char rmx_inputs[] =
    "o bfloat16  [T, H, 512] bf16 attention output rows (prefill workspace)\n"
    DSV4_ROPE_POSITION_INPUTS;

static const char rmx_outputs[] =
    "data  float8_e4m3fn  [T, H*512] e4m3fn codes, head h at columns h*512\n"
    "scale uint8          [T, H*16] uint8 e8m0 bytes; (t, h*16+g) covers lanes 32g.. of head h\n";

/* The generator's special lanes (specials = 1), all in bf16: */
static void rmx_specials(uint16_t *o, int64_t T, int64_t H, int64_t *pos)
{
    pos[0] = 0;                              /* identity rotation: cos 1, sin 0 exactly */
    uint16_t *h0 = o, *hl = o + (T * H - 1) * D; /* token 0 head 0; last token, last head */
    memset(h0, 0, 32 * 2);                   /* all-zero NoPE block: scale byte 0, codes 0 */
    for (int d = 32; d < 64; d += 3)
        h0[d] = 0x8000;                      /* -0 lanes: e4m3 0x80 (NoPE keeps the sign) */
    /* A RoPE block with scale byte 0 from normal values (amax < 448*2^-127;
     * amax/448 is an fp32 denormal, code 0 with or without FTZ,
     * docs/semantics/quant.md Q2 "Edge cases"); q = x*2^127 is exact in e4m3. */
    for (int d = 480; d < D; d++)
        h0[d] = (uint16_t)(dsv4_bf16_from_f32(ldexpf(1.0f + (float)(d % 7) / 8.0f, -122)) | (d & 1 ? 0x8000 : 0));
    if (T * H > 1)
        memset(hl + 448, 0, 32 * 2);         /* an all-zero RoPE block */
    for (int d = 480; d < D; d++)            /* near the top of bf16 (byte ~245; 254 is out of bf16's reach) */
        hl[d] = dsv4_bf16_from_f32((float)((d % 2 ? -1 : 1) * ldexp(1.0 + (d % 5) / 8.0, 126)));
}

/* specials = 2: the RoPE block at lanes 448..479 of row (a head row of the
 * token at *pos) gets one non-zero pair (a, b) whose rotated even lane is
 * x = 448 * 2^-32 + j ulps (j = 1, 2), the block's amax, at a position p
 * searched for (deterministically) in [1, P).  fl(x / 448) is then 2^-32
 * (1 + 2^-23): the kernels' fp32 log2 rounds to -32 (its ulp at 32 is
 * 2^-18) and ceil keeps the scale at 2^-32, while the exact rule's ceil
 * takes 2^-31 (docs/semantics/quant.md Q2, Q10), with both ends of x +-
 * Delta on the same fp32-rule binade, so no correct kernel is forgiven a
 * binade there.  Between the bf16 grid of a (2^-8 apart) and of b, the
 * search tries the a and b nearest to the wanted products and two
 * neighbours of each.  0 when found, -1 when no position has such a pair. */
static int rmx_log2_edge(uint16_t *row, int64_t *pos, const float *cs, int64_t P, int rd)
{
    const float B = ldexpf(448.0f, -32), ulp = ldexpf(1.0f, -32 + 8 - 23); /* x in [2^-24, 2^-23) */
    const int half = rd / 2;
    for (int64_t p = 1; p < P; p++)
        for (int k = 0; k < DSV4_MX_BLOCK / 2 && k < half; k++) {
            const float c = cs[p * rd + k], s = cs[p * rd + half + k];
            if (fabsf(c) < 0.8f || fabsf(s) < 0x1p-6f) /* |a s| < |x|: the partner lane stays below */
                continue;
            const uint16_t a0 = dsv4_bf16_from_f32((B + ulp) / c);
            for (int da = -2; da <= 2; da++) {
                const uint16_t ab = (uint16_t)(a0 + da);
                const float a = dsv4_bf16_to_f32(ab), gap = (B + ulp) - a * c;
                const uint16_t b0 = dsv4_bf16_from_f32(gap / s);
                for (int db = -2; db <= 2; db++) {
                    const uint16_t bb = (uint16_t)(b0 + db);
                    float pair[2] = {a, dsv4_bf16_to_f32(bb)};
                    const float csrow[2] = {c, s};
                    dsv4_rope_gptj_f32(pair, csrow, 2, DSV4_ROPE_INVERSE);
                    if ((pair[0] != B + ulp && pair[0] != B + 2 * ulp) || !(fabsf(pair[1]) < pair[0]))
                        continue;
                    memset(row + (D - rd), 0, DSV4_MX_BLOCK * sizeof *row);
                    row[D - rd + 2 * k] = ab;
                    row[D - rd + 2 * k + 1] = bb;
                    *pos = p;
                    return 0;
                }
            }
        }
    return -1;
}

/* Each head row at its own power-of-two magnitude. */
static void rmx_fill_o(dsv4_rng *rng, uint16_t *ov, int64_t T, int64_t H)
{
    for (int64_t r = 0; r < T * H; r++) {
        const double sc = ldexp(1.0, (int)dsv4_rng_range(rng, -8, 9));
        for (int d = 0; d < D; d++)
            ov[r * D + d] = dsv4_bf16_from_f32((float)(dsv4_rng_normal(rng) * sc));
    }
}

static int rmx_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    dsv4_tensor *o, *pos;
    int rc = dsv4_rope_rows_generate(c, in, rmx_fill_o, &o, &pos, st);
    if (rc)
        return rc;
    const int64_t T = o->shape[0], H = o->shape[1], specials = dsv4_params_int(c->params, "specials");
    if (specials < 0 || specials > 2)
        return dsv4_fail(st, DSV4_EINPUT, "specials = %" PRId64 ": expected 0, 1 or 2", specials);
    if (specials && T > 0)
        rmx_specials(o->data, T, H, pos->data);
    if (specials == 2) {
        const dsv4_tensor *cs = dsv4_tensors_get(in, "cos_sin_cache");
        const int rd = (int)dsv4_params_int(c->params, "rope_head_dim");
        if (T < 2 || rd < DSV4_MX_BLOCK || rd > D)
            return dsv4_fail(st, DSV4_EINPUT, "specials = 2 needs num_tokens >= 2 and rope_head_dim >= 32");
        if (rmx_log2_edge((uint16_t *)o->data + H * D, (int64_t *)pos->data + 1, cs->data, cs->shape[0], rd))
            return dsv4_fail(st, DSV4_EINPUT, "specials = 2: no position of the cos/sin table gives a log2-edge pair");
    }
    return DSV4_OK;
}

/* dsv4_rope_inputs_of (this op has no `rotated`: every row is rotated), and
 * whole MX blocks of RoPE lanes. */
static int rmx_inputs_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_rope_io *r, dsv4_status *st)
{
    int rc = dsv4_rope_inputs_of(c, in, r, st);
    if (rc)
        return rc;
    r->rotated = 0;
    if (r->rd > D || r->rd % DSV4_MX_BLOCK)
        return dsv4_fail(st, DSV4_EINPUT, "rope_head_dim = %d: must be a multiple of 32 up to 512", r->rd);
    return DSV4_OK;
}

/* The golden's fp32 rows (malloc'd) after checking every input. */
static float *rmx_rows(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_rope_io *r, dsv4_status *st)
{
    if (rmx_inputs_of(c, in, r, st))
        return NULL;
    if (dsv4_rope_cos_sin_finite(r, st))
        return NULL;
    const float *cs = r->cs->data;
    float *x = malloc((size_t)(r->T * r->H * D + 1) * sizeof *x);
    if (!x) {
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    if (dsv4_ref_inverse_rope_rows_f32(r->o->data, r->T, r->H, r->pos->data, cs, r->cs->shape[0], r->rd, x, st)) {
        free(x);
        return NULL;
    }
    return x;
}

static int rmx_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    dsv4_rope_io r;
    float *x = rmx_rows(c, in, &r, st);
    free(x);
    return x ? DSV4_OK : st->code;
}

static int rmx_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_rope_io r;
    int rc = rmx_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    int64_t sd[2] = {r.T, r.H * D}, ss[2] = {r.T, r.H * D / DSV4_MX_BLOCK};
    dsv4_tensor *d, *s;
    if ((rc = dsv4_tensors_add(out, "data", DSV4_F8E4M3FN, 2, sd, &d, st)) ||
        (rc = dsv4_tensors_add(out, "scale", DSV4_U8, 2, ss, &s, st)))
        return rc;
    dsv4_poison(d);
    dsv4_poison(s);
    return DSV4_OK;
}

static int rmx_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_mx_rule *rule = c->rule;
    dsv4_rope_io r;
    int rc = rmx_inputs_of(c, in, &r, st);
    if (rc)
        return rc;
    return dsv4_ref_inverse_rope_mxfp8_rows(r.o->data, r.T, r.H, r.pos->data, r.cs->data, r.cs->shape[0], r.rd,
                                            *rule, dsv4_tensors_find(out, "data")->data,
                                            dsv4_tensors_find(out, "scale")->data, st);
}

/* The largest distance, for any fp32 formulation of one rotated lane (a c
 * + b s or b c - a s: products rounded then summed, or an FMA), between a
 * kernel's value and the golden's x: |x - r| + E_p + 2^-24 (|a c| + |b s|
 * + E_p), with r the exact value and E_p the two products' rounding errors
 * (all exact in double: 8 x 24-bit products); 0 when both products and r
 * are exact in fp32 (e.g. cos 1, sin 0: every formulation is exact). */
static double rmx_delta(double a, double b, double c, double s, int odd, float x)
{
    const double p1 = odd ? b * c : a * c, p2 = odd ? a * s : b * s; /* inverse: a c + b s, b c - a s */
    const double ep = fabs((double)(float)p1 - p1) + fabs((double)(float)p2 - p2);
    const double r = odd ? p1 - p2 : p1 + p2;
    if (ep == 0 && (double)(float)r == r)
        return fabs((double)x - r);
    return fabs((double)x - r) + ep + 0x1p-24 * (fabs(p1) + fabs(p2) + ep);
}

/* y rounded to fp32 away from the interval's inside: down (dir < 0) or up. */
static float rmx_out(double y, int dir)
{
    float f = (float)y;
    if (dir < 0 && (double)f > y)
        f = nextafterf(f, -INFINITY);
    if (dir > 0 && (double)f < y)
        f = nextafterf(f, INFINITY);
    return f;
}

/* The lanes at risk (see the derivation above): risk[i] = 1 where a correct
 * fp32 kernel may return a code one step from the golden's (NULL: count
 * only); *lanes and *blocks count lanes and blocks at risk.  E4m3 RNE and
 * the scale rules are monotone, so a code can change within [x - Delta,
 * x + Delta] iff the endpoints' codes differ. */
static int rmx_risk(const dsv4_opctx *c, const dsv4_tensors *in, uint8_t *risk, int64_t *lanes, int64_t *blocks,
                    dsv4_status *st)
{
    const dsv4_mx_rule *rule = c->rule;
    dsv4_rope_io r;
    float *x = rmx_rows(c, in, &r, st);
    if (!x)
        return st->code;
    const uint16_t *o = r.o->data;
    const float *cs = r.cs->data;
    const int half = r.rd / 2;
    double delta[DSV4_MX_BLOCK];
    *lanes = *blocks = 0;
    for (int64_t t = 0; t < r.T; t++) {
        const float *row = cs + ((const int64_t *)r.pos->data)[t] * r.rd;
        for (int64_t h = 0; h < r.H; h++)
            for (int j = (D - r.rd) / DSV4_MX_BLOCK; j < D / DSV4_MX_BLOCK; j++) { /* RoPE blocks only */
                const int64_t b0 = (t * r.H + h) * D + j * DSV4_MX_BLOCK;
                double lo = 0, hi = 0;
                for (int i = 0; i < DSV4_MX_BLOCK; i++) {
                    const int k = (j * DSV4_MX_BLOCK + i - (D - r.rd)) / 2, odd = i & 1;
                    const int64_t p = b0 + i - odd; /* the pair's even lane */
                    const double xi = fabs((double)x[b0 + i]);
                    delta[i] = rmx_delta(dsv4_bf16_to_f32(o[p]), dsv4_bf16_to_f32(o[p + 1]), row[k], row[half + k],
                                         odd, x[b0 + i]);
                    lo = fmax(lo, xi - delta[i]);
                    hi = fmax(hi, xi + delta[i]);
                }
                const uint8_t code = dsv4_mx_scale_byte(*rule, dsv4_mx_amax(x + b0, DSV4_MX_BLOCK));
                const int scale_risk = dsv4_mx_scale_byte(*rule, rmx_out(lo, -1)) !=
                                       dsv4_mx_scale_byte(*rule, rmx_out(hi, 1));
                const double m = ldexp(1.0, 127 - (int)code);
                *blocks += scale_risk;
                for (int i = 0; i < DSV4_MX_BLOCK; i++) {
                    const double v = x[b0 + i];
                    const int at = scale_risk ||
                                   dsv4_fp8_from_f32(rmx_out((v - delta[i]) * m, -1), DSV4_FP8_E4M3FN, 1) !=
                                       dsv4_fp8_from_f32(rmx_out((v + delta[i]) * m, 1), DSV4_FP8_E4M3FN, 1);
                    *lanes += at;
                    if (risk)
                        risk[b0 + i] = (uint8_t)at;
                }
            }
    }
    free(x);
    return DSV4_OK;
}

static int rmx_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                      dsv4_status *st)
{
    int64_t lanes = 0, blocks = 0;
    int rc = rmx_risk(c, in, NULL, &lanes, &blocks, st);
    if (rc)
        return rc;
    dsv4_rope_io r;
    if ((rc = rmx_inputs_of(c, in, &r, st)))
        return rc;
    const int codes = strcmp(output, "data") == 0;
    const double n = (double)(r.T * r.H * D);
    char why[sizeof pol->rule];
    snprintf(why, sizeof why,
             "NoPE lanes exact; a RoPE lane exact unless x +- Delta (fp32 rotation error, <= 4*2^-24(|ac|+|bs|)) "
             "straddles an e4m3 or scale boundary: then 1 step; %" PRId64 " lanes, %" PRId64 " blocks at risk = budget",
             lanes, blocks);
    dsv4_policy_mx(pol, codes ? "scale" : "data", DSV4_MX_BLOCK, why);
    pol->scale_tol = blocks > 0;
    pol->budget = n > 0 ? (codes ? (double)lanes / n : (double)blocks / (n / DSV4_MX_BLOCK)) : 0;
    return DSV4_OK;
}

/* Per-lane extra tolerance in steps (compare/mx.c adds it to pol->ulp). */
static int rmx_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *bound, int64_t n,
                     dsv4_status *st)
{
    if (strcmp(output, "data"))
        return DSV4_OK;
    uint8_t *risk = calloc(n ? (size_t)n : 1, 1);
    if (!risk)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int64_t lanes, blocks;
    int rc = rmx_risk(c, in, risk, &lanes, &blocks, st);
    for (int64_t i = 0; !rc && i < n; i++)
        bound[i] = risk[i];
    free(risk);
    return rc;
}

static void rmx_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat, char *buf,
                       size_t len)
{
    dsv4_rope_io r;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (rmx_inputs_of(c, in, &r, &st) || r.H < 1)
        return;
    const int sc = strcmp(output, "scale") == 0;
    const int64_t per = sc ? r.H * D / DSV4_MX_BLOCK : r.H * D, t = flat / per, col = flat % per;
    const int64_t h = sc ? col / (D / DSV4_MX_BLOCK) : col / D;
    const int64_t d = sc ? col % (D / DSV4_MX_BLOCK) * DSV4_MX_BLOCK : col % D;
    if (t >= r.T)
        return;
    snprintf(buf, len, "token %" PRId64 " (position %" PRId64 "), head %" PRId64 ", %s %" PRId64 " (%s)", t,
             ((const int64_t *)r.pos->data)[t], h, sc ? "block of lanes" : "lane", d,
             d < D - r.rd ? "NoPE: not rotated" : "RoPE");
}

const dsv4_op dsv4_op_rocm_inverse_rope_mxfp8_rows = {
    .name = "rocm_inverse_rope_mxfp8_rows",
    .summary = "inverse GPT-J RoPE of bf16 attention rows in fp32, then MXFP8 (wo_a's input, prefill rows)",
    .source = "vllm-project/vllm:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py@002ef941eef9b1ca9adbe9c6c931e04787074c98 "
              "(docs/semantics/attention.md A9.3, docs/semantics/quant.md Q2)",
    DSV4_OP_TABLES(rmx),
    .generate = rmx_generate,
    .validate = rmx_validate,
    .alloc_outputs = rmx_alloc,
    .reference = rmx_reference,
    .policy = rmx_policy,
    .locate = rmx_locate,
    .bound = rmx_bound,
};
