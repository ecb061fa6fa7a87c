/* bench.c - benchmark table and machine-peak measurements. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ops/ops.h"
#include "../ref/parallel.h"
#include "runner.h"

typedef struct bench_case {
    const char *name;
    const char *op;
    const char *params[16]; /* "name=value" in the op's parameter syntax */
    /* Floating-point operations of one run (0: memory-bound op). */
    double (*flops)(const dsv4_params *ps, const dsv4_tensors *in);
    int vs_dgemm; /* 1: % peak against dgemm (a double-precision reference) */
} bench_case;

/* Attention: 2 GEMMs of 2*H*512 flops per valid key (ops_attention.c). */
static double attn_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    (void)ps;
    const dsv4_tensor *q = dsv4_tensors_get(in, "q"), *len = dsv4_tensors_get(in, "topk_length");
    const dsv4_tensor *idx = dsv4_tensors_get(in, "indices"), *kv = dsv4_tensors_get(in, "kv");
    if (!q || !len || !idx || !kv)
        return 0;
    double keys = 0;
    const int64_t P = idx->shape[2];
    for (int64_t t = 0; t < q->shape[0]; t++) {
        int64_t n = ((const int32_t *)len->data)[t];
        for (int64_t j = 0; j < n && j < P; j++) {
            int32_t v = ((const int32_t *)idx->data)[t * P + j];
            keys += v >= 0 && v < kv->shape[0];
        }
    }
    return keys * 4.0 * (double)q->shape[1] * 512.0;
}

/* The same count over the ragged lists of the paged decode form. */
static double paged_attn_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    const char *cn[2] = {"swa_k_cache", "kv_cache"}, *xn[2] = {"swa_ragged_indices", "topk_ragged_indices"};
    const dsv4_tensor *q = dsv4_tensors_get(in, "q");
    double keys = 0;
    for (int k = 0; q && k < (dsv4_params_int(ps, "swa_only") ? 1 : 2); k++) {
        const dsv4_tensor *c = dsv4_tensors_get(in, cn[k]), *x = dsv4_tensors_get(in, xn[k]);
        if (!c || !x)
            return 0;
        for (int64_t j = 0; j < x->shape[0]; j++) {
            int32_t v = ((const int32_t *)x->data)[j];
            keys += v >= 0 && v < c->shape[0] * c->shape[1];
        }
    }
    return q ? keys * 4.0 * (double)q->shape[1] * 512.0 : 0;
}

/* 2 M N K: the block-scaled GEMM's multiply-adds. */
static double gemm_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    (void)in;
    return 2.0 * (double)dsv4_params_int(ps, "M") * (double)dsv4_params_int(ps, "N") * (double)dsv4_params_int(ps, "K");
}

/* 2 T G R K: the MXFP8 wo_a bmm's multiply-adds. */
static double bmm_flops(const dsv4_params *ps, const dsv4_tensors *in)
{
    (void)in;
    return 2.0 * (double)dsv4_params_int(ps, "num_tokens") * (double)dsv4_params_int(ps, "n_local_groups") *
           (double)dsv4_params_int(ps, "o_lora_rank") * (double)dsv4_params_int(ps, "K");
}

/* Request shapes several rows share: the V4.1 prefill step below (4 x 2048
 * tokens after a 30000-token prefix), and a decode step of 64 one-token
 * requests, each over a 65536-token sequence where the op takes seq_lens. */
#define PREFILL_8192_LENS "query_lens=[2048,2048,2048,2048]", "prefix_lens=[30000,30000,30000,30000]"
#define DECODE_64_QUERY_LENS                                                       \
    "query_lens=[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1," \
    "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"
#define DECODE_64_SEQ_LENS                                                                                       \
    "seq_lens=[65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536," \
    "65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,"           \
    "65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,"           \
    "65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536,65536]"

/* The production shape of a V4.1 prefill step: 4 requests x 2048 tokens
 * after a 30000-token prefix, window 128, ratio 4, topk 2048. */
