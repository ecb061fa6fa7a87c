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
#include "special.h"

typedef struct dsv4_output_result {
    dsv4_policy pol;
    dsv4_cmp_result cmp;
    dsv4_errmap *map;          /* failing outputs with dsv4_run_opts.maps; else NULL */
    dsv4_special_split special; /* set when the case's special.has_lanes (special.h) */
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
    char note[512];                       /* chains: what ran where, the layer drift (chain.h) */
    dsv4_case_special special;            /* lanes touched by NaN/Inf inputs (special.h) */
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

/* A report file is written to a temporary file beside it and renamed over
 * it when complete (through a symbolic link, over what the link points
 * at), so that readers never see half a report; the temporary is removed
 * on any error. */
typedef struct dsv4_report_file {
    FILE *f;
    char path[DSV4_PATH_MAX + 64];
    char tmp[DSV4_PATH_MAX + 72];
} dsv4_report_file;
FILE *dsv4_report_open(dsv4_report_file *rf, const char *path, dsv4_status *st);
/* Closes rf->f and renames it into place; DSV4_EINPUT naming the path. */
int dsv4_report_commit(dsv4_report_file *rf, dsv4_status *st);

/* The files a run reads (suites, goldens), by device and inode: no report
 * may replace one of them under any name or link. */
typedef struct dsv4_input_file {
    uint64_t dev, ino;
    char path[DSV4_PATH_MAX];
} dsv4_input_file;
typedef struct dsv4_input_files {
    int n, cap;
    dsv4_input_file *f;
} dsv4_input_files;
/* Adds path (a file that does not exist is not added); -1 out of memory. */
int dsv4_input_files_add(dsv4_input_files *s, const char *path);
/* The input that path is the same file as (links followed), or NULL; s may
 * be NULL, and a path that does not exist is no input. */
const char *dsv4_input_files_match(const dsv4_input_files *s, const char *path);
void dsv4_input_files_free(dsv4_input_files *s);

/* s escaped for XML and HTML text and attribute values: < > & " as
 * entities, a newline as &#10;, other control characters as a space. */
void dsv4_xml_escape(FILE *f, const char *s);

/* s escaped as dsv4_xml_escape does, then the markup that follows it. */
void dsv4_xml_escape_then(FILE *f, const char *s, const char *markup);

#endif
