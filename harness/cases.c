/* cases.c - YAML suite loader (libyaml document API), strict schema.
 * The format is specified in cases.h.  Every error names the file and the
 * 1-based line:column of the offending node (libyaml marks are 0-based). */
#define _POSIX_C_SOURCE 200809L
#include "cases.h"
#include "golden.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "chain.h"
#include "yaml_doc.h"

/* A dsv4_case is ~95 KB (its params hold int lists), so 1024 cases already
 * take ~95 MB; a sweep beyond that is almost surely a mistake. */
#define MAX_CASES 1024

typedef struct loader {
    const char *file;               /* the path as given, for messages */
    char dir[DSV4_PATH_MAX];        /* the file's directory with '/', or "" */
    char golden_dir[DSV4_PATH_MAX]; /* resolved, "" if none */
    yaml_document_t *doc;
    const yaml_node_t *defaults;    /* mapping or NULL */
    dsv4_suite *suite;
    int cap;                        /* allocated length of suite->cases */
    int depth;                      /* 0 for the suite named, 1 for its includes, ... */
    dsv4_yaml_budget *budget;       /* shared with the includes */
    dsv4_status *st;
} loader;

static const char *const top_keys[] = {"suite", "golden_dir", "defaults", "cases", "include", NULL};

/* include: nesting depth guard (a file including itself would recurse). */
#define MAX_INCLUDE_DEPTH 8
static const char *const default_keys[] = {"variant", "seed", "params", "tags", "tolerance", NULL};
static const char *const case_keys[] = {"name",   "op",     "variant",   "seed", "params",
                                        "sweep",  "golden", "tolerance", "tags", NULL};
static const char *const tol_keys[] = {"atol", "rtol", "ulp", "max_nmse", "min_cosine", "budget",
                                       NULL};

/* ------------------------------------------------------------------ */
/* Messages and node helpers                                           */

static int vfail_mark(const loader *L, yaml_mark_t m, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return dsv4_fail(L->st, DSV4_EINPUT, "%s:%zu:%zu: %s", L->file, m.line + 1, m.column + 1,
                     msg);
}

__attribute__((format(printf, 3, 4))) static int fail_at(const loader *L, const yaml_node_t *n,
                                                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail_mark(L, n->start_mark, fmt, ap);
    va_end(ap);
    return rc;
}

static const char *node_kind(yaml_node_type_t t)
{
    switch (t) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a sequence";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "empty";
    }
}

static int want(const loader *L, const yaml_node_t *n, yaml_node_type_t t, const char *what)
{
    if (n->type != t)
        return fail_at(L, n, "%s must be %s, not %s", what, node_kind(t), node_kind(n->type));
    return DSV4_OK;
}

static yaml_node_t *node_at(const loader *L, yaml_node_item_t id)
{
    return yaml_document_get_node(L->doc, id);
}

static const char *text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

#define FOR_PAIRS(p, map)                                                                          \
    for (const yaml_node_pair_t *p = (map)->data.mapping.pairs.start;                              \
         p < (map)->data.mapping.pairs.top; p++)
#define FOR_ITEMS(it, seq)                                                                         \
    for (const yaml_node_item_t *it = (seq)->data.sequence.items.start;                            \
         it < (seq)->data.sequence.items.top; it++)

