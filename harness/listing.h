/* listing.h - what `list` and `show` print: the ops, what an
 * implementation provides, the README's op table, a golden's contents and
 * the index of a folder of goldens (`list --goldens`). */
#ifndef DSV4_LISTING_H
#define DSV4_LISTING_H

#include <stdio.h>

#include "backend.h"
#include "golden.h"

/* Every op: variants (with b, those it lacks marked), params, inputs, outputs. */
void dsv4_list_ops(FILE *f, const dsv4_backend *b);
/* list --impl: which ops and variants b provides. */
void dsv4_list_impl(FILE *f, const dsv4_backend *b);
/* The README's table: op | variants (first = default) | source. */
void dsv4_list_markdown(FILE *f);
/* show: a golden's attributes, params and tensors (with the first values). */
void dsv4_show_golden(FILE *f, const char *path, const dsv4_golden *g);

/* list --goldens DIR: every golden DIR/NAME.h5 read (its schema; no op
 * checks), one line each, sorted by op, variant and case:
 *   OP  VARIANT  CASE  FILE  in: NAME DTYPE[SHAPE], ... -> out: ...
 * (a float output stored as its ideal adds "(kernel DTYPE)", the dtype an
 * actuals file holds), then "N goldens of M ops in DIR"; with json a JSON
 * array of objects {file, op, variant, case, seed, inputs, outputs} instead
 * (tensors {name, dtype, shape[, kernel_dtype]}).  keep (may be
 * NULL) selects goldens by case name and op.  A file that is not a golden
 * is reported on stderr (prefixed by prog) and makes the result
 * DSV4_EINPUT; the others are still listed. */
typedef int (*dsv4_golden_keep_fn)(const void *ctx, const char *case_name, const char *op);
int dsv4_list_goldens(FILE *f, const char *prog, const char *dir, int json, dsv4_golden_keep_fn keep,
                      const void *keep_ctx, dsv4_status *st);

#endif
