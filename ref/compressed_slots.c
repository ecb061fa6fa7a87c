/* compressed_slots.c - get_compressed_slot_mapping (see indices.h), the
 * compressed-cache slots with context parallelism (docs/semantics/indices.md
 * A5.4). */
#include "indices.h"

#include <inttypes.h>

/* Where compressed entry e of a request lands: its virtual page, its
 * offset inside the rank's share of that page, and whether this rank owns
 * it (the ranks take runs of cp_interleave entries in turn).  All
 * operands are non-negative, so floor and truncating division agree. */
static int cslot_locate(const dsv4_cslot_args *a, int64_t e, int64_t *page, int64_t *offset)
{
    const int64_t W = a->cp_world_size, I = a->cp_interleave, vpage = a->block_size * W;
    *page = e / vpage;
    const int64_t voff = e - *page * vpage;
    *offset = (voff / (W * I)) * I + voff % I;
    return (voff / I) % W == a->cp_rank;
}

int dsv4_cslot_check(const dsv4_cslot_args *a, dsv4_status *st)
{
    if (a->compress_ratio < 1 || a->block_size < 1 || a->cp_world_size < 1 || a->cp_interleave < 1 ||
        a->cp_rank < 0 || a->cp_rank >= a->cp_world_size)
        return dsv4_fail(st, DSV4_EINPUT, "compress_ratio, block_size, cp_world_size, cp_interleave >= 1 and "
                         "0 <= cp_rank < cp_world_size");
    if (a->query_start_loc[0] < 0)
        return dsv4_fail(st, DSV4_EINPUT, "query_start_loc[0] = %d is negative", a->query_start_loc[0]);
    for (int64_t r = 0; r < a->num_reqs; r++) {
        const int64_t qs = a->query_start_loc[r], qe = a->query_start_loc[r + 1];
        if (qe < qs || qe > a->out_len)
            return dsv4_fail(st, DSV4_EINPUT, "query_start_loc[%" PRId64 "..%" PRId64 "] = %" PRId64 ", %" PRId64
                             ": must be non-decreasing and end within the %" PRId64 "-entry output",
                             r, r + 1, qs, qe, a->out_len);
        if (a->seq_lens[r] < qe - qs)
            return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ": seq_len %d < query_len %" PRId64
                             " (a negative position reads the block table out of range)",
                             r, a->seq_lens[r], qe - qs);
        for (int64_t pos = a->seq_lens[r] - (qe - qs); pos < a->seq_lens[r]; pos++) {
            int64_t page, offset;
            if ((pos + 1) % a->compress_ratio || !cslot_locate(a, pos / a->compress_ratio, &page, &offset))
                continue;
            if (page >= a->bt_cols)
                return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ", position %" PRId64 ": page %" PRId64
                                 " is past the %" PRId64 "-column block table", r, pos, page, a->bt_cols);
            const int64_t slot = (int64_t)a->block_table[r * a->bt_cols + page] * a->block_size + offset;
            if (slot < INT32_MIN || slot > INT32_MAX)
                return dsv4_fail(st, DSV4_EINPUT, "request %" PRId64 ", position %" PRId64 ": slot %" PRId64
                                 " overflows the kernel's int32 product", r, pos, slot);
        }
    }
    return DSV4_OK;
}

int dsv4_ref_get_compressed_slot_mapping(const dsv4_cslot_args *a, int64_t *slot_mapping, dsv4_status *st)
{
    int rc = dsv4_cslot_check(a, st);
    if (rc)
        return rc;
    /* The whole buffer first, not just the batch's tokens [S20]. */
    for (int64_t i = 0; i < a->out_len; i++)
        slot_mapping[i] = -1;
    for (int64_t r = 0; r < a->num_reqs; r++) {
        const int64_t qs = a->query_start_loc[r], ql = a->query_start_loc[r + 1] - qs;
        const int64_t start = a->seq_lens[r] - ql;
        for (int64_t i = 0; i < ql; i++) {
            const int64_t pos = start + i;
            int64_t page, offset;
            if ((pos + 1) % a->compress_ratio == 0 && cslot_locate(a, pos / a->compress_ratio, &page, &offset))
                slot_mapping[qs + i] = (int64_t)a->block_table[r * a->bt_cols + page] * a->block_size + offset;
        }
    }
    return DSV4_OK;
}
