/* drift.c - baseline JSON reader and drift rules (see drift.h).  The JSON
 * reader is a small recursive-descent parser for the report format that
 * dsv4_write_json writes (objects, arrays, strings, numbers, literals);
 * non-finite metrics are the strings "inf", "-inf", "nan" there. */
#define _POSIX_C_SOURCE 200809L
#include "drift.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"

typedef struct entry {
    char case_name[192];
    char output[DSV4_NAME_MAX];
    int exact;
    double mismatches, max_ulp, worst_ratio, nmse;
} entry;

struct dsv4_baseline {
    int n, cap;
    entry *e;
};

typedef struct parser {
    const char *p, *start, *where;
    dsv4_status *st;
    int depth;
} parser;

static int perr(parser *ps, const char *what)
{
    return dsv4_fail(ps->st, DSV4_EINPUT, "%s: not a dsv4check JSON report: %s at byte %ld", ps->where,
                     what, (long)(ps->p - ps->start));
}

static void ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r')
        ps->p++;
}

/* A string into buf (NULL: skip); \uXXXX kept only for ASCII. */
static int str(parser *ps, char *buf, size_t len)
{
    size_t k = 0;
    if (*ps->p != '"')
        return perr(ps, "expected a string");
    ps->p++;
    while (*ps->p != '"') {
        char ch = *ps->p;
        if (!ch)
            return perr(ps, "unterminated string");
        if (ch == '\\') {
            ps->p++;
            ch = *ps->p;
            if (ch == 'n') ch = '\n';
            else if (ch == 't') ch = '\t';
            else if (ch == 'u') {
                unsigned v = 0;
                for (int d = 1; d <= 4; d++) {
                    char h = ps->p[d];
                    if (!h)
                        return perr(ps, "bad \\u escape");
                    v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
                }
                ps->p += 4;
                ch = v < 0x80 ? (char)v : '?';
            } else if (!ch)
                return perr(ps, "unterminated string");
        }
        if (buf && k + 1 < len)
            buf[k++] = ch;
        ps->p++;
    }
    ps->p++;
    if (buf)
        buf[k] = '\0';
    return DSV4_OK;
}

/* A metric: a number, or "inf"/"-inf"/"nan". */
static int number(parser *ps, double *v)
{
    ws(ps);
    if (*ps->p == '"') {
        char s[16];
        if (str(ps, s, sizeof s))
            return ps->st->code;
        *v = strcmp(s, "inf") == 0 ? INFINITY : strcmp(s, "-inf") == 0 ? -INFINITY : NAN;
        return DSV4_OK;
    }
    char *end;
    errno = 0;
    *v = strtod(ps->p, &end);
    if (end == ps->p)
        return perr(ps, "expected a number");
    ps->p = end;
    return DSV4_OK;
}

static int skip_value(parser *ps);

/* One JSON container, from `open` to `close`: item(ps, ctx) parses each
 * element after the opener or a comma. */
typedef int (*item_fn)(parser *ps, void *ctx);

