/* core.c - the plug-in glue of the mutants: the ABI call as a mut_call, the
 * reference as a plug-in, and the small helpers of mutant.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../harness/runner.h"
#include "mutant.h"

typedef struct mut_def {
    const char *id, *op;
    const char *variants; /* "|"-separated variant names, or "*" for all */
    int (*run)(mut_call *m);
} mut_def;

static const mut_def catalogue[] = {
#define MUTANT(id, op, variants, expect, planted, killers) {#id, #op, variants, mut_##id},
#include "catalogue.def"
#undef MUTANT
};

static const mut_def *chosen;
static char plugin_name[96];

static int variant_listed(const char *list, const char *variant)
{
    if (strcmp(list, "*") == 0)
        return 1;
    const size_t n = strlen(variant);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, variant, n) == 0)
            return 1;
        p += len + (bar != NULL);
    }
    return 0;
}

static int mutant_supports(const char *op, const char *variant)
{
    return chosen && strcmp(op, chosen->op) == 0 && variant_listed(chosen->variants, variant);
}

static int mutant_init(int device, char *err, size_t errlen)
{
    (void)device;
    if (!chosen) {
        snprintf(err, errlen, "no such mutant in tests/mutants/catalogue.def");
        return DSV4_PLUGIN_EINPUT;
    }
    return DSV4_PLUGIN_OK;
}

static int to_params(const dsv4_plugin_param *ps, int n, dsv4_params *out, dsv4_status *st)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; k < n; k++) {
        dsv4_param p;
        memset(&p, 0, sizeof p);
        snprintf(p.name, sizeof p.name, "%s", ps[k].name);
        p.type = (dsv4_ptype)ps[k].kind;
        p.i = ps[k].i;
        p.f = ps[k].f;
        if (ps[k].s)
            snprintf(p.s, sizeof p.s, "%s", ps[k].s);
        if (ps[k].n < 0 || ps[k].n > DSV4_PARAM_LIST_MAX)
            return dsv4_fail(st, DSV4_EINPUT, "parameter %s: %d list entries", p.name, ps[k].n);
        p.n = ps[k].n;
        if (p.n)
            memcpy(p.list, ps[k].list, (size_t)p.n * sizeof p.list[0]);
        int rc = dsv4_params_set(out, &p, st);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

static int to_inputs(const dsv4_plugin_tensor *ts, int n, dsv4_tensors *in, dsv4_status *st)
{
    for (int k = 0; k < n; k++) {
        dsv4_tensor *t;
        int rc = dsv4_tensors_add(in, ts[k].name, (dsv4_dtype)ts[k].dtype, ts[k].ndim, ts[k].shape, &t, st);
        if (rc)
            return rc;
        if (t->nbytes != ts[k].nbytes)
            return dsv4_fail(st, DSV4_EINPUT, "input %s: %zu bytes for its shape, %zu given", ts[k].name,
                             t->nbytes, ts[k].nbytes);
        if (t->nbytes)
            memcpy(t->data, ts[k].data, t->nbytes);
    }
    return DSV4_OK;
}

/* Views of the plug-in's buffers: never freed here. */
static int to_outputs(dsv4_plugin_tensor *ts, int n, dsv4_tensors *out, dsv4_status *st)
{
    if (n > DSV4_MAX_TENSORS)
        return dsv4_fail(st, DSV4_EINPUT, "%d outputs: more than %d", n, DSV4_MAX_TENSORS);
    memset(out, 0, sizeof *out);
    for (int k = 0; k < n; k++) {
        dsv4_tensor *t = &out->t[k];
        if (ts[k].ndim < 0 || ts[k].ndim > DSV4_MAX_DIMS)
            return dsv4_fail(st, DSV4_EINPUT, "output %s: rank %d", ts[k].name, ts[k].ndim);
        snprintf(t->name, sizeof t->name, "%s", ts[k].name);
        t->dtype = (dsv4_dtype)ts[k].dtype;
        t->output_dtype = DSV4_DT_NONE;
        t->ndim = ts[k].ndim;
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = ts[k].shape[d];
        t->data = ts[k].data;
        t->nbytes = ts[k].nbytes;
    }
    out->n = n;
    return DSV4_OK;
}

static int plugin_code(int rc)
{
    return rc == DSV4_OK ? DSV4_PLUGIN_OK
           : rc == DSV4_EINPUT ? DSV4_PLUGIN_EINPUT
           : rc == DSV4_ESKIP ? DSV4_PLUGIN_ESKIP
                              : DSV4_PLUGIN_ERUNTIME;
}

static int mutant_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                      const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs,
                      char *err, size_t errlen)
{
    dsv4_status st = {0};
    mut_call *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return DSV4_PLUGIN_ERUNTIME;
    }
    m->st = &st;
    int rc = DSV4_OK;
    if (!mutant_supports(op, variant) || !(m->op = dsv4_op_find(op)) || (m->variant = dsv4_op_variant(m->op, variant)) < 0)
        rc = dsv4_fail(&st, DSV4_ESKIP, "mutant %s: %s [%s] not provided", chosen ? chosen->id : "?", op, variant);
    if (!rc && !(rc = to_params(params, nparams, &m->params, &st)) && !(rc = to_inputs(inputs, ninputs, &m->in, &st)) &&
        !(rc = to_outputs(outputs, noutputs, &m->out, &st)))
        rc = chosen->run(m);
    if (rc)
        snprintf(err, errlen, "mutant %s: %s", chosen ? chosen->id : "?", st.msg[0] ? st.msg : "failed");
    dsv4_tensors_free(&m->in);
    free(m);
    return plugin_code(rc);
}

