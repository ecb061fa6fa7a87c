/* report.h - a case's result (runner.c fills it in) and the reports written
 * from a run's results: console, JUnit XML, JSON (report.c) and HTML
 * (html.h).  Nothing here runs a case. */
#ifndef DSV4_REPORT_H
#define DSV4_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "../compare/compare.h"
#include "../ref/status.h"
#include "cases.h"
#include "errmap.h"

typedef struct dsv4_output_result {
    dsv4_policy pol;
    dsv4_cmp_result cmp;
    dsv4_errmap *map;          /* failing outputs with dsv4_run_opts.maps; else NULL */
} dsv4_output_result;

typedef struct dsv4_case_result {
    char name[192];
    char op[64];
    char variant[64];
    char origin[DSV4_PATH_MAX + 32]; /* "suite.yaml:12:5" or the golden path */
    char golden[DSV4_PATH_MAX];      /* compared against this golden, "" = live reference */
    uint64_t seed;
    int status;                      /* DSV4_OK, EFAIL, EINPUT, ERUNTIME, ESKIP */
    dsv4_verdict verdict;
    char error[1024];
    int n_outputs;
    dsv4_output_result outputs[DSV4_MAX_TENSORS];
    double seconds;
    char repro[DSV4_PATH_MAX + 256];
    char repro_file[DSV4_PATH_MAX + 200]; /* --repro-dir: the file written, "" if none */
    char replay[DSV4_PATH_MAX * 2 + 400]; /* the command that replays repro_file */
    char drift[512];                      /* --baseline: why an error grew, "" if not */
} dsv4_case_result;

/* Frees the error maps of a result (and sets them NULL). */
void dsv4_result_free_maps(dsv4_case_result *r);
/* PASS, WARN, FAIL, BAD-INPUT, SKIP or ERROR. */
const char *dsv4_status_word(const dsv4_case_result *r);

/* Console report of one result (one line, plus details on failure or -v). */
void dsv4_print_result(FILE *f, const dsv4_case_result *r, int verbose);
/* Summary table and the closing "summary: N passed, N failed, N skipped"
 * line.  Returns the exit code for the whole run. */
int dsv4_print_summary(FILE *f, const dsv4_case_result *rs, int n);
int dsv4_exit_code(const dsv4_case_result *rs, int n);

int dsv4_write_junit(const char *path, const char *suite, const char *impl,
                     const dsv4_case_result *rs, int n, dsv4_status *st);
int dsv4_write_json(const char *path, const char *suite, const char *impl,
                    const dsv4_case_result *rs, int n, dsv4_status *st);

/* s escaped for XML and HTML text and attribute values: < > & " as
 * entities, a newline as &#10;, other control characters as a space. */
void dsv4_xml_escape(FILE *f, const char *s);

#endif
