/* quantize_and_insert_k_cache.c - encode bf16 K rows into the 584-byte
 * fp8_ds_mla (or V4.1 528 / 288-byte) paged cache at their slots.
 * Semantics: ref/kvcache.c (docs/semantics/kvcache.md A2.1-A2.4). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcache.h"

/* Each variant's rule: the cache format it writes. */
static const dsv4_kv_format fmt_ds_mla = DSV4_KV_FMT_DS_MLA, fmt_v41_fp8 = DSV4_KV_FMT_V41_FP8,
                            fmt_v41_fp4 = DSV4_KV_FMT_V41_FP4;

static const dsv4_variant insert_variants[] = {
    {"default",
     "the Triton quantize_and_insert_k_cache: UE8M0 per-64 scales, FP8MAX 448 (224 with use_fnuz), "
     "slot -1 skipped (" DSV4_KV_S1_SRC ")",
     &fmt_ds_mla},
    {"format=v41_fp8",
     "V4.1 FlashMLA fp8, 528 B/token: 16 tiles of 32 e4m3fn (RoPE dims too), UE8M0 scale "
     "2^ceil(log2(max(amax/448, 1e-4))) from fp32 bits; any slot < 0 skipped; k is the post-RoPE bf16 row "
     "(rope_v41_fp8_insert, " DSV4_KV_S22_SRC ")",
     &fmt_v41_fp8},
    {"format=v41_fp4",
     "V4.1 FlashMLA fp4, 288 B/token: 32 tiles of 16 e2m1 (two per byte, even dim low), e4m3 scale "
     "clamp(amax/6, 2^-9, 448), x / scale IEEE RNE, e2m1 RNE saturating; any slot < 0 skipped "
     "(rope_v41_fp4_insert, " DSV4_KV_S22_SRC ")",
     &fmt_v41_fp4},
    {NULL, NULL, NULL},
};

static const char insert_params[] =
    DSV4_KV_BLOCK_SIZE_PARAM
    "    use_fnuz       int   = 0      1: e4m3fnuz values with FP8MAX 224 (gfx942) [S1]\n"
    DSV4_REQ_SHAPE_PARAMS
    "gen compress_ratio int   = 1      generator: c > 1 gives the compressed slot mapping (docs/semantics/indices.md "
        "A5.4)\n"
    "gen spare_blocks   int   = 2      generator: untouched (poisoned) pages beside the used ones\n"
    "gen invalid_frac   float = 0      generator: fraction of tokens given slot -1\n"
    "gen pad_tokens     int   = 0      generator: trailing slot -1 tokens (graph padding)\n"
    "gen k_extra_rows   int   = 0      generator: k rows beyond slot_mapping (DP padding)\n"
    "gen slot_dtype     str   = int64  generator: int64 or int32 slot_mapping\n";

static const char insert_inputs[] =
    "k            bfloat16  [>= T, 512] tokens (448 NoPE + 64 RoPE)\n"
    "slot_mapping int64     [T] int64 or int32 slots, -1 = skip\n"
    "k_cache      uint8     [num_blocks, B, 584 / 528 / 288] the cache before the insert\n";

static const char insert_outputs[] =
    "k_cache uint8  [num_blocks, B, 584 / 528 / 288] the cache after (untouched slots keep their bytes)\n";

typedef struct insert_args {
    const dsv4_tensor *k, *slots, *cache;
    dsv4_kv_layout L;
    int64_t T;
} insert_args;

static int64_t slot_at(const dsv4_tensor *s, int64_t t)
{
    return s->dtype == DSV4_I64 ? ((const int64_t *)s->data)[t] : ((const int32_t *)s->data)[t];
}

static void set_slot(dsv4_tensor *s, int64_t t, int64_t slot)
{
    if (s->dtype == DSV4_I64)
        ((int64_t *)s->data)[t] = slot;
    else
        ((int32_t *)s->data)[t] = (int32_t)slot;
}

