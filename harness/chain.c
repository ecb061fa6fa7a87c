/* chain.c - running a chain of registered ops stage by stage (chain.h;
 * docs/semantics/chain.md). */
#define _POSIX_C_SOURCE 200809L
#include "chain_impl.h"

#include "actual.h"
#include "readpast.h"
#include "repro.h"
#include "version.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DSV4_CHAIN(name) extern const dsv4_chain_def dsv4_chain_##name;
#include "../ops/chain/chains.h"
#undef DSV4_CHAIN

#define DSV4_CHAIN(name) &dsv4_chain_##name,
static const dsv4_chain_def *const chain_table[] = {
#include "../ops/chain/chains.h"
};
#undef DSV4_CHAIN

int dsv4_chain_count(void) { return (int)(sizeof chain_table / sizeof chain_table[0]); }

const dsv4_chain_def *dsv4_chain_at(int i) { return i >= 0 && i < dsv4_chain_count() ? chain_table[i] : NULL; }

const dsv4_chain_def *dsv4_chain_of(const dsv4_op *op)
{
    for (int i = 0; op && i < dsv4_chain_count(); i++)
        if (chain_table[i]->desc == op)
            return chain_table[i];
    return NULL;
}

const dsv4_op *dsv4_chain_find_op(const char *name)
{
    for (int i = 0; i < dsv4_chain_count(); i++)
        if (strcmp(chain_table[i]->desc->name, name) == 0)
            return chain_table[i]->desc;
    return NULL;
}

/* ---- one step ---------------------------------------------------------------- */

static step_rec *new_step(dsv4_chain *x, const char *step, const char *op)
{
    if (x->nsteps == x->cap_steps) {
        int cap = x->cap_steps ? 2 * x->cap_steps : 32;
        step_rec *p = realloc(x->steps, (size_t)cap * sizeof *p);
        if (!p) {
            dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory (chain steps)");
            return NULL;
        }
        x->steps = p;
        x->cap_steps = cap;
    }
    step_rec *s = &x->steps[x->nsteps++];
    memset(s, 0, sizeof *s);
    s->stage = x->stage;
    snprintf(s->name, sizeof s->name, "%s", step);
    snprintf(s->op, sizeof s->op, "%s", op);
    return s;
}

static const char *stage_name(const dsv4_chain *x, int k) { return dsv4_op_outputs(x->def->desc)[k].name; }

