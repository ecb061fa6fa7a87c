/* v41.h - the DeepSeek V4.1 ROCm attention layer as a chain
 * (v41_attention_layer.c wires it, v41_gen.c generates its primary
 * tensors; docs/semantics/chain.md). */
#ifndef DSV4_CHAIN_V41_H
#define DSV4_CHAIN_V41_H

#include "../../harness/chain.h"
#include "../ops.h"

#define V41_HEAD_DIM 512   /* head_dim = 448 NoPE + 64 RoPE (docs/semantics/README.md A12) */
#define V41_SWA_BLOCK 64   /* DeepseekV4SWACache.block_size (docs/semantics/kvcache.md A2.1) */
#define V41_MLA_BLOCK 256  /* logical tokens per compressed-cache block: B = 256 / c */
#define V41_IDX_DIM 128    /* index head dim */
#define V41_IDX_PAGE 64    /* index-cache entries per page (256 / 4) */
#define V41_CHUNK 4        /* PREFILL_CHUNK_SIZE: workspace slabs */

/* One configuration, from the chain's completed params. */
typedef struct v41_cfg {
    int64_t R, T;                      /* requests, tokens */
    int64_t n_dec, T_dec, n_pf, T_pf;  /* decodes first (query_len 1), then prefills */
    int64_t qlen[DSV4_PARAM_LIST_MAX], pre[DSV4_PARAM_LIST_MAX], S[DSV4_PARAM_LIST_MAX];
    int64_t max_S;
    int64_t c;                         /* compress ratio: 0 (SWA-only), 4, 128 */
    int64_t D, H, n1, G, Ro, Dg;       /* hidden, heads, q_lora_rank, o_groups, o_lora_rank, H*512/G */
    int64_t IH, itopk;                 /* index heads, index top-k (C4) */
    int64_t W, mml, mnbt, N, M;        /* window, max_model_len, max_num_batched_tokens,
                                          ceil(mml / c) (0 SWA-only), N + W + mnbt */
    int64_t K;                         /* top-k width the attention reads: itopk (C4), Wc (C128), 0 */
    int64_t Bc, coff, Bs;              /* compressed page, compressor overlap, state page */
    int mxfp8, fused_inv_rope;
    double rope_theta, eps;
    const char *accum;                 /* gemm ref_accum */
} v41_cfg;

int v41_cfg_of(const dsv4_params *ps, v41_cfg *g, dsv4_status *st);

/* The primary tensors into the pool (v41_gen.c). */
int v41_generate(dsv4_chain *x, const dsv4_params *ps, uint64_t seed);

#endif
