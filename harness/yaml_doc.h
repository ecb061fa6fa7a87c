/* yaml_doc.h - suite files read and parsed by libyaml under limits a
 * mistaken or hostile file cannot get past, and a string set that keeps the
 * duplicate-key check of a mapping linear.
 *
 * libyaml has no limits of its own: 100k nested '[' take it tens of seconds
 * (its scanner walks every open level at each token), and its loader
 * matches each alias and anchor against every earlier anchor.  So before a
 * document is built, libyaml's event stream is read once and refused at the
 * first event past a limit, with that event's file:line:column. */
#ifndef DSV4_YAML_DOC_H
#define DSV4_YAML_DOC_H

#include <stddef.h>
#include <yaml.h>

#include "../ref/status.h"

/* Per file: */
#define DSV4_YAML_MAX_DEPTH 64      /* mappings and sequences nested */
#define DSV4_YAML_MAX_ANCHORS 1024  /* anchors, and aliases */
/* For a suite and all its includes together (README.md "Limits"): */
#define DSV4_YAML_MAX_BYTES (4 << 20)
#define DSV4_YAML_MAX_FILES 256     /* file loads: a file included twice counts twice */
#define DSV4_YAML_MAX_NODES 1000000

/* What is left of those shared limits while a suite loads. */
typedef struct dsv4_yaml_budget {
    size_t bytes_left;
    int files_left;
    size_t nodes_left;
} dsv4_yaml_budget;

void dsv4_yaml_budget_init(dsv4_yaml_budget *b);

/* Reads the regular file path into *text (malloc'd, NUL after *len bytes),
 * taking one file and its bytes from b; errors as dsv4_read_input_file.
 * The caller checks b->files_left first, to name the include that asks. */
int dsv4_yaml_read(const char *path, dsv4_yaml_budget *b, char **text, size_t *len,
                   dsv4_status *st);

/* Parses the len bytes at buf (file names them in messages) into *doc,
 * which must then hold exactly one document with a root node; its nodes
 * are taken from b.  On success the caller owns *doc (yaml_document_delete).
 * DSV4_EINPUT with "file:line:col: ..." for a syntax error, an empty file,
 * a second document or a limit; DSV4_ERUNTIME when out of memory. */
int dsv4_yaml_parse(const char *file, const unsigned char *buf, size_t len, dsv4_yaml_budget *b,
                    yaml_document_t *doc, dsv4_status *st);

/* A set of C strings (not copied: they must outlive the set), sized for
 * the number of strings it will hold. */
typedef struct dsv4_keyset {
    const char **slot;
    size_t mask, count;
    const char *inline_slots[32]; /* small sets need no allocation */
} dsv4_keyset;

/* -1 when out of memory. */
int dsv4_keyset_init(dsv4_keyset *ks, size_t n);
/* 1 when key was added, 0 when it was already there, -1 when the set
 * already holds the n strings it was sized for. */
int dsv4_keyset_add(dsv4_keyset *ks, const char *key);
void dsv4_keyset_free(dsv4_keyset *ks);

#endif
