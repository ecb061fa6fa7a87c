/* mx_avx2.h - the MXFP4 block of the AVX2 paths (simd.h) for callers that
 * build their blocks in registers (the indexer's Q quant, the inverse RoPE).  Private to
 * ref/ and ops/. */
#ifndef DSV4_MX_AVX2_H
#define DSV4_MX_AVX2_H

#include "codec_avx2.h"
#include "mx.h"

/* Builds the scale rules' table: once before the block functions below
 * (the other entry points of mx.h do it themselves). */
void dsv4_mx_prepare(void);

#if DSV4_HAVE_AVX2_PATHS
/* dsv4_mx_quant_block_fp4 of the 32 fp32 lanes v[0..3], the codes packed
 * two a byte (dsv4_e2m1_pack order) into packed[0..15]: the scale byte. */
DSV4_AVX2 uint8_t dsv4_mx_fp4_block_avx2(const __m256 v[4], dsv4_mx_rule rule, dsv4_mx_elem elem,
                                         uint8_t *packed);

/* n blocks of 32 fp32 lanes in a row at x, each as
 * dsv4_mx_quant_block_fp4 / dsv4_mx_quant_block_fp8 gives it: block k's
 * codes at packed + 16 k (two a byte, dsv4_e2m1_pack order) or codes + 32 k,
 * its scale byte into scales[k]; sixteen blocks at a time (their scale
 * rules in one vector, the codes sixteen lanes at a time).  For callers
 * that have checked dsv4_simd_level() >= DSV4_SIMD_AVX512. */
__attribute__((target("avx512f,avx2,fma"))) void dsv4_mx_fp4_blocks_512(const float *x, int64_t n, dsv4_mx_rule rule,
                                                                       dsv4_mx_elem elem, uint8_t *packed,
                                                                       uint8_t *scales);
__attribute__((target("avx512f,avx2,fma"))) void dsv4_mx_fp8_blocks_512(const float *x, int64_t n, dsv4_mx_rule rule,
                                                                       uint8_t *codes, uint8_t *scales);

/* dsv4_mx_quant_block_fp8 of the 32 lanes v[0..3] (an MXFP8 rule): the
 * codes into codes[0..31], the scale byte returned. */
DSV4_AVX2 uint8_t dsv4_mx_fp8_block_avx2(const __m256 v[4], dsv4_mx_rule rule, uint8_t *codes);
#endif
#endif
