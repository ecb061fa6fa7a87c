/* api.c - the public C API (include/dsv4check.h) over the harness: versions,
 * ops, suites and golden files, cases, their inputs, declared outputs and
 * reference outputs.  Judging and actuals files are api_judge.c's. */
#define _POSIX_C_SOURCE 200809L
#include "api_internal.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "golden.h"
#include "parallel.h"
#include "runner.h"
#include "version.h"

/* The public dtype and kind codes are the internal enums' values. */
_Static_assert((int)DSV4CHECK_BYTES == (int)DSV4_BYTES && (int)DSV4CHECK_DTYPE_COUNT == (int)DSV4_DTYPE_COUNT,
               "dtype codes");
_Static_assert((int)DSV4CHECK_PARAM_INTLIST == (int)DSV4_P_INTLIST, "param kinds");
_Static_assert(DSV4CHECK_MAX_DIMS == DSV4_MAX_DIMS, "rank");
_Static_assert((int)DSV4CHECK_ESKIP == (int)DSV4_ESKIP && (int)DSV4CHECK_ERUNTIME == (int)DSV4_ERUNTIME, "codes");

/* The status of a call, copied into the caller's buffer. */
int dsv4_api_finish(int rc, const dsv4_status *st, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", rc ? (st->msg[0] ? st->msg : "error") : "");
    return rc;
}

int dsv4_api_path_args(const char *fn, const char *path, const void *out, dsv4_status *st)
{
    if (!path || !out)
        return dsv4_fail(st, DSV4_EINPUT, "%s: NULL argument", fn);
    if (strlen(path) >= DSV4_PATH_MAX)
        return dsv4_fail(st, DSV4_EINPUT, "%.80s...: path longer than %d characters", path, DSV4_PATH_MAX - 1);
    return DSV4_OK;
}

static int finish(int rc, const dsv4_status *st, char *err, size_t errlen)
{
    return dsv4_api_finish(rc, st, err, errlen);
}

int dsv4check_api_version(void) { return DSV4CHECK_API_VERSION; }

const char *dsv4check_version(void) { return DSV4_VERSION " (" DSV4_GIT_REV ")"; }

void dsv4check_set_memory_limit(uint64_t bytes) { dsv4_set_memory_limit(bytes); }

const char *dsv4check_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < DSV4_DTYPE_COUNT ? dsv4_dtype_name((dsv4_dtype)dtype) : NULL;
}

int dsv4check_dtype_parse(const char *name)
{
    dsv4_dtype dt;
    return name && dsv4_dtype_parse(name, &dt) == DSV4_OK ? (int)dt : -1;
}

size_t dsv4check_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < DSV4_DTYPE_COUNT ? dsv4_dtype_size((dsv4_dtype)dtype) : 0;
}

/* ---- ops ---- */

int dsv4check_op_count(void) { return dsv4_op_count(); }

const char *dsv4check_op_name(int i) { return i >= 0 && i < dsv4_op_count() ? dsv4_op_at(i)->name : NULL; }

static const dsv4_op *find_op(const char *op) { return op ? dsv4_op_find(op) : NULL; }

int dsv4check_op_variant_count(const char *op)
{
    const dsv4_op *o = find_op(op);
    return o ? dsv4_op_variant_count(o) : -1;
}

const char *dsv4check_op_variant_name(const char *op, int k)
{
    const dsv4_op *o = find_op(op);
    return o && k >= 0 ? dsv4_op_variant_name(o, k) : NULL;
}

const char *dsv4check_op_variant_doc(const char *op, int k)
{
    const dsv4_op *o = find_op(op);
    return o && k >= 0 ? dsv4_op_variant_doc(o, k) : NULL;
}

int dsv4check_op_output_count(const char *op)
{
    const dsv4_op *o = find_op(op);
    if (!o)
        return -1;
    int n = 0;
    while (dsv4_op_outputs(o)[n].name)
        n++;
    return n;
}

