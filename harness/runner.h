/* runner.h - execute one case: inputs -> implementation -> comparison, into
 * a dsv4_case_result (report.h writes the reports from it). */
#ifndef DSV4_RUNNER_H
#define DSV4_RUNNER_H

#include "backend.h"
#include "cases.h"
#include "golden.h"
#include "report.h"

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
    const dsv4_input_files *inputs; /* what the run reads: no repro file replaces one */
    dsv4_special_mode special;      /* --special: how lanes touched by NaN/Inf inputs count */
} dsv4_run_opts;

/* Run one YAML case against backend b: versus its golden when the case has
 * one (inputs from the golden; the generator is checked against them),
 * otherwise versus the live reference. */
void dsv4_run_case(const dsv4_case *c, const dsv4_backend *b, const dsv4_run_opts *o,
                   dsv4_case_result *r);
/* Check backend b against one golden file. */
void dsv4_check_golden(const char *path, const dsv4_backend *b, const dsv4_run_opts *o,
                       dsv4_case_result *r);

/* Compares every output of act (the implementation's) with expected under
 * op's policy for context c (cs: the case's tolerance overrides, or NULL;
 * maps: error maps of failing outputs) into r's outputs, verdict and
 * status (DSV4_OK or DSV4_EFAIL); when inputs hold NaN/Inf, mismatches are
 * split by lane and special says which lanes count (special.h).  A
 * comparison that cannot be made (an expected output missing or of another
 * shape) sets r's error and status and is returned. */
int dsv4_judge_outputs(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                       const dsv4_tensors *expected, const dsv4_tensors *act, const dsv4_case *cs, int maps,
                       dsv4_special_mode special, dsv4_case_result *r);

/* The command-line option that names implementation impl: "--impl IMPL",
 * or "--actual FILE" for the actual backend ("actual:FILE"); into buf. */
const char *dsv4_impl_option(const char *impl, char *buf, size_t len);

/* Make the expected-output set for a reference run: the outputs as
 * alloc_outputs made them, float outputs re-typed to their golden dtype. */
int dsv4_reference_outputs(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                           dsv4_tensors *exp, dsv4_status *st);
/* What the reference hands on as an implementation: each output of kern
 * (allocated in the kernel dtypes) filled from the same-named tensor of
 * ideal (the golden-dtype results), copied where the dtypes agree, else
 * rounded element by element (RNE); a tensor ideal lacks is left as is
 * (the comparison reports it missing). */
void dsv4_round_into(dsv4_tensors *kern, const dsv4_tensors *ideal);
/* Fill in a golden's params (defaults of non-generator parameters). */
int dsv4_golden_params(const dsv4_op *op, dsv4_params *ps, const char *where, dsv4_status *st);
/* Reads the golden at path into g and finds its op and variant index,
 * its params filled in (dsv4_golden_params); on an error *op is NULL and
 * g holds what was read (free it with dsv4_golden_free either way). */
int dsv4_golden_open(const char *path, dsv4_golden *g, const dsv4_op **op, int *variant, dsv4_status *st);

/* The op's locate callback for one output of one case, as a
 * dsv4_locate_fn (dsv4_op_locate) takes it: names a flat element index. */
typedef struct dsv4_op_locate_ctx {
    const dsv4_op *op;
    const dsv4_opctx *c;
    const dsv4_tensors *in;
    const char *output;
} dsv4_op_locate_ctx;
void dsv4_op_locate(const void *ctx, int64_t flat, char *buf, size_t len);

#endif
