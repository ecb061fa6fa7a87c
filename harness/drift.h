/* drift.h - --baseline OLD.json: flag passing cases whose error grew since a
 * previous run's JSON report (README.md, "Drift").
 *
 * Metrics compared per (case, output):
 *   exact, index_set and mx outputs: "mismatches" (count of elements that
 *     differ; non-zero on a passing case only within a budget);
 *   float outputs: "max_ulp", "worst_ratio" (error / bound) and "nmse".
 * Drift = new > factor * old (default factor 2), or old == 0 and new > 0
 * (an output that was exact and now is not).  Cases that do not pass now,
 * or that the baseline lacks, are not compared. */
#ifndef DSV4_DRIFT_H
#define DSV4_DRIFT_H

#include <stdio.h>

#include "runner.h"

typedef struct dsv4_baseline dsv4_baseline;

/* The report must be a regular file of at most this many MiB (a report of
 * 1024 cases is about 1.3 MB). */
#define DSV4_BASELINE_MAX_MIB 64

int dsv4_baseline_load(const char *path, dsv4_baseline **out, dsv4_status *st);
/* text: a JSON report (as dsv4_write_json writes it); where names it in errors. */
int dsv4_baseline_parse(const char *text, const char *where, dsv4_baseline **out, dsv4_status *st);
void dsv4_baseline_free(dsv4_baseline *b);
/* Number of (case, output) pairs the baseline holds. */
int dsv4_baseline_size(const dsv4_baseline *b);

/* Compares rs with the baseline; each drifting case gets r->drift and one
 * "DRIFT ..." line on f (may be NULL).  Returns the number of drifting cases. */
int dsv4_drift_check(const dsv4_baseline *b, dsv4_case_result *rs, int n, double factor, FILE *f);

#endif