static const dsv4_io_spec *op_output(const char *op, int k)
{
    int n = dsv4check_op_output_count(op);
    return k >= 0 && k < n ? &dsv4_op_outputs(find_op(op))[k] : NULL;
}

const char *dsv4check_op_output_name(const char *op, int k)
{
    const dsv4_io_spec *io = op_output(op, k);
    return io ? io->name : NULL;
}

int dsv4check_op_output_dtype(const char *op, int k)
{
    const dsv4_io_spec *io = op_output(op, k);
    return io ? (int)io->dtype : -1;
}

/* ---- suites and cases ---- */

static dsv4check_suite *suite_new(int n, dsv4_status *st)
{
    dsv4check_suite *s = calloc(1, sizeof *s);
    if (s)
        s->cases = calloc(n ? (size_t)n : 1, sizeof *s->cases);
    if (!s || !s->cases) {
        dsv4check_suite_free(s);
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory for %d cases", n);
        return NULL;
    }
    s->n = n;
    return s;
}

int dsv4check_suite_load(const char *path, dsv4check_suite **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    dsv4_suite ys;
    memset(&ys, 0, sizeof ys);
    if (!path || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_suite_load: NULL argument"), &st, err, errlen);
    *out = NULL;
    dsv4_h5_quiet();
    int rc = dsv4_suite_load(path, &ys, &st);
    dsv4check_suite *s = rc ? NULL : suite_new(ys.n, &st);
    if (!rc && !s)
        rc = DSV4_ERUNTIME;
    if (!rc) {
        snprintf(s->name, sizeof s->name, "%s", ys.name);
        for (int i = 0; i < ys.n; i++) {
            dsv4check_case *c = &s->cases[i];
            c->c = ys.cases[i];
            snprintf(c->origin, sizeof c->origin, "%s:%d:%d", c->c.file, c->c.line, c->c.col);
        }
        *out = s;
    }
    dsv4_suite_free(&ys);
    return finish(rc, &st, err, errlen);
}

int dsv4check_golden_load(const char *path, dsv4check_suite **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (out)
        *out = NULL;
    if (dsv4_api_path_args("dsv4check_golden_load", path, out, &st))
        return finish(st.code, &st, err, errlen);
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    const dsv4_op *op = NULL;
    int variant = 0;
    int rc = dsv4_golden_open(path, &g, &op, &variant, &st);
    dsv4check_suite *s = rc ? NULL : suite_new(1, &st);
    if (!rc && !s)
        rc = DSV4_ERUNTIME;
    if (!rc) {
        dsv4check_case *c = &s->cases[0];
        snprintf(s->name, sizeof s->name, "check");
        snprintf(c->c.name, sizeof c->c.name, "%s", g.case_name[0] ? g.case_name : path);
        snprintf(c->c.file, sizeof c->c.file, "%s", path);
        snprintf(c->c.golden, sizeof c->c.golden, "%s", path);
        snprintf(c->origin, sizeof c->origin, "%s", path);
        c->c.op = op;
        c->c.variant = variant;
        c->c.seed = g.seed;
        c->c.params = g.params;
        c->golden_file = 1;
        *out = s;
    }
    dsv4_golden_free(&g);
    return finish(rc, &st, err, errlen);
}

void dsv4check_suite_free(dsv4check_suite *s)
{
    if (!s)
        return;
    free(s->cases);
    free(s);
}

const char *dsv4check_suite_name(const dsv4check_suite *s) { return s ? s->name : NULL; }

int dsv4check_suite_count(const dsv4check_suite *s) { return s ? s->n : 0; }

const dsv4check_case *dsv4check_suite_case(const dsv4check_suite *s, int i)
{
    return s && i >= 0 && i < s->n ? &s->cases[i] : NULL;
}

const char *dsv4check_case_name(const dsv4check_case *c) { return c ? c->c.name : NULL; }
const char *dsv4check_case_op(const dsv4check_case *c) { return c ? c->c.op->name : NULL; }

const char *dsv4check_case_variant(const dsv4check_case *c)
{
    return c ? dsv4_op_variant_name(c->c.op, c->c.variant) : NULL;
}

uint64_t dsv4check_case_seed(const dsv4check_case *c) { return c ? c->c.seed : 0; }
const char *dsv4check_case_golden(const dsv4check_case *c) { return c ? c->c.golden : NULL; }
const char *dsv4check_case_origin(const dsv4check_case *c) { return c ? c->origin : NULL; }
int dsv4check_case_tag_count(const dsv4check_case *c) { return c ? c->c.n_tags : 0; }

const char *dsv4check_case_tag(const dsv4check_case *c, int k)
{
    return c && k >= 0 && k < c->c.n_tags ? c->c.tags[k] : NULL;
}

int dsv4check_case_param_count(const dsv4check_case *c) { return c ? c->c.params.n : 0; }

int dsv4check_case_param(const dsv4check_case *c, int k, dsv4check_param *out)
{
    if (!c || !out || k < 0 || k >= c->c.params.n)
        return DSV4CHECK_EINPUT;
    const dsv4_param *p = &c->c.params.p[k];
    *out = (dsv4check_param){p->name, (int)p->type, p->i, p->f, p->s, p->n, p->list};
    return DSV4CHECK_OK;
}

int dsv4check_case_selected(const dsv4check_case *c, const char *filter, int shard_k, int shard_n,
                            int *selected, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !selected || shard_n < 0 || (shard_n && (shard_k < 1 || shard_k > shard_n)))
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_selected: bad arguments (shard %d/%d)",
                                shard_k, shard_n), &st, err, errlen);
    /* As the CLI: a golden file's shard hashes its path, a case's its name. */
    *selected = !shard_n || dsv4_shard_of(c->golden_file ? c->c.golden : c->c.name, shard_n) == shard_k;
    if (*selected && filter) {
        regex_t re;
        int rc = regcomp(&re, filter, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[256];
            regerror(rc, &re, msg, sizeof msg);
            return finish(dsv4_fail(&st, DSV4_EINPUT, "--filter '%s': %s", filter, msg), &st, err, errlen);
        }
        char full[300];
        snprintf(full, sizeof full, "%s/%s", c->c.op->name, c->c.name);
        *selected = regexec(&re, c->c.name, 0, NULL, 0) == 0 || regexec(&re, full, 0, NULL, 0) == 0;
        regfree(&re);
    }
    return finish(DSV4_OK, &st, err, errlen);
}