static int same_tensor(const dsv4_tensor *a, const dsv4_tensor *b)
{
    return a->dtype == b->dtype && dsv4_tensor_same_shape(a, b) && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static int same_set(const dsv4_tensors *a, const dsv4_tensors *b)
{
    if (a->n != b->n)
        return 0;
    for (int k = 0; k < a->n; k++) {
        const dsv4_tensor *t = dsv4_tensors_get(b, a->t[k].name);
        if (!t || !same_tensor(&a->t[k], t))
            return 0;
    }
    return 1;
}

/* The step's golden: same op, variant and parameters, and inputs equal to
 * what the chain built for it (else the generator, the wiring or an
 * upstream golden changed). */
static int read_step_golden(const dsv4_chain *x, const char *path, const dsv4_op *op, const dsv4_opctx *c,
                            const dsv4_tensors *in, dsv4_golden *g, dsv4_status *st)
{
    if (access(path, F_OK) != 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: golden file missing (write it with `dsv4check gen %s`)", path,
                         x->cs ? x->cs->file : "SUITE");
    int rc = dsv4_golden_read(path, g, st);
    if (rc)
        return rc;
    if (strcmp(g->op, op->name) != 0 || dsv4_op_variant(op, g->variant) != c->variant)
        return dsv4_fail(st, DSV4_EINPUT, "%s: golden is for %s [%s], the step runs %s [%s]", path, g->op, g->variant,
                         op->name, dsv4_op_variant_name(op, c->variant));
    for (int k = 0; k < c->params->n; k++) {
        const dsv4_param *p = &c->params->p[k], *q = dsv4_params_find(&g->params, p->name);
        char a[2048], b[2048];
        dsv4_param_value_str(p, a, sizeof a);
        if (!q || strcmp(a, dsv4_param_value_str(q, b, sizeof b)) != 0)
            return dsv4_fail(st, DSV4_EINPUT, "%s: stale golden: /params/%s is %s, the chain now says %s; regenerate "
                             "with `dsv4check gen --force`", path, p->name, q ? b : "missing", a);
    }
    for (int k = 0; k < in->n; k++) {
        const dsv4_tensor *t = dsv4_tensors_get(&g->inputs, in->t[k].name);
        if (!t || !same_tensor(&in->t[k], t))
            return dsv4_fail(st, DSV4_EINPUT,
                             "%s: golden input '%s' differs from what the chain now builds for this step: the "
                             "generator, the wiring or an upstream step changed; regenerate with `dsv4check gen "
                             "--force` after review", path, in->t[k].name);
    }
    if (g->inputs.n != in->n)
        return dsv4_fail(st, DSV4_EINPUT, "%s: golden has %d inputs, the step binds %d", path, g->inputs.n, in->n);
    return DSV4_OK;
}

static int write_step_golden(dsv4_chain *x, const char *path, const char *step, const dsv4_op *op,
                             const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensors *exp, dsv4_status *st)
{
    dsv4_golden *g = calloc(1, sizeof *g);
    if (!g)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    g->schema = DSV4_SCHEMA_VERSION;
    snprintf(g->op, sizeof g->op, "%s", op->name);
    snprintf(g->variant, sizeof g->variant, "%s", dsv4_op_variant_name(op, c->variant));
    snprintf(g->case_name, sizeof g->case_name, "%s/%s", x->cs->name, step);
    g->seed = x->seed;
    snprintf(g->generator, sizeof g->generator, "dsv4check %s (%s)", DSV4_VERSION, DSV4_GIT_REV);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(g->created, sizeof g->created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    g->params = *c->params;
    g->inputs = *in;   /* borrowed: not freed here */
    g->outputs = *exp; /* borrowed */
    int rc = dsv4_golden_write(path, g, x->force, st);
    free(g);
    if (!rc) {
        x->written++;
        printf("wrote %s\n", path);
    }
    return rc;
}

/* Every output of a step against its expected value, as the runner
 * compares an op case (policy, case overrides by stage name, mask, bound,
 * companion, hint, error map). */
static int compare_step(dsv4_chain *x, step_rec *rec, const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                        const dsv4_tensors *exp, const dsv4_tensors *act, dsv4_status *st)
{
    rec->out = calloc((size_t)(act->n ? act->n : 1), sizeof *rec->out);
    if (!rec->out)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    int rc = DSV4_OK;
    for (int k = 0; k < act->n && !rc; k++) {
        const dsv4_tensor *a = &act->t[k], *e = dsv4_tensors_get(exp, a->name);
        dsv4_output_result *out = &rec->out[rec->n_out];
        if (!e)
            return dsv4_fail(st, DSV4_EINPUT, "expected output '%s' is missing", a->name);
        if (!dsv4_tensor_same_shape(e, a))
            return dsv4_fail(st, DSV4_EINPUT, "expected output '%s' has another shape than the step's", a->name);
        if ((rc = op->policy(c, in, a->name, &out->pol, st)))
            break;
        /* A stage's inputs are earlier stages' outputs, not its op's
         * sign-symmetric generator's draws (docs/semantics/numerics.md A17). */
        out->pol.sign_test = 0;
        if (x->cs)
            dsv4_case_apply_overrides(x->cs, stage_name(x, rec->stage), &out->pol);
        const int64_t n = dsv4_tensor_numel(e);
        uint8_t *mask = NULL;
        double *bound = NULL;
        if (op->mask && !(mask = malloc(n ? (size_t)n : 1)))
            rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        if (!rc && mask)
            rc = op->mask(c, in, a->name, mask, n, st);
        dsv4_cmp_aux aux = {NULL, NULL, NULL, NULL};
        if (!rc && op->bound && (out->pol.kind == DSV4_CMP_FLOAT || out->pol.kind == DSV4_CMP_MX)) {
            if (!(bound = calloc(n ? (size_t)n : 1, sizeof *bound)))
                rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
            else if (!(rc = op->bound(c, in, a->name, bound, n, st)))
                aux.elem_bound = bound;
        }
        if (!rc && out->pol.companion[0]) {
            aux.expected = dsv4_tensors_get(exp, out->pol.companion);
            aux.actual = dsv4_tensors_get(act, out->pol.companion);
            if (!aux.expected)
                aux.expected = dsv4_tensors_get(in, out->pol.companion);
        }
        dsv4_op_locate_ctx lc = {op, c, in, a->name};
        if (!rc)
            rc = dsv4_compare(e, a, &out->pol, mask, op->locate ? dsv4_op_locate : NULL, &lc, &aux, &out->cmp, st);
        if (!rc && op->hint && out->cmp.bad)
            op->hint(c, in, a->name, e, a, &out->cmp);
        if (!rc && x->o && x->o->maps && out->cmp.verdict == DSV4_FAIL)
            out->map = dsv4_errmap_make(e, a, &out->pol, mask);
        free(mask);
        free(bound);
        if (!rc) {
            rec->n_out++;
            if (out->cmp.verdict > rec->verdict)
                rec->verdict = out->cmp.verdict;
        }
    }
    return rc;
}

/* The implementation (dsv4_backend_run hands it its own guarded copies and
 * reports an input it changed); --rerun N: N - 1 more runs must reproduce
 * the first bit for bit. */
static int run_impl(dsv4_chain *x, const dsv4_case_id *id, const dsv4_op *op, const dsv4_opctx *c,
                    const dsv4_tensors *in, dsv4_tensors *act, dsv4_status *st)
{
    int rc = op->alloc_outputs(c, in, act, st);
    if (!rc)
        rc = dsv4_backend_run(x->b, op, c, id, in, act, st);
    for (int run = 1; !rc && x->o && run < x->o->rerun; run++) {
        dsv4_tensors again = {0};
        if (!(rc = op->alloc_outputs(c, in, &again, st)) && !(rc = dsv4_backend_run(x->b, op, c, id, in, &again, st)) &&
            !same_set(&again, act))
            rc = dsv4_fail(st, DSV4_EFAIL, "nondeterministic: run %d differs from run 1", run + 1);
        dsv4_tensors_free(&again);
    }
    return rc;
}

static void step_golden_path(const dsv4_chain *x, const char *step, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%s.h5", x->golden_base, step);
}

int dsv4_chain_step(dsv4_chain *x, const char *step, const char *opname, const char *variant, dsv4_params *ps,
                    const dsv4_chain_io *in_io, const dsv4_chain_io *out_io)
{
    if (x->err)
        return x->err;
    const dsv4_op *op = dsv4_op_find(opname);
    const int v = op ? dsv4_op_variant(op, variant) : -1;
    if (v < 0)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "step %s: no op %s [%s]", step, opname, variant);
    dsv4_status st = {0};
    char where[96];
    snprintf(where, sizeof where, "chain step %s", step);
    /* A step's inputs come from the chain, not from the op's generator: its
     * params are the op's own and the generator options that have defaults
     * (shapes the golden reader checks), without the generator's required
     * options (query_lens, ...), as a golden's are completed. */
    int rc = dsv4_golden_params(op, ps, where, &st);
    if (!rc && op->resolve)
        rc = op->resolve(ps, &st);
    if (rc)
        return dsv4_chain_adopt(x, rc, &st, step);
    const dsv4_opctx ctx = dsv4_opctx_make(op, ps, v, x->seed);
    dsv4_tensors in = {0}; /* shallow: the pool's storage, never freed here */
    int in_div = 0;
    for (const dsv4_chain_io *b = in_io; b && b->io; b++) {
        const pool_entry *e = dsv4_chain_pool_find(x, b->pool);
        if (!e)
            return dsv4_chain_fail(x, DSV4_ERUNTIME, "step %s: input '%s' <- '%s': no such tensor", step, b->io, b->pool);
        if (in.n == DSV4_MAX_TENSORS)
            return dsv4_chain_fail(x, DSV4_ERUNTIME, "step %s: more than %d inputs", step, DSV4_MAX_TENSORS);
        in.t[in.n] = e->t;
        snprintf(in.t[in.n].name, sizeof in.t[in.n].name, "%s", b->io);
        in.n++;
        in_div |= e->diverged;
    }
    if ((rc = op->validate(&ctx, &in, &st))) {
        if (x->kind == RUN_PROPAGATED && in_div)
            return dsv4_chain_fail(x, x->first_fail >= 0 ? DSV4_EFAIL : DSV4_EINPUT,
                                   "the chain stopped at step %s (%s): its inputs, from the implementation's "
                                   "upstream outputs, are not valid: %s", step, opname, st.msg);
        return dsv4_chain_adopt(x, rc, &st, step);
    }
    step_rec *rec = new_step(x, step, opname);
    if (!rec)
        return x->err;
    dsv4_tensors exp = {0}, kern = {0}, act = {0};
    dsv4_golden *g = NULL;
    char path[sizeof x->golden_base + 64];
    step_golden_path(x, step, path, sizeof path);
    /* Goldens hold the reference chain's steps: usable while this step's
     * inputs are the reference chain's (always, except downstream of a
     * divergence in a propagated run).  Isolated runs require them;
     * propagated runs read an isolated twin's where they exist (gen writes
     * none for propagated cases) and use the live reference otherwise. */
    const int optional = x->kind == RUN_PROPAGATED || x->kind == RUN_REFERENCE;
    if (x->golden_base[0] && x->kind != RUN_GEN && !in_div && !(optional && access(path, F_OK) != 0)) {
        if (!(g = calloc(1, sizeof *g)))
            rc = dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
        else if (!(rc = read_step_golden(x, path, op, &ctx, &in, g, &st))) {
            exp = g->outputs;
            memset(&g->outputs, 0, sizeof g->outputs);
        }
    } else {
        rc = dsv4_reference_outputs(op, &ctx, &in, &exp, &st);
        if (!rc && x->kind == RUN_GEN)
            rc = write_step_golden(x, path, step, op, &ctx, &in, &exp, &st);
    }
    if (!rc && !(rc = op->alloc_outputs(&ctx, &in, &kern, &st)))
        dsv4_round_into(&kern, &exp);
    /* The stage's case is "<chain case>/<step>", the name its step golden
     * carries (and an actuals file's group for it). */
    char stage_name[sizeof x->cs->name + 72], why[256];
    snprintf(stage_name, sizeof stage_name, "%s/%s", x->cs->name, step);
    const dsv4_case_id id = {stage_name, NULL};
    const int provided = !rc && (x->kind == RUN_ISOLATED || x->kind == RUN_PROPAGATED) &&
                         dsv4_backend_provides(x->b, op, v, &id, why, sizeof why);
    dsv4_tensors *actual = x->b && x->b->is_ref ? &kern : &act;
    if (provided) {
        rec->provided = 1;
        if (!x->b->is_ref && (rc = run_impl(x, &id, op, &ctx, &in, &act, &st)) != DSV4_OK)
            dsv4_status_prefix(&st, "%s [%s]", opname, variant);
        if (!rc && !(rc = compare_step(x, rec, op, &ctx, &in, &exp, actual, &st)) && rec->verdict == DSV4_FAIL &&
            !x->b->is_ref) {
            dsv4_readpast_attribute(x->b, op, &ctx, &id, &in, actual, rec->out, rec->n_out);
        }
        if (!rc && rec->verdict == DSV4_FAIL && x->first_fail < 0) {
            x->first_fail = x->nsteps - 1;
            if (x->o && x->o->repro_dir && x->r) {
                dsv4_status rst = {0};
                if (dsv4_write_repro(x->o->repro_dir, op, &ctx, &in, &exp, actual, x->r, &rst))
                    fprintf(stderr, "repro file not written: %s\n", rst.msg);
            }
        }
    }
    if (!rc) {
        const int use_actual = x->kind == RUN_PROPAGATED && provided;
        dsv4_tensors *src = use_actual ? actual : &kern;
        const int out_div = in_div || (use_actual && actual != &kern && !same_set(actual, &kern));
        for (const dsv4_chain_io *b = out_io; b && b->io && !x->err; b++) {
            dsv4_tensor *t = dsv4_tensors_find(src, b->io);
            if (!t)
                rc = dsv4_fail(&st, DSV4_ERUNTIME, "no output '%s' to bind to '%s'", b->io, b->pool);
            else
                dsv4_chain_pool_put(x, b->pool, t, out_div);
        }
    }
    dsv4_tensors_free(&exp);
    dsv4_tensors_free(&kern);
    dsv4_tensors_free(&act);
    if (g)
        dsv4_golden_free(g);
    free(g);
    return dsv4_chain_adopt(x, rc, &st, step);
}

/* ---- a whole run ------------------------------------------------------------ */

static dsv4_chain *chain_new(const dsv4_chain_def *def, run_kind kind, const dsv4_backend *b, const dsv4_run_opts *o,
                             const dsv4_case *cs, dsv4_case_result *r, uint64_t seed)
{
    dsv4_chain *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->def = def;
    x->kind = kind;
    x->b = b;
    x->o = o;
    x->cs = cs;
    x->r = r;
    x->seed = seed;
    x->first_fail = -1;
    return x;
}

static void chain_free(dsv4_chain *x)
{
    if (!x)
        return;
    for (int i = 0; i < x->npool; i++)
        dsv4_chain_pool_free_entry(x->pool[i]);
    free(x->pool);
    for (int s = 0; s < x->nsteps; s++) {
        for (int k = 0; k < x->steps[s].n_out; k++)
            free(x->steps[s].out[k].map);
        free(x->steps[s].out);
    }
    free(x->steps);
    free(x);
}

static int chain_execute(dsv4_chain *x, const dsv4_params *ps)
{
    if (!x->err)
        x->def->generate(x, ps, x->seed);
    if (!x->err)
        x->def->run(x, ps);
    return x->err;
}

/* "<golden_dir>/<case>" from the case's golden path "<...>.h5". */
static void golden_base_of(const char *golden, char *buf, size_t len)
{
    snprintf(buf, len, "%s", golden);
    size_t n = strlen(buf);
    if (n > 3 && strcmp(buf + n - 3, ".h5") == 0)
        buf[n - 3] = '\0';
}

/* Drift of the layer output against the reference chain's. */
typedef struct drift_metrics {
    int measured, identical;
    double max_abs, nmse, cosine;
} drift_metrics;

static void measure_drift(const dsv4_tensor *a, const dsv4_tensor *e, drift_metrics *d)
{
    double num = 0, den = 0, dot = 0, na = 0;
    d->max_abs = 0;
    const int64_t n = dsv4_tensor_numel(e);
    for (int64_t i = 0; i < n; i++) {
        const double x = dsv4_tensor_get(a, i), y = dsv4_tensor_get(e, i), diff = fabs(x - y);
        d->max_abs = diff > d->max_abs || isnan(diff) ? diff : d->max_abs;
        num += (x - y) * (x - y);
        den += y * y;
        dot += x * y;
        na += x * x;
    }
    d->nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
    d->cosine = na > 0 && den > 0 ? dot / sqrt(na * den) : (na == den ? 1 : 0);
    d->measured = 1;
}

static void drift_of(const dsv4_chain *x, const dsv4_case *c, drift_metrics *d)
{
    memset(d, 0, sizeof d[0]);
    const pool_entry *got = dsv4_chain_pool_find(x, x->def->result);
    if (!got)
        return;
    if (!got->diverged) {
        d->measured = d->identical = 1;
        d->cosine = 1;
        return;
    }
    dsv4_chain *ref = chain_new(x->def, RUN_REFERENCE, x->b, x->o, c, NULL, x->seed);
    if (!ref)
        return;
    snprintf(ref->golden_base, sizeof ref->golden_base, "%s", x->golden_base);
    const pool_entry *want = chain_execute(ref, &c->params) ? NULL : dsv4_chain_pool_find(ref, x->def->result);
    if (want && dsv4_tensor_same_shape(&want->t, &got->t))
        measure_drift(&got->t, &want->t, d);
    chain_free(ref);
}

/* The entry a stage shows in the case result: the first failing output of
 * its first failing step, else a warning, else its tap (the first output
 * of its last step) - a stable name for drift baselines. */
static const dsv4_output_result *stage_entry(const dsv4_chain *x, int stage, const step_rec **owner)
{
    const dsv4_output_result *tap = NULL, *warn = NULL;
    const step_rec *tap_s = NULL, *warn_s = NULL;
    for (int s = 0; s < x->nsteps; s++) {
        const step_rec *rec = &x->steps[s];
        if (rec->stage != stage || !rec->provided || !rec->n_out)
            continue;
        for (int k = 0; k < rec->n_out; k++) {
            if (rec->out[k].cmp.verdict == DSV4_FAIL) {
                *owner = rec;
                return &rec->out[k];
            }
            if (rec->out[k].cmp.verdict == DSV4_WARN && !warn)
                warn = &rec->out[k], warn_s = rec;
        }
        tap = &rec->out[0], tap_s = rec;
    }
    *owner = warn ? warn_s : tap_s;
    return warn ? warn : tap;
}

static void assemble(dsv4_chain *x, const dsv4_case *c, const drift_metrics *d, dsv4_case_result *r)
{
    int provided = 0, failing = 0;
    char fails[256] = "";
    for (int s = 0; s < x->nsteps; s++)
        provided += x->steps[s].provided;
    r->verdict = DSV4_PASS;
    for (int k = 0; dsv4_op_outputs(x->def->desc)[k].name && r->n_outputs < DSV4_MAX_TENSORS; k++) {
        const step_rec *owner = NULL;
        const dsv4_output_result *e = stage_entry(x, k, &owner);
        if (!e)
            continue;
        dsv4_output_result *o = &r->outputs[r->n_outputs++];
        *o = *e;
        snprintf(o->cmp.output, sizeof o->cmp.output, "%s/%s", owner->name, e->cmp.output);
        ((dsv4_output_result *)e)->map = NULL; /* moved into the result */
        if (o->cmp.verdict > r->verdict)
            r->verdict = o->cmp.verdict;
        if (o->cmp.verdict == DSV4_FAIL) {
            size_t n = strlen(fails);
            snprintf(fails + n, sizeof fails - n, "%s%s", failing++ ? ", " : "", stage_name(x, k));
        }
    }
    const char *mode = dsv4_params_str(&c->params, "mode");
    int n = snprintf(r->note, sizeof r->note, "%s: %d steps, %d run by the implementation, %d by the reference",
                     mode, x->nsteps, provided, x->nsteps - provided);
    if (failing && n > 0 && (size_t)n < sizeof r->note)
        n += snprintf(r->note + n, sizeof r->note - (size_t)n, "; failing stages: %s", fails);
    if (d->measured && n > 0 && (size_t)n < sizeof r->note) {
        if (d->identical)
            snprintf(r->note + n, sizeof r->note - (size_t)n, "; layer output identical to the reference chain's");
        else
            snprintf(r->note + n, sizeof r->note - (size_t)n,
                     "; layer output drift from the reference chain: max_abs %.3g, nmse %.3g, cosine %.9f",
                     d->max_abs, d->nmse, d->cosine);
    }
    if (x->first_fail >= 0) {
        const step_rec *rec = &x->steps[x->first_fail];
        const dsv4_output_result *o = NULL;
        for (int k = 0; k < rec->n_out && !o; k++)
            if (rec->out[k].cmp.verdict == DSV4_FAIL)
                o = &rec->out[k];
        char m[600] = "";
        if (o && o->cmp.n_first) {
            const dsv4_mismatch *f = &o->cmp.first[0];
            snprintf(m, sizeof m, ": first %s: expected %.9g, actual %.9g%s%s%s", f->index, f->expected, f->actual,
                     f->where[0] ? " (" : "", f->where, f->where[0] ? ")" : "");
        } else if (o) {
            snprintf(m, sizeof m, ": %s", o->cmp.message);
        }
        snprintf(r->error, sizeof r->error, "first diverging stage: %s (step %s, %s, output %s)%s",
                 stage_name(x, rec->stage), rec->name, rec->op, o ? o->cmp.output : "?", m);
        r->status = DSV4_EFAIL;
        r->verdict = DSV4_FAIL;
    }
    if (x->err) {
        size_t used = strlen(r->error);
        snprintf(r->error + used, sizeof r->error - used, "%s%s", used ? "; " : "", x->st.msg);
        r->status = x->err;
        r->verdict = DSV4_FAIL;
    } else if (x->first_fail < 0) {
        r->status = DSV4_OK;
    }
    if (!x->err && !provided) {
        r->status = DSV4_ESKIP;
        if (x->b->actual) /* counted as not provided, like a missing case */
            snprintf(r->error, sizeof r->error, "not provided: %s has no group /%s/<step> for any stage",
                     dsv4_actual_path(x->b->actual), x->cs->name);
        else
            snprintf(r->error, sizeof r->error, "%s implements none of the ops of chain %s", x->b->name,
                     x->def->desc->name);
    }
    if (r->repro_file[0] && x->o)
        snprintf(r->replay, sizeof r->replay, "%s check %s --impl %s%s", x->o->argv0, r->repro_file, x->o->impl,
                 x->o->device_arg ? x->o->device_arg : "");
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dsv4_chain_run_case(const dsv4_case *c, const dsv4_backend *b, const dsv4_run_opts *o, dsv4_case_result *r)
{
    const double t0 = now_seconds();
    const uint64_t seed = o->seed_override ? o->seed : c->seed;
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", c->name);
    snprintf(r->op, sizeof r->op, "%s", c->op->name);
    snprintf(r->variant, sizeof r->variant, "%s", dsv4_op_variant_name(c->op, c->variant));
    snprintf(r->origin, sizeof r->origin, "%s:%d:%d", c->file, c->line, c->col);
    snprintf(r->repro, sizeof r->repro, "%s run %s --filter '^%s$' --impl %s%s%s", o->argv0, c->file, c->name,
             o->impl, o->device_arg ? o->device_arg : "", o->seed_override ? " --seed N" : "");
    r->seed = seed;
    r->verdict = DSV4_FAIL;
    const dsv4_chain_def *def = dsv4_chain_of(c->op);
    const char *mode = dsv4_params_str(&c->params, "mode");
    const run_kind kind = mode && strcmp(mode, "propagated") == 0 ? RUN_PROPAGATED : RUN_ISOLATED;
    dsv4_chain *x = def ? chain_new(def, kind, b, o, c, r, seed) : NULL;
    if (!x) {
        r->status = DSV4_ERUNTIME;
        snprintf(r->error, sizeof r->error, "%s", def ? "out of memory" : "not a chain");
        return;
    }
    if (c->golden[0] && !o->seed_override) {
        golden_base_of(c->golden, x->golden_base, sizeof x->golden_base);
        snprintf(r->golden, sizeof r->golden, "%s.*.h5", x->golden_base);
    }
    drift_metrics d = {0};
    if (!chain_execute(x, &c->params) && kind == RUN_PROPAGATED)
        drift_of(x, c, &d);
    assemble(x, c, &d, r);
    chain_free(x);
    r->seconds = now_seconds() - t0;
}

int dsv4_chain_gen_case(const dsv4_case *c, const char *outdir, uint64_t seed, int force, int *written,
                        dsv4_status *st)
{
    *written = 0;
    const dsv4_chain_def *def = dsv4_chain_of(c->op);
    if (!def)
        return dsv4_fail(st, DSV4_EINPUT, "case %s is not a chain", c->name);
    if (!outdir && !c->golden[0])
        return dsv4_fail(st, DSV4_EINPUT, "%s:%d: case %s has no golden path (add golden: or golden_dir:, or use -o DIR)",
                         c->file, c->line, c->name);
    if (!dsv4_chain_has_goldens(c))
        return DSV4_OK;
    dsv4_chain *x = chain_new(def, RUN_GEN, NULL, NULL, c, NULL, seed);
    if (!x)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    x->force = force;
    if (outdir) {
        char base[sizeof c->name];
        dsv4_golden_file_name(c->name, base, sizeof base);
        snprintf(x->golden_base, sizeof x->golden_base, "%s/%s", outdir, base);
    } else {
        golden_base_of(c->golden, x->golden_base, sizeof x->golden_base);
    }
    int rc = chain_execute(x, &c->params);
    *written = x->written;
    if (rc)
        dsv4_fail(st, rc, "%s", x->st.msg);
    chain_free(x);
    return rc;
}

int dsv4_chain_has_goldens(const dsv4_case *c)
{
    const char *mode = dsv4_params_str(&c->params, "mode");
    return dsv4_chain_of(c->op) && !(mode && strcmp(mode, "propagated") == 0);
}
