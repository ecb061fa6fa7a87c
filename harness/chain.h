/* chain.h - composite cases: a whole layer run as a chain of registered
 * ops, with the comparator after every step (docs/semantics/chain.md).
 *
 * A chain definition (ops/chain/) names its stages and wires them: it
 * generates the layer's primary tensors into a pool, then calls
 * dsv4_chain_step once per op invocation, binding the op's inputs to pool
 * tensors and its outputs back to pool names; small glue (row and column
 * slices, reshapes, widening) moves data between steps exactly.  The
 * machinery here decides, per step, what the op is fed and what it is
 * compared with:
 *
 *   isolated    every step gets the reference chain's tensors (the
 *               reference's outputs rounded to the kernel dtypes); the
 *               implementation's output is compared and then dropped.
 *   propagated  every step gets what the implementation produced upstream;
 *               the expected output is the reference run on those same
 *               inputs, so a step is charged its own bound only, and the
 *               layer output's drift from the reference chain is reported.
 *
 * Steps whose op the implementation does not provide are run by the
 * reference.  Goldens: one schema-1 golden per step (<case>.<step>.h5),
 * each an ordinary golden of that op (`dsv4check check` replays it alone).
 *
 * The chain's own dsv4_op (desc) only describes it for the YAML loader and
 * `list`: its params, its primary tensors as inputs and its stages as
 * outputs; its callbacks are unset, the functions below run it. */
#ifndef DSV4_CHAIN_H
#define DSV4_CHAIN_H

#include <stdio.h>

#include "runner.h"

typedef struct dsv4_chain dsv4_chain;

typedef struct dsv4_chain_def {
    const dsv4_op *desc;
    /* The primary tensors (inputs, weights, caches before the step,
     * metadata) into the pool, from the completed params and the seed. */
    int (*generate)(dsv4_chain *x, const dsv4_params *ps, uint64_t seed);
    /* The stages, in the layer's order. */
    int (*run)(dsv4_chain *x, const dsv4_params *ps);
    const char *result; /* pool name of the layer's output (the drift) */
} dsv4_chain_def;

/* The chains (ops/chain/chains.h lists them). */
int dsv4_chain_count(void);
const dsv4_chain_def *dsv4_chain_at(int i);
/* The chain an op descriptor stands for; NULL for an ordinary op. */
const dsv4_chain_def *dsv4_chain_of(const dsv4_op *op);
/* The descriptor of the chain called name, or NULL. */
const dsv4_op *dsv4_chain_find_op(const char *name);

/* CLI hooks: run one chain case (against its step goldens when it has a
 * golden path, else the live reference), write its step goldens (into
 * outdir when given, else beside the case's golden path; *written counts
 * the files). */
void dsv4_chain_run_case(const dsv4_case *c, const dsv4_backend *b, const dsv4_run_opts *o,
                         dsv4_case_result *r);
int dsv4_chain_gen_case(const dsv4_case *c, const char *outdir, uint64_t seed, int force, int *written,
                        dsv4_status *st);
/* Non-zero when gen writes goldens for the chain case c (isolated mode;
 * propagated cases use the live reference, or the goldens an isolated case
 * of the same name wrote at their golden path). */
int dsv4_chain_has_goldens(const dsv4_case *c);

/* ---- for chain definitions ---------------------------------------------
 * Errors are sticky: after the first, every call below does nothing and
 * returns the error's code (dsv4_chain_failed), so wiring code may check
 * once per stage. */
int dsv4_chain_failed(const dsv4_chain *x);
int dsv4_chain_fail(dsv4_chain *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The stage the following steps belong to: one of dsv4_op_outputs(desc). */
int dsv4_chain_stage(dsv4_chain *x, const char *stage);

/* A new pool tensor (zeroed; replaces one of the same name) derived from
 * the pool tensors named in from (NULL-terminated; NULL: a primary
 * tensor): in propagated runs it carries their divergence. */
dsv4_tensor *dsv4_chain_new(dsv4_chain *x, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                            const char *const *from);
/* NULL (and a sticky error) if absent. */
const dsv4_tensor *dsv4_chain_get(dsv4_chain *x, const char *name);
/* dst = rows [r0, r1) of src (the leading dimension). */
int dsv4_chain_rows(dsv4_chain *x, const char *dst, const char *src, int64_t r0, int64_t r1);
/* dst = columns [c0, c1) of a 2-D src. */
int dsv4_chain_cols(dsv4_chain *x, const char *dst, const char *src, int64_t c0, int64_t c1);
/* dst = src with another shape of the same element count. */
int dsv4_chain_reshape(dsv4_chain *x, const char *dst, const char *src, int ndim, const int64_t *shape);
/* dst = float32 of a bfloat16 src (exact). */
int dsv4_chain_to_f32(dsv4_chain *x, const char *dst, const char *src);
/* Rows [r0, r0 + rows(src)) of dst (same trailing shape) = src, in place. */
int dsv4_chain_put_rows(dsv4_chain *x, const char *dst, const char *src, int64_t r0);
void dsv4_chain_drop(dsv4_chain *x, const char *name);
/* Non-zero when name came from (or downstream of) an implementation output
 * that differs from the reference chain's (propagated runs only). */
int dsv4_chain_diverged(dsv4_chain *x, const char *name);

/* Step parameters (recorded, then completed with the op's defaults). */
void dsv4_chain_pint(dsv4_chain *x, dsv4_params *ps, const char *name, int64_t v);
void dsv4_chain_pfloat(dsv4_chain *x, dsv4_params *ps, const char *name, double v);
void dsv4_chain_pstr(dsv4_chain *x, dsv4_params *ps, const char *name, const char *v);
void dsv4_chain_plist(dsv4_chain *x, dsv4_params *ps, const char *name, const int64_t *v, int n);

/* One op invocation.  in: {op input, pool tensor} pairs, terminated by
 * {NULL}; out: {op output, pool name} for the outputs later steps read
 * (every output is compared; unbound ones are then dropped). */
typedef struct dsv4_chain_io {
    const char *io, *pool;
} dsv4_chain_io;
int dsv4_chain_step(dsv4_chain *x, const char *step, const char *op, const char *variant, dsv4_params *ps,
                    const dsv4_chain_io *in, const dsv4_chain_io *out);

#endif
