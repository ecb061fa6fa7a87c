/* gen.h - `dsv4check gen`: each selected case's golden (its generated
 * inputs and the reference outputs) written through golden.c. */
#ifndef DSV4_GEN_H
#define DSV4_GEN_H

#include <stdint.h>

#include "cases.h"

typedef struct dsv4_gen_opts {
    const char *outdir;   /* -o DIR: DIR/<case file name>.h5; NULL: each case's golden path */
    int force;            /* replace existing files */
    int have_seed;        /* --seed: every case's seed replaced by seed */
    uint64_t seed;
    /* The case selection (--filter, --shard); NULL selects every case. */
    int (*selected)(const void *ctx, const dsv4_case *c);
    const void *select_ctx;
    const char *prog;     /* for messages */
} dsv4_gen_opts;

/* Loads every suite first (a load error writes nothing), refuses two
 * selected cases that would write one file (naming both), removes stale
 * temporary files of killed gen runs from the target folders, then writes
 * the goldens; SIGINT/SIGTERM/SIGHUP remove the one being written.  Reports on
 * stdout/stderr; returns the exit code: 0, 2 (bad input, a file that exists
 * without force), 3 (a write failed). */
int dsv4_gen(const dsv4_gen_opts *o, char *const *suites, int n_suites);

#endif
