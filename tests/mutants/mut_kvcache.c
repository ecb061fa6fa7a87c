/* mut_kvcache.c - mutants of the paged KV-cache ops (exact cache bytes
 * and bf16 rows; the caches start poisoned, so a byte written where the op
 * must not write, or not written where it must, is visible).  Semantics:
 * ref/kvcache.h (docs/semantics/kvcache.md A2, A4). */
#include <math.h>
#include <string.h>

#include "../../ref/kvcache.h"
#include "mutant.h"

#define KD DSV4_KV_HEAD_DIM

/* The insert's inputs and the output cache (in/out: it starts as the input). */
typedef struct insert_io {
    const uint16_t *k;
    dsv4_tensor *slots;
    uint8_t *cache;
    int64_t T, B, nb, token_bytes;
} insert_io;

static int insert_io_of(mut_call *m, insert_io *io)
{
    dsv4_tensor *k, *out;
    int rc;
    if ((rc = mut_need(m, &m->in, "k", &k)) || (rc = mut_need(m, &m->in, "slot_mapping", &io->slots)) ||
        (rc = mut_need(m, &m->out, "k_cache", &out)))
        return rc;
    io->k = k->data;
    io->T = io->slots->shape[0];
    io->cache = out->data;
    io->nb = out->shape[0];
    io->B = out->shape[1];
    io->token_bytes = out->shape[2];
    return DSV4_OK;
}

static int64_t slot_of(const insert_io *io, int64_t t)
{
    return io->slots->dtype == DSV4_I64 ? ((const int64_t *)io->slots->data)[t]
                                        : ((const int32_t *)io->slots->data)[t];
}

static void token_f32(const uint16_t *k, float *x)
{
    for (int d = 0; d < KD; d++)
        x[d] = dsv4_bf16_to_f32(k[d]);
}

/* e4m3 code of q with ties away from zero (the cast the kernel must not
 * use: Triton's fp8 cast is RNE). */
static uint8_t fp8_half_away(float q, dsv4_fp8_kind kind)
{
    uint8_t c = dsv4_fp8_from_f32(q, kind, 1);
    const float v = dsv4_fp8_to_f32(c, kind);
    if (v == q || !(fabsf(q) > 0))
        return c;
    /* The other neighbour: one code step in magnitude towards q. */
    const uint8_t mag = c & 0x7F, sign = c & 0x80;
    const uint8_t other = fabsf(v) < fabsf(q) ? (uint8_t)(mag + 1) : (uint8_t)(mag - 1);
    const uint8_t c2 = (uint8_t)(sign | other);
    const float v2 = dsv4_fp8_to_f32(c2, kind);
    if (!isnan(v2) && fabsf(q - v) == fabsf(q - v2) && fabsf(v2) > fabsf(v))
        return c2;
    return c;
}

typedef enum ds_mla_bug { BUG_SCALE_FLOOR, BUG_HALF_AWAY, BUG_ROW_MAJOR } ds_mla_bug;

/* One fp8_ds_mla token encoded with bug b (otherwise as
 * dsv4_kv_encode_token: UE8M0 per 64 from the exact ceil rule, e4m3 RNE,
 * bf16 RoPE, pad 0). */