static int insert_args_of(const dsv4_opctx *c, const dsv4_tensors *in, insert_args *a, dsv4_status *st)
{
    const dsv4_kv_format *fmt = c->rule;
    int rc;
    const int64_t B = dsv4_params_int(c->params, "block_size");
    if (B <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size = %" PRId64 ": must be >= 1", B);
    if ((rc = dsv4_input(in, "k", DSV4_BF16, 2, &a->k, st)) ||
        (rc = dsv4_kvcache_input(in, B, *fmt, &a->cache, st)))
        return rc;
    a->slots = dsv4_tensors_get(in, "slot_mapping");
    if (!a->slots || a->slots->ndim != 1 || (a->slots->dtype != DSV4_I64 && a->slots->dtype != DSV4_I32))
        return dsv4_fail(st, DSV4_EINPUT, "input 'slot_mapping' must be a 1-D int64 or int32 tensor");
    a->T = a->slots->shape[0];
    if (a->k->shape[1] != DSV4_KV_HEAD_DIM || a->k->shape[0] < a->T)
        return dsv4_fail(st, DSV4_EINPUT, "input 'k' is [%" PRId64 ", %" PRId64 "], expected [>= %" PRId64 ", 512]",
                         a->k->shape[0], a->k->shape[1], a->T);
    a->L.block_size = B;
    a->L.num_blocks = a->cache->shape[0];
    a->L.page_stride = 0;
    return DSV4_OK;
}

static int insert_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_kv_format *fmt = c->rule;
    insert_args a;
    int rc = insert_args_of(c, in, &a, st);
    if (rc)
        return rc;
    const int64_t nslots = a.L.num_blocks * a.L.block_size;
    const int v41 = *fmt != DSV4_KV_FMT_DS_MLA;
    if (v41 && dsv4_params_int(c->params, "use_fnuz"))
        return dsv4_fail(st, DSV4_EINPUT, "use_fnuz = 1: the V4.1 formats are OCP e4m3 only [S22]");
    uint8_t *seen = calloc((size_t)(nslots ? nslots : 1), 1);
    if (!seen)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t t = 0; t < a.T && !rc; t++) {
        int64_t s = slot_at(a.slots, t);
        if (s < -1 && !v41) /* the Triton kernel skips only slot == -1 [S1]; v41 any slot < 0 [S22] */
            rc = dsv4_fail(st, DSV4_EINPUT, "slot_mapping[%" PRId64 "] = %" PRId64
                           ": the Triton insert skips only -1 and would write page %" PRId64,
                           t, s, s / a.L.block_size);
        else if (s >= nslots)
            rc = dsv4_fail(st, DSV4_EINPUT, "slot_mapping[%" PRId64 "] = %" PRId64 " >= num_blocks*B = %" PRId64,
                           t, s, nslots);
        else if (s >= 0 && seen[s]++)
            rc = dsv4_fail(st, DSV4_EINPUT, "slot_mapping[%" PRId64 "] = %" PRId64
                           " repeats an earlier slot (the result would depend on thread order)", t, s);
    }
    free(seen);
    return rc;
}

/* The requests' tokens, and the logical blocks each one writes. */
typedef struct insert_shape {
    dsv4_req_shape rs;
    int64_t pages;
    int64_t first_blk[DSV4_PARAM_LIST_MAX], nblk[DSV4_PARAM_LIST_MAX];
} insert_shape;

/* Cache index of a position: the position itself, or pos // c for the
 * compressed cache when (pos + 1) % c == 0, else -1
 * (docs/semantics/indices.md A5.4 [S20]). */
static int64_t cache_index(int64_t pos, int64_t c)
{
    return c <= 1 ? pos : ((pos + 1) % c == 0 ? pos / c : -1);
}

static int insert_shape_of(const dsv4_params *ps, insert_shape *s, dsv4_status *st)
{
    const int64_t B = dsv4_params_int(ps, "block_size"), c = dsv4_params_int(ps, "compress_ratio");
    if (B <= 0 || c < 1)
        return dsv4_fail(st, DSV4_EINPUT, "block_size and compress_ratio must be >= 1");
    int rc = dsv4_req_shape_of(ps, (int64_t)1 << 20, (int64_t)1 << 28, 0, &s->rs, st);
    if (rc)
        return rc;
    s->pages = 0;
    for (int64_t r = 0; r < s->rs.R; r++) {
        /* Only the logical blocks this request's tokens write get pages. */
        int64_t lo = -1, hi = -1;
        for (int64_t pos = s->rs.prefix[r]; pos < s->rs.prefix[r] + s->rs.qlen[r]; pos++) {
            int64_t ci = cache_index(pos, c);
            if (ci < 0)
                continue;
            if (lo < 0)
                lo = ci / B;
            hi = ci / B;
        }
        s->first_blk[r] = lo;
        s->nblk[r] = lo < 0 ? 0 : hi - lo + 1;
        s->pages += s->nblk[r];
    }
    return DSV4_OK;
}

/* The slot of a skipped token: -1 ([S1] skips only -1); the v41 kernels
 * skip every slot < 0 [S22], so their cases also use -2 and -2^30. */
static int64_t skip_slot(dsv4_kv_format f, int64_t t)
{
    return f == DSV4_KV_FMT_DS_MLA || t % 3 == 0 ? -1 : t % 3 == 1 ? -2 : -(INT64_C(1) << 30);
}

