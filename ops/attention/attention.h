/* attention.h - what the attention ops (ops/attention/<op>.c) share
 * (ops/attention/attention_common.c): the input generators, the callbacks
 * of the three ops that reduce to dsv4_ref_sparse_attn, the inputs of the
 * two inverse-RoPE ops and the argument builder and generator of the two
 * paged-cache ops. */
#ifndef DSV4_OPS_ATTENTION_H
#define DSV4_OPS_ATTENTION_H

#include "../../ref/attention.h"
#include "../../ref/numerics.h"
#include "../ops.h"

/* ---- generators ---- */

/* One bf16 key row as the gather writes it: NoPE lanes fp8 e4m3fn values
 * times a power-of-two block scale, RoPE lanes plain bf16. */
void dsv4_attn_gen_key_row(dsv4_rng *rng, uint16_t *row);
/* n bf16 values of RMS about 1: q after the q-norm, or any bf16 rows. */
void dsv4_attn_gen_q(dsv4_rng *rng, uint16_t *q, int64_t n);
/* attn_sink [H] from the `sink` parameter: random, none / -inf, or a number. */
int dsv4_attn_gen_sink(const char *mode, uint64_t seed, float *sink, int64_t H, dsv4_status *st);
/* The parameters every sparse-attention op declares alike: the softmax
 * scale its args read, and the generator's heads and window. */
#define DSV4_ATTN_SCALE_PARAM                                                                       \
    "    scale       float = 0.044194173824159216  softmax scale, head_dim^-0.5 = 512^-0.5 [S14]\n"
#define DSV4_ATTN_HEADS_WINDOW_PARAMS                                             \
    "gen num_heads   int   = 8                     generator: H\n"                \
    "gen window_size int   = 128                   generator: sliding window W\n"
/* The `sink` parameter as every attention generator declares it. */
#define DSV4_ATTN_SINK_PARAM                                                                              \
    "gen sink        str   = random  generator: attn_sink: random (randn*10), none (-inf), or a number\n"
/* Rows several attention ops declare alike (schema syntax: harness/op.h). */
#define DSV4_ATTN_INVALID_FRAC_PARAM \
    "gen invalid_frac       float = 0    generator: fraction of entries set to -1\n"
#define DSV4_ATTN_SINK_INPUT \
    "attn_sink            float32  [H] sink logit per head\n"

/* What both attention generators (rocm_sparse_attn_prefill and the paged
 * ops) read first: query_lens / prefix_lens of the batch (one prefix_lens
 * entry applies to every request), num_heads H, window_size W,
 * compress_ratio and topk. */
typedef struct dsv4_attn_gen_params {
    dsv4_req_shape rs;
    int64_t H, W, compress_ratio, topk;
} dsv4_attn_gen_params;
int dsv4_attn_gen_params_of(const dsv4_params *ps, dsv4_attn_gen_params *g, dsv4_status *st);

/* ---- the ops over dsv4_ref_sparse_attn ---- */

/* An op's attention arguments from its inputs (they may point at storage
 * the function owns: valid until its next call on the same thread). */
typedef int (*dsv4_attn_args_fn)(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a,
                                 dsv4_status *st);

/* The attention arguments the op (rocm_sparse_attn_prefill,
 * rocm_sparse_attn_decode or sparse_mla_fwd) reads from its inputs, for
 * kernel models and tests (tests/soundness.h); DSV4_EINPUT for another op. */
int dsv4_attn_args_of_op(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a,
                         dsv4_status *st);
/* The op files' own args functions, behind dsv4_attn_args_of_op. */
int dsv4_attn_args_prefill(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st);
int dsv4_attn_args_decode(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st);
int dsv4_attn_args_sparse_mla(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st);

/* The one output of the three attention ops. */
#define DSV4_ATTN_OUTPUTS                                                                \
    "output bfloat16 golden=float32  [T, H, 512] attention output (golden: the ideal)\n"

int dsv4_attn_op_validate(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st);
int dsv4_attn_op_alloc(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                       dsv4_status *st);
int dsv4_attn_op_reference(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                           dsv4_status *st);
int dsv4_attn_op_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                        dsv4_status *st);
/* The bound of one output element against its ideal e (derived in
 * attention_common.c): A = sum_i w_i |V_i,d|, A_top the highest-scoring
 * key's share of it, nvalid and score_mag as in dsv4_attn_diag. */