static void encode_ds_mla(uint8_t *page, int64_t B, int64_t row, const uint16_t *k, dsv4_fp8_kind kind,
                          float fp8_max, ds_mla_bug bug)
{
    if (bug == BUG_ROW_MAJOR) {
        /* The record read as [B, 584] rows: data and scales of token row
         * side by side at row*584 (a page of one token has that layout). */
        float x[KD];
        token_f32(k, x);
        dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(kind == DSV4_FP8_E4M3FNUZ);
        dsv4_kv_encode_token(page + row * DSV4_KV_TOKEN_BYTES, 1, 0, x, &o, NULL);
        return;
    }
    uint8_t *vals = page + dsv4_kv_value_offset(row), *scales = page + dsv4_kv_scale_offset(B, row);
    for (int blk = 0; blk < DSV4_KV_NQBLOCKS; blk++) {
        float amax = 0;
        for (int i = 0; i < DSV4_KV_QBLOCK; i++)
            amax = fmaxf(amax, fabsf(dsv4_bf16_to_f32(k[blk * DSV4_KV_QBLOCK + i])));
        int e = dsv4_kv_scale_exponent(amax, fp8_max);
        if (bug == BUG_SCALE_FLOOR) /* floor(log2(a / FP8MAX)): one binade low unless exact */
            e = (int)floor(log2((double)fmaxf(amax, DSV4_KV_AMAX_FLOOR) / fp8_max));
        int sb = e + 127;
        sb = sb < 0 ? 0 : sb > 255 ? 255 : sb;
        scales[blk] = (uint8_t)sb;
        const float inv = (float)ldexp(1.0, 127 - sb);
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            float q = dsv4_bf16_to_f32(k[blk * DSV4_KV_QBLOCK + i]) * inv;
            q = q > fp8_max ? fp8_max : q < -fp8_max ? -fp8_max : q;
            vals[blk * DSV4_KV_QBLOCK + i] =
                bug == BUG_HALF_AWAY ? fp8_half_away(q, kind) : dsv4_fp8_from_f32(q, kind, 1);
        }
    }
    scales[7] = 0;
    memcpy(page + dsv4_kv_rope_offset(row), k + DSV4_KV_NOPE_DIM, 2 * DSV4_KV_ROPE_DIM); /* little-endian bf16 */
}

static int insert_with_bug(mut_call *m, ds_mla_bug bug)
{
    insert_io io;
    int rc = insert_io_of(m, &io);
    if (rc)
        return rc;
    const int fnuz = mut_int(m, "use_fnuz") != 0;
    const dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(fnuz);
    for (int64_t t = 0; t < io.T; t++) {
        const int64_t s = slot_of(&io, t);
        if (s < 0)
            continue;
        encode_ds_mla(io.cache + (s / io.B) * io.B * io.token_bytes, io.B, s % io.B, io.k + t * KD, o.kind,
                      o.fp8_max, bug);
    }
    return DSV4_OK;
}

/* ---- quantize_and_insert_k_cache ---- */

int mut_kv_insert_scale_floor(mut_call *m) { return insert_with_bug(m, BUG_SCALE_FLOOR); }
int mut_kv_insert_half_away(mut_call *m) { return insert_with_bug(m, BUG_HALF_AWAY); }
int mut_kv_insert_row_major_584(mut_call *m) { return insert_with_bug(m, BUG_ROW_MAJOR); }

/* use_fnuz = 1 with the OCP cast: FP8MAX 224 right, the codes e4m3fn. */
int mut_kv_insert_fnuz_as_ocp(mut_call *m)
{
    insert_io io;
    int rc = insert_io_of(m, &io);
    if (rc)
        return rc;
    dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(1);
    o.kind = DSV4_FP8_E4M3FN;
    const dsv4_kv_layout L = {io.B, io.nb, 0};
    return dsv4_ref_quantize_and_insert_k_cache(io.k, io.T, io.slots->dtype == DSV4_I64 ? io.slots->data : NULL,
                                                io.slots->dtype == DSV4_I32 ? io.slots->data : NULL, io.cache, &L,
                                                &o, m->st);
}

/* Slot -1 taken as a Python index: the padding token lands in the cache's
 * last slot (a spare page another request may own). */
int mut_kv_insert_slot_minus1_written(mut_call *m)
{
    int rc = mut_run_reference(m);
    insert_io io;
    if (rc || (rc = insert_io_of(m, &io)))
        return rc;
    const dsv4_kv_encode_opts o = dsv4_kv_encode_opts_default(mut_int(m, "use_fnuz") != 0);
    float x[KD];
    for (int64_t t = 0; t < io.T; t++)
        if (slot_of(&io, t) == -1) {
            token_f32(io.k + t * KD, x);
            dsv4_kv_encode_token(io.cache + (io.nb - 1) * io.B * io.token_bytes, io.B, io.B - 1, x, &o, NULL);
        }
    return DSV4_OK;
}

