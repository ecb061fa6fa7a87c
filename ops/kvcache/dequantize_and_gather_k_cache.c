/* dequantize_and_gather_k_cache.c - decode each request's last G cached
 * tokens into bf16 workspace rows [offset, offset+G).  Semantics:
 * ref/kvcache.c (docs/semantics/kvcache.md A4; V4.1 formats A2.4). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcache.h"

/* What a variant changes: the cache format it reads and what it does with
 * a row whose page is outside the cache. */
typedef struct gather_rule {
    dsv4_kv_format format;
    dsv4_gather_invalid invalid;
} gather_rule;

static const gather_rule triton = {DSV4_KV_FMT_DS_MLA, DSV4_GATHER_INVALID_ERROR},
                         musa_skip = {DSV4_KV_FMT_DS_MLA, DSV4_GATHER_INVALID_SKIP},
                         port_zero = {DSV4_KV_FMT_DS_MLA, DSV4_GATHER_INVALID_ZERO},
                         v41_fp8 = {DSV4_KV_FMT_V41_FP8, DSV4_GATHER_INVALID_ERROR},
                         v41_fp4 = {DSV4_KV_FMT_V41_FP4, DSV4_GATHER_INVALID_ERROR};

static const dsv4_variant gather_variants[] = {
    {"default", "Triton: no block-table check; a read page outside the cache is bad input (" DSV4_KV_S1_SRC ")",
     &triton},
    {"invalid_block=skip",
     "MUSA torch_musa kernel: rows whose page is < 0 or >= num_blocks are left untouched "
     "(docs/semantics/kvcache.md A4 [S7], file id 68852992528)",
     &musa_skip},
    {"invalid_block=zero",
     "third-party Triton port: rows whose page is invalid are written as zeros "
     "(docs/semantics/kvcache.md A4 [S8], file id 54508770908)",
     &port_zero},
    {"format=v41_fp8",
     "V4.1 FlashMLA fp8 cache (528 B/token, k_cache.shape[-1] != 584 dispatch [S3]): e4m3fn x 2^(b-127) "
     "per 32-tile, to bf16 (exact); Triton, no block-table check (gather_dequant_v41, " DSV4_KV_S22_SRC ")",
     &v41_fp8},
    {"format=v41_fp4",
     "V4.1 FlashMLA fp4 cache (288 B/token): e2m1 x e4m3 scale per 16-tile, to bf16 (exact); Triton, "
     "no block-table check (gather_dequant_v41, " DSV4_KV_S22_SRC ")",
     &v41_fp4},
    {NULL, NULL, NULL},
};

static const char gather_params[] =
    DSV4_KV_BLOCK_SIZE_PARAM
    "    offset          int   = 0       first out row written (chunk_N for the SWA gather)\n"
    "    use_fnuz        int   = 0       1: decode e4m3fnuz (gfx942 SWA cache, docs/semantics/kvcache.md A2.3)\n"
    "    has_gather_lens int   = 1       0: gather_lens is None, G = S\n"
    "gen req_seq_lens    int[] required  generator: seq_lens of each request\n"
    "gen req_gather_lens int[] = []      generator: gather_lens of each request (default S)\n"
    "gen out_rows        int   = -1      generator: Wout; -1: offset + max G + 2\n"
    "gen table_width     int   = -1      generator: block_table columns; -1: max ceil(S/B) + 1\n"
    "gen spare_blocks    int   = 2       generator: poisoned pages that unread table entries point at\n"
    "gen invalid_blocks  int   = 0       generator: read table entries made invalid (-1 / >= num_blocks)\n";

static const char gather_inputs[] =
    "out         bfloat16  [R, Wout, 512] the workspace before the gather (stale rows)\n"
    "k_cache     uint8     [num_blocks, B, 584] fp8_ds_mla cache (528 / 288: V4.1 variants)\n"
    "seq_lens    int32     [R] S of each request\n"
    "gather_lens int32     [R] G of each request (absent: G = S)\n"
    "block_table int32     [R, maxb] physical page of each logical block\n";

static const char gather_outputs[] =
    "out bfloat16  [R, Wout, 512] rows [offset, offset+G) written, others untouched\n";

