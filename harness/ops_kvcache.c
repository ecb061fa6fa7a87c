/* ops_kvcache.c - registry entries of the fp8_ds_mla cache ops
 * quantize_and_insert_k_cache and dequantize_and_gather_k_cache.
 * Semantics: ref/kvcache.c; spec sparse_attention.md 2.1-2.3 and 4. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/kvcache.h"
#include "../ref/numerics.h"
#include "../ops/ops.h"
#include "rng.h"

#define S1_SRC "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6"
#define S22_SRC "vllm-project/vllm:vllm/models/deepseek_v4_1/common/ops/kv_formats_v41.py@0a58229d4cfff7476cec7b665b44a2e0e414021d"

/* ------------------------------------------------------------------ */
/* Shared generators                                                   */

/* One token's 512 bf16-representable values with a kind per 64-block that
 * exercises the scale rule (spec 2.2): random amplitudes, an all-zero
 * block (+0/-0: the 1e-4 floor), bf16 denormals, amax exactly 448*2^k,
 * values just below and above 448*2^k (codes near the fp8 max), powers of
 * two, and blocks entirely under the 1e-4 floor. */
static void gen_token(dsv4_rng *rng, float *x)
{
    for (int k = 0; k < DSV4_KV_HEAD_DIM / DSV4_KV_QBLOCK; k++) {
        float *b = x + k * DSV4_KV_QBLOCK;
        int kind = (int)dsv4_rng_range(rng, 0, 12);
        int sc = (int)dsv4_rng_range(rng, -12, 13);
        double top = ldexp(448.0, sc);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            double n = dsv4_rng_normal(rng), v;
            switch (kind) {
            case 4: v = (i & 1) ? -0.0 : 0.0; break;                          /* +-0 */
            case 5: v = (i % 3) ? ldexp(floor(n * 20), -133) : 0.0; break;    /* denormals */
            case 6: v = (n / 6.0) * top; break;                               /* amax fixed below */
            case 7: v = (0.9 + 0.1 * fabs(n) / 6.0) * top * (n < 0 ? -1 : 1); break; /* near max */
            case 8: v = ldexp(n < 0 ? -1.0 : 1.0, sc - (int)(fabs(n) * 3)); break;  /* 2^j */
            case 9: v = n * 1e-6; break;                                      /* under the floor */
            default: v = ldexp(n, sc); break;
            }
            b[i] = dsv4_round_bf16((float)v);
        }
        int at = (int)dsv4_rng_range(rng, 0, DSV4_KV_QBLOCK);
        if (kind == 6) /* amax exactly 448 * 2^sc: e = sc, code 0x7E */
            b[at] = (float)((at & 1) ? -top : top);
        else if (kind == 7) { /* bf16 neighbours of 448 * 2^sc: e = sc and e = sc + 1 */
            uint16_t h = dsv4_bf16_from_f32((float)top);
            b[at] = dsv4_bf16_to_f32((uint16_t)(h - 1));
            if (dsv4_rng_range(rng, 0, 2))
                b[(at + 1) % DSV4_KV_QBLOCK] = -dsv4_bf16_to_f32((uint16_t)(h + 1));
        }
    }
}

static void gen_bf16_rows(dsv4_rng *rng, uint16_t *dst, int64_t rows)
{
    float x[DSV4_KV_HEAD_DIM];
    for (int64_t t = 0; t < rows; t++) {
        gen_token(rng, x);
        for (int d = 0; d < DSV4_KV_HEAD_DIM; d++)
            dst[t * DSV4_KV_HEAD_DIM + d] = dsv4_bf16_from_f32(x[d]);
    }
}

/* One V4.1 row (bf16 bits) whose tiles (32 for fp8, 16 for fp4) exercise
 * the format's scale rule (spec 2.4 [S22]).  fp8: the 1e-4 floor (+-0,
 * denormals, tiny tiles), amax exactly 448*2^k and its bf16 neighbours,
 * exponents up to 2^110.  fp4: the clamp at 2^-9 (zeros, tiny tiles) and at
 * 448 (huge tiles, codes saturate at 6), amax = 6 * an e4m3 midpoint (the
 * scale's RNE tie), and values t * scale with t an e2m1 midpoint (the
 * element's RNE tie). */
