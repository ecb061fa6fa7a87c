/* indices.h - what the index and metadata builders (ops/indices/) share:
 * the batch readers and generators, the block table, the top-k rows, the
 * exact policy and the ragged mask (indices_common.c).  Semantics:
 * ref/indices.c (docs/semantics/indices.md A5-A7). */
#ifndef DSV4_OPS_INDICES_H
#define DSV4_OPS_INDICES_H

#include "../../ref/indices.h"
#include "../ops.h"

/* Per-request lengths from query_lens / prefix_lens, each in [0, 2^29 - 1]
 * so that positions and token counts stay far inside int32. */
int dsv4_indices_shape_of(const dsv4_params *ps, dsv4_req_shape *rs, dsv4_status *st);
/* The longest request, prefix + query (0 for an empty batch). */
int64_t dsv4_indices_longest(const dsv4_req_shape *rs);
/* Leading requests with query_len == 1 are decodes (reorder_batch_threshold
 * 1, docs/semantics/indices.md A5.1): the number of their tokens. */
int64_t dsv4_indices_decode_tokens(const dsv4_req_shape *rs);
/* Sets the int parameter name to value where the case left it negative
 * (-1 means "derive it"). */
int dsv4_indices_default_to(dsv4_params *ps, const char *name, int64_t value, dsv4_status *st);
/* What the generators read before they build anything: the batch shape
 * (dsv4_indices_shape_of) and the integer parameters of the family, each
 * read by name from one table (indices_common.c; a parameter the op does
 * not declare reads 0). */
typedef struct dsv4_indices_gen_params {
    dsv4_req_shape rs;
    int64_t window_size, block_size, compress_ratio, topk, topk_width, N, num_compressed, token_offset,
        num_out_rows, qsl_base, cp_world_size;
} dsv4_indices_gen_params;
int dsv4_indices_gen_params_of(const dsv4_params *ps, dsv4_indices_gen_params *g, dsv4_status *st);
/* Derives max_model_len (the longest request) and the compressed row count
 * n_name = ceil(max_model_len / compress_ratio) where they are -1; fails for
 * compress_ratio < 1 (docs/semantics/indices.md A6.1). */
int dsv4_indices_resolve_compressed(dsv4_params *ps, const dsv4_req_shape *rs, const char *n_name,
                                    dsv4_status *st);
/* Position of batch token t (query_start_loc coordinates) in request r:
 * (seq_len - query_len) + (t - query_start) (docs/semantics/indices.md A5.1). */
int64_t dsv4_indices_position(const int32_t *query_start_loc, const int32_t *seq_lens, int64_t r, int64_t t);

/* A generated paged batch: token_to_req_indices, is_valid_token (a token
 * is invalid, slot_mapping -1, with probability invalid_token_frac), with
 * want_qsl also query_start_loc (base 0) and seq_lens, and block_table
 * [R, width]: request r needs ceil((S_r // ratio) / B) pages; width = the
 * largest need + bt_pad (at least 1).  Page ids are a shuffled permutation
 * of [0, R*width), so a wrong row or column gives a wrong slot. */
int dsv4_indices_gen_paged_batch(const dsv4_opctx *c, const dsv4_req_shape *rs, int want_qsl, int64_t ratio,
                                 int64_t B, dsv4_tensors *in, int64_t *width, dsv4_status *st);

/* The entries the top-k generator spoils, each valid entry with its own draw. */
typedef struct dsv4_topk_specials {
    double hole_frac;      /* set to -1 */
    double oob_frac;       /* out of range: odd columns >= oob_base, even ones <= -2 */
    int64_t oob_base;      /* the first index past the valid range */
    int32_t *token_to_req; /* non-NULL: after each row, one more draw sets the
                            * token's request out of [0, R) with bad_req_frac */
    double bad_req_frac;
} dsv4_topk_specials;

/* topk [T, Wk]: the row of the token at position pos holds local compressed
 * indices from [0, (pos + 1) / ratio) (dsv4_fill_topk_row), then the
 * specials.  ratio >= 1. */
int dsv4_indices_gen_topk_rows(const dsv4_opctx *c, const dsv4_req_shape *rs, int64_t ratio, int32_t *topk,
                               int64_t Wk, const dsv4_topk_specials *sp, dsv4_status *st);

/* A 1-D input of exactly n elements (n < 0: any). */
int dsv4_indices_input_1d(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int64_t n,
                          const dsv4_tensor **out, dsv4_status *st);
/* The input groups several builders read (dsv4_indices_input_1d each):
 * token_to_req_indices and is_valid_token, [T] each (T = n; n < 0: any);
 * seq_lens [R] and query_start_loc [R+1]; block_table [rows, cols]. */
