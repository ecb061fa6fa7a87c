/* repro.h - a replayable file per failing case, for --repro-dir (repro.c). */
#ifndef DSV4_REPRO_H
#define DSV4_REPRO_H

#include "op.h"
#include "report.h"

/* Writes a schema-1 golden with the case's inputs and expected outputs, and
 * the implementation's outputs under /actual (read by nothing; for people
 * and h5py), as dir/<case>.h5; sets r->repro_file. */
int dsv4_write_repro(const char *dir, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, const dsv4_tensors *expected,
                     const dsv4_tensors *actual, dsv4_case_result *r, dsv4_status *st);

#endif
