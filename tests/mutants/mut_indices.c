/* mut_indices.c - mutants of the index and metadata builders (exact
 * integer outputs: any planted bug that changes one element must be
 * killed).  Semantics: ref/indices.h (docs/semantics/indices.md A5-A7). */
#include <string.h>

#include "../../ops/indices/indices.h"
#include "mutant.h"

/* Every int32 element of a tensor. */
static int32_t *i32(dsv4_tensor *t)
{
    return (int32_t *)t->data;
}

/* The reference run on seq_lens one too high each, as if handed them after
 * this step's increment: every token sits one position later. */
static int seq_lens_plus1(mut_call *m, dsv4_tensor *seq)
{
    (void)m;
    for (int64_t r = 0; r < seq->shape[0]; r++)
        i32(seq)[r] += 1;
    return DSV4_OK;
}
static int run_with_seq_lens_plus1(mut_call *m) { return mut_run_reference_on(m, "seq_lens", seq_lens_plus1); }

/* ---- combine_topk_swa_indices ---- */

/* The window part starts one position late: every window entry (the rows
 * r*M + N + i past the compressed block of request r) is one too high,
 * the last one reaching the token after the query. */
int mut_combine_window_start_late(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *ci = mut_out(m, "combined_indices");
    const int64_t M = mut_int(m, "M"), N = mut_int(m, "N"), n = mut_numel(ci);
    for (int64_t i = 0; i < n && M > 0; i++)
        if (i32(ci)[i] >= 0 && i32(ci)[i] % M >= N)
            i32(ci)[i] += 1;
    return DSV4_OK;
}

/* -1 (and out-of-range) top-k entries inside the causal width are not
 * masked: they become r*M + v like valid ones (the validate_topk=none
 * kernel run where the Torch function is asked for). */
int mut_combine_topk_unmasked(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *ti, *qsl, *seq, *ci;
    if ((rc = mut_need(m, &m->in, "topk_indices", &ti)) || (rc = mut_need(m, &m->in, "query_start_loc", &qsl)) ||
        (rc = mut_need(m, &m->in, "seq_lens", &seq)) || (rc = mut_need(m, &m->out, "combined_indices", &ci)))
        return rc;
    const int64_t M = mut_int(m, "M"), c = mut_int(m, "compress_ratio"), K = mut_int(m, "topk");
    const int64_t Wk = ti->shape[1], P = ci->shape[1], width = K < Wk ? K : Wk;
    const int32_t *q = i32(qsl);
    for (int64_t r = 0; r < seq->shape[0]; r++)
        for (int64_t t = q[r] - q[0]; t < q[r + 1] - q[0]; t++) {
            const int64_t pos = dsv4_indices_position(q, i32(seq), r, t + q[0]);
            int64_t tk = (pos + 1) / c;
            tk = tk > width ? width : tk < 0 ? 0 : tk;
            for (int64_t j = 0; j < tk && j < P; j++)
                if (i32(ci)[t * P + j] < 0)
                    i32(ci)[t * P + j] = (int32_t)(r * M + i32(ti)[t * Wk + j]);
        }
    return DSV4_OK;
}

/* Positions off by one: the kernel is handed seq_lens after this step's
 * increment, so every token sits one position later (one more causal
 * top-k column every c tokens, one more window row below the window). */
int mut_combine_positions_off1(mut_call *m) { return run_with_seq_lens_plus1(m); }

/* ---- compute_global_topk_indices_and_lens / ragged ---- */

/* lens counts the -1 holes too: it is the column after the last valid
 * entry (a kernel that takes the row's extent for its count). */
int mut_gtopk_lens_count_holes(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *ti, *valid, *lens;
    if ((rc = mut_need(m, &m->in, "topk_indices", &ti)) || (rc = mut_need(m, &m->in, "is_valid_token", &valid)) ||
        (rc = mut_need(m, &m->out, "topk_lens", &lens)))
        return rc;
    const int64_t T = ti->shape[0], K = ti->shape[1];
    for (int64_t t = 0; t < T; t++) {
        int64_t extent = 0;
        for (int64_t j = 0; j < K; j++)
            if (i32(ti)[t * K + j] >= 0)
                extent = j + 1;
        if (((const uint8_t *)valid->data)[t])
            i32(lens)[t] = (int32_t)extent;
    }
    return DSV4_OK;
}