static const dsv4_plugin mutant_plugin = {
    DSV4_PLUGIN_ABI_VERSION, plugin_name, mutant_init, mutant_supports, mutant_run, NULL, NULL, NULL,
};

const dsv4_plugin *dsv4_mutant_plugin(const char *id)
{
    chosen = NULL;
    for (size_t k = 0; k < sizeof catalogue / sizeof catalogue[0]; k++)
        if (strcmp(catalogue[k].id, id) == 0)
            chosen = &catalogue[k];
    snprintf(plugin_name, sizeof plugin_name, "mutant %s", id);
    return &mutant_plugin;
}

/* ---- helpers (mutant.h) ---- */

dsv4_opctx mut_ctx(const mut_call *m, int variant)
{
    return dsv4_opctx_make(m->op, &m->params, variant, 0);
}

int mut_variant(const mut_call *m, const char *name)
{
    return dsv4_op_variant(m->op, name);
}

int mut_is_variant(const mut_call *m, const char *name)
{
    return m->variant == dsv4_op_variant(m->op, name);
}

int mut_reference(const mut_call *m, int variant, dsv4_tensors *ideal)
{
    memset(ideal, 0, sizeof *ideal);
    if (variant < 0 || variant >= dsv4_op_variant_count(m->op))
        return dsv4_fail(m->st, DSV4_ERUNTIME, "%s has no variant %d", m->op->name, variant);
    dsv4_opctx c = mut_ctx(m, variant);
    int rc = dsv4_reference_outputs(m->op, &c, &m->in, ideal, m->st);
    if (rc)
        dsv4_tensors_free(ideal);
    return rc;
}

void mut_store(mut_call *m, const dsv4_tensors *ideal)
{
    for (int k = 0; k < m->out.n; k++) {
        dsv4_tensor *t = &m->out.t[k];
        const dsv4_tensor *e = dsv4_tensors_get(ideal, t->name);
        if (!e)
            continue;
        if (e->dtype == t->dtype && e->nbytes == t->nbytes) {
            memcpy(t->data, e->data, t->nbytes);
            continue;
        }
        const int64_t n = dsv4_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            dsv4_tensor_set(t, i, dsv4_tensor_get(e, i));
    }
}

int mut_run_reference(mut_call *m)
{
    dsv4_tensors ideal;
    int rc = mut_reference(m, m->variant, &ideal);
    if (!rc)
        mut_store(m, &ideal);
    dsv4_tensors_free(&ideal);
    return rc;
}

int mut_run_reference_as(mut_call *m, const char *variant)
{
    const int v = mut_variant(m, variant);
    if (v < 0)
        return dsv4_fail(m->st, DSV4_ERUNTIME, "%s has no variant %s", m->op->name, variant);
    dsv4_tensors ideal;
    int rc = mut_reference(m, v, &ideal);
    if (!rc)
        mut_store(m, &ideal);
    dsv4_tensors_free(&ideal);
    return rc;
}