static int gather_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gather_args *a,
                          const dsv4_tensor **outin, dsv4_status *st)
{
    const gather_rule *rule = c->rule;
    const dsv4_tensor *kc, *seq, *bt, *gat = NULL;
    const int64_t B = dsv4_params_int(c->params, "block_size");
    int rc;
    if (B <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size = %" PRId64 ": must be >= 1", B);
    if ((rc = dsv4_input(in, "out", DSV4_BF16, 3, outin, st)) ||
        (rc = dsv4_kvcache_input(in, B, rule->format, &kc, st)) ||
        (rc = dsv4_input(in, "seq_lens", DSV4_I32, 1, &seq, st)) ||
        (rc = dsv4_input(in, "block_table", DSV4_I32, 2, &bt, st)))
        return rc;
    if (dsv4_params_int(c->params, "has_gather_lens")) {
        if ((rc = dsv4_input(in, "gather_lens", DSV4_I32, 1, &gat, st)))
            return rc;
    } else if (dsv4_tensors_get(in, "gather_lens")) {
        return dsv4_fail(st, DSV4_EINPUT, "input 'gather_lens' is present but has_gather_lens = 0");
    }
    const int64_t R = seq->shape[0];
    if ((*outin)->shape[0] != R || (*outin)->shape[2] != DSV4_KV_HEAD_DIM || bt->shape[0] != R ||
        (gat && gat->shape[0] != R))
        return dsv4_fail(st, DSV4_EINPUT, "out [R, Wout, 512], block_table [R, maxb] and gather_lens [R] "
                         "must agree with seq_lens [%" PRId64 "]", R);
    memset(a, 0, sizeof *a);
    a->R = R;
    a->Wout = (*outin)->shape[1];
    a->k_cache = kc->data;
    a->L.block_size = B;
    a->L.num_blocks = kc->shape[0];
    a->seq_lens = seq->data;
    a->gather_lens = gat ? gat->data : NULL;
    a->block_table = bt->data;
    a->maxb = bt->shape[1];
    a->offset = dsv4_params_int(c->params, "offset");
    a->use_fnuz = (int)dsv4_params_int(c->params, "use_fnuz");
    return DSV4_OK;
}

static int gather_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const gather_rule *rule = c->rule;
    dsv4_gather_args a;
    const dsv4_tensor *o;
    int rc = gather_args_of(c, in, &a, &o, st);
    return rc ? rc : dsv4_gather_check_fmt(&a, rule->invalid, rule->format, st);
}

/* The logical blocks [*lo, *hi] that hold a request's last G of S tokens
 * (none when G = 0: *hi = *lo - 1). */
static void read_blocks(int64_t S, int64_t G, int64_t B, int64_t *lo, int64_t *hi)
{
    *lo = G > 0 ? (S - G) / B : 0;
    *hi = G > 0 ? (S - 1) / B : -1;
}

/* One random token, encoded into token `row` of a page of B tokens in format f. */
static int encode_token(dsv4_rng *rng, uint8_t *page, int64_t B, int64_t row, dsv4_kv_format f,
                        const dsv4_kv_encode_opts *eo, dsv4_status *st)
{
    if (f != DSV4_KV_FMT_DS_MLA) {
        uint16_t k41[DSV4_KV_HEAD_DIM];
        dsv4_kvgen_row41(rng, k41, f);
        dsv4_kv41_encode_token(page, B, row, k41, f);
        return DSV4_OK;
    }
    float x[DSV4_KV_HEAD_DIM];
    dsv4_kvgen_token(rng, x);
    return dsv4_kv_encode_token(page, B, row, x, eo, st);
}

