/* golden.h - HDF5 golden files, schema 1 (the full
 * schema is data/README.md).
 *
 *   /                 attrs dsv4check_schema (int 1), op, variant, case,
 *                           seed (int64), generator, created (strings)
 *   /params           one attribute per parameter: int64 scalar, float64
 *                     scalar, string, or 1-D int64 array (int list)
 *   /inputs/<name>    one dataset per tensor, storage type (bf16/f16 as
 *   /outputs/<name>   uint16, fp8/e8m0/fp4x2/bytes as uint8), attr dtype =
 *                     logical dtype name; outputs may carry output_dtype
 *
 * Datasets are chunked with Fletcher32 and deflate.  The file is built in
 * memory, written to a temp file in the same directory, synced, then
 * renamed: a crash never leaves a half golden, and an existing file is
 * replaced only with force. */
#ifndef DSV4_GOLDEN_H
#define DSV4_GOLDEN_H

#include <stdint.h>

#include "../ref/status.h"
#include "../ref/tensor.h"
#include "op.h"
#include "params.h"

#define DSV4_SCHEMA_VERSION 1

typedef struct dsv4_golden {
    int schema;
    char op[64];
    char variant[64];
    char case_name[192];
    uint64_t seed;
    char generator[128];
    char created[40];
    dsv4_params params;
    dsv4_tensors inputs;
    dsv4_tensors outputs;
} dsv4_golden;

/* The header of a golden of one case of op: schema, op and variant names,
 * case name, seed, a copy of params, generator ("dsv4check VERSION (REV)"
 * and how, e.g. " --repro-dir") and created (now, UTC). */
void dsv4_golden_describe(dsv4_golden *g, const dsv4_op *op, int variant, const char *case_name,
                          uint64_t seed, const dsv4_params *params, const char *how);
/* The file name (without ".h5") of a case's golden: the case name with every
 * byte outside [A-Za-z0-9._-] replaced by '_' ("a[k=1]" -> "a_k_1_"),
 * cut to len - 1 bytes.  Used for golden_dir, gen -o and --repro-dir. */
void dsv4_golden_file_name(const char *case_name, char *out, size_t len);

/* Refuses (DSV4_EINPUT) to replace an existing path unless force. */
int dsv4_golden_write(const char *path, const dsv4_golden *g, int force, dsv4_status *st);
/* A repro file (--repro-dir): the golden g (replacing path) plus the
 * implementation's outputs under /actual, with a note; the reader ignores
 * /actual. */
int dsv4_golden_write_repro(const char *path, const dsv4_golden *g, const dsv4_tensors *actual,
                            dsv4_status *st);
/* Reads a golden and checks it against its op; what run, check and show
 * use.  The file (dsv4_golden_read_schema) and then the op: known op and
 * variant; /params of the declared types, finite, every required one
 * present; no input or output the op does not declare; the op's validate()
 * on the inputs; outputs with exactly the names, dtypes, output_dtype and
 * shapes the op gives these inputs; and, when the file holds every
 * generator parameter the op requires, the inputs the generator makes from
 * /params and the seed have the file's names, dtypes and shapes (so a
 * parameter validate() does not read, such as the GEMM's K, cannot
 * disagree with the tensors).  DSV4_EINPUT naming the file and the place. */
int dsv4_golden_read(const char *path, dsv4_golden *g, dsv4_status *st);
/* The file alone, schema 1 (data/README.md), for any op name: a regular
 * HDF5 file with only hard links, each object linked once, no external
 * storage or virtual datasets anywhere; the required attributes, strings of
 * valid UTF-8 without NUL bytes; every dataset's dtype attribute matching
 * its storage type, shape within the memory limit, chunks complete and
 * decoded by our own pipeline (Fletcher32 checked, inflated sizes bounded
 * before inflating).  DSV4_EINPUT naming the file and the dataset or
 * attribute. */
int dsv4_golden_read_schema(const char *path, dsv4_golden *g, dsv4_status *st);
/* dsv4_golden_read on an in-memory file image of len bytes (name is used in
 * messages only); for the fuzzer (tests/fuzz/). */
int dsv4_golden_read_image(const char *name, const void *buf, size_t len, dsv4_golden *g,
                           dsv4_status *st);
void dsv4_golden_free(dsv4_golden *g);

/* For `gen`: SIGINT, SIGTERM and SIGHUP remove the temporary file being
 * written before the process dies of the signal; SIGXFSZ is ignored so
 * that a file-size limit is a reported write error. */
void dsv4_golden_catch_signals(void);
/* Removes dir's ".NAME.h5.tmp.PID" files whose PID is not a live process
 * (left by a gen that was killed); *removed counts them.  A missing dir
 * is not an error. */
int dsv4_golden_remove_stale_temps(const char *dir, int *removed, dsv4_status *st);
/* Non-zero when paths a and b name one file: equal text, or the same file
 * name in folders that are one folder (stat; folders that do not exist yet
 * compare by text). */
int dsv4_golden_same_path(const char *a, const char *b);
/* Refuses (DSV4_EINPUT) a --repro-dir that is the folder of one of the n
 * files (the run's goldens and .h5 inputs; NULL or "" entries skipped):
 * repro files are named after cases and could replace them. */
int dsv4_golden_check_repro_dir(const char *dir, const char *const *files, int n, dsv4_status *st);

/* Silence HDF5's own error stack printing (call once at start). */
void dsv4_h5_quiet(void);

#endif
