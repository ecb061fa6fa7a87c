/* bench.h - `dsv4check bench`: the reference's speed (and the kernels', with
 * --impl) on production shapes, against the machine's measured copy
 * bandwidth and sgemm/dgemm rates.  Speed targets are checked here, never by
 * timed unit tests. */
#ifndef DSV4_BENCH_H
#define DSV4_BENCH_H

#include <regex.h>
#include <stdio.h>

#include "backend.h"

/* b may be NULL (reference only); re filters bench names (NULL = all);
 * no_ref (with b): time only b's kernels, not the reference (a device call's
 * minutes go to the kernels: the reference's 16- and 1-thread runs of a
 * production line can take far longer than the kernel's). */
int dsv4_bench_run(const dsv4_backend *b, const regex_t *re, int verbose, int no_ref, FILE *out);

#endif
