/* identify.h - `dsv4check identify`: which variant of each op an
 * implementation computes.  For each op the implementation provides (a
 * plug-in's supports(), or the cases an actuals file holds), its outputs on
 * the inputs of the sources' cases of that op are compared with the
 * reference of EVERY variant of the op on the same inputs and parameters.
 * Per op it prints which variants it matches bit for bit (every compared
 * element equal to that variant's reference rounded into the kernel's
 * dtype, what --impl ref produces), which within their tolerance, which
 * not, and where the nearest failing variant first differs. */
#ifndef DSV4_IDENTIFY_H
#define DSV4_IDENTIFY_H

#include <stdio.h>

#include "../ref/status.h"

typedef struct dsv4_identify_opts {
    const char *impl;   /* as for run: ref, hip, LIB.so, or "actual:FILE" */
    int device;
    double timeout_s;   /* each call into a plug-in (child process) */
    const char *prog;   /* for messages */
    /* Selects cases by name and op (may be NULL: all). */
    int (*keep)(const void *ctx, const char *case_name, const char *op);
    const void *keep_ctx;
} dsv4_identify_opts;

/* sources: suites (*.yaml, *.yml) or golden files (anything else), n of
 * them.  Prints the report on out.  Returns DSV4_OK when each op the
 * implementation provides matches at least one variant within bound,
 * DSV4_EFAIL when one matches none, DSV4_ESKIP when it provides none of the
 * sources' ops, or the error of a source or backend that cannot be read
 * (st says which). */
int dsv4_identify(const dsv4_identify_opts *o, char *const *sources, int n, FILE *out, dsv4_status *st);

#endif