int dsv4check_case_with_variant(const dsv4check_case *c, const char *variant, dsv4check_case **out,
                                char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !variant || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_with_variant: NULL argument"), &st, err, errlen);
    *out = NULL;
    int v = dsv4_op_variant(c->c.op, variant);
    if (v < 0)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "op %s has no variant '%s'", c->c.op->name, variant), &st, err,
                      errlen);
    dsv4check_case *d = malloc(sizeof *d);
    if (!d)
        return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory"), &st, err, errlen);
    *d = *c;
    d->c.variant = v;
    d->c.golden[0] = '\0'; /* the live reference of that variant */
    d->golden_file = 0;
    *out = d;
    return finish(DSV4_OK, &st, err, errlen);
}

void dsv4check_case_free(dsv4check_case *c) { free(c); }

/* ---- tensors ---- */

static dsv4_opctx case_ctx(const dsv4check_case *c)
{
    return dsv4_opctx_make(c->c.op, &c->c.params, c->c.variant, c->c.seed);
}

/* The case's golden file, read; g is freed by the caller. */
static int read_case_golden(const dsv4check_case *c, dsv4_golden *g, dsv4_status *st)
{
    memset(g, 0, sizeof *g);
    if (!c->c.golden[0])
        return dsv4_fail(st, DSV4_EINPUT, "case %s has no golden file", c->c.name);
    dsv4_h5_quiet();
    return dsv4_golden_read(c->c.golden, g, st);
}

