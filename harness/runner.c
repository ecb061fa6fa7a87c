/* runner.c - one case from inputs to verdict, and the reports. */
#define _POSIX_C_SOURCE 200809L
#include "runner.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int dsv4_golden_params(const dsv4_op *op, dsv4_params *ps, const char *where, dsv4_status *st)
{
    for (int k = 0; k < ps->n; k++) {
        const dsv4_param_spec *spec = dsv4_op_param(op, ps->p[k].name);
        if (!spec)
            return dsv4_fail(st, DSV4_EINPUT, "%s: op %s has no parameter '%s'", where, op->name,
                             ps->p[k].name);
        /* HDF5 has no int/float distinction in attributes written by some
         * tools: accept an integer where a float is declared. */
        if (spec->type == DSV4_P_FLOAT && ps->p[k].type == DSV4_P_INT) {
            ps->p[k].type = DSV4_P_FLOAT;
            ps->p[k].f = (double)ps->p[k].i;
        }
        if (spec->type != ps->p[k].type)
            return dsv4_fail(st, DSV4_EINPUT, "%s: /params/%s must be %s, not %s", where, spec->name,
                             dsv4_ptype_name(spec->type), dsv4_ptype_name(ps->p[k].type));
    }
    for (const dsv4_param_spec *spec = op->params; spec->name; spec++) {
        if (dsv4_params_find(ps, spec->name) || (spec->gen && !spec->def))
            continue;
        if (!spec->def)
            return dsv4_fail(st, DSV4_EINPUT, "%s: /params/%s is missing (%s)", where, spec->name,
                             spec->doc);
        dsv4_param p;
        if (dsv4_param_parse(spec, spec->def, &p, st) || dsv4_params_set(ps, &p, st))
            return st->code;
    }
    return DSV4_OK;
}

int dsv4_reference_outputs(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                           dsv4_tensors *exp, dsv4_status *st)
{
    dsv4_tensors kern = {0};
    int rc = op->alloc_outputs(c, in, &kern, st);
    for (int k = 0; !rc && k < kern.n; k++) {
        const dsv4_tensor *t = &kern.t[k];
        const dsv4_io_spec *io = dsv4_op_output(op, t->name);
        dsv4_dtype gdt = io && io->golden_dtype != DSV4_DT_NONE ? io->golden_dtype : t->dtype;
        dsv4_tensor *e;
        if ((rc = dsv4_tensors_add(exp, t->name, gdt, t->ndim, t->shape, &e, st)))
            break;
        if (gdt == t->dtype) {
            memcpy(e->data, t->data, t->nbytes);
        } else {
            e->output_dtype = t->dtype; /* the ideal, measured in the kernel's dtype */
            int64_t n = dsv4_tensor_numel(t);
            for (int64_t i = 0; i < n; i++)
                dsv4_tensor_set(e, i, dsv4_tensor_get(t, i));
        }
    }
    dsv4_tensors_free(&kern);
    return rc ? rc : op->reference(c, in, exp, st);
}

/* The reference as an implementation under test: its golden-dtype result
 * rounded into the kernel dtype (float outputs), else as is. */
