/* dsv4check.h - the public C API of libdsv4 (libdsv4.so / libdsv4.a):
 * load a suite or a golden file, enumerate its cases, get a case's inputs
 * and declared outputs, run the CPU reference, judge outputs computed
 * anywhere (given as raw buffers) and get the verdict, its metrics and the
 * report text the CLI prints for that case.  An actuals writer makes the
 * file `dsv4check run/check --actual FILE` reads.  The Python package
 * (python/dsv4check) binds this header through ctypes; C and C++ test
 * suites link it with `pkg-config --cflags --libs dsv4check`.
 *
 * This header depends on the C standard library only.
 *
 * Versioning: DSV4CHECK_API_VERSION is bumped whenever a struct here or a
 * call's contract changes; dsv4check_api_version() returns the version the
 * library was built with, so a caller compiled against one header can
 * refuse another library.
 *
 * Errors: every fallible call returns one of the codes below (the CLI's
 * exit codes) and, when err is not NULL, writes a NUL-terminated message
 * of at most errlen bytes that names the file, case or tensor.  On success
 * err is left as "".  Handles are opaque; each *_free accepts NULL.
 *
 * Threads: handles may be used from several threads as long as one handle
 * is not used by two at once; dsv4check_set_memory_limit is process-wide. */
#ifndef DSV4CHECK_H
#define DSV4CHECK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4CHECK_API_VERSION 1

/* Return codes (= the CLI's exit codes). */
enum {
    DSV4CHECK_OK = 0,
    DSV4CHECK_EFAIL = 1,    /* a tolerance violation (a verdict's status only) */
    DSV4CHECK_EINPUT = 2,   /* bad usage or bad input: suite, golden, shapes, dtypes */
    DSV4CHECK_ERUNTIME = 3, /* runtime error, out of memory */
    DSV4CHECK_ESKIP = 77    /* not run (a verdict's status only) */
};

/* Dtype codes: the dtype table of data/README.md, in its order (the same
 * codes as include/dsv4_plugin.h). */
enum {
    DSV4CHECK_FLOAT64 = 0,
    DSV4CHECK_FLOAT32,
    DSV4CHECK_BFLOAT16,       /* raw bf16 bits, uint16 storage */
    DSV4CHECK_FLOAT16,        /* raw IEEE half bits, uint16 storage */
    DSV4CHECK_INT64,
    DSV4CHECK_INT32,
    DSV4CHECK_UINT8,
    DSV4CHECK_FLOAT8_E4M3FN,  /* raw codes, uint8 storage */
    DSV4CHECK_FLOAT8_E4M3FNUZ,
    DSV4CHECK_FLOAT8_E8M0FNU,
    DSV4CHECK_FLOAT4_E2M1FN_X2, /* two codes per byte, even element in the low nibble */
    DSV4CHECK_BYTES,
    DSV4CHECK_DTYPE_COUNT
};

/* Parameter kinds. */
enum { DSV4CHECK_PARAM_INT = 0, DSV4CHECK_PARAM_FLOAT, DSV4CHECK_PARAM_STRING, DSV4CHECK_PARAM_INTLIST };

/* Where a case's inputs come from (dsv4check_case_inputs). */
enum {
    DSV4CHECK_INPUTS_AUTO = 0,     /* a golden-file case: the file; a suite case: the generator */
    DSV4CHECK_INPUTS_GENERATE = 1, /* the generator (suite cases; what run checks goldens against) */
    DSV4CHECK_INPUTS_GOLDEN = 2    /* the case's golden file (an error when it has none) */
};

#define DSV4CHECK_MAX_DIMS 6

int dsv4check_api_version(void);
/* "VERSION (GIT REVISION)" of the library. */
const char *dsv4check_version(void);

/* Upper bound on one case's tensors together (default 8 GiB). */
void dsv4check_set_memory_limit(uint64_t bytes);

/* Dtype names as in data/README.md ("bfloat16", "float8_e4m3fn", ...);
 * NULL for an unknown code.  _parse returns the code, or -1. */
const char *dsv4check_dtype_name(int dtype);
int dsv4check_dtype_parse(const char *name);
/* Bytes per stored element (fp4x2: one byte = two values); 0 if unknown. */
size_t dsv4check_dtype_size(int dtype);

/* ---- ops ---- */

int dsv4check_op_count(void);
const char *dsv4check_op_name(int i);          /* NULL past the end */
/* Variants of an op (k = 0 is the default); -1 / NULL for an unknown op. */
int dsv4check_op_variant_count(const char *op);
const char *dsv4check_op_variant_name(const char *op, int k);
const char *dsv4check_op_variant_doc(const char *op, int k);
/* The op's declared outputs: name and the dtype the kernel produces. */
int dsv4check_op_output_count(const char *op);
const char *dsv4check_op_output_name(const char *op, int k);
int dsv4check_op_output_dtype(const char *op, int k);