static int run_reference_moved(mut_call *m, const char *output, int toward_inf)
{
    int rc = mut_run_reference(m);
    dsv4_tensor *t;
    if (rc || (rc = mut_need(m, &m->out, output, &t)))
        return rc;
    if (t->dtype != DSV4_BF16)
        return dsv4_fail(m->st, DSV4_ERUNTIME, "output %s is %s, not bfloat16", output, dsv4_dtype_name(t->dtype));
    uint16_t *b = t->data;
    for (int64_t i = 0; i < mut_numel(t); i++) {
        if (toward_inf && b[i] == 0x8000u)
            b[i] = 0x0001u; /* -0: the smallest positive subnormal */
        else if (toward_inf && (b[i] & 0x8000u) && (b[i] & 0x7F80u) != 0x7F80u)
            b[i]--; /* negative: one ulp toward zero */
        else
            b[i] = mut_bf16_next_up(b[i]);
    }
    return DSV4_OK;
}

int mut_run_reference_biased(mut_call *m, const char *output) { return run_reference_moved(m, output, 0); }

int mut_run_reference_shifted_up(mut_call *m, const char *output) { return run_reference_moved(m, output, 1); }

dsv4_tensor *mut_out(mut_call *m, const char *name)
{
    return dsv4_tensors_find(&m->out, name);
}

dsv4_tensor *mut_in(mut_call *m, const char *name)
{
    return dsv4_tensors_find(&m->in, name);
}

int mut_run_reference_on(mut_call *m, const char *input, mut_edit_fn edit)
{
    dsv4_tensor *t;
    int rc = mut_need(m, &m->in, input, &t);
    if (!rc)
        rc = edit(m, t);
    return rc ? rc : mut_run_reference(m);
}

/* Table row p + c - 1 copied into every group start p. */
static int rope_rows_at_pos(mut_call *m, dsv4_tensor *cs)
{
    const int64_t c = mut_int(m, "compress_ratio"), P = cs->shape[0], rd = cs->shape[1];
    float *x = cs->data;
    for (int64_t p = 0; p + c - 1 < P; p += c)
        memcpy(x + p * rd, x + (p + c - 1) * rd, (size_t)rd * sizeof *x);
    return DSV4_OK;
}

int mut_run_reference_rope_at_pos(mut_call *m) { return mut_run_reference_on(m, "cos_sin_cache", rope_rows_at_pos); }

static int positions_minus1(mut_call *m, dsv4_tensor *pos)
{
    (void)m;
    int64_t *p = pos->data;
    for (int64_t t = 0; t < pos->shape[0]; t++)
        p[t] = p[t] > 0 ? p[t] - 1 : 0;
    return DSV4_OK;
}

int mut_run_reference_positions_off1(mut_call *m) { return mut_run_reference_on(m, "positions", positions_minus1); }

int mut_need(mut_call *m, dsv4_tensors *ts, const char *name, dsv4_tensor **t)
{
    *t = dsv4_tensors_find(ts, name);
    return *t ? DSV4_OK : dsv4_fail(m->st, DSV4_EINPUT, "tensor '%s' is missing", name);
}

int64_t mut_int(const mut_call *m, const char *name)
{
    return dsv4_params_int(&m->params, name);
}

double mut_float(const mut_call *m, const char *name)
{
    return dsv4_params_float(&m->params, name);
}

int mut_run_reference_with_int(mut_call *m, const char *name, int64_t v)
{
    int rc = dsv4_params_set_int(&m->params, name, v, m->st);
    return rc ? rc : mut_run_reference(m);
}

double mut_get(const dsv4_tensor *t, int64_t i)
{
    return dsv4_tensor_get(t, i);
}

void mut_set(dsv4_tensor *t, int64_t i, double v)
{
    dsv4_tensor_set(t, i, v);
}

int64_t mut_numel(const dsv4_tensor *t)
{
    return dsv4_tensor_numel(t);
}

uint16_t mut_bf16_next_up(uint16_t bits)
{
    if ((bits & 0x7F80u) == 0x7F80u) /* Inf / NaN stay */
        return bits;
    if ((bits & 0x7FFFu) == 0x7F7Fu) /* the largest finite: saturate */
        return bits;
    return (uint16_t)(bits + 1u); /* magnitude + 1 ulp, sign kept */
}
