/* input_file.h - reading a whole file the user named as input (a suite, an
 * include, a --baseline report).  Only a regular file is read: a FIFO is
 * refused without waiting for a writer, a device (/dev/zero) without reading
 * it, and a file over the caller's byte limit before it is read. */
#ifndef DSV4_INPUT_FILE_H
#define DSV4_INPUT_FILE_H

#include <stddef.h>

#include "../ref/status.h"

/* Reads path into *out (malloc'd, with a NUL after its *len bytes).
 * DSV4_EINPUT with "path: ..." when it cannot be opened, is not a regular
 * file (the message names what it is), or holds more than max_bytes (limit
 * describes that limit in the message, e.g. "the --baseline limit");
 * DSV4_ERUNTIME when out of memory or a read fails. */
int dsv4_read_input_file(const char *path, size_t max_bytes, const char *limit, char **out,
                         size_t *len, dsv4_status *st);

#endif