static const bench_case bench_table[] = {
    {"combine_prefill_8192", "combine_topk_swa_indices",
     {"window_size=128", "compress_ratio=4", "topk=2048", PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* The same 8192 tokens, K = 2048, C4 (Bc = 64). */
    {"global_topk_8192x2048", "compute_global_topk_indices_and_lens",
     {"block_size=64", "compress_ratio=4", "topk=2048", PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* Index/metadata builders (hip/): the C4A decode CSR of 64 MTP requests
     * x 4 tokens after 30000 (K = 2048), and the same chain at 8192 tokens. */
    {"global_topk_ragged_256x2048", "compute_global_topk_ragged_indices_and_indptr",
     {"block_size=64", "compress_ratio=4", "topk=2048",
      "query_lens=[4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4]",
      "prefix_lens=[30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000,30000]", NULL},
     NULL, 0},
    {"global_topk_ragged_8192x2048", "compute_global_topk_ragged_indices_and_indptr",
     {"block_size=64", "compress_ratio=4", "topk=2048", PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* Prefill top-k CSR of 4 x 2048 tokens after 30000 (Wk = 2048). */
    {"prefill_topk_ragged_8192", "build_prefill_topk_ragged_indices",
     {"block_size=64", "compress_ratio=4", "topk_width=2048", PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* SWA paged indices (dense + CSR) of the same 8192 prefill tokens, W = 128. */
    {"swa_indices_8192", "decode_swa_indices_and_lens",
     {"window_size=128", "block_size=64", "token_offset=0", "num_out_rows=8192",
      PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* CUDA-graph buffer copy of a 256-row decode step with K = 2048. */
    {"graph_copy_256x2048", "copy_ragged_to_graph_buffers", {"num_rows=256", "max_entries_per_row=2048", NULL},
     NULL, 0},
    /* Chunk plan over 64 prefills (a latency number: one thread). */
    {"chunk_plan_64", "get_prefill_chunk_plan",
     {"compress_ratio=4", "prefill_chunk_size=4", "window_size=128", "max_model_len=65536",
      "max_num_batched_tokens=8192",
      "query_lens=[2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024,2048,512,100,1,2048,300,7,1024]",
      "prefix_lens=[30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000,30000,0,6000,9000,100,60000,5,2000]", NULL},
     NULL, 0},
    /* Quantization at production shapes: 4096 tokens x hidden 7168; the
     * fused norm at q_lora_rank 1536 + head_dim 512. */
    {"mxfp4_4096x7168", "mxfp4_quant", {"T=4096", "W=7168", NULL}, NULL, 0},
    {"mxfp8_4096x7168", "mxfp8_quant", {"T=4096", "W=7168", NULL}, NULL, 0},
    {"fp8_group_4096x7168", "fp8_group_quant", {"M=4096", "K=7168", NULL}, NULL, 0},
    {"fused_qk_norm_quant_4096", "fused_qk_rmsnorm_group_quant", {"m=4096", "n1=1536", "n2=512", NULL}, NULL, 0},
    /* SWA-cache insert of a prefill step: 4 x 2048 tokens after a 30000 prefix, B = 64. */
    {"kv_insert_prefill_8192", "quantize_and_insert_k_cache",
     {"block_size=64", PREFILL_8192_LENS, NULL},
     NULL, 0},
    /* Prefill gather of 4 requests x 8192 rows from a 64-token-page cache. */
    {"kv_gather_4x8192", "dequantize_and_gather_k_cache",
     {"block_size=64", "has_gather_lens=0", "req_seq_lens=[8192,8192,8192,8192]", NULL},
     NULL, 0},
    {"attn_prefill_T512_H64_topk2048", "rocm_sparse_attn_prefill",
     {"num_heads=64", "compress_ratio=4", "topk=2048", "window_size=128", "query_lens=[512]",
      "prefix_lens=[9000]", "nan_unused=0", NULL},
     attn_flops, 1},
    {"attn_decode_64tok_H64_topk2048", "rocm_sparse_attn_prefill",
     {"num_heads=64", "compress_ratio=4", "topk=2048", "window_size=128",
      DECODE_64_QUERY_LENS,
      "prefix_lens=[9000]", "nan_unused=0", NULL},
     attn_flops, 1},
    /* The same 64 decode tokens straight off the paged fp8_ds_mla caches
     * (128 SWA + 2048 top-k keys each); bytes count the whole caches. */
    {"attn_decode_paged_64tok_H64", "rocm_sparse_attn_decode",
     {"num_heads=64", "compress_ratio=4", "topk=2048", "window_size=128",
      DECODE_64_QUERY_LENS,
      "prefix_lens=[9000]", NULL},
     paged_attn_flops, 1},
    /* Paged MXFP4 indexer (hip/): the K store of 8192 prefill tokens, the Q
     * quant of 4096 tokens x 64 heads, and 64 decode rows against 16384
     * compressed keys each (seq 65536, ratio 4, H 64). */
    {"idx_kstore_8192", "rocm_mxfp4_indexer_k_store",
     {PREFILL_8192_LENS, NULL}, NULL, 0},
    {"idx_qquant_4096_h64", "rocm_mxfp4_indexer_q_quant", {"T=4096", "H=64", NULL}, NULL, 0},
    {"idx_logits_decode_64x16k", "paged_mxfp4_mqa_logits", {"heads=64", DECODE_64_SEQ_LENS, DECODE_64_QUERY_LENS, NULL},
     dsv4_indexer_logits_flops, 0},
    {"idx_sa_decode_64x16k_top2048", "rocm_mxfp4_sparse_attn_indexer",
     {"heads=64", "topk=2048", "candidate_block_size=8", "candidate_topk_blocks=128", DECODE_64_SEQ_LENS,
      DECODE_64_QUERY_LENS, NULL},
     dsv4_indexer_logits_flops, 0},
    {"idx_mqa_decode_64x16k", "rocm_mxfp4_sparse_mqa_indexer",
     {"heads=64", "topk=512", "candidate_block_size=8", "candidate_topk_blocks=256", DECODE_64_SEQ_LENS,
      DECODE_64_QUERY_LENS, NULL},
     NULL, 0},
    /* The block-scaled GEMM at M 4096, N 7168 (hidden), K 1536 (q_lora_rank):
     * the fp32 model and the exact ideal (ref/gemm.c, "The block product"). */
    {"gemm_a8w8_4096x7168x1536_f32", "gemm_a8w8_blockscale", {"M=4096", "N=7168", "K=1536", "ref_accum=f32", NULL},
     gemm_flops, 0},
    {"gemm_a8w8_4096x7168x1536_f64", "gemm_a8w8_blockscale", {"M=4096", "N=7168", "K=1536", NULL}, gemm_flops, 1},
    /* The indexer's prefill logits at production size: 4096 rows x 64 heads over ~32768
     * compressed keys (ratio 4, 131072 tokens), about 2.2 TFLOP: run once. */
    {"indexer_logits_4096x64x32k", "paged_mxfp4_mqa_logits",
     {"heads=64", "page_entries=64", "compress_ratio=4", "seq_lens=[131072]", "query_lens=[4096]", NULL},
     dsv4_indexer_logits_flops, 0},
    /* Input-side ops at production widths: weight layout, q prep + SWA insert, wo_a. */
    {"shuffle_7168x1536", "shuffle_weight", {"N=7168", "K=1536", NULL}, NULL, 0},
    {"qnorm_insert_1024_H16", "fused_qnorm_rope_kv_insert", {"num_tokens=1024", "num_heads=16", "num_blocks=16", NULL},
     NULL, 0},
    {"inv_rope_mxfp8_4096_H16", "rocm_inverse_rope_mxfp8_rows", {"num_tokens=4096", "num_heads=16", NULL}, NULL, 0},
    {"wo_a_bmm_16tok_g8_r1024_k4096", "rocm_mxfp8_wo_a_bmm",
     {"num_tokens=16", "n_local_groups=8", "o_lora_rank=1024", "K=4096", NULL}, bmm_flops, 1},
};

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Read + write bandwidth of memcpy on buffers far larger than the caches. */
static double measure_copy_gbs(void)
{
    const size_t n = (size_t)256 << 20;
    /* through a volatile pointer: the copy's result is never read, and a
     * compiler may otherwise drop it (clang does) */
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        for (int k = 0; k < 3; k++) {
            double t0 = seconds();
            copy(b, a, n);
            double dt = seconds() - t0;
            if (2.0 * (double)n / dt / 1e9 > best)
                best = 2.0 * (double)n / dt / 1e9;
        }
    }
    free(a);
    free(b);
    return best;
}

static double measure_gemm_gflops(int dbl)
{
    const int n = 1024;
    double best = 0;
    void *a = calloc((size_t)n * n, dbl ? 8 : 4), *b = calloc((size_t)n * n, dbl ? 8 : 4),
         *c = calloc((size_t)n * n, dbl ? 8 : 4);
    if (a && b && c)
        for (int k = 0; k < 3; k++) {
            double t0 = seconds();
            if (dbl)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = seconds() - t0;
            if (2.0 * n * n * (double)n / dt / 1e9 > best)
                best = 2.0 * n * n * (double)n / dt / 1e9;
        }
    free(a);
    free(b);
    free(c);
    return best;
}

static int bench_params(const dsv4_op *op, const bench_case *bc, dsv4_params *ps, dsv4_status *st)
{
    memset(ps, 0, sizeof *ps);
    for (int k = 0; bc->params[k]; k++) {
        char name[DSV4_NAME_MAX];
        const char *eq = strchr(bc->params[k], '=');
        size_t len = eq ? (size_t)(eq - bc->params[k]) : 0;
        if (!eq || len >= sizeof name)
            return dsv4_fail(st, DSV4_EINPUT, "bench %s: bad parameter '%s'", bc->name, bc->params[k]);
        memcpy(name, bc->params[k], len);
        name[len] = '\0';
        const dsv4_param_spec *spec = dsv4_op_param(op, name);
        dsv4_param p;
        if (!spec)
            return dsv4_fail(st, DSV4_EINPUT, "bench %s: op has no parameter '%s'", bc->name, name);
        if (dsv4_param_parse(spec, eq + 1, &p, st) || dsv4_params_set(ps, &p, st))
            return st->code;
    }
    int rc = dsv4_op_complete_params(op, ps, bc->name, st);
    if (!rc && op->resolve)
        rc = op->resolve(ps, st);
    return rc;
}

static size_t tensors_bytes(const dsv4_tensors *ts)
{
    size_t s = 0;
    for (int k = 0; k < ts->n; k++)
        s += ts->t[k].nbytes;
    return s;
}

/* FNV-1a-64 over the outputs' bytes (8 at a time, then the tail), so two
 * builds or two thread counts can be compared bit for bit (bench -v). */
static uint64_t outputs_digest(const dsv4_tensors *ts)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (int k = 0; k < ts->n; k++) {
        const uint8_t *p = ts->t[k].data;
        size_t i = 0, n = ts->t[k].nbytes;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            h = (h ^ w) * 0x100000001B3ull;
        }
        for (; i < n; i++)
            h = (h ^ p[i]) * 0x100000001B3ull;
    }
    return h;
}

/* Best-of timing of the reference: at least 3 runs and 0.5 s (a case over
 * 5 s runs once); *digest gets the outputs' digest. */
static int time_reference(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, double *best,
                          uint64_t *digest, dsv4_status *st)
{
    dsv4_tensors out = {0};
    double t0 = seconds();
    int rc = dsv4_reference_outputs(op, c, in, &out, st);
    *best = seconds() - t0;
    if (!rc && *best <= 5.0) { /* a long case (the indexer's 2 TFLOP prefill) runs once */
        *best = 1e30;
        double start = seconds();
        for (int k = 0; !rc && (k < 3 || seconds() - start < 0.5) && k < 50; k++) {
            double t1 = seconds();
            rc = op->reference(c, in, &out, st);
            double dt = seconds() - t1;
            if (dt < *best)
                *best = dt;
        }
    }
    *digest = rc ? 0 : outputs_digest(&out);
    dsv4_tensors_free(&out);
    return rc;
}

/* The plug-in's device copy bandwidth (read + write) through the optional
 * pseudo-op DSV4_PLUGIN_COPY_OP of its time hook; 0 if it has none. */
static double measure_device_copy_gbs(const dsv4_backend *b, FILE *out)
{
    if (!b || b->is_ref || !b->plugin->time)
        return 0;
    const int64_t bytes = (int64_t)1 << 30;
    dsv4_plugin_param p = {"bytes", DSV4_PLUGIN_INT, bytes, 0, NULL, 0, NULL};
    char err[512] = "";
    double ms = 0;
    if (b->plugin->time(DSV4_PLUGIN_COPY_OP, "default", &p, 1, NULL, 0, NULL, 0, 10, &ms, err, sizeof err) ||
        ms <= 0)
        return 0;
    double gbs = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
    fprintf(out, "device (%s): copy kernel %.1f GB/s (read+write, 1 GiB)\n", b->name, gbs);
    return gbs;
}

/* The plug-in's matrix-unit rate (bf16 in, fp32 accumulate, GFLOP/s)
 * through the optional pseudo-op DSV4_PLUGIN_MMA_OP; 0 if it has none. */
static double measure_device_mma_gflops(const dsv4_backend *b, FILE *out)
{
    if (!b || b->is_ref || !b->plugin->time)
        return 0;
    const int64_t flop = (int64_t)2e12;
    dsv4_plugin_param p = {"flop", DSV4_PLUGIN_INT, flop, 0, NULL, 0, NULL};
    char err[512] = "";
    double ms = 0;
    if (b->plugin->time(DSV4_PLUGIN_MMA_OP, "default", &p, 1, NULL, 0, NULL, 0, 5, &ms, err, sizeof err) || ms <= 0)
        return 0;
    double gf = (double)flop / (ms * 1e-3) / 1e9;
    fprintf(out, "device (%s): matrix units %.1f GFLOP/s (bf16, fp32 accumulate, from registers)\n", b->name, gf);
    return gf;
}

/* The reference at n threads into *t and *digest. */
static int time_at(int n, const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, double *t,
                   uint64_t *digest, dsv4_status *st)
{
    dsv4_set_threads(n);
    int rc = time_reference(op, c, in, t, digest, st);
    dsv4_set_threads(0);
    return rc;
}

/* The plug-in's check of its hardware number conversions against the
 * integer rules (the optional pseudo-op DSV4_PLUGIN_CODEC_CHECK_OP): a line
 * saying what was checked; nonzero when a conversion differs, since every
 * bit-exact verdict on that device would then rest on it. */
static int check_device_codecs(const dsv4_backend *b, FILE *out)
{
    if (!b || b->is_ref || !b->plugin->time)
        return 0;
    int64_t res[3] = {0, 0, 0};
    const int64_t shape[1] = {3};
    dsv4_plugin_tensor t = {"result", DSV4_PLUGIN_INT64, 1, shape, res, sizeof res};
    char err[512] = "";
    double ms = 0;
    int rc = b->plugin->time(DSV4_PLUGIN_CODEC_CHECK_OP, "default", NULL, 0, NULL, 0, &t, 1, 1, &ms, err, sizeof err);
    /* a plug-in without the check refuses the pseudo-op (any error but a
     * runtime one, nothing counted); a runtime error is a failed check */
    if (rc && rc != DSV4_PLUGIN_ERUNTIME && res[1] == 0)
        return 0;
    if (rc) {
        fprintf(out, "device (%s): codec check FAILED: %s\n", b->name, err);
        return DSV4_EFAIL;
    }
    if (res[0])
        fprintf(out, "device (%s): hardware e4m3 conversions = the integer rules on all 2^32 fp32 inputs and all code "
                "pairs; the e2m1 byte-permute decode on all 65536 four-code words (%.1f ms)\n",
                b->name, ms);
    else
        fprintf(out, "device (%s): kernels use no hardware number conversion\n", b->name);
    return 0;
}

/* An OpenBLAS older than the CPU falls back to its SSE3 kernels (Debian 12's
 * 0.3.21 on recent Xeons): then every GFLOP probe, and the reference's own
 * BLAS calls, run several times slower than the CPU can.  Said, so that a
 * "% peak" is not read against a weak probe unknowingly. */
static void warn_generic_blas(FILE *out)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const char *core = openblas_get_corename();
    if (!core || (strcmp(core, "Prescott") != 0 && strcmp(core, "Core2") != 0 && strcmp(core, "Nehalem") != 0))
        return;
    __builtin_cpu_init();
    const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell"
                                                                                                          : NULL;
    if (better)
        fprintf(out, "note: OpenBLAS runs its generic %s kernels on a CPU with %s: the GFLOP probes and the "
                "reference's BLAS calls are slower than this CPU allows; OPENBLAS_CORETYPE=%s selects its vector "
                "kernels (every committed golden regenerates the same with them)\n",
                core, strcmp(better, "SkylakeX") == 0 ? "AVX-512F" : "AVX2", better);
#else
    (void)out;
#endif
}

int dsv4_bench_run(const dsv4_backend *b, const regex_t *re, int verbose, int no_ref, FILE *out)
{
    const int nthreads = dsv4_threads();
    no_ref = no_ref && b;
    if (no_ref)
        fprintf(out, "reference: not timed (--no-ref)\n");
    else {
        double copy = measure_copy_gbs(), sg = measure_gemm_gflops(0), dg = measure_gemm_gflops(1);
        fprintf(out, "machine: memcpy %.1f GB/s (read+write), sgemm %.1f GFLOP/s, dgemm %.1f GFLOP/s (1024^3, "
                "OpenBLAS, core %s)\n", copy, sg, dg, openblas_get_corename());
        warn_generic_blas(out);
        fprintf(out, "reference threads: %d (DSV4_THREADS; 1-thread time and speed-up beside)\n", nthreads);
        fprintf(out, "%% peak: of the line's probe (memcpy, or sgemm/dgemm for GFLOP lines) measured just before "
                "it\n");
    }
    double dev_copy = measure_device_copy_gbs(b, out), dev_mma = measure_device_mma_gflops(b, out);
    if (dev_copy > 0)
        fprintf(out, "device %% peak: of the copy kernel for memory-bound lines%s\n",
                dev_mma > 0 ? ", of the matrix units for GFLOP lines" : "");
    fprintf(out, "%-28s %-8s %12s %12s %10s %12s %10s %10s %12s %8s\n", "bench", "impl", "time", "bytes", "GB/s",
            "GFLOP/s", "% peak", "probe", "1 thread", "speed-up");
    int worst = check_device_codecs(b, out);
    for (size_t i = 0; i < sizeof bench_table / sizeof bench_table[0]; i++) {
        const bench_case *bc = &bench_table[i];
        if (re && regexec(re, bc->name, 0, NULL, 0) != 0)
            continue;
        const dsv4_op *op = dsv4_op_find(bc->op);
        dsv4_params ps;
        dsv4_status st = {0};
        dsv4_tensors in = {0}, o = {0};
        dsv4_opctx c = dsv4_opctx_make(op, &ps, 0, 1);
        int rc = op ? bench_params(op, bc, &ps, &st) : dsv4_fail(&st, DSV4_EINPUT, "no op %s", bc->op);
        if (!rc)
            rc = op->generate(&c, &in, &st);
        if (!rc)
            rc = op->alloc_outputs(&c, &in, &o, &st);
        double t = 0, t1 = 0, probe = 0;
        uint64_t digest = 0, digest1 = 0;
        /* The machine may be shared: its rate is measured again beside each
         * line, so that the ratio compares like with like. */
        if (!rc && !no_ref) {
            probe = !bc->flops ? measure_copy_gbs() : measure_gemm_gflops(bc->vs_dgemm);
            rc = time_at(nthreads, op, &c, &in, &t, &digest, &st);
            if (!rc && nthreads > 1)
                rc = time_at(1, op, &c, &in, &t1, &digest1, &st);
            if (!rc && nthreads > 1 && digest1 != digest)
                rc = dsv4_fail(&st, DSV4_EFAIL,
                               "outputs differ between 1 and %d threads (digest %016llx vs %016llx)", nthreads,
                               (unsigned long long)digest1, (unsigned long long)digest);
        }
        if (rc) {
            fprintf(out, "%-28s error: %s\n", bc->name, st.msg);
            worst = rc;
        } else {
            double bytes = (double)(tensors_bytes(&in) + tensors_bytes(&o));
            double fl = bc->flops ? bc->flops(&ps, &in) : 0;
            if (!no_ref) {
                double gbs = bytes / t / 1e9;
                fprintf(out, "%-28s %-8s %9.3f ms %12.0f %10.2f %12.1f %9.1f%% %10.1f", bc->name, "ref", t * 1e3,
                        bytes, gbs, fl / t / 1e9, 100.0 * (fl ? fl / t / 1e9 : gbs) / probe, probe);
                if (nthreads > 1)
                    fprintf(out, " %9.3f ms %7.2fx", t1 * 1e3, t1 / t);
                if (verbose)
                    fprintf(out, "  digest %016llx", (unsigned long long)digest);
                fputc('\n', out);
            }
            double ms;
            if (b) {
                dsv4_status bst = {0};
                int brc = dsv4_backend_supports(b, op, 0)
                              ? dsv4_backend_time(b, op, &c, &in, &o, 20, &ms, &bst)
                              : dsv4_fail(&bst, DSV4_ESKIP, "op not provided by this implementation");
                if (brc)
                    fprintf(out, "%-28s %-8s %s\n", bc->name, b->name, bst.msg);
                else if (dev_copy > 0) { /* % of the device copy bandwidth, or of the matrix units */
                    const double gbs_dev = bytes / (ms * 1e-3) / 1e9, gf_dev = fl / (ms * 1e-3) / 1e9;
                    const int vs_mma = fl > 0 && dev_mma > 0;
                    fprintf(out, "%-28s %-8s %9.3f ms %12.0f %10.2f %12.1f %9.1f%% %10.1f\n", bc->name, b->name, ms,
                            bytes, gbs_dev, gf_dev, 100.0 * (vs_mma ? gf_dev / dev_mma : gbs_dev / dev_copy),
                            vs_mma ? dev_mma : dev_copy);
                }
                else
                    fprintf(out, "%-28s %-8s %9.3f ms %12.0f %10.2f %12.1f\n", bc->name, b->name, ms, bytes,
                            bytes / (ms * 1e-3) / 1e9, fl / (ms * 1e-3) / 1e9);
            }
        }
        dsv4_tensors_free(&in);
        dsv4_tensors_free(&o);
    }
    /* The probes again: how much the machine's speed moved during the run. */
    if (!no_ref)
        fprintf(out, "machine at the end: memcpy %.1f GB/s, sgemm %.1f GFLOP/s, dgemm %.1f GFLOP/s\n",
                measure_copy_gbs(), measure_gemm_gflops(0), measure_gemm_gflops(1));
    return worst;
}