static int run_backend(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                       const dsv4_tensors *in, dsv4_tensors *act, dsv4_status *st)
{
    if (!b->is_ref)
        return dsv4_backend_run(b, op, c, in, act, st);
    dsv4_tensors ideal = {0};
    int rc = dsv4_reference_outputs(op, c, in, &ideal, st);
    for (int k = 0; !rc && k < act->n; k++) {
        dsv4_tensor *t = &act->t[k];
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

typedef struct locate_ctx {
    const dsv4_op *op;
    const dsv4_opctx *c;
    const dsv4_tensors *in;
    const char *output;
} locate_ctx;

static void locate_adapter(const void *vctx, int64_t flat, char *buf, size_t len)
{
    const locate_ctx *l = vctx;
    l->op->locate(l->c, l->in, l->output, flat, buf, len);
}

static void set_error(dsv4_case_result *r, int code, const dsv4_status *st)
{
    r->status = code;
    r->verdict = DSV4_FAIL;
    snprintf(r->error, sizeof r->error, "%s", st->msg[0] ? st->msg : "error");
}

/* --rerun N: the implementation runs N - 1 more times on fresh outputs and
 * must reproduce the first run bit for bit (anchors.md 6: report
 * nondeterminism apart from inaccuracy).  A difference is a failure (1). */
static int rerun_identical(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                           const dsv4_tensors *first, const dsv4_backend *b, int rerun,
                           dsv4_case_result *r, dsv4_status *st)
{
    for (int k = 1; k < rerun; k++) {
        dsv4_tensors again = {0};
        int rc = op->alloc_outputs(c, in, &again, st);
        if (!rc)
            rc = run_backend(b, op, c, in, &again, st);
        for (int t = 0; !rc && t < again.n; t++) {
            const dsv4_tensor *x = &first->t[t], *y = &again.t[t];
            for (size_t i = 0; i < x->nbytes; i++)
                if (((const uint8_t *)x->data)[i] != ((const uint8_t *)y->data)[i]) {
                    char idx[96];
                    int64_t el = (int64_t)(i / dsv4_dtype_size(x->dtype));
                    r->status = DSV4_EFAIL;
                    r->verdict = DSV4_FAIL;
                    snprintf(r->error, sizeof r->error,
                             "nondeterministic: run %d of output '%s' differs from run 1 at %s (%.9g vs %.9g)",
                             k + 1, x->name, dsv4_index_str(x, el, idx, sizeof idx),
                             dsv4_tensor_get(y, el), dsv4_tensor_get(x, el));
                    rc = DSV4_EFAIL;
                    break;
                }
        }
        dsv4_tensors_free(&again);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

/* Validate inputs, run the implementation, compare every output. */
static void execute(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                    const dsv4_tensors *expected, const dsv4_backend *b, const dsv4_case *cs,
                    const dsv4_run_opts *o, dsv4_case_result *r)
{
    dsv4_status st = {0};
    dsv4_tensors act = {0};
    uint8_t *mask = NULL;
    double *ebound = NULL;
    int rc;
    if ((rc = op->validate(c, in, &st))) {
        dsv4_status_prefix(&st, "inputs");
        set_error(r, rc, &st);
        return;
    }
    if (!dsv4_backend_supports(b, op, c->variant)) {
        r->status = DSV4_ESKIP;
        snprintf(r->error, sizeof r->error, "%s does not implement %s [%s]", b->name, op->name,
                 dsv4_op_variant_name(op, c->variant));
        return;
    }
    if ((rc = op->alloc_outputs(c, in, &act, &st)) || (rc = run_backend(b, op, c, in, &act, &st)) ||
        (rc = rerun_identical(op, c, in, &act, b, o->rerun, r, &st))) {
        if (rc != DSV4_EFAIL)
            set_error(r, rc, &st);
        goto out;
    }
    r->verdict = DSV4_PASS;
    r->status = DSV4_OK;
    for (int k = 0; k < act.n && r->n_outputs < DSV4_MAX_TENSORS; k++) {
        const dsv4_tensor *a = &act.t[k];
        const dsv4_tensor *e = dsv4_tensors_get(expected, a->name);
        dsv4_output_result *out = &r->outputs[r->n_outputs];
        if (!e) {
            dsv4_fail(&st, DSV4_EINPUT, "expected output '%s' is missing", a->name);
            set_error(r, DSV4_EINPUT, &st);
            goto out;
        }
        if (!dsv4_tensor_same_shape(e, a)) {
            char se[96], sa[96];
            dsv4_fail(&st, DSV4_EINPUT, "expected output '%s' has shape %s; these inputs give %s",
                      a->name, dsv4_shape_str(e, se, sizeof se), dsv4_shape_str(a, sa, sizeof sa));
            set_error(r, DSV4_EINPUT, &st);
            goto out;
        }
        if ((rc = op->policy(c, in, a->name, &out->pol, &st))) {
            set_error(r, rc, &st);
            goto out;
        }
        if (cs)
            dsv4_case_apply_overrides(cs, a->name, &out->pol);
        int64_t n = dsv4_tensor_numel(e);
        free(mask);
        mask = NULL;
        if (op->mask) {
            mask = malloc(n ? (size_t)n : 1);
            if (!mask) {
                dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
                set_error(r, DSV4_ERUNTIME, &st);
                goto out;
            }
            if ((rc = op->mask(c, in, a->name, mask, n, &st))) {
                set_error(r, rc, &st);
                goto out;
            }
        }
        locate_ctx lc = {op, c, in, a->name};
        dsv4_cmp_aux aux = {NULL, NULL, NULL};
        if (op->bound && (out->pol.kind == DSV4_CMP_FLOAT || out->pol.kind == DSV4_CMP_MX)) {
            free(ebound);
            if (!(ebound = calloc(n ? (size_t)n : 1, sizeof *ebound))) {
                dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
                set_error(r, DSV4_ERUNTIME, &st);
                goto out;
            }
            if ((rc = op->bound(c, in, a->name, ebound, n, &st))) {
                set_error(r, rc, &st);
                goto out;
            }
            aux.elem_bound = ebound;
        }
        if (out->pol.companion[0]) {
            aux.expected = dsv4_tensors_get(expected, out->pol.companion);
            aux.actual = dsv4_tensors_get(&act, out->pol.companion);
            if (!aux.expected) /* a companion may also be an input (scores) */
                aux.expected = dsv4_tensors_get(in, out->pol.companion);
        }
        if ((rc = dsv4_compare(e, a, &out->pol, mask, op->locate ? locate_adapter : NULL, &lc, &aux,
                               &out->cmp, &st))) {
            set_error(r, rc, &st);
            goto out;
        }
        if (op->hint && out->cmp.bad)
            op->hint(c, in, a->name, e, a, &out->cmp);
        if (o->maps && out->cmp.verdict == DSV4_FAIL)
            out->map = dsv4_errmap_make(e, a, &out->pol, mask);
        r->n_outputs++;
        if (out->cmp.verdict > r->verdict)
            r->verdict = out->cmp.verdict;
    }
    if (r->verdict == DSV4_FAIL) {
        r->status = DSV4_EFAIL;
        if (o->repro_dir && dsv4_write_repro(o->repro_dir, op, c, in, expected, &act, r, &st))
            snprintf(r->error, sizeof r->error, "repro file not written: %s", st.msg);
        else if (r->repro_file[0])
            snprintf(r->replay, sizeof r->replay, "%s check %s --impl %s%s", o->argv0, r->repro_file, o->impl,
                     o->device_arg ? o->device_arg : "");
    }
out:
    free(mask);
    free(ebound);
    dsv4_tensors_free(&act);
}

static void result_init(dsv4_case_result *r, const char *name, const dsv4_op *op, int variant,
                        uint64_t seed)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    if (op) {
        snprintf(r->op, sizeof r->op, "%s", op->name);
        snprintf(r->variant, sizeof r->variant, "%s", dsv4_op_variant_name(op, variant));
    }
    r->seed = seed;
    r->verdict = DSV4_FAIL;
}

/* A golden must belong to the case: same op, variant and parameters. */
static int golden_matches_case(const dsv4_golden *g, const dsv4_case *c, dsv4_status *st)
{
    if (strcmp(g->op, c->op->name) != 0 || dsv4_op_variant(c->op, g->variant) != c->variant)
        return dsv4_fail(st, DSV4_EINPUT, "%s: golden is for %s [%s], the case is %s [%s]", c->golden,
                         g->op, g->variant, c->op->name, dsv4_op_variant_name(c->op, c->variant));
    for (int k = 0; k < c->params.n; k++) {
        const dsv4_param *p = &c->params.p[k];
        const dsv4_param *q = dsv4_params_find(&g->params, p->name);
        char a[2048], b[2048];
        dsv4_param_value_str(p, a, sizeof a);
        if (!q || strcmp(a, dsv4_param_value_str(q, b, sizeof b)) != 0)
            return dsv4_fail(st, DSV4_EINPUT,
                             "%s: stale golden: /params/%s is %s, the case (%s:%d) says %s; "
                             "regenerate with `dsv4check gen --force`",
                             c->golden, p->name, q ? b : "missing", c->file, c->line, a);
    }
    return DSV4_OK;
}

/* The generator must still produce the golden's inputs bit for bit:
 * otherwise the golden no longer tests what the case describes. */
static int inputs_match(const dsv4_tensors *gen, const dsv4_tensors *gold, char *why, size_t len)
{
    for (int k = 0; k < gen->n; k++) {
        const dsv4_tensor *a = &gen->t[k], *b = dsv4_tensors_get(gold, a->name);
        if (!b || a->dtype != b->dtype || !dsv4_tensor_same_shape(a, b) ||
            memcmp(a->data, b->data, a->nbytes) != 0) {
            snprintf(why, len,
                     "golden input '%s' differs from what the generator now produces: the generator "
                     "or the case changed; regenerate with `dsv4check gen --force` after review",
                     a->name);
            return 0;
        }
    }
    return 1;
}

void dsv4_run_case(const dsv4_case *c, const dsv4_backend *b, const dsv4_run_opts *o,
                   dsv4_case_result *r)
{
    double t0 = now_seconds();
    uint64_t seed = o->seed_override ? o->seed : c->seed;
    result_init(r, c->name, c->op, c->variant, seed);
    snprintf(r->origin, sizeof r->origin, "%s:%d:%d", c->file, c->line, c->col);
    snprintf(r->repro, sizeof r->repro, "%s run %s --filter '^%s$' --impl %s%s%s", o->argv0, c->file,
             c->name, o->impl, o->device_arg ? o->device_arg : "", o->seed_override ? " --seed N" : "");
    dsv4_opctx ctx = dsv4_opctx_make(c->op, &c->params, c->variant, seed);
    dsv4_status st = {0};
    dsv4_tensors in = {0}, expected = {0};
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    int use_golden = c->golden[0] && !o->seed_override;
    int rc = c->op->generate(&ctx, &in, &st);
    if (!rc && use_golden) {
        if (access(c->golden, F_OK) != 0)
            rc = dsv4_fail(&st, DSV4_EINPUT, "%s: golden file missing (write it with `dsv4check gen %s`)",
                           c->golden, c->file);
        else if (!(rc = dsv4_golden_read(c->golden, &g, &st)))
            rc = golden_matches_case(&g, c, &st);
        snprintf(r->golden, sizeof r->golden, "%s", c->golden);
    }
    if (rc) {
        set_error(r, rc, &st);
    } else if (use_golden) {
        char why[512];
        if (!inputs_match(&in, &g.inputs, why, sizeof why)) {
            r->status = DSV4_EFAIL;
            snprintf(r->error, sizeof r->error, "%s: %s", c->golden, why);
        } else {
            execute(c->op, &ctx, &g.inputs, &g.outputs, b, c, o, r);
        }
    } else if ((rc = dsv4_reference_outputs(c->op, &ctx, &in, &expected, &st))) {
        set_error(r, rc, &st);
    } else {
        execute(c->op, &ctx, &in, &expected, b, c, o, r);
    }
    dsv4_golden_free(&g);
    dsv4_tensors_free(&in);
    dsv4_tensors_free(&expected);
    r->seconds = now_seconds() - t0;
}

void dsv4_check_golden(const char *path, const dsv4_backend *b, const dsv4_run_opts *o,
                       dsv4_case_result *r)
{
    double t0 = now_seconds();
    dsv4_golden g;
    dsv4_status st = {0};
    memset(&g, 0, sizeof g);
    result_init(r, path, NULL, 0, 0);
    snprintf(r->origin, sizeof r->origin, "%s", path);
    snprintf(r->golden, sizeof r->golden, "%s", path);
    snprintf(r->repro, sizeof r->repro, "%s check %s --impl %s%s", o->argv0, path, o->impl,
                 o->device_arg ? o->device_arg : "");
    int rc = dsv4_golden_read(path, &g, &st);
    const dsv4_op *op = rc ? NULL : dsv4_op_find(g.op);
    int variant = 0;
    if (!rc && !op)
        rc = dsv4_fail(&st, DSV4_EINPUT, "%s: unknown op '%s' (see `dsv4check list`)", path, g.op);
    if (!rc && (variant = dsv4_op_variant(op, g.variant)) < 0)
        rc = dsv4_fail(&st, DSV4_EINPUT, "%s: op %s has no variant '%s'", path, g.op, g.variant);
    if (!rc)
        rc = dsv4_golden_params(op, &g.params, path, &st);
    if (rc) {
        set_error(r, rc, &st);
    } else {
        result_init(r, g.case_name[0] ? g.case_name : path, op, variant, g.seed);
        snprintf(r->origin, sizeof r->origin, "%s", path);
        snprintf(r->golden, sizeof r->golden, "%s", path);
        snprintf(r->repro, sizeof r->repro, "%s check %s --impl %s%s", o->argv0, path, o->impl,
                 o->device_arg ? o->device_arg : "");
        dsv4_opctx ctx = dsv4_opctx_make(op, &g.params, variant, g.seed);
        execute(op, &ctx, &g.inputs, &g.outputs, b, NULL, o, r);
        if (r->status == DSV4_EINPUT && strncmp(r->error, path, strlen(path)) != 0) {
            char tmp[sizeof r->error];
            snprintf(tmp, sizeof tmp, "%s: %s", path, r->error);
            snprintf(r->error, sizeof r->error, "%s", tmp);
        }
    }
    dsv4_golden_free(&g);
    r->seconds = now_seconds() - t0;
}

void dsv4_result_free_maps(dsv4_case_result *r)
{
    for (int k = 0; k < r->n_outputs; k++) {
        free(r->outputs[k].map);
        r->outputs[k].map = NULL;
    }
}

static const char *status_word(const dsv4_case_result *r)
{
    switch (r->status) {
    case DSV4_OK: return r->verdict == DSV4_WARN ? "WARN" : "PASS";
    case DSV4_EFAIL: return "FAIL";
    case DSV4_EINPUT: return "BAD-INPUT";
    case DSV4_ESKIP: return "SKIP";
    default: return "ERROR";
    }
}

void dsv4_print_result(FILE *f, const dsv4_case_result *r, int verbose)
{
    fprintf(f, "%-9s %s  [%s %s] %.3f s\n", status_word(r), r->name, r->op[0] ? r->op : "?",
            r->variant, r->seconds);
    if (r->error[0])
        fprintf(f, "    %s\n", r->error);
    for (int k = 0; k < r->n_outputs; k++)
        if (verbose || r->outputs[k].cmp.verdict != DSV4_PASS)
            dsv4_cmp_print(f, &r->outputs[k].cmp, &r->outputs[k].pol);
    if ((r->status == DSV4_EFAIL || r->status == DSV4_ERUNTIME || r->status == DSV4_EINPUT ||
         r->verdict == DSV4_WARN) && r->repro[0])
        fprintf(f, "    at %s; reproduce: %s\n", r->origin, r->repro);
    if (r->replay[0])
        fprintf(f, "    repro file %s; replay: %s\n", r->repro_file, r->replay);
}

int dsv4_exit_code(const dsv4_case_result *rs, int n)
{
    int bad_input = 0, runtime = 0, fail = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        bad_input |= rs[i].status == DSV4_EINPUT;
        runtime |= rs[i].status == DSV4_ERUNTIME;
        fail |= rs[i].status == DSV4_EFAIL;
        ran |= rs[i].status != DSV4_ESKIP;
    }
    if (bad_input)
        return DSV4_EINPUT;
    if (runtime)
        return DSV4_ERUNTIME;
    if (fail)
        return DSV4_EFAIL;
    return (n > 0 && !ran) ? DSV4_ESKIP : DSV4_OK;
}

/* The worst output of a case as "name: value" for the table: float
 * outputs by err/bound, the others (exact, mx, index_set) by their count of
 * mismatches; a failing output before any passing one. */
static void worst_str(const dsv4_case_result *r, char *buf, size_t len)
{
    double worst = 0;
    const char *name = "";
    int worst_fails = 0;
    for (int k = 0; k < r->n_outputs; k++) {
        const dsv4_cmp_result *c = &r->outputs[k].cmp;
        double v = r->outputs[k].pol.kind == DSV4_CMP_FLOAT ? c->worst_ratio : (double)c->bad;
        int fails = c->verdict == DSV4_FAIL;
        if (k == 0 || fails > worst_fails || (fails == worst_fails && v > worst)) {
            worst = v;
            name = c->output;
            worst_fails = fails;
        }
    }
    if (!r->n_outputs)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%s %.3g", name, worst);
}

int dsv4_print_summary(FILE *f, const dsv4_case_result *rs, int n)
{
    int pass = 0, fail = 0, skip = 0, warn = 0;
    fprintf(f, "\n%-48s %-34s %-10s %s\n", "case", "op", "result", "worst (float: err/bound; others: #mismatches)");
    for (int i = 0; i < n; i++) {
        char w[128];
        worst_str(&rs[i], w, sizeof w);
        fprintf(f, "%-48.48s %-34.34s %-10s %s\n", rs[i].name, rs[i].op, status_word(&rs[i]), w);
        if (rs[i].status == DSV4_ESKIP)
            skip++;
        else if (rs[i].status == DSV4_OK)
            pass++, warn += rs[i].verdict == DSV4_WARN;
        else
            fail++;
    }
    fprintf(f, "summary: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    if (warn)
        fprintf(f, "(%d of the passed cases warn: within budget, see above)\n", warn);
    return dsv4_exit_code(rs, n);
}

/* ---- JUnit XML and JSON ---- */

static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\n': fputs("&#10;", f); break;
        default:
            if ((unsigned char)*s < 0x20)
                fputc(' ', f);
            else
                fputc(*s, f);
        }
    }
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v)
{
    if (isnan(v))
        fputs("\"nan\"", f);
    else if (isinf(v))
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", f);
    else
        fprintf(f, "%.17g", v);
}

