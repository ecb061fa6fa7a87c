/* runner.c - one case from inputs to verdict (the reports are report.c's). */
#define _POSIX_C_SOURCE 200809L
#include "runner.h"

#include "chain.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "readpast.h"
#include "repro.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *dsv4_impl_option(const char *impl, char *buf, size_t len)
{
    size_t n = strlen(DSV4_ACTUAL_IMPL);
    if (strncmp(impl, DSV4_ACTUAL_IMPL, n) == 0)
        snprintf(buf, len, "--actual %s", impl + n);
    else
        snprintf(buf, len, "--impl %s", impl);
    return buf;
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
    for (const dsv4_param_spec *spec = dsv4_op_params(op); spec->name; spec++) {
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

int dsv4_golden_open(const char *path, dsv4_golden *g, const dsv4_op **op, int *variant, dsv4_status *st)
{
    *op = NULL;
    *variant = 0;
    int rc = dsv4_golden_read(path, g, st);
    const dsv4_op *found = rc ? NULL : dsv4_op_find(g->op);
    if (!rc && !found)
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: unknown op '%s' (see `dsv4check list`)", path, g->op);
    if (!rc && (*variant = dsv4_op_variant(found, g->variant)) < 0)
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: op %s has no variant '%s'", path, g->op, g->variant);
    if (!rc)
        rc = dsv4_golden_params(found, &g->params, path, st);
    if (!rc)
        *op = found;
    return rc;
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
static int run_backend(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                       const dsv4_tensors *in, dsv4_tensors *act, dsv4_status *st)
{
    if (!b->is_ref)
        return dsv4_backend_run(b, op, c, id, in, act, st);
    dsv4_tensors ideal = {0};
    int rc = dsv4_reference_outputs(op, c, in, &ideal, st);
    if (!rc)
        dsv4_round_into(act, &ideal);
    dsv4_tensors_free(&ideal);
    return rc;
}

void dsv4_round_into(dsv4_tensors *kern, const dsv4_tensors *ideal)
{
    for (int k = 0; k < kern->n; k++) {
        dsv4_tensor *t = &kern->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(ideal, t->name);
        if (!e)
            continue;
        if (e->dtype == t->dtype) {
            memcpy(t->data, e->data, t->nbytes < e->nbytes ? t->nbytes : e->nbytes);
            continue;
        }
        const int64_t n = dsv4_tensor_numel(t), ne = dsv4_tensor_numel(e);
        for (int64_t i = 0; i < n && i < ne; i++)
            dsv4_tensor_set(t, i, dsv4_tensor_get(e, i));
    }
}

void dsv4_op_locate(const void *vctx, int64_t flat, char *buf, size_t len)
{
    const dsv4_op_locate_ctx *l = vctx;
    l->op->locate(l->c, l->in, l->output, flat, buf, len);
}

static void set_error(dsv4_case_result *r, int code, const dsv4_status *st)
{
    r->status = code;
    r->verdict = DSV4_FAIL;
    snprintf(r->error, sizeof r->error, "%s", st->msg[0] ? st->msg : "error");
}

/* --rerun N: the implementation runs N - 1 more times on fresh outputs and
 * must reproduce the first run bit for bit: nondeterminism is reported
 * apart from inaccuracy.  A difference is a failure (1). */
static int rerun_identical(const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                           const dsv4_tensors *in, const dsv4_tensors *first, const dsv4_backend *b, int rerun,
                           dsv4_case_result *r, dsv4_status *st)
{
    for (int k = 1; k < rerun; k++) {
        dsv4_tensors again = {0};
        int rc = op->alloc_outputs(c, in, &again, st);
        if (!rc)
            rc = run_backend(b, op, c, id, in, &again, st);
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

/* The file repro.c writes for a case: dir/<name>.h5 with every character
 * but [A-Za-z0-9._-] as '_' (its file_name). */
static void repro_path(const char *dir, const char *name, char *buf, size_t len)
{
    char base[200];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof base; k++) {
        char ch = name[k];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        base[k] = ok ? ch : '_';
    }
    base[k] = '\0';
    snprintf(buf, len, "%s/%s.h5", dir, base);
}

/* --repro-dir: the case's inputs and expected outputs, with what the
 * implementation produced (an empty set when it produced nothing), as a
 * file that `check` replays; never over a file this run reads (exit 2). */
static void write_repro(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                        const dsv4_tensors *expected, const dsv4_tensors *actual, const dsv4_run_opts *o,
                        dsv4_case_result *r)
{
    if (!o->repro_dir)
        return;
    dsv4_status st = {0};
    char path[DSV4_PATH_MAX + 200];
    repro_path(o->repro_dir, r->name, path, sizeof path);
    const char *input = dsv4_input_files_match(o->inputs, path);
    int rc = input ? dsv4_fail(&st, DSV4_EINPUT, "%s is the same file as the input %s (choose another --repro-dir)",
                               path, input)
                   : dsv4_write_repro(o->repro_dir, op, c, in, expected, actual, r, &st);
    if (rc) {
        size_t n = strlen(r->error);
        snprintf(r->error + n, sizeof r->error - n, "%srepro file not written: %s", n ? "; " : "", st.msg);
        if (input)
            r->status = DSV4_EINPUT;
    } else if (r->repro_file[0]) {
        char impl[DSV4_PATH_MAX + 16];
        snprintf(r->replay, sizeof r->replay, "%s check %s %s%s", o->argv0, r->repro_file,
                 dsv4_impl_option(o->impl, impl, sizeof impl), o->device_arg ? o->device_arg : "");
    }
}

int dsv4_judge_outputs(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                       const dsv4_tensors *expected, const dsv4_tensors *act, const dsv4_case *cs, int maps,
                       dsv4_special_mode special, dsv4_case_result *r)
{
    dsv4_status st = {0};
    uint8_t *mask = NULL;
    double *ebound = NULL;
    dsv4_special_lanes sl;
    r->verdict = DSV4_PASS;
    r->status = DSV4_OK;
    r->special.mode = special;
    int rc = dsv4_special_find(op, c, in, cs, &sl, r->special.unknown, sizeof r->special.unknown, &st);
    r->special.has_lanes = sl.n > 0;
    for (int k = 0; !rc && k < act->n && r->n_outputs < DSV4_MAX_TENSORS; k++) {
        const dsv4_tensor *a = &act->t[k];
        const dsv4_tensor *e = dsv4_tensors_get(expected, a->name);
        dsv4_output_result *out = &r->outputs[r->n_outputs];
        if (!e) {
            rc = dsv4_fail(&st, DSV4_EINPUT, "expected output '%s' is missing", a->name);
            break;
        }
        if (!dsv4_tensor_same_shape(e, a)) {
            char se[96], sa[96];
            rc = dsv4_fail(&st, DSV4_EINPUT, "expected output '%s' has shape %s; these inputs give %s", a->name,
                           dsv4_shape_str(e, se, sizeof se), dsv4_shape_str(a, sa, sizeof sa));
            break;
        }
        if ((rc = op->policy(c, in, a->name, &out->pol, &st)))
            break;
        if (cs)
            dsv4_case_apply_overrides(cs, a->name, &out->pol);
        int64_t n = dsv4_tensor_numel(e);
        free(mask);
        mask = NULL;
        if (op->mask) {
            if (!(mask = malloc(n ? (size_t)n : 1))) {
                rc = dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
                break;
            }
            if ((rc = op->mask(c, in, a->name, mask, n, &st)))
                break;
        }
        dsv4_op_locate_ctx lc = {op, c, in, a->name};
        dsv4_cmp_aux aux = {NULL, NULL, NULL, NULL};
        if (op->bound && (out->pol.kind == DSV4_CMP_FLOAT || out->pol.kind == DSV4_CMP_MX)) {
            free(ebound);
            if (!(ebound = calloc(n ? (size_t)n : 1, sizeof *ebound))) {
                rc = dsv4_fail(&st, DSV4_ERUNTIME, "out of memory");
                break;
            }
            if ((rc = op->bound(c, in, a->name, ebound, n, &st)))
                break;
            aux.elem_bound = ebound;
        }
        if (out->pol.companion[0]) {
            aux.expected = dsv4_tensors_get(expected, out->pol.companion);
            aux.actual = dsv4_tensors_get(act, out->pol.companion);
            if (!aux.expected) /* a companion may also be an input (scores) */
                aux.expected = dsv4_tensors_get(in, out->pol.companion);
        }
        if ((rc = dsv4_compare(e, a, &out->pol, mask, op->locate ? dsv4_op_locate : NULL, &lc, &aux, &out->cmp,
                               &st)))
            break;
        int64_t n_special = 0;
        const uint8_t *lanes = dsv4_special_lanes_of(&sl, a->name, &n_special);
        if (lanes && (rc = dsv4_special_split_output(e, a, &out->pol, mask, op->locate ? dsv4_op_locate : NULL, &lc,
                                                     &aux, lanes, n_special, special, &out->cmp, &out->special,
                                                     &st)))
            break;
        r->special.relied |= lanes && out->cmp.verdict < out->special.strict_verdict;
        if (op->hint && out->cmp.bad)
            op->hint(c, in, a->name, e, a, &out->cmp);
        if (maps && out->cmp.verdict == DSV4_FAIL)
            out->map = dsv4_errmap_make(e, a, &out->pol, mask);
        r->n_outputs++;
        if (out->cmp.verdict > r->verdict)
            r->verdict = out->cmp.verdict;
    }
    free(mask);
    free(ebound);
    dsv4_special_free(&sl);
    r->special.relied &= r->verdict != DSV4_FAIL; /* a pass (or warn) that separate made */
    if (rc)
        set_error(r, rc, &st);
    else if (r->verdict == DSV4_FAIL)
        r->status = DSV4_EFAIL;
    return rc;
}

/* Validate inputs, run the implementation, compare every output. */
static void execute(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in,
                    const dsv4_tensors *expected, const dsv4_backend *b, const dsv4_case *cs,
                    const dsv4_run_opts *o, dsv4_case_result *r)
{
    dsv4_status st = {0};
    dsv4_tensors act = {0};
    int rc;
    if ((rc = op->validate(c, in, &st))) {
        dsv4_status_prefix(&st, "inputs");
        set_error(r, rc, &st);
        return;
    }
    const dsv4_case_id id = {r->name, r->golden[0] ? r->golden : NULL};
    if (!dsv4_backend_provides(b, op, c->variant, &id, r->error, sizeof r->error)) {
        r->status = DSV4_ESKIP;
        return;
    }
    if ((rc = op->alloc_outputs(c, in, &act, &st))) {
        set_error(r, rc, &st);
    } else if ((rc = run_backend(b, op, c, &id, in, &act, &st)) ||
               (rc = rerun_identical(op, c, &id, in, &act, b, o->rerun, r, &st))) {
        static const dsv4_tensors nothing;
        if (rc != DSV4_EFAIL)
            set_error(r, rc, &st);
        /* A crashed, killed or refusing implementation: replayable too (a
         * malformed actuals file is not the kernel's doing). */
        if (rc != DSV4_ESKIP && !(b->actual && rc == DSV4_EINPUT))
            write_repro(op, c, in, expected, rc == DSV4_EFAIL ? &act : &nothing, o, r);
    } else if (!dsv4_judge_outputs(op, c, in, expected, &act, cs, o->maps, o->special, r) && r->verdict == DSV4_FAIL) {
        dsv4_readpast_attribute(b, op, c, &id, in, &act, r->outputs, r->n_outputs);
        write_repro(op, c, in, expected, &act, o, r);
    }
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
    if (dsv4_chain_of(c->op)) { /* a composite case: run stage by stage (chain.h) */
        dsv4_chain_run_case(c, b, o, r);
        return;
    }
    double t0 = now_seconds();
    uint64_t seed = o->seed_override ? o->seed : c->seed;
    result_init(r, c->name, c->op, c->variant, seed);
    snprintf(r->origin, sizeof r->origin, "%s:%d:%d", c->file, c->line, c->col);
    char impl[DSV4_PATH_MAX + 16];
    snprintf(r->repro, sizeof r->repro, "%s run %s --filter '^%s$' %s%s%s", o->argv0, c->file, c->name,
             dsv4_impl_option(o->impl, impl, sizeof impl), o->device_arg ? o->device_arg : "",
             o->seed_override ? " --seed N" : "");
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
    char impl[DSV4_PATH_MAX + 16];
    dsv4_impl_option(o->impl, impl, sizeof impl);
    double t0 = now_seconds();
    dsv4_golden g;
    dsv4_status st = {0};
    memset(&g, 0, sizeof g);
    result_init(r, path, NULL, 0, 0);
    snprintf(r->origin, sizeof r->origin, "%s", path);
    snprintf(r->golden, sizeof r->golden, "%s", path);
    snprintf(r->repro, sizeof r->repro, "%s check %s %s%s", o->argv0, path, impl, o->device_arg ? o->device_arg : "");
    const dsv4_op *op = NULL;
    int variant = 0;
    int rc = dsv4_golden_open(path, &g, &op, &variant, &st);
    if (rc) {
        set_error(r, rc, &st);
    } else {
        result_init(r, g.case_name[0] ? g.case_name : path, op, variant, g.seed);
        snprintf(r->origin, sizeof r->origin, "%s", path);
        snprintf(r->golden, sizeof r->golden, "%s", path);
        snprintf(r->repro, sizeof r->repro, "%s check %s %s%s", o->argv0, path, impl, o->device_arg ? o->device_arg : "");
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