int dsv4_indices_token_inputs(const dsv4_tensors *in, int64_t n, const int32_t **token_to_req,
                              const uint8_t **is_valid_token, int64_t *T, dsv4_status *st);
int dsv4_indices_request_inputs(const dsv4_tensors *in, const int32_t **query_start_loc, const int32_t **seq_lens,
                                int64_t *R, dsv4_status *st);
int dsv4_indices_block_table(const dsv4_tensors *in, const int32_t **block_table, int64_t *rows, int64_t *cols,
                             dsv4_status *st);
/* An output, poisoned so that an element a backend leaves unwritten fails. */
int dsv4_indices_add_output(dsv4_tensors *out, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                            dsv4_status *st);
/* An in/out output: a copy of the buffer as it was before the launch, so
 * that what the op must leave alone is compared too. */
int dsv4_indices_add_inout(dsv4_tensors *out, const char *name, const dsv4_tensor *before, dsv4_status *st);
/* Mask of a flat ragged buffer: only [0, nnz) is specified. */
void dsv4_indices_ragged_mask(uint8_t *mask, int64_t n, int64_t nnz);
/* "<output>: integer metadata, bit-exact". */
int dsv4_indices_exact_policy(const dsv4_opctx *c, const dsv4_tensors *in, const char *output, dsv4_policy *pol,
                              dsv4_status *st);

/* Rows several indices ops declare alike (schema syntax: harness/op.h). */
#define DSV4_INDICES_WINDOW_SIZE_PARAM \
    "    window_size        int   = 128  sliding window W\n"
#define DSV4_INDICES_BLOCK_SIZE_PARAM \
    "    block_size         int   = 64   Bc: compressed rows per page (256 / compress_ratio)\n"
#define DSV4_INDICES_COMPRESS_RATIO_PARAM \
    "    compress_ratio     int   = 4    compress ratio c (>= 1)\n"
#define DSV4_INDICES_MAX_MODEL_LEN_PARAM \
    "gen max_model_len      int   = -1   generator: for N; -1: the longest request\n"
#define DSV4_INDICES_INVALID_TOKEN_FRAC_PARAM \
    "gen invalid_token_frac float = 0    generator: fraction of tokens with slot_mapping -1\n"
#define DSV4_INDICES_BT_PAD_PARAM \
    "gen bt_pad             int   = 1    generator: extra block-table columns\n"
#define DSV4_INDICES_QUERY_START_LOC_INPUT \
    "query_start_loc      int32    [R+1] whole batch, base 0\n"
#define DSV4_INDICES_SEQ_LENS_INPUT \
    "seq_lens             int32    [R]\n"
#define DSV4_INDICES_IS_VALID_TOKEN_INPUT \
    "is_valid_token       uint8    [T] slot_mapping >= 0\n"
#define DSV4_INDICES_BLOCK_TABLE_INPUT \
    "block_table          int32    [R, maxb] compressed-cache pages\n"
#define DSV4_INDICES_TOPK_LENS_OUTPUT \
    "topk_lens            int32    [T] valid entries (0 for invalid tokens)\n"

/* The two compute_global_topk ops share their parameters, inputs, generator
 * and argument reader (docs/semantics/indices.md A5.6, A5.7). */
#define DSV4_INDICES_GTOPK_PARAMS                                                                           \
    DSV4_INDICES_BLOCK_SIZE_PARAM                                                                           \
    "gen compress_ratio     int   = 4    generator: c, visible entries (pos+1)//c\n"                        \
    "gen topk               int   = 512  generator: top-k width K\n"                                        \
    DSV4_REQ_SHAPE_PARAMS                                                                                   \
    DSV4_INDICES_INVALID_TOKEN_FRAC_PARAM                                                                   \
    "gen hole_frac          float = 0    generator: fraction of top-k entries set to -1 (interior holes)\n" \
    "gen oob_frac           float = 0    generator: fraction beyond the block table or <= -2 (checked)\n"   \
    "gen bad_req_frac       float = 0    generator: fraction of tokens with a bad request (checked)\n"      \
    DSV4_INDICES_BT_PAD_PARAM
#define DSV4_INDICES_GTOPK_INPUTS                                              \
    "topk_indices         int32  [T, K] local compressed indices, -1 padded\n" \
    "token_to_req_indices int32  [T] request of each token\n"                  \
    DSV4_INDICES_BLOCK_TABLE_INPUT                                             \
    "is_valid_token       uint8  [T] slot_mapping >= 0 (bool as uint8)\n"
int dsv4_indices_gtopk_generate(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st);
int dsv4_indices_gtopk_args(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_gtopk_args *a, dsv4_status *st);
/* The args, then dsv4_gtopk_check under the variant's rule (ragged: the CSR form). */
int dsv4_indices_gtopk_validate(const dsv4_opctx *c, const dsv4_tensors *in, int ragged, dsv4_status *st);

#endif
