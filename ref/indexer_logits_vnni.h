/* indexer_logits_vnni.h - the ideal MXFP4 indexer logits on AVX-512 VNNI
 * integer dots (private to ref/indexer_logits.c).
 *
 * The ideal's per-head score is the exact q . k: four 32-element blocks,
 * each an integer sum of (2q)(2k) code products times a power of two, the
 * blocks added in double as (b0 + b1) + (b2 + b3) (docs/semantics/indexer.md
 * Q6.2 step 1; the ideal of ref/indexer.h).  Here each block's integer sum
 * comes from vpdpbusd over 16 keys at a time, and the rest is the same
 * double arithmetic in the same order, so every logit is the bits of the
 * scalar ideal: the integer sums are exact whatever their order, and the
 * products by powers of two are exact in double (the smallest, 2^-256, is
 * normal).  A 0xFF scale makes its factor NaN, as the scalar rule's NaN.
 *
 * Layout (16-key groups, lane j = key 16g + j): a code dword of a key is
 * 8 elements; its low nibbles (elements 8t, 8t+2, 8t+4, 8t+6) and its high
 * nibbles (8t+1, ...) become two byte dwords, expanded index 2t (low) and
 * 2t + 1 (high), so block b is expanded dwords 8b..8b+7.  The q row-head is
 * expanded in the same element order (a dot over 4 bytes does not care
 * which 4 elements, only that both sides agree).  Keys carry 2k + 12 as
 * unsigned bytes (vpdpbusd multiplies u8 by s8), and each q block the
 * correction 12 * sum(2q). */
#ifndef DSV4_REF_INDEXER_LOGITS_VNNI_H
#define DSV4_REF_INDEXER_LOGITS_VNNI_H

#include <stdint.h>

/* 1 when the kernel may run: compiled in, the CPU has AVX-512F/BW/VNNI, and
 * dsv4_simd_level() is DSV4_SIMD_AVX512 (DSV4_SIMD=0 and the test caps turn
 * it off). */
int dsv4_idx_vnni_ready(void);

enum { DSV4_IDX_VNNI_DWORDS = 32 /* expanded dwords per 128-element row */ };

/* A tile's keys, packed (buffers sized by dsv4_idx_vnni_keys_alloc). */
typedef struct dsv4_idx_vnni_keys {
    int64_t cap_groups;
    uint8_t *codes;  /* [group][32 dwords][16 lanes][4 bytes]: 2k + 12 */
    double *scale;   /* [group][4 blocks][16 lanes]: 2^(e - 129), NaN for 0xFF */
} dsv4_idx_vnni_keys;

/* The q side of a row block (M row-heads). */
typedef struct dsv4_idx_vnni_q {
    int64_t cap_rows;
    int32_t *codes;  /* [M][32]: the expanded dwords of 2q (s8 bytes) */
    int32_t *corr;   /* [M][4]: 12 * the block's sum of 2q */
    double *scale;   /* [M][4]: 2^(e - 127), NaN for 0xFF */
} dsv4_idx_vnni_q;

int dsv4_idx_vnni_keys_alloc(dsv4_idx_vnni_keys *k, int64_t max_keys);
void dsv4_idx_vnni_keys_free(dsv4_idx_vnni_keys *k);
int dsv4_idx_vnni_q_alloc(dsv4_idx_vnni_q *q, int64_t max_rows);
void dsv4_idx_vnni_q_free(dsv4_idx_vnni_q *q);

/* Packs n <= 16 keys as group g: their codes v [n][64] (two e2m1 per byte,
 * low nibble first; 64 * n readable bytes), scale bytes s [n][4]. */
void dsv4_idx_vnni_pack_group(const uint8_t *v, const uint8_t *s, int n, dsv4_idx_vnni_keys *k, int64_t g);

/* Packs M row-heads of q (the same byte layout). */
void dsv4_idx_vnni_pack_q(const uint8_t *v, const uint8_t *s, int64_t M, dsv4_idx_vnni_q *q);

/* out[j] = sum_h relu(s_hj) * w[h] in double, h = 0..H-1 (the scalar
 * ideal's order and operations), for the n keys of k, with row-heads
 * rh0..rh0+H-1 of q. */
void dsv4_idx_vnni_row(const dsv4_idx_vnni_q *q, int64_t rh0, int H, const float *w, const dsv4_idx_vnni_keys *k,
                       int64_t n, double *out);

#endif
