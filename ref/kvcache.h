/* kvcache.h - the V4 `fp8_ds_mla` paged KV cache (584 bytes per token),
 * docs/semantics/kvcache.md A2.1-A2.3 (format, encoding, OCP/FNUZ) and A4
 * (gather).  Bit-exact encode and decode of one token, slot -> (page, row),
 * and the two cache ops quantize_and_insert_k_cache and
 * dequantize_and_gather_k_cache.  Plain arrays; no allocation.
 *
 * Page layout (B tokens per page, docs/semantics/kvcache.md A2.1 [S1, S15, S19]) - NOT B rows of
 * 584 bytes:
 *   [0, B*576)              token i's 576-byte record at i*576:
 *                             [0, 448)   e4m3 NoPE values, dims 0..447
 *                             [448, 576) 64 little-endian bf16, dims 448..511
 *   [B*576, B*576 + B*8)    token i's 8 scale bytes at B*576 + i*8:
 *                             bytes 0..6 UE8M0 exponents of dims 64k..64k+63
 *                             byte 7 pad, written 0
 *   Page p starts at p * page_stride (k_cache.stride(0); default B*584). */
#ifndef DSV4_KVCACHE_H
#define DSV4_KVCACHE_H

#include <stdint.h>

#include "numerics.h"
#include "status.h"

#define DSV4_KV_HEAD_DIM 512   /* nope 448 + rope 64 (docs/semantics/numerics.md A1) */
#define DSV4_KV_NOPE_DIM 448
#define DSV4_KV_ROPE_DIM 64
#define DSV4_KV_QBLOCK 64      /* dims per UE8M0 scale */
#define DSV4_KV_NQBLOCKS 7     /* 448 / 64 */
#define DSV4_KV_DATA_BYTES 576 /* 448 fp8 + 64 bf16 */
#define DSV4_KV_SCALE_BYTES 8  /* 7 scales + 1 pad */
#define DSV4_KV_TOKEN_BYTES 584
#define DSV4_KV_AMAX_FLOOR 1e-4f /* fmaxf(amax, 1e-4) [S1, S15] */

/* Encoder settings.  dsv4_kv_encode_opts_default gives the seeds': OCP with
 * FP8MAX 448 (every platform for the C++ SWA encoder [S15], the Triton
 * compressor [S19], Triton insert by default [S1]), or with use_fnuz the
 * Triton insert's FNUZ path: e4m3fnuz with FP8MAX 224 (vLLM get_fp8_min_max)
 * [S1]; scale bytes clamped to [0, 255]. */
typedef struct dsv4_kv_encode_opts {
    dsv4_fp8_kind kind; /* value encoding */
    float fp8_max;      /* FP8MAX of the scale rule and the clamp */
    int scale_max;      /* largest scale byte: 255, or 254 (gfx950 compressor [S19]) */
} dsv4_kv_encode_opts;

dsv4_kv_encode_opts dsv4_kv_encode_opts_default(int use_fnuz);

/* The cache geometry.  page_stride 0 means B * 584. */
typedef struct dsv4_kv_layout {
    int64_t block_size;  /* B, tokens per page (64 SWA / C4, 2 for C128) */
    int64_t num_blocks;  /* pages */
    int64_t page_stride; /* bytes between pages, >= B*584; 0 = B*584 */
} dsv4_kv_layout;

/* The scale exponent, exactly: the smallest integer e with
 * 2^e * fp8_max >= max(amax, 1e-4) (docs/semantics/kvcache.md A2.2; the GPU's
 * ceil(log2(a / FP8MAX)) without log2's rounding).  amax finite, >= 0. */
int dsv4_kv_scale_exponent(float amax, float fp8_max);
/* clamp(e + 127, 0, scale_max) (docs/semantics/kvcache.md A2.2 [S1]). */
uint8_t dsv4_kv_scale_byte(float amax, const dsv4_kv_encode_opts *o);

/* Byte offsets inside a page of B tokens (docs/semantics/kvcache.md A2.1). */
static inline int64_t dsv4_kv_value_offset(int64_t row) { return row * DSV4_KV_DATA_BYTES; }
static inline int64_t dsv4_kv_rope_offset(int64_t row)
{
    return row * DSV4_KV_DATA_BYTES + DSV4_KV_NOPE_DIM;
}
static inline int64_t dsv4_kv_scale_offset(int64_t B, int64_t row)
{
    return B * DSV4_KV_DATA_BYTES + row * DSV4_KV_SCALE_BYTES;
}

/* Encodes one token's 512 values into row `row` of `page` (B tokens).  x
 * holds fp32 values; each is first rounded to bf16 (RNE) - the identity for
 * the Triton insert's bf16 k, and the compressor's bf16(n) step [S19].
 * NoPE: per 64-block scale byte and e4m3 codes q = fp8(clamp(x*2^-e,
 * -FP8MAX, FP8MAX)) RNE; RoPE: the bf16 values; pad byte 0 (docs/semantics/kvcache.md A2.2).
 * Only the token's 584 bytes are written.  NaN/Inf in x -> DSV4_EINPUT. */