static int gather_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const gather_rule *rule = c->rule;
    const dsv4_params *ps = c->params;
    const int64_t *S, *Gl;
    const int64_t R = dsv4_params_list(ps, "req_seq_lens", &S);
    const int ng = dsv4_params_list(ps, "req_gather_lens", &Gl);
    const int64_t B = dsv4_params_int(ps, "block_size"), off = dsv4_params_int(ps, "offset");
    const int64_t spare = dsv4_params_int(ps, "spare_blocks"), ninv = dsv4_params_int(ps, "invalid_blocks");
    const int fnuz = (int)dsv4_params_int(ps, "use_fnuz"), has_g = (int)dsv4_params_int(ps, "has_gather_lens");
    if (ng != 0 && ng != R)
        return dsv4_fail(st, DSV4_EINPUT, "req_gather_lens has %d entries, req_seq_lens %" PRId64, ng, R);
    if (B <= 0 || off < 0 || spare < 1 || ninv < 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size >= 1, offset >= 0, spare_blocks >= 1, invalid_blocks >= 0");
    int64_t G[DSV4_PARAM_LIST_MAX], lo[DSV4_PARAM_LIST_MAX], hi[DSV4_PARAM_LIST_MAX];
    int64_t maxG = 0, maxb = 0, pages = 0; /* pages: one per logical block the gather reads */
    for (int64_t r = 0; r < R; r++) {
        G[r] = ng ? Gl[r] : S[r];
        if (S[r] < 0 || S[r] > (1 << 28) || G[r] < 0 || G[r] > S[r])
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": need 0 <= gather_len <= seq_len", r);
        maxG = G[r] > maxG ? G[r] : maxG;
        maxb = (S[r] + B - 1) / B > maxb ? (S[r] + B - 1) / B : maxb;
        read_blocks(S[r], G[r], B, &lo[r], &hi[r]);
        pages += hi[r] - lo[r] + 1;
    }
    int64_t W = dsv4_params_int(ps, "out_rows"), tw = dsv4_params_int(ps, "table_width");
    W = W < 0 ? off + maxG + 2 : W;
    tw = tw < 0 ? maxb + 1 : tw;
    /* Every block the gather reads needs its block-table column. */
    if (tw < maxb)
        return dsv4_fail(st, DSV4_EINPUT, "table_width = %" PRId64 ": the longest request needs %" PRId64
                         " block-table columns", tw, maxb);
    const int64_t nb = pages + spare;
    const int64_t tbytes = dsv4_kv_format_token_bytes(rule->format);
    int64_t oshape[3] = {R, W, DSV4_KV_HEAD_DIM}, cshape[3] = {nb, B, tbytes}, bshape[2] = {R, tw};
    dsv4_tensor *o, *kc, *seq, *gat = NULL, *bt;
    int rc;
    if ((rc = dsv4_tensors_add(in, "out", DSV4_BF16, 3, oshape, &o, st)) ||
        (rc = dsv4_tensors_add(in, "k_cache", DSV4_U8, 3, cshape, &kc, st)) ||
        (rc = dsv4_tensors_add(in, "seq_lens", DSV4_I32, 1, &R, &seq, st)) ||
        (has_g && (rc = dsv4_tensors_add(in, "gather_lens", DSV4_I32, 1, &R, &gat, st))) ||
        (rc = dsv4_tensors_add(in, "block_table", DSV4_I32, 2, bshape, &bt, st)))
        return rc;
    dsv4_poison(o); /* stale workspace rows: 0x7B7B = 1.3e36 in bf16 */
    dsv4_kvcache_poison(kc->data, nb, B, fnuz, rule->format);
    dsv4_rng rk, rp, ri;
    dsv4_rng_init(&rk, c->seed, "k_cache");
    dsv4_rng_init(&rp, c->seed, "block_table");
    dsv4_rng_init(&ri, c->seed, "block_table.invalid");
    int32_t *perm = dsv4_kvcache_shuffled_pages(&rp, nb);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int32_t *btd = bt->data;
    const dsv4_kv_encode_opts eo = dsv4_kv_encode_opts_default(fnuz);
    int64_t used = 0;
    for (int64_t r = 0; !rc && r < R; r++) {
        ((int32_t *)seq->data)[r] = (int32_t)S[r];
        if (gat)
            ((int32_t *)gat->data)[r] = (int32_t)G[r];
        for (int64_t j = 0; j < tw; j++) /* unread entries point at poisoned spare pages */
            btd[r * tw + j] = (j >= lo[r] && j <= hi[r]) ? perm[used + j - lo[r]]
                                                         : perm[pages + dsv4_rng_range(&rp, 0, spare)];
        for (int64_t pos = S[r] - G[r]; pos < S[r] && !rc; pos++) { /* only the gathered tokens are real */
            int64_t page = btd[r * tw + pos / B];
            rc = encode_token(&rk, (uint8_t *)kc->data + page * B * tbytes, B, pos % B, rule->format, &eo, st);
        }
        used += hi[r] - lo[r] + 1;
    }
    /* invalid_blocks read entries become -1 or >= num_blocks (variants). */
    for (int64_t k = 0; !rc && k < ninv && pages > 0; k++) {
        int64_t pick = dsv4_rng_range(&ri, 0, pages);
        for (int64_t r = 0; r < R; r++) {
            if (pick <= hi[r] - lo[r]) {
                btd[r * tw + lo[r] + pick] = (k & 1) ? (int32_t)(nb + dsv4_rng_range(&ri, 0, 100)) : -1;
                break;
            }
            pick -= hi[r] - lo[r] + 1;
        }
    }
    free(perm);
    return rc;
}

static int gather_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_gather_args a;
    const dsv4_tensor *oi;
    dsv4_tensor *o;
    int rc = gather_args_of(c, in, &a, &oi, st);
    if (rc || (rc = dsv4_tensors_add(out, "out", DSV4_BF16, 3, oi->shape, &o, st)))
        return rc;
    memcpy(o->data, oi->data, o->nbytes); /* in/out: rows outside [offset, offset+G) stay stale */
    return DSV4_OK;
}