static void gen_row41(dsv4_rng *rng, uint16_t *k, dsv4_kv_format f)
{
    static const float e2m1_ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const int tile = dsv4_kv_format_tile(f), fp4 = f == DSV4_KV_FMT_V41_FP4;
    for (int t = 0; t < DSV4_KV_HEAD_DIM / tile; t++) {
        uint16_t *b = k + t * tile;
        const int kind = (int)dsv4_rng_range(rng, 0, 12);
        const int sc = fp4 ? (int)dsv4_rng_range(rng, -14, 12) : (int)dsv4_rng_range(rng, -30, 111);
        /* fp8 targets amax 448*2^sc; fp4 an e4m3 scale code (0x01..0x7E) */
        const int code = (int)dsv4_rng_range(rng, 1, 0x7E);
        const double top = fp4 ? 6.0 * dsv4_fp8_to_f32((uint8_t)code, DSV4_FP8_E4M3FN) : ldexp(448.0, sc);
        for (int i = 0; i < tile; i++) {
            double n = dsv4_rng_normal(rng), v;
            switch (kind) {
            case 4: v = (i & 1) ? -0.0 : 0.0; break;                                /* +-0 */
            case 5: v = (i % 3) ? ldexp(floor(n * 20), -133) : 0.0; break;          /* denormals */
            case 6: v = (n / 6.0) * top; break;                                     /* amax set below */
            case 7: v = fp4 ? ldexp(n, 12) : (0.9 + 0.1 * fabs(n) / 6.0) * top * (n < 0 ? -1 : 1); break;
            case 8: v = fp4 ? e2m1_ties[i % 7] * (top / 6.0) * (n < 0 ? -1 : 1)     /* e2m1 ties */
                            : ldexp(n < 0 ? -1.0 : 1.0, sc - (int)(fabs(n) * 3)); break;
            case 9: v = n * (fp4 ? 1e-4 : 1e-6); break;                             /* under the floor / clamp */
            case 10: v = fp4 ? 0.9 * top * n / (fabs(n) + 1.0) : ldexp(n, -16); break; /* below the amax set below */
            default: v = ldexp(n, fp4 ? sc : (sc > 20 ? sc : sc / 3)); break;
            }
            b[i] = dsv4_bf16_from_f32((float)v);
        }
        const int at = (int)dsv4_rng_range(rng, 0, tile);
        if (kind == 6 || kind == 8) /* amax exactly top: fp8 e = sc, fp4 scale = code */
            b[at] = dsv4_bf16_from_f32((float)((at & 1) ? -top : top));
        else if (kind == 7 && !fp4) { /* bf16 neighbours of 448 * 2^sc */
            uint16_t h = dsv4_bf16_from_f32((float)top);
            b[at] = (uint16_t)(h - 1);
            if (dsv4_rng_range(rng, 0, 2))
                b[(at + 1) % tile] = (uint16_t)((h + 1) | 0x8000u);
        } else if (kind == 10 && fp4 && code < 0x7E) { /* amax = 6 * midpoint of code, code+1: a tie */
            double mid = 0.5 * (dsv4_fp8_to_f32((uint8_t)code, DSV4_FP8_E4M3FN) +
                                dsv4_fp8_to_f32((uint8_t)(code + 1), DSV4_FP8_E4M3FN));
            b[at] = dsv4_bf16_from_f32((float)(6.0 * mid)); /* 3 * 5-bit midpoint: exact in bf16 */
        }
    }
}

static void gen_rows41(dsv4_rng *rng, uint16_t *dst, int64_t rows, dsv4_kv_format f)
{
    for (int64_t t = 0; t < rows; t++)
        gen_row41(rng, dst + t * DSV4_KV_HEAD_DIM, f);
}

/* Poison every byte of a cache so that reading a wrong slot is caught: NaN
 * fp8 values (0x7F OCP / 0x80 FNUZ, spec 1), NaN bf16 RoPE, scale 2^0, and
 * pad 0xA5 (never what an encoder writes). */
static void poison_cache(uint8_t *c, int64_t nb, int64_t B, int use_fnuz, dsv4_kv_format f)
{
    if (f != DSV4_KV_FMT_DS_MLA) { /* v41: data 0x7F (fp8 NaN) / 0xFF (fp4 -6,-6); scale 0x7F (e4m3 NaN) / 0xA5 */
        const int64_t D = dsv4_kv_format_data_bytes(f), S = dsv4_kv_format_scale_bytes(f);
        for (int64_t p = 0; p < nb; p++) {
            uint8_t *page = c + p * B * dsv4_kv_format_token_bytes(f);
            memset(page, f == DSV4_KV_FMT_V41_FP8 ? 0x7F : 0xFF, (size_t)(B * D));
            memset(page + B * D, f == DSV4_KV_FMT_V41_FP8 ? 0xA5 : 0x7F, (size_t)(B * S));
        }
        return;
    }
    for (int64_t p = 0; p < nb; p++) {
        uint8_t *page = c + p * B * DSV4_KV_TOKEN_BYTES;
        for (int64_t r = 0; r < B; r++) {
            memset(page + dsv4_kv_value_offset(r), use_fnuz ? 0x80 : 0x7F, DSV4_KV_NOPE_DIM);
            uint8_t *rope = page + dsv4_kv_rope_offset(r);
            for (int j = 0; j < DSV4_KV_ROPE_DIM; j++) {
                rope[2 * j] = 0xC0;
                rope[2 * j + 1] = 0x7F;
            }
            uint8_t *sc = page + dsv4_kv_scale_offset(B, r);
            memset(sc, 127, DSV4_KV_NQBLOCKS);
            sc[7] = 0xA5;
        }
    }
}

