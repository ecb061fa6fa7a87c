/* registry.c - the one op table, and parameter checking against it. */
#define _POSIX_C_SOURCE 200809L
#include "op.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
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

/* ---- schemas (op.h) ---- */

/* One row being read: the cursor and the line, for messages. */
typedef struct schema_line {
    const char *p, *end; /* the rest of the line */
    const char *start;   /* the whole line */
    int number;
    char **text;
    const char *text_end;
} schema_line;

static int line_fail(const schema_line *ln, dsv4_status *st, const char *what)
{
    return dsv4_fail(st, DSV4_ERUNTIME, "line %d: %s: '%.*s'", ln->number, what, (int)(ln->end - ln->start),
                     ln->start);
}

static void skip_blanks(schema_line *ln)
{
    while (ln->p < ln->end && (*ln->p == ' ' || *ln->p == '\t'))
        ln->p++;
}

/* The next blank-separated word: [*w, *w + *n). */
static int next_word(schema_line *ln, const char **w, size_t *n)
{
    skip_blanks(ln);
    *w = ln->p;
    while (ln->p < ln->end && *ln->p != ' ' && *ln->p != '\t')
        ln->p++;
    *n = (size_t)(ln->p - *w);
    return *n > 0;
}

static int word_is(const char *w, size_t n, const char *s) { return strlen(s) == n && strncmp(w, s, n) == 0; }

/* A NUL-terminated copy of [w, w + n) in the text arena. */
static const char *keep(schema_line *ln, const char *w, size_t n, dsv4_status *st)
{
    if ((size_t)(ln->text_end - *ln->text) < n + 1) {
        line_fail(ln, st, "the text arena is full (are the schemas char arrays?)");
        return NULL;
    }
    char *s = *ln->text;
    memcpy(s, w, n);
    s[n] = '\0';
    *ln->text += n + 1;
    return s;
}

/* A row's name: a C identifier short enough for a param or tensor name. */
static const char *row_name(schema_line *ln, dsv4_status *st)
{
    const char *w;
    size_t n;
    if (!next_word(ln, &w, &n)) {
        line_fail(ln, st, "no name");
        return NULL;
    }
    int ok = n < DSV4_NAME_MAX && (isalpha((unsigned char)w[0]) || w[0] == '_');
    for (size_t k = 0; ok && k < n; k++)
        ok = isalnum((unsigned char)w[k]) || w[k] == '_';
    if (!ok) {
        line_fail(ln, st, "a name is a C identifier of at most 47 characters");
        return NULL;
    }
    return keep(ln, w, n, st);
}

/* The rest of the line after blanks: the doc. */
static const char *row_doc(schema_line *ln, dsv4_status *st)
{
    skip_blanks(ln);
    return keep(ln, ln->p, (size_t)(ln->end - ln->p), st);
}

/* DEFAULT: "required" (*def = NULL) or "= VALUE". */
static int row_default(schema_line *ln, const char **def, dsv4_status *st)
{
    const char *w;
    size_t n;
    if (!next_word(ln, &w, &n))
        return line_fail(ln, st, "no default ('= VALUE' or 'required')");
    if (word_is(w, n, "required")) {
        *def = NULL;
        return DSV4_OK;
    }
    if (w[0] != '=')
        return line_fail(ln, st, "the default is '= VALUE' or 'required'");
    ln->p = w + 1;
    skip_blanks(ln);
    const char *v = ln->p;
    char close = *v == '[' ? ']' : *v == '"' ? '"' : 0;
    if (close) {
        const char *e = memchr(v + 1, close, (size_t)(ln->end - v - 1));
        if (!e)
            return line_fail(ln, st, close == ']' ? "no ']' closes the default" : "no '\"' closes the default");
        ln->p = e + 1;
        if (close == '"')
            v++, e--; /* the value inside the quotes */
        n = (size_t)(e + 1 - v);
    } else if (!next_word(ln, &v, &n)) {
        return line_fail(ln, st, "no value after '='");
    }
    if (ln->p < ln->end && *ln->p != ' ' && *ln->p != '\t')
        return line_fail(ln, st, "a blank must follow the default");
    *def = keep(ln, v, n, st);
    return *def ? DSV4_OK : DSV4_ERUNTIME;
}

