#define _POSIX_C_SOURCE 200809L
/* identify.c - which variant an implementation computes (identify.h). */
#include "identify.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cases.h"
#include "golden.h"
#include "runner.h"

/* One case of the sources: a suite's (inputs generated) or a golden's
 * (inputs read again when its turn comes). */
typedef struct item {
    const dsv4_case *cs;    /* or NULL */
    const char *golden;     /* the golden file, when cs is NULL */
    char name[192];
    const dsv4_op *op;
    int variant;
} item;

/* A case's inputs and parameters, ready to run. */
typedef struct loaded {
    dsv4_golden g;
    dsv4_tensors gen;
    const dsv4_tensors *in;
    const dsv4_params *params;
    uint64_t seed;
} loaded;

/* How one variant's reference fared against the implementation. */
typedef struct vstat {
    int bitexact, within, fail, error;
    int64_t bad;       /* differing elements, over the failing cases */
    double worst;      /* the largest error / bound of a failing case */
    char first[900];   /* where the first failing case first differs */
} vstat;

typedef struct sources {
    dsv4_suite *suites;
    int n_suites;
    char **goldens;    /* owned copies of golden paths */
    int n_goldens;
    item *items;
    int n_items;
} sources;

static int is_suite_path(const char *p)
{
    size_t n = strlen(p);
    return (n > 5 && strcmp(p + n - 5, ".yaml") == 0) || (n > 4 && strcmp(p + n - 4, ".yml") == 0);
}

static int add_item(sources *s, const item *it, int cap)
{
    if (s->n_items >= cap)
        return -1;
    s->items[s->n_items++] = *it;
    return 0;
}

/* Loads every source; items in source order. */
static int load_sources(const dsv4_identify_opts *o, char *const *paths, int n, sources *s, dsv4_status *st)
{
    memset(s, 0, sizeof *s);
    s->suites = calloc((size_t)n, sizeof *s->suites);
    s->goldens = calloc((size_t)n, sizeof *s->goldens);
    int cap = 0;
    if (!s->suites || !s->goldens)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int k = 0; k < n; k++) {
        if (!is_suite_path(paths[k])) {
            cap++;
            continue;
        }
        int rc = dsv4_suite_load(paths[k], &s->suites[s->n_suites], st);
        if (rc)
            return rc;
        cap += s->suites[s->n_suites++].n;
    }
    if (!(s->items = calloc(cap ? (size_t)cap : 1, sizeof *s->items)))
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int k = 0, si = 0; k < n; k++) {
        if (is_suite_path(paths[k])) {
            const dsv4_suite *su = &s->suites[si++];
            for (int i = 0; i < su->n; i++) {
                const dsv4_case *c = &su->cases[i];
                item it = {c, NULL, "", c->op, c->variant};
                snprintf(it.name, sizeof it.name, "%s", c->name);
                if ((!o->keep || o->keep(o->keep_ctx, c->name, c->op->name)) && add_item(s, &it, cap))
                    return dsv4_fail(st, DSV4_ERUNTIME, "too many cases");
            }
            continue;
        }
        dsv4_golden g;
        int rc = dsv4_golden_read(paths[k], &g, st);
        if (rc)
            return rc;
        item it = {NULL, NULL, "", dsv4_op_find(g.op), dsv4_op_variant(dsv4_op_find(g.op), g.variant)};
        snprintf(it.name, sizeof it.name, "%s", g.case_name);
        dsv4_golden_free(&g);
        if (!(s->goldens[s->n_goldens] = strdup(paths[k])))
            return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        it.golden = s->goldens[s->n_goldens++];
        if ((!o->keep || o->keep(o->keep_ctx, it.name, it.op->name)) && add_item(s, &it, cap))
            return dsv4_fail(st, DSV4_ERUNTIME, "too many cases");
    }
    return DSV4_OK;
}

static void free_sources(sources *s)
{
    for (int k = 0; k < s->n_suites; k++)
        dsv4_suite_free(&s->suites[k]);
    for (int k = 0; k < s->n_goldens; k++)
        free(s->goldens[k]);
    free(s->suites);
    free(s->goldens);
    free(s->items);
}

