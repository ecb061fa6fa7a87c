/* ops.h - the registered ops, one extern per op (defined in harness/ops_*.c). */
#ifndef DSV4_OPS_H
#define DSV4_OPS_H

#include "op.h"

extern const dsv4_op dsv4_op_combine_topk_swa_indices;
extern const dsv4_op dsv4_op_compute_global_topk_indices_and_lens;
extern const dsv4_op dsv4_op_compute_global_topk_ragged_indices_and_indptr;
extern const dsv4_op dsv4_op_build_prefill_topk_ragged_indices;
extern const dsv4_op dsv4_op_decode_swa_indices_and_lens;
extern const dsv4_op dsv4_op_copy_ragged_to_graph_buffers;
extern const dsv4_op dsv4_op_get_prefill_chunk_plan;

/* Shared helpers of the op files (harness/ops_common.c). */

/* A policy for bit-exact outputs. */
void dsv4_policy_exact(dsv4_policy *pol, const char *why);
/* Fill every byte of an output with a poison pattern, so that an element a
 * backend forgets to write is caught (and named) by the comparator. */
void dsv4_poison(dsv4_tensor *t);
/* Fetch an input of the given dtype and rank, or fail naming it. */
int dsv4_input(const dsv4_tensors *in, const char *name, dsv4_dtype dt, int ndim,
               const dsv4_tensor **out, dsv4_status *st);

#endif
