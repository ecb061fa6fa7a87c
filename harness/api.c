/* api.c - the public C API (include/dsv4check.h) over the harness: suites,
 * cases, inputs, the reference, judging given outputs, actuals files.
 *
 * Judging runs the very code path of `dsv4check run` / `check` (runner.c),
 * with an in-process implementation that hands over the caller's buffers,
 * so the verdict and the report text are the CLI's for that case. */
#define _POSIX_C_SOURCE 200809L
#include "../include/dsv4check.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actual.h"
#include "golden.h"
#include "parallel.h"
#include "runner.h"

#ifndef DSV4_VERSION
#define DSV4_VERSION "0"
#endif
#ifndef DSV4_GIT_REV
#define DSV4_GIT_REV "unknown"
#endif

/* The public dtype and kind codes are the internal enums' values. */
_Static_assert((int)DSV4CHECK_BYTES == (int)DSV4_BYTES && (int)DSV4CHECK_DTYPE_COUNT == (int)DSV4_DTYPE_COUNT,
               "dtype codes");
_Static_assert((int)DSV4CHECK_PARAM_INTLIST == (int)DSV4_P_INTLIST, "param kinds");
_Static_assert(DSV4CHECK_MAX_DIMS == DSV4_MAX_DIMS, "rank");
_Static_assert((int)DSV4CHECK_ESKIP == (int)DSV4_ESKIP && (int)DSV4CHECK_ERUNTIME == (int)DSV4_ERUNTIME, "codes");

struct dsv4check_case {
    dsv4_case c;
    int golden_file;       /* loaded from a golden file: judged as `check FILE` */
    char origin[DSV4_PATH_MAX + 32];
};

struct dsv4check_suite {
    char name[64];
    int n;
    dsv4check_case *cases;
};

struct dsv4check_tensors {
    dsv4_tensors ts;
};

struct dsv4check_verdict {
    dsv4_case_result r;
    char *report;
};

/* The cases added so far, with copies of their outputs: the actuals file is
 * built whole (actual.c) at the commit. */
typedef struct actual_entry {
    char name[DSV4_ACTUAL_NAME_MAX];
    char op[64], variant[64];
    int has_op, has_variant;
    dsv4_tensors outputs;
} actual_entry;

struct dsv4check_actuals {
    char path[DSV4_PATH_MAX];
    int n, cap;
    actual_entry *cases;
};

/* The status of a call, copied into the caller's buffer. */
static int finish(int rc, const dsv4_status *st, char *err, size_t errlen)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s", rc ? (st->msg[0] ? st->msg : "error") : "");
    }
    return rc;
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
    while (o->outputs[n].name)
        n++;
    return n;
}

static const dsv4_io_spec *op_output(const char *op, int k)
{
    int n = dsv4check_op_output_count(op);
    return k >= 0 && k < n ? &find_op(op)->outputs[k] : NULL;
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
    if (!path || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_golden_load: NULL argument"), &st, err, errlen);
    *out = NULL;
    if (strlen(path) >= DSV4_PATH_MAX)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "%.80s...: path longer than %d characters", path,
                                DSV4_PATH_MAX - 1), &st, err, errlen);
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    int rc = dsv4_golden_read(path, &g, &st);
    const dsv4_op *op = rc ? NULL : dsv4_op_find(g.op);
    int variant = 0;
    if (!rc && !op)
        rc = dsv4_fail(&st, DSV4_EINPUT, "%s: unknown op '%s' (see `dsv4check list`)", path, g.op);
    if (!rc && (variant = dsv4_op_variant(op, g.variant)) < 0)
        rc = dsv4_fail(&st, DSV4_EINPUT, "%s: op %s has no variant '%s'", path, g.op, g.variant);
    if (!rc)
        rc = dsv4_golden_params(op, &g.params, path, &st);
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

