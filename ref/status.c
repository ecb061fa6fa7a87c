#define _POSIX_C_SOURCE 200809L
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dsv4_fail(dsv4_status *st, int code, const char *fmt, ...)
{
    if (!st)
        return code;
    if (st->code != DSV4_OK && st->msg[0])
        return st->code; /* keep the first, most specific message */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    st->code = code;
    return code;
}

int dsv4_status_prefix(dsv4_status *st, const char *fmt, ...)
{
    if (!st)
        return DSV4_ERUNTIME;
    char prefix[512], old[sizeof st->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, st->msg, sizeof old);
    snprintf(st->msg, sizeof st->msg, "%s: %s", prefix, old);
    return st->code;
}

void dsv4_status_clear(dsv4_status *st)
{
    if (st) {
        st->code = DSV4_OK;
        st->msg[0] = '\0';
    }
}