/* The scale row's pad byte (byte 7) is not written: it keeps whatever the
 * page held. */
int mut_kv_insert_pad_not_written(mut_call *m)
{
    int rc = mut_run_reference(m);
    insert_io io;
    dsv4_tensor *before;
    if (rc || (rc = insert_io_of(m, &io)) || (rc = mut_need(m, &m->in, "k_cache", &before)))
        return rc;
    for (int64_t t = 0; t < io.T; t++) {
        const int64_t s = slot_of(&io, t);
        if (s < 0)
            continue;
        const int64_t off = (s / io.B) * io.B * io.token_bytes + dsv4_kv_scale_offset(io.B, s % io.B) + 7;
        io.cache[off] = ((const uint8_t *)before->data)[off];
    }
    return DSV4_OK;
}

/* Where token t of a v41 insert lands: its data bytes (data_bytes a token,
 * the page's tokens first) and, into *scales, its scale bytes (scale_bytes
 * a token, after the data); NULL for a skipped token. */
static uint8_t *v41_token(const insert_io *io, int64_t t, int64_t data_bytes, int64_t scale_bytes, uint8_t **scales)
{
    const int64_t s = slot_of(io, t);
    if (s < 0)
        return NULL;
    uint8_t *page = io->cache + (s / io->B) * io->B * io->token_bytes;
    *scales = page + io->B * data_bytes + (s % io->B) * scale_bytes;
    return page + (s % io->B) * data_bytes;
}

/* The tokens of a v41 insert that have a slot, one by one: v41_next moves
 * to the next (0 after the last) and sets its bytes, as v41_token, and its
 * K row as f32. Start with t = -1. */
typedef struct {
    const insert_io *io;
    int64_t data_bytes, scale_bytes, t;
    uint8_t *data, *scales;
    float x[KD];
} v41_walk;

static int v41_next(v41_walk *w)
{
    while (++w->t < w->io->T) {
        w->data = v41_token(w->io, w->t, w->data_bytes, w->scale_bytes, &w->scales);
        if (w->data) {
            token_f32(w->io->k + w->t * KD, w->x);
            return 1;
        }
    }
    return 0;
}

/* format=v41_fp4: the e4m3 tile scale truncated (toward zero) instead of
 * RNE; values then divided by that scale and RNE'd to e2m1 as specified. */
int mut_kv41_fp4_scale_truncated(mut_call *m)
{
    insert_io io;
    int rc = insert_io_of(m, &io);
    if (rc)
        return rc;
    const int64_t T16 = DSV4_KV41_FP4_TILE;
    v41_walk w = {.io = &io, .data_bytes = 256, .scale_bytes = 32, .t = -1};
    while (v41_next(&w)) {
        uint8_t codes[KD];
        for (int tile = 0; tile < KD / T16; tile++) {
            float amax = 0;
            for (int i = 0; i < T16; i++)
                amax = fmaxf(amax, fabsf(w.x[tile * T16 + i]));
            float sc = amax / 6.0f;
            sc = sc < 0.001953125f ? 0.001953125f : sc > 448.0f ? 448.0f : sc;
            uint8_t b = dsv4_fp8_from_f32(sc, DSV4_FP8_E4M3FN, 1);
            if (dsv4_fp8_to_f32(b, DSV4_FP8_E4M3FN) > sc)
                b--; /* the bug: round toward zero */
            w.scales[tile] = b;
            const float sf = dsv4_fp8_to_f32(b, DSV4_FP8_E4M3FN);
            for (int i = 0; i < T16; i++)
                codes[tile * T16 + i] = dsv4_e2m1_from_f32(w.x[tile * T16 + i] / sf);
        }
        for (int j = 0; j < KD / 2; j++)
            w.data[j] = dsv4_e2m1_pack(codes[2 * j], codes[2 * j + 1]);
    }
    return DSV4_OK;
}

/* format=v41_fp8: the UE8M0 scale taken from the amax of 64 lanes (the V4
 * block) where V4.1 scales each 32-tile. */