static int load_inputs(const dsv4check_case *c, int source, dsv4_tensors *in, dsv4_status *st)
{
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

int dsv4check_case_outputs(const dsv4check_case *c, const dsv4check_tensors *inputs, dsv4check_tensors **out,
                           char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_outputs: NULL argument"), &st, err, errlen);
    dsv4_tensors own;
    const dsv4_tensors *in;
    dsv4_opctx ctx = case_ctx(c);
    *out = NULL;
    int rc = inputs_for(c, inputs, &own, &in, &st);
    if (!rc && !(*out = tensors_new(&st)))
        rc = DSV4_ERUNTIME;
    if (!rc)
        rc = c->c.op->alloc_outputs(&ctx, in, &(*out)->ts, &st);
    if (rc) {
        dsv4check_tensors_free(*out);
        *out = NULL;
    }
    dsv4_tensors_free(&own);
    return finish(rc, &st, err, errlen);
}

/* The reference's ideal outputs rounded into the kernel dtypes, as the
 * reference backend produces them (runner.c's run_backend). */
static int reference_kernel_dtypes(const dsv4check_case *c, const dsv4_tensors *in, dsv4_tensors *out,
                                   dsv4_status *st)
{
    dsv4_opctx ctx = case_ctx(c);
    dsv4_tensors ideal = {0};
    int rc = c->c.op->alloc_outputs(&ctx, in, out, st);
    if (!rc)
        rc = dsv4_reference_outputs(c->c.op, &ctx, in, &ideal, st);
    for (int k = 0; !rc && k < out->n; k++) {
        dsv4_tensor *t = &out->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(&ideal, t->name);
        if (e->dtype == t->dtype) {
            memcpy(t->data, e->data, t->nbytes);
            continue;
        }
        int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            dsv4_tensor_set(t, i, dsv4_tensor_get(e, i));
    }
    dsv4_tensors_free(&ideal);
    return rc;
}

int dsv4check_case_reference(const dsv4check_case *c, const dsv4check_tensors *inputs, int ideal,
                             dsv4check_tensors **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_reference: NULL argument"), &st, err, errlen);
    dsv4_tensors own;
    const dsv4_tensors *in;
    dsv4_opctx ctx = case_ctx(c);
    *out = NULL;
    int rc = inputs_for(c, inputs, &own, &in, &st);
    if (!rc && !(*out = tensors_new(&st)))
        rc = DSV4_ERUNTIME;
    if (!rc)
        rc = ideal ? dsv4_reference_outputs(c->c.op, &ctx, in, &(*out)->ts, &st)
                   : reference_kernel_dtypes(c, in, &(*out)->ts, &st);
    if (rc) {
        dsv4check_tensors_free(*out);
        *out = NULL;
    }
    dsv4_tensors_free(&own);
    return finish(rc, &st, err, errlen);
}

int dsv4check_case_expected(const dsv4check_case *c, dsv4check_tensors **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_case_expected: NULL argument"), &st, err, errlen);
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

/* ---- judging: the caller's buffers as an in-process implementation ---- */

typedef struct given_outputs {
    const dsv4check_tensor *t;
    int n;
} given_outputs;

/* The buffers of the judgement running on this thread (judge() sets and
 * clears it around the run): a plug-in call carries no context pointer. */
static _Thread_local const given_outputs *given_now;

static int given_supports(const char *op, const char *variant)
{
    (void)op, (void)variant;
    return given_now != NULL;
}

static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* One declared output from the given buffer of its name. */
static int take_output(dsv4_plugin_tensor *o, const dsv4check_tensor *g, char *err, size_t errlen)
{
    char want[96], got[96];
    int same_shape = g->ndim == o->ndim;
    for (int d = 0; same_shape && d < o->ndim; d++)
        same_shape = g->shape[d] == o->shape[d];
    if (g->dtype != o->dtype) {
        const char *gd = dsv4check_dtype_name(g->dtype);
        snprintf(err, errlen, "output '%s' is %s, the op produces %s", o->name, gd ? gd : "an unknown dtype",
                 dsv4_dtype_name((dsv4_dtype)o->dtype));
        return DSV4_PLUGIN_EINPUT;
    }
    if (!same_shape) {
        snprintf(err, errlen, "output '%s' has shape %s, these inputs give %s", o->name,
                 shape_text(g->ndim, g->shape, got, sizeof got), shape_text(o->ndim, o->shape, want, sizeof want));
        return DSV4_PLUGIN_EINPUT;
    }
    if (g->nbytes != o->nbytes || (o->nbytes && !g->data)) {
        snprintf(err, errlen, "output '%s': %zu bytes given, its shape and dtype hold %zu", o->name, g->nbytes,
                 o->nbytes);
        return DSV4_PLUGIN_EINPUT;
    }
    if (o->nbytes)
        memcpy(o->data, g->data, o->nbytes);
    return DSV4_PLUGIN_OK;
}

static int given_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                     const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs,
                     char *err, size_t errlen)
{
    (void)op, (void)variant, (void)params, (void)nparams, (void)inputs, (void)ninputs;
    const given_outputs *g = given_now;
    for (int k = 0; k < g->n; k++) {
        int known = 0;
        for (int j = 0; j < noutputs && !known; j++)
            known = g->t[k].name && strcmp(g->t[k].name, outputs[j].name) == 0;
        if (!known) {
            snprintf(err, errlen, "'%s' is not an output of %s", g->t[k].name ? g->t[k].name : "(null)", op);
            return DSV4_PLUGIN_EINPUT;
        }
    }
    for (int j = 0; j < noutputs; j++) {
        const dsv4check_tensor *found = NULL;
        for (int k = 0; k < g->n && !found; k++)
            if (strcmp(g->t[k].name, outputs[j].name) == 0)
                found = &g->t[k];
        if (!found) {
            snprintf(err, errlen, "output '%s' was not given", outputs[j].name);
            return DSV4_PLUGIN_EINPUT;
        }
        int rc = take_output(&outputs[j], found, err, errlen);
        if (rc)
            return rc;
    }
    return DSV4_PLUGIN_OK;
}

static const dsv4_plugin given_plugin = {
    .abi_version = DSV4_PLUGIN_ABI_VERSION,
    .name = "given outputs",
    .supports = given_supports,
    .run = given_run,
};

/* The console lines of one result, as the CLI prints them. */
static char *report_text(const dsv4_case_result *r, int verbose)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    dsv4_print_result(f, r, verbose);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int dsv4check_judge(const dsv4check_case *c, const dsv4check_tensor *outputs, int n_outputs,
                    const dsv4check_judge_opts *opts, dsv4check_verdict **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out || n_outputs < 0 || (n_outputs && !outputs))
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_judge: bad arguments"), &st, err, errlen);
    *out = NULL;
    for (int k = 0; k < n_outputs; k++)
        if (!outputs[k].name || outputs[k].ndim < 0 || outputs[k].ndim > DSV4_MAX_DIMS ||
            (outputs[k].ndim && !outputs[k].shape))
            return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_judge: output %d has no name, or a bad rank or shape",
                                    k), &st, err, errlen);
    dsv4check_verdict *v = calloc(1, sizeof *v);
    if (!v)
        return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory"), &st, err, errlen);
    const char *impl = opts && opts->impl ? opts->impl : "actual";
    dsv4_backend b;
    memset(&b, 0, sizeof b);
    snprintf(b.name, sizeof b.name, "%s", impl);
    b.plugin = &given_plugin;
    b.device = -1;
    dsv4_input_files inputs = {0};
    if (dsv4_input_files_add(&inputs, c->c.file) || (c->c.golden[0] && dsv4_input_files_add(&inputs, c->c.golden))) {
        dsv4_input_files_free(&inputs);
        free(v);
        return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory"), &st, err, errlen);
    }
    const dsv4_run_opts ro = {.impl = impl,
                              .verbose = opts ? opts->verbose : 0,
                              .argv0 = opts && opts->argv0 ? opts->argv0 : "dsv4check",
                              .repro_dir = opts ? opts->repro_dir : NULL,
                              .device_arg = "",
                              .inputs = &inputs};
    dsv4_h5_quiet();
    const given_outputs given = {outputs, n_outputs};
    given_now = &given;
    if (c->golden_file)
        dsv4_check_golden(c->c.golden, &b, &ro, &v->r);
    else
        dsv4_run_case(&c->c, &b, &ro, &v->r);
    given_now = NULL;
    dsv4_input_files_free(&inputs);
    dsv4_result_free_maps(&v->r);
    if (!(v->report = report_text(&v->r, ro.verbose))) {
        free(v);
        return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory for the report"), &st, err, errlen);
    }
    *out = v;
    return finish(DSV4_OK, &st, err, errlen);
}