static int container(parser *ps, char open, char close, const char *expected, item_fn item, void *ctx)
{
    ws(ps);
    if (*ps->p != open)
        return perr(ps, expected);
    if (++ps->depth > 64)
        return perr(ps, "nested too deeply");
    ps->p++;
    ws(ps);
    if (*ps->p == close) {
        ps->p++;
        ps->depth--;
        return DSV4_OK;
    }
    for (;;) {
        ws(ps);
        if (item(ps, ctx))
            return ps->st->code;
        ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return DSV4_OK;
        }
        return perr(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* Calls fn(ctx, key) at each member's value; fn must consume it (NULL:
 * the value is skipped). */
typedef int (*member_fn)(parser *ps, void *ctx, const char *key);

typedef struct member_call {
    member_fn fn;
    void *ctx;
} member_call;

static int member(parser *ps, void *call)
{
    const member_call *m = call;
    char key[64];
    if (str(ps, key, sizeof key))
        return ps->st->code;
    ws(ps);
    if (*ps->p != ':')
        return perr(ps, "expected ':'");
    ps->p++;
    ws(ps);
    return m->fn ? m->fn(ps, m->ctx, key) : skip_value(ps);
}

static int object(parser *ps, member_fn fn, void *ctx)
{
    member_call m = {fn, ctx};
    return container(ps, '{', '}', "expected an object", member, &m);
}

/* Calls fn(ctx) at each element; fn must consume it (NULL: skipped). */
typedef int (*elem_fn)(parser *ps, void *ctx);

static int skip_elem(parser *ps, void *ctx)
{
    (void)ctx;
    return skip_value(ps);
}

static int array(parser *ps, elem_fn fn, void *ctx)
{
    return container(ps, '[', ']', "expected an array", fn ? fn : skip_elem, ctx);
}

static int skip_value(parser *ps)
{
    ws(ps);
    switch (*ps->p) {
    case '{': return object(ps, NULL, NULL);
    case '[': return array(ps, NULL, NULL);
    case '"': return str(ps, NULL, 0);
    default:
        for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
            if (strncmp(ps->p, lit, strlen(lit)) == 0) {
                ps->p += strlen(lit);
                return DSV4_OK;
            }
        double v;
        return number(ps, &v);
    }
}

/* ---- the report's shape ---- */

typedef struct case_ctx {
    dsv4_baseline *b;
    char name[192];
    entry cur;
} case_ctx;

static int metrics_member(parser *ps, void *vctx, const char *key)
{
    entry *e = vctx;
    double *dst = strcmp(key, "mismatches") == 0 ? &e->mismatches
                  : strcmp(key, "max_ulp") == 0 ? &e->max_ulp
                  : strcmp(key, "worst_ratio") == 0 ? &e->worst_ratio
                  : strcmp(key, "nmse") == 0 ? &e->nmse : NULL;
    return dst ? number(ps, dst) : skip_value(ps);
}

static int policy_member(parser *ps, void *vctx, const char *key)
{
    entry *e = vctx;
    if (strcmp(key, "kind") != 0)
        return skip_value(ps);
    char kind[32];
    if (str(ps, kind, sizeof kind))
        return ps->st->code;
    e->exact = strcmp(kind, "float") != 0;
    return DSV4_OK;
}

static int output_member(parser *ps, void *vctx, const char *key)
{
    entry *e = vctx;
    if (strcmp(key, "name") == 0)
        return str(ps, e->output, sizeof e->output);
    if (strcmp(key, "metrics") == 0)
        return object(ps, metrics_member, e);
    if (strcmp(key, "policy") == 0)
        return object(ps, policy_member, e);
    return skip_value(ps);
}

static int output_elem(parser *ps, void *vctx)
{
    case_ctx *c = vctx;
    entry e;
    memset(&e, 0, sizeof e);
    if (object(ps, output_member, &e))
        return ps->st->code;
    dsv4_baseline *b = c->b;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        entry *ne = realloc(b->e, (size_t)cap * sizeof *ne);
        if (!ne)
            return dsv4_fail(ps->st, DSV4_ERUNTIME, "out of memory");
        b->e = ne;
        b->cap = cap;
    }
    snprintf(e.case_name, sizeof e.case_name, "%s", c->name);
    b->e[b->n++] = e;
    return DSV4_OK;
}

/* "name" comes before "outputs" in the report. */
static int case_member(parser *ps, void *vctx, const char *key)
{
    case_ctx *c = vctx;
    if (strcmp(key, "name") == 0)
        return str(ps, c->name, sizeof c->name);
    if (strcmp(key, "outputs") == 0)
        return array(ps, output_elem, c);
    return skip_value(ps);
}

static int case_elem(parser *ps, void *vctx)
{
    case_ctx c;
    memset(&c, 0, sizeof c);
    c.b = vctx;
    return object(ps, case_member, &c);
}

static int top_member(parser *ps, void *vctx, const char *key)
{
    if (strcmp(key, "cases") == 0)
        return array(ps, case_elem, vctx);
    return skip_value(ps);
}

