/* api_internal.h - what the two halves of the public C API (api.c: suites,
 * cases, tensors; api_judge.c: judging, verdicts, actuals files) share.
 * Internal to the library: include/dsv4check.h is the public face. */
#ifndef DSV4_API_INTERNAL_H
#define DSV4_API_INTERNAL_H

#include "../include/dsv4check.h"
#include "cases.h"

struct dsv4check_case {
    dsv4_case c;
    int golden_file;       /* loaded from a golden file: judged as `check FILE` */
    char origin[DSV4_PATH_MAX + 32];
};

struct dsv4check_suite {
    char name[64];
    int n;
    dsv4check_case *cases;
};

struct dsv4check_tensors {
    dsv4_tensors ts;
};

/* rc, with st's message (or "" on success) copied into the caller's err. */
int dsv4_api_finish(int rc, const dsv4_status *st, char *err, size_t errlen);

/* The checks of a call that takes a path and returns into out: both given,
 * path shorter than DSV4_PATH_MAX; fn names the call in the message. */
int dsv4_api_path_args(const char *fn, const char *path, const void *out, dsv4_status *st);

/* DSV4_OK for a case of one op; for a layer chain's case, a message that
 * the API does not run chains (their stages go through `dsv4check run`). */
int dsv4_api_single_op(const dsv4check_case *c, dsv4_status *st);

#endif