static int gather_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const gather_rule *rule = c->rule;
    dsv4_gather_args a;
    const dsv4_tensor *oi;
    int rc = gather_args_of(c, in, &a, &oi, st);
    if (rc)
        return rc;
    a.out = dsv4_tensors_find(out, "out")->data;
    return dsv4_ref_dequantize_and_gather_k_cache_fmt(&a, rule->invalid, rule->format, st);
}

static int gather_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                         dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    /* fp8 (4 significant bits) x 2^k is exact in bf16 (8 bits) for every
     * scale byte the encoders write (>= 105; v41 >= 114), so decoding has no
     * rounding (docs/semantics/kvcache.md A4, README.md A14): bit-exact;
     * untouched rows must keep their bits.  v41_fp4: e2m1 (2 bits) x e4m3
     * (4 bits) has at most 6 significant bits in [2^-10, 2688], exact in
     * fp32 and bf16 for every byte. */
    const gather_rule *rule = c->rule;
    const dsv4_kv_format f = rule->format;
    dsv4_policy_exact(pol, f == DSV4_KV_FMT_V41_FP4 ? "e2m1 x e4m3 scale is exact in bf16; stale rows untouched "
                                                      "(docs/semantics/kvcache.md A2.4, A4)"
                           : f == DSV4_KV_FMT_V41_FP8 ? "v41 e4m3 x 2^(s-127) is exact in bf16; stale rows untouched "
                                                        "(docs/semantics/kvcache.md A2.4, A4)"
                                                      : "fp8 x 2^(s-127) is exact in bf16; stale rows untouched "
                                                        "(docs/semantics/kvcache.md A4)");
    return DSV4_OK;
}

/* "request r, position p (page, token), dim d: " and the bytes it is decoded from. */
static void gather_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                          char *buf, size_t len)
{
    (void)output;
    const gather_rule *rule = c->rule;
    dsv4_gather_args a;
    const dsv4_tensor *oi;
    dsv4_status st = {0};
    buf[0] = '\0';
    if (gather_args_of(c, in, &a, &oi, &st) || a.Wout <= 0)
        return;
    const int64_t d = flat % DSV4_KV_HEAD_DIM, w = flat / DSV4_KV_HEAD_DIM % a.Wout;
    const int64_t r = flat / DSV4_KV_HEAD_DIM / a.Wout;
    const int64_t S = a.seq_lens[r], G = a.gather_lens ? a.gather_lens[r] : S, i = w - a.offset;
    if (i < 0 || i >= G) {
        snprintf(buf, len, "request %" PRId64 ", row %" PRId64 " is outside [offset %" PRId64 ", offset+G %" PRId64
                 "): must be untouched", r, w, a.offset, a.offset + G);
        return;
    }
    const int64_t pos = S - G + i, B = a.L.block_size, col = pos / B;
    const int64_t page = col < a.maxb ? a.block_table[r * a.maxb + col] : -1;
    const int n = snprintf(buf, len, "request %" PRId64 ", position %" PRId64 " (page %" PRId64 ", token %" PRId64
                           "), dim %" PRId64 ": ", r, pos, page, pos % B, d);
    if (n < 0 || (size_t)n >= len)
        return;
    buf += n, len -= (size_t)n;
    if (rule->format == DSV4_KV_FMT_V41_FP8)
        snprintf(buf, len, "value byte %" PRId64 " x ue8m0 scale byte %" PRId64 " (tile %" PRId64 ")", d,
                 d / DSV4_KV41_FP8_TILE, d / DSV4_KV41_FP8_TILE);
    else if (rule->format == DSV4_KV_FMT_V41_FP4)
        snprintf(buf, len, "value byte %" PRId64 " %s nibble x e4m3 scale byte %" PRId64 " (tile %" PRId64 ")",
                 d / 2, (d & 1) ? "high" : "low", d / DSV4_KV41_FP4_TILE, d / DSV4_KV41_FP4_TILE);
    else if (d < DSV4_KV_NOPE_DIM)
        snprintf(buf, len, "value byte %" PRId64 " x scale byte %" PRId64, d, d / DSV4_KV_QBLOCK);
    else
        snprintf(buf, len, "rope lane %" PRId64, d - DSV4_KV_NOPE_DIM);
}

const dsv4_op dsv4_op_dequantize_and_gather_k_cache = {
    .name = "dequantize_and_gather_k_cache",
    .summary = "decode each request's last G cached tokens into bf16 workspace rows [offset, offset+G)",
    .source = DSV4_KV_S1_SRC " (docs/semantics/kvcache.md A4); " DSV4_KV_S22_SRC " (docs/semantics/kvcache.md A2.4)",
    DSV4_OP_TABLES(gather),
    .generate = gather_generate,
    .validate = gather_validate,
    .alloc_outputs = gather_alloc,
    .reference = gather_reference,
    .policy = gather_policy,
    .locate = gather_locate,
};
