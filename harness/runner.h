/* runner.h - execute one case (inputs -> implementation -> comparison) and
 * write the reports (console, JUnit, JSON). */
#ifndef DSV4_RUNNER_H
#define DSV4_RUNNER_H

#include <stdio.h>

#include "backend.h"
#include "cases.h"
#include "golden.h"

/* Where the errors of one failing output lie, for the HTML report: the
 * tensor viewed as rows x last-dim columns, binned into at most
 * DSV4_MAP_ROWS x DSV4_MAP_COLS cells, and a histogram (errmap.c). */
#define DSV4_MAP_ROWS 32
#define DSV4_MAP_COLS 32
#define DSV4_HIST_BINS 16
typedef struct dsv4_errmap {
    int exact;                 /* 1: cell = fraction of differing elements;
                                * 0: cell = max |a - e| / bound (units of the tolerance) */
    int rows, cols;            /* cells used */
    int64_t nrows, ncols;      /* the tensor as nrows x ncols */
    int64_t row_step, col_step; /* tensor rows / columns per cell */
    float cell[DSV4_MAP_ROWS * DSV4_MAP_COLS]; /* -1: nothing compared in the cell */
    /* exact: bin 0 equal, bin k |a - e| in [2^(k-1), 2^k), last bin >= 2^14 or NaN;
     * float: bin 0 error 0, bin k err/bound in [2^(k-8), 2^(k-7)), first
     * non-zero bin from 0, last bin >= 2^7 or non-finite. */
    int64_t hist[DSV4_HIST_BINS];
} dsv4_errmap;

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
    char note[512];                       /* chains: what ran where, the layer drift (harness/chain.h) */
} dsv4_case_result;

typedef struct dsv4_run_opts {
    const char *impl;       /* as given on the command line */
    int verbose;
    int seed_override;      /* --seed given: ignore goldens, live reference */
    uint64_t seed;
    const char *argv0;
    int rerun;              /* --rerun N: run the implementation N times, bitwise equal */
    const char *repro_dir;  /* --repro-dir: write a replayable file per failing case */
    int maps;               /* compute error maps of failing outputs (--html) */
    const char *device_arg; /* " --device N" or "" for the reproduce commands */
} dsv4_run_opts;

/* Frees the error maps of a result (and sets them NULL). */
void dsv4_result_free_maps(dsv4_case_result *r);
/* The error map of actual vs expected under pol (mask may be NULL);
 * NULL when out of memory. */
dsv4_errmap *dsv4_errmap_make(const dsv4_tensor *expected, const dsv4_tensor *actual,
                              const dsv4_policy *pol, const uint8_t *mask);
/* Writes a schema-1 golden with the case's inputs and expected outputs, and
 * the implementation's outputs under /actual (read by nothing; for people
 * and h5py); sets r->repro_file. */
int dsv4_write_repro(const char *dir, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, const dsv4_tensors *expected,
                     const dsv4_tensors *actual, dsv4_case_result *r, dsv4_status *st);

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
