/* golden.h - HDF5 golden files, schema 1 (design.md section 4; the full
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
 * Datasets are chunked with Fletcher32 and deflate.  Writes go to a temp
 * file in the same directory, then rename(): a crash never leaves a half
 * golden, and an existing file is replaced only with force. */
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
/* Reads and validates the schema: version, required attributes, the dtype
 * attribute of every dataset matching its storage type, shapes within
 * limits.  Any checksum error or structural problem returns DSV4_EINPUT with
 * a message naming the file and the dataset or attribute. */
int dsv4_golden_read(const char *path, dsv4_golden *g, dsv4_status *st);
/* The same on an in-memory file image of len bytes (name is used in
 * messages only); for the fuzzer (tests/fuzz/). */
int dsv4_golden_read_image(const char *name, const void *buf, size_t len, dsv4_golden *g,
                           dsv4_status *st);
void dsv4_golden_free(dsv4_golden *g);

/* Silence HDF5's own error stack printing (call once at start). */
void dsv4_h5_quiet(void);

#endif
