/* yaml_doc.c - bounded YAML parsing and the key set (see yaml_doc.h). */
#define _POSIX_C_SOURCE 200809L
#include "yaml_doc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"

static int syntax_error(const char *file, const yaml_parser_t *p, dsv4_status *st)
{
    if (p->error == YAML_MEMORY_ERROR)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory while parsing", file);
    if (p->error == YAML_READER_ERROR) /* no mark: the reader counts bytes */
        return dsv4_fail(st, DSV4_EINPUT, "%s: invalid input at byte %zu: %s", file,
                         p->problem_offset, p->problem ? p->problem : "?");
    char ctx[160] = "";
    if (p->context)
        snprintf(ctx, sizeof ctx, " (%s at line %zu, column %zu)", p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
    return dsv4_fail(st, DSV4_EINPUT, "%s:%zu:%zu: YAML syntax error: %s%s", file,
                     p->problem_mark.line + 1, p->problem_mark.column + 1,
                     p->problem ? p->problem : "?", ctx);
}

static int fail_mark(const char *file, yaml_mark_t m, const char *what, dsv4_status *st)
{
    return dsv4_fail(st, DSV4_EINPUT, "%s:%zu:%zu: %s", file, m.line + 1, m.column + 1, what);
}

static const yaml_char_t *event_anchor(const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT: return ev->data.scalar.anchor;
    case YAML_SEQUENCE_START_EVENT: return ev->data.sequence_start.anchor;
    case YAML_MAPPING_START_EVENT: return ev->data.mapping_start.anchor;
    default: return NULL;
    }
}

/* What one event adds to the running counts; 1 with a message in msg when
 * that passes a limit. */
typedef struct counts {
    int depth, anchors, aliases;
    size_t *nodes_left;
} counts;

static int count_event(counts *c, const yaml_event_t *ev, char *msg, size_t size)
{
    yaml_event_type_t t = ev->type;
    if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
        if (++c->depth > DSV4_YAML_MAX_DEPTH) {
            snprintf(msg, size, "mappings and sequences nested deeper than %d levels",
                     DSV4_YAML_MAX_DEPTH);
            return 1;
        }
    } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
        c->depth--;
    }
    if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
        if (*c->nodes_left == 0) {
            snprintf(msg, size, "more than %d YAML nodes in the suite and its includes",
                     DSV4_YAML_MAX_NODES);
            return 1;
        }
        --*c->nodes_left;
    }
    if (event_anchor(ev) && ++c->anchors > DSV4_YAML_MAX_ANCHORS) {
        snprintf(msg, size, "more than %d anchors in one file", DSV4_YAML_MAX_ANCHORS);
        return 1;
    }
    if (t == YAML_ALIAS_EVENT && ++c->aliases > DSV4_YAML_MAX_ANCHORS) {
        snprintf(msg, size, "more than %d aliases in one file", DSV4_YAML_MAX_ANCHORS);
        return 1;
    }
    return 0;
}

/* One pass over buf with a parser of its own (libyaml cannot rewind):
 * the parser set up, pass run on it with ctx, the parser freed. */
typedef int (*yaml_pass)(yaml_parser_t *p, const char *file, void *ctx, dsv4_status *st);

static int run_pass(const char *file, const unsigned char *buf, size_t len, yaml_pass pass, void *ctx,
                    dsv4_status *st)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot initialize the YAML parser", file);
    yaml_parser_set_input_string(&p, buf, len);
    int rc = pass(&p, file, ctx, st);
    yaml_parser_delete(&p);
    return rc;
}

/* The event pass (ctx: the size_t count of nodes left): every document of
 * the stream, stopped at the first syntax error or limit. */
static int check_events(yaml_parser_t *p, const char *file, void *ctx, dsv4_status *st)
{
    counts c = {0, 0, 0, ctx};
    int rc = DSV4_OK;
    for (int done = 0; !done && !rc;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev)) {
            rc = syntax_error(file, p, st);
            break;
        }
        char over[128];
        if (count_event(&c, &ev, over, sizeof over))
            rc = fail_mark(file, ev.start_mark, over, st);
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    return rc;
}

/* Builds the document (ctx: the yaml_document_t); the event pass has
 * vouched for its size. */
static int load_document(yaml_parser_t *p, const char *file, void *ctx, dsv4_status *st)
{
    yaml_document_t *doc = ctx, extra;
    if (!yaml_parser_load(p, doc)) /* libyaml frees doc on failure */
        return syntax_error(file, p, st);
    int rc = DSV4_OK;
    const yaml_node_t *more;
    if (!yaml_document_get_root_node(doc)) {
        rc = dsv4_fail(st, DSV4_EINPUT, "%s:1:1: empty file (a suite needs 'suite' and 'cases')",
                       file);
    } else if (!yaml_parser_load(p, &extra)) {
        rc = syntax_error(file, p, st);
    } else {
        if ((more = yaml_document_get_root_node(&extra)))
            rc = fail_mark(file, more->start_mark, "a suite file holds one YAML document", st);
        yaml_document_delete(&extra);
    }
    if (rc)
        yaml_document_delete(doc);
    return rc;
}

void dsv4_yaml_budget_init(dsv4_yaml_budget *b)
{
    *b = (dsv4_yaml_budget){DSV4_YAML_MAX_BYTES, DSV4_YAML_MAX_FILES, DSV4_YAML_MAX_NODES};
}

int dsv4_yaml_read(const char *path, dsv4_yaml_budget *b, char **text, size_t *len,
                   dsv4_status *st)
{
    char limit[128];
    snprintf(limit, sizeof limit, "what is left of the %d bytes a suite and its includes may hold",
             DSV4_YAML_MAX_BYTES);
    int rc = dsv4_read_input_file(path, b->bytes_left, limit, text, len, st);
    if (rc == DSV4_OK) {
        b->bytes_left -= *len;
        b->files_left--;
    }
    return rc;
}

int dsv4_yaml_parse(const char *file, const unsigned char *buf, size_t len, dsv4_yaml_budget *b,
                    yaml_document_t *doc, dsv4_status *st)
{
    int rc = run_pass(file, buf, len, check_events, &b->nodes_left, st);
    return rc ? rc : run_pass(file, buf, len, load_document, doc, st);
}

/* ---- key set: open addressing, FNV-1a ---- */

int dsv4_keyset_init(dsv4_keyset *ks, size_t n)
{
    size_t cap = sizeof ks->inline_slots / sizeof ks->inline_slots[0];
    while (cap < 2 * n) {
        if (cap > SIZE_MAX / 4 / sizeof *ks->slot)
            return -1;
        cap *= 2;
    }
    memset(ks->inline_slots, 0, sizeof ks->inline_slots);
    ks->slot = cap == sizeof ks->inline_slots / sizeof ks->inline_slots[0]
                   ? ks->inline_slots
                   : calloc(cap, sizeof *ks->slot);
    ks->mask = cap - 1;
    ks->count = 0;
    return ks->slot ? 0 : -1;
}

int dsv4_keyset_add(dsv4_keyset *ks, const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    for (size_t i = (size_t)h & ks->mask;; i = (i + 1) & ks->mask) {
        if (!ks->slot[i]) {
            if (2 * (ks->count + 1) > ks->mask + 1)
                return -1;
            ks->slot[i] = key;
            ks->count++;
            return 1;
        }
        if (strcmp(ks->slot[i], key) == 0)
            return 0;
    }
}

void dsv4_keyset_free(dsv4_keyset *ks)
{
    if (ks->slot != ks->inline_slots)
        free(ks->slot);
    ks->slot = NULL;
}
