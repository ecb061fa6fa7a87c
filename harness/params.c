#define _POSIX_C_SOURCE 200809L
#include "params.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *dsv4_ptype_name(dsv4_ptype t)
{
    switch (t) {
    case DSV4_P_INT: return "int";
    case DSV4_P_FLOAT: return "float";
    case DSV4_P_STR: return "string";
    case DSV4_P_INTLIST: return "int list";
    }
    return "?";
}

const dsv4_param *dsv4_params_find(const dsv4_params *ps, const char *name)
{
    for (int k = 0; k < ps->n; k++)
        if (strcmp(ps->p[k].name, name) == 0)
            return &ps->p[k];
    return NULL;
}

int dsv4_params_set(dsv4_params *ps, const dsv4_param *p, dsv4_status *st)
{
    dsv4_param *slot = (dsv4_param *)dsv4_params_find(ps, p->name);
    if (!slot) {
        if (ps->n >= DSV4_MAX_PARAMS)
            return dsv4_fail(st, DSV4_EINPUT, "more than %d parameters", DSV4_MAX_PARAMS);
        slot = &ps->p[ps->n++];
    }
    *slot = *p;
    return DSV4_OK;
}

int dsv4_params_set_int(dsv4_params *ps, const char *name, int64_t v, dsv4_status *st)
{
    dsv4_param p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "%s", name);
    p.type = DSV4_P_INT;
    p.i = v;
    return dsv4_params_set(ps, &p, st);
}

int64_t dsv4_params_int(const dsv4_params *ps, const char *name)
{
    const dsv4_param *p = dsv4_params_find(ps, name);
    return p ? p->i : 0;
}

double dsv4_params_float(const dsv4_params *ps, const char *name)
{
    const dsv4_param *p = dsv4_params_find(ps, name);
    return p ? p->f : 0.0;
}

const char *dsv4_params_str(const dsv4_params *ps, const char *name)
{
    const dsv4_param *p = dsv4_params_find(ps, name);
    return p ? p->s : "";
}

int dsv4_params_list(const dsv4_params *ps, const char *name, const int64_t **vals)
{
    const dsv4_param *p = dsv4_params_find(ps, name);
    if (!p || p->type != DSV4_P_INTLIST) {
        *vals = NULL;
        return 0;
    }
    *vals = p->list;
    return p->n;
}

const char *dsv4_param_value_str(const dsv4_param *p, char *buf, size_t len)
{
    switch (p->type) {
    case DSV4_P_INT: snprintf(buf, len, "%" PRId64, p->i); break;
    case DSV4_P_FLOAT: snprintf(buf, len, "%.17g", p->f); break;
    case DSV4_P_STR: snprintf(buf, len, "%s", p->s); break;
    case DSV4_P_INTLIST: {
        size_t used = 0;
        buf[0] = '\0';
        for (int k = 0; k < p->n && used + 1 < len; k++) {
            int w = snprintf(buf + used, len - used, "%s%" PRId64, k ? "," : "", p->list[k]);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        break;
    }
    }
    return buf;
}

int dsv4_params_list_has(const dsv4_params *ps, const char *name, int64_t v)
{
    const int64_t *l;
    int n = dsv4_params_list(ps, name, &l);
    for (int k = 0; k < n; k++)
        if (l[k] == v)
            return 1;
    return 0;
}