static int seq_len(const yaml_node_t *seq)
{
    return (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

static int in_list(const char *const *list, const char *s)
{
    for (int k = 0; list[k]; k++)
        if (strcmp(list[k], s) == 0)
            return 1;
    return 0;
}

static int map_len(const yaml_node_t *map)
{
    return (int)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
}

/* Keys must be scalars, unique (libyaml does not check; a hash set keeps a
 * mapping of 60k keys fast), and in allowed when allowed is not NULL. */
static int check_map(const loader *L, const yaml_node_t *map, const char *what,
                     const char *const *allowed)
{
    dsv4_keyset seen;
    if (dsv4_keyset_init(&seen, (size_t)map_len(map)))
        return dsv4_fail(L->st, DSV4_ERUNTIME, "%s: out of memory", L->file);
    int rc = DSV4_OK;
    FOR_PAIRS(p, map) {
        const yaml_node_t *k = node_at(L, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            rc = fail_at(L, k, "a key in %s must be a scalar, not %s", what, node_kind(k->type));
        } else if (allowed && !in_list(allowed, text(k))) {
            char list[256] = "";
            for (int i = 0; allowed[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         allowed[i]);
            rc = fail_at(L, k, "unknown key '%s' in %s (allowed: %s)", text(k), what, list);
        } else if (dsv4_keyset_add(&seen, text(k)) == 0) {
            rc = fail_at(L, k, "duplicate key '%s' in %s", text(k), what);
        }
        if (rc)
            break;
    }
    dsv4_keyset_free(&seen);
    return rc;
}

/* The value of key in a checked mapping, or NULL. */
static const yaml_node_t *map_get(const loader *L, const yaml_node_t *map, const char *key)
{
    if (!map)
        return NULL;
    FOR_PAIRS(p, map)
        if (strcmp(text(node_at(L, p->key)), key) == 0)
            return node_at(L, p->value);
    return NULL;
}

/* A non-empty scalar copied into buf, with no embedded NUL. */
static int get_string(const loader *L, const yaml_node_t *n, const char *what, char *buf,
                      size_t size)
{
    int rc = want(L, n, YAML_SCALAR_NODE, what);
    if (rc)
        return rc;
    size_t len = n->data.scalar.length;
    if (len == 0 || strlen(text(n)) != len)
        return fail_at(L, n, "%s must be a non-empty string", what);
    if (len >= size)
        return fail_at(L, n, "%s '%.40s...' is longer than %zu characters", what, text(n),
                       size - 1);
    memcpy(buf, text(n), len + 1);
    return DSV4_OK;
}

/* dir + rel, or rel alone when it is absolute; 0 if it fits. */
static int join_path(char *out, size_t size, const char *dir, const char *rel)
{
    int w = snprintf(out, size, "%s%s", rel[0] == '/' ? "" : dir, rel);
    return w < 0 || (size_t)w >= size ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Values                                                               */

/* Decimal or 0x hex, 0 .. 2^64-1; strtoull alone would take "-1" and " 1". */
static int parse_seed(const loader *L, const yaml_node_t *n, uint64_t *out)
{
    int rc = want(L, n, YAML_SCALAR_NODE, "'seed'");
    if (rc)
        return rc;
    const char *s = text(n), *digits = s;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        digits = s + 2;
    }
    unsigned char c0 = (unsigned char)digits[0];
    int ok = base == 16 ? isxdigit(c0) : isdigit(c0);
    char *end = NULL;
    errno = 0;
    unsigned long long v = ok ? strtoull(digits, &end, base) : 0;
    if (!ok || errno == ERANGE || *end != '\0' || strlen(s) != n->data.scalar.length)
        return fail_at(L, n, "seed '%s' is not an integer in [0, 2^64-1] (decimal or 0x hex)", s);
    *out = (uint64_t)v;
    return DSV4_OK;
}

/* One parameter value: an int list from a sequence of integer scalars, any
 * other type from a scalar through dsv4_param_parse. */
static int param_value(const loader *L, const dsv4_param_spec *spec, const yaml_node_t *v,
                       dsv4_param *out)
{
    char what[96];
    dsv4_status tmp = {0};
    snprintf(what, sizeof what, "parameter '%s' (%s)", spec->name, dsv4_ptype_name(spec->type));
    if (spec->type != DSV4_P_INTLIST) {
        int rc = want(L, v, YAML_SCALAR_NODE, what);
        if (rc)
            return rc;
        if (strlen(text(v)) != v->data.scalar.length ||
            dsv4_param_parse(spec, text(v), out, &tmp))
            return fail_at(L, v, "%s", tmp.msg[0] ? tmp.msg : "parameter holds a NUL byte");
        return DSV4_OK;
    }
    int rc = want(L, v, YAML_SEQUENCE_NODE, what);
    if (rc)
        return rc;
    if (seq_len(v) > DSV4_PARAM_LIST_MAX)
        return fail_at(L, v, "parameter '%s' has %d values, at most %d", spec->name, seq_len(v),
                       DSV4_PARAM_LIST_MAX);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", spec->name);
    out->type = DSV4_P_INTLIST;
    const dsv4_param_spec one = {spec->name, DSV4_P_INT, NULL, NULL, 0};
    dsv4_param elem;
    FOR_ITEMS(it, v) {
        const yaml_node_t *e = node_at(L, *it);
        if ((rc = want(L, e, YAML_SCALAR_NODE, "an element of an int list")))
            return rc;
        if (dsv4_param_parse(&one, text(e), &elem, &tmp))
            return fail_at(L, e, "%s", tmp.msg);
        out->list[out->n++] = elem.i;
    }
    return DSV4_OK;
}

/* A tolerance field: a number >= 0 (min_cosine and budget at most 1). */
static int tol_value(const loader *L, const yaml_node_t *k, const yaml_node_t *v,
                     dsv4_tol_override *o)
{
    const char *name = text(k);
    char what[64];
    snprintf(what, sizeof what, "tolerance '%s'", name);
    int rc = want(L, v, YAML_SCALAR_NODE, what);
    if (rc)
        return rc;
    const dsv4_param_spec spec = {name, DSV4_P_FLOAT, NULL, NULL, 0};
    dsv4_param p;
    dsv4_status tmp = {0};
    int fraction = strcmp(name, "min_cosine") == 0 || strcmp(name, "budget") == 0;
    if (dsv4_param_parse(&spec, text(v), &p, &tmp) || !(p.f >= 0) || (fraction && p.f > 1))
        return fail_at(L, v, "tolerance '%s': '%s' must be a number in [0, %s]", name, text(v),
                       fraction ? "1" : "inf");
    static const unsigned bits[] = {DSV4_TOL_ATOL, DSV4_TOL_RTOL,   DSV4_TOL_ULP,
                                    DSV4_TOL_NMSE, DSV4_TOL_COSINE, DSV4_TOL_BUDGET};
    double *slots[DSV4_TOL_FIELD_COUNT] = DSV4_TOL_FIELDS(o);
    for (int i = 0; tol_keys[i]; i++)
        if (strcmp(tol_keys[i], name) == 0) {
            *slots[i] = p.f;
            o->set |= bits[i];
        }
    return DSV4_OK;
}

static int push_override(const loader *L, const yaml_node_t *at, dsv4_case *c,
                         const dsv4_tol_override *o)
{
    if (c->n_overrides >= DSV4_MAX_OVERRIDES)
        return fail_at(L, at, "more than %d tolerance overrides in case '%s'",
                       DSV4_MAX_OVERRIDES, c->name);
    c->overrides[c->n_overrides++] = *o;
    return DSV4_OK;
}

/* tolerance: policy fields directly (output "*", first), and/or
 * output-name -> mapping of fields (each its own override). */
static int add_tolerance(const loader *L, const yaml_node_t *map, dsv4_case *c)
{
    int rc = want(L, map, YAML_MAPPING_NODE, "'tolerance'");
    if (rc || (rc = check_map(L, map, "'tolerance'", NULL)))
        return rc;
    dsv4_tol_override all = {.output = "*", .line = (int)map->start_mark.line + 1};
    FOR_PAIRS(p, map) {
        const yaml_node_t *k = node_at(L, p->key);
        if (in_list(tol_keys, text(k)) && (rc = tol_value(L, k, node_at(L, p->value), &all)))
            return rc;
    }
    if (all.set && (rc = push_override(L, map, c, &all)))
        return rc;
    FOR_PAIRS(p, map) {
        const yaml_node_t *k = node_at(L, p->key), *v = node_at(L, p->value);
        if (in_list(tol_keys, text(k)))
            continue;
        if (!dsv4_op_output(c->op, text(k)))
            return fail_at(L, k,
                           "op %s has no output '%s' (nor is it a tolerance field: atol, rtol, "
                           "ulp, max_nmse, min_cosine, budget)",
                           c->op->name, text(k));
        char what[96];
        snprintf(what, sizeof what, "tolerance of output '%s'", text(k));
        if ((rc = want(L, v, YAML_MAPPING_NODE, what)) || (rc = check_map(L, v, what, tol_keys)))
            return rc;
        dsv4_tol_override o = {.line = (int)v->start_mark.line + 1};
        snprintf(o.output, sizeof o.output, "%s", text(k));
        FOR_PAIRS(q, v)
            if ((rc = tol_value(L, node_at(L, q->key), node_at(L, q->value), &o)))
                return rc;
        if ((rc = push_override(L, v, c, &o)))
            return rc;
    }
    return DSV4_OK;
}

static int add_tags(const loader *L, const yaml_node_t *seq, dsv4_case *c)
{
    int rc = want(L, seq, YAML_SEQUENCE_NODE, "'tags'");
    if (rc)
        return rc;
    /* bounded here: the defaults' list is walked once per case */
    if (seq_len(seq) > DSV4_MAX_TAGS)
        return fail_at(L, seq, "'tags' lists %d entries: more than %d tags", seq_len(seq),
                       DSV4_MAX_TAGS);
    FOR_ITEMS(it, seq) {
        const yaml_node_t *t = node_at(L, *it);
        char tag[sizeof c->tags[0]];
        if ((rc = get_string(L, t, "a tag", tag, sizeof tag)))
            return rc;
        if (dsv4_case_has_tag(c, tag))
            continue;
        if (c->n_tags >= DSV4_MAX_TAGS)
            return fail_at(L, t, "tag '%s': more than %d tags", tag, DSV4_MAX_TAGS);
        memcpy(c->tags[c->n_tags++], tag, sizeof tag);
    }
    return DSV4_OK;
}

/* A params mapping: checked keys, and no more than a case can hold (which
 * keeps the defaults layer's lookups in the case's own params short). */
static int check_params_map(const loader *L, const yaml_node_t *map)
{
    int rc = want(L, map, YAML_MAPPING_NODE, "'params'");
    if (rc || (rc = check_map(L, map, "'params'", NULL)))
        return rc;
    if (map_len(map) > DSV4_MAX_PARAMS)
        return fail_at(L, map, "'params' has %d entries, more than the %d parameters of a case",
                       map_len(map), DSV4_MAX_PARAMS);
    return DSV4_OK;
}

/* params of one layer; keys also in skip (the case's params, when this is
 * the defaults layer) are left to that layer. */
static int add_params(const loader *L, const yaml_node_t *map, const yaml_node_t *skip,
                      dsv4_case *c)
{
    int rc = check_params_map(L, map);
    if (rc)
        return rc;
    FOR_PAIRS(p, map) {
        const yaml_node_t *k = node_at(L, p->key);
        if (skip && map_get(L, skip, text(k)))
            continue;
        const dsv4_param_spec *spec = dsv4_op_param(c->op, text(k));
        if (!spec)
            return fail_at(L, k, "op %s has no parameter '%s'", c->op->name, text(k));
        dsv4_param v;
        dsv4_status tmp = {0};
        if ((rc = param_value(L, spec, node_at(L, p->value), &v)))
            return rc;
        if (dsv4_params_set(&c->params, &v, &tmp))
            return fail_at(L, k, "%s", tmp.msg);
    }
    return DSV4_OK;
}

/* ------------------------------------------------------------------ */
/* Cases                                                                */

/* variant and seed: the case's, else the defaults'. */
static const yaml_node_t *pick(const loader *L, const yaml_node_t *cn, const char *key)
{
    const yaml_node_t *v = map_get(L, cn, key);
    return v ? v : map_get(L, L->defaults, key);
}

/* Merge defaults and the case's own keys into c (op and name already set). */
static int merge_layers(const loader *L, const yaml_node_t *cn, dsv4_case *c)
{
    int rc;
    const yaml_node_t *v;
    char name[64];
    if ((v = pick(L, cn, "variant"))) {
        if ((rc = get_string(L, v, "'variant'", name, sizeof name)))
            return rc;
        if ((c->variant = dsv4_op_variant(c->op, name)) < 0)
            return fail_at(L, v, "op %s has no variant '%s'", c->op->name, name);
    }
    if ((v = pick(L, cn, "seed")) && (rc = parse_seed(L, v, &c->seed)))
        return rc;
    const yaml_node_t *own = map_get(L, cn, "params");
    /* checked now: the defaults layer looks keys up in it */
    if (own && (rc = check_params_map(L, own)))
        return rc;
    const yaml_node_t *layers[2] = {L->defaults, cn};
    for (int i = 0; i < 2; i++) {
        const yaml_node_t *m = layers[i];
        if ((v = map_get(L, m, "params")) && (rc = add_params(L, v, i == 0 ? own : NULL, c)))
            return rc;
        if ((v = map_get(L, m, "tags")) && (rc = add_tags(L, v, c)))
            return rc;
        if ((v = map_get(L, m, "tolerance")) && (rc = add_tolerance(L, v, c)))
            return rc;
    }
    return DSV4_OK;
}

/* Every character outside [A-Za-z0-9._-] becomes '_'. */
/* c appended to the suite, which grows by doubling. */
static int push_case(loader *L, const dsv4_case *c)
{
    dsv4_suite *s = L->suite;
    if (s->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 16;
        dsv4_case *grown = realloc(s->cases, (size_t)cap * sizeof *grown);
        if (!grown)
            return dsv4_fail(L->st, DSV4_ERUNTIME, "%s: out of memory", L->file);
        s->cases = grown;
        L->cap = cap;
    }
    s->cases[s->n++] = *c;
    return DSV4_OK;
}

/* Check, complete, resolve and append one (expanded) case. */
static int finish_case(loader *L, const yaml_node_t *cn, dsv4_case *c)
{
    dsv4_suite *s = L->suite;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->cases[i].name, c->name) == 0)
            return fail_at(L, cn, "duplicate case name '%s' (first at line %d)", c->name,
                           s->cases[i].line);
    if (s->n >= MAX_CASES)
        return fail_at(L, cn, "case '%s': the suite has more than %d cases", c->name, MAX_CASES);
    char where[DSV4_PATH_MAX + 256];
    snprintf(where, sizeof where, "%s:%d:%d: case '%s'", c->file, c->line, c->col, c->name);
    int rc = dsv4_op_complete_params(c->op, &c->params, where, L->st);
    if (rc)
        return rc;
    if (c->op->resolve && (rc = c->op->resolve(&c->params, L->st)))
        return dsv4_status_prefix(L->st, "%s", where);
    if (!c->golden[0] && L->golden_dir[0]) {
        char base[sizeof c->name];
        dsv4_golden_file_name(c->name, base, sizeof base);
        size_t n = strlen(L->golden_dir);
        int w = snprintf(c->golden, sizeof c->golden, "%s%s%s.h5", L->golden_dir,
                         L->golden_dir[n - 1] == '/' ? "" : "/", base);
        if (w < 0 || (size_t)w >= sizeof c->golden)
            return fail_at(L, cn, "case '%s': golden path is longer than %d characters", c->name,
                           DSV4_PATH_MAX - 1);
    }
    /* Two cases on one golden file would overwrite each other's golden. */
    for (int i = 0; c->golden[0] && i < s->n; i++)
        if (dsv4_golden_same_path(s->cases[i].golden, c->golden))
            return fail_at(L, cn, "cases '%s' (%s:%d) and '%s' both use the golden file %s; rename one",
                           s->cases[i].name, s->cases[i].file, s->cases[i].line, c->name, c->golden);
    return push_case(L, c);
}

typedef struct axis {
    const yaml_node_t *key, *values;
    const dsv4_param_spec *spec;
} axis;

/* Check the sweep mapping; *total = number of combinations (1 if none). */
static int parse_sweep(const loader *L, const yaml_node_t *sw, const dsv4_case *base,
                       const yaml_node_t *own_params, axis *ax, int *n_ax, int *total)
{
    int rc = want(L, sw, YAML_MAPPING_NODE, "'sweep'");
    if (rc || (rc = check_map(L, sw, "'sweep'", NULL)))
        return rc;
    if (sw->data.mapping.pairs.top == sw->data.mapping.pairs.start)
        return fail_at(L, sw, "'sweep' of case '%s' is empty", base->name);
    *n_ax = 0;
    *total = 1;
    FOR_PAIRS(p, sw) {
        if (*n_ax == DSV4_MAX_PARAMS)
            return fail_at(L, sw, "'sweep' has more than %d parameters", DSV4_MAX_PARAMS);
        const yaml_node_t *k = node_at(L, p->key), *v = node_at(L, p->value);
        const dsv4_param_spec *spec = dsv4_op_param(base->op, text(k));
        if (!spec)
            return fail_at(L, k, "op %s has no parameter '%s'", base->op->name, text(k));
        if (map_get(L, own_params, text(k)))
            return fail_at(L, k, "sweep parameter '%s' is also set in 'params'", text(k));
        char what[96];
        snprintf(what, sizeof what, "sweep of '%s'", text(k));
        if ((rc = want(L, v, YAML_SEQUENCE_NODE, what)))
            return rc;
        int n = seq_len(v);
        if (n == 0)
            return fail_at(L, v, "sweep of '%s' has no values", text(k));
        if (n > MAX_CASES / *total)
            return fail_at(L, sw, "sweep of case '%s' expands to more than %d cases", base->name,
                           MAX_CASES);
        *total *= n;
        ax[(*n_ax)++] = (axis){k, v, spec};
    }
    return DSV4_OK;
}

/* Expansion number idx of the sweep (the first axis varies slowest). */
static int expand_one(loader *L, const yaml_node_t *cn, const dsv4_case *base, const axis *ax,
                      int n_ax, int idx, dsv4_case *c)
{
    *c = *base;
    char name[1024], val[4096];
    size_t used = (size_t)snprintf(name, sizeof name, "%s[", base->name);
    int pick_ix[DSV4_MAX_PARAMS];
    for (int a = n_ax - 1; a >= 0; a--) {
        int n = seq_len(ax[a].values);
        pick_ix[a] = idx % n;
        idx /= n;
    }
    for (int a = 0; a < n_ax; a++) {
        const yaml_node_t *v = node_at(L, ax[a].values->data.sequence.items.start[pick_ix[a]]);
        dsv4_param p;
        dsv4_status tmp = {0};
        int rc = param_value(L, ax[a].spec, v, &p);
        if (rc)
            return rc;
        if (dsv4_params_set(&c->params, &p, &tmp))
            return fail_at(L, ax[a].key, "%s", tmp.msg);
        if (used < sizeof name)
            used += (size_t)snprintf(name + used, sizeof name - used, "%s%s=%s", a ? "," : "",
                                     p.name, dsv4_param_value_str(&p, val, sizeof val));
    }
    if (used + 1 >= sizeof name || used + 2 > sizeof c->name)
        return fail_at(L, cn, "expanded name of case '%s' is longer than %zu characters",
                       base->name, sizeof c->name - 1);
    memcpy(c->name, name, used);
    memcpy(c->name + used, "]", 2);
    return DSV4_OK;
}

static int load_case_into(loader *L, const yaml_node_t *cn, dsv4_case *base, dsv4_case *work)
{
    int rc = want(L, cn, YAML_MAPPING_NODE, "a case");
    if (rc || (rc = check_map(L, cn, "a case", case_keys)))
        return rc;
    const yaml_node_t *name = map_get(L, cn, "name"), *op = map_get(L, cn, "op");
    if (!name)
        return fail_at(L, cn, "case has no 'name'");
    if ((rc = get_string(L, name, "'name'", base->name, sizeof base->name)))
        return rc;
    if (!op)
        return fail_at(L, cn, "case '%s' has no 'op'", base->name);
    char opname[64];
    if ((rc = get_string(L, op, "'op'", opname, sizeof opname)))
        return rc;
    if (!(base->op = dsv4_op_find(opname)) && !(base->op = dsv4_chain_find_op(opname)))
        return fail_at(L, op, "unknown op '%s' (dsv4check list shows the ops)", opname);
    snprintf(base->file, sizeof base->file, "%s", L->file);
    base->line = (int)cn->start_mark.line + 1;
    base->col = (int)cn->start_mark.column + 1;
    if ((rc = merge_layers(L, cn, base)))
        return rc;

    const yaml_node_t *golden = map_get(L, cn, "golden"), *sw = map_get(L, cn, "sweep");
    if (golden) {
        char rel[DSV4_PATH_MAX];
        if ((rc = get_string(L, golden, "'golden'", rel, sizeof rel)))
            return rc;
        if (sw) /* the expanded cases would all write one file */
            return fail_at(L, golden, "case '%s': 'golden' cannot be combined with 'sweep' "
                                      "(use the suite's golden_dir)", base->name);
        if (join_path(base->golden, sizeof base->golden, L->dir, rel))
            return fail_at(L, golden, "golden path '%s' is longer than %d characters", rel,
                           DSV4_PATH_MAX - 1);
    }
    if (!sw) {
        *work = *base;
        return finish_case(L, cn, work);
    }
    axis ax[DSV4_MAX_PARAMS];
    int n_ax = 0, total = 0;
    if ((rc = parse_sweep(L, sw, base, map_get(L, cn, "params"), ax, &n_ax, &total)))
        return rc;
    for (int i = 0; i < total; i++)
        if ((rc = expand_one(L, cn, base, ax, n_ax, i, work)) || (rc = finish_case(L, cn, work)))
            return rc;
    return DSV4_OK;
}

static int load_case(loader *L, const yaml_node_t *cn)
{
    /* Two cases on the heap: each is ~95 KB. */
    dsv4_case *base = calloc(2, sizeof *base);
    if (!base)
        return dsv4_fail(L->st, DSV4_ERUNTIME, "%s: out of memory", L->file);
    int rc = load_case_into(L, cn, base, base + 1);
    free(base);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Suite                                                                */

/* Appends the cases of one included suite file, refusing duplicate names. */
static int append_suite(loader *L, const yaml_node_t *at, const dsv4_suite *sub)
{
    dsv4_suite *s = L->suite;
    for (int i = 0; i < sub->n; i++) {
        for (int j = 0; j < s->n; j++)
            if (strcmp(s->cases[j].name, sub->cases[i].name) == 0)
                return fail_at(L, at, "included case '%s' (%s:%d) has the name of a case at %s:%d",
                               sub->cases[i].name, sub->cases[i].file, sub->cases[i].line,
                               s->cases[j].file, s->cases[j].line);
        if (s->n >= MAX_CASES)
            return fail_at(L, at, "the suite has more than %d cases", MAX_CASES);
        int rc = push_case(L, &sub->cases[i]);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

static int load_from(const char *path, const unsigned char *buf, size_t len, int depth,
                     dsv4_yaml_budget *b, dsv4_suite *suite, dsv4_status *st);

/* include: [a.yaml, b.yaml]: other suite files (paths relative to this
 * one), each loaded with its own golden_dir and defaults.  Every include is
 * loaded afresh, so a file included twice counts twice against the budget:
 * an include graph that multiplies stops at the file limit. */
static int load_includes(loader *L, const yaml_node_t *inc)
{
    int rc = want(L, inc, YAML_SEQUENCE_NODE, "'include'");
    if (rc)
        return rc;
    FOR_ITEMS(it, inc) {
        const yaml_node_t *item = node_at(L, *it);
        char rel[DSV4_PATH_MAX], path[DSV4_PATH_MAX];
        if ((rc = get_string(L, item, "an 'include' entry", rel, sizeof rel)))
            return rc;
        if (join_path(path, sizeof path, L->dir, rel))
            return fail_at(L, item, "include '%s': path too long", rel);
        if (L->depth >= MAX_INCLUDE_DEPTH)
            return fail_at(L, item, "include '%s': nested more than %d deep (a cycle?)", rel,
                           MAX_INCLUDE_DEPTH);
        if (L->budget->files_left <= 0)
            return fail_at(L, item,
                           "include '%s': more than %d suite files in all (the suite and its "
                           "includes, a file counted each time it is included)",
                           rel, DSV4_YAML_MAX_FILES);
        char *text;
        size_t len;
        if ((rc = dsv4_yaml_read(path, L->budget, &text, &len, L->st)))
            return dsv4_status_prefix(L->st, "%s:%zu:%zu: include '%s'", L->file,
                                      item->start_mark.line + 1, item->start_mark.column + 1, rel);
        dsv4_suite sub;
        rc = load_from(path, (const unsigned char *)text, len, L->depth + 1, L->budget, &sub,
                       L->st);
        free(text);
        if (rc)
            return rc;
        rc = append_suite(L, item, &sub);
        dsv4_suite_free(&sub);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

static int load_root(loader *L, const yaml_node_t *root)
{
    int rc = want(L, root, YAML_MAPPING_NODE, "the top level");
    if (rc || (rc = check_map(L, root, "the top level", top_keys)))
        return rc;
    const yaml_node_t *name = map_get(L, root, "suite"), *gd = map_get(L, root, "golden_dir");
    const yaml_node_t *cases = map_get(L, root, "cases");
    if (!name)
        return fail_at(L, root, "missing required key 'suite'");
    if ((rc = get_string(L, name, "'suite'", L->suite->name, sizeof L->suite->name)))
        return rc;
    if (gd) {
        char rel[DSV4_PATH_MAX];
        if ((rc = get_string(L, gd, "'golden_dir'", rel, sizeof rel)))
            return rc;
        if (join_path(L->golden_dir, sizeof L->golden_dir, L->dir, rel))
            return fail_at(L, gd, "golden_dir '%s' is longer than %d characters", rel,
                           DSV4_PATH_MAX - 1);
    }
    if ((L->defaults = map_get(L, root, "defaults")) &&
        ((rc = want(L, L->defaults, YAML_MAPPING_NODE, "'defaults'")) ||
         (rc = check_map(L, L->defaults, "'defaults'", default_keys))))
        return rc;
    const yaml_node_t *inc = map_get(L, root, "include");
    if (!cases && !inc)
        return fail_at(L, root, "missing required key 'cases' (or 'include')");
    if (cases) {
        if ((rc = want(L, cases, YAML_SEQUENCE_NODE, "'cases'")))
            return rc;
        if (seq_len(cases) == 0)
            return fail_at(L, cases, "'cases' is empty");
        FOR_ITEMS(it, cases)
            if ((rc = load_case(L, node_at(L, *it))))
                return rc;
    }
    return inc ? load_includes(L, inc) : DSV4_OK;
}

/* Parses and loads the len bytes at buf; path names the suite in messages
 * and anchors its relative paths. */
static int load_from(const char *path, const unsigned char *buf, size_t len, int depth,
                     dsv4_yaml_budget *b, dsv4_suite *suite, dsv4_status *st)
{
    memset(suite, 0, sizeof *suite);
    loader L = {.file = path, .suite = suite, .depth = depth, .budget = b, .st = st};
    snprintf(suite->file, sizeof suite->file, "%s", path);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(L.dir, sizeof L.dir, "%.*s", (int)(slash - path + 1), path);
    yaml_document_t doc;
    int rc = dsv4_yaml_parse(path, buf, len, b, &doc, st);
    if (rc == DSV4_OK) {
        L.doc = &doc;
        rc = load_root(&L, yaml_document_get_root_node(&doc));
        yaml_document_delete(&doc);
    }
    if (rc)
        dsv4_suite_free(suite);
    return rc;
}

static int path_fits(const char *path, dsv4_suite *suite, dsv4_status *st)
{
    memset(suite, 0, sizeof *suite);
    if (strlen(path) >= sizeof suite->file)
        return dsv4_fail(st, DSV4_EINPUT, "%.64s...: path longer than %d characters", path,
                         DSV4_PATH_MAX - 1);
    return DSV4_OK;
}

int dsv4_suite_load(const char *path, dsv4_suite *suite, dsv4_status *st)
{
    int rc = path_fits(path, suite, st);
    if (rc)
        return rc;
    dsv4_yaml_budget b;
    dsv4_yaml_budget_init(&b);
    char *text;
    size_t len;
    if ((rc = dsv4_yaml_read(path, &b, &text, &len, st)))
        return rc;
    rc = load_from(path, (const unsigned char *)text, len, 0, &b, suite, st);
    free(text);
    return rc;
}

int dsv4_suite_load_buffer(const char *path, const void *buf, size_t len, dsv4_suite *suite,
                           dsv4_status *st)
{
    int rc = path_fits(path, suite, st);
    if (rc)
        return rc;
    dsv4_yaml_budget b;
    dsv4_yaml_budget_init(&b);
    if (len > b.bytes_left)
        return dsv4_fail(st, DSV4_EINPUT, "%s: %zu bytes, more than %d (a suite and its includes "
                         "together)", path, len, DSV4_YAML_MAX_BYTES);
    b.bytes_left -= len;
    b.files_left--;
    return load_from(path, buf, len, 0, &b, suite, st);
}

void dsv4_suite_free(dsv4_suite *suite)
{
    if (!suite)
        return;
    free(suite->cases);
    memset(suite, 0, sizeof *suite);
}
