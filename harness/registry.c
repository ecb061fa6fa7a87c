/* registry.c - the one op table, and parameter checking against it. */
#define _POSIX_C_SOURCE 200809L
#include "op.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../ops/ops.h"

/* The table: one line per op in ops/ops.def, in the order `dsv4check list`
 * prints them. */
#define DSV4_OP(name) &dsv4_op_##name,
static const dsv4_op *const op_table[] = {
#include "../ops/ops.def"
};
#undef DSV4_OP

int dsv4_op_count(void) { return (int)(sizeof op_table / sizeof op_table[0]); }

const dsv4_op *dsv4_op_at(int i)
{
    return (i >= 0 && i < dsv4_op_count()) ? op_table[i] : NULL;
}

const dsv4_op *dsv4_op_find(const char *name)
{
    for (int i = 0; i < dsv4_op_count(); i++)
        if (strcmp(op_table[i]->name, name) == 0)
            return op_table[i];
    return NULL;
}

int dsv4_op_variant(const dsv4_op *op, const char *name)
{
    if (strcmp(name, "default") == 0)
        return 0;
    for (int k = 0; k < dsv4_op_variant_count(op); k++)
        if (strcmp(dsv4_op_variant_name(op, k), name) == 0)
            return k;
    return -1;
}

int dsv4_op_variant_count(const dsv4_op *op)
{
    int n = 0;
    while (op->variants[n].name)
        n++;
    return n;
}

const char *dsv4_op_variant_name(const dsv4_op *op, int k)
{
    return k >= 0 && k < dsv4_op_variant_count(op) ? op->variants[k].name : NULL;
}

const char *dsv4_op_variant_doc(const dsv4_op *op, int k)
{
    return k >= 0 && k < dsv4_op_variant_count(op) ? op->variants[k].doc : NULL;
}

const void *dsv4_op_variant_rule(const dsv4_op *op, int k)
{
    return k >= 0 && k < dsv4_op_variant_count(op) ? op->variants[k].rule : NULL;
}

dsv4_opctx dsv4_opctx_make(const dsv4_op *op, const dsv4_params *params, int variant, uint64_t seed)
{
    dsv4_opctx c = {params, variant, seed, dsv4_op_variant_rule(op, variant)};
    return c;
}

const dsv4_param_spec *dsv4_op_param(const dsv4_op *op, const char *name)
{
    for (const dsv4_param_spec *p = op->params; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static const dsv4_io_spec *find_io(const dsv4_io_spec *list, const char *name)
{
    for (const dsv4_io_spec *io = list; io->name; io++)
        if (strcmp(io->name, name) == 0)
            return io;
    return NULL;
}

const dsv4_io_spec *dsv4_op_output(const dsv4_op *op, const char *name)
{
    return find_io(op->outputs, name);
}

static int parse_int(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* YAML 1.2 core schema floats: also .inf, -.inf, .nan. */
static int parse_float(const char *text, double *out)
{
    if (strcasecmp(text, ".inf") == 0 || strcasecmp(text, "+.inf") == 0) {
        *out = INFINITY;
        return 0;
    }
    if (strcasecmp(text, "-.inf") == 0) {
        *out = -INFINITY;
        return 0;
    }
    if (strcasecmp(text, ".nan") == 0) {
        *out = NAN;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno == ERANGE && fabs(v) > 1.0)
        return -1;
    if (end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* "[1, 2, 3]" or "1,2,3"; "[]" is the empty list. */
static int parse_intlist(const char *text, dsv4_param *out)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    char *s = buf;
    size_t len = strlen(s);
    if (len && s[0] == '[' && s[len - 1] == ']') {
        s[len - 1] = '\0';
        s++;
    }
    out->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (out->n >= DSV4_PARAM_LIST_MAX)
            return -1;
        if (parse_int(tok, &out->list[out->n]))
            return -1;
        out->n++;
    }
    return 0;
}

int dsv4_param_parse(const dsv4_param_spec *spec, const char *text, dsv4_param *out,
                     dsv4_status *st)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", spec->name);
    out->type = spec->type;
    int bad = 0;
    switch (spec->type) {
    case DSV4_P_INT: bad = parse_int(text, &out->i); break;
    case DSV4_P_FLOAT: bad = parse_float(text, &out->f); break;
    case DSV4_P_STR:
        if (strlen(text) >= sizeof out->s)
            bad = 1;
        snprintf(out->s, sizeof out->s, "%s", text);
        break;
    case DSV4_P_INTLIST: bad = parse_intlist(text, out); break;
    }
    if (bad)
        return dsv4_fail(st, DSV4_EINPUT, "parameter '%s': '%s' is not a valid %s%s", spec->name,
                         text, dsv4_ptype_name(spec->type),
                         spec->type == DSV4_P_INTLIST ? " (at most 256 integers)" : "");
    return DSV4_OK;
}

int dsv4_op_complete_params(const dsv4_op *op, dsv4_params *ps, const char *where,
                            dsv4_status *st)
{
    for (int k = 0; k < ps->n; k++) {
        const dsv4_param_spec *spec = dsv4_op_param(op, ps->p[k].name);
        if (!spec)
            return dsv4_fail(st, DSV4_EINPUT, "%s: op %s has no parameter '%s'", where, op->name,
                             ps->p[k].name);
        if (spec->type != ps->p[k].type)
            return dsv4_fail(st, DSV4_EINPUT, "%s: parameter '%s' of %s must be %s, not %s", where,
                             spec->name, op->name, dsv4_ptype_name(spec->type),
                             dsv4_ptype_name(ps->p[k].type));
        /* Every float parameter is a fraction or a scale: NaN or Inf would
         * pass silently through comparisons (u < NaN is false). */
        if (spec->type == DSV4_P_FLOAT && !isfinite(ps->p[k].f))
            return dsv4_fail(st, DSV4_EINPUT, "%s: parameter '%s' of %s is %g: must be finite",
                             where, spec->name, op->name, ps->p[k].f);
    }
    for (const dsv4_param_spec *spec = op->params; spec->name; spec++) {
        if (dsv4_params_find(ps, spec->name))
            continue;
        if (!spec->def)
            return dsv4_fail(st, DSV4_EINPUT, "%s: op %s needs parameter '%s' (%s)", where,
                             op->name, spec->name, spec->doc);
        dsv4_param p;
        if (dsv4_param_parse(spec, spec->def, &p, st) || dsv4_params_set(ps, &p, st))
            return dsv4_status_prefix(st, "%s: default of op %s", where, op->name);
    }
    return DSV4_OK;
}