/* `, "key": value`: the writer's one field pattern. */
static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, ", \"%s\": ", key);
    json_number(f, v);
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, ", \"%s\": ", key);
    json_string(f, v);
}

static void mismatch_text(const dsv4_mismatch *m, char *buf, size_t len)
{
    snprintf(buf, len, "%s: expected %.9g, actual %.9g, abs %.3g, rel %.3g%s%s%s", m->index, m->expected,
             m->actual, m->abs_err, m->rel_err, m->where[0] ? " (" : "", m->where, m->where[0] ? ")" : "");
}

static void junit_property(FILE *f, const char *name, double v)
{
    fprintf(f, "        <property name=\"");
    xml_escape(f, name);
    fprintf(f, "\" value=\"%.9g\"/>\n", v);
}

static FILE *open_report(const char *path, dsv4_status *st)
{
    FILE *f = fopen(path, "w");
    if (!f)
        dsv4_fail(st, DSV4_EINPUT, "%s: cannot write report: %s", path, strerror(errno));
    return f;
}

static int close_report(FILE *f, const char *path, dsv4_status *st)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return dsv4_fail(st, DSV4_EINPUT, "%s: write error", path);
    return DSV4_OK;
}

int dsv4_write_junit(const char *path, const char *suite, const char *impl,
                     const dsv4_case_result *rs, int n, dsv4_status *st)
{
    FILE *f = open_report(path, st);
    if (!f)
        return st->code;
    int tests = 0, failures = 0, errors = 0, skipped = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        int units = rs[i].n_outputs ? rs[i].n_outputs : 1;
        tests += units;
        total += rs[i].seconds;
        if (rs[i].status == DSV4_ESKIP)
            skipped += units;
        else if (rs[i].status == DSV4_EINPUT || rs[i].status == DSV4_ERUNTIME)
            errors += units;
        else
            for (int k = 0; k < rs[i].n_outputs; k++)
                failures += rs[i].outputs[k].cmp.verdict == DSV4_FAIL;
        if (rs[i].status == DSV4_EFAIL && rs[i].n_outputs == 0)
            failures++;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    fprintf(f, "  <testsuite name=\"");
    xml_escape(f, suite);
    fprintf(f, " (impl ");
    xml_escape(f, impl);
    fprintf(f, ")\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", tests,
            failures, errors, skipped, total);
    for (int i = 0; i < n; i++) {
        const dsv4_case_result *r = &rs[i];
        int units = r->n_outputs ? r->n_outputs : 1;
        for (int k = 0; k < units; k++) {
            const dsv4_output_result *o = r->n_outputs ? &r->outputs[k] : NULL;
            fprintf(f, "    <testcase classname=\"");
            xml_escape(f, r->op[0] ? r->op : "dsv4check");
            fprintf(f, "\" name=\"");
            xml_escape(f, r->name);
            if (o) {
                fputc('/', f);
                xml_escape(f, o->cmp.output);
            }
            fprintf(f, "\" time=\"%.3f\">\n      <properties>\n", r->seconds / units);
            fprintf(f, "        <property name=\"variant\" value=\"");
            xml_escape(f, r->variant);
            fprintf(f, "\"/>\n        <property name=\"seed\" value=\"%" PRIu64 "\"/>\n", r->seed);
            fprintf(f, "        <property name=\"origin\" value=\"");
            xml_escape(f, r->origin);
            fprintf(f, "\"/>\n");
            if (r->drift[0]) {
                fprintf(f, "        <property name=\"drift\" value=\"");
                xml_escape(f, r->drift);
                fprintf(f, "\"/>\n");
            }
            if (o) {
                fprintf(f, "        <property name=\"policy\" value=\"");
                xml_escape(f, o->pol.rule);
                fprintf(f, "\"/>\n");
                junit_property(f, "compared", (double)o->cmp.compared);
                junit_property(f, "mismatches", (double)o->cmp.bad);
                junit_property(f, "max_abs", o->cmp.max_abs);
                junit_property(f, "max_rel", o->cmp.max_rel);
                junit_property(f, "max_ulp", o->cmp.max_ulp);
                junit_property(f, "worst_ratio", o->cmp.worst_ratio);
                junit_property(f, "nmse", o->cmp.nmse);
                junit_property(f, "cosine", o->cmp.cosine);
            }
            fprintf(f, "      </properties>\n");
            if (r->status == DSV4_ESKIP) {
                fprintf(f, "      <skipped message=\"");
                xml_escape(f, r->error);
                fprintf(f, "\"/>\n");
            } else if (r->status == DSV4_EINPUT || r->status == DSV4_ERUNTIME) {
                fprintf(f, "      <error message=\"");
                xml_escape(f, r->error);
                fprintf(f, "\"/>\n");
            } else if ((o && o->cmp.verdict == DSV4_FAIL) || (!o && r->status == DSV4_EFAIL)) {
                char msg[1024] = "";
                if (o && o->cmp.has_worst) {
                    char w[512];
                    mismatch_text(&o->cmp.worst, w, sizeof w);
                    snprintf(msg, sizeof msg, "%s: %s; worst %s", o->cmp.output, o->cmp.message, w);
                } else {
                    snprintf(msg, sizeof msg, "%s", o ? o->cmp.message : r->error);
                }
                fprintf(f, "      <failure message=\"");
                xml_escape(f, msg);
                fprintf(f, "\">");
                xml_escape(f, msg);
                if (o && o->cmp.hint[0]) {
                    fputs("&#10;hint: ", f);
                    xml_escape(f, o->cmp.hint);
                }
                fputs("&#10;reproduce: ", f);
                xml_escape(f, r->repro);
                fprintf(f, "</failure>\n");
            }
            fprintf(f, "    </testcase>\n");
        }
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    return close_report(f, path, st);
}

static void json_mismatch(FILE *f, const dsv4_mismatch *m)
{
    fprintf(f, "{\"index\": ");
    json_string(f, m->index);
    fprintf(f, ", \"flat\": %" PRId64 ", \"expected\": ", m->flat);
    json_number(f, m->expected);
    json_num(f, "actual", m->actual);
    json_num(f, "abs", m->abs_err);
    json_num(f, "rel", m->rel_err);
    json_num(f, "ulp", m->ulp_err);
    json_num(f, "bound", m->tol);
    json_str(f, "where", m->where);
    fprintf(f, "}");
}

int dsv4_write_json(const char *path, const char *suite, const char *impl,
                    const dsv4_case_result *rs, int n, dsv4_status *st)
{
    FILE *f = open_report(path, st);
    if (!f)
        return st->code;
    fprintf(f, "{\n  \"dsv4check\": ");
    json_string(f, DSV4_VERSION);
    fprintf(f, ",\n  \"suite\": ");
    json_string(f, suite);
    fprintf(f, ",\n  \"impl\": ");
    json_string(f, impl);
    fprintf(f, ",\n  \"exit_code\": %d,\n  \"cases\": [", dsv4_exit_code(rs, n));
    for (int i = 0; i < n; i++) {
        const dsv4_case_result *r = &rs[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        json_string(f, r->name);
        json_str(f, "op", r->op);
        json_str(f, "variant", r->variant);
        json_str(f, "origin", r->origin);
        json_str(f, "golden", r->golden);
        fprintf(f, ", \"seed\": %" PRIu64 ", \"result\": ", r->seed);
        json_string(f, status_word(r));
        fprintf(f, ", \"seconds\": %.6f, \"error\": ", r->seconds);
        json_string(f, r->error);
        json_str(f, "reproduce", r->repro);
        json_str(f, "repro_file", r->repro_file);
        json_str(f, "drift", r->drift);
        fprintf(f, ",\n     \"outputs\": [");
        for (int k = 0; k < r->n_outputs; k++) {
            const dsv4_output_result *o = &r->outputs[k];
            fprintf(f, "%s\n      {\"name\": ", k ? "," : "");
            json_string(f, o->cmp.output);
            json_str(f, "verdict", dsv4_verdict_name(o->cmp.verdict));
            fprintf(f, ", \"policy\": {\"kind\": ");
            json_string(f, dsv4_cmp_kind_name(o->pol.kind));
            json_num(f, "atol", o->pol.atol);
            json_num(f, "rtol", o->pol.rtol);
            json_num(f, "ulp", o->pol.ulp);
            json_str(f, "rule", o->pol.rule);
            fprintf(f, "},\n       \"metrics\": {\"count\": %" PRId64 ", \"compared\": %" PRId64
                       ", \"mismatches\": %" PRId64 ", \"max_abs\": ",
                    o->cmp.count, o->cmp.compared, o->cmp.bad);
            json_number(f, o->cmp.max_abs);
            json_num(f, "max_rel", o->cmp.max_rel);
            json_num(f, "max_ulp", o->cmp.max_ulp);
            json_num(f, "worst_ratio", o->cmp.worst_ratio);
            json_num(f, "nmse", o->cmp.nmse);
            json_num(f, "cosine", o->cmp.cosine);
            fprintf(f, "},\n       \"message\": ");
            json_string(f, o->cmp.message);
            json_str(f, "hint", o->cmp.hint);
            fprintf(f, ", \"first\": [");
            for (int j = 0; j < o->cmp.n_first; j++) {
                if (j)
                    fprintf(f, ", ");
                json_mismatch(f, &o->cmp.first[j]);
            }
            fprintf(f, "], \"worst\": ");
            if (o->cmp.has_worst)
                json_mismatch(f, &o->cmp.worst);
            else
                fprintf(f, "null");
            fprintf(f, "}");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
    return close_report(f, path, st);
}