double dsv4_attn_elem_bound(double e, double A, double A_top, int64_t nvalid, double score_mag);
int dsv4_attn_op_bound(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, double *bound, int64_t n,
                       dsv4_status *st);
void dsv4_attn_op_hint(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in,
                       const dsv4_tensor *expected, const dsv4_tensor *actual, dsv4_cmp_result *res);
void dsv4_attn_op_locate(dsv4_attn_args_fn fn, const dsv4_opctx *c, const dsv4_tensors *in, int64_t flat,
                         char *buf, size_t len);
/* Element flat of a [T, H, 512] bf16 output as token t, head h, lane d;
 * 0 where it lies outside (H < 1 or t >= T), so a locate names nothing. */
int dsv4_attn_thd_of(int64_t flat, int64_t T, int64_t H, int64_t *t, int64_t *h, int64_t *d);

/* The op callbacks prefix_validate .. prefix_locate, each the shared one
 * above over the op's args function fn. */
#define DSV4_ATTN_OP_CALLBACKS(prefix, fn)                                                                    \
    static int prefix##_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)               \
    {                                                                                                         \
        return dsv4_attn_op_validate(fn, c, in, st);                                                          \
    }                                                                                                         \
    static int prefix##_alloc(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,                 \
                              dsv4_status *st)                                                                \
    {                                                                                                         \
        return dsv4_attn_op_alloc(fn, c, in, out, st);                                                        \
    }                                                                                                         \
    static int prefix##_reference(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,             \
                                  dsv4_status *st)                                                            \
    {                                                                                                         \
        return dsv4_attn_op_reference(fn, c, in, out, st);                                                    \
    }                                                                                                         \
    static int prefix##_bound(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, double *b,     \
                              int64_t n, dsv4_status *st)                                                     \
    {                                                                                                         \
        (void)output;                                                                                         \
        return dsv4_attn_op_bound(fn, c, in, b, n, st);                                                       \
    }                                                                                                         \
    static void prefix##_hint(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,                \
                              const dsv4_tensor *e, const dsv4_tensor *a, dsv4_cmp_result *res)               \
    {                                                                                                         \
        (void)output;                                                                                         \
        dsv4_attn_op_hint(fn, c, in, e, a, res);                                                              \
    }                                                                                                         \
    static void prefix##_locate(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, int64_t f,   \
                                char *buf, size_t len)                                                        \
    {                                                                                                         \
        (void)output;                                                                                         \
        dsv4_attn_op_locate(fn, c, in, f, buf, len);                                                          \
    }

/* ---- the inverse-RoPE ops ---- */

/* Fills o [T, H, 512] from the generator's "o" stream. */
typedef void (*dsv4_rope_fill_fn)(dsv4_rng *rng, uint16_t *o, int64_t T, int64_t H);

/* The parameters dsv4_rope_rows_generate and dsv4_rope_inputs_of read
 * (num_tokens_default: the op's default T), and the inputs after o. */
#define DSV4_ROPE_ROWS_PARAMS(num_tokens_default)                                                      \
    "    rope_head_dim int   = 64     RoPE lanes at the end of each 512-lane head row\n"               \
    "gen num_tokens    int   = " num_tokens_default "  generator: T\n"                                 \
    "gen num_heads     int   = 8      generator: H\n"                                                  \
    "gen max_position  int   = 512    generator: rows of cos_sin_cache\n"                              \
    "gen rope_theta    float = 10000  generator: base of the cos/sin table (SWA layers: rope_theta)\n"
#define DSV4_ROPE_POSITION_INPUTS                                           \
    "positions     int64    [T] the query tokens' own positions\n"          \
    "cos_sin_cache float32  [max_position, rope_head_dim] rows cos | sin\n"

/* The inputs o (filled by fill_o), positions in [0, max_position) and the
 * RoPE table; *o_out / *pos_out (may be NULL) get the first two. */
int dsv4_rope_rows_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_rope_fill_fn fill_o, dsv4_tensor **o_out,
                            dsv4_tensor **pos_out, dsv4_status *st);

typedef struct dsv4_rope_io {
    const dsv4_tensor *o, *pos, *cs;
    int64_t T, H, rotated;
    int rd;
} dsv4_rope_io;

