/* runner.h - execute one case (inputs -> implementation -> comparison) and
 * write the reports (console, JUnit, JSON). */
#ifndef DSV4_RUNNER_H
#define DSV4_RUNNER_H

#include <stdio.h>

#include "backend.h"
#include "cases.h"
#include "golden.h"

typedef struct dsv4_output_result {
    dsv4_policy pol;
    dsv4_cmp_result cmp;
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
} dsv4_case_result;

typedef struct dsv4_run_opts {
    const char *impl;       /* as given on the command line */
    int verbose;
    int seed_override;      /* --seed given: ignore goldens, live reference */
    uint64_t seed;
    const char *argv0;
    int rerun;              /* --rerun N: run the implementation N times, bitwise equal */
} dsv4_run_opts;

/* Run one YAML case against backend b: versus its golden when the case has
 * one (inputs from the golden; the generator is checked against them),
 * otherwise versus the live reference. */
void dsv4_run_case(const dsv4_case *c, const dsv4_backend *b, const dsv4_run_opts *o,
                   dsv4_case_result *r);
/* Check backend b against one golden file. */
void dsv4_check_golden(const char *path, const dsv4_backend *b, const dsv4_run_opts *o,
                       dsv4_case_result *r);

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

/* Make the expected-output set for a reference run: the outputs as
 * alloc_outputs made them, float outputs re-typed to their golden dtype. */
int dsv4_reference_outputs(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                           dsv4_tensors *exp, dsv4_status *st);
/* Fill in a golden's params (defaults of non-generator parameters). */
int dsv4_golden_params(const dsv4_op *op, dsv4_params *ps, const char *where, dsv4_status *st);

#endif
