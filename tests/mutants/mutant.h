/* mutant.h - what every mutant of the catalogue (catalogue.def) shares.
 *
 * A mutant is a plug-in built from the reference with one planted bug.  The
 * plug-in glue (core.c) turns the ABI call into a mut_call: the op, the
 * case's variant and parameters, owned copies of the inputs (a mutant may
 * edit them: the harness never sees the copies) and views of the plug-in's
 * output buffers.  A mutant function mut_<id> fills the outputs, usually by
 * running the op's own reference (mut_run_reference, or mut_reference and
 * mut_store with a hook between) and then planting its bug, or by its own
 * computation from the ref/ functions where the bug sits inside one. */
#ifndef DSV4_MUTANT_H
#define DSV4_MUTANT_H

#include <stdint.h>

#include "../../harness/op.h"
#include "../../ref/numerics.h"
#include "../../ref/status.h"
#include "../../ref/tensor.h"
#include "plugin_abi.h"

typedef struct mut_call {
    const dsv4_op *op;
    int variant;         /* the case's variant (index into op's variants) */
    dsv4_params params;  /* the case's parameters, complete */
    dsv4_tensors in;     /* owned copies of the inputs */
    dsv4_tensors out;    /* views of the plug-in's outputs (not owned) */
    dsv4_status *st;
} mut_call;

/* The case context under variant v (m->variant for the case's own). */
dsv4_opctx mut_ctx(const mut_call *m, int variant);
/* Variant index of op by name; -1 if the op has none of that name. */
int mut_variant(const mut_call *m, const char *name);
/* Is the case's variant the one named? */
int mut_is_variant(const mut_call *m, const char *name);

/* The op's reference under variant v on m->in: every output in its golden
 * dtype (the ideal for float outputs) into *ideal, which the caller frees. */
int mut_reference(const mut_call *m, int variant, dsv4_tensors *ideal);
/* ideal -> m->out, rounded into each output's kernel dtype as the ref
 * backend does (RNE; same dtype: copied). */
void mut_store(mut_call *m, const dsv4_tensors *ideal);
/* Both, under the case's variant: the faithful plug-in the bug goes into. */
int mut_run_reference(mut_call *m);
/* The same under another variant's rule: the kernel implements variant v
 * where the case asks for its own. */
int mut_run_reference_as(mut_call *m, const char *variant);

/* The reference, then one bf16 ulp more (in magnitude) on every element
 * of the bf16 output named: the one-ulp bias every float bound must catch. */
int mut_run_reference_biased(mut_call *m, const char *output);
/* The same one ulp toward +inf (up for positive values, toward zero for
 * negative ones): a bias of one sign, as a store that rounds up has. */
int mut_run_reference_shifted_up(mut_call *m, const char *output);

/* Tensors by name; NULL if absent. */
dsv4_tensor *mut_out(mut_call *m, const char *name);
dsv4_tensor *mut_in(mut_call *m, const char *name);
/* A required tensor: fails (DSV4_EINPUT) naming it when absent. */
int mut_need(mut_call *m, dsv4_tensors *ts, const char *name, dsv4_tensor **t);
/* Parameters (0 / 0.0 / "" when absent). */
int64_t mut_int(const mut_call *m, const char *name);
double mut_float(const mut_call *m, const char *name);
/* The reference with an int parameter changed for this call only (e.g. an
 * off-by-one offset, or a flag the kernel ignores). */
int mut_run_reference_with_int(mut_call *m, const char *name, int64_t v);

/* A bug in how the kernel reads one input: edit changes the owned copy t
 * of the input named (returning DSV4_OK, or an error it set in m->st),
 * then the reference runs on the edited inputs.  Fails (DSV4_EINPUT) naming
 * the input when it is absent. */
typedef int (*mut_edit_fn)(mut_call *m, dsv4_tensor *t);
int mut_run_reference_on(mut_call *m, const char *input, mut_edit_fn edit);

/* RoPE at the token's own position instead of its group start (pos // c)
 * * c, c = compress_ratio: row p + c - 1 of input cos_sin_cache copied into
 * every group start p, then the reference. */
int mut_run_reference_rope_at_pos(mut_call *m);
/* RoPE at position pos - 1 (0 stays 0): input positions edited, then the
 * reference. */
int mut_run_reference_positions_off1(mut_call *m);

/* Element access as the codecs of ref/numerics.h decode and encode them. */
double mut_get(const dsv4_tensor *t, int64_t i);
void mut_set(dsv4_tensor *t, int64_t i, double v);
int64_t mut_numel(const dsv4_tensor *t);

/* The bf16 value one ulp above x in magnitude (bits + 1 away from zero;
 * 0 -> the smallest subnormal): the one-ulp bias. */
uint16_t mut_bf16_next_up(uint16_t bits);

/* One mutant per catalogue line; the functions live in the family files. */
#define MUTANT(id, op, variants, expect, planted, killers) int mut_##id(mut_call *m);
#include "catalogue.def"
#undef MUTANT

/* The plug-in of mutant id (entry.c, built once per mutant). */
const dsv4_plugin *dsv4_mutant_plugin(const char *id);

#endif