int mut_kv41_fp8_scale_per_64(mut_call *m)
{
    int rc = mut_run_reference(m);
    insert_io io;
    if (rc || (rc = insert_io_of(m, &io)))
        return rc;
    const int64_t T32 = DSV4_KV41_FP8_TILE;
    v41_walk w = {.io = &io, .data_bytes = 512, .scale_bytes = 16, .t = -1};
    while (v41_next(&w)) {
        for (int tile = 0; tile < KD / T32; tile++) {
            float amax = 0;
            for (int i = 0; i < 2 * T32; i++)
                amax = fmaxf(amax, fabsf(w.x[(tile & ~1) * T32 + i]));
            const uint8_t b = dsv4_kv41_fp8_scale_byte(amax);
            w.scales[tile] = b;
            const float inv = (float)ldexp(1.0, 127 - (int)b);
            for (int i = 0; i < T32; i++) {
                float q = w.x[tile * T32 + i] * inv;
                q = q > 448.0f ? 448.0f : q < -448.0f ? -448.0f : q;
                w.data[tile * T32 + i] = dsv4_fp8_from_f32(q, DSV4_FP8_E4M3FN, 1);
            }
        }
    }
    return DSV4_OK;
}

/* ---- dequantize_and_gather_k_cache ---- */

/* use_fnuz = 1 decoded as OCP e4m3fn (every NoPE value off by 2x). */
int mut_kv_gather_fnuz_as_ocp(mut_call *m)
{
    return mut_run_reference_with_int(m, "use_fnuz", 0);
}

/* invalid_block=skip computed as the zero-filling port. */
int mut_kv_gather_skip_as_zero(mut_call *m)
{
    return mut_run_reference_as(m, "invalid_block=zero");
}

/* Rows written one too far down the workspace (offset + 1). */
int mut_kv_gather_offset_off1(mut_call *m)
{
    return mut_run_reference_with_int(m, "offset", mut_int(m, "offset") + 1);
}

/* The first G positions gathered instead of the last G (start 0, not
 * S - G). */
int mut_kv_gather_from_start(mut_call *m)
{
    dsv4_tensor *seq, *gat = mut_in(m, "gather_lens");
    int rc = mut_need(m, &m->in, "seq_lens", &seq);
    if (rc)
        return rc;
    if (gat && mut_int(m, "has_gather_lens"))
        memcpy(seq->data, gat->data, seq->nbytes);
    return mut_run_reference(m);
}

/* format=v41_fp4: the even dim read from the high nibble. */
static int plant_kv41_fp4_nibbles_swapped(mut_call *m, dsv4_tensor *kc)
{
    (void)m;
    const int64_t nb = kc->shape[0], B = kc->shape[1], DB = 256;
    uint8_t *c = kc->data;
    for (int64_t p = 0; p < nb; p++)
        for (int64_t i = 0; i < B * DB; i++) {
            uint8_t *b = c + p * B * kc->shape[2] + i;
            *b = (uint8_t)((*b >> 4) | (*b << 4));
        }
    return DSV4_OK;
}
int mut_kv41_fp4_nibbles_swapped(mut_call *m)
{
    return mut_run_reference_on(m, "k_cache", plant_kv41_fp4_nibbles_swapped);
}

/* format=v41_fp8: tile t decoded with the scale of tile t & ~1 (a 64-lane
 * scale stride). */
static int plant_kv41_fp8_scale_stride_64(mut_call *m, dsv4_tensor *kc)
{
    (void)m;
    const int64_t nb = kc->shape[0], B = kc->shape[1], DB = 512, SB = 16;
    uint8_t *c = kc->data;
    for (int64_t p = 0; p < nb; p++)
        for (int64_t r = 0; r < B; r++) {
            uint8_t *s = c + p * B * kc->shape[2] + B * DB + r * SB;
            for (int t = 1; t < SB; t += 2)
                s[t] = s[t - 1];
        }
    return DSV4_OK;
}
int mut_kv41_fp8_scale_stride_64(mut_call *m)
{
    return mut_run_reference_on(m, "k_cache", plant_kv41_fp8_scale_stride_64);
}