static int row_ptype(schema_line *ln, dsv4_ptype *t, dsv4_status *st)
{
    static const struct {
        const char *word;
        dsv4_ptype type;
    } types[] = {{"int", DSV4_P_INT}, {"float", DSV4_P_FLOAT}, {"str", DSV4_P_STR}, {"int[]", DSV4_P_INTLIST}};
    const char *w;
    size_t n;
    next_word(ln, &w, &n);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        if (word_is(w, n, types[k].word)) {
            *t = types[k].type;
            return DSV4_OK;
        }
    return line_fail(ln, st, "the type is int, float, str or int[]");
}

static int row_dtype(schema_line *ln, const char *w, size_t n, dsv4_dtype *dt, dsv4_status *st)
{
    char name[32];
    if (n == 0 || n >= sizeof name)
        return line_fail(ln, st, "no dtype");
    memcpy(name, w, n);
    name[n] = '\0';
    if (dsv4_dtype_parse(name, dt) != DSV4_OK)
        return line_fail(ln, st, "not a dtype of data/README.md");
    return DSV4_OK;
}

/* Calls row(ln, k) for each non-blank line of schema, k counting rows, at
 * most cap of them. */
typedef int (*schema_row_fn)(schema_line *ln, void *rows, int k, int outputs, dsv4_status *st);

static int schema_each(const char *schema, schema_row_fn row, void *rows, int cap, int outputs, char **text,
                       const char *text_end, int *count, dsv4_status *st)
{
    schema_line ln = {.text = text, .text_end = text_end};
    int k = 0;
    for (const char *s = schema ? schema : ""; *s;) {
        const char *nl = strchr(s, '\n');
        ln.start = ln.p = s;
        ln.end = nl ? nl : s + strlen(s);
        ln.number++;
        s = nl ? nl + 1 : ln.end;
        skip_blanks(&ln);
        if (ln.p == ln.end)
            continue;
        if (k == cap)
            return line_fail(&ln, st, "more rows than the table holds");
        int rc = row(&ln, rows, k++, outputs, st);
        if (rc)
            return rc;
    }
    *count = k;
    return DSV4_OK;
}

static int param_row(schema_line *ln, void *rows, int k, int outputs, dsv4_status *st)
{
    (void)outputs;
    dsv4_param_spec *r = &((dsv4_param_spec *)rows)[k];
    const char *save = ln->p, *w;
    size_t n;
    next_word(ln, &w, &n);
    r->gen = word_is(w, n, "gen");
    if (!r->gen)
        ln->p = save;
    if (!(r->name = row_name(ln, st)))
        return DSV4_ERUNTIME;
    int rc = row_ptype(ln, &r->type, st);
    if (!rc)
        rc = row_default(ln, &r->def, st);
    if (rc || !(r->doc = row_doc(ln, st)))
        return rc ? rc : DSV4_ERUNTIME;
    for (int j = 0; j < k; j++)
        if (strcmp(((dsv4_param_spec *)rows)[j].name, r->name) == 0)
            return line_fail(ln, st, "the name is declared twice");
    dsv4_param p;
    dsv4_status why = {0};
    if (r->def && dsv4_param_parse(r, r->def, &p, &why) != DSV4_OK)
        return line_fail(ln, st, why.msg);
    return DSV4_OK;
}

static int tensor_row(schema_line *ln, void *rows, int k, int outputs, dsv4_status *st)
{
    dsv4_io_spec *r = &((dsv4_io_spec *)rows)[k];
    if (!(r->name = row_name(ln, st)))
        return DSV4_ERUNTIME;
    const char *w;
    size_t n;
    next_word(ln, &w, &n);
    int rc = row_dtype(ln, w, n, &r->dtype, st);
    if (rc)
        return rc;
    r->golden_dtype = DSV4_DT_NONE;
    const char *save = ln->p;
    next_word(ln, &w, &n);
    if (n > 7 && strncmp(w, "golden=", 7) == 0) {
        if (!outputs)
            return line_fail(ln, st, "golden= is for outputs");
        if ((rc = row_dtype(ln, w + 7, n - 7, &r->golden_dtype, st)))
            return rc;
    } else {
        ln->p = save;
    }
    if (!(r->doc = row_doc(ln, st)))
        return DSV4_ERUNTIME;
    for (int j = 0; j < k; j++)
        if (strcmp(((dsv4_io_spec *)rows)[j].name, r->name) == 0)
            return line_fail(ln, st, "the name is declared twice");
    return DSV4_OK;
}