static int load_item(const item *it, loaded *l, dsv4_status *st)
{
    memset(l, 0, sizeof *l);
    if (it->cs) {
        l->params = &it->cs->params;
        l->seed = it->cs->seed;
        dsv4_opctx c = dsv4_opctx_make(it->op, l->params, it->variant, l->seed);
        l->in = &l->gen;
        return it->op->generate(&c, &l->gen, st);
    }
    int rc = dsv4_golden_read(it->golden, &l->g, st);
    l->in = &l->g.inputs;
    l->params = &l->g.params;
    l->seed = l->g.seed;
    return rc;
}

static void unload_item(loaded *l)
{
    dsv4_golden_free(&l->g);
    dsv4_tensors_free(&l->gen);
}

/* dst (kernel dtypes) from src (the reference's golden dtypes): rounded
 * where the two differ, as --impl ref does. */
static void round_into(dsv4_tensors *dst, const dsv4_tensors *src)
{
    for (int k = 0; k < dst->n; k++) {
        dsv4_tensor *t = &dst->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(src, t->name);
        if (!e || !dsv4_tensor_same_shape(e, t))
            continue;
        if (e->dtype == t->dtype) {
            memcpy(t->data, e->data, t->nbytes);
            continue;
        }
        int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            dsv4_tensor_set(t, i, dsv4_tensor_get(e, i));
    }
}

/* The implementation's outputs for one case, called as context c. */
static int run_impl(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                    const dsv4_tensors *in, dsv4_tensors *act, dsv4_status *st)
{
    int rc = op->alloc_outputs(c, in, act, st);
    if (rc || !b->is_ref)
        return rc ? rc : dsv4_backend_run(b, op, c, id, in, act, st);
    dsv4_tensors ideal = {0};
    if (!(rc = dsv4_reference_outputs(op, c, in, &ideal, st)))
        round_into(act, &ideal);
    dsv4_tensors_free(&ideal);
    return rc;
}

/* Whether every compared element of act equals exp rounded into act's dtypes. */
static int bit_exact(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, const dsv4_tensors *exp,
                     const dsv4_tensors *act, int *same, dsv4_status *st)
{
    dsv4_tensors r = {0};
    int rc = DSV4_OK;
    *same = 1;
    for (int k = 0; !rc && k < act->n; k++) {
        dsv4_tensor *t;
        rc = dsv4_tensors_add(&r, act->t[k].name, act->t[k].dtype, act->t[k].ndim, act->t[k].shape, &t, st);
    }
    if (!rc)
        round_into(&r, exp);
    for (int k = 0; !rc && *same && k < act->n; k++) {
        const dsv4_tensor *a = &act->t[k], *e = &r.t[k];
        int64_t n = dsv4_tensor_numel(a);
        size_t es = dsv4_dtype_size(a->dtype);
        uint8_t *mask = op->mask ? malloc(n ? (size_t)n : 1) : NULL;
        if (op->mask && (!mask || (rc = op->mask(c, in, a->name, mask, n, st)))) {
            rc = rc ? rc : dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        } else {
            for (int64_t i = 0; i < n && *same; i++)
                if ((!mask || mask[i]) && memcmp((const uint8_t *)a->data + (size_t)i * es,
                                                 (const uint8_t *)e->data + (size_t)i * es, es) != 0)
                    *same = 0;
        }
        free(mask);
    }
    dsv4_tensors_free(&r);
    return rc;
}

/* The first failing output of r as "case: output [i, j]: expected E, actual A (where)". */
static void first_failure(const char *case_name, const dsv4_case_result *r, char *buf, size_t len)
{
    for (int k = 0; k < r->n_outputs; k++) {
        const dsv4_cmp_result *m = &r->outputs[k].cmp;
        if (m->verdict != DSV4_FAIL)
            continue;
        if (m->n_first > 0)
            snprintf(buf, len, "%s: %s %s: expected %.9g, actual %.9g%s%s%s", case_name, m->output, m->first[0].index,
                     m->first[0].expected, m->first[0].actual, m->first[0].where[0] ? " (" : "", m->first[0].where,
                     m->first[0].where[0] ? ")" : "");
        else
            snprintf(buf, len, "%s: %s: %s", case_name, m->output, m->message[0] ? m->message : "differs");
        return;
    }
    snprintf(buf, len, "%s: %s", case_name, r->error[0] ? r->error : "differs");
}

