/* status.h - the one error convention of dsv4check.
 *
 * Every fallible function returns an int that is also the CLI exit code it
 * maps to (0 ok, 1 tolerance failure, 2 bad input, 3 runtime/device error,
 * 77 skipped) and, on error, fills a dsv4_status with a message that names
 * the file and place.  Library code never calls exit(). */
#ifndef DSV4_STATUS_H
#define DSV4_STATUS_H

#include <stddef.h>

enum {
    DSV4_OK = 0,
    DSV4_EFAIL = 1,    /* a tolerance violation */
    DSV4_EINPUT = 2,   /* bad usage or bad input: YAML, HDF5, shapes, values */
    DSV4_ERUNTIME = 3, /* runtime or device error, out of memory */
    DSV4_ESKIP = 77    /* skipped, e.g. no GPU for --impl hip */
};

typedef struct dsv4_status {
    int code;
    char msg[1024];
} dsv4_status;

/* Record an error (code and printf-style message) and return the code, so
 * that callers can write `return dsv4_fail(st, DSV4_EINPUT, "...")`.
 * A NULL st is allowed.  Never overwrites an earlier, more specific message
 * unless that message is empty. */
int dsv4_fail(dsv4_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the current message with "prefix: " (e.g. the file name), keeping
 * the code.  Returns st->code. */
int dsv4_status_prefix(dsv4_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void dsv4_status_clear(dsv4_status *st);

#endif
