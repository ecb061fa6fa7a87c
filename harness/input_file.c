/* input_file.c - bounded reads of regular files (see input_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

static int refuse_kind(const char *path, mode_t mode, dsv4_status *st)
{
    return dsv4_fail(st, DSV4_EINPUT, "%s: is %s, not a regular file", path, file_kind(mode));
}

/* Reads fd to its end, at most cap bytes, into buf; *n = bytes read. */
static int read_all(int fd, char *buf, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap) {
        ssize_t got = read(fd, buf + *n, cap - *n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        *n += (size_t)got;
    }
    return 0;
}

int dsv4_read_input_file(const char *path, size_t max_bytes, const char *limit, char **out,
                         size_t *len, dsv4_status *st)
{
    *out = NULL;
    *len = 0;
    /* stat first: a device is refused without opening it (opening some has
     * side effects); fstat on the descriptor then closes the race. */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return refuse_kind(path, sb.st_mode, st);
    /* O_NONBLOCK: if path became a FIFO since stat, open must not wait. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    int rc = DSV4_OK;
    char *buf = NULL;
    size_t n = 0;
    if (fstat(fd, &sb) != 0) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = refuse_kind(path, sb.st_mode, st);
    } else if (sb.st_size < 0 || (unsigned long long)sb.st_size > max_bytes) {
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: %lld bytes, more than %zu (%s)", path,
                       (long long)sb.st_size, max_bytes, limit);
    } else if (!(buf = malloc((size_t)sb.st_size + 2))) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory (%lld bytes)", path,
                       (long long)sb.st_size);
    } else if (read_all(fd, buf, (size_t)sb.st_size + 1, &n) != 0) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "%s: read error: %s", path, strerror(errno));
    } else if (n > (size_t)sb.st_size) { /* it grew after fstat */
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: grew while being read", path);
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return DSV4_OK;
}