/* The implementation's outputs act against variant w's reference. */
static void judge_variant(const dsv4_op *op, const item *it, const loaded *l, int w, const dsv4_tensors *act,
                          vstat *vs)
{
    dsv4_opctx c = dsv4_opctx_make(op, l->params, w, l->seed);
    dsv4_status st = {0};
    dsv4_tensors exp = {0};
    dsv4_case_result *r = calloc(1, sizeof *r);
    int same = 0, rc = r ? op->validate(&c, l->in, &st) : dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_reference_outputs(op, &c, l->in, &exp, &st);
    if (!rc && (rc = dsv4_judge_outputs(op, &c, l->in, &exp, act, it->cs, 0, r)))
        snprintf(st.msg, sizeof st.msg, "%s", r->error);
    if (!rc && r->status == DSV4_OK)
        rc = bit_exact(op, &c, l->in, &exp, act, &same, &st);
    if (rc) {
        if (!vs->error && !vs->fail)
            snprintf(vs->first, sizeof vs->first, "%s: not comparable: %s", it->name, st.msg);
        vs->error++;
    } else if (r->status == DSV4_OK) {
        vs->bitexact += same;
        vs->within += !same;
    } else {
        if (!vs->fail)
            first_failure(it->name, r, vs->first, sizeof vs->first);
        vs->fail++;
        for (int k = 0; k < r->n_outputs; k++) {
            const dsv4_cmp_result *m = &r->outputs[k].cmp;
            vs->bad += m->verdict == DSV4_FAIL ? m->bad : 0;
            if (m->verdict == DSV4_FAIL && m->worst_ratio > vs->worst)
                vs->worst = m->worst_ratio;
        }
    }
    dsv4_tensors_free(&exp);
    free(r);
}

/* Nearest failing variant: fewest failing cases, then elements, then error. */
static int nearer(const vstat *a, const vstat *b)
{
    if (a->fail + a->error != b->fail + b->error)
        return a->fail + a->error < b->fail + b->error;
    return a->bad != b->bad ? a->bad < b->bad : a->worst < b->worst;
}

/* One op, the implementation called as variant v on the op's cases (with
 * only, just the cases of variant v: an actuals file's outputs were computed
 * as their cases' variants); returns 1 when a variant matches, 0 when none,
 * -1 when the implementation ran on no case. */
