/* cases.h - YAML test suites (libyaml), strict schema.
 *
 * Suite file format (documented in README.md, "Writing cases"):
 *
 *   suite: ci                       # required, a name
 *   golden_dir: ../data/ci          # optional, relative to this file
 *   defaults:                       # optional, merged into every case
 *     variant: default
 *     seed: 1
 *     params: {window_size: 128}
 *     tags: [ci]
 *   include: [ci/quant.yaml]        # optional: other suite files (relative
 *                                   # to this one), each with its own
 *                                   # golden_dir and defaults; cases or
 *                                   # include (or both) must be present
 *   cases:
 *     - name: decode_only           # required, unique in the suite
 *       op: combine_topk_swa_indices  # required, a registered op
 *       variant: default            # optional
 *       seed: 7                     # optional (default 0)
 *       params: {compress_ratio: 4, query_lens: [1, 1, 1]}
 *       sweep: {topk: [512, 2048]}  # optional: cartesian product
 *       golden: ../data/ci/x.h5     # optional; default golden_dir/<name>.h5
 *       tolerance:                  # optional policy overrides
 *         combined_indices: {atol: 0}   # per output, or directly {rtol: ..}
 *       tags: [decode]
 *
 * A sweep expands into one case per combination, named
 * "<name>[k1=v1,k2=v2]"; its golden file name replaces every character outside
 * [A-Za-z0-9._-] with '_'.
 * Seeds are decimal or 0x hex, 0 .. 2^64-1.  An int-list parameter is a
 * YAML sequence ([1, 2, 3]); a sweep over one is a sequence of sequences.
 * Defaults merge into each case: the case's variant and seed win, params
 * merge key by key, tags are the union, tolerance overrides of the defaults
 * come first.  A suite holds at most 1024 cases after expansion.
 * Errors (unknown key, wrong type, missing field, unknown op/variant/param,
 * duplicate name or key, YAML syntax) return DSV4_EINPUT with
 * "file:line:column: message", 1-based.
 *
 * Bounded input: suite files and includes must be regular files (a FIFO or
 * a device is refused without reading it); a suite with all its includes
 * may hold DSV4_YAML_MAX_BYTES bytes, DSV4_YAML_MAX_FILES file loads (a
 * file included twice counts twice) and DSV4_YAML_MAX_NODES nodes; nesting,
 * anchors and aliases are bounded per file (all in yaml_doc.h).  Each limit is
 * checked before the work it bounds, and its refusal names the file and
 * the line (of the include entry, for an included file that is refused). */
#ifndef DSV4_CASES_H
#define DSV4_CASES_H

#include "op.h"

#define DSV4_MAX_TAGS 8
#define DSV4_MAX_OVERRIDES 8
#define DSV4_PATH_MAX 512

/* One tolerance override: which output ("*" = all) and which fields. */
typedef struct dsv4_tol_override {
    char output[DSV4_NAME_MAX];
    unsigned set; /* bit mask of DSV4_TOL_* fields present */
    int line;     /* 1-based line in the suite file (defaults or case), for provenance */
    double atol, rtol, ulp, max_nmse, min_cosine, budget;
} dsv4_tol_override;

enum {
    DSV4_TOL_ATOL = 1u << 0,
    DSV4_TOL_RTOL = 1u << 1,
    DSV4_TOL_ULP = 1u << 2,
    DSV4_TOL_NMSE = 1u << 3,
    DSV4_TOL_COSINE = 1u << 4,
    DSV4_TOL_BUDGET = 1u << 5
};

/* Pointers to the six tolerance fields of s (a dsv4_tol_override or a
 * dsv4_policy: the same names), field i under the bit 1u << i above. */
#define DSV4_TOL_FIELDS(s) {&(s)->atol, &(s)->rtol, &(s)->ulp, &(s)->max_nmse, &(s)->min_cosine, &(s)->budget}
#define DSV4_TOL_FIELD_COUNT 6

typedef struct dsv4_case {
    char name[192];
    char file[DSV4_PATH_MAX]; /* the suite file */
    int line, col;            /* 1-based position of the case in it */
    const dsv4_op *op;
    int variant;
    uint64_t seed;
    dsv4_params params;       /* validated against op, defaults filled in */
    char golden[DSV4_PATH_MAX]; /* resolved path, "" if none */
    int n_overrides;
    dsv4_tol_override overrides[DSV4_MAX_OVERRIDES];
    int n_tags;
    char tags[DSV4_MAX_TAGS][48]; /* "contract:<name>" marks a production contract the case exceeds (README) */
} dsv4_case;

typedef struct dsv4_suite {
    char name[64];
    char file[DSV4_PATH_MAX];
    int n;
    dsv4_case *cases; /* malloc'd */
} dsv4_suite;

int dsv4_suite_load(const char *path, dsv4_suite *suite, dsv4_status *st);
/* The same from len bytes at buf; path names the suite in messages and
 * anchors its relative paths (include, golden_dir).  For the fuzzer. */
int dsv4_suite_load_buffer(const char *path, const void *buf, size_t len, dsv4_suite *suite,
                           dsv4_status *st);
void dsv4_suite_free(dsv4_suite *suite);

/* Apply the case's overrides for output name to pol (rule text updated to
 * say "override"). */
void dsv4_case_apply_overrides(const dsv4_case *c, const char *output, dsv4_policy *pol);
int dsv4_case_has_tag(const dsv4_case *c, const char *tag);

#endif
