/* op.h - the op registry: one table of op definitions (like ggml's
 * test-backend-ops list).  Adding an op means one reference function, one
 * dsv4_op definition in ops/<family>/<op>.c named in ops/ops.def, cases and
 * goldens. */
#ifndef DSV4_OP_H
#define DSV4_OP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../compare/compare.h"
#include "../ref/status.h"
#include "../ref/tensor.h"
#include "params.h"

/* An op declares its parameters, inputs and outputs as schema text, one row
 * a line (each row a string literal ending in \n; rows several ops share are
 * string macros, concatenated), in the spirit of PyTorch's operator schemas:
 *
 *   params:   [gen] NAME  TYPE  DEFAULT  DOC
 *     TYPE     int | float | str | int[]
 *     DEFAULT  "= VALUE", VALUE as YAML writes it (128, 0.5, none, [1, 2]) or
 *              in double quotes ("" is the empty string), or "required"
 *     gen      the row is an input-generator option, not needed to check a
 *              golden; other rows start with four blanks, to keep the columns
 *   tensors:  NAME  DTYPE [golden=DTYPE]  DOC
 *     DTYPE    a dtype name of data/README.md (int32, bfloat16, ...): inputs,
 *              the storage dtype; outputs, what the kernel produces
 *     golden=  outputs only: the golden stores the ideal in that dtype
 *
 * DOC is the rest of the line.  Blanks separate the columns; line them up.
 * The registry parses an op's schemas once, on first use, into the rows
 * below (dsv4_op_params / _inputs / _outputs); a malformed row is a
 * programming error that dsv4_op_check_schemas names by op, table and line. */

/* A declared parameter.  def == NULL means required; otherwise the default,
 * written as YAML would write it ("128", "0.5", "none", "[1, 2]"). */
typedef struct dsv4_param_spec {
    const char *name;
    dsv4_ptype type;
    const char *def;
    const char *doc;
    int gen; /* 1: an input-generator option, not needed to check a golden */
} dsv4_param_spec;

/* A declared input or output tensor. */
typedef struct dsv4_io_spec {
    const char *name;
    dsv4_dtype dtype;        /* inputs: storage dtype; outputs: what the kernel produces */
    dsv4_dtype golden_dtype; /* outputs: what the golden stores (the ideal for
                                float outputs: float64/float32); NONE = dtype */
    const char *doc;
} dsv4_io_spec;

/* One named variant of an op: where the sources disagree, each reading is a
 * variant (docs/semantics/README.md).  rule points at the op's own
 * description of what the variant changes (a ref/ enum value or a small
 * struct of them), so op code reads the rule, never the variant's position. */
typedef struct dsv4_variant {
    const char *name;
    const char *doc;
    const void *rule;
} dsv4_variant;

/* The case-level context an op callback receives (dsv4_opctx_make). */
typedef struct dsv4_opctx {
    const dsv4_params *params; /* validated, defaults filled in */
    int variant;               /* index into the op's variants */
    uint64_t seed;
    const void *rule;          /* the variant's rule (dsv4_variant.rule) */
} dsv4_opctx;

/* Where an op's schemas are parsed to: written once under the registry's
 * lock (state 0 -> 1 parsed, or 2 malformed with msg), read without it after
 * state is seen non-zero.  DSV4_OP_SCHEMAS provides one per op, with a text
 * arena for the names, defaults and docs as large as the schemas together
 * (a parsed row never takes more bytes than its line). */
typedef struct dsv4_op_tables {
    atomic_int state;
    dsv4_param_spec params[DSV4_MAX_PARAMS + 1];
    dsv4_io_spec inputs[DSV4_MAX_TENSORS + 1];
    dsv4_io_spec outputs[DSV4_MAX_TENSORS + 1];
    char *text;
    size_t text_cap;
    char msg[512];
} dsv4_op_tables;