/* k_cache [num_blocks, B, 584 / 528 / 288] uint8 with B = block_size. */
static int cache_input(const dsv4_tensors *in, int64_t B, dsv4_kv_format f, const dsv4_tensor **kc,
                       dsv4_status *st)
{
    int rc = dsv4_input(in, "k_cache", DSV4_U8, 3, kc, st);
    if (rc)
        return rc;
    const int64_t tb = dsv4_kv_format_token_bytes(f);
    if ((*kc)->shape[1] != B || (*kc)->shape[2] != tb)
        return dsv4_fail(st, DSV4_EINPUT, "input 'k_cache' is [%" PRId64 ", %" PRId64 ", %" PRId64
                         "], expected [num_blocks, block_size = %" PRId64 ", %" PRId64 "] for this variant",
                         (*kc)->shape[0], (*kc)->shape[1], (*kc)->shape[2], B, tb);
    return DSV4_OK;
}

/* Names a byte of a V4.1 page (spec 2.4): data rows, then scale rows. */
static void locate_cache_byte41(int64_t flat, int64_t B, dsv4_kv_format f, char *buf, size_t len)
{
    const int64_t tb = dsv4_kv_format_token_bytes(f), D = dsv4_kv_format_data_bytes(f);
    const int64_t S = dsv4_kv_format_scale_bytes(f), tile = dsv4_kv_format_tile(f);
    const int64_t page = flat / (B * tb), off = flat % (B * tb);
    if (off < B * D) {
        const int64_t tok = off / D, b = off % D;
        if (f == DSV4_KV_FMT_V41_FP8)
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), value byte %" PRId64
                     " (dim %" PRId64 ", tile %" PRId64 ")", page, tok, page * B + tok, b, b, b / tile);
        else
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), value byte %" PRId64
                     " (dims %" PRId64 " low nibble, %" PRId64 " high, tile %" PRId64 ")",
                     page, tok, page * B + tok, b, 2 * b, 2 * b + 1, 2 * b / tile);
    } else {
        const int64_t s = off - B * D, tok = s / S, j = s % S;
        snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), %s scale byte %" PRId64
                 " (tile %" PRId64 ": dims %" PRId64 "..%" PRId64 ")", page, tok, page * B + tok,
                 f == DSV4_KV_FMT_V41_FP8 ? "ue8m0" : "e4m3", j, j, j * tile, j * tile + tile - 1);
    }
}

/* Names a byte of a cache: page, token and field (spec 2.1). */
static void locate_cache_byte(int64_t flat, int64_t B, dsv4_kv_format f, char *buf, size_t len)
{
    if (f != DSV4_KV_FMT_DS_MLA) {
        locate_cache_byte41(flat, B, f, buf, len);
        return;
    }
    const int64_t page = flat / (B * DSV4_KV_TOKEN_BYTES), off = flat % (B * DSV4_KV_TOKEN_BYTES);
    if (off < B * DSV4_KV_DATA_BYTES) {
        int64_t tok = off / DSV4_KV_DATA_BYTES, b = off % DSV4_KV_DATA_BYTES;
        if (b < DSV4_KV_NOPE_DIM)
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), value byte %" PRId64
                     " (dim %" PRId64 ", block %" PRId64 ")",
                     page, tok, page * B + tok, b, b, b / DSV4_KV_QBLOCK);
        else
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), rope lane %" PRId64
                     " (dim %" PRId64 "), %s byte",
                     page, tok, page * B + tok, (b - DSV4_KV_NOPE_DIM) / 2,
                     DSV4_KV_NOPE_DIM + (b - DSV4_KV_NOPE_DIM) / 2, (b & 1) ? "high" : "low");
    } else {
        int64_t s = off - B * DSV4_KV_DATA_BYTES, tok = s / DSV4_KV_SCALE_BYTES, j = s % DSV4_KV_SCALE_BYTES;
        if (j < DSV4_KV_NQBLOCKS)
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), scale byte %" PRId64
                     " (dims %" PRId64 "..%" PRId64 ")",
                     page, tok, page * B + tok, j, j * DSV4_KV_QBLOCK, j * DSV4_KV_QBLOCK + 63);
        else
            snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), pad byte", page, tok,
                     page * B + tok);
    }
}

/* ------------------------------------------------------------------ */
/* quantize_and_insert_k_cache                                         */