int dsv4_kv_encode_token(uint8_t *page, int64_t B, int64_t row, const float *x,
                         const dsv4_kv_encode_opts *o, dsv4_status *st);

/* Decodes one token (docs/semantics/kvcache.md A4): dims < 448 = fp8(byte) * 2^(scale - 127)
 * computed in fp32 (exact for every scale byte >= 105, the encoders'
 * range) and rounded to bf16 RNE; dims 448..511 the stored bf16 bits.
 * kind: OCP or FNUZ decode (use_fnuz, docs/semantics/kvcache.md A2.3). */
void dsv4_kv_decode_token_bf16(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind,
                               uint16_t *out /* [512] */);
/* The same bf16 values as fp32 (exact), for the attention's key rows. */
void dsv4_kv_decode_token_bf16_f32(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind, float *out);
void dsv4_kv_decode_token_f32(const uint8_t *page, int64_t B, int64_t row, dsv4_fp8_kind kind,
                              float *out /* [512] */);

/* Slot -> (page, row) = (slot // B, slot % B) (docs/semantics/kvcache.md A2.1;
 * docs/semantics/indices.md A5.1).  Returns 0
 * for a negative slot (skipped, not written), 1 for a slot inside the
 * cache, DSV4_EINPUT (< 0) when slot >= num_blocks * B. */
int dsv4_kv_slot(int64_t slot, const dsv4_kv_layout *L, int64_t *page, int64_t *row);

/* quantize_and_insert_k_cache(k, k_cache, slot_mapping, block_size,
 * use_fnuz) [S1]: token t < T with slot >= 0 is encoded into its slot;
 * every other cache byte is left as it was.  k [>= T rows, 512] bf16 bits
 * (with DP padding k may have more rows than slot_mapping [S1]); exactly
 * one of slots64 / slots32 is non-NULL.  Slots >= num_blocks*B, duplicated
 * slots and non-finite k rows of inserted tokens are DSV4_EINPUT (checked
 * before anything is written). */
int dsv4_ref_quantize_and_insert_k_cache(const uint16_t *k, int64_t T, const int64_t *slots64,
                                         const int32_t *slots32, uint8_t *k_cache,
                                         const dsv4_kv_layout *L, const dsv4_kv_encode_opts *o,
                                         dsv4_status *st);

/* What the gather does with a block-table entry outside [0, num_blocks)
 * (docs/semantics/kvcache.md A4). */
typedef enum dsv4_gather_invalid {
    DSV4_GATHER_INVALID_ERROR = 0, /* Triton [S1]: no check; bad input here */
    DSV4_GATHER_INVALID_SKIP,      /* MUSA [S7]: the row is left untouched */
    DSV4_GATHER_INVALID_ZERO,      /* third-party Triton [S8]: the row is zeroed */
} dsv4_gather_invalid;

typedef struct dsv4_gather_args {
    uint16_t *out;             /* [R, Wout, 512] bf16, in/out */
    int64_t R, Wout;
    const uint8_t *k_cache;
    dsv4_kv_layout L;
    const int32_t *seq_lens;    /* [R] */
    const int32_t *gather_lens; /* [R] or NULL: G = S */
    const int32_t *block_table; /* [R, maxb] */
    int64_t maxb;
    int64_t offset;
    int use_fnuz;
} dsv4_gather_args;

/* Checks what the gather needs to be defined: 0 <= G <= S, offset >= 0,
 * offset + G <= Wout, (S - 1) // B < maxb for G > 0, and (INVALID_ERROR)
 * every block-table entry the gather reads inside [0, num_blocks). */
int dsv4_gather_check(const dsv4_gather_args *a, dsv4_gather_invalid inv, dsv4_status *st);

/* dequantize_and_gather_k_cache [S1]: for each request r and i < G,
 * pos = S - G + i, page = block_table[r, pos // B], row = pos % B:
 * out[r, offset + i, :] = the decoded token.  Other rows are untouched.
 * Calls dsv4_gather_check first. */
int dsv4_ref_dequantize_and_gather_k_cache(const dsv4_gather_args *a, dsv4_gather_invalid inv,
                                           dsv4_status *st);

/* ------------------------------------------------------------------ */
/* V4.1 FlashMLA formats (docs/semantics/kvcache.md A2.4 [S22] =
 * vllm-project/vllm:vllm/models/deepseek_v4_1/common/ops/kv_formats_v41.py
 * @0a58229d4cfff7476cec7b665b44a2e0e414021d).  A page of B tokens holds B
 * data rows, then B scale rows [S22]:
 *   v41_fp8 (528 B/token): data row i at i*512 = 512 e4m3fn codes (RoPE dims
 *     quantized too), scale row i at B*512 + i*16 = 16 UE8M0 bytes, one per
 *     32-dim tile.
 *   v41_fp4 (288 B/token): data row i at i*256 = 512 e2m1 codes, two per
 *     byte, even dim in the low nibble; scale row i at B*256 + i*32 = 32
 *     e4m3fn bytes, one per 16-dim tile.
 * The insert kernels of [S22] (rope_v41_fp8_insert / rope_v41_fp4_insert)
 * first apply GPT-J RoPE at (pos // c)*c and round the row to bf16; that
 * step is the caller's part here (ref/rope.h): these ops take the bf16 row
 * the quantizer sees, so k is the post-RoPE bf16 latent. */