int dsv4_baseline_parse(const char *text, const char *where, dsv4_baseline **out, dsv4_status *st)
{
    dsv4_baseline *b = calloc(1, sizeof *b);
    if (!b)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    parser ps = {text, text, where, st, 0};
    int rc = object(&ps, top_member, b);
    if (!rc) {
        ws(&ps);
        if (*ps.p)
            rc = perr(&ps, "trailing text");
    }
    if (rc) {
        dsv4_baseline_free(b);
        return rc;
    }
    *out = b;
    return DSV4_OK;
}

/* Room for many suites in one report; a runaway file is refused unread. */
#define BASELINE_MAX_BYTES ((size_t)DSV4_BASELINE_MAX_MIB << 20)

int dsv4_baseline_load(const char *path, dsv4_baseline **out, dsv4_status *st)
{
    char *buf;
    size_t n;
    int rc = dsv4_read_input_file(path, BASELINE_MAX_BYTES, "the --baseline limit", &buf, &n, st);
    if (rc)
        return dsv4_status_prefix(st, "--baseline");
    /* the parser stops at a NUL: one inside the file would end it early */
    const char *nul = memchr(buf, '\0', n);
    rc = nul ? dsv4_fail(st, DSV4_EINPUT, "--baseline %s: not a dsv4check JSON report: a NUL "
                         "byte at byte %ld", path, (long)(nul - buf))
             : dsv4_baseline_parse(buf, path, out, st);
    free(buf);
    return rc;
}

void dsv4_baseline_free(dsv4_baseline *b)
{
    if (!b)
        return;
    free(b->e);
    free(b);
}

int dsv4_baseline_size(const dsv4_baseline *b) { return b->n; }

static const entry *find(const dsv4_baseline *b, const char *case_name, const char *output)
{
    for (int k = 0; k < b->n; k++)
        if (strcmp(b->e[k].case_name, case_name) == 0 && strcmp(b->e[k].output, output) == 0)
            return &b->e[k];
    return NULL;
}

/* One metric; appends to why and returns 1 when it drifted. */
static int grew(const char *metric, double old, double now, double factor, char *why, size_t len)
{
    if (isnan(now) || isnan(old))
        return 0;
    int drift = old == 0 ? now > 0 : now > factor * old;
    if (!drift)
        return 0;
    size_t used = strlen(why);
    if (old == 0)
        snprintf(why + used, len - used, "%s%s 0 -> %.4g", used ? ", " : "", metric, now);
    else
        snprintf(why + used, len - used, "%s%s %.4g -> %.4g (x%.3g > x%g)", used ? ", " : "", metric, old,
                 now, now / old, factor);
    return 1;
}

int dsv4_drift_check(const dsv4_baseline *b, dsv4_case_result *rs, int n, double factor, FILE *f)
{
    int drifting = 0;
    for (int i = 0; i < n; i++) {
        dsv4_case_result *r = &rs[i];
        r->drift[0] = '\0';
        if (r->status != DSV4_OK)
            continue;
        for (int k = 0; k < r->n_outputs; k++) {
            const dsv4_cmp_result *c = &r->outputs[k].cmp;
            const entry *e = find(b, r->name, c->output);
            if (!e)
                continue;
            char why[400] = "";
            int d = 0;
            if (r->outputs[k].pol.kind != DSV4_CMP_FLOAT) {
                d |= grew("mismatches", e->mismatches, (double)c->bad, factor, why, sizeof why);
            } else {
                d |= grew("max_ulp", e->max_ulp, c->max_ulp, factor, why, sizeof why);
                d |= grew("worst_ratio", e->worst_ratio, c->worst_ratio, factor, why, sizeof why);
                d |= grew("nmse", e->nmse, c->nmse, factor, why, sizeof why);
            }
            if (!d)
                continue;
            size_t used = strlen(r->drift);
            snprintf(r->drift + used, sizeof r->drift - used, "%s%s: %s", used ? "; " : "", c->output, why);
        }
        if (r->drift[0]) {
            drifting++;
            if (f)
                fprintf(f, "DRIFT     %s  %s\n", r->name, r->drift);
        }
    }
    return drifting;
}
