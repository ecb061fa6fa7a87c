/* readpast.h - after a failing comparison: does the implementation read
 * outside an input?  Its inputs' guard regions hold poison (guard.h); a
 * rerun with one input's guards zeroed instead that gives other outputs
 * means the outputs depend on bytes outside that input, and the failing
 * outputs' hint says so ("reads past the end of input 'kv_cache' ..."). */
#ifndef DSV4_READPAST_H
#define DSV4_READPAST_H

#include "backend.h"
#include "report.h"

/* first: the outputs of the run that failed; outs/nout: their comparison
 * results (hints are set on the failing ones that the bytes outside an
 * input change).  Runs the implementation once more as before (a
 * difference there: nondeterministic, no input is blamed), once per input
 * with its guards zeroed, and for an input so found once per side (before
 * / after).  Plug-ins only (the reference and actuals files read nothing
 * outside); a rerun that errors blames nothing. */
void dsv4_readpast_attribute(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                             const dsv4_case_id *id, const dsv4_tensors *in, const dsv4_tensors *first,
                             dsv4_output_result *outs, int nout);

#endif
