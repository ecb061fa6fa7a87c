/* attn_hints.h - attention-specific diagnostics for the comparator's
 * failure hints: rows off by a constant factor that matches a sink mistake
 * (docs/semantics/attention.md A8.1), and rows that must be exactly 0. */
#ifndef DSV4_ATTN_HINTS_H
#define DSV4_ATTN_HINTS_H

#include <stdint.h>

#include "compare.h"

/* Row facts of an attention output [T, H, D] computed by the reference. */
typedef struct dsv4_attn_rows {
    int64_t T, H, D;
    const double *sink_w;  /* [T, H]: the sink's weight e^{sink-m}/denominator */
    const int64_t *nvalid; /* [T]: valid keys of each token (0: output must be 0) */
} dsv4_attn_rows;

/* What one (token, head) row of actual is relative to expected. */
typedef enum dsv4_attn_row_kind {
    DSV4_ROW_OK = 0,          /* equal up to rounding */
    DSV4_ROW_SCALED,          /* actual = r * expected, r not 1 */
    DSV4_ROW_SINK_IGNORED,    /* r = 1/(1 - w): sink left out of the denominator */
    DSV4_ROW_SINK_TWICE,      /* r = 1/(1 + w): sink counted twice */
    DSV4_ROW_NOT_ZERO,        /* no valid key, yet actual is not exactly 0 */
    DSV4_ROW_OTHER            /* differs, no recognisable pattern */
} dsv4_attn_row_kind;

/* Classifies row (t, h); *ratio gets the least-squares factor r. */
dsv4_attn_row_kind dsv4_attn_classify_row(const dsv4_tensor *expected, const dsv4_tensor *actual,
                                          const dsv4_attn_rows *rows, int64_t t, int64_t h,
                                          double *ratio);

/* Writes res->hint when the mismatching rows show one of the patterns above
 * (sink ignored or doubled, rows that should be zero, one head or one token
 * scaled); leaves the generic hint otherwise. */
void dsv4_attn_hint(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_attn_rows *rows,
                    dsv4_cmp_result *res);

#endif