static const char *const insert_variants[] = {"default", "format=v41_fp8", "format=v41_fp4", NULL};
static const char *const insert_variant_docs[] = {
    "the Triton quantize_and_insert_k_cache: UE8M0 per-64 scales, FP8MAX 448 (224 with use_fnuz), "
    "slot -1 skipped (" S1_SRC ")",
    "V4.1 FlashMLA fp8, 528 B/token: 16 tiles of 32 e4m3fn (RoPE dims too), UE8M0 scale "
    "2^ceil(log2(max(amax/448, 1e-4))) from fp32 bits; any slot < 0 skipped; k is the post-RoPE bf16 row "
    "(rope_v41_fp8_insert, " S22_SRC ")",
    "V4.1 FlashMLA fp4, 288 B/token: 32 tiles of 16 e2m1 (two per byte, even dim low), e4m3 scale "
    "clamp(amax/6, 2^-9, 448), x / scale IEEE RNE, e2m1 RNE saturating; any slot < 0 skipped "
    "(rope_v41_fp4_insert, " S22_SRC ")",
};

/* The cache format of a variant (variant names above). */
static dsv4_kv_format insert_format(const dsv4_opctx *c)
{
    return c->variant == 1 ? DSV4_KV_FMT_V41_FP8 : c->variant == 2 ? DSV4_KV_FMT_V41_FP4 : DSV4_KV_FMT_DS_MLA;
}