/* rows K rows as bf16 bits, from the format's generator. */
static void gen_k_rows(dsv4_rng *rng, uint16_t *dst, int64_t rows, dsv4_kv_format f)
{
    float x[DSV4_KV_HEAD_DIM];
    for (int64_t t = 0; t < rows; t++) {
        uint16_t *row = dst + t * DSV4_KV_HEAD_DIM;
        if (f != DSV4_KV_FMT_DS_MLA) {
            dsv4_kvgen_row41(rng, row, f);
            continue;
        }
        dsv4_kvgen_token(rng, x);
        for (int d = 0; d < DSV4_KV_HEAD_DIM; d++)
            row[d] = dsv4_bf16_from_f32(x[d]);
    }
}

static int insert_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_kv_format *fmt = c->rule;
    const dsv4_params *ps = c->params;
    insert_shape s;
    int rc = insert_shape_of(ps, &s, st);
    if (rc)
        return rc;
    const int64_t B = dsv4_params_int(ps, "block_size"), ratio = dsv4_params_int(ps, "compress_ratio");
    const int64_t pad = dsv4_params_int(ps, "pad_tokens"), extra = dsv4_params_int(ps, "k_extra_rows");
    const int64_t spare = dsv4_params_int(ps, "spare_blocks");
    const double invalid = dsv4_params_float(ps, "invalid_frac");
    const char *sdt = dsv4_params_str(ps, "slot_dtype");
    const int i32 = strcmp(sdt, "int32") == 0;
    if (!i32 && strcmp(sdt, "int64") != 0)
        return dsv4_fail(st, DSV4_EINPUT, "slot_dtype '%s': expected int64 or int32", sdt);
    if (pad < 0 || extra < 0 || spare < 0)
        return dsv4_fail(st, DSV4_EINPUT, "pad_tokens, k_extra_rows and spare_blocks must be >= 0");
    const int64_t T = s.rs.T + pad, nb = s.pages + spare;
    int64_t kshape[2] = {T + extra, DSV4_KV_HEAD_DIM}, cshape[3] = {nb, B, dsv4_kv_format_token_bytes(*fmt)};
    dsv4_tensor *k, *sm, *kc;
    if ((rc = dsv4_tensors_add(in, "k", DSV4_BF16, 2, kshape, &k, st)) ||
        (rc = dsv4_tensors_add(in, "slot_mapping", i32 ? DSV4_I32 : DSV4_I64, 1, &T, &sm, st)) ||
        (rc = dsv4_tensors_add(in, "k_cache", DSV4_U8, 3, cshape, &kc, st)))
        return rc;
    dsv4_rng rk, rs, rp;
    dsv4_rng_init(&rk, c->seed, "k");
    dsv4_rng_init(&rs, c->seed, "slot_mapping");
    dsv4_rng_init(&rp, c->seed, "k_cache");
    gen_k_rows(&rk, k->data, T + extra, *fmt);
    dsv4_kvcache_poison(kc->data, nb, B, (int)dsv4_params_int(ps, "use_fnuz"), *fmt);
    /* shuffled page ids (docs/semantics/indices.md A5.1 block tables) */
    int32_t *perm = dsv4_kvcache_shuffled_pages(&rp, nb);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int64_t t = 0, used = 0;
    for (int64_t r = 0; r < s.rs.R; r++) {
        for (int64_t i = 0; i < s.rs.qlen[r]; i++, t++) {
            int64_t ci = cache_index(s.rs.prefix[r] + i, ratio), slot = skip_slot(*fmt, t);
            if (ci >= 0 && dsv4_rng_uniform(&rs) >= invalid) /* slot = bt[r, ci // B]*B + ci % B */
                slot = (int64_t)perm[used + ci / B - s.first_blk[r]] * B + ci % B;
            set_slot(sm, t, slot);
        }
        used += s.nblk[r];
    }
    for (; t < T; t++) /* padding tokens */
        set_slot(sm, t, skip_slot(*fmt, t));
    free(perm);
    return DSV4_OK;
}

static int insert_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    insert_args a;
    int rc = insert_args_of(c, in, &a, st);
    dsv4_tensor *o;
    if (rc || (rc = dsv4_tensors_add(out, "k_cache", DSV4_U8, 3, a.cache->shape, &o, st)))
        return rc;
    memcpy(o->data, a.cache->data, o->nbytes); /* in/out: untouched slots keep their bytes */
    return DSV4_OK;
}

