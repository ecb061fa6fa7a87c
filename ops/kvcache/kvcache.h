/* kvcache.h - what the two cache ops (ops/kvcache/<op>.c) share
 * (ops/kvcache/kvcache_common.c): the sources, the K-row generators, the
 * cache poison, the k_cache input check and the shuffled page ids. */
#ifndef DSV4_OPS_KVCACHE_H
#define DSV4_OPS_KVCACHE_H

#include "../../ref/kvcache.h"
#include "../../ref/numerics.h"
#include "../ops.h"

#define DSV4_KV_S1_SRC \
    "vllm-project/vllm:vllm/models/deepseek_v4/common/ops/cache_utils.py@03dc564956172b5b2835be7a84ddde5de1d5dba6"
#define DSV4_KV_S22_SRC \
    "vllm-project/vllm:vllm/models/deepseek_v4_1/common/ops/kv_formats_v41.py@0a58229d4cfff7476cec7b665b44a2e0e414021d"

/* One token's 512 bf16-representable values (as floats) whose 64-blocks
 * exercise the fp8_ds_mla scale rule. */
void dsv4_kvgen_token(dsv4_rng *rng, float *x);
/* One V4.1 row (bf16 bits) whose tiles exercise format f's scale rule. */
void dsv4_kvgen_row41(dsv4_rng *rng, uint16_t *k, dsv4_kv_format f);

/* Poison every byte of a cache of nb pages of B tokens in format f, so that
 * reading a slot nothing wrote is caught. */
void dsv4_kvcache_poison(uint8_t *c, int64_t nb, int64_t B, int use_fnuz, dsv4_kv_format f);
/* The input k_cache [num_blocks, B, token bytes of f], or fail naming it. */
int dsv4_kvcache_input(const dsv4_tensors *in, int64_t B, dsv4_kv_format f, const dsv4_tensor **kc,
                       dsv4_status *st);
/* nb page ids 0..nb-1 in random order (malloc'd; NULL: out of memory). */
int32_t *dsv4_kvcache_shuffled_pages(dsv4_rng *rng, int64_t nb);

/* Rows several kvcache ops declare alike (schema syntax: harness/op.h). */
#define DSV4_KV_BLOCK_SIZE_PARAM \
    "    block_size         int   = 64   tokens per cache page B (64 SWA / C4, 2 for C128)\n"

#endif