static const dsv4_param_spec insert_params[] = {
    {"block_size", DSV4_P_INT, "64", "tokens per cache page B (64 SWA / C4, 2 for C128)", 0},
    {"use_fnuz", DSV4_P_INT, "0", "1: e4m3fnuz values with FP8MAX 224 (gfx942) [S1]", 0},
    {"query_lens", DSV4_P_INTLIST, NULL, "generator: tokens inserted per request", 1},
    {"prefix_lens", DSV4_P_INTLIST, "[]", "generator: positions already cached per request", 1},
    {"compress_ratio", DSV4_P_INT, "1", "generator: c > 1 gives the compressed slot mapping (spec 5.4)", 1},
    {"spare_blocks", DSV4_P_INT, "2", "generator: untouched (poisoned) pages beside the used ones", 1},
    {"invalid_frac", DSV4_P_FLOAT, "0", "generator: fraction of tokens given slot -1", 1},
    {"pad_tokens", DSV4_P_INT, "0", "generator: trailing slot -1 tokens (graph padding)", 1},
    {"k_extra_rows", DSV4_P_INT, "0", "generator: k rows beyond slot_mapping (DP padding)", 1},
    {"slot_dtype", DSV4_P_STR, "int64", "generator: int64 or int32 slot_mapping", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec insert_inputs[] = {
    {"k", DSV4_BF16, DSV4_DT_NONE, "[>= T, 512] tokens (448 NoPE + 64 RoPE)"},
    {"slot_mapping", DSV4_I64, DSV4_DT_NONE, "[T] int64 or int32 slots, -1 = skip"},
    {"k_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, B, 584 / 528 / 288] the cache before the insert"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec insert_outputs[] = {
    {"k_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, B, 584 / 528 / 288] the cache after (untouched slots keep their bytes)"},
    {NULL, 0, 0, NULL},
};

typedef struct insert_args {
    const dsv4_tensor *k, *slots, *cache;
    dsv4_kv_layout L;
    int64_t T;
} insert_args;

static int64_t slot_at(const dsv4_tensor *s, int64_t t)
{
    return s->dtype == DSV4_I64 ? ((const int64_t *)s->data)[t] : ((const int32_t *)s->data)[t];
}

static int insert_args_of(const dsv4_opctx *c, const dsv4_tensors *in, insert_args *a, dsv4_status *st)
{
    int rc;
    const int64_t B = dsv4_params_int(c->params, "block_size");
    if (B <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size = %" PRId64 ": must be >= 1", B);
    if ((rc = dsv4_input(in, "k", DSV4_BF16, 2, &a->k, st)) ||
        (rc = cache_input(in, B, insert_format(c), &a->cache, st)))
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
    insert_args a;
    int rc = insert_args_of(c, in, &a, st);
    if (rc)
        return rc;
    const int64_t nslots = a.L.num_blocks * a.L.block_size;
    const int v41 = insert_format(c) != DSV4_KV_FMT_DS_MLA;
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

/* One request's tokens: slots from a block table of shuffled pages. */
typedef struct insert_shape {
    int64_t R, T, pages;
    const int64_t *qlen;
    int64_t prefix[DSV4_PARAM_LIST_MAX];
    int64_t first_blk[DSV4_PARAM_LIST_MAX], nblk[DSV4_PARAM_LIST_MAX];
} insert_shape;

/* Cache index of a position: the position itself, or pos // c for the
 * compressed cache when (pos + 1) % c == 0, else -1 (spec 5.4 [S20]). */
static int64_t cache_index(int64_t pos, int64_t c)
{
    return c <= 1 ? pos : ((pos + 1) % c == 0 ? pos / c : -1);
}

static int insert_shape_of(const dsv4_params *ps, insert_shape *s, dsv4_status *st)
{
    const int64_t *pre;
    const int64_t B = dsv4_params_int(ps, "block_size"), c = dsv4_params_int(ps, "compress_ratio");
    s->R = dsv4_params_list(ps, "query_lens", &s->qlen);
    int np = dsv4_params_list(ps, "prefix_lens", &pre);
    if (np != 0 && np != s->R)
        return dsv4_fail(st, DSV4_EINPUT, "prefix_lens has %d entries, query_lens %" PRId64, np, s->R);
    if (B <= 0 || c < 1)
        return dsv4_fail(st, DSV4_EINPUT, "block_size and compress_ratio must be >= 1");
    s->T = s->pages = 0;
    for (int64_t r = 0; r < s->R; r++) {
        s->prefix[r] = np ? pre[r] : 0;
        if (s->qlen[r] < 0 || s->prefix[r] < 0 || s->qlen[r] > (1 << 20) || s->prefix[r] > (1 << 28))
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": query_lens / prefix_lens out of range", r);
        /* Only the logical blocks this request's tokens write get pages. */
        int64_t lo = -1, hi = -1;
        for (int64_t pos = s->prefix[r]; pos < s->prefix[r] + s->qlen[r]; pos++) {
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
        s->T += s->qlen[r];
    }
    return DSV4_OK;
}

/* The slot of a skipped token: -1 ([S1] skips only -1); the v41 kernels
 * skip every slot < 0 [S22], so their cases also use -2 and -2^30. */
static int64_t skip_slot(dsv4_kv_format f, int64_t t)
{
    return f == DSV4_KV_FMT_DS_MLA || t % 3 == 0 ? -1 : t % 3 == 1 ? -2 : -(INT64_C(1) << 30);
}

static int insert_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
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
    const int64_t T = s.T + pad, nb = s.pages + spare;
    const dsv4_kv_format fmt = insert_format(c);
    int64_t kshape[2] = {T + extra, DSV4_KV_HEAD_DIM}, cshape[3] = {nb, B, dsv4_kv_format_token_bytes(fmt)};
    dsv4_tensor *k, *sm, *kc;
    if ((rc = dsv4_tensors_add(in, "k", DSV4_BF16, 2, kshape, &k, st)) ||
        (rc = dsv4_tensors_add(in, "slot_mapping", i32 ? DSV4_I32 : DSV4_I64, 1, &T, &sm, st)) ||
        (rc = dsv4_tensors_add(in, "k_cache", DSV4_U8, 3, cshape, &kc, st)))
        return rc;
    dsv4_rng rk, rs, rp;
    dsv4_rng_init(&rk, c->seed, "k");
    dsv4_rng_init(&rs, c->seed, "slot_mapping");
    dsv4_rng_init(&rp, c->seed, "k_cache");
    if (fmt == DSV4_KV_FMT_DS_MLA)
        gen_bf16_rows(&rk, k->data, T + extra);
    else
        gen_rows41(&rk, k->data, T + extra, fmt);
    poison_cache(kc->data, nb, B, (int)dsv4_params_int(ps, "use_fnuz"), fmt);
    int32_t *perm = malloc((size_t)(nb ? nb : 1) * sizeof *perm);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t p = 0; p < nb; p++)
        perm[p] = (int32_t)p;
    dsv4_rng_shuffle_i32(&rp, perm, nb); /* shuffled page ids (spec 5.1 block tables) */
    int64_t t = 0, used = 0;
    for (int64_t r = 0; r < s.R; r++) {
        for (int64_t i = 0; i < s.qlen[r]; i++, t++) {
            int64_t ci = cache_index(s.prefix[r] + i, ratio), slot = skip_slot(fmt, t);
            if (ci >= 0 && dsv4_rng_uniform(&rs) >= invalid) /* slot = bt[r, ci // B]*B + ci % B */
                slot = (int64_t)perm[used + ci / B - s.first_blk[r]] * B + ci % B;
            if (i32)
                ((int32_t *)sm->data)[t] = (int32_t)slot;
            else
                ((int64_t *)sm->data)[t] = slot;
        }
        used += s.nblk[r];
    }
    for (; t < T; t++) { /* padding tokens */
        if (i32)
            ((int32_t *)sm->data)[t] = (int32_t)skip_slot(fmt, t);
        else
            ((int64_t *)sm->data)[t] = skip_slot(fmt, t);
    }
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
    insert_args a;
    int rc = insert_args_of(c, in, &a, st);
    if (rc)
        return rc;
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default((int)dsv4_params_int(c->params, "use_fnuz"));
    return dsv4_ref_quantize_and_insert_k_cache_fmt(
        a.k->data, a.T, a.slots->dtype == DSV4_I64 ? a.slots->data : NULL,
        a.slots->dtype == DSV4_I32 ? a.slots->data : NULL, dsv4_tensors_find(out, "k_cache")->data, &a.L,
        insert_format(c), &o, st);
}

static int insert_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                         dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    const dsv4_kv_format f = insert_format(c);
    dsv4_policy_exact(pol, f == DSV4_KV_FMT_V41_FP8   ? "cache bytes: v41 fp8, exact UE8M0 rule from fp32 bits, RNE e4m3 (spec 2.4)"
                           : f == DSV4_KV_FMT_V41_FP4 ? "cache bytes: v41 fp4, e4m3 scale RNE, IEEE x/scale, RNE e2m1 (spec 2.4)"
                                                      : "cache bytes: exact scale rule, RNE e4m3, bf16 RoPE copy (spec 2.2)");
    return DSV4_OK;
}

static void insert_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                          char *buf, size_t len)
{
    (void)in, (void)output;
    locate_cache_byte(flat, dsv4_params_int(c->params, "block_size"), insert_format(c), buf, len);
}

const dsv4_op dsv4_op_quantize_and_insert_k_cache = {
    .name = "quantize_and_insert_k_cache",
    .summary = "encode bf16 K rows into the 584-byte fp8_ds_mla (or V4.1 528 / 288-byte) paged cache at their slots",
    .source = S1_SRC " (spec sparse_attention.md 2.1-2.3); " S22_SRC " (spec 2.4)",
    .variants = insert_variants,
    .variant_docs = insert_variant_docs,
    .params = insert_params,
    .inputs = insert_inputs,
    .outputs = insert_outputs,
    .generate = insert_generate,
    .validate = insert_validate,
    .alloc_outputs = insert_alloc,
    .reference = insert_reference,
    .policy = insert_policy,
    .locate = insert_locate,
};

/* ------------------------------------------------------------------ */
/* dequantize_and_gather_k_cache                                       */

static const char *const gather_variants[] = {"default", "invalid_block=skip", "invalid_block=zero",
                                               "format=v41_fp8", "format=v41_fp4", NULL};
static const char *const gather_variant_docs[] = {
    "Triton: no block-table check; a read page outside the cache is bad input (" S1_SRC ")",
    "MUSA torch_musa kernel: rows whose page is < 0 or >= num_blocks are left untouched "
    "(spec 4 [S7], file id 68852992528)",
    "third-party Triton port: rows whose page is invalid are written as zeros (spec 4 [S8], file id 54508770908)",
    "V4.1 FlashMLA fp8 cache (528 B/token, k_cache.shape[-1] != 584 dispatch [S3]): e4m3fn x 2^(b-127) "
    "per 32-tile, to bf16 (exact); Triton, no block-table check (gather_dequant_v41, " S22_SRC ")",
    "V4.1 FlashMLA fp4 cache (288 B/token): e2m1 x e4m3 scale per 16-tile, to bf16 (exact); Triton, "
    "no block-table check (gather_dequant_v41, " S22_SRC ")",
};

/* Format and invalid-block mode of a gather variant (names above). */
static dsv4_kv_format gather_format(const dsv4_opctx *c)
{
    return c->variant == 3 ? DSV4_KV_FMT_V41_FP8 : c->variant == 4 ? DSV4_KV_FMT_V41_FP4 : DSV4_KV_FMT_DS_MLA;
}

static dsv4_gather_invalid gather_invalid(const dsv4_opctx *c)
{
    return c->variant <= 2 ? (dsv4_gather_invalid)c->variant : DSV4_GATHER_INVALID_ERROR;
}

static const dsv4_param_spec gather_params[] = {
    {"block_size", DSV4_P_INT, "64", "tokens per cache page B (64 SWA / C4, 2 for C128)", 0},
    {"offset", DSV4_P_INT, "0", "first out row written (chunk_N for the SWA gather)", 0},
    {"use_fnuz", DSV4_P_INT, "0", "1: decode e4m3fnuz (gfx942 SWA cache, spec 2.3)", 0},
    {"has_gather_lens", DSV4_P_INT, "1", "0: gather_lens is None, G = S", 0},
    {"req_seq_lens", DSV4_P_INTLIST, NULL, "generator: seq_lens of each request", 1},
    {"req_gather_lens", DSV4_P_INTLIST, "[]", "generator: gather_lens of each request (default S)", 1},
    {"out_rows", DSV4_P_INT, "-1", "generator: Wout; -1: offset + max G + 2", 1},
    {"table_width", DSV4_P_INT, "-1", "generator: block_table columns; -1: max ceil(S/B) + 1", 1},
    {"spare_blocks", DSV4_P_INT, "2", "generator: poisoned pages that unread table entries point at", 1},
    {"invalid_blocks", DSV4_P_INT, "0", "generator: read table entries made invalid (-1 / >= num_blocks)", 1},
    {NULL, 0, NULL, NULL, 0},
};

static const dsv4_io_spec gather_inputs[] = {
    {"out", DSV4_BF16, DSV4_DT_NONE, "[R, Wout, 512] the workspace before the gather (stale rows)"},
    {"k_cache", DSV4_U8, DSV4_DT_NONE, "[num_blocks, B, 584] fp8_ds_mla cache (528 / 288: V4.1 variants)"},
    {"seq_lens", DSV4_I32, DSV4_DT_NONE, "[R] S of each request"},
    {"gather_lens", DSV4_I32, DSV4_DT_NONE, "[R] G of each request (absent: G = S)"},
    {"block_table", DSV4_I32, DSV4_DT_NONE, "[R, maxb] physical page of each logical block"},
    {NULL, 0, 0, NULL},
};

static const dsv4_io_spec gather_outputs[] = {
    {"out", DSV4_BF16, DSV4_DT_NONE, "[R, Wout, 512] rows [offset, offset+G) written, others untouched"},
    {NULL, 0, 0, NULL},
};

static int gather_args_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gather_args *a,
                          const dsv4_tensor **outin, dsv4_status *st)
{
    const dsv4_tensor *kc, *seq, *bt, *gat = NULL;
    const int64_t B = dsv4_params_int(c->params, "block_size");
    int rc;
    if (B <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "block_size = %" PRId64 ": must be >= 1", B);
    if ((rc = dsv4_input(in, "out", DSV4_BF16, 3, outin, st)) || (rc = cache_input(in, B, gather_format(c), &kc, st)) ||
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
    dsv4_gather_args a;
    const dsv4_tensor *o;
    int rc = gather_args_of(c, in, &a, &o, st);
    return rc ? rc : dsv4_gather_check_fmt(&a, gather_invalid(c), gather_format(c), st);
}

static int gather_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)
{
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
    int64_t maxG = 0, maxb = 0, pages = 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t G = ng ? Gl[r] : S[r];
        if (S[r] < 0 || S[r] > (1 << 28) || G < 0 || G > S[r])
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": need 0 <= gather_len <= seq_len", r);
        maxG = G > maxG ? G : maxG;
        maxb = (S[r] + B - 1) / B > maxb ? (S[r] + B - 1) / B : maxb;
        if (G > 0) /* pages for the logical blocks the gather reads */
            pages += (S[r] - 1) / B - (S[r] - G) / B + 1;
    }
    int64_t W = dsv4_params_int(ps, "out_rows"), tw = dsv4_params_int(ps, "table_width");
    W = W < 0 ? off + maxG + 2 : W;
    tw = tw < 0 ? maxb + 1 : tw;
    const int64_t nb = pages + spare;
    const dsv4_kv_format fmt = gather_format(c);
    const int64_t tbytes = dsv4_kv_format_token_bytes(fmt);
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
    poison_cache(kc->data, nb, B, fnuz, fmt);
    dsv4_rng rk, rp, ri;
    dsv4_rng_init(&rk, c->seed, "k_cache");
    dsv4_rng_init(&rp, c->seed, "block_table");
    dsv4_rng_init(&ri, c->seed, "block_table.invalid");
    int32_t *perm = malloc((size_t)nb * sizeof *perm);
    if (!perm)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int64_t p = 0; p < nb; p++)
        perm[p] = (int32_t)p;
    dsv4_rng_shuffle_i32(&rp, perm, nb);
    int32_t *btd = bt->data;
    const dsv4_kv_encode_opts eo = dsv4_kv_encode_opts_default(fnuz);
    int64_t used = 0, nread = 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t G = ng ? Gl[r] : S[r];
        ((int32_t *)seq->data)[r] = (int32_t)S[r];
        if (gat)
            ((int32_t *)gat->data)[r] = (int32_t)G;
        int64_t lo = G > 0 ? (S[r] - G) / B : 0, hi = G > 0 ? (S[r] - 1) / B : -1;
        for (int64_t j = 0; j < tw; j++) /* unread entries point at poisoned spare pages */
            btd[r * tw + j] = (j >= lo && j <= hi) ? perm[used + j - lo]
                                                   : perm[pages + dsv4_rng_range(&rp, 0, spare)];
        for (int64_t pos = S[r] - G; pos < S[r]; pos++) { /* only the gathered tokens are real */
            int64_t page = btd[r * tw + pos / B];
            if (fmt != DSV4_KV_FMT_DS_MLA) {
                uint16_t k41[DSV4_KV_HEAD_DIM];
                gen_row41(&rk, k41, fmt);
                dsv4_kv41_encode_token((uint8_t *)kc->data + page * B * tbytes, B, pos % B, k41, fmt);
                continue;
            }
            float x[DSV4_KV_HEAD_DIM];
            gen_token(&rk, x);
            if ((rc = dsv4_kv_encode_token((uint8_t *)kc->data + page * B * DSV4_KV_TOKEN_BYTES, B, pos % B, x,
                                           &eo, st)))
                break;
        }
        used += hi - lo + 1;
        nread += hi - lo + 1;
    }
    /* invalid_blocks read entries become -1 or >= num_blocks (variants). */
    for (int64_t k = 0; !rc && k < ninv && nread > 0; k++) {
        int64_t pick = dsv4_rng_range(&ri, 0, nread);
        for (int64_t r = 0; r < R; r++) {
            int64_t G = ng ? Gl[r] : S[r];
            int64_t lo = G > 0 ? (S[r] - G) / B : 0, hi = G > 0 ? (S[r] - 1) / B : -1;
            if (pick <= hi - lo) {
                btd[r * tw + lo + pick] = (k & 1) ? (int32_t)(nb + dsv4_rng_range(&ri, 0, 100)) : -1;
                break;
            }
            pick -= hi - lo + 1;
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
    dsv4_gather_args a;
    const dsv4_tensor *oi;
    int rc = gather_args_of(c, in, &a, &oi, st);
    if (rc)
        return rc;
    a.out = dsv4_tensors_find(out, "out")->data;
    return dsv4_ref_dequantize_and_gather_k_cache_fmt(&a, gather_invalid(c), gather_format(c), st);
}

static int gather_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                         dsv4_status *st)
{
    (void)in, (void)output, (void)st;
    /* fp8 (4 significant bits) x 2^k is exact in bf16 (8 bits) for every
     * scale byte the encoders write (>= 105; v41 >= 114), so decoding has no
     * rounding (spec 4, 14): bit-exact; untouched rows must keep their bits.
     * v41_fp4: e2m1 (2 bits) x e4m3 (4 bits) has at most 6 significant bits
     * in [2^-10, 2688], exact in fp32 and bf16 for every byte. */
    const dsv4_kv_format f = gather_format(c);
    dsv4_policy_exact(pol, f == DSV4_KV_FMT_V41_FP4 ? "e2m1 x e4m3 scale is exact in bf16; stale rows untouched (spec 2.4, 4)"
                           : f == DSV4_KV_FMT_V41_FP8 ? "v41 e4m3 x 2^(s-127) is exact in bf16; stale rows untouched (spec 2.4, 4)"
                                                      : "fp8 x 2^(s-127) is exact in bf16; stale rows untouched (spec 4)");
    return DSV4_OK;
}