/* The inputs and rope_head_dim / rotated of a case, shapes checked. */
int dsv4_rope_inputs_of(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_rope_io *r, dsv4_status *st);
/* NaN/Inf in the RoPE table is bad input (it would poison every rotated lane). */
int dsv4_rope_cos_sin_finite(const dsv4_rope_io *r, dsv4_status *st);

/* ---- the paged-cache ops (rocm_sparse_attn_decode, sparse_mla_fwd) ---- */

/* What a variant of the paged ops changes: the fp8 encoding of the main
 * (SWA) cache.  The compressed (extra) cache is always OCP. */
typedef struct dsv4_paged_attn_rule {
    dsv4_fp8_kind main_fp8;
} dsv4_paged_attn_rule;
/* The two rules: main cache OCP e4m3fn (gfx950, NVIDIA) or FNUZ (gfx942). */
extern const dsv4_paged_attn_rule dsv4_paged_main_ocp, dsv4_paged_main_fnuz;

/* Input names of one paged op (the seeds' Python argument names). */
typedef struct dsv4_paged_names {
    const char *main_cache, *main_idx, *main_ptr, *extra_cache, *extra_idx, *extra_ptr;
} dsv4_paged_names;

/* One paged cache as a key source (the fetch context of a segment). */
typedef struct dsv4_paged_src {
    const uint8_t *bytes;
    int64_t B, stride;
    dsv4_fp8_kind kind;
} dsv4_paged_src;

/* The attention arguments and the fetch contexts they point at. */
typedef struct dsv4_paged_args {
    dsv4_attn_args a;
    dsv4_paged_src src[2];
} dsv4_paged_args;

#define DSV4_PAGED_PARAMS                                                                               \
    DSV4_ATTN_SCALE_PARAM                                                                               \
    "    swa_only       int   = 0    1: SWA-only layer, no extra (compressed) segment\n"                \
    DSV4_ATTN_HEADS_WINDOW_PARAMS                                                                       \
    "gen compress_ratio int   = 4    generator: c (4 or 128; ignored when swa_only)\n"                  \
    "gen topk           int   = 512  generator: top-k width\n"                                          \
    DSV4_REQ_SHAPE_BCAST_PARAMS                                                                         \
    DSV4_ATTN_SINK_PARAM                                                                                \
    DSV4_ATTN_INVALID_FRAC_PARAM                                                                        \
    "gen oob_frac       float = 0    generator: fraction of entries set out of range\n"                 \
    "gen empty_rows     int[] = []   generator: tokens whose lists are all -1\n"                        \
    "gen nan_rows       int[] = []   generator: tokens whose first window key is a NaN-poisoned slot\n"

/* pa->a over the inputs named by nm; c->rule is a dsv4_paged_attn_rule. */
int dsv4_paged_args_of(const dsv4_paged_names *nm, const dsv4_opctx *c, const dsv4_tensors *in,
                       dsv4_paged_args *pa, dsv4_status *st);
/* The inputs named by nm; c->rule is a dsv4_paged_attn_rule. */
int dsv4_paged_generate(const dsv4_paged_names *nm, const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st);

/* Every callback of a paged op whose inputs are named by names (a static
 * dsv4_paged_names): its exported args function args_fn (declared above),
 * prefix_generate and those of DSV4_ATTN_OP_CALLBACKS.  The fetch contexts
 * must outlive the args: one static slot would not be reentrant, so they
 * live in thread-local storage. */
#define DSV4_PAGED_ATTN_OP_CALLBACKS(prefix, names, args_fn)                                                 \
    static _Thread_local dsv4_paged_args prefix##_pa;                                                         \
    int args_fn(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_attn_args *a, dsv4_status *st)             \
    {                                                                                                         \
        int rc = dsv4_paged_args_of(&names, c, in, &prefix##_pa, st);                                         \
        *a = prefix##_pa.a;                                                                                   \
        return rc;                                                                                            \
    }                                                                                                         \
    static int prefix##_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st)                     \
    {                                                                                                         \
        return dsv4_paged_generate(&names, c, in, st);                                                        \
    }                                                                                                         \
    DSV4_ATTN_OP_CALLBACKS(prefix, args_fn)

#endif