int dsv4check_verdict_status(const dsv4check_verdict *v) { return v ? v->r.status : DSV4CHECK_EINPUT; }
const char *dsv4check_verdict_word(const dsv4check_verdict *v) { return v ? dsv4_status_word(&v->r) : NULL; }
const char *dsv4check_verdict_case(const dsv4check_verdict *v) { return v ? v->r.name : NULL; }
const char *dsv4check_verdict_error(const dsv4check_verdict *v) { return v ? v->r.error : NULL; }
const char *dsv4check_verdict_report(const dsv4check_verdict *v) { return v ? v->report : NULL; }
double dsv4check_verdict_seconds(const dsv4check_verdict *v) { return v ? v->r.seconds : 0; }
int dsv4check_verdict_output_count(const dsv4check_verdict *v) { return v ? v->r.n_outputs : 0; }

int dsv4check_verdict_output(const dsv4check_verdict *v, int k, dsv4check_metrics *out)
{
    if (!v || !out || k < 0 || k >= v->r.n_outputs)
        return DSV4CHECK_EINPUT;
    const dsv4_cmp_result *m = &v->r.outputs[k].cmp;
    const dsv4_policy *p = &v->r.outputs[k].pol;
    const dsv4_mismatch *first = m->n_first > 0 ? &m->first[0] : NULL;
    *out = (dsv4check_metrics){
        .name = m->output,
        .verdict = (int)m->verdict,
        .kind = dsv4_cmp_kind_name(p->kind),
        .rule = p->rule,
        .count = m->count,
        .compared = m->compared,
        .mismatches = m->bad,
        .max_abs = m->max_abs,
        .max_rel = m->max_rel,
        .max_ulp = m->max_ulp,
        .worst_ratio = m->worst_ratio,
        .nmse = m->nmse,
        .cosine = m->cosine,
        .has_first = first != NULL,
        .first_index = first ? first->index : "",
        .first_where = first ? first->where : "",
        .first_expected = first ? first->expected : 0,
        .first_actual = first ? first->actual : 0,
        .hint = m->hint,
        .message = m->message,
    };
    return DSV4CHECK_OK;
}