static void gather_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t flat,
                          char *buf, size_t len)
{
    (void)output;
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
    const dsv4_kv_format f = gather_format(c);
    if (f == DSV4_KV_FMT_V41_FP8)
        snprintf(buf, len, "request %" PRId64 ", position %" PRId64 " (page %" PRId64 ", token %" PRId64
                 "), dim %" PRId64 ": value byte %" PRId64 " x ue8m0 scale byte %" PRId64 " (tile %" PRId64 ")",
                 r, pos, page, pos % B, d, d, d / DSV4_KV41_FP8_TILE, d / DSV4_KV41_FP8_TILE);
    else if (f == DSV4_KV_FMT_V41_FP4)
        snprintf(buf, len, "request %" PRId64 ", position %" PRId64 " (page %" PRId64 ", token %" PRId64
                 "), dim %" PRId64 ": value byte %" PRId64 " %s nibble x e4m3 scale byte %" PRId64 " (tile %" PRId64 ")",
                 r, pos, page, pos % B, d, d / 2, (d & 1) ? "high" : "low", d / DSV4_KV41_FP4_TILE,
                 d / DSV4_KV41_FP4_TILE);
    else if (d < DSV4_KV_NOPE_DIM)
        snprintf(buf, len, "request %" PRId64 ", position %" PRId64 " (page %" PRId64 ", token %" PRId64
                 "), dim %" PRId64 ": value byte %" PRId64 " x scale byte %" PRId64,
                 r, pos, page, pos % B, d, d, d / DSV4_KV_QBLOCK);
    else
        snprintf(buf, len, "request %" PRId64 ", position %" PRId64 " (page %" PRId64 ", token %" PRId64
                 "), dim %" PRId64 ": rope lane %" PRId64,
                 r, pos, page, pos % B, d, d - DSV4_KV_NOPE_DIM);
}

const dsv4_op dsv4_op_dequantize_and_gather_k_cache = {
    .name = "dequantize_and_gather_k_cache",
    .summary = "decode each request's last G cached tokens into bf16 workspace rows [offset, offset+G)",
    .source = S1_SRC " (spec sparse_attention.md 4); " S22_SRC " (spec 2.4)",
    .variants = gather_variants,
    .variant_docs = gather_variant_docs,
    .params = gather_params,
    .inputs = gather_inputs,
    .outputs = gather_outputs,
    .generate = gather_generate,
    .validate = gather_validate,
    .alloc_outputs = gather_alloc,
    .reference = gather_reference,
    .policy = gather_policy,
    .locate = gather_locate,
};