/* ---- suites and cases ---- */

typedef struct dsv4check_suite dsv4check_suite;
typedef struct dsv4check_case dsv4check_case;

/* A YAML suite with its includes (README.md, "Writing cases"). */
int dsv4check_suite_load(const char *path, dsv4check_suite **out, char *err, size_t errlen);
/* A golden file (data/README.md) as a suite of one case, judged as
 * `dsv4check check FILE` judges it. */
int dsv4check_golden_load(const char *path, dsv4check_suite **out, char *err, size_t errlen);
void dsv4check_suite_free(dsv4check_suite *s);
const char *dsv4check_suite_name(const dsv4check_suite *s);
int dsv4check_suite_count(const dsv4check_suite *s);
/* Borrowed from the suite (valid until it is freed); NULL past the end. */
const dsv4check_case *dsv4check_suite_case(const dsv4check_suite *s, int i);

const char *dsv4check_case_name(const dsv4check_case *c);
const char *dsv4check_case_op(const dsv4check_case *c);
const char *dsv4check_case_variant(const dsv4check_case *c);
uint64_t dsv4check_case_seed(const dsv4check_case *c);
/* The golden file the case is judged against, "" when it has none (the
 * live reference is used then). */
const char *dsv4check_case_golden(const dsv4check_case *c);
/* "suite.yaml:LINE:COL", or the golden file's path. */
const char *dsv4check_case_origin(const dsv4check_case *c);
int dsv4check_case_tag_count(const dsv4check_case *c);
const char *dsv4check_case_tag(const dsv4check_case *c, int k);

typedef struct dsv4check_param {
    const char *name;
    int kind;            /* DSV4CHECK_PARAM_* */
    int64_t i;           /* INT */
    double f;            /* FLOAT */
    const char *s;       /* STRING */
    int n;               /* INTLIST length */
    const int64_t *list; /* INTLIST values */
} dsv4check_param;

/* The case's parameters with defaults filled in (pointers borrowed from
 * the case).  DSV4CHECK_EINPUT past the end. */
int dsv4check_case_param_count(const dsv4check_case *c);
int dsv4check_case_param(const dsv4check_case *c, int k, dsv4check_param *out);

/* Whether `dsv4check run --filter filter --shard shard_k/shard_n` would run
 * the case (filter NULL: all; shard_n 0: no sharding).  *selected = 0 or 1;
 * a bad regular expression is DSV4CHECK_EINPUT. */
int dsv4check_case_selected(const dsv4check_case *c, const char *filter, int shard_k, int shard_n,
                            int *selected, char *err, size_t errlen);

/* A copy of the case with another variant of its op, judged against the
 * live reference of that variant (no golden).  Free with dsv4check_case_free. */
int dsv4check_case_with_variant(const dsv4check_case *c, const char *variant, dsv4check_case **out,
                                char *err, size_t errlen);
/* Frees a case made by dsv4check_case_with_variant (never a borrowed one). */
void dsv4check_case_free(dsv4check_case *c);

/* ---- tensors ---- */

typedef struct dsv4check_tensors dsv4check_tensors;

typedef struct dsv4check_tensor {
    const char *name;
    int dtype;                   /* DSV4CHECK_* dtype code */
    int output_dtype;            /* expected float outputs stored as their ideal: the kernel's dtype; else -1 */
    int ndim;
    const int64_t *shape;
    void *data;                  /* contiguous row-major */
    size_t nbytes;
} dsv4check_tensor;

/* The case's inputs, from the generator or the golden file (source). */
int dsv4check_case_inputs(const dsv4check_case *c, int source, dsv4check_tensors **out, char *err,
                          size_t errlen);
/* The outputs an implementation must produce for these inputs (NULL: the
 * case's own), allocated as the op allocates them before any backend runs:
 * declared dtype, shape, and initial contents (some ops define them, e.g.
 * -1 padding or a cache updated in place). */
int dsv4check_case_outputs(const dsv4check_case *c, const dsv4check_tensors *inputs, dsv4check_tensors **out,
                           char *err, size_t errlen);
/* The CPU reference on these inputs (NULL: the case's own).  ideal = 0:
 * rounded into each output's kernel dtype (what `--impl ref` produces);
 * ideal = 1: float outputs as the double-precision ideal goldens store. */
int dsv4check_case_reference(const dsv4check_case *c, const dsv4check_tensors *inputs, int ideal,
                             dsv4check_tensors **out, char *err, size_t errlen);
/* The expected outputs a judgement compares with: the golden's, or the
 * ideal reference for a case without one. */
int dsv4check_case_expected(const dsv4check_case *c, dsv4check_tensors **out, char *err, size_t errlen);

