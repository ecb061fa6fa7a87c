/* kvcache_common.c - what the two cache ops share (kvcache.h).
 * Semantics: ref/kvcache.c (docs/semantics/kvcache.md A2.1-A2.4, A4). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcache.h"

/* The value kinds both generators below draw alike, element i of a block
 * from the normal draw n: 4 +-0, 5 bf16 denormals, 6 a block under top
 * (its amax set to top afterwards). */
static double shared_kind_value(int kind, int i, double n, double top)
{
    if (kind == 4)
        return (i & 1) ? -0.0 : 0.0;
    if (kind == 5)
        return (i % 3) ? ldexp(floor(n * 20), -133) : 0.0;
    return (n / 6.0) * top;
}

/* One token's 512 bf16-representable values with a kind per 64-block that
 * exercises the scale rule (docs/semantics/kvcache.md A2.2): random
 * amplitudes, an all-zero block (+0/-0: the 1e-4 floor), bf16 denormals,
 * amax exactly 448*2^k, values just below and above 448*2^k (codes near the
 * fp8 max), powers of two, and blocks entirely under the 1e-4 floor. */
void dsv4_kvgen_token(dsv4_rng *rng, float *x)
{
    for (int k = 0; k < DSV4_KV_HEAD_DIM / DSV4_KV_QBLOCK; k++) {
        float *b = x + k * DSV4_KV_QBLOCK;
        int kind = (int)dsv4_rng_range(rng, 0, 12);
        int sc = (int)dsv4_rng_range(rng, -12, 13);
        double top = ldexp(448.0, sc);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            double n = dsv4_rng_normal(rng), v;
            switch (kind) {
            case 4: case 5: case 6: v = shared_kind_value(kind, i, n, top); break;
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

/* One V4.1 row (bf16 bits) whose tiles (32 for fp8, 16 for fp4) exercise
 * the format's scale rule (docs/semantics/kvcache.md A2.4 [S22]).  fp8: the
 * 1e-4 floor (+-0, denormals, tiny tiles), amax exactly 448*2^k and its bf16
 * neighbours, exponents up to 2^110.  fp4: the clamp at 2^-9 (zeros, tiny tiles) and at
 * 448 (huge tiles, codes saturate at 6), amax = 6 * an e4m3 midpoint (the
 * scale's RNE tie), and values t * scale with t an e2m1 midpoint (the
 * element's RNE tie). */
void dsv4_kvgen_row41(dsv4_rng *rng, uint16_t *k, dsv4_kv_format f)
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
            case 4: case 5: case 6: v = shared_kind_value(kind, i, n, top); break;
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

/* Poison every byte of a cache so that reading a wrong slot is caught: NaN
 * fp8 values (0x7F OCP / 0x80 FNUZ, docs/semantics/numerics.md A1), NaN
 * bf16 RoPE, scale 2^0, and pad 0xA5 (never what an encoder writes). */
void dsv4_kvcache_poison(uint8_t *c, int64_t nb, int64_t B, int use_fnuz, dsv4_kv_format f)
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
int dsv4_kvcache_input(const dsv4_tensors *in, int64_t B, dsv4_kv_format f, const dsv4_tensor **kc,
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

int32_t *dsv4_kvcache_shuffled_pages(dsv4_rng *rng, int64_t nb)
{
    int32_t *perm = malloc((size_t)(nb ? nb : 1) * sizeof *perm);
    if (!perm)
        return NULL;
    for (int64_t p = 0; p < nb; p++)
        perm[p] = (int32_t)p;
    dsv4_rng_shuffle_i32(rng, perm, nb);
    return perm;
}