int dsv4_schema_parse_params(const char *schema, dsv4_param_spec *rows, int cap, char **text,
                             const char *text_end, dsv4_status *st)
{
    int n = 0, rc = schema_each(schema, param_row, rows, cap, 0, text, text_end, &n, st);
    rows[rc ? 0 : n] = (dsv4_param_spec){0};
    return rc;
}

int dsv4_schema_parse_tensors(const char *schema, int outputs, dsv4_io_spec *rows, int cap, char **text,
                              const char *text_end, dsv4_status *st)
{
    int n = 0, rc = schema_each(schema, tensor_row, rows, cap, outputs, text, text_end, &n, st);
    rows[rc ? 0 : n] = (dsv4_io_spec){0};
    return rc;
}

/* One lock for every op's first parse: it happens once per op. */
static pthread_mutex_t schema_lock = PTHREAD_MUTEX_INITIALIZER;

enum { SCHEMA_UNPARSED = 0, SCHEMA_PARSED = 1, SCHEMA_MALFORMED = 2 };

static void parse_op_schemas(const dsv4_op *op, dsv4_op_tables *t)
{
    dsv4_status st = {0};
    char *text = t->text;
    const char *end = t->text + t->text_cap, *table = "params";
    int rc = dsv4_schema_parse_params(op->param_schema, t->params, DSV4_MAX_PARAMS, &text, end, &st);
    if (!rc) {
        table = "inputs";
        rc = dsv4_schema_parse_tensors(op->input_schema, 0, t->inputs, DSV4_MAX_TENSORS, &text, end, &st);
    }
    if (!rc) {
        table = "outputs";
        rc = dsv4_schema_parse_tensors(op->output_schema, 1, t->outputs, DSV4_MAX_TENSORS, &text, end, &st);
    }
    if (rc) {
        snprintf(t->msg, sizeof t->msg, "op %s, %s schema, %s", op->name, table, st.msg);
        t->params[0] = (dsv4_param_spec){0};
        t->inputs[0] = t->outputs[0] = (dsv4_io_spec){0};
    }
    atomic_store_explicit(&t->state, rc ? SCHEMA_MALFORMED : SCHEMA_PARSED, memory_order_release);
}

/* The op's parsed tables, or NULL where it has no parse storage. */
static const dsv4_op_tables *op_tables(const dsv4_op *op)
{
    dsv4_op_tables *t = op->tables;
    if (!t)
        return NULL;
    if (atomic_load_explicit(&t->state, memory_order_acquire) == SCHEMA_UNPARSED) {
        pthread_mutex_lock(&schema_lock);
        if (atomic_load_explicit(&t->state, memory_order_relaxed) == SCHEMA_UNPARSED)
            parse_op_schemas(op, t);
        pthread_mutex_unlock(&schema_lock);
    }
    return t;
}

static const dsv4_param_spec no_params[1];
static const dsv4_io_spec no_tensors[1];

const dsv4_param_spec *dsv4_op_params(const dsv4_op *op)
{
    const dsv4_op_tables *t = op_tables(op);
    return t ? t->params : no_params;
}

const dsv4_io_spec *dsv4_op_inputs(const dsv4_op *op)
{
    const dsv4_op_tables *t = op_tables(op);
    return t ? t->inputs : no_tensors;
}

const dsv4_io_spec *dsv4_op_outputs(const dsv4_op *op)
{
    const dsv4_op_tables *t = op_tables(op);
    return t ? t->outputs : no_tensors;
}

int dsv4_op_check_schemas(const dsv4_op *op, dsv4_status *st)
{
    const dsv4_op_tables *t = op_tables(op);
    if (!t)
        return dsv4_fail(st, DSV4_ERUNTIME, "op %s has no schema storage (define it with DSV4_OP_SCHEMAS)",
                         op->name);
    if (atomic_load_explicit(&t->state, memory_order_acquire) == SCHEMA_MALFORMED)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s", t->msg);
    return DSV4_OK;
}

const dsv4_param_spec *dsv4_op_param(const dsv4_op *op, const char *name)
{
    for (const dsv4_param_spec *p = dsv4_op_params(op); p->name; p++)
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
    return find_io(dsv4_op_outputs(op), name);
}

const dsv4_io_spec *dsv4_op_input(const dsv4_op *op, const char *name)
{
    return find_io(dsv4_op_inputs(op), name);
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
    int rc = dsv4_op_check_schemas(op, st);
    if (rc)
        return dsv4_status_prefix(st, "%s", where);
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
    for (const dsv4_param_spec *spec = dsv4_op_params(op); spec->name; spec++) {
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