int dsv4check_tensors_count(const dsv4check_tensors *ts);
/* Borrowed views (valid until the set is freed); DSV4CHECK_EINPUT past the end. */
int dsv4check_tensors_get(const dsv4check_tensors *ts, int k, dsv4check_tensor *out);
/* Index of a tensor by name, or -1. */
int dsv4check_tensors_find(const dsv4check_tensors *ts, const char *name);
void dsv4check_tensors_free(dsv4check_tensors *ts);

/* ---- judging ---- */

typedef struct dsv4check_verdict dsv4check_verdict;

typedef struct dsv4check_judge_opts {
    const char *impl;      /* the implementation's name in reproduce commands (NULL: "actual") */
    const char *argv0;     /* the program in reproduce commands (NULL: "dsv4check") */
    int verbose;           /* report every output's metrics, as -v */
    const char *repro_dir; /* NULL, or write DIR/<case>.h5 when the case fails, as --repro-dir */
} dsv4check_judge_opts;

/* Judges outputs (one per declared output: name, dtype and shape as
 * dsv4check_case_outputs gives them; data and nbytes) against the case's
 * golden, or its live reference.  Returns DSV4CHECK_OK whenever a verdict
 * was made (*out set; a failing or bad-input case is a verdict, not an
 * error), else an error for unusable arguments.  A missing, extra,
 * mistyped or misshaped output makes a BAD-INPUT verdict naming it. */
int dsv4check_judge(const dsv4check_case *c, const dsv4check_tensor *outputs, int n_outputs,
                    const dsv4check_judge_opts *opts, dsv4check_verdict **out, char *err, size_t errlen);

/* DSV4CHECK_OK (passed), _EFAIL, _EINPUT, _ERUNTIME or _ESKIP. */
int dsv4check_verdict_status(const dsv4check_verdict *v);
/* PASS, WARN, FAIL, BAD-INPUT, SKIP or ERROR (the CLI's words). */
const char *dsv4check_verdict_word(const dsv4check_verdict *v);
const char *dsv4check_verdict_case(const dsv4check_verdict *v);
/* The case's error message, "" when none. */
const char *dsv4check_verdict_error(const dsv4check_verdict *v);
/* The report the CLI prints for this case (its console lines). */
const char *dsv4check_verdict_report(const dsv4check_verdict *v);
double dsv4check_verdict_seconds(const dsv4check_verdict *v);

typedef struct dsv4check_metrics {
    const char *name;
    int verdict;            /* 0 pass, 1 warn (within budget), 2 fail */
    const char *kind;       /* exact, float, index_set, mx */
    const char *rule;       /* the tolerance rule's provenance */
    int64_t count, compared, mismatches;
    double max_abs, max_rel, max_ulp, worst_ratio; /* ratio = error / bound */
    double nmse, cosine;
    int has_first;          /* the first mismatch, when there is one: */
    const char *first_index;   /* "[i, j]" */
    const char *first_where;   /* decoded location, "" if none */
    double first_expected, first_actual;
    const char *hint;       /* a recognised bug pattern, "" if none */
    const char *message;    /* why it failed (shape, dtype, count), "" if none */
} dsv4check_metrics;

int dsv4check_verdict_output_count(const dsv4check_verdict *v);
/* Borrowed (valid until the verdict is freed); DSV4CHECK_EINPUT past the end. */
int dsv4check_verdict_output(const dsv4check_verdict *v, int k, dsv4check_metrics *out);
void dsv4check_verdict_free(dsv4check_verdict *v);

/* ---- actuals files (what `dsv4check run/check --actual FILE` reads) ---- */

typedef struct dsv4check_actuals dsv4check_actuals;

/* The actuals file of data/README.md: one HDF5 group per case name, one
 * dataset per output with the storage and `dtype` attribute goldens use.
 * Cases are collected (their outputs copied) and the whole file is written
 * by _commit to a temporary file beside path, then renamed over it; at most
 * 4096 cases. */
int dsv4check_actuals_open(const char *path, dsv4check_actuals **out, char *err, size_t errlen);
/* Adds one case's outputs (copied); op and variant (each may be NULL) are
 * recorded with the group so that the judge can refuse outputs of another
 * op.  A case name given twice is refused. */
int dsv4check_actuals_add(dsv4check_actuals *w, const char *case_name, const char *op, const char *variant,
                          const dsv4check_tensor *outputs, int n_outputs, char *err, size_t errlen);
/* Writes the file and frees w (also on error). */
int dsv4check_actuals_commit(dsv4check_actuals *w, char *err, size_t errlen);
/* Discards w without writing. */
void dsv4check_actuals_free(dsv4check_actuals *w);

#ifdef __cplusplus
}
#endif

#endif