static int identify_op(const dsv4_backend *b, const dsv4_op *op, int v, int only, const sources *s, FILE *out)
{
    int nv = dsv4_op_variant_count(op), ran = 0, skipped = 0, broken = 0;
    char why[700] = "";
    vstat *vs = calloc((size_t)nv, sizeof *vs);
    if (!vs)
        return -1;
    for (int i = 0; i < s->n_items; i++) {
        const item *it = &s->items[i];
        if (it->op != op || (only && it->variant != v))
            continue;
        loaded l;
        dsv4_status st = {0};
        dsv4_tensors act = {0};
        int rc = load_item(it, &l, &st);
        dsv4_opctx c = dsv4_opctx_make(op, l.params, v, l.seed);
        const dsv4_case_id id = {it->name, it->golden};
        char whynot[300];
        if (!rc && !dsv4_backend_provides(b, op, v, &id, whynot, sizeof whynot))
            rc = dsv4_fail(&st, DSV4_ESKIP, "%s", whynot);
        if (!rc)
            rc = run_impl(b, op, &c, &id, l.in, &act, &st);
        if (rc == DSV4_ESKIP) {
            skipped++;
        } else if (rc) {
            if (!broken++)
                snprintf(why, sizeof why, "%s: %s", it->name, st.msg);
        } else {
            ran++;
            for (int w = 0; w < nv; w++)
                judge_variant(op, it, &l, w, &act, &vs[w]);
        }
        dsv4_tensors_free(&act);
        unload_item(&l);
    }
    int match = -1;
    if (ran) {
        fprintf(out, "%s, %s %s: %d case%s\n", op->name, only ? "the file's cases of variant" : "called as",
                dsv4_op_variant_name(op, v), ran, ran == 1 ? "" : "s");
        int nearest = -1, best = -1;
        for (int w = 0; w < nv; w++) {
            const vstat *x = &vs[w];
            const char *word = x->fail || x->error ? "differs" : x->within ? "within bound" : "bit for bit";
            fprintf(out, "  %-28s %-13s", dsv4_op_variant_name(op, w), word);
            if (x->fail || x->error)
                fprintf(out, " %d of %d cases fail%s", x->fail + x->error, ran, x->error ? " or cannot compare" : "");
            else
                fprintf(out, " %d of %d cases%s", ran, ran, x->within && x->bitexact ? " (some bit for bit)" : "");
            fprintf(out, "\n");
            if ((x->fail || x->error) && (nearest < 0 || nearer(x, &vs[nearest])))
                nearest = w;
            if (!x->fail && !x->error && (best < 0 || (x->within == 0 && vs[best].within > 0)))
                best = w;
        }
        if (nearest >= 0)
            fprintf(out, "  nearest failing: %s, first differs at %s\n", dsv4_op_variant_name(op, nearest),
                     vs[nearest].first);
        if (best >= 0) {
            fprintf(out, "  => %s (%s)", dsv4_op_variant_name(op, best), vs[best].within ? "within bound" : "bit for bit");
            for (int w = 0, also = 0; w < nv; w++)
                if (w != best && !vs[w].fail && !vs[w].error)
                    fprintf(out, "%s%s", also++ ? ", " : "; these inputs do not tell it from ", dsv4_op_variant_name(op, w));
            fprintf(out, "\n");
        } else
            fprintf(out, "  => no variant of %s\n", op->name);
        match = best >= 0;
    }
    if (broken)
        fprintf(out, "%s: %d case%s did not run (first: %s)\n", op->name, broken, broken == 1 ? "" : "s", why);
    if (skipped && ran)
        fprintf(out, "%s: %d case%s not provided\n", op->name, skipped, skipped == 1 ? "" : "s");
    free(vs);
    return match;
}

int dsv4_identify(const dsv4_identify_opts *o, char *const *paths, int n, FILE *out, dsv4_status *st)
{
    sources s;
    dsv4_backend b;
    int rc = load_sources(o, paths, n, &s, st);
    if (!rc && s.n_items == 0)
        rc = dsv4_fail(st, DSV4_EINPUT, "identify: no case selected");
    if (!rc)
        rc = dsv4_backend_open_isolated(o->impl, o->device, o->timeout_s, &b, st);
    if (rc) {
        free_sources(&s);
        return rc;
    }
    fprintf(out, "identify: %s on %d case%s\n", b.name, s.n_items, s.n_items == 1 ? "" : "s");
    int provided = 0, unmatched = 0;
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        int has = 0;
        for (int k = 0; k < s.n_items && !has; k++)
            has = s.items[k].op == op;
        if (!has)
            continue;
        for (int v = 0; v < dsv4_op_variant_count(op); v++) {
            int cases = 0;
            for (int k = 0; k < s.n_items; k++)
                cases += s.items[k].op == op && s.items[k].variant == v;
            if (b.actual ? !cases : !dsv4_backend_supports(&b, op, v))
                continue;
            int m = identify_op(&b, op, v, b.actual != NULL, &s, out);
            provided += m >= 0;
            unmatched += m == 0;
        }
    }
    fprintf(out, "identify: %d op group%s judged, %d matching no variant\n", provided, provided == 1 ? "" : "s",
            unmatched);
    dsv4_backend_close(&b);
    free_sources(&s);
    if (!provided)
        return dsv4_fail(st, DSV4_ESKIP, "%s provides none of the sources' ops", o->impl);
    return unmatched ? DSV4_EFAIL : DSV4_OK;
}