typedef struct dsv4_op {
    const char *name;
    const char *summary;
    const char *source;            /* spec citation(s): repo:path@commit */
    /* Terminated by {NULL}; [0] is the default (the seeds').  Read through
     * dsv4_op_variant_*. */
    const dsv4_variant *variants;
    /* Schema text (above); read the rows through dsv4_op_params,
     * dsv4_op_inputs and dsv4_op_outputs. */
    const char *param_schema;
    const char *input_schema;
    const char *output_schema;
    dsv4_op_tables *tables;

    /* Optional: derive parameters left at their "auto" default from the
     * other parameters (e.g. N from max_model_len), so that a golden stores
     * the values the op really ran with.  Idempotent. */
    int (*resolve)(dsv4_params *ps, dsv4_status *st);
    /* Deterministic inputs from params and seed (harness/rng.h). */
    int (*generate)(const dsv4_opctx *c, dsv4_tensors *in, dsv4_status *st);
    /* Shapes and values of inputs against params (golden inputs come from
     * files): returns DSV4_EINPUT naming the tensor and element. */
    int (*validate)(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st);
    /* Allocate every output (dsv4_tensors_add, dtype = io dtype) with its
     * shape, before any backend runs.  Outputs start filled as the op
     * defines (e.g. -1) or, when the op writes everything, poisoned. */
    int (*alloc_outputs)(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                         dsv4_status *st);
    /* The CPU reference.  Writes the outputs in their golden dtype: for exact
     * outputs the same as the kernel dtype, for float outputs the ideal. */
    int (*reference)(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out,
                     dsv4_status *st);
    /* The default tolerance policy of one output, derived from the op's error
     * analysis (documented beside the op). */
    int (*policy)(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                  dsv4_policy *pol, dsv4_status *st);
    /* Optional: mask of compared elements (DSV4_MASK_*: 0 unspecified, 1 exact,
     * 2 within the policy's budget, compare/compare.h); NULL = all. */
    int (*mask)(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                uint8_t *mask, int64_t n, dsv4_status *st);
    /* Optional: names a flat element's location for reports. */
    void (*locate)(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                   int64_t flat, char *buf, size_t len);
    /* Optional: a per-element absolute bound of one float output, added to
     * the policy's atol/rtol/ulp terms (bound[] starts zeroed; leave it so
     * for outputs without one).  For bounds that depend on the data, e.g.
     * attention's sum_i w_i |V_i| term. */
    int (*bound)(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                 double *bound, int64_t n, dsv4_status *st);
    /* Optional: after a comparison with mismatches, an op-specific hint
     * (may overwrite res->hint with something more precise). */
    void (*hint)(const dsv4_opctx *c, const dsv4_tensors *in, const char *output,
                 const dsv4_tensor *expected, const dsv4_tensor *actual, dsv4_cmp_result *res);
} dsv4_op;

/* The schema members of an op definition, from the char arrays
 * prefix_params, prefix_inputs and prefix_outputs (arrays, not pointers:
 * their sizes give the text arena), with the op's own parse storage. */
#define DSV4_OP_SCHEMAS(prefix)                                                                      \
    .param_schema = prefix##_params, .input_schema = prefix##_inputs,                               \
    .output_schema = prefix##_outputs,                                                              \
    .tables = &(dsv4_op_tables){                                                                    \
        .text = (char[sizeof prefix##_params + sizeof prefix##_inputs + sizeof prefix##_outputs]){0}, \
        .text_cap = sizeof prefix##_params + sizeof prefix##_inputs + sizeof prefix##_outputs}
/* The same and .variants = prefix_variants. */
#define DSV4_OP_TABLES(prefix) .variants = prefix##_variants, DSV4_OP_SCHEMAS(prefix)

/* The registry. */
int dsv4_op_count(void);
const dsv4_op *dsv4_op_at(int i);
const dsv4_op *dsv4_op_find(const char *name);
/* Variant index by name ("default" = 0); -1 if unknown. */
int dsv4_op_variant(const dsv4_op *op, const char *name);
/* The op's variants: how many, and one's name, doc and rule (NULL past the end). */
int dsv4_op_variant_count(const dsv4_op *op);
const char *dsv4_op_variant_name(const dsv4_op *op, int k);
const char *dsv4_op_variant_doc(const dsv4_op *op, int k);
const void *dsv4_op_variant_rule(const dsv4_op *op, int k);
/* The context of one case of op (variant an index from dsv4_op_variant). */
dsv4_opctx dsv4_opctx_make(const dsv4_op *op, const dsv4_params *params, int variant, uint64_t seed);
/* The op's rows, terminated by {NULL}; parsed on first use (thread-safe,
 * no heap).  A malformed schema gives no rows: see dsv4_op_check_schemas. */
const dsv4_param_spec *dsv4_op_params(const dsv4_op *op);
const dsv4_io_spec *dsv4_op_inputs(const dsv4_op *op);
const dsv4_io_spec *dsv4_op_outputs(const dsv4_op *op);
/* DSV4_OK, or DSV4_ERUNTIME naming the op, the table, the line and what is
 * wrong with it (dsv4_op_complete_params checks this first). */
int dsv4_op_check_schemas(const dsv4_op *op, dsv4_status *st);
/* Parse schema text into rows (at most cap, then the {NULL} terminator),
 * copying names, defaults and docs to *text (advanced; at most text_end).
 * outputs: a tensor table that may give golden=.  Errors name the line. */
int dsv4_schema_parse_params(const char *schema, dsv4_param_spec *rows, int cap, char **text,
                             const char *text_end, dsv4_status *st);
int dsv4_schema_parse_tensors(const char *schema, int outputs, dsv4_io_spec *rows, int cap, char **text,
                              const char *text_end, dsv4_status *st);
const dsv4_param_spec *dsv4_op_param(const dsv4_op *op, const char *name);
const dsv4_io_spec *dsv4_op_output(const dsv4_op *op, const char *name);
const dsv4_io_spec *dsv4_op_input(const dsv4_op *op, const char *name);

/* Check given params against op's declarations (unknown names, types) and
 * fill in defaults.  where names the origin for messages (e.g. file:line). */
int dsv4_op_complete_params(const dsv4_op *op, dsv4_params *ps, const char *where,
                            dsv4_status *st);
/* Parse a scalar YAML-ish text into a param of the declared type. */
int dsv4_param_parse(const dsv4_param_spec *spec, const char *text, dsv4_param *out,
                     dsv4_status *st);

#endif