void dsv4check_verdict_free(dsv4check_verdict *v)
{
    if (!v)
        return;
    free(v->report);
    free(v);
}

/* ---- actuals files ---- */

int dsv4check_actuals_open(const char *path, dsv4check_actuals **out, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!path || !out)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_actuals_open: NULL argument"), &st, err, errlen);
    *out = NULL;
    if (strlen(path) >= DSV4_PATH_MAX)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "%.80s...: path longer than %d characters", path,
                                DSV4_PATH_MAX - 1), &st, err, errlen);
    if (!(*out = calloc(1, sizeof **out)))
        return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory"), &st, err, errlen);
    snprintf((*out)->path, sizeof (*out)->path, "%s", path);
    return finish(DSV4_OK, &st, err, errlen);
}

/* The caller's buffers as tensors that borrow their data (never freed). */
static int borrow_tensors(const dsv4check_tensor *outputs, int n, dsv4_tensors *ts, dsv4_status *st)
{
    memset(ts, 0, sizeof *ts);
    if (n < 0 || n > DSV4_MAX_TENSORS)
        return dsv4_fail(st, DSV4_EINPUT, "%d outputs (at most %d)", n, DSV4_MAX_TENSORS);
    for (int k = 0; k < n; k++) {
        const dsv4check_tensor *o = &outputs[k];
        dsv4_tensor *t = &ts->t[k];
        if (!o->name || strlen(o->name) >= sizeof t->name || o->ndim < 0 || o->ndim > DSV4_MAX_DIMS ||
            (o->ndim && !o->shape) || !dsv4check_dtype_name(o->dtype))
            return dsv4_fail(st, DSV4_EINPUT, "output %d: no name, a name over %zu bytes, a bad rank or dtype", k,
                             sizeof t->name - 1);
        for (int j = 0; j < k; j++)
            if (strcmp(ts->t[j].name, o->name) == 0)
                return dsv4_fail(st, DSV4_EINPUT, "output '%s' given twice", o->name);
        uint64_t bytes = dsv4_dtype_size((dsv4_dtype)o->dtype);
        for (int d = 0; d < o->ndim; d++) {
            if (o->shape[d] < 0 || (o->shape[d] && bytes > UINT64_MAX / (uint64_t)o->shape[d]))
                return dsv4_fail(st, DSV4_EINPUT, "output '%s': bad shape", o->name);
            bytes *= (uint64_t)o->shape[d];
        }
        if (bytes != o->nbytes || (bytes && !o->data))
            return dsv4_fail(st, DSV4_EINPUT, "output '%s': %zu bytes given, its shape and dtype hold %llu", o->name,
                             o->nbytes, (unsigned long long)bytes);
        snprintf(t->name, sizeof t->name, "%s", o->name);
        t->dtype = (dsv4_dtype)o->dtype;
        t->output_dtype = DSV4_DT_NONE;
        t->ndim = o->ndim;
        for (int d = 0; d < o->ndim; d++)
            t->shape[d] = o->shape[d];
        t->data = o->data;
        t->nbytes = o->nbytes;
    }
    ts->n = n;
    return DSV4_OK;
}