int dsv4_api_single_op(const dsv4check_case *c, dsv4_status *st)
{
    if (!dsv4_chain_of(c->c.op))
        return DSV4_OK;
    return dsv4_fail(st, DSV4_EINPUT, "case %s is a layer chain (%s): this API runs and judges one op at a time; "
                     "a chain's stages run through `dsv4check run` (docs/semantics/chain.md)", c->c.name,
                     c->c.op->name);
}

static int load_inputs(const dsv4check_case *c, int source, dsv4_tensors *in, dsv4_status *st)
{
    int rc0 = dsv4_api_single_op(c, st);
    if (rc0)
        return rc0;
    if (source == DSV4CHECK_INPUTS_AUTO)
        source = c->golden_file ? DSV4CHECK_INPUTS_GOLDEN : DSV4CHECK_INPUTS_GENERATE;
    dsv4_opctx ctx = case_ctx(c);
    int rc;
    if (source == DSV4CHECK_INPUTS_GENERATE) {
        rc = c->c.op->generate(&ctx, in, st);
    } else if (source == DSV4CHECK_INPUTS_GOLDEN) {
        dsv4_golden g;
        rc = read_case_golden(c, &g, st);
        if (!rc) {
            *in = g.inputs; /* moved out of g */
            memset(&g.inputs, 0, sizeof g.inputs);
        }
        dsv4_golden_free(&g);
    } else {
        rc = dsv4_fail(st, DSV4_EINPUT, "unknown inputs source %d", source);
    }
    if (!rc && (rc = c->c.op->validate(&ctx, in, st)))
        dsv4_status_prefix(st, "%s: inputs", c->c.name);
    if (rc)
        dsv4_tensors_free(in);
    return rc;
}

static dsv4check_tensors *tensors_new(dsv4_status *st)
{
    dsv4check_tensors *t = calloc(1, sizeof *t);
    if (!t)
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    return t;
}

int dsv4check_case_inputs(const dsv4check_case *c, int source, dsv4check_tensors **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_inputs: NULL argument"), &st, err, errlen);
    *out = tensors_new(&st);
    int rc = *out ? load_inputs(c, source, &(*out)->ts, &st) : DSV4_ERUNTIME;
    if (rc) {
        dsv4check_tensors_free(*out);
        *out = NULL;
    }
    return finish(rc, &st, err, errlen);
}

/* The inputs a call works on: the caller's, or the case's own in *own. */
static int inputs_for(const dsv4check_case *c, const dsv4check_tensors *given, dsv4_tensors *own,
                      const dsv4_tensors **in, dsv4_status *st)
{
    memset(own, 0, sizeof *own);
    if (given) { /* made by dsv4check_case_inputs, which validated them */
        *in = &given->ts;
        return DSV4_OK;
    }
    *in = own;
    return load_inputs(c, DSV4CHECK_INPUTS_AUTO, own, st);
}

/* What fills a case's tensors from its inputs (ideal: see fill_reference). */
typedef int (*case_fill_fn)(const dsv4check_case *c, const dsv4_tensors *in, int ideal, dsv4_tensors *out,
                            dsv4_status *st);

/* The common body of dsv4check_case_outputs and _reference: the caller's
 * inputs or the case's own, a new tensor set in *out filled by fill; on an
 * error *out is NULL.  fn names the caller in the NULL-argument message. */
static int case_tensors(const char *fn, const dsv4check_case *c, const dsv4check_tensors *inputs, int ideal,
                        case_fill_fn fill, dsv4check_tensors **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "%s: NULL argument", fn), &st, err, errlen);
    dsv4_tensors own;
    const dsv4_tensors *in;
    *out = NULL;
    int rc = inputs_for(c, inputs, &own, &in, &st);
    if (!rc && !(*out = tensors_new(&st)))
        rc = DSV4_ERUNTIME;
    if (!rc)
        rc = fill(c, in, ideal, &(*out)->ts, &st);
    if (rc) {
        dsv4check_tensors_free(*out);
        *out = NULL;
    }
    dsv4_tensors_free(&own);
    return finish(rc, &st, err, errlen);
}