/* bounds=checked without the compaction: dropped entries leave -1 holes
 * in place instead of the survivors moving left. */
int mut_gtopk_checked_not_compacted(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_opctx c = mut_ctx(m, m->variant);
    dsv4_gtopk_args a;
    dsv4_tensor *g;
    if ((rc = dsv4_indices_gtopk_args(&c, &m->in, &a, m->st)) || (rc = mut_need(m, &m->out, "global_topk_indices", &g)))
        return rc;
    for (int64_t t = 0; t < a.num_tokens; t++) {
        const int64_t r = a.token_to_req[t];
        const int req_ok = r >= 0 && r < a.bt_rows;
        for (int64_t j = 0; j < a.topk_width; j++) {
            const int32_t v = a.topk_indices[t * a.topk_width + j];
            int32_t slot = -1;
            if (req_ok && v >= 0 && v / a.block_size < a.bt_cols)
                slot = (int32_t)(a.block_table[r * a.bt_cols + v / a.block_size] * a.block_size + v % a.block_size);
            i32(g)[t * a.topk_width + j] = slot;
        }
    }
    return DSV4_OK;
}

/* The ragged indptr is the inclusive prefix sum (row t's end where its
 * start belongs): every row is read one row late. */
int mut_gtopk_ragged_indptr_inclusive(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *ip, *lens;
    if ((rc = mut_need(m, &m->out, "topk_ragged_indptr", &ip)) || (rc = mut_need(m, &m->out, "topk_lens", &lens)))
        return rc;
    const int64_t T = lens->shape[0];
    int64_t off = 0;
    for (int64_t t = 0; t < T; t++) {
        off += i32(lens)[t];
        i32(ip)[t] = (int32_t)off;
    }
    return DSV4_OK;
}

/* ---- build_prefill_topk_ragged_indices ---- */

/* Positions off by one (seq_lens after the step's increment): the causal
 * cap (pos + 1) // c admits one more column every c tokens. */
int mut_pftopk_positions_off1(mut_call *m) { return run_with_seq_lens_plus1(m); }

/* ---- decode_swa_indices_and_lens ---- */

/* Rebuilds the ragged pair from the (mutated) dense rows, as the op does. */
static int swa_reragged(mut_call *m)
{
    dsv4_tensor *idx, *lens, *flat, *ip;
    int rc;
    if ((rc = mut_need(m, &m->out, "decode_swa_indices", &idx)) || (rc = mut_need(m, &m->out, "decode_swa_lens", &lens)) ||
        (rc = mut_need(m, &m->out, "decode_swa_ragged_indices", &flat)) ||
        (rc = mut_need(m, &m->out, "decode_swa_ragged_indptr", &ip)))
        return rc;
    dsv4_ref_build_ragged_indices_from_dense(i32(idx), lens->shape[0], idx->shape[2], i32(lens),
                                             mut_int(m, "ragged_num_rows"), i32(flat), i32(ip));
    return DSV4_OK;
}

/* Invalid tokens' rows are cleared to -1: the kernel writes rows the op
 * must leave stale (the persistent buffer another step still reads). */
int mut_swa_invalid_rows_cleared(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *valid, *idx;
    if ((rc = mut_need(m, &m->in, "is_valid_token", &valid)) || (rc = mut_need(m, &m->out, "decode_swa_indices", &idx)))
        return rc;
    const int64_t rows = idx->shape[0], W = idx->shape[2], off = mut_int(m, "token_offset");
    for (int64_t i = 0; i < rows; i++)
        if (!((const uint8_t *)valid->data)[i + off])
            for (int64_t j = 0; j < W; j++)
                i32(idx)[i * W + j] = -1;
    return DSV4_OK;
}