int dsv4check_actuals_add(dsv4check_actuals *w, const char *case_name, const char *op, const char *variant,
                          const dsv4check_tensor *outputs, int n_outputs, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!w || !case_name || (n_outputs && !outputs))
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_actuals_add: NULL argument"), &st, err, errlen);
    size_t len = strlen(case_name);
    if (len == 0 || len >= DSV4_ACTUAL_NAME_MAX || strchr(case_name, '/') || strcmp(case_name, ".") == 0)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "'%.60s' cannot name a case group (empty, '.', a '/' or over %d bytes)",
                                case_name, DSV4_ACTUAL_NAME_MAX - 1), &st, err, errlen);
    if ((op && strlen(op) >= 64) || (variant && strlen(variant) >= 64))
        return finish(dsv4_fail(&st, DSV4_EINPUT, "case %s: op or variant name over 63 bytes", case_name), &st, err,
                      errlen);
    for (int k = 0; k < w->n; k++)
        if (strcmp(w->cases[k].name, case_name) == 0)
            return finish(dsv4_fail(&st, DSV4_EINPUT, "case '%s' added twice", case_name), &st, err, errlen);
    if (w->n >= DSV4_ACTUAL_MAX_CASES)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "%s: more than %d cases", w->path, DSV4_ACTUAL_MAX_CASES), &st, err,
                      errlen);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        void *p = realloc(w->cases, (size_t)cap * sizeof *w->cases);
        if (!p)
            return finish(dsv4_fail(&st, DSV4_ERUNTIME, "out of memory"), &st, err, errlen);
        w->cases = p;
        w->cap = cap;
    }
    dsv4_tensors ts;
    int rc = borrow_tensors(outputs, n_outputs, &ts, &st);
    actual_entry *e = &w->cases[w->n];
    memset(e, 0, sizeof *e);
    for (int k = 0; !rc && k < ts.n; k++) { /* copies: the caller may free its buffers */
        dsv4_tensor *t;
        if (!(rc = dsv4_tensors_add(&e->outputs, ts.t[k].name, ts.t[k].dtype, ts.t[k].ndim, ts.t[k].shape, &t, &st)))
            memcpy(t->data, ts.t[k].data, t->nbytes);
    }
    if (rc) {
        dsv4_tensors_free(&e->outputs);
        dsv4_status_prefix(&st, "case %s", case_name);
        return finish(rc, &st, err, errlen);
    }
    snprintf(e->name, sizeof e->name, "%s", case_name);
    e->has_op = op != NULL;
    e->has_variant = variant != NULL;
    snprintf(e->op, sizeof e->op, "%s", op ? op : "");
    snprintf(e->variant, sizeof e->variant, "%s", variant ? variant : "");
    w->n++;
    return finish(DSV4_OK, &st, err, errlen);
}

int dsv4check_actuals_commit(dsv4check_actuals *w, char *err, size_t errlen)
{
    dsv4_status st = {0};
    if (!w)
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_actuals_commit: NULL argument"), &st, err, errlen);
    dsv4_actual_case *cs = calloc(w->n ? (size_t)w->n : 1, sizeof *cs);
    int rc = cs ? DSV4_OK : dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
    for (int k = 0; !rc && k < w->n; k++) {
        const actual_entry *e = &w->cases[k];
        cs[k] = (dsv4_actual_case){e->name, e->has_op ? e->op : NULL, e->has_variant ? e->variant : NULL, &e->outputs};
    }
    if (!rc)
        rc = dsv4_actual_write(w->path, cs, w->n, &st);
    free(cs);
    dsv4check_actuals_free(w);
    return finish(rc, &st, err, errlen);
}

void dsv4check_actuals_free(dsv4check_actuals *w)
{
    if (!w)
        return;
    for (int k = 0; k < w->n; k++)
        dsv4_tensors_free(&w->cases[k].outputs);
    free(w->cases);
    free(w);
}
