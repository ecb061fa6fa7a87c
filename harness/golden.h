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

/* Refuses (DSV4_EINPUT) to replace an existing path unless force. */
int dsv4_golden_write(const char *path, const dsv4_golden *g, int force, dsv4_status *st);
/* A file of named tensor groups, one dataset per tensor stored as goldens
 * store them (the actuals file of `--actual`): written to a temporary file
 * beside path, group by group, and renamed over path by _commit (which
 * also frees w; _discard frees it and removes the temporary). */
typedef struct dsv4_h5_sets dsv4_h5_sets;
int dsv4_h5_sets_open(const char *path, dsv4_h5_sets **out, dsv4_status *st);
int dsv4_h5_sets_add(dsv4_h5_sets *w, const char *group, const dsv4_tensors *ts, dsv4_status *st);
int dsv4_h5_sets_commit(dsv4_h5_sets *w, dsv4_status *st);
void dsv4_h5_sets_discard(dsv4_h5_sets *w);
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