static int fill_declared(const dsv4check_case *c, const dsv4_tensors *in, int ideal, dsv4_tensors *out,
                         dsv4_status *st)
{
    (void)ideal;
    dsv4_opctx ctx = case_ctx(c);
    return c->c.op->alloc_outputs(&ctx, in, out, st);
}

int dsv4check_case_outputs(const dsv4check_case *c, const dsv4check_tensors *inputs, dsv4check_tensors **out,
                           char *err, size_t errlen)
{
    return case_tensors("dsv4check_case_outputs", c, inputs, 0, fill_declared, out, err, errlen);
}

/* The reference's outputs: ideal (in their golden dtypes), or rounded into
 * the kernel dtypes as the reference backend produces them (runner.c's
 * run_backend). */
static int fill_reference(const dsv4check_case *c, const dsv4_tensors *in, int ideal, dsv4_tensors *out,
                          dsv4_status *st)
{
    dsv4_opctx ctx = case_ctx(c);
    if (ideal)
        return dsv4_reference_outputs(c->c.op, &ctx, in, out, st);
    dsv4_tensors golden_dtypes = {0};
    int rc = c->c.op->alloc_outputs(&ctx, in, out, st);
    if (!rc)
        rc = dsv4_reference_outputs(c->c.op, &ctx, in, &golden_dtypes, st);
    if (!rc)
        dsv4_round_into(out, &golden_dtypes);
    dsv4_tensors_free(&golden_dtypes);
    return rc;
}

int dsv4check_case_reference(const dsv4check_case *c, const dsv4check_tensors *inputs, int ideal,
                             dsv4check_tensors **out, char *err, size_t errlen)
{
    return case_tensors("dsv4check_case_reference", c, inputs, ideal, fill_reference, out, err, errlen);
}

int dsv4check_case_expected(const dsv4check_case *c, dsv4check_tensors **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_expected: NULL argument"), &st, err, errlen);
    if (dsv4_api_single_op(c, &st))
        return finish(st.code, &st, err, errlen);
    if (!c->c.golden[0])
        return dsv4check_case_reference(c, NULL, 1, out, err, errlen);
    *out = tensors_new(&st);
    dsv4_golden g;
    int rc = *out ? read_case_golden(c, &g, &st) : DSV4_ERUNTIME;
    if (*out && !rc) {
        (*out)->ts = g.outputs; /* moved out of g */
        memset(&g.outputs, 0, sizeof g.outputs);
    }
    if (*out)
        dsv4_golden_free(&g);
    if (rc) {
        dsv4check_tensors_free(*out);
        *out = NULL;
    }
    return finish(rc, &st, err, errlen);
}

int dsv4check_tensors_count(const dsv4check_tensors *ts) { return ts ? ts->ts.n : 0; }

int dsv4check_tensors_get(const dsv4check_tensors *ts, int k, dsv4check_tensor *out)
{
    if (!ts || !out || k < 0 || k >= ts->ts.n)
        return DSV4CHECK_EINPUT;
    const dsv4_tensor *t = &ts->ts.t[k];
    *out = (dsv4check_tensor){t->name, (int)t->dtype, (int)t->output_dtype, t->ndim, t->shape, t->data, t->nbytes};
    return DSV4CHECK_OK;
}

int dsv4check_tensors_find(const dsv4check_tensors *ts, const char *name)
{
    for (int k = 0; ts && name && k < ts->ts.n; k++)
        if (strcmp(ts->ts.t[k].name, name) == 0)
            return k;
    return -1;
}

void dsv4check_tensors_free(dsv4check_tensors *ts)
{
    if (!ts)
        return;
    dsv4_tensors_free(&ts->ts);
    free(ts);
}
