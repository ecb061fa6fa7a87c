/* api_judge.c - the public C API's judging (include/dsv4check.h): the
 * caller's buffers handed to the runner as an in-process implementation,
 * so that the verdict and the report text are the CLI's for that case;
 * verdicts; actuals files (written through actual.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actual.h"
#include "api_internal.h"
#include "golden.h"
#include "runner.h"

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

static int finish(int rc, const dsv4_status *st, char *err, size_t errlen)
{
    return dsv4_api_finish(rc, st, err, errlen);
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
    return dsv4check_judge_special(c, outputs, n_outputs, opts, DSV4CHECK_SPECIAL_STRICT, out, err, errlen);
}

int dsv4check_judge_special(const dsv4check_case *c, const dsv4check_tensor *outputs, int n_outputs,
                            const dsv4check_judge_opts *opts, int special, dsv4check_verdict **out, char *err,
                            size_t errlen)
{
    dsv4_status st = {0};
    if (!c || !out || n_outputs < 0 || (n_outputs && !outputs) ||
        (special != DSV4CHECK_SPECIAL_STRICT && special != DSV4CHECK_SPECIAL_SEPARATE))
        return finish(dsv4_fail(&st, DSV4_EINPUT, "dsv4check_judge: bad arguments"), &st, err, errlen);
    *out = NULL;
    if (dsv4_api_single_op(c, &st))
        return finish(st.code, &st, err, errlen);
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
                              .inputs = &inputs,
                              .special = special == DSV4CHECK_SPECIAL_SEPARATE ? DSV4_SPECIAL_SEPARATE
                                                                              : DSV4_SPECIAL_STRICT};
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

int dsv4check_verdict_output_special(const dsv4check_verdict *v, int k, dsv4check_special_split *out)
{
    if (!v || !out || k < 0 || k >= v->r.n_outputs)
        return DSV4CHECK_EINPUT;
    const dsv4_special_split *s = &v->r.outputs[k].special;
    if (!v->r.special.has_lanes) {
        *out = (dsv4check_special_split){0, 0, 0, 0, 0, 0, "", "", ""};
        return DSV4CHECK_OK;
    }
    *out = (dsv4check_special_split){
        .has = 1,
        .lanes = s->lanes,
        .finite_mismatches = s->finite_bad,
        .special_mismatches = s->special_bad,
        .strict_verdict = (int)s->strict_verdict,
        .finite_verdict = (int)s->finite_verdict,
        .first_finite_index = s->has_finite_first ? s->finite_first.index : "",
        .first_special_index = s->n_listed ? s->listed[0].index : "",
        .first_special_where = s->n_listed ? s->listed[0].where : "",
    };
    return DSV4CHECK_OK;
}

int dsv4check_verdict_special_relied(const dsv4check_verdict *v) { return v ? v->r.special.relied : 0; }

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
    if (out)
        *out = NULL;
    if (dsv4_api_path_args("dsv4check_actuals_open", path, out, &st))
        return finish(st.code, &st, err, errlen);
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