typedef enum dsv4_kv_format {
    DSV4_KV_FMT_DS_MLA = 0, /* V4 fp8_ds_mla, 584 B (docs/semantics/kvcache.md A2.1) */
    DSV4_KV_FMT_V41_FP8,    /* 528 B (docs/semantics/kvcache.md A2.4) */
    DSV4_KV_FMT_V41_FP4,    /* 288 B (docs/semantics/kvcache.md A2.4) */
} dsv4_kv_format;

#define DSV4_KV41_FP8_TOKEN_BYTES 528 /* V41_FP8_BYTES [S22] */
#define DSV4_KV41_FP4_TOKEN_BYTES 288 /* V41_FP4_BYTES [S22] */
#define DSV4_KV41_FP8_TILE 32         /* 16 tiles of 32 [S22] */
#define DSV4_KV41_FP4_TILE 16         /* 32 tiles of 16 [S22] */

/* 584, 528 or 288. */
int64_t dsv4_kv_format_token_bytes(dsv4_kv_format f);
/* Data-row bytes (576 / 512 / 256), scale-row bytes (8 / 16 / 32). */
int64_t dsv4_kv_format_data_bytes(dsv4_kv_format f);
int64_t dsv4_kv_format_scale_bytes(dsv4_kv_format f);
/* Values per scale (64 / 32 / 16). */
int dsv4_kv_format_tile(dsv4_kv_format f);
/* L->page_stride, or B * token bytes when 0. */
int64_t dsv4_kv_format_page_stride(const dsv4_kv_layout *L, dsv4_kv_format f);

/* v41_fp8 scale byte of a 32-tile with amax (finite, >= 0), as the kernel
 * computes it [S22]: s = max(fl32(amax * fl32(1/448)), fl32(1e-4)), e =
 * ceil(log2 s) read from the fp32 bits (biased exponent - 127, + 1 when the
 * mantissa is non-zero), byte = e + 127 (in [114, 247] for bf16 amax). */
uint8_t dsv4_kv41_fp8_scale_byte(float amax);
/* v41_fp4 e4m3fn scale byte of a 16-tile [S22]: fp8(clamp(fl32(amax / 6),
 * 2^-9, 448)) RNE; amax / 6 an IEEE fp32 division. */
uint8_t dsv4_kv41_fp4_scale_byte(float amax);

/* Encodes one bf16 row (bits, finite) into row `row` of a v41 page of B
 * tokens; only that token's data and scale rows are written.  fp8: q =
 * clamp(x * 2^-e, +-448) -> e4m3fn RNE.  fp4: q = fl32(x / scale) (IEEE
 * division, div_rn [S22]) -> e2m1 RNE saturating to +-6, sign kept
 * (cvt.rn.satfinite.e2m1x2.f32 of fused_indexer_q._fp32x2_to_fp4x2). */
void dsv4_kv41_encode_token(uint8_t *page, int64_t B, int64_t row, const uint16_t *k,
                            dsv4_kv_format f);
/* Decodes one v41 token to bf16 (docs/semantics/kvcache.md A4, [S22] _v41_gather_kernel):
 * fl32(value * scale) rounded to bf16 RNE.  Exact for every written byte:
 * fp8: 4 significant bits x 2^(b-127), b in [114, 247]; fp4: e2m1 (2 bits)
 * x e4m3 (4 bits) = at most 6 significant bits in [2^-10, 2688]. */
void dsv4_kv41_decode_token_bf16(const uint8_t *page, int64_t B, int64_t row, dsv4_kv_format f,
                                 uint16_t *out /* [512] */);

/* quantize_and_insert_k_cache in format f (DS_MLA: the function above with
 * o).  For the v41 formats every negative slot is skipped (`if slot < 0:
 * return` [S22]); o is unused there. */
int dsv4_ref_quantize_and_insert_k_cache_fmt(const uint16_t *k, int64_t T, const int64_t *slots64,
                                             const int32_t *slots32, uint8_t *k_cache,
                                             const dsv4_kv_layout *L, dsv4_kv_format f,
                                             const dsv4_kv_encode_opts *o, dsv4_status *st);
/* dsv4_gather_check / the gather in format f; the v41 gather is Triton
 * (gather_dequant_v41 [S22]), so inv must be DSV4_GATHER_INVALID_ERROR and
 * use_fnuz 0 for those formats. */
int dsv4_gather_check_fmt(const dsv4_gather_args *a, dsv4_gather_invalid inv, dsv4_kv_format f,
                          dsv4_status *st);
int dsv4_ref_dequantize_and_gather_k_cache_fmt(const dsv4_gather_args *a, dsv4_gather_invalid inv,
                                               dsv4_kv_format f, dsv4_status *st);

#endif