static int insert_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_kv_format *fmt = c->rule;
    insert_args a;
    int rc = insert_args_of(c, in, &a, st);
    if (rc)
        return rc;
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default((int)dsv4_params_int(c->params, "use_fnuz"));
    return dsv4_ref_quantize_and_insert_k_cache_fmt(
        a.k->data, a.T, a.slots->dtype == DSV4_I64 ? a.slots->data : NULL,
        a.slots->dtype == DSV4_I32 ? a.slots->data : NULL, dsv4_tensors_find(out, "k_cache")->data, &a.L, *fmt,
        &o, st);
}

static int insert_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                         dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    const dsv4_kv_format *fmt = c->rule;
    dsv4_policy_exact(pol, *fmt == DSV4_KV_FMT_V41_FP8   ? "cache bytes: v41 fp8, exact UE8M0 rule from fp32 bits, RNE "
                                                           "e4m3 (docs/semantics/kvcache.md A2.4)"
                           : *fmt == DSV4_KV_FMT_V41_FP4 ? "cache bytes: v41 fp4, e4m3 scale RNE, IEEE x/scale, RNE "
                                                           "e2m1 (docs/semantics/kvcache.md A2.4)"
                                                         : "cache bytes: exact scale rule, RNE e4m3, bf16 RoPE copy "
                                                           "(docs/semantics/kvcache.md A2.2)");
    return DSV4_OK;
}

/* Names a byte of a cache of format f: page, token and field.  Every
 * format's page is B data rows, then B scale rows
 * (docs/semantics/kvcache.md A2.1, A2.4). */
static void locate_cache_byte(int64_t flat, int64_t B, dsv4_kv_format f, char *buf, size_t len)
{
    const int64_t tb = dsv4_kv_format_token_bytes(f), D = dsv4_kv_format_data_bytes(f);
    const int64_t S = dsv4_kv_format_scale_bytes(f), tile = dsv4_kv_format_tile(f);
    const int64_t page = flat / (B * tb), off = flat % (B * tb), data = off < B * D;
    const int64_t tok = data ? off / D : (off - B * D) / S, b = data ? off % D : (off - B * D) % S;
    const int fp8 = f == DSV4_KV_FMT_V41_FP8;
    const int n = snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), ", page, tok,
                           page * B + tok);
    if (n < 0 || (size_t)n >= len)
        return;
    buf += n, len -= (size_t)n;
    if (!data && f != DSV4_KV_FMT_DS_MLA)
        snprintf(buf, len, "%s scale byte %" PRId64 " (tile %" PRId64 ": dims %" PRId64 "..%" PRId64 ")",
                 fp8 ? "ue8m0" : "e4m3", b, b, b * tile, b * tile + tile - 1);
    else if (!data && b < DSV4_KV_NQBLOCKS)
        snprintf(buf, len, "scale byte %" PRId64 " (dims %" PRId64 "..%" PRId64 ")", b, b * tile, b * tile + 63);
    else if (!data)
        snprintf(buf, len, "pad byte");
    else if (f == DSV4_KV_FMT_V41_FP4)
        snprintf(buf, len, "value byte %" PRId64 " (dims %" PRId64 " low nibble, %" PRId64 " high, tile %" PRId64 ")",
                 b, 2 * b, 2 * b + 1, 2 * b / tile);
    else if (fp8 || b < DSV4_KV_NOPE_DIM)
        snprintf(buf, len, "value byte %" PRId64 " (dim %" PRId64 ", %s %" PRId64 ")", b, b, fp8 ? "tile" : "block",
                 b / tile);
    else
        snprintf(buf, len, "rope lane %" PRId64 " (dim %" PRId64 "), %s byte", (b - DSV4_KV_NOPE_DIM) / 2,
                 DSV4_KV_NOPE_DIM + (b - DSV4_KV_NOPE_DIM) / 2, (b & 1) ? "high" : "low");
}

static void insert_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                          char *buf, size_t len)
{
    (void)in, (void)output;
    const dsv4_kv_format *fmt = c->rule;
    locate_cache_byte(flat, dsv4_params_int(c->params, "block_size"), *fmt, buf, len);
}

const dsv4_op dsv4_op_quantize_and_insert_k_cache = {
    .name = "quantize_and_insert_k_cache",
    .summary = "encode bf16 K rows into the 584-byte fp8_ds_mla (or V4.1 528 / 288-byte) paged cache at their slots",
    .source = DSV4_KV_S1_SRC " (docs/semantics/kvcache.md A2.1-A2.3); " DSV4_KV_S22_SRC
              " (docs/semantics/kvcache.md A2.4)",
    DSV4_OP_TABLES(insert),
    .generate = insert_generate,
    .validate = insert_validate,
    .alloc_outputs = insert_alloc,
    .reference = insert_reference,
    .policy = insert_policy,
    .locate = insert_locate,
};
