/* actual.h - actuals files: the outputs of an implementation computed
 * anywhere (a Python or Triton kernel, another test harness), judged by
 * `run --actual` and `check --actual` as if a plug-in had produced them
 * (data/README.md, "Actuals files", is the format):
 *
 *   /                  optional attr dsv4check_actuals (int 1)
 *   /<case name>       one group per case; optional string attrs op, variant
 *     <output name>    one dataset per output of the op: the op's declared
 *                      output dtype (`dsv4check list`), stored as goldens
 *                      store it (bf16 as uint16, fp8/e8m0/fp4x2 as uint8
 *                      raw bits) with the same dtype attribute; float32
 *                      data is accepted for a bfloat16 output when every
 *                      value is exactly a bfloat16
 *
 * The file is read with the golden reader's checks (golden_walk.c,
 * golden_read.c): hard links only, no external storage or virtual
 * datasets, chunked with Fletcher32, sizes bounded. */
#ifndef DSV4_ACTUAL_H
#define DSV4_ACTUAL_H

#include "../ref/status.h"
#include "../ref/tensor.h"
#include "op.h"

#define DSV4_ACTUALS_VERSION 1
/* At most this many cases in one file (groups), each with at most
 * DSV4_MAX_TENSORS outputs. */
#define DSV4_ACTUAL_MAX_CASES 4096
#define DSV4_ACTUAL_NAME_MAX 192 /* a case name with its NUL, as dsv4_case.name */

typedef struct dsv4_actual dsv4_actual;

/* Opens an actuals file: the plain-file and structure checks, the root
 * attributes, and the list of its case groups.  DSV4_EINPUT naming the
 * file (and the object) when it is not one. */
int dsv4_actual_open(const char *path, dsv4_actual **out, dsv4_status *st);
/* The same on an in-memory file image (name in messages only); for the
 * fuzzer (tests/fuzz/fuzz_actual.c). */
int dsv4_actual_open_image(const char *name, const void *buf, size_t len, dsv4_actual **out,
                           dsv4_status *st);
void dsv4_actual_close(dsv4_actual *a);

const char *dsv4_actual_path(const dsv4_actual *a);
/* Its case groups, sorted by name. */
int dsv4_actual_count(const dsv4_actual *a);
const char *dsv4_actual_case_at(const dsv4_actual *a, int i);
/* The index of the group of case_name, or -1. */
int dsv4_actual_find(const dsv4_actual *a, const char *case_name);

/* Fills out - the outputs op allocated for one case, with their names,
 * dtypes and shapes - from the group of case_name.  DSV4_ESKIP with
 * "not provided: ..." when the file has no such group; DSV4_EINPUT naming
 * file, case and tensor when the group's op or variant attribute names
 * another, an output is missing or extra, or a dtype or shape differs from
 * what the op produces. */
int dsv4_actual_read(const dsv4_actual *a, const char *case_name, const dsv4_op *op, int variant,
                     dsv4_tensors *out, dsv4_status *st);

/* One case of an actuals file to write. */
typedef struct dsv4_actual_case {
    const char *name;
    const char *op;      /* NULL: no op attribute */
    const char *variant; /* NULL: no variant attribute */
    const dsv4_tensors *outputs;
} dsv4_actual_case;

/* Writes an actuals file of n cases (atomically: a temporary file beside
 * path, renamed into place; an existing path is replaced). */
int dsv4_actual_write(const char *path, const dsv4_actual_case *cases, int n, dsv4_status *st);

#endif