/* The window starts one position late (start = pos - W + 2): a full
 * window loses its oldest row. */
int mut_swa_window_start_late(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *idx, *lens;
    if ((rc = mut_need(m, &m->out, "decode_swa_indices", &idx)) || (rc = mut_need(m, &m->out, "decode_swa_lens", &lens)))
        return rc;
    const int64_t rows = idx->shape[0], W = idx->shape[2];
    for (int64_t i = 0; i < rows; i++) {
        int32_t *row = i32(idx) + i * W;
        if (i32(lens)[i] < W || W == 0)
            continue; /* start clamps to 0 below a full window */
        memmove(row, row + 1, (size_t)(W - 1) * sizeof *row);
        row[W - 1] = -1;
        i32(lens)[i] -= 1;
    }
    return swa_reragged(m);
}

/* ---- copy_ragged_to_graph_buffers ---- */

/* arch=gfx950 computed as the generic path: the indices view is not
 * trimmed to the source entries. */
int mut_gcopy_view_untrimmed(mut_call *m)
{
    return mut_run_reference_as(m, "default");
}

/* The buffer past the copied entries is cleared to -1 up to the view's
 * end: entries the op must leave stale are rewritten. */
int mut_gcopy_tail_cleared(mut_call *m)
{
    int rc = mut_run_reference(m);
    if (rc)
        return rc;
    dsv4_tensor *src, *buf;
    if ((rc = mut_need(m, &m->in, "ragged_indices", &src)) || (rc = mut_need(m, &m->out, "ragged_indices_buffer", &buf)))
        return rc;
    int64_t view = mut_int(m, "num_rows") * mut_int(m, "max_entries_per_row");
    view = view < 1 ? 1 : view;
    view = view < buf->shape[0] ? view : buf->shape[0];
    for (int64_t i = src->shape[0]; i < view; i++)
        i32(buf)[i] = -1;
    return DSV4_OK;
}

/* ---- get_prefill_chunk_plan ---- */

/* The gather width of a request is not clamped to W - 1 prefix rows
 * (g = query + prefix): long prefixes inflate the chunk area, so chunks
 * break early and chunk_M is too large. */
int mut_plan_gather_unclamped(mut_call *m)
{
    dsv4_tensor *seq, *qry, *plan, *nch;
    int rc;
    if ((rc = mut_need(m, &m->in, "prefill_seq_lens", &seq)) || (rc = mut_need(m, &m->in, "prefill_query_lens", &qry)) ||
        (rc = mut_need(m, &m->out, "chunk_plan", &plan)) || (rc = mut_need(m, &m->out, "num_chunks", &nch)))
        return rc;
    const int64_t c = mut_int(m, "compress_ratio"), W = mut_int(m, "window_size");
    const int comp = mut_int(m, "has_compressed") && c > 1;
    const int64_t nc = comp ? (mut_int(m, "max_model_len") + c - 1) / c : 0;
    const int64_t area = mut_int(m, "prefill_chunk_size") * (nc + W + mut_int(m, "max_num_batched_tokens"));
    const int64_t np = seq->shape[0];
    int64_t *out = (int64_t *)plan->data, n = 0;
    for (int64_t start = 0; start < np; n++) {
        int64_t mc = 0, mg = 0, end = start;
        for (; end < np; end++) {
            const int64_t S = i32(seq)[end], g = S; /* the bug: q + prefix, unclamped */
            const int64_t cc = comp ? S / c : 0, cmc = cc > mc ? cc : mc, cmg = g > mg ? g : mg;
            if (end > start && (end - start + 1) * (cmc + cmg) > area)
                break;
            mc = cmc;
            mg = cmg;
        }
        out[n * 4 + 0] = start;
        out[n * 4 + 1] = end;
        out[n * 4 + 2] = mc;
        out[n * 4 + 3] = mc + mg;
        start = end;
    }
    ((int64_t *)nch->data)[0] = n;
    return DSV4_OK;
}
